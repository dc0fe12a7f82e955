//! The transmit run: many new packets of one work request in one call, with the effects of as
//! many single-packet polls ([`TxSide::poll`]) but the per-packet checks decided once.

use mrc_abi::device::csr::{self, CsrEvent, TxDone, TxStart, EV_ANY};
use mrc_abi::wire::{EvxRepr, RethRepr, Segment};

use super::{Mode, Stall, TxSide, TxSlot, F_INFLIGHT};
use crate::datapath::ack_gen::TrimMark;
use crate::datapath::packet::{LocalBuf, Packet, PacketBody};
use crate::datapath::sprayer::Sprayer;
use crate::datapath::stage::events::Events;
use crate::datapath::stage::Hdr;

impl<const WIN: usize, const SQ: usize> TxSide<WIN, SQ> {
    /// New packets of the work request being sent, into the front of `out`: the packets and
    /// every effect (TX slots, counters, [`TxStart`], [`TxDone`], the sprayer's picks) of as
    /// many [`Self::poll`] calls, each of which would have sent a new packet.
    ///
    /// The run sends only while a single poll would send a plain new packet: it returns
    /// `(0, None)` having changed nothing when the first packet is not one (not sending, a
    /// retransmission queued, the congestion or send window closed, nothing queued, the
    /// first packet of a Write-with-Immediate: [`Self::poll`] decides those), and it ends
    /// before a packet that is not one, after the work request's last packet and after a pick
    /// that served a skip-once flag (the caller reports served skips before the next poll).
    /// `(k, Some(Stall::NoEv))`: `k` packets, then the pick for packet `k` found no usable EV
    /// (counted, as [`Self::poll`] counts it).
    ///
    /// Room for two events (a [`TxStart`] and a [`TxDone`]) is the caller's to check.
    pub(crate) fn poll_new_run<const E: usize, const P: usize>(
        &mut self,
        now_ns: u64,
        hdr: &Hdr,
        sprayer: &mut Sprayer<E, P>,
        events: &mut Events,
        out: &mut [Packet],
    ) -> (usize, Option<Stall>) {
        if self.mode != Mode::Live || !self.retx.is_empty() || out.is_empty() {
            return (0, None);
        }
        let cwnd = self.cwnd_bytes;
        if self.inflight_bytes >= cwnd {
            return (0, None);
        }
        let Some(&w) = self.sq.get(self.send_idx) else {
            return (0, None);
        };
        let used = self.nxt.offset_from(self.una);
        if used >= self.mpr_psns {
            return (0, None);
        }
        // (`send_idx` holds the work request `nxt` belongs to: `index0 < npkts`)
        let index0 = self.nxt.offset_from(w.start_psn);
        if index0 >= w.npkts || (index0 == 0 && w.wr.imm.is_some()) {
            return (0, None);
        }
        let mtu = self.mtu;
        // Packet `j` of the run may leave while `inflight + j * mtu < cwnd`: every packet
        // before the work request's last carries `mtu` bytes (`npkts = ceil(len / mtu)`), and
        // the last ends the run.
        let by_cc = (cwnd - self.inflight_bytes).div_ceil(u64::from(mtu));
        let left = w.npkts - index0;
        let limit = (out.len() as u64)
            .min(u64::from(left))
            .min(u64::from(self.mpr_psns - used))
            .min(by_cc) as usize;
        let psn0 = self.nxt;
        let skips0 = sprayer.counters().skips;
        let mut k = 0usize;
        let mut stall = None;
        let mut bytes = 0u64;
        let mut done = false;
        while k < limit {
            let Some(ev) = sprayer.next_ev() else {
                self.counters.stall_no_ev += 1;
                stall = Some(Stall::NoEv);
                break;
            };
            // (the offsets of a posted work request do not overflow: it passed
            // `packet_count` with this `mtu`)
            let index = index0 + k as u32;
            let offset = index.wrapping_mul(mtu);
            let last = index + 1 >= w.npkts;
            let payload_len = w.wr.len.wrapping_sub(offset).min(mtu);
            let segment = if w.npkts <= 1 {
                Segment::Only { imm: w.wr.imm }
            } else if index == 0 {
                Segment::First
            } else if last {
                Segment::Last { imm: w.wr.imm }
            } else {
                Segment::Middle
            };
            let psn = psn0.add(k as u32);
            if let Some(p) = out.get_mut(k) {
                *p = Packet {
                    src_qpn: hdr.qpn,
                    dest_qpn: hdr.dest_qpn,
                    psn,
                    msn: w.msn,
                    ev_format: hdr.ev_format,
                    evx: EvxRepr {
                        ev_index: ev.index,
                        plane: ev.plane,
                        ev_value: hdr.value_base.wrapping_add(u32::from(ev.index)),
                    },
                    tx_ts_ns: now_ns as u32,
                    echo_ts_ns: 0,
                    retransmit: false,
                    ack_req: last,
                    trim: TrimMark::None,
                    ce: false,
                    payload_len,
                    body: PacketBody::Write {
                        segment,
                        reth: RethRepr {
                            va: w.wr.remote_va.wrapping_add(u64::from(offset)),
                            rkey: w.wr.rkey,
                            dma_len: payload_len,
                        },
                        local: LocalBuf {
                            handle: w.wr.local.handle,
                            offset: w.wr.local.offset.wrapping_add(u64::from(offset)),
                        },
                    },
                };
            }
            let tx_seq = self.tx_seq.wrapping_add(k as u32 + 1);
            // (`payload_len <= mtu <= u16::MAX`)
            let len = payload_len as u16;
            if let Some(s) = self.slot_mut(psn) {
                *s = TxSlot {
                    tx_seq,
                    sent_ns: now_ns as u32,
                    ev: ev.index,
                    len,
                    retx_ev: EV_ANY,
                    plane: ev.plane,
                    flags: F_INFLIGHT,
                };
            }
            bytes += u64::from(len);
            k += 1;
            if last {
                done = true;
                break;
            }
            if sprayer.counters().skips != skips0 {
                break;
            }
        }
        if k == 0 {
            return (0, stall);
        }
        if self.una == psn0 {
            events.push(CsrEvent::TxStart(TxStart::new(hdr.qpn, psn0)));
        }
        self.nxt = psn0.add(k as u32);
        self.tx_seq = self.tx_seq.wrapping_add(k as u32);
        self.counters.data_sent += k as u64;
        self.inflight_bytes = self.inflight_bytes.saturating_add(bytes);
        if done {
            self.send_idx += 1;
            let mut flags = 0;
            if w.wr.signaled {
                flags |= csr::TXD_SIGNALED;
            }
            if w.wr.imm.is_some() {
                flags |= csr::TXD_IMM;
            }
            let end = w.start_psn.add(w.npkts);
            events.push(CsrEvent::TxDone(TxDone::new(
                hdr.qpn, w.wr.wr_id, end, flags,
            )));
        }
        (k, stall)
    }
}
