//! The datapath's RTL blocks, clocked: each packet's time through the EV sprayer, the header
//! builder and the receive PSN tracker, and each DP->FW entry's through the CSR event queue,
//! in the datapath clock domain, with every block's latency and initiation interval from
//! `mrc_abi::device::datapath_timing` (the table the RTL co-simulation measures the RTL
//! against).
//!
//! # Model
//! A block accepts an input at the first clock edge at or after the input is ready and the
//! block is free, holds it for its interval (the header builder: one clock per 64-byte beat of
//! the packet's headers) and has its (last) output valid `latency + beats - 1` clocks after
//! accepting it; the next block takes it from that edge. An input that finds its block busy
//! waits (back-pressure, counted in clocks). Times are computed when the NIC handles a packet,
//! not clocked cycle by cycle: one event at most per packet that must wait (below).
//! - **Transmit**: a packet the stage emits at `t` passes the sprayer (an EV decision: data,
//!   retransmissions, ACKs and NACKs; probes travel on the EV firmware names) and the header
//!   builder (every packet). A data packet's payload read starts when its headers are out; a
//!   packet without a read (control packets, or no host interface time) waits here and reaches
//!   its port at that time.
//! - **Receive**: a data packet passes the PSN tracker and reaches the stage at the tracker's
//!   output; ACKs, NACKs and probes go to the stage at once (no RTL block of the table handles
//!   them).
//!   A packet its stage refuses (back-pressure from the firmware's CSR ring) waits at the
//!   head of the port's RX FIFO with those behind it ([`RX_FIFO_PKTS`]) until reports move on;
//!   a control packet arriving meanwhile queues behind them.
//! - **DP->FW entries**: the stage's reports pass the CSR event queue, one per clock.
//!
//! Not modelled: the firmware's EV table writes into the sprayer's command stream (they share
//! it with the decisions in the RTL), the payload read merging into the header stream, and the
//! datapath's other per-packet work that has no RTL block yet (ACK application, placement).

use std::collections::VecDeque;

use mrc_abi::device::datapath_timing::{
    BlockTiming, CSR_EVENT_QUEUE, DATAPATH_CLOCK_HZ, EV_SPRAYER, HDR_BUILDER, RX_PSN_TRACKER,
};
use mrc_firmware::datapath::packet::PacketBody;

use super::report::BlockReport;
use super::{ev, wire, Nic, StagePacket};
use crate::core::clock::ClockDomain;
use crate::core::sim::{ComponentId, Scheduler};
use crate::core::time::Time;
use crate::fabric::Fabric;

/// One block's clock bookkeeping.
#[derive(Clone, Copy, Debug)]
struct BlockClock {
    t: BlockTiming,
    /// First edge at which it can accept its next input.
    free: u64,
    /// Clocks it held inputs.
    busy: u64,
    /// Clocks inputs waited for it.
    backpressure: u64,
}

impl BlockClock {
    const fn new(t: BlockTiming) -> Self {
        BlockClock {
            t,
            free: 0,
            busy: 0,
            backpressure: 0,
        }
    }

    /// An input of `len` output bytes ready at edge `ready`: the edge of its last output.
    fn pass(&mut self, ready: u64, len: u32) -> u64 {
        let start = ready.max(self.free);
        let hold = u64::from(self.t.interval(len));
        self.backpressure += start - ready;
        self.free = start + hold;
        self.busy += hold;
        start + u64::from(self.t.last_output(len))
    }

    /// `n` one-output inputs all ready at edge `ready`, taken in order: the edge of the last
    /// one's output.
    fn pass_all(&mut self, ready: u64, n: u64) -> u64 {
        let start = ready.max(self.free);
        let hold = u64::from(self.t.ii_cycles);
        // Input i waits (start - ready) + i * hold clocks.
        self.backpressure += n * (start - ready) + hold * (n * n.saturating_sub(1) / 2);
        self.free = start + n * hold;
        self.busy += n * hold;
        start + (n - 1) * hold + u64::from(self.t.latency_cycles)
    }

    fn report(&self, run_cycles: u64) -> BlockReport {
        BlockReport {
            block: self.t.block,
            occupancy: if run_cycles == 0 {
                0.0
            } else {
                (self.busy as f64 / run_cycles as f64).min(1.0)
            },
            backpressure_cycles: self.backpressure,
        }
    }
}

