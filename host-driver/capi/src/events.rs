//! Routing a device's events to their consumers.
//!
//! A device has one event queue; the C API has several consumers: each MRC context's async
//! events (`mrc_get_async_event`: its QPs' and CQs' errors, port and device events), each EV
//! event CQ of a controller (`mrc_ctl_poll_ev_event`), and the endpoint probes a controller
//! waits for (`mrc_ctl_ep_batch_send_wait`). Whoever wants an event pumps the device queue
//! ([`EventHub::pump`]) and takes its own. Every queue is bounded: an overflowing context
//! queue drops its oldest record, an EV event CQ drops new events and reports the exact count
//! in the next one it delivers; both are counted.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use mrc_abi::device::cqe::CqeStatus;
use mrc_abi::device::event::Event;
use mrc_abi::device::EvState;
use mrc_driver::device::Device;

use crate::ctypes::ctl::{ev_state, mrc_ctl_ev, mrc_ctl_ev_event};
use crate::ctypes::verbs::event_type as et;
use crate::error::Result;
use crate::handle::Token;
use crate::state::lock;

/// Async records an MRC context holds before it drops its oldest.
pub const ASYNC_QUEUE_DEPTH: usize = 1024;
/// Device events handled per pump (the rest wait for the next pump).
pub const EVENTS_PER_PUMP: usize = 4096;

/// What an async event is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Element {
    /// A CQ (its token).
    Cq(Token),
    /// A QP (its token).
    Qp(Token),
    /// A port (1-based).
    Port(i32),
    /// The device.
    Device,
}

/// An async event for `mrc_get_async_event`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AsyncRecord {
    /// What it is about.
    pub element: Element,
    /// `enum ibv_event_type`.
    pub event_type: u32,
}

/// Who owns a QP, and the EV profile its EV events report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpRoute {
    /// The MRC context.
    pub ctx: Token,
    /// The QP.
    pub qp: Token,
    /// The EV profile (OCP id) it was given at INIT.
    pub ev_profile: u64,
}

/// A probe's outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeOutcome {
    /// Round-trip time, ns.
    pub rtt_ns: u32,
    /// A reply arrived.
    pub replied: bool,
}

struct ContextQueue {
    ctx: Token,
    queue: VecDeque<AsyncRecord>,
}

struct EvQueue {
    ctx: Token,
    cq: Token,
    capacity: usize,
    queue: VecDeque<mrc_ctl_ev_event>,
    /// Dropped since the last delivered event.
    dropped: u32,
}

/// Counters of the router.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HubCounters {
    /// Device events taken from the queue.
    pub events: u64,
    /// Async records dropped (a context queue overflowed).
    pub async_dropped: u64,
    /// EV events dropped (an EV event CQ was full).
    pub ev_dropped: u64,
    /// Events nobody consumes (an unknown QP or CQ, firmware events, results of probes nobody
    /// waits for).
    pub unrouted: u64,
    /// Malformed event records the driver skipped.
    pub bad_records: u64,
}

#[derive(Default)]
struct Hub {
    qps: HashMap<u32, QpRoute>,
    cqs: HashMap<u32, (Token, Token)>,
    contexts: Vec<ContextQueue>,
    ev_cqs: Vec<EvQueue>,
    probes: HashMap<u32, Option<ProbeOutcome>>,
    counters: HubCounters,
}

/// The router of one device's events.
#[derive(Default)]
pub struct EventHub {
    hub: Mutex<Hub>,
}

/// `enum mrc_ctl_ev_state` of a device EV state.
pub fn ctl_ev_state(s: EvState) -> u32 {
    match s {
        EvState::Good | EvState::Skip => ev_state::MRC_CTL_EV_GOOD,
        EvState::AssumedBad => ev_state::MRC_CTL_EV_ASSUMED_BAD,
        EvState::Denied => ev_state::MRC_CTL_EV_DENIED,
        #[allow(unreachable_patterns)]
        _ => ev_state::MRC_CTL_EV_UNKNOWN,
    }
}

