//! A simulated multipath channel between two NICs: fixed latency, seeded loss, duplication,
//! trimming, CE marks, bounded reordering, a silently blackholed EV, a plane outage and a silent
//! outage of every path.
//!
//! Packets wait in a FIFO of `CAP` entries (constant latency keeps it in time order); a
//! reordered packet waits instead in a small side array with extra delay, so it overtakes
//! nothing but is overtaken. Payload bytes travel with the packet when `PB > 0` (up to `PB`
//! bytes each); with `PB == 0` payloads are virtual (lengths only). Everything is bounded and
//! every drop is counted by cause.

use crate::datapath::ack_gen::TrimMark;
use crate::datapath::packet::{Packet, PacketBody};
use crate::engine::rng::{splitmix64, LossGaps, Rng};

/// Side array for reordered packets.
const LATE: usize = 32;

/// Fault and timing model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChannelConfig {
    /// One-way latency.
    pub latency_ns: u64,
    /// Independent loss of any packet, ppm.
    pub loss_ppm: u32,
    /// Duplication, ppm.
    pub dup_ppm: u32,
    /// Trimming of data packets (payload cut, headers delivered), ppm.
    pub trim_ppm: u32,
    /// Share of trims done by the last hop, ppm of trims.
    pub trim_last_hop_ppm: u32,
    /// CE marking of data packets, ppm.
    pub ce_ppm: u32,
    /// Reordering: the packet is delayed by up to `reorder_extra_ns` more, ppm.
    pub reorder_ppm: u32,
    pub reorder_extra_ns: u64,
    /// Every packet on this EV index (either direction) vanishes.
    pub blackhole_ev: Option<u16>,
    /// `(plane, down_at_ns, up_at_ns)`: the plane drops everything in between.
    pub plane_outage: Option<(u8, u64, u64)>,
    /// `(down_at_ns, up_at_ns)`: every path (all EVs, all planes, both directions) silently
    /// drops everything in between; nobody is told (no plane-down event), as when a fabric
    /// link fails under a flow pinned to it and ECMP reconverges much later.
    pub path_outage: Option<(u64, u64)>,
}

impl Default for ChannelConfig {
    fn default() -> Self {
        ChannelConfig {
            latency_ns: 2_000,
            loss_ppm: 0,
            dup_ppm: 0,
            trim_ppm: 0,
            trim_last_hop_ppm: 500_000,
            ce_ppm: 0,
            reorder_ppm: 0,
            reorder_extra_ns: 0,
            blackhole_ev: None,
            plane_outage: None,
            path_outage: None,
        }
    }
}

/// Trim state of a packet in flight (also set on the packet as its trim marks).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Trim {
    #[default]
    None,
    Trimmed,
    LastHop,
}

/// A packet on its way.
#[derive(Clone, Copy, Debug)]
pub struct Flight<const PB: usize> {
    /// Destination NIC (0 or 1).
    pub to: u8,
    /// Delivery time.
    pub at_ns: u64,
    pub pkt: Packet,
    pub trim: Trim,
    pub ce: bool,
    pub payload: [u8; PB],
}

/// A due packet lent out by [`Channel::pop_due_ref`]: a [`Flight`] by reference (two
/// pointers, returned in registers).
#[derive(Clone, Copy, Debug)]
pub struct DueRef<'a, const PB: usize> {
    pub pkt: &'a Packet,
    meta: &'a Meta<PB>,
}

impl<const PB: usize> DueRef<'_, PB> {
    /// Destination NIC (0 or 1).
    pub fn to(&self) -> u8 {
        self.meta.to
    }

    /// Delivery time.
    pub fn at_ns(&self) -> u64 {
        self.meta.at_ns
    }

    pub fn trim(&self) -> Trim {
        self.meta.trim
    }

    pub fn ce(&self) -> bool {
        self.meta.ce
    }

    pub fn payload(&self) -> &[u8; PB] {
        &self.meta.payload
    }

    /// The packet as an owned [`Flight`].
    pub fn to_flight(&self) -> Flight<PB> {
        let m = self.meta;
        Flight {
            to: m.to,
            at_ns: m.at_ns,
            pkt: *self.pkt,
            trim: m.trim,
            ce: m.ce,
            payload: m.payload,
        }
    }
}