/// A NIC's datapath blocks in their clock domain, and the packets waiting for their outputs.
pub(crate) struct DpClock {
    clock: ClockDomain,
    sprayer: BlockClock,
    hdr: BlockClock,
    rx: BlockClock,
    csr: BlockClock,
    /// Per shard: DP->FW entries already through the CSR queue.
    csr_seen: Vec<u64>,
    /// Packets out of the transmit blocks that go to their port at their time: (time, shard,
    /// packet), times non-decreasing.
    tx_wait: VecDeque<(Time, usize, StagePacket)>,
    /// Their link bytes.
    tx_wait_bytes: u64,
    /// Data deliveries on their way through the PSN tracker: (time, shard, QPN, packet),
    /// times non-decreasing.
    rx_wait: VecDeque<(Time, usize, u32, StagePacket)>,
    /// The oldest of `rx_wait` was refused by its stage (event buffer full, reports with
    /// nowhere to go): the deliveries wait, in order, until reports move on.
    pub(super) rx_blocked: bool,
    armed: Option<Time>,
}

/// Deliveries the port holds behind one its stage refused (the port's RX FIFO: 256 full-size
/// packets, 1 MiB); one more is dropped (`rx_refused`).
pub(super) const RX_FIFO_PKTS: usize = 256;

impl DpClock {
    /// The blocks of a NIC, idle at time zero; `csr_seen[k]`: the DP->FW entries shard `k`
    /// made before (they pass no CSR queue).
    pub(crate) fn new(csr_seen: Vec<u64>) -> DpClock {
        DpClock {
            clock: ClockDomain::from_hz(DATAPATH_CLOCK_HZ)
                .expect("the datapath clock is between 1 Hz and 1 THz"),
            sprayer: BlockClock::new(EV_SPRAYER),
            hdr: BlockClock::new(HDR_BUILDER),
            rx: BlockClock::new(RX_PSN_TRACKER),
            csr: BlockClock::new(CSR_EVENT_QUEUE),
            csr_seen,
            tx_wait: VecDeque::new(),
            tx_wait_bytes: 0,
            rx_wait: VecDeque::new(),
            rx_blocked: false,
            armed: None,
        }
    }

    /// A packet the stage emitted at `now` through the sprayer and the header builder: when
    /// its headers are out.
    pub(crate) fn transmit(&mut self, now: Time, tx: &StagePacket) -> Time {
        let mut c = self.clock.time_to_cycles_ceil(now);
        if !matches!(tx.body, PacketBody::Probe(_) | PacketBody::ProbeReply(_)) {
            c = self.sprayer.pass(c, 0);
        }
        c = self.hdr.pass(c, wire::header_bytes(tx));
        self.clock.edge(c)
    }

    /// A data delivery at `now` through the PSN tracker: when the stage gets it (`None`: the
    /// packet is no data packet and goes to the stage at once).
    pub(crate) fn receive(&mut self, now: Time, p: &StagePacket) -> Option<Time> {
        if !matches!(p.body, PacketBody::Write { .. }) {
            return None;
        }
        let c = self.rx.pass(self.clock.time_to_cycles_ceil(now), 0);
        Some(self.clock.edge(c))
    }

    /// `n` DP->FW entries a stage made by `now` pass the CSR event queue: when the last of
    /// them is at the queue's consumer (`now` when `n` is 0).
    pub(crate) fn csr_push(&mut self, now: Time, n: u64) -> Time {
        if n == 0 {
            return now;
        }
        let c = self.csr.pass_all(self.clock.time_to_cycles_ceil(now), n);
        self.clock.edge(c)
    }

    /// Shard `k`'s engine has taken `moved` DP->FW entries in all (firmware in zero time):
    /// the new ones pass the CSR event queue ([`DpClock::csr_push`]).
    pub(crate) fn csr_moved(&mut self, now: Time, k: usize, moved: u64) -> Time {
        let Some(seen) = self.csr_seen.get_mut(k) else {
            return now;
        };
        let n = moved.saturating_sub(*seen);
        *seen = moved.max(*seen);
        self.csr_push(now, n)
    }

    /// Link bytes of the packets waiting to reach their ports.
    pub(crate) fn tx_waiting_bytes(&self) -> u64 {
        self.tx_wait_bytes
    }

