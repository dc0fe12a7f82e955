//! Completion channels and completion queues.

use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mrc_abi::device::admin::body::CreateCq;
use mrc_abi::device::cqe::{Cqe, CqeError, CqeOpcode, CqeStatus, CQE_OWNER, CQE_SOLICITED};
use mrc_abi::device::QPN_LIMIT;

use crate::device::Device;
use crate::error::{Error, Result};
use crate::queue::{CqRing, QpTrack};

/// An interrupt vector completions can be reported on, with its fd for epoll.
#[derive(Debug)]
pub struct CompletionChannel {
    dev: Arc<Device>,
    vector: u32,
}

impl CompletionChannel {
    pub(crate) fn new(dev: &Arc<Device>) -> Result<CompletionChannel> {
        dev.check()?;
        Ok(CompletionChannel {
            dev: dev.clone(),
            vector: dev.alloc_vector(),
        })
    }
    /// The interrupt vector.
    pub fn vector(&self) -> u32 {
        self.vector
    }
    /// The eventfd to add to an epoll set; readable when an armed CQ of this channel got a
    /// completion. Read it (or call [`CompletionChannel::wait`]) to acknowledge.
    ///
    /// # Errors
    /// [`Error::DeviceGone`], no such vector.
    pub fn fd(&self) -> Result<BorrowedFd<'_>> {
        self.dev.check()?;
        Ok(self.dev.backend().interrupt_fd(self.vector)?)
    }
    /// Waits up to `timeout` for a completion event; true if one came (and acknowledges it).
    ///
    /// # Errors
    /// [`Error::DeviceGone`] (checked after the wait), the wait failed.
    pub fn wait(&self, timeout: Duration) -> Result<bool> {
        Ok(self.dev.wait_interrupt(self.vector, timeout)? > 0)
    }
}

/// One completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkCompletion {
    /// The work request's id.
    pub wr_id: u64,
    /// Status.
    pub status: CqeStatus,
    /// What completed.
    pub opcode: CqeOpcode,
    /// Bytes transferred.
    pub byte_len: u32,
    /// Immediate data of a received Write-with-Immediate.
    pub imm: Option<u32>,
    /// Local QP.
    pub qpn: u32,
    /// The sender set the solicited bit.
    pub solicited: bool,
    /// Error detail.
    pub syndrome: u32,
}

impl Default for WorkCompletion {
    fn default() -> Self {
        WorkCompletion {
            wr_id: 0,
            status: CqeStatus::Success,
            opcode: CqeOpcode::Write,
            byte_len: 0,
            imm: None,
            qpn: 0,
            solicited: false,
            syndrome: 0,
        }
    }
}

/// The QPs completing on a CQ, shared between the CQ and its QPs (which attach and detach
/// themselves through `&CompletionQueue`). The poller keeps its own copy and refreshes it,
/// under the lock, only when `generation` moved: polling takes no lock in the steady state.
#[derive(Debug, Default)]
pub(crate) struct CqShared {
    pub tracks: Mutex<Vec<Arc<QpTrack>>>,
    /// Bumped under the `tracks` lock on every attach and detach.
    pub generation: AtomicU64,
}

impl CqShared {
    pub fn attach(&self, t: &Arc<QpTrack>) {
        let mut v = self.tracks.lock().unwrap_or_else(|p| p.into_inner());
        v.push(t.clone());
        self.generation.fetch_add(1, Ordering::Release);
    }
    pub fn detach(&self, qpn: u32) {
        let mut v = self.tracks.lock().unwrap_or_else(|p| p.into_inner());
        v.retain(|t| t.qpn != qpn);
        self.generation.fetch_add(1, Ordering::Release);
    }
}

/// QPs whose trackers the poller's copy holds without reallocating.
const TRACKS_RESERVED: usize = 64;