/// What a FIFO slot holds beside its packet.
#[derive(Clone, Copy, Debug)]
struct Meta<const PB: usize> {
    to: u8,
    at_ns: u64,
    trim: Trim,
    ce: bool,
    /// How many slots from this one on hold packets with this `Meta` (a packet sent alone: 1;
    /// the first slot of a [`Channel::send_batch_with`] batch: the batch), so
    /// [`Channel::pop_due_run`] steps over them at once. (In the padding after the flags:
    /// no room added.)
    run: u32,
    payload: [u8; PB],
}

impl<const PB: usize> Meta<PB> {
    /// Filler for the FIFO's empty slots.
    const FILL: Meta<PB> = Meta {
        to: 0,
        at_ns: 0,
        trim: Trim::None,
        ce: false,
        run: 0,
        payload: [0; PB],
    };
}

/// Channel counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChannelCounters {
    pub sent: u64,
    pub delivered: u64,
    pub lost: u64,
    pub duplicated: u64,
    pub trimmed: u64,
    pub reordered: u64,
    pub ce_marked: u64,
    pub blackholed: u64,
    /// Dropped by the plane outage or the all-path outage.
    pub plane_dropped: u64,
    /// The FIFO was full: dropped.
    pub overflow: u64,
}

/// The channel: a FIFO of `CAP` packets plus the reorder side array.
pub struct Channel<const CAP: usize, const PB: usize> {
    cfg: ChannelConfig,
    rng: Rng,
    /// Slots `head..head + len` (wrapping) hold packets; the others hold a filler. Packets
    /// and the rest apart, so free packet slots form a slice ([`Channel::send_batch_with`]).
    pkts: [Packet; CAP],
    /// The `Meta` of a run of packets (`Meta::run`) is in its first slot only (the others'
    /// are stale): the head slot always starts a run ([`Channel::pop_head`] moves a run's
    /// `Meta` on when it pops one of its packets).
    meta: [Meta<PB>; CAP],
    head: usize,
    len: usize,
    late: [Option<(Packet, Meta<PB>)>; LATE],
    late_len: usize,
    /// A reordered packet just popped, lent out by [`Channel::pop_due_ref`].
    popped_late: Option<(Packet, Meta<PB>)>,
    /// The independent losses at `cfg.loss_ppm`, drawn per gap (their own generator, so
    /// the other faults' draws do not depend on them).
    loss: LossGaps,
    /// Only loss and latency are configured (no blackhole, outage, trim, CE, duplication or
    /// reordering): [`Channel::send`] and [`Channel::pop_due_ref`] take their short paths.
    simple: bool,
    counters: ChannelCounters,
}

impl<const CAP: usize, const PB: usize> Channel<CAP, PB> {
    /// An empty channel.
    pub fn new(cfg: ChannelConfig, seed: u64) -> Self {
        let simple = cfg.blackhole_ev.is_none()
            && cfg.plane_outage.is_none()
            && cfg.path_outage.is_none()
            && cfg.trim_ppm == 0
            && cfg.ce_ppm == 0
            && cfg.dup_ppm == 0
            && cfg.reorder_ppm == 0;
        Channel {
            simple,
            loss: LossGaps::new(cfg.loss_ppm, splitmix64(seed)),
            cfg,
            rng: Rng::new(seed),
            pkts: [Packet::FILL; CAP],
            meta: [Meta::FILL; CAP],
            head: 0,
            len: 0,
            late: [None; LATE],
            late_len: 0,
            popped_late: None,
            counters: ChannelCounters::default(),
        }
    }

    /// Counters.
    pub fn counters(&self) -> ChannelCounters {
        self.counters
    }

    /// The configuration.
    pub fn config(&self) -> &ChannelConfig {
        &self.cfg
    }

    /// Packets in flight.
    pub fn in_flight(&self) -> usize {
        self.len + self.late_len
    }

    /// Whether a packet is in flight on `plane`.
    pub fn in_flight_on_plane(&self, plane: u8) -> bool {
        let on = |p: &Packet| p.evx.plane == plane;
        let (a, b) = (self.head, self.head + self.len);
        let fifo = |r: core::ops::Range<usize>| self.pkts.get(r).is_some_and(|s| s.iter().any(on));
        fifo(a..b.min(CAP))
            || fifo(0..b.saturating_sub(CAP))
            || self.late.iter().flatten().any(|(p, _)| on(p))
    }

