//! Completion channels and completion queues.

use std::os::fd::BorrowedFd;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mrc_abi::device::admin::body::CreateCq;
use mrc_abi::device::cqe::{CqeOpcode, CqeStatus};

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

#[derive(Debug, Default)]
pub(crate) struct CqShared {
    pub tracks: Mutex<Vec<Arc<QpTrack>>>,
}

impl CqShared {
    pub fn attach(&self, t: &Arc<QpTrack>) {
        self.tracks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(t.clone());
    }
    pub fn detach(&self, qpn: u32) {
        self.tracks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|t| t.qpn != qpn);
    }
}

/// A completion queue.
#[derive(Debug)]
pub struct CompletionQueue {
    dev: Arc<Device>,
    cqn: u32,
    ring: CqRing,
    pub(crate) shared: Arc<CqShared>,
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
        let mut tracks = None;
        let mut bad = None;
        while n < out.len() {
            let Some(cqe) = self.ring.next_cqe()? else {
                break;
            };
            let c = match cqe.decode() {
                Ok(c) => c,
                Err(e) => {
                    bad = Some((self.ring.consumer().wrapping_sub(1), e));
                    break;
                }
            };
            let t = tracks.get_or_insert_with(|| {
                self.shared.tracks.lock().unwrap_or_else(|p| p.into_inner())
            });
            if let Some(tr) = t.iter().find(|t| t.qpn == c.qpn) {
                match c.opcode {
                    CqeOpcode::RecvWriteImm => tr.on_recv_completion(c.wqe_index),
                    _ => tr.on_send_completion(c.wqe_index),
                }
            }
            out[n] = WorkCompletion {
                wr_id: c.wr_id,
                status: c.status,
                opcode: c.opcode,
                byte_len: c.byte_len,
                imm: c.imm,
                qpn: c.qpn,
                solicited: c.solicited,
                syndrome: c.syndrome,
            };
            n += 1;
        }
        drop(tracks);
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
