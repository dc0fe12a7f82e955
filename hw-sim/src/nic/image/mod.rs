//! The image's shape of a shard: the NIC image's capacities and its own way in. A shard of
//! this kind is what one NIC core running the `mrc-nic` image owns: a datapath stage whose QP
//! contexts are indexed by device QPN, and the image's main loop ([`mrc_nicloop::NicLoop`]
//! at the image's [`mrc_nicloop::NicCapacity`], with the NIC's admin tables) behind the four
//! queues of its `hal` (module `rings`). Its QPs, their CQ, PD and memory region are set up
//! the way a host driver sets them up: admin commands through the admin ring
//! (`ImageShard::setup`). Who runs the loop is the firmware level (module `exec`): the loop
//! compiled natively (`native`) or the ELF on an emulated core (`elf`); everything else,
//! setup included, is one code path.
//!
//! Each core has the NIC's board around it: a CMIS module in each port's cage, which a
//! `[transceiver]` event pulls or darkens (`ImageShard::transceiver`); the image's port
//! monitor finds it (module `exec`) and takes the port down through the loop's port path.
//!
//! What the simulator reads back is what a host sees: completions are the CQEs the loop
//! posts (`PostCqe`, its WQE index mapped back to the work request the NIC model posted), EV
//! state changes are the event records it posts (`PostEvent`, counted).
//!
//! Limits of this shape, stated:
//! - The NIC has the image's ports: [`mrc_nicloop::PLANES`] planes, payload of
//!   `LoopConfig::DEFAULT.mtu_payload` bytes per packet (the loop's default CC profile counts
//!   in it), the `mrc` transport.
//! - The QPs use the device's default EV profile (AUTO, [`mrc_nicloop::EVS`] EVs over the
//!   planes) and default CC profile (the image's NSCC defaults): the scenario's NSCC tuning
//!   and probe period reach no image.
//! - No route knowledge is shared between QPs (`Nic::share_route` calls into the engine,
//!   which has no CSR or admin form; the image retires EVs on each QP's own losses).
//! - The firmware engine's own state (`Nic::fw_qp`, `Nic::ev_stats`) is not visible, and the
//!   engine counters only at the native level.

mod exec;
mod rings;

use std::collections::VecDeque;

use mrc_abi::device::admin::body::{CreateCq, CreateQp, QpInit, QpRtr, QpRts, RegMr};
use mrc_abi::device::admin::{
    AdminCommand, AdminReply, AdminStatus, QpModify, QpState as AdminQpState, ACCESS_LOCAL_WRITE,
    ACCESS_REMOTE_WRITE,
};
use mrc_abi::device::cqe::{CqeOpcode, CqeStatus};
use mrc_abi::device::csr::{CsrEntry, CsrEvent};
use mrc_abi::device::event::EventKind;
use mrc_firmware::datapath::packet::{Packet, RxVerdict, SendWr};
use mrc_firmware::datapath::stage::{
    Datapath, DatapathConfig, DpState, PostError, QpProgress, QpView,
};
use mrc_firmware::engine::{Completion, CompletionError, CompletionKind, QpState};
use zerocopy::IntoBytes;

use super::blocks::SimBlocks;
use super::cores::FirmwareLevel;
use super::pair::HostWrite;
use super::shard::Shard;
use super::{NicConfig, NicError, Peer, Transport};
pub use exec::FirmwareFault;
pub(crate) use exec::{Executor, Iteration};
pub(crate) use rings::Rings;

/// QPs of an image shard: the image's.
pub const IMAGE_QPS: usize = mrc_nicloop::QPS;

mrc_firmware::capacity! {
    /// The datapath stage of an image shard: a QP context per device QPN (`1..16`, the
    /// doorbell pages), the image's per-QP sizes.
    pub struct ImageDatapath {
        qps: 16, evs: 128, planes: 4, window_psns: 256, send_queue: 16, recv_queue: 16,
        regions: 8,
    }
}