/// `enum ibv_event_type` of a QP's fatal status.
fn qp_event_type(status: u8) -> u32 {
    match CqeStatus::from_u8(status) {
        Some(CqeStatus::RemoteInvalidRequest) => et::IBV_EVENT_QP_REQ_ERR,
        Some(CqeStatus::RemoteAccess | CqeStatus::LocalProtection | CqeStatus::LocalAccess) => {
            et::IBV_EVENT_QP_ACCESS_ERR
        }
        _ => et::IBV_EVENT_QP_FATAL,
    }
}

impl Hub {
    fn push_async(&mut self, ctx: Option<Token>, rec: AsyncRecord) {
        let mut delivered = false;
        for q in &mut self.contexts {
            if ctx.is_some_and(|c| c != q.ctx) {
                continue;
            }
            if q.queue.len() == ASYNC_QUEUE_DEPTH {
                q.queue.pop_front();
                self.counters.async_dropped += 1;
            }
            q.queue.push_back(rec);
            delivered = true;
        }
        if !delivered {
            self.counters.unrouted += 1;
        }
    }

    fn push_ev(&mut self, ev: mrc_ctl_ev_event) {
        if self.ev_cqs.is_empty() {
            self.counters.unrouted += 1;
        }
        for q in &mut self.ev_cqs {
            if q.queue.len() >= q.capacity {
                q.dropped = q.dropped.saturating_add(1);
                self.counters.ev_dropped += 1;
                continue;
            }
            let mut e = ev;
            e.drop_count = std::mem::take(&mut q.dropped);
            q.queue.push_back(e);
        }
    }
}

