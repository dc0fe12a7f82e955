//! The transmit run: many new packets of one work request in one call, with the effects of as
//! many single-packet polls ([`TxSide::poll`]) but the per-packet checks decided once.

use mrc_abi::device::csr::{CsrEvent, TxStart};
use mrc_abi::wire::{EvxRepr, RethRepr, Segment};
use mrc_abi::Psn;

use super::{Mode, Stall, TxSide, TxSlot};
use crate::datapath::ack_gen::TrimMark;
use crate::datapath::packet::{LocalBuf, Packet, PacketBody};
use crate::datapath::sprayer::{EvPick, Sprayer};
use crate::datapath::stage::events::Events;
use crate::datapath::stage::Hdr;

impl<const WIN: usize, const SQ: usize> TxSide<WIN, SQ> {
    /// New packets of the work requests being sent, into the front of `out`: the packets and
    /// every effect (TX slots, counters, [`TxStart`], the sprayer's picks) of as
    /// many [`Self::poll`] calls, each of which would have sent a new packet. `min_room`: the
    /// event queue room a poll needs (the caller checked it before the first packet; the run
    /// keeps it before each packet).
    ///
    /// The run sends only while a single poll would send a plain new packet. Before its first
    /// packet it returns `(0, Some(stall))` where a poll would fail (not sending, nothing
    /// queued, the congestion or send window closed: counted as the poll counts it), and
    /// `(0, None)`, having changed nothing, where a poll would do something else (a
    /// retransmission queued, the first packet of a Write-with-Immediate: [`Self::poll`]
    /// decides those). It ends before a packet that is not a plain new one (or where a poll
    /// would stall) and after a pick that served a skip-once flag (the caller reports served
    /// skips before the next poll); a work request's last packet is followed by the next work
    /// request's first. `(k, Some(Stall::NoEv))`: `k` packets, then the pick for packet `k`
    /// found no usable EV (counted, as [`Self::poll`] counts it).
    ///
    /// `stall_after`: the caller would poll this QP again right after the run when `out` has
    /// room and the event queue `min_room` (no other QP waits to send). The run then also
    /// ends as that poll would fail, counted as it counts it: `(k, Some(stall))`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn poll_new_run<const E: usize, const P: usize>(
        &mut self,
        now_ns: u64,
        hdr: &Hdr,
        sprayer: &mut Sprayer<E, P>,
        events: &mut Events,
        out: &mut [Packet],
        min_room: usize,
        stall_after: bool,
    ) -> (usize, Option<Stall>) {
        if out.is_empty() {
            return (0, None);
        }
        let mut n = 0;
        loop {
            // (the checks of `poll`, in its order)
            if n == 0 || stall_after {
                if self.mode != Mode::Live
                    || (self.retx.is_empty() && self.send_idx >= self.sq.len())
                {
                    return (n, Some(Stall::Idle));
                }
                if self.inflight_bytes >= self.cwnd_bytes {
                    self.counters.stall_cc += 1;
                    return (n, Some(Stall::Cc));
                }
                if !self.retx.is_empty() {
                    return (n, None);
                }
                if self.send_idx >= self.sq.len() {
                    return (n, Some(Stall::Idle));
                }
                if self.nxt.offset_from(self.una) >= self.mpr_psns {
                    self.counters.stall_window += 1;
                    return (n, Some(Stall::Window));
                }
            }
            let Some(rest) = out.get_mut(n..) else {
                return (n, None);
            };
            let (k, stall, done, skip_served) =
                self.wr_run(now_ns, hdr, sprayer, events, rest, min_room);
            n += k;
            if stall.is_some() {
                return (n, stall);
            }
            if k == 0 || skip_served || n >= out.len() || events.room() < min_room {
                return (n, None);
            }
            // The next work request's first packet, when a poll would send it as a plain new
            // packet (the rest of its checks are `wr_run`'s).
            if !stall_after
                && (!done
                    || self.send_idx >= self.sq.len()
                    || self.inflight_bytes >= self.cwnd_bytes
                    || self.nxt.offset_from(self.una) >= self.mpr_psns)
            {
                return (n, None);
            }
        }
    }

    /// [`Self::poll_new_run`]'s run on the work request being sent (the checks before it
    /// passed): the packets sent, the stall of the attempt after them if it failed, whether
    /// the work request's last packet left, and whether a pick served a skip-once flag (the
    /// run ends after it).
    #[inline(always)]
    fn wr_run<const E: usize, const P: usize>(
        &mut self,
        now_ns: u64,
        hdr: &Hdr,
        sprayer: &mut Sprayer<E, P>,
        events: &mut Events,
        out: &mut [Packet],
        min_room: usize,
    ) -> (usize, Option<Stall>, bool, bool) {
        let cwnd = self.cwnd_bytes;
        let Some(&w) = self.sq.get(self.send_idx) else {
            return (0, None, false, false);
        };
        let used = self.nxt.offset_from(self.una);
        // (`send_idx` holds the work request `nxt` belongs to: `index0 < npkts`)
        let index0 = self.nxt.offset_from(w.start_psn);
        if index0 >= w.npkts || (index0 == 0 && w.wr.imm.is_some()) {
            return (0, None, false, false);
        }
        let mtu = self.mtu;
        // Packet `j` of the run may leave while `inflight + j * mtu < cwnd`: every packet
        // before the work request's last carries `mtu` bytes (`npkts = ceil(len / mtu)`), and
        // the last ends the run.
        let left = w.npkts - index0;
        let mut limit = out
            .len()
            .min(left as usize)
            .min((self.mpr_psns - used) as usize);
        // (a division only when the congestion window is what limits the run)
        let cc_room = cwnd - self.inflight_bytes;
        if cc_room <= (limit as u64 - 1) * u64::from(mtu) {
            limit = cc_room.div_ceil(u64::from(mtu)) as usize;
        }
        // A first packet that reports the start of a burst ([`TxStart`]) leaves the next
        // packet short of event room when the queue had just enough.
        let starts = self.una == self.nxt;
        if starts && events.room() < min_room + 1 {
            limit = 1;
        }
        let psn0 = self.nxt;
        let skips0 = sprayer.counters().skips;
        // Packet `k` of the run has PSN `psn0 + k` and transmission number `tx_seq + 1 + k`.
        // Every packet carries `mtu` bytes and a `Middle` segment with no ACK request but the
        // work request's first and last, fixed after the loop.
        let offset0 = index0.wrapping_mul(mtu);
        // The run's first packet, laid out in its slot before its pick (the slot is scratch
        // when no packet leaves).
        let Some(first) = out.first_mut() else {
            return (0, None, false, false);
        };
        *first = Packet {
            src_qpn: hdr.qpn,
            dest_qpn: hdr.dest_qpn,
            psn: psn0,
            msn: w.msn,
            ev_format: hdr.ev_format,
            evx: EvxRepr {
                ev_index: 0,
                plane: 0,
                ev_value: 0,
            },
            tx_ts_ns: now_ns as u32,
            echo_ts_ns: 0,
            retransmit: false,
            ack_req: false,
            trim: TrimMark::None,
            ce: false,
            payload_len: mtu,
            body: PacketBody::Write {
                segment: Segment::Middle,
                reth: RethRepr {
                    va: w.wr.remote_va.wrapping_add(u64::from(offset0)),
                    rkey: w.wr.rkey,
                    dma_len: mtu,
                },
                local: LocalBuf {
                    handle: w.wr.local.handle,
                    offset: w.wr.local.offset.wrapping_add(u64::from(offset0)),
                },
            },
        };
        // (`mtu <= u16::MAX`: `start` clamps it)
        let (sent_ns, len) = (now_ns as u32, mtu as u16);
        let value_base = hdr.value_base;
        // (packet `k`'s transmission number is its unmasked PSN `psn0 + k` plus `d`)
        let d = self.tx_seq.wrapping_add(1).wrapping_sub(psn0.value());
        let slots = &mut self.slots;
        // Packet `k` on `ev`: the one before (the template for the first) with the fields
        // that differ changed, and its TX slot.
        let put = |out: &mut [Packet], slots: &mut [TxSlot; WIN], k: usize, ev: EvPick| {
            let i = psn0.value().wrapping_add(k as u32);
            let p = match k.checked_sub(1) {
                None => match out.first_mut() {
                    Some(p) => p,
                    None => return,
                },
                Some(j) => match out.get_mut(j..=k) {
                    Some([prev, p]) => {
                        *p = *prev;
                        if let PacketBody::Write { reth, local, .. } = &mut p.body {
                            reth.va = reth.va.wrapping_add(u64::from(mtu));
                            local.offset = local.offset.wrapping_add(u64::from(mtu));
                        }
                        p
                    }
                    _ => return,
                },
            };
            let psn = Psn::new(i);
            p.psn = psn;
            p.evx = EvxRepr {
                ev_index: ev.index,
                plane: ev.plane,
                ev_value: value_base.wrapping_add(u32::from(ev.index)),
            };
            if let Some(s) = slots.get_mut(psn.value() as usize % WIN) {
                s.sent(i.wrapping_add(d), sent_ns, ev, len);
            }
        };
        let limit = limit.min(out.len());
        let mut k = 0usize;
        let mut k_end = limit;
        let mut stall = None;
        while k < k_end {
            // One packet the general way (the run's first, or one whose common pick failed):
            // the general pick may serve a skip-once flag, which ends the run after it.
            let fast = if k == 0 && sprayer.has_usable() {
                sprayer.next_ev_fast()
            } else {
                None
            };
            let ev = match fast {
                Some(ev) => ev,
                None => {
                    let Some(ev) = sprayer.next_ev_slow() else {
                        self.counters.stall_no_ev += 1;
                        stall = Some(Stall::NoEv);
                        break;
                    };
                    if sprayer.counters().skips != skips0 {
                        k_end = k + 1;
                    }
                    ev
                }
            };
            put(out, slots, k, ev);
            k += 1;
            // Then the common picks, which never serve a skip-once flag.
            let Some(run) = out.get_mut(..k_end) else {
                break;
            };
            while k < run.len() {
                let Some(ev) = sprayer.next_ev_fast() else {
                    break;
                };
                put(run, slots, k, ev);
                k += 1;
            }
        }
        if k == 0 {
            return (0, stall, false, false);
        }
        // The work request's last packet, when the run reached it: it asks for an ACK and
        // carries the rest of the message.
        let done = k as u32 == left;
        let mut short = 0;
        if done {
            let last_len =
                w.wr.len
                    .wrapping_sub(w.npkts.wrapping_sub(1).wrapping_mul(mtu))
                    .min(mtu);
            short = mtu - last_len;
            if let Some(p) = out.get_mut(k - 1) {
                p.ack_req = true;
                p.payload_len = last_len;
                if let PacketBody::Write { segment, reth, .. } = &mut p.body {
                    *segment = Segment::Last { imm: w.wr.imm };
                    reth.dma_len = last_len;
                }
            }
            if let Some(s) = self.slot_mut(psn0.add(k as u32 - 1)) {
                s.len = last_len as u16;
            }
        }
        // The work request's first packet (`Only` when it is also its last).
        if index0 == 0 {
            if let Some(PacketBody::Write { segment, .. }) = out.first_mut().map(|p| &mut p.body) {
                *segment = if w.npkts <= 1 {
                    Segment::Only { imm: w.wr.imm }
                } else {
                    Segment::First
                };
            }
        }
        let bytes = k as u64 * u64::from(mtu) - u64::from(short);
        if starts {
            events.push(CsrEvent::TxStart(TxStart::new(hdr.qpn, psn0)));
        }
        self.nxt = psn0.add(k as u32);
        self.tx_seq = self.tx_seq.wrapping_add(k as u32);
        self.counters.data_sent += k as u64;
        self.inflight_bytes = self.inflight_bytes.saturating_add(bytes);
        if k > 0 {
            self.last_sent_ns = now_ns as u32;
        }
        if done {
            self.send_idx += 1;
        }
        // (a served skip flag ends the run: `k_end` stopped after its packet)
        let skip_served = sprayer.counters().skips != skips0;
        (k, stall, done, skip_served)
    }
}