const _: () = {
    use mrc_firmware::capacity::Capacity as C;
    use mrc_nicloop::NicCapacity as N;
    assert!(<ImageDatapath as C>::QPS == mrc_nicloop::DEVICE_QPNS);
    assert!(<ImageDatapath as C>::EVS == <N as C>::EVS);
    assert!(<ImageDatapath as C>::PLANES == <N as C>::PLANES);
    assert!(<ImageDatapath as C>::WINDOW_PSNS == <N as C>::WINDOW_PSNS);
    assert!(<ImageDatapath as C>::SEND_QUEUE == <N as C>::SEND_QUEUE);
    assert!(<ImageDatapath as C>::REGIONS == <N as C>::REGIONS);
};

/// Send queue entries per QP of an image shard.
pub const IMAGE_SEND_QUEUE: usize = <ImageDatapath as mrc_firmware::capacity::Capacity>::SEND_QUEUE;

/// The window in the admin commands' MPR units (128 PSNs).
const MPR_UNITS: u16 =
    (<ImageDatapath as mrc_firmware::capacity::Capacity>::WINDOW_PSNS / 128) as u16;

/// Setup iterations an admin command may take before the shard gives up on its reply.
const SETUP_ITERATIONS: usize = 16;

/// How a QP of a shard connects: the NIC-wide QPN of its peer's end.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Connect {
    pub dest_qpn: u32,
    pub retry_cnt: u8,
    pub timeout_exp: u8,
}

/// One image shard.
pub(crate) struct ImageShard {
    pub(crate) dp: Box<Datapath<ImageDatapath, SimBlocks>>,
    fw: Executor,
    /// Per slot: its device QPN.
    dqpn: Vec<u32>,
    /// Per slot: the work requests posted, by WQE index modulo the send queue, and the next
    /// WQE index.
    wrs: Vec<([u64; IMAGE_SEND_QUEUE], u64)>,
    /// The region's rkey the admin executor gave.
    pub(crate) rkey: u32,
    /// Admin commands waiting for the loop, replies it gave.
    admin: VecDeque<[u8; 64]>,
    replies: Vec<AdminReply>,
    /// Scratch of an iteration.
    orders: Vec<CsrEntry>,
    groups: Vec<u32>,
    host_buf: [CsrEntry; 16],
    /// FW->DP entries written so far.
    written: u32,
    /// The last iteration filled the FW->DP ring: the loop may hold more.
    pub(crate) more: bool,
    /// The firmware failed (the core faulted, hung or parked): it runs no more.
    pub(crate) fault: Option<FirmwareFault>,
    pub(crate) events_moved: u64,
    pub(crate) commands_moved: u64,
    /// EV state change events the loop posted.
    pub(crate) ev_events: u64,
    /// CQEs naming no slot or WQE of this shard, or not decodable (dropped).
    pub(crate) bad_cqes: u64,
}

impl ImageShard {
    /// A shard whose loop `fw` runs, with a fresh stage of `dcfg`.
    pub(crate) fn new(dcfg: DatapathConfig, fw: Executor) -> ImageShard {
        ImageShard {
            dp: Box::new(Datapath::with_blocks(dcfg, SimBlocks::Model)),
            fw,
            dqpn: Vec::new(),
            wrs: Vec::new(),
            rkey: 0,
            admin: VecDeque::new(),
            replies: Vec::new(),
            orders: Vec::new(),
            groups: Vec::new(),
            host_buf: [CsrEntry::ZERO; 16],
            written: 0,
            more: false,
            fault: None,
            events_moved: 0,
            commands_moved: 0,
            ev_events: 0,
            bad_cqes: 0,
        }
    }