impl EventHub {
    /// Takes up to [`EVENTS_PER_PUMP`] events from `dev` and routes them. `ev_of(profile,
    /// index)` names the EV at `index` of OCP EV profile `profile`, or `None` for a profile the
    /// controller did not configure (the device's default profile): EV events are reported
    /// for the controller's profiles only.
    ///
    /// # Errors
    /// The device is gone or its queue broke (malformed records are counted and skipped).
    pub fn pump(&self, dev: &Device, ev_of: impl Fn(u64, u16) -> Option<mrc_ctl_ev>) -> Result<()> {
        for _ in 0..EVENTS_PER_PUMP {
            let e = match dev.poll_event() {
                Ok(Some(e)) => e.event,
                Ok(None) => break,
                Err(mrc_driver::Error::BadRecord { .. }) => {
                    lock(&self.hub).counters.bad_records += 1;
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            // The EV is looked up before the hub is locked (it may ask the device).
            let ev_event = match e {
                Event::EvStateChange {
                    qpn, ev_index, new, ..
                } => {
                    let profile = lock(&self.hub).qps.get(&qpn).map(|r| r.ev_profile);
                    profile.and_then(|p| {
                        ev_of(p, ev_index).map(|ev| mrc_ctl_ev_event {
                            profile_id: p,
                            ev,
                            drop_count: 0,
                            state: ctl_ev_state(new),
                        })
                    })
                }
                _ => None,
            };
            let mut h = lock(&self.hub);
            h.counters.events += 1;
            match e {
                Event::QpFatal { qpn, status, .. } => match h.qps.get(&qpn).copied() {
                    Some(r) => h.push_async(
                        Some(r.ctx),
                        AsyncRecord {
                            element: Element::Qp(r.qp),
                            event_type: qp_event_type(status),
                        },
                    ),
                    None => h.counters.unrouted += 1,
                },
                Event::CqError { cqn, .. } => match h.cqs.get(&cqn).copied() {
                    Some((ctx, cq)) => h.push_async(
                        Some(ctx),
                        AsyncRecord {
                            element: Element::Cq(cq),
                            event_type: et::IBV_EVENT_CQ_ERR,
                        },
                    ),
                    None => h.counters.unrouted += 1,
                },
                Event::PortUp { port, .. } => h.push_async(
                    None,
                    AsyncRecord {
                        element: Element::Port(i32::from(port) + 1),
                        event_type: et::IBV_EVENT_PORT_ACTIVE,
                    },
                ),
                Event::PortDown { port, .. } => h.push_async(
                    None,
                    AsyncRecord {
                        element: Element::Port(i32::from(port) + 1),
                        event_type: et::IBV_EVENT_PORT_ERR,
                    },
                ),
                Event::DeviceFatal { .. } => h.push_async(
                    None,
                    AsyncRecord {
                        element: Element::Device,
                        event_type: et::IBV_EVENT_DEVICE_FATAL,
                    },
                ),
                Event::EvStateChange { .. } => match ev_event {
                    Some(ev) => h.push_ev(ev),
                    None => h.counters.unrouted += 1,
                },
                Event::EvProbeResult {
                    probe_id,
                    rtt_ns,
                    replied,
                    ..
                } => match h.probes.get_mut(&probe_id) {
                    Some(slot) => *slot = Some(ProbeOutcome { rtt_ns, replied }),
                    None => h.counters.unrouted += 1,
                },
                _ => h.counters.unrouted += 1,
            }
        }
        Ok(())
    }

    /// Starts routing async events to MRC context `ctx`.
    pub fn add_context(&self, ctx: Token) {
        lock(&self.hub).contexts.push(ContextQueue {
            ctx,
            queue: VecDeque::new(),
        });
    }
    /// Stops routing to `ctx` (its pending records are dropped).
    pub fn remove_context(&self, ctx: Token) {
        lock(&self.hub).contexts.retain(|q| q.ctx != ctx);
    }
    /// The next async record of `ctx`.
    pub fn pop_async(&self, ctx: Token) -> Option<AsyncRecord> {
        lock(&self.hub)
            .contexts
            .iter_mut()
            .find(|q| q.ctx == ctx)
            .and_then(|q| q.queue.pop_front())
    }
    /// Pending async records of `ctx` about `element` (a QP or CQ being destroyed takes its
    /// records out so no later `mrc_get_async_event` names a dead handle).
    pub fn forget_element(&self, ctx: Token, element: Element) {
        if let Some(q) = lock(&self.hub).contexts.iter_mut().find(|q| q.ctx == ctx) {
            q.queue.retain(|r| r.element != element);
        }
    }

    /// Routes QP `qpn`'s events per `route`.
    pub fn add_qp(&self, qpn: u32, route: QpRoute) {
        lock(&self.hub).qps.insert(qpn, route);
    }
    /// Stops routing QP `qpn`.
    pub fn remove_qp(&self, qpn: u32) {
        lock(&self.hub).qps.remove(&qpn);
    }
    /// Routes CQ `cqn`'s errors to `ctx` as CQ `cq`.
    pub fn add_cq(&self, cqn: u32, ctx: Token, cq: Token) {
        lock(&self.hub).cqs.insert(cqn, (ctx, cq));
    }
    /// Stops routing CQ `cqn`.
    pub fn remove_cq(&self, cqn: u32) {
        lock(&self.hub).cqs.remove(&cqn);
    }

    /// Starts delivering EV events to EV event CQ `cq` (of context `ctx`), holding at most
    /// `capacity`.
    pub fn add_ev_cq(&self, ctx: Token, cq: Token, capacity: usize) {
        lock(&self.hub).ev_cqs.push(EvQueue {
            ctx,
            cq,
            capacity,
            queue: VecDeque::new(),
            dropped: 0,
        });
    }
    /// Stops delivering to EV event CQ `cq`.
    pub fn remove_ev_cq(&self, cq: Token) {
        lock(&self.hub).ev_cqs.retain(|q| q.cq != cq);
    }
    /// Takes up to `max` EV events of `cq`.
    pub fn pop_ev(&self, cq: Token, max: usize) -> Vec<mrc_ctl_ev_event> {
        let mut h = lock(&self.hub);
        match h.ev_cqs.iter_mut().find(|q| q.cq == cq) {
            Some(q) => {
                let n = max.min(q.queue.len());
                q.queue.drain(..n).collect()
            }
            None => Vec::new(),
        }
    }
    /// Whether EV event CQ `cq` has an event queued.
    pub fn has_ev(&self, cq: Token) -> bool {
        lock(&self.hub)
            .ev_cqs
            .iter()
            .any(|q| q.cq == cq && !q.queue.is_empty())
    }
    /// EV event CQs of context `ctx`.
    pub fn ev_cqs_of(&self, ctx: Token) -> Vec<Token> {
        lock(&self.hub)
            .ev_cqs
            .iter()
            .filter(|q| q.ctx == ctx)
            .map(|q| q.cq)
            .collect()
    }

    /// Waits for the results of probe `id`.
    pub fn expect_probe(&self, id: u32) {
        lock(&self.hub).probes.insert(id, None);
    }
    /// The result of probe `id`, if it came (and stops waiting for it).
    pub fn take_probe(&self, id: u32) -> Option<ProbeOutcome> {
        let mut h = lock(&self.hub);
        let r = h.probes.get(&id).copied().flatten();
        if r.is_some() {
            h.probes.remove(&id);
        }
        r
    }
    /// Stops waiting for probe `id`.
    pub fn forget_probe(&self, id: u32) {
        lock(&self.hub).probes.remove(&id);
    }

    /// The router's counters.
    pub fn counters(&self) -> HubCounters {
        lock(&self.hub).counters
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(profile: u64) -> mrc_ctl_ev_event {
        mrc_ctl_ev_event {
            profile_id: profile,
            ..Default::default()
        }
    }

    #[test]
    fn full_ev_queue_counts_exact_drops_into_the_next_event() {
        let hub = EventHub::default();
        hub.add_ev_cq(1, 10, 2);
        let mut h = lock(&hub.hub);
        for p in 0..5 {
            h.push_ev(ev(p));
        }
        drop(h);
        let got = hub.pop_ev(10, 8);
        assert_eq!(got.iter().map(|e| e.profile_id).collect::<Vec<_>>(), [0, 1]);
        assert_eq!(got[0].drop_count, 0);
        lock(&hub.hub).push_ev(ev(9));
        let got = hub.pop_ev(10, 8);
        assert_eq!((got[0].profile_id, got[0].drop_count), (9, 3));
        assert_eq!(hub.counters().ev_dropped, 3);
    }

    #[test]
    fn async_records_go_to_their_context_and_ports_to_all() {
        let hub = EventHub::default();
        hub.add_context(1);
        hub.add_context(2);
        let mut h = lock(&hub.hub);
        h.push_async(
            Some(2),
            AsyncRecord {
                element: Element::Qp(7),
                event_type: et::IBV_EVENT_QP_FATAL,
            },
        );
        h.push_async(
            None,
            AsyncRecord {
                element: Element::Port(1),
                event_type: et::IBV_EVENT_PORT_ERR,
            },
        );
        drop(h);
        assert_eq!(hub.pop_async(1).unwrap().element, Element::Port(1));
        assert_eq!(hub.pop_async(1), None);
        assert_eq!(hub.pop_async(2).unwrap().element, Element::Qp(7));
        hub.forget_element(2, Element::Port(1));
        assert_eq!(hub.pop_async(2), None);
    }

    #[test]
    fn overflowing_context_drops_oldest() {
        let hub = EventHub::default();
        hub.add_context(1);
        let mut h = lock(&hub.hub);
        for p in 0..=ASYNC_QUEUE_DEPTH as i32 {
            h.push_async(
                None,
                AsyncRecord {
                    element: Element::Port(p),
                    event_type: et::IBV_EVENT_PORT_ACTIVE,
                },
            );
        }
        drop(h);
        assert_eq!(hub.pop_async(1).unwrap().element, Element::Port(1));
        assert_eq!(hub.counters().async_dropped, 1);
    }
}