/// The poller's copy of [`CqShared::tracks`].
#[derive(Debug)]
struct TrackCache {
    tracks: Vec<Arc<QpTrack>>,
    /// The generation copied (`u64::MAX`: never).
    generation: u64,
    /// Index of the last QP found (most CQs serve one QP, or a few in bursts).
    last: usize,
}

impl TrackCache {
    fn new() -> TrackCache {
        TrackCache {
            tracks: Vec::with_capacity(TRACKS_RESERVED),
            generation: u64::MAX,
            last: 0,
        }
    }
    /// Copies the shared list if it changed (no allocation up to [`TRACKS_RESERVED`] QPs).
    #[inline]
    fn refresh(&mut self, shared: &CqShared) {
        if shared.generation.load(Ordering::Acquire) == self.generation {
            return;
        }
        let v = shared.tracks.lock().unwrap_or_else(|p| p.into_inner());
        self.generation = shared.generation.load(Ordering::Acquire);
        self.tracks.clear();
        self.tracks.extend(v.iter().cloned());
        self.last = 0;
    }
    /// The tracker of QP `qpn`; a miss refreshes once (a QP attached since the poll began).
    #[inline]
    fn find(&mut self, shared: &CqShared, qpn: u32) -> Option<&QpTrack> {
        if self.tracks.get(self.last).is_none_or(|t| t.qpn != qpn) {
            let at = match self.tracks.iter().position(|t| t.qpn == qpn) {
                Some(at) => at,
                None => {
                    self.refresh(shared);
                    self.tracks.iter().position(|t| t.qpn == qpn)?
                }
            };
            self.last = at;
        }
        self.tracks.get(self.last).map(|t| &**t)
    }
}

/// [`Cqe::decode`] inlined into the poll loop (the abi's function is not inlined across crates,
/// and reading its result back costs more than the checks): the same checks, `None` where it
/// returns an error. Debug builds compare the two on every entry.
#[inline(always)]
fn decode(c: &Cqe) -> Option<(WorkCompletion, u16)> {
    let status = CqeStatus::ALL.get(usize::from(c.status)).copied();
    let opcode = match c.opcode {
        1 => Some(CqeOpcode::Write),
        2 => Some(CqeOpcode::WriteImm),
        3 => Some(CqeOpcode::RecvWriteImm),
        _ => None,
    };
    let (qpn, imm) = (c.qpn.get(), c.imm.get());
    let is_recv = opcode == Some(CqeOpcode::RecvWriteImm);
    let ok = qpn < QPN_LIMIT
        && c.flags & !(CQE_OWNER | CQE_SOLICITED) == 0
        && c.rsvd == 0
        && c.rsvd2.get() == 0
        && (is_recv || imm == 0);
    let r = match (status, opcode, ok) {
        (Some(status), Some(opcode), true) => Some((
            WorkCompletion {
                wr_id: c.wr_id.get(),
                status,
                opcode,
                byte_len: c.byte_len.get(),
                imm: is_recv.then_some(imm),
                qpn,
                solicited: c.flags & CQE_SOLICITED != 0,
                syndrome: c.syndrome.get(),
            },
            c.wqe_index.get(),
        )),
        _ => None,
    };
    debug_assert_eq!(
        r,
        c.decode().ok().map(|d| (
            WorkCompletion {
                wr_id: d.wr_id,
                status: d.status,
                opcode: d.opcode,
                byte_len: d.byte_len,
                imm: d.imm,
                qpn: d.qpn,
                solicited: d.solicited,
                syndrome: d.syndrome,
            },
            d.wqe_index
        ))
    );
    r
}

/// A completion queue.
#[derive(Debug)]
pub struct CompletionQueue {
    dev: Arc<Device>,
    cqn: u32,
    ring: CqRing,
    pub(crate) shared: Arc<CqShared>,
    cache: TrackCache,
}