    /// Sets the shard up as a host driver would, through the admin ring (no firmware time):
    /// a PD, one CQ for both queues of every QP, a remotely writable region of `region_len`
    /// bytes at `region_va`, and one QP per entry of `qps` moved RESET -> INIT -> RTR -> RTS.
    /// Slot `i` is the QP of `qps[i]`.
    ///
    /// # Errors
    /// The admin command that failed and its status, or the firmware's fault.
    pub(crate) fn setup(
        &mut self,
        qps: &[Connect],
        region_va: u64,
        region_len: u64,
    ) -> Result<(), String> {
        let pd = self.admin_ok("ALLOC_PD", AdminCommand::AllocPd)?[0] as u32;
        let cq = self.admin_ok(
            "CREATE_CQ",
            AdminCommand::CreateCq(CreateCq {
                log2_entries: 8,
                rsvd: 0,
                irq_vector: 0.into(),
                rsvd2: 0.into(),
                base: 0x1_0000.into(),
            }),
        )?[0] as u32;
        let mr = self.admin_ok(
            "REG_MR",
            AdminCommand::RegMr(RegMr {
                pd: pd.into(),
                access: (ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE).into(),
                va: region_va.into(),
                iova: region_va.into(),
                length: region_len.into(),
            }),
        )?;
        self.rkey = mr[1] as u32;
        let log2 = IMAGE_SEND_QUEUE.trailing_zeros() as u8;
        for (i, c) in qps.iter().enumerate() {
            let qpn = self.admin_ok(
                "CREATE_QP",
                AdminCommand::CreateQp(CreateQp {
                    pd: pd.into(),
                    send_cq: cq.into(),
                    recv_cq: cq.into(),
                    sq_log2: log2,
                    rq_log2: log2,
                    rsvd: 0.into(),
                    sq_base: (0x10_0000 + 0x1_0000 * i as u64).into(),
                    rq_base: (0x20_0000 + 0x1_0000 * i as u64).into(),
                }),
            )?[0] as u32;
            self.admin_ok(
                "MODIFY_QP to INIT",
                AdminCommand::ModifyQp(QpModify::Init(QpInit {
                    qpn: qpn.into(),
                    to_state: AdminQpState::Init as u8,
                    dscp: 26,
                    hint_flags: 0.into(),
                    ev_profile: 0.into(),
                    cc_profile: 0.into(),
                })),
            )?;
            let mut remote = [0u8; 16];
            remote[0] = 0xfd;
            remote[12..].copy_from_slice(&c.dest_qpn.to_be_bytes());
            self.admin_ok(
                "MODIFY_QP to RTR",
                AdminCommand::ModifyQp(QpModify::Rtr(QpRtr {
                    qpn: qpn.into(),
                    to_state: AdminQpState::Rtr as u8,
                    flags: 0,
                    responder_mpr: MPR_UNITS.into(),
                    dest_qpn: c.dest_qpn.into(),
                    max_wimm: 8.into(),
                    rsvd: 0.into(),
                    rq_psn: 0.into(),
                    remote_addr: remote,
                })),
            )?;
            self.admin_ok(
                "MODIFY_QP to RTS",
                AdminCommand::ModifyQp(QpModify::Rts(QpRts {
                    qpn: qpn.into(),
                    to_state: AdminQpState::Rts as u8,
                    retry_count: c.retry_cnt,
                    requester_mpr: MPR_UNITS.into(),
                    max_wimm: 8.into(),
                    ack_timeout_exp: c.timeout_exp,
                    rsvd: 0,
                    sq_psn: 0.into(),
                })),
            )?;
            self.dqpn.push(qpn);
            self.wrs.push(([0; IMAGE_SEND_QUEUE], 0));
        }
        Ok(())
    }

    /// Runs `cmd` through the admin ring in zero time (the loop's FW->DP entries reach the
    /// stage at once); its result words when it succeeded.
    fn admin_ok(&mut self, what: &str, cmd: AdminCommand) -> Result<[u64; 3], String> {
        let id = self.replies.len() as u16 + 1;
        self.admin.push_back(admin_bytes(&cmd, id));
        let mut it = Iteration::default();
        let mut sink = Vec::new();
        for _ in 0..SETUP_ITERATIONS {
            self.iterate(0, &[], &mut it)
                .map_err(|f| format!("{what}: {}", f.0))?;
            let orders = std::mem::take(&mut self.orders);
            self.deliver(0, &orders, &mut sink);
            self.orders = orders;
            if let Some(r) = self.replies.iter().find(|r| r.command_id == id) {
                if r.status != AdminStatus::Ok {
                    return Err(format!(
                        "{what}: the NIC answered {:?} (syndrome {:#x})",
                        r.status, r.syndrome
                    ));
                }
                return Ok(r.result);
            }
        }
        Err(format!("{what}: no reply from the NIC's main loop"))
    }