    /// Replace the plane outage (e.g. to move it; the channel takes its general paths from
    /// then on).
    pub fn set_plane_outage(&mut self, outage: Option<(u8, u64, u64)>) {
        self.cfg.plane_outage = outage;
        self.simple &= outage.is_none();
    }

    fn plane_dead(&self, plane: u8, now_ns: u64) -> bool {
        matches!(self.cfg.plane_outage, Some((p, down, up)) if p == plane && now_ns >= down && now_ns < up)
            || matches!(self.cfg.path_outage, Some((down, up)) if now_ns >= down && now_ns < up)
    }

    fn chance(&mut self, ppm: u32) -> bool {
        ppm != 0 && self.rng.chance_ppm(ppm)
    }

    /// Whether the next packet is lost (independently, at `loss_ppm`).
    #[inline]
    fn lost(&mut self) -> bool {
        self.loss.lost()
    }

    /// Send `pkt` to NIC `to` at `now_ns`; `payload` holds its bytes when `PB > 0`.
    #[inline]
    pub fn send(&mut self, now_ns: u64, to: u8, pkt: Packet, payload: &[u8]) {
        self.counters.sent += 1;
        if self.simple {
            // The general path below with every check but loss switched off (the same random
            // draws, so the same run).
            if self.lost() {
                self.counters.lost += 1;
                return;
            }
            let at_ns = now_ns.saturating_add(self.cfg.latency_ns);
            self.push_fifo(to, at_ns, &pkt, Trim::None, false, payload);
            return;
        }
        if self.cfg.blackhole_ev == Some(pkt.evx.ev_index) {
            self.counters.blackholed += 1;
            return;
        }
        if self.plane_dead(pkt.evx.plane, now_ns) {
            self.counters.plane_dropped += 1;
            return;
        }
        if self.lost() {
            self.counters.lost += 1;
            return;
        }
        let is_data = pkt.dma_len() > 0 || matches!(pkt.body, PacketBody::Write { .. });
        let (mut trim, mut ce) = (Trim::None, false);
        if is_data {
            if self.chance(self.cfg.trim_ppm) {
                self.counters.trimmed += 1;
                trim = if self.rng.chance_ppm(self.cfg.trim_last_hop_ppm) {
                    Trim::LastHop
                } else {
                    Trim::Trimmed
                };
            }
            if self.chance(self.cfg.ce_ppm) {
                self.counters.ce_marked += 1;
                ce = true;
            }
        }
        let dup = self.chance(self.cfg.dup_ppm);
        let at_ns = now_ns.saturating_add(self.cfg.latency_ns);
        self.enqueue(to, at_ns, &pkt, trim, ce, payload);
        if dup {
            self.counters.duplicated += 1;
            self.enqueue(to, at_ns, &pkt, trim, ce, payload);
        }
    }

    /// A packet in flight, built where it is stored.
    /// [`Self::send`] of the packet `fill` writes, built in place in the FIFO slot it will
    /// occupy (no copy): `fill` returns whether it wrote one; returns the same.
    #[inline]
    pub fn send_with(
        &mut self,
        now_ns: u64,
        to: u8,
        fill: impl FnOnce(&mut Packet) -> bool,
    ) -> bool {
        let i = self.head + self.len;
        let i = if i >= CAP { i - CAP } else { i };
        let slot = match self.pkts.get_mut(i) {
            Some(f) if self.simple && PB == 0 && self.len < CAP => f,
            _ => {
                let mut p = Packet::FILL;
                if !fill(&mut p) {
                    return false;
                }
                self.send(now_ns, to, p, &[]);
                return true;
            }
        };
        if !fill(slot) {
            return false;
        }
        // `send` on the short path: the same counters and random draw.
        self.counters.sent += 1;
        if self.lost() {
            self.counters.lost += 1;
            return true;
        }
        if let Some(f) = self.meta.get_mut(i) {
            f.to = to;
            f.at_ns = now_ns.saturating_add(self.cfg.latency_ns);
            f.run = 1;
            f.trim = Trim::None;
            f.ce = false;
            self.len += 1;
        }
        true
    }