impl CompletionQueue {
    pub(crate) fn new(
        dev: &Arc<Device>,
        depth: u32,
        channel: Option<&CompletionChannel>,
    ) -> Result<CompletionQueue> {
        let limit = dev.attrs().limits.max_cq_entries.max(2);
        if depth == 0 || depth > limit {
            return Err(Error::InvalidAttribute {
                object: "CQ".into(),
                field: "depth",
                value: u64::from(depth),
                rule: "1..=max_cq_entries",
            });
        }
        let log2 = depth.max(2).next_power_of_two().trailing_zeros() as u8;
        if let Some(ch) = channel {
            if !Arc::ptr_eq(&ch.dev, dev) {
                return Err(Error::ForeignObject {
                    what: "completion channel",
                    owner: "device",
                });
            }
        }
        let mut ring = CqRing::new(dev, log2, 0)?;
        let cqn = dev.create_cq(CreateCq {
            log2_entries: log2,
            rsvd: 0,
            irq_vector: (channel.map_or(0, |c| c.vector) as u16).into(),
            rsvd2: 0.into(),
            base: ring.iova().into(),
        })?;
        let cq = |ring| CompletionQueue {
            dev: dev.clone(),
            cqn,
            ring,
            shared: Arc::new(CqShared::default()),
            cache: TrackCache::new(),
        };
        if let Err(e) = ring.set_page(dev, cqn) {
            drop(cq(ring));
            return Err(e);
        }
        Ok(cq(ring))
    }

    /// The CQ number.
    pub fn cqn(&self) -> u32 {
        self.cqn
    }
    /// Entries.
    pub fn depth(&self) -> u32 {
        self.ring.depth()
    }
    pub(crate) fn device(&self) -> &Arc<Device> {
        &self.dev
    }

    /// Moves up to `out.len()` completions into `out`; returns how many. Never blocks, never
    /// allocates.
    ///
    /// # Errors
    /// [`Error::DeviceGone`]; [`Error::BadRecord`] for a malformed CQE (consumed and skipped).
    pub fn poll(&mut self, out: &mut [WorkCompletion]) -> Result<usize> {
        self.dev.check()?;
        let mut n = 0;
        let mut bad = None;
        self.cache.refresh(&self.shared);
        while n < out.len() {
            let Some(cqe) = self.ring.next_cqe()? else {
                break;
            };
            let Some((wc, wqe_index)) = decode(&cqe) else {
                // Malformed: the abi's decoder names what is wrong.
                let e = cqe.decode().err().unwrap_or(CqeError::ReservedSet);
                bad = Some((self.ring.consumer().wrapping_sub(1), e));
                break;
            };
            if let Some(tr) = self.cache.find(&self.shared, wc.qpn) {
                match wc.opcode {
                    CqeOpcode::RecvWriteImm => tr.on_recv_completion(wqe_index),
                    _ => tr.on_send_completion(wqe_index),
                }
            }
            out[n] = wc;
            n += 1;
        }
        self.ring.update(&self.dev, None)?;
        if let Some((index, e)) = bad {
            return Err(Error::BadRecord {
                bdf: self.dev.bdf(),
                what: "CQE",
                index,
                detail: format!("{e:?}"),
            });
        }
        Ok(n)
    }

    /// Whether a completion is waiting, without consuming it (to tell which of the CQs of a
    /// completion channel fired).
    ///
    /// # Errors
    /// [`Error::DeviceGone`].
    pub fn has_completion(&self) -> Result<bool> {
        self.dev.check()?;
        self.ring.is_ready()
    }

    /// Arms the CQ: the next completion (or the next solicited one) fires its channel once.
    ///
    /// # Errors
    /// [`Error::DeviceGone`].
    pub fn req_notify(&mut self, solicited_only: bool) -> Result<()> {
        self.dev.check()?;
        self.ring.update(&self.dev, Some(solicited_only))
    }
}

impl Drop for CompletionQueue {
    fn drop(&mut self) {
        if !self.dev.is_gone() {
            if let Err(e) = self.dev.destroy_cq(self.cqn) {
                log::warn!("destroy CQ {}: {e}", self.cqn);
            }
        }
    }
}
