//! An admin-only host interface for the core: admin commands in, replies out, and nothing of
//! a datapath (no DP->FW reports; every FW->DP entry taken). What a host that only manages the
//! NIC (its firmware update, its queries) sees of the core; the simulator's firmware-update
//! path at the `elf` level and the tests drive the image through it.

use std::collections::VecDeque;

use mrc_abi::device::admin::{AdminCommand, AdminReply, AdminStatus};
use mrc_abi::device::csr::CsrEntry;
use mrc_nicloop::Datapath;
use zerocopy::IntoBytes;

use crate::core::ElfCore;
use crate::device::Stop;
use crate::ElfError;

/// Why [`AdminPort::execute`] got no reply.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NoReply {
    /// The core failed (faulted, hung, found nothing to boot).
    #[error("{0}")]
    Core(#[from] ElfError),
    /// The iteration ended in a reset (the watchdog bit, the image crashed): the command is
    /// lost.
    #[error("the core reset ({0:?}) before it answered")]
    Reset(Stop),
    /// No reply within the iterations allowed.
    #[error("no reply within {0} iterations")]
    Timeout(usize),
}

/// The admin queues' host side (see the module docs).
#[derive(Debug, Default)]
pub struct AdminPort {
    cmds: VecDeque<[u8; 64]>,
    replies: Vec<AdminReply>,
    orders: u32,
    next_id: u16,
}

impl AdminPort {
    /// Sends `cmd` and runs the core's main loop, one iteration per microsecond from
    /// `*now_ns` (advanced), until its reply or `iterations` iterations.
    ///
    /// # Errors
    /// [`NoReply`]; the command is withdrawn.
    pub fn execute(
        &mut self,
        core: &mut ElfCore,
        now_ns: &mut u64,
        cmd: &AdminCommand,
        iterations: usize,
    ) -> Result<AdminReply, NoReply> {
        self.next_id = self.next_id.wrapping_add(1);
        let id = self.next_id;
        let mut raw = [0u8; 64];
        raw.copy_from_slice(cmd.encode(id, 0).as_bytes());
        self.replies.clear();
        self.cmds.push_back(raw);
        let r = self.wait(core, now_ns, id, iterations);
        self.cmds.clear();
        r
    }

    fn wait(
        &mut self,
        core: &mut ElfCore,
        now_ns: &mut u64,
        id: u16,
        iterations: usize,
    ) -> Result<AdminReply, NoReply> {
        for _ in 0..iterations {
            *now_ns += 1_000;
            let run = core.step(*now_ns, self)?;
            if run.stop != Stop::Iteration {
                return Err(NoReply::Reset(run.stop));
            }
            if let Some(r) = self.replies.iter().find(|r| r.command_id == id) {
                return Ok(*r);
            }
        }
        Err(NoReply::Timeout(iterations))
    }

    /// [`AdminPort::execute`] as a result: the reply's words, or its status and syndrome
    /// (`INTERNAL`, 0 when there was no reply).
    pub fn result(
        &mut self,
        core: &mut ElfCore,
        now_ns: &mut u64,
        cmd: &AdminCommand,
        iterations: usize,
    ) -> Result<[u64; 3], (AdminStatus, u32)> {
        match self.execute(core, now_ns, cmd, iterations) {
            Ok(r) if r.status == AdminStatus::Ok => Ok(r.result),
            Ok(r) => Err((r.status, r.syndrome)),
            Err(_) => Err((AdminStatus::Internal, 0)),
        }
    }
}

impl Datapath for AdminPort {
    fn peek_events(&mut self, _out: &mut [CsrEntry]) -> usize {
        0
    }
    fn consume_events(&mut self, _n: usize) {}
    fn orders_room(&mut self) -> usize {
        mrc_nicloop::RING_ENTRIES
    }
    fn push_orders(&mut self, entries: &[CsrEntry]) -> usize {
        self.orders = self.orders.wrapping_add(entries.len() as u32);
        entries.len()
    }
    fn orders_written(&self) -> u32 {
        self.orders
    }
    fn orders_taken(&mut self) -> u32 {
        self.orders
    }
    fn pop_admin(&mut self) -> Option<[u8; 64]> {
        self.cmds.pop_front()
    }
    fn push_admin_reply(&mut self, reply: &AdminReply) -> bool {
        self.replies.push(*reply);
        true
    }
}