    /// [`Self::send_with`] for several packets: `fill` writes up to `slots.len()` packets
    /// into the front of `slots` (free FIFO slots, built in place) and returns how many; each
    /// then goes through [`Self::send`] in order (the same counters and random draws as one
    /// `send` per packet). Returns how many `fill` wrote. `fill` is given at least one slot.
    #[inline]
    pub fn send_batch_with(
        &mut self,
        now_ns: u64,
        to: u8,
        fill: impl FnOnce(&mut [Packet]) -> usize,
    ) -> usize {
        let i = self.head + self.len;
        let i = if i >= CAP { i - CAP } else { i };
        // The free slots from `i` up to the FIFO's end or its head, whichever comes first.
        let room = (CAP - self.len).min(CAP - i);
        if !(self.simple && PB == 0) || room == 0 {
            return self.send_batch_general(now_ns, to, fill);
        }
        // (`room <= CAP - i`: only the check `i <= CAP` is left)
        let Some(slots) = self.pkts.get_mut(i..).and_then(|s| s.get_mut(..room)) else {
            return 0;
        };
        let n = fill(slots).min(room);
        if n == 0 {
            return 0;
        }
        let at_ns = now_ns.saturating_add(self.cfg.latency_ns);
        self.counters.sent += n as u64;
        // Keep the packets not lost, in order, in consecutive slots from `start` on: from
        // slot `i` on, packets moving down behind each loss; or, for the one loss of a batch
        // sent into an empty FIFO, from slot `i + 1` on when fewer packets come before the
        // loss than after it, those packets moving up (the FIFO then starts there). (On the
        // short path every slot's trim mark and CE flag stay clear: only `to` and `at_ns` are
        // written.) The losses are drawn in order, as `n` sends draw them.
        let end = i + n;
        let (start, w, lost) = match self.loss.first_lost_of(n) {
            None => (i, end, 0),
            Some(j) => {
                let after = self.loss.first_lost_of(n - j - 1);
                if after.is_none() && self.len == 0 && j < n - 1 - j {
                    self.pkts.copy_within(i..i + j, i + 1);
                    self.head = i + 1;
                    (i + 1, end, 1)
                } else {
                    let (w, lost) = self.compact_after(i + j, i + j + 1, end, after);
                    (i, w, lost + 1)
                }
            }
        };
        self.counters.lost += lost;
        // One `Meta` for the batch, in its first slot.
        if let Some(f) = self.meta.get_mut(start).filter(|_| w > start) {
            f.to = to;
            f.at_ns = at_ns;
            // < CAP
            f.run = (w - start) as u32;
        }
        self.len += w - start;
        n
    }

    /// [`Self::send_batch_with`]'s compaction behind the losses: the kept packets of slots
    /// `k..end` move down to slot `w` on; `next` is the offset from `k` of the next loss
    /// (already drawn), the losses after it are drawn as they come. Returns the end of the
    /// kept packets and the losses from `next`'s on.
    #[inline]
    fn compact_after(
        &mut self,
        mut w: usize,
        mut k: usize,
        end: usize,
        mut next: Option<usize>,
    ) -> (usize, u64) {
        let mut lost = 0;
        while k < end {
            let keep = next.unwrap_or(end - k);
            if w != k {
                self.pkts.copy_within(k..k + keep, w);
            }
            w += keep;
            k += keep;
            if k < end {
                lost += 1;
                k += 1;
                next = self.loss.first_lost_of(end - k);
            }
        }
        (w, lost)
    }

    /// [`Self::send_batch_with`] off the short path: through a local buffer and
    /// [`Self::send`].
    #[inline(never)]
    fn send_batch_general(
        &mut self,
        now_ns: u64,
        to: u8,
        fill: impl FnOnce(&mut [Packet]) -> usize,
    ) -> usize {
        let mut buf = [Packet::FILL; 16];
        let n = fill(&mut buf).min(buf.len());
        for p in buf.iter().take(n) {
            self.send(now_ns, to, *p, &[]);
        }
        n
    }