    /// One main-loop iteration at `now_ns` with `events` (the core's DP->FW ring, oldest
    /// first) behind it. Returns how many of `events` it consumed (from the front); the
    /// FW->DP entries it published are [`ImageShard::orders`], and `it` says when (in
    /// instructions from the iteration's start) it consumed and published and what it cost.
    ///
    /// # Errors
    /// The firmware failed, now or before (it runs no more).
    pub(crate) fn iterate(
        &mut self,
        now_ns: u64,
        events: &[CsrEntry],
        it: &mut Iteration,
    ) -> Result<usize, FirmwareFault> {
        if let Some(f) = &self.fault {
            return Err(f.clone());
        }
        let mut orders = std::mem::take(&mut self.orders);
        let mut groups = std::mem::take(&mut self.groups);
        let mut rings = Rings::new(
            events,
            &mut orders,
            &mut groups,
            self.written,
            &mut self.admin,
            &mut self.replies,
        );
        let r = self.fw.step(now_ns, &mut rings, it);
        let consumed = rings.consumed().len();
        let n = rings.written_now();
        self.orders = orders;
        self.groups = groups;
        if let Err(f) = r {
            self.fault = Some(f.clone());
            return Err(f);
        }
        self.written = self.written.wrapping_add(n);
        self.more = n as usize >= mrc_nicloop::RING_ENTRIES;
        self.events_moved += consumed as u64;
        self.commands_moved += u64::from(n);
        Ok(consumed)
    }

    /// The FW->DP entries of the last iteration (see [`ImageShard::iterate`]).
    pub(crate) fn orders(&self) -> &[CsrEntry] {
        &self.orders
    }

    /// FW->DP entries into the stage; what they write for the host goes to `host` (slots
    /// for QPNs).
    pub(crate) fn deliver(&mut self, now_ns: u64, cmds: &[CsrEntry], host: &mut Vec<HostWrite>) {
        let mut done = 0;
        while done < cmds.len() {
            let k = self.dp.handle_commands(now_ns, &cmds[done..]);
            self.drain_host(host);
            if k == 0 {
                break;
            }
            done += k;
        }
        self.drain_host(host);
    }

    fn drain_host(&mut self, host: &mut Vec<HostWrite>) {
        loop {
            let n = self.dp.poll_host_writes(&mut self.host_buf);
            if n == 0 {
                return;
            }
            for i in 0..n {
                let e = self.host_buf[i];
                match e.decode() {
                    Ok(CsrEvent::PostCqe(c)) => match self.completion(&c) {
                        Some(c) => host.push(HostWrite::Completion(c)),
                        None => self.bad_cqes += 1,
                    },
                    Ok(CsrEvent::PostEvent(ev))
                        if ev.event_kind == EventKind::EvStateChange as u8 =>
                    {
                        self.ev_events += 1;
                    }
                    // (other event records: the scenario's host has no event ring)
                    _ => {}
                }
            }
        }
    }

    /// The completion a CQE reports, with its QPN the slot and its `wr_id` the work
    /// request's.
    fn completion(&self, c: &mrc_abi::device::csr::PostCqe) -> Option<Completion> {
        let slot = self.slot_of(c.qpn.get())?;
        let recv = c.opcode == CqeOpcode::RecvWriteImm as u8;
        let index = u64::from(c.wqe_index.get());
        let wr_id = if recv {
            index
        } else {
            let (ids, next) = &self.wrs[slot as usize];
            // (the WQE index is the low 16 bits of the running index)
            let oldest = next.saturating_sub(IMAGE_SEND_QUEUE as u64);
            if !(oldest..*next).any(|i| i as u16 == index as u16) {
                return None;
            }
            ids[index as usize % IMAGE_SEND_QUEUE]
        };
        let status = match CqeStatus::from_u8(c.status)? {
            CqeStatus::Success => Ok(()),
            CqeStatus::RetryExceeded => Err(CompletionError::RetryExceeded),
            CqeStatus::WrFlushed => Err(CompletionError::Flushed),
            CqeStatus::RemoteAccess => Err(CompletionError::RemoteNack(
                mrc_abi::wire::NackReason::RemoteAccess,
            )),
            _ => Err(CompletionError::LocalQpError(
                mrc_abi::wire::NackReason::InvalidQp,
            )),
        };
        Some(Completion {
            qpn: slot,
            wr_id,
            kind: if recv {
                CompletionKind::RecvImm {
                    imm: c.imm.get(),
                    msn: 0,
                }
            } else {
                CompletionKind::Send
            },
            status,
        })
    }