    /// The blocks in pipeline order over a run of `end`.
    pub(crate) fn report(&self, end: Time) -> Vec<BlockReport> {
        let cycles = self.clock.time_to_cycles_floor(end);
        [self.sprayer, self.hdr, self.rx, self.csr]
            .iter()
            .map(|b| b.report(cycles))
            .collect()
    }

    /// When the oldest delivery in the RX FIFO is due at its stage (`None` while the FIFO is
    /// blocked).
    fn rx_due(&self) -> Option<Time> {
        self.rx_wait
            .front()
            .filter(|_| !self.rx_blocked)
            .map(|w| w.0)
    }

    pub(super) fn next_due(&self) -> Option<Time> {
        crate::core::time::earliest(self.tx_wait.front().map(|w| w.0), self.rx_due())
    }
}

impl Nic {
    /// Shard `k`'s packet `tx`, whose headers are out at `at`, goes to its port then.
    pub(super) fn hold_tx(
        &mut self,
        at: Time,
        k: usize,
        tx: StagePacket,
        s: &mut Scheduler<'_>,
        me: ComponentId,
    ) {
        self.dp.tx_wait_bytes += u64::from(wire::wire_bytes(&tx));
        self.dp.tx_wait.push_back((at, k, tx));
        self.arm_datapath(s, me);
    }

    /// Delivery `p` for QP `qpn` of shard `k` reaches the stage at `at`, in order behind those
    /// the port's RX FIFO holds (dropped and counted when it is full and held up).
    pub(super) fn hold_rx(
        &mut self,
        at: Time,
        k: usize,
        qpn: u32,
        p: StagePacket,
        s: &mut Scheduler<'_>,
        me: ComponentId,
    ) {
        if self.dp.rx_blocked && self.dp.rx_wait.len() >= RX_FIFO_PKTS {
            self.counters.rx_refused += 1;
            return;
        }
        self.dp.rx_wait.push_back((at, k, qpn, p));
        self.arm_datapath(s, me);
    }

    pub(super) fn arm_datapath(&mut self, s: &mut Scheduler<'_>, me: ComponentId) {
        let Some(t) = self.dp.next_due() else {
            return;
        };
        // (deliveries held behind a refused one are due when it was refused)
        let t = t.max(s.now());
        if self.dp.armed.is_none_or(|a| a > t)
            && s.at(t, me, ev::DATAPATH, u64::from(self.host)).is_ok()
        {
            self.dp.armed = Some(t);
        }
    }