    #[inline]
    fn flight(
        to: u8,
        at_ns: u64,
        pkt: &Packet,
        trim: Trim,
        ce: bool,
        payload: &[u8],
    ) -> Flight<PB> {
        // The switches' marks go on the packet itself (trim marks, payload cut, ECN CE).
        let mut pkt = *pkt;
        pkt.trim_to(match trim {
            Trim::None => TrimMark::None,
            Trim::Trimmed => TrimMark::Trimmed,
            Trim::LastHop => TrimMark::TrimmedLastHop,
        });
        pkt.ce |= ce;
        let mut f = Flight {
            to,
            at_ns,
            pkt,
            trim,
            ce,
            payload: [0; PB],
        };
        if PB > 0 {
            let n = payload.len().min(PB);
            if let (Some(dst), Some(src)) = (f.payload.get_mut(..n), payload.get(..n)) {
                dst.copy_from_slice(src);
            }
        }
        f
    }

    #[inline]
    fn enqueue(
        &mut self,
        to: u8,
        mut at_ns: u64,
        pkt: &Packet,
        trim: Trim,
        ce: bool,
        payload: &[u8],
    ) {
        if self.late_len < LATE && self.chance(self.cfg.reorder_ppm) {
            at_ns = at_ns.saturating_add(1 + self.rng.below(self.cfg.reorder_extra_ns.max(1)));
            if let Some(slot) = self.late.iter_mut().find(|s| s.is_none()) {
                let f = Self::flight(to, at_ns, pkt, trim, ce, payload);
                *slot = Some((
                    f.pkt,
                    Meta {
                        to,
                        at_ns,
                        trim,
                        ce,
                        run: 1,
                        payload: f.payload,
                    },
                ));
                self.late_len += 1;
                self.counters.reordered += 1;
                return;
            }
        }
        self.push_fifo(to, at_ns, pkt, trim, ce, payload);
    }

    #[inline]
    fn push_fifo(
        &mut self,
        to: u8,
        at_ns: u64,
        pkt: &Packet,
        trim: Trim,
        ce: bool,
        payload: &[u8],
    ) {
        if self.len >= CAP {
            self.counters.overflow += 1;
            return;
        }
        let i = self.head + self.len;
        let i = if i >= CAP { i - CAP } else { i };
        if let (Some(p), Some(m)) = (self.pkts.get_mut(i), self.meta.get_mut(i)) {
            let f = Self::flight(to, at_ns, pkt, trim, ce, payload);
            *p = f.pkt;
            *m = Meta {
                to,
                at_ns,
                trim,
                ce,
                run: 1,
                payload: f.payload,
            };
            self.len += 1;
        }
    }

    /// The earliest delivery time.
    #[inline]
    pub fn next_due(&self) -> Option<u64> {
        let fifo = self.meta.get(self.head).map(|f| f.at_ns);
        let fifo = if self.len > 0 { fifo } else { None };
        if self.late_len == 0 {
            // (no reordered packet waits: the FIFO head alone)
            return fifo;
        }
        self.next_due_late(fifo)
    }

    /// [`Self::next_due`] with reordered packets waiting: the earlier of `fifo` (the FIFO
    /// head's time) and theirs.
    #[inline(never)]
    fn next_due_late(&self, fifo: Option<u64>) -> Option<u64> {
        let late = self.late.iter().flatten().map(|f| f.1.at_ns).min();
        match (fifo, late) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The next packet due at `now_ns` (packets on a plane that died meanwhile are dropped).
    pub fn pop_due(&mut self, now_ns: u64) -> Option<Flight<PB>> {
        self.pop_due_ref(now_ns).map(|d| d.to_flight())
    }

    /// [`Self::pop_due`] without copying the packet out: the reference is valid until the
    /// channel is next used.
    #[inline]
    pub fn pop_due_ref(&mut self, now_ns: u64) -> Option<DueRef<'_, PB>> {
        if self.simple
            || (self.late_len == 0
                && self.cfg.plane_outage.is_none()
                && self.cfg.path_outage.is_none())
        {
            // Fast path: only the FIFO head can be due, and no plane drops it.
            if self.len == 0 {
                return None;
            }
            if self.meta.get(self.head)?.at_ns > now_ns {
                return None;
            }
            let head = self.pop_head();
            self.counters.delivered += 1;
            return self.slot_ref(head);
        }
        self.pop_due_general(now_ns)
    }

    /// Only loss and latency are configured (the short paths): [`Self::pop_due_run`] then
    /// says `None` only when no packet is due ([`Self::pop_due_ref`] would say `None` too).
    #[inline]
    pub fn is_simple(&self) -> bool {
        self.simple
    }