    fn slot_of(&self, dqpn: u32) -> Option<u32> {
        self.dqpn.iter().position(|&q| q == dqpn).map(|s| s as u32)
    }

    fn dqpn(&self, slot: u32) -> u32 {
        // (a slot the shard does not have names QP context 0, which no QP uses)
        self.dqpn.get(slot as usize).copied().unwrap_or(0)
    }

    /// The datapath's view of QP `slot`.
    pub(crate) fn qp(&self, slot: u32) -> Option<QpView> {
        self.dqpn.get(slot as usize)?;
        self.dp.qp(self.dqpn(slot))
    }

    /// The part of [`ImageShard::qp`] polled on every input.
    pub(crate) fn qp_progress(&self, slot: u32) -> Option<QpProgress> {
        self.dqpn.get(slot as usize)?;
        self.dp.qp_progress(self.dqpn(slot))
    }

    /// QP `slot`'s state as its datapath context has it.
    pub(crate) fn qp_state(&self, slot: u32) -> Option<QpState> {
        Some(match self.qp_progress(slot)?.state {
            DpState::Reset => QpState::Reset,
            DpState::Init => QpState::Init,
            DpState::Rtr => QpState::Rtr,
            DpState::Rts => QpState::Rts,
            DpState::Error => QpState::Error,
        })
    }

    /// A send work request for QP `slot`: posted under its WQE index (what the CQE will
    /// carry), remembered to be named in its completion.
    pub(crate) fn post_send(&mut self, slot: u32, mut wr: SendWr) -> Result<(), PostError> {
        let q = self.dqpn(slot);
        let Some((ids, next)) = self.wrs.get_mut(slot as usize) else {
            return Err(PostError::NotSending);
        };
        let real = wr.wr_id;
        wr.wr_id = *next & 0xffff;
        self.dp.post_send(q, wr)?;
        ids[*next as usize % IMAGE_SEND_QUEUE] = real;
        *next += 1;
        Ok(())
    }

    /// A received packet (its `dest_qpn` the slot) into the stage; `None` when the stage's
    /// event queue is short of room.
    pub(crate) fn receive(&mut self, now_ns: u64, pkt: &Packet) -> Option<RxVerdict> {
        let mut p = *pkt;
        p.dest_qpn = self.dqpn(pkt.dest_qpn);
        let mut v = [RxVerdict::Consumed];
        (self
            .dp
            .handle_packets(now_ns, core::slice::from_ref(&p), &mut v)
            == 1)
            .then_some(v[0])
    }

    /// The next packet the stage sends (its `src_qpn` the slot).
    pub(crate) fn transmit(&mut self, now_ns: u64) -> Option<Packet> {
        let mut out = [Packet::FILL];
        if self.dp.poll_packets(now_ns, &mut out) != 1 {
            return None;
        }
        let mut p = out[0];
        p.src_qpn = self.slot_of(p.src_qpn).unwrap_or(u32::MAX);
        Some(p)
    }

    /// The loop's next timer deadline.
    pub(crate) fn fw_deadline(&self) -> Option<u64> {
        if self.fault.is_some() {
            return None;
        }
        self.fw.deadline()
    }

    /// The engine's counters where visible (native).
    pub(crate) fn engine_counters(&self) -> Option<mrc_firmware::engine::EngineCounters> {
        self.fw.engine_counters()
    }

    /// Guest instructions retired since power-on (`elf`).
    pub(crate) fn guest_instructions(&self) -> Option<u64> {
        self.fw.guest_instructions()
    }

    /// Port `port`'s transceiver pulled (`pull`) or raising loss of signal, in this core's
    /// view of the board (see `Executor::transceiver`).
    pub(crate) fn transceiver(&mut self, port: usize, pull: bool) -> bool {
        self.fw.transceiver(port, pull)
    }
}

/// The 64 bytes of `cmd` with id `id`, as a driver writes them into the admin ring.
fn admin_bytes(cmd: &AdminCommand, id: u16) -> [u8; 64] {
    let mut out = [0u8; 64];
    out.copy_from_slice(cmd.encode(id, 0).as_bytes());
    out
}