    /// [`ev::DATAPATH`] at `now`: the packets whose block outputs are due go on (to their
    /// ports, to the stages), in time order.
    pub fn on_datapath(
        &mut self,
        now: Time,
        fab: &mut Fabric,
        s: &mut Scheduler<'_>,
        me: ComponentId,
    ) {
        if self.dp.armed.is_some_and(|a| a <= now) {
            self.dp.armed = None;
        }
        loop {
            let tx_t = self.dp.tx_wait.front().map(|w| w.0).filter(|t| *t <= now);
            let rx_t = self.dp.rx_due().filter(|t| *t <= now);
            match (tx_t, rx_t) {
                (Some(a), b) if b.is_none_or(|b| a <= b) => {
                    if let Some((_, k, tx)) = self.dp.tx_wait.pop_front() {
                        self.dp.tx_wait_bytes = self
                            .dp
                            .tx_wait_bytes
                            .saturating_sub(u64::from(wire::wire_bytes(&tx)));
                        self.send(k, tx, fab, s);
                    }
                }
                (_, Some(_)) => {
                    let Some(&(_, k, qpn, p)) = self.dp.rx_wait.front() else {
                        break;
                    };
                    if self.enter_stage(now, k, qpn, &p, s, me).is_none() {
                        // Back-pressure: it and those behind it wait for reports to move.
                        self.dp.rx_blocked = true;
                        continue;
                    }
                    self.dp.rx_wait.pop_front();
                }
                _ => break,
            }
        }
        self.arm_datapath(s, me);
        self.service(now, fab, s, me);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_block_makes_inputs_wait() {
        let mut b = BlockClock::new(HDR_BUILDER);
        // 94-byte headers: 2 beats, last beat 2 clocks after accept, next accept 2 later.
        assert_eq!(b.pass(10, 94), 12);
        assert_eq!(b.pass(10, 94), 14);
        assert_eq!(b.backpressure, 2);
        assert_eq!(b.busy, 4);
        // Idle again: no wait.
        assert_eq!(b.pass(100, 206), 104);
        assert_eq!(b.backpressure, 2);
    }

    #[test]
    fn entries_at_once_queue_one_per_clock() {
        let mut q = BlockClock::new(CSR_EVENT_QUEUE);
        // Four entries at edge 5: accepted at 5, 6, 7, 8; the last at the consumer at 9.
        assert_eq!(q.pass_all(5, 4), 9);
        assert_eq!(q.backpressure, 1 + 2 + 3);
        assert_eq!(q.busy, 4);
        // Two more at 6 wait for 9.
        assert_eq!(q.pass_all(6, 2), 11);
        assert_eq!(q.backpressure, 6 + 3 + 4);
    }

    fn data() -> StagePacket {
        use mrc_abi::wire::{RethRepr, Segment};
        use mrc_firmware::datapath::packet::LocalBuf;
        StagePacket {
            body: PacketBody::Write {
                segment: Segment::Only { imm: None },
                reth: RethRepr::default(),
                local: LocalBuf::default(),
            },
            payload_len: 4096,
            ..StagePacket::FILL
        }
    }

    #[test]
    fn only_new_entries_pass_the_csr_queue() {
        let clock = ClockDomain::from_hz(DATAPATH_CLOCK_HZ).unwrap();
        let now = clock.edge(10);
        // Shard 0 made 3 entries at setup; 7 in all now: 4 pass, the last out at 10 + 3 + 1.
        let mut d = DpClock::new(vec![3, 0]);
        assert_eq!(d.csr_moved(now, 0, 7), clock.edge(14));
        assert_eq!(d.csr.busy, 4);
        // Nothing new: nothing passes.
        assert_eq!(d.csr_moved(now, 0, 7), now);
        assert_eq!(d.csr.busy, 4);
        // No such shard.
        assert_eq!(d.csr_moved(now, 5, 9), now);
        assert_eq!(d.csr.busy, 4);
    }

    #[test]
    fn transmit_and_receive_times_are_block_outputs() {
        let mut d = DpClock::new(vec![0]);
        let clock = ClockDomain::from_hz(DATAPATH_CLOCK_HZ).unwrap();
        let now = Time::from_ns(100);
        let c0 = clock.time_to_cycles_ceil(now);
        // A data packet: the sprayer (1 clock), then its headers' last beat.
        let p = data();
        let hdr = wire::header_bytes(&p);
        assert!(HDR_BUILDER.beats(hdr) >= 2);
        let t = d.transmit(now, &p);
        assert_eq!(
            t,
            clock.edge(c0 + 1 + u64::from(HDR_BUILDER.last_output(hdr)))
        );
        // A probe skips the sprayer but waits for the header builder, busy with the first.
        let probe = StagePacket::FILL;
        let t2 = d.transmit(now, &probe);
        let accept = c0 + 1 + u64::from(HDR_BUILDER.interval(hdr));
        let probe_hdr = wire::header_bytes(&probe);
        assert_eq!(
            t2,
            clock.edge(accept + u64::from(HDR_BUILDER.last_output(probe_hdr)))
        );
        assert_eq!(d.hdr.backpressure, accept - c0);
        // A data delivery passes the tracker; a probe goes to the stage at once.
        assert_eq!(d.receive(now, &p), Some(clock.edge(c0 + 1)));
        assert_eq!(d.receive(now, &probe), None);
        let r = d.report(Time::from_us(1));
        let cycles = clock.time_to_cycles_floor(Time::from_us(1)) as f64;
        let names: Vec<_> = r.iter().map(|b| b.block).collect();
        assert_eq!(
            names,
            [
                "ev_sprayer",
                "hdr_builder",
                "rx_psn_tracker",
                "csr_event_queue"
            ]
        );
        assert_eq!(r[0].occupancy, 1.0 / cycles);
        assert_eq!(
            r[1].occupancy,
            f64::from(HDR_BUILDER.interval(hdr) + HDR_BUILDER.interval(probe_hdr)) / cycles
        );
        assert_eq!(r[2].occupancy, 1.0 / cycles);
        assert_eq!(r[3].occupancy, 0.0);
    }
}