    /// On the short path (only loss and latency configured, so no packet is trimmed or
    /// CE-marked): the packets due at `now_ns` from the FIFO head on that go to the same NIC
    /// and sit in consecutive slots, popped at once, with that NIC. `None` when nothing is
    /// due or off the short path (then [`Self::pop_due_ref`]). The same packets in the same
    /// order as that many `pop_due_ref` calls.
    #[inline]
    pub fn pop_due_run(&mut self, now_ns: u64) -> Option<(u8, &[Packet])> {
        if !self.simple || self.len == 0 {
            return None;
        }
        let head = self.head;
        let first = self.meta.get(head)?;
        if first.at_ns > now_ns {
            return None;
        }
        let to = first.to;
        let end = (head + self.len).min(CAP);
        // A run at a time (`Meta::run`; a run ends within the live slots: packets leave from
        // the head only).
        let mut k = head;
        while let Some(m) = self.meta.get(k).filter(|_| k < end) {
            if m.at_ns > now_ns || m.to != to {
                break;
            }
            k += (m.run as usize).clamp(1, end - k);
        }
        let n = k - head;
        self.head = if head + n >= CAP { 0 } else { head + n };
        self.len -= n;
        self.counters.delivered += n as u64;
        Some((to, self.pkts.get(head..head + n)?))
    }

