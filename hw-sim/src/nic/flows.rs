//! A NIC's flows: release by `start` / `after`, message posting order, completion.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use crate::core::time::Time;
use crate::workload::{Flow, FlowResult};

/// One flow on its sending NIC.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FlowSt {
    pub flow: Flow,
    /// Local connection index.
    pub conn: u32,
    pub background: bool,
    /// Bytes posted as work requests.
    pub posted: u64,
    /// Next message index.
    pub next_msg: u64,
    /// Bytes acknowledged (send completions).
    pub acked: u64,
    pub released: Option<Time>,
    pub done: Option<Time>,
    pub failed: bool,
    /// Still waiting for its `after` flow.
    pub waiting: bool,
    /// Released: it joined its connection's queue (the host posts its work requests).
    pub visible: bool,
}

impl FlowSt {
    /// Bytes of message `msg`.
    pub fn msg_len(&self, msg: u64) -> u32 {
        let m = u64::from(self.flow.msg_bytes.max(1));
        let off = msg.saturating_mul(m);
        self.flow.bytes.saturating_sub(off).min(m) as u32
    }

    pub fn result(&self) -> FlowResult {
        FlowResult {
            flow: self.flow,
            background: self.background,
            released: self.released,
            done: self.done,
            acked_bytes: self.acked,
            failed: self.failed,
        }
    }
}

/// Work-request ids: flow index in the high 32 bits, message index in the low 32.
pub(crate) fn wr_id(flow: u32, msg: u64) -> u64 {
    (u64::from(flow) << 32) | (msg & 0xffff_ffff)
}

/// The flow index and message index of a work-request id.
pub(crate) fn wr_parts(wr: u64) -> (u32, u64) {
    ((wr >> 32) as u32, wr & 0xffff_ffff)
}

/// Every flow a NIC sends, and when each is due.
#[derive(Default)]
pub(crate) struct FlowTable {
    pub flows: Vec<FlowSt>,
    /// Flows due at a time (no dependency left), earliest first.
    due: BinaryHeap<Reverse<(Time, u32)>>,
    /// Per connection: released flows not fully posted, in release order.
    pub queues: Vec<VecDeque<u32>>,
    /// Global ids of flows that completed (`true`) or failed (`false`) since the last poll,
    /// with when the host learns it (a completion: when its CQE arrived), in that order.
    finished: VecDeque<(Time, u32, bool)>,
}

impl FlowTable {
    pub fn new(conns: usize) -> FlowTable {
        FlowTable {
            queues: vec![VecDeque::new(); conns],
            ..FlowTable::default()
        }
    }

    /// Adds `flow` on connection `conn`; returns its local index.
    pub fn add(&mut self, flow: Flow, conn: u32, background: bool) -> u32 {
        let i = self.flows.len() as u32;
        let waiting = flow.after.is_some();
        self.flows.push(FlowSt {
            flow,
            conn,
            background,
            posted: 0,
            next_msg: 0,
            acked: 0,
            released: None,
            done: None,
            failed: false,
            waiting,
            visible: false,
        });
        if !waiting {
            self.due.push(Reverse((flow.start, i)));
        }
        i
    }

    /// The flow `i`'s dependency completed at `now`: it becomes due at `max(start, now)`.
    pub fn dependency_done(&mut self, i: u32, now: Time) {
        let Some(f) = self.flows.get_mut(i as usize) else {
            return;
        };
        if !f.waiting || f.failed {
            return;
        }
        f.waiting = false;
        self.due.push(Reverse((f.flow.start.max(now), i)));
    }

    /// The flow `i`'s dependency failed: it fails too (never released).
    pub fn dependency_failed(&mut self, i: u32) {
        let Some(f) = self.flows.get_mut(i as usize) else {
            return;
        };
        if f.failed || f.done.is_some() || f.released.is_some() {
            return;
        }
        f.failed = true;
        f.waiting = false;
        self.finished.push_back((Time::ZERO, f.flow.id, false));
    }

    /// The next flow that finished by `now`.
    pub fn poll_finished(&mut self, now: Time) -> Option<(u32, bool)> {
        if self.has_finished(now) {
            return self.finished.pop_front().map(|f| (f.1, f.2));
        }
        None
    }

    /// Whether [`FlowTable::poll_finished`] at `now` has a flow to return.
    #[inline]
    pub fn has_finished(&self, now: Time) -> bool {
        self.finished.front().is_some_and(|f| f.0 <= now)
    }

    /// When the host learns of the next finished flow.
    pub fn next_finish(&self) -> Option<Time> {
        self.finished.front().map(|f| f.0)
    }

    /// Flow `id` finished (`ok`) and the host learns it at `at` (kept in order: never before
    /// one pushed earlier).
    fn finish(&mut self, at: Time, id: u32, ok: bool) {
        let at = at.max(self.finished.back().map_or(Time::ZERO, |b| b.0));
        self.finished.push_back((at, id, ok));
    }

    /// When the next flow is due.
    pub fn next_due(&self) -> Option<Time> {
        self.due.peek().map(|Reverse((t, _))| *t)
    }

    /// Releases every flow due at or before `now`: the host posts its work requests then (its
    /// FCT counts from here; the NIC sees them after the doorbell and WQE fetch) and it joins
    /// its connection's queue; pushes the connections that got work.
    pub fn release_due(&mut self, now: Time, touched: &mut Vec<u32>) {
        while let Some(Reverse((t, i))) = self.due.peek().copied() {
            if t > now {
                break;
            }
            self.due.pop();
            let Some(f) = self.flows.get_mut(i as usize) else {
                continue;
            };
            if f.failed || f.visible {
                continue;
            }
            if f.released.is_none() {
                f.released = Some(t);
            }
            f.visible = true;
            if let Some(q) = self.queues.get_mut(f.conn as usize) {
                q.push_back(i);
                touched.push(f.conn);
            }
        }
    }

    /// A send completion of flow `i` for `len` bytes at `now` (`ok` = no error).
    pub fn on_completion(&mut self, i: u32, len: u32, ok: bool, now: Time) {
        let Some(f) = self.flows.get_mut(i as usize) else {
            return;
        };
        if f.done.is_some() {
            return;
        }
        if !ok {
            if !f.failed {
                f.failed = true;
                let id = f.flow.id;
                self.finish(now, id, false);
            }
            return;
        }
        f.acked += u64::from(len);
        if f.acked >= f.flow.bytes && !f.failed {
            f.done = Some(now);
            let id = f.flow.id;
            self.finish(now, id, true);
        }
    }
}