/// Checks that a NIC of `cfg` can have the image's shape.
///
/// # Errors
/// [`NicError::Config`] naming what the image does not have.
pub(crate) fn check(cfg: &NicConfig) -> Result<(), NicError> {
    if usize::from(cfg.planes) != mrc_nicloop::PLANES {
        return Err(NicError::Config(
            "the image's shape has the image's 4 ports: planes must be 4",
        ));
    }
    if cfg.mtu_payload != mrc_nicloop::LoopConfig::DEFAULT.mtu_payload {
        return Err(NicError::Config(
            "the image's shape sends the image's 4096-byte packets: mtu_payload must be 4096",
        ));
    }
    if cfg.transport != Transport::Mrc {
        return Err(NicError::Config(
            "the image's shape runs the mrc transport only",
        ));
    }
    Ok(())
}

/// The image shards of a NIC whose QPs in creation order are `qpn_at` (QPN `q` connects to
/// `peers[q]`), [`IMAGE_QPS`] to a shard, each set up through its admin ring; and the rkey
/// of their region (the same in every shard: each runs the same commands).
///
/// # Errors
/// The firmware could not start, or refused the setup.
pub(crate) fn shards(
    cfg: &NicConfig,
    dcfg: DatapathConfig,
    peers: &[Peer],
    qpn_at: &[u32],
) -> Result<(Vec<Shard>, u32), NicError> {
    let mut out = Vec::new();
    let mut rkey = None;
    for group in qpn_at.chunks(IMAGE_QPS) {
        let connect: Vec<Connect> = group
            .iter()
            .map(|&q| Connect {
                dest_qpn: peers[q as usize].remote_qpn,
                retry_cnt: cfg.retry_cnt,
                timeout_exp: cfg.timeout_exp,
            })
            .collect();
        let mut sh = ImageShard::new(dcfg, executor(cfg)?);
        sh.dp.set_blocks(SimBlocks::new(&cfg.datapath)?);
        sh.setup(&connect, super::REGION_VA, super::REGION_LEN)
            .map_err(|e| NicError::Firmware(leak(format!("the NIC's admin setup: {e}"))))?;
        if *rkey.get_or_insert(sh.rkey) != sh.rkey {
            return Err(NicError::Firmware(
                "the NIC's admin setup: the shards' regions got different rkeys",
            ));
        }
        out.push(Shard::Image(Box::new(sh)));
    }
    Ok((out, rkey.unwrap_or(0)))
}

/// A setup error's text, kept for the rest of the run (an error path: a run that fails to
/// set up its NICs ends).
fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

/// The executor of a shard at `cfg`'s firmware level.
fn executor(cfg: &NicConfig) -> Result<Executor, NicError> {
    let fault = |f: FirmwareFault| NicError::Firmware(leak(f.0));
    match cfg.firmware.level {
        FirmwareLevel::Native => Executor::native().map_err(fault),
        FirmwareLevel::Elf => elf_executor(cfg).map_err(fault),
    }
}

/// Reads (or builds, `path` `None`) the ELF the `elf` level will run, ahead of a run, so
/// that the run's wall time does not include it. Does nothing without the `elf` feature.
///
/// # Errors
/// The image could not be built or read.
pub fn prepare_elf(path: Option<&'static std::path::Path>) -> Result<(), String> {
    #[cfg(feature = "elf")]
    elf_image::load(path)?;
    let _ = path;
    Ok(())
}

#[cfg(feature = "elf")]
fn elf_executor(cfg: &NicConfig) -> Result<Executor, FirmwareFault> {
    let image = elf_image::load(cfg.firmware.elf).map_err(FirmwareFault)?;
    Executor::elf(&image, cfg.firmware.instructions_per_s())
}

#[cfg(not(feature = "elf"))]
fn elf_executor(_cfg: &NicConfig) -> Result<Executor, FirmwareFault> {
    Err(FirmwareFault(
        "the elf firmware level needs mrc-sim built with its `elf` cargo feature \
         (cargo run --release --features elf -- ...; it builds the Unicorn engine, GPL-2.0, \
         with cmake)"
            .into(),
    ))
}

#[cfg(feature = "elf")]
pub(crate) mod elf_image;