    /// [`Self::pop_due_ref`] with reordered packets or outages.
    #[inline(never)]
    fn pop_due_general(&mut self, now_ns: u64) -> Option<DueRef<'_, PB>> {
        let outage = self.cfg.plane_outage.is_some() || self.cfg.path_outage.is_some();
        loop {
            let (late, i) = self.pop_due_raw(now_ns)?;
            if outage {
                let plane = if late {
                    self.popped_late.as_ref().map(|f| f.0.evx.plane)
                } else {
                    self.pkts.get(i).map(|p| p.evx.plane)
                };
                if plane.is_some_and(|p| self.plane_dead(p, now_ns)) {
                    self.counters.plane_dropped += 1;
                    continue;
                }
            }
            self.counters.delivered += 1;
            return if late {
                self.popped_late
                    .as_ref()
                    .map(|(pkt, meta)| DueRef { pkt, meta })
            } else {
                self.slot_ref(i)
            };
        }
    }

    /// FIFO slot `i` as a [`DueRef`].
    #[inline]
    fn slot_ref(&self, i: usize) -> Option<DueRef<'_, PB>> {
        Some(DueRef {
            pkt: self.pkts.get(i)?,
            meta: self.meta.get(i)?,
        })
    }

    /// Where the next due packet is: `(true, _)` moved to `popped_late`, `(false, i)` left in
    /// FIFO slot `i` (now outside the live range; overwritten by a later `enqueue`).
    #[inline]
    fn pop_due_raw(&mut self, now_ns: u64) -> Option<(bool, usize)> {
        if self.late_len > 0 {
            for s in self.late.iter_mut() {
                if s.is_some_and(|f| f.1.at_ns <= now_ns) {
                    self.late_len -= 1;
                    self.popped_late = s.take();
                    return Some((true, 0));
                }
            }
        }
        if self.len == 0 {
            return None;
        }
        if self.meta.get(self.head)?.at_ns <= now_ns {
            return Some((false, self.pop_head()));
        }
        None
    }

    /// Take the head slot out of the live range (`len > 0`) and return it. When it starts a
    /// run of more than one packet, the run's `Meta` moves to the next slot, the new head
    /// (runs never wrap).
    #[inline]
    fn pop_head(&mut self) -> usize {
        let head = self.head;
        let next = if head + 1 >= CAP { 0 } else { head + 1 };
        if let Some(&m) = self.meta.get(head).filter(|m| m.run > 1) {
            if let Some(n) = self.meta.get_mut(next) {
                *n = Meta {
                    run: m.run - 1,
                    ..m
                };
            }
        }
        self.head = next;
        self.len -= 1;
        head
    }
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;
    use mrc_abi::Psn;
    use std::vec::Vec;

    /// `(to, psn)` of each packet as `pop_due_run` hands them over (`runs`) or as
    /// `pop_due_ref` does one at a time.
    fn drain(ch: &mut Channel<64, 0>, now: u64, runs: bool, got: &mut Vec<(u8, u32)>) {
        loop {
            let mut run_none = false;
            if runs {
                if let Some((to, pkts)) = ch.pop_due_run(now) {
                    got.extend(pkts.iter().map(|p| (to, p.psn.value())));
                    continue;
                }
                run_none = true;
            }
            let simple = ch.is_simple();
            let Some(f) = ch.pop_due_ref(now) else {
                return;
            };
            // (on the short path no run means nothing due)
            assert!(!(run_none && simple), "a due packet left out of the runs");
            got.push((f.to(), f.pkt.psn.value()));
        }
    }

    /// Batches (some with losses), single packets, both destinations, pops that stop inside
    /// a batch and the FIFO's wrap: `pop_due_run` gives the packets `pop_due_ref` gives (and,
    /// on this short-path channel, `None` only when nothing is due).
    #[test]
    fn due_runs_are_the_packets_popped_one_by_one() {
        let cfg = ChannelConfig {
            loss_ppm: 100_000,
            latency_ns: 12,
            ..ChannelConfig::default()
        };
        let (mut runs, mut single) = (Channel::<64, 0>::new(cfg, 7), Channel::new(cfg, 7));
        let (mut got_runs, mut got_single) = (Vec::new(), Vec::new());
        let mut psn = 0u32;
        for step in 0..400u64 {
            let now = step * 4;
            let to = (step % 3 == 0) as u8;
            for ch in [&mut runs, &mut single] {
                let mut p = psn;
                if step % 5 == 4 {
                    ch.send_with(now, to, |slot| {
                        slot.psn = Psn::new(p);
                        true
                    });
                } else {
                    ch.send_batch_with(now, to, |slots| {
                        let n = slots.len().min(1 + (step % 7) as usize);
                        for s in slots.iter_mut().take(n) {
                            s.psn = Psn::new(p);
                            p += 1;
                        }
                        n
                    });
                }
            }
            psn += 8;
            // Now and then one packet the single way first: the run then starts inside a batch.
            if step % 4 == 1 {
                if let Some(f) = runs.pop_due_ref(now) {
                    got_runs.push((f.to(), f.pkt.psn.value()));
                }
            }
            drain(&mut runs, now, true, &mut got_runs);
            drain(&mut single, now, false, &mut got_single);
        }
        assert!(got_single.len() > 800, "{}", got_single.len());
        assert_eq!(got_runs, got_single);
        assert_eq!(runs.counters(), single.counters());
    }

    /// A batch delivers what as many single sends deliver (the same losses, the rest in
    /// order), whichever way its compaction goes: into an empty FIFO (drained every step)
    /// and behind packets still in flight (every third step leaves them).
    #[test]
    fn batches_deliver_what_single_sends_deliver() {
        let cfg = ChannelConfig {
            loss_ppm: 150_000,
            latency_ns: 10,
            ..ChannelConfig::default()
        };
        let (mut batch, mut single) = (Channel::<64, 0>::new(cfg, 11), Channel::new(cfg, 11));
        let (mut got_batch, mut got_single) = (Vec::new(), Vec::new());
        let mut psn = 0u32;
        for step in 0..600u64 {
            let now = step * 4;
            let to = (step % 2) as u8;
            let n = 1 + (step % 13) as usize;
            // (a batch at a time: the free slots end at the FIFO's end)
            let mut sent = 0;
            while sent < n {
                let first = psn + sent as u32;
                sent += batch.send_batch_with(now, to, |slots| {
                    let k = slots.len().min(n - sent);
                    for (j, s) in slots.iter_mut().take(k).enumerate() {
                        s.psn = Psn::new(first + j as u32);
                    }
                    k
                });
            }
            let first = psn;
            for k in 0..n as u32 {
                let mut p = Packet::FILL;
                p.psn = Psn::new(first + k);
                single.send(now, to, p, &[]);
            }
            psn += n as u32;
            let at = if step % 3 == 2 { now } else { now + 10 };
            drain(&mut batch, at, true, &mut got_batch);
            drain(&mut single, at, false, &mut got_single);
        }
        assert!(got_single.len() > 2_000, "{}", got_single.len());
        assert_eq!(got_batch, got_single);
        assert_eq!(batch.counters(), single.counters());
    }
}
