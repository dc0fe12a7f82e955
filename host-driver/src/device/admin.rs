//! The admin queue: a DMA ring of 64-byte [`AdminCmd`]s and a response ring of 32-byte
//! [`AdminResp`]s, one command outstanding at a time, every wait bounded; and one typed method
//! per admin opcode.

use std::sync::atomic::{fence, Ordering};
use std::time::Instant;

use mrc_abi::device::admin::body::*;
use mrc_abi::device::admin::{
    AdminCommand, AdminResp, AdminStatus, FwUpdateState, QpModify, QpState,
};
use mrc_abi::device::cqe::expected_owner;
use mrc_abi::device::EvState;
use zerocopy::{FromBytes, IntoBytes};

use super::{backoff, lock, probe_read, qreg, Device};
use crate::error::{Error, Result};
use crate::sys::{Backend, DmaRegion};

const CMD_BYTES: u64 = 64;
const RESP_BYTES: u64 = 32;

pub(super) struct AdminQueue {
    block: u64,
    cmds: DmaRegion,
    resps: DmaRegion,
    log2: u8,
    producer: u32,
    next_id: u16,
}

/// Programs a queue block (base, size, vector) and enables it.
pub(super) fn enable_queue(
    b: &dyn Backend,
    block: u64,
    ring: &DmaRegion,
    resp: Option<&DmaRegion>,
    log2: u8,
    name: &'static str,
) -> Result<()> {
    let base = ring.iova().0;
    b.mmio_write32(block + qreg::CONTROL, 0)?;
    b.mmio_write32(block + qreg::BASE_LO, base as u32)?;
    b.mmio_write32(block + qreg::BASE_HI, (base >> 32) as u32)?;
    b.mmio_write32(block + qreg::LOG2, u32::from(log2))?;
    if let Some(r) = resp {
        let rb = r.iova().0;
        b.mmio_write32(block + qreg::RESP_LO, rb as u32)?;
        b.mmio_write32(block + qreg::RESP_HI, (rb >> 32) as u32)?;
    }
    b.mmio_write32(block + qreg::IRQ, 0)?;
    b.mmio_write32(block + qreg::CONTROL, 1)?;
    let st = probe_read(b, block + qreg::STATUS)?;
    if st & 1 == 0 || st & 2 != 0 {
        return Err(Error::QueueEnable {
            bdf: b.bdf(),
            queue: name,
            status: st,
        });
    }
    Ok(())
}

fn check_log2(b: &dyn Backend, log2: u8, what: &'static str) -> Result<()> {
    if (1..=12).contains(&log2) {
        Ok(())
    } else {
        Err(Error::InvalidAttribute {
            object: format!("device {}", b.bdf()),
            field: what,
            value: u64::from(log2),
            rule: "log2 entries in 1..=12",
        })
    }
}

impl AdminQueue {
    pub(super) fn setup(b: &dyn Backend, block: u64, log2: u8) -> Result<AdminQueue> {
        check_log2(b, log2, "admin_log2")?;
        let cmds = b.alloc_dma((CMD_BYTES as usize) << log2)?;
        let resps = b.alloc_dma((RESP_BYTES as usize) << log2)?;
        enable_queue(b, block, &cmds, Some(&resps), log2, "admin")?;
        // Resume from the device's consumer index (0 after reset).
        let producer = probe_read(b, block + qreg::CONSUMER)?;
        Ok(AdminQueue {
            block,
            cmds,
            resps,
            log2,
            producer,
            next_id: 1,
        })
    }
}

impl Device {
    /// Runs one admin command and returns its result words.
    ///
    /// # Errors
    /// [`Error::DeviceGone`], [`Error::AdminTimeout`], [`Error::Admin`] (rejected),
    /// [`Error::Protocol`] (a response for another command).
    pub fn admin(&self, cmd: AdminCommand) -> Result<[u64; 3]> {
        self.check()?;
        let opcode = cmd.opcode();
        let mut q = lock(&self.admin);
        let index = q.producer;
        let mask = (1u32 << q.log2) - 1;
        let slot = u64::from(index & mask);
        let id = q.next_id;
        q.next_id = q.next_id.wrapping_add(1).max(1);
        let raw = cmd.encode(id, 0);
        q.cmds.write_slice(slot * CMD_BYTES, raw.as_bytes())?;
        q.producer = index.wrapping_add(1);
        // Release: the command bytes must be visible to the device before it sees the new
        // producer index, or it could fetch a half-written command.
        fence(Ordering::Release);
        self.ring_doorbell(q.block + qreg::DOORBELL, q.producer)?;
        let want_owner = expected_owner(index, q.log2);
        let start = Instant::now();
        let mut spins = 0u32;
        loop {
            let flags = q.resps.read_u8(slot * RESP_BYTES + 1)?;
            if (flags & 1 != 0) == want_owner {
                // Acquire: read the response body only after seeing its owner bit.
                fence(Ordering::Acquire);
                break;
            }
            // Reading the consumer register detects a removed device (all ones).
            self.read32(q.block + qreg::CONSUMER)?;
            if start.elapsed() >= self.admin_timeout {
                return Err(Error::AdminTimeout {
                    bdf: self.bdf,
                    opcode,
                    command_id: id,
                    waited_ms: start.elapsed().as_millis() as u64,
                });
            }
            backoff(&mut spins);
        }
        let mut buf = [0u8; RESP_BYTES as usize];
        q.resps.read_slice(slot * RESP_BYTES, &mut buf)?;
        drop(q);
        let resp = AdminResp::read_from_bytes(&buf).map_err(|_| self.protocol("short response"))?;
        let reply = resp
            .decode()
            .map_err(|e| self.protocol(&format!("malformed admin response: {e:?}")))?;
        if reply.command_id != id {
            return Err(self.protocol(&format!(
                "admin response carries command id {}, expected {id} ({opcode:?})",
                reply.command_id
            )));
        }
        self.counters.admin_commands.fetch_add(1, Ordering::Relaxed);
        if reply.status != AdminStatus::Ok {
            self.counters.admin_errors.fetch_add(1, Ordering::Relaxed);
            return Err(Error::Admin {
                bdf: self.bdf,
                opcode,
                status: reply.status,
                syndrome: reply.syndrome,
            });
        }
        Ok(reply.result)
    }

    pub(crate) fn protocol(&self, what: &str) -> Error {
        Error::Protocol {
            bdf: self.bdf,
            what: what.to_owned(),
        }
    }

    fn admin_id(&self, cmd: AdminCommand) -> Result<u32> {
        Ok(self.admin(cmd)?[0] as u32)
    }
}

/// QUERY_DEVICE answers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueryDevice {
    /// Running firmware image version.
    pub fw_version: u32,
    /// Most PDs.
    pub max_pds: u32,
    /// Most MRs.
    pub max_mrs: u32,
    /// Most QP ring entries.
    pub max_qp_entries: u32,
    /// Most CQ ring entries.
    pub max_cq_entries: u32,
}

/// QUERY_LIMITS answers: what one QP accepts and what the profile tables hold. `u32::MAX`
/// means no limit beyond the attribute's own range (the device reported 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest MPR (units of 128 PSNs) in either direction.
    pub max_mpr: u32,
    /// Largest max WIMM as requester (the send work requests one QP's engine holds).
    pub max_wimm: u32,
    /// Largest max WIMM as responder (the receive work requests one QP's engine holds).
    pub max_wimm_dest: u32,
    /// EV format profiles.
    pub max_ev_format_profiles: u32,
    /// EV profiles.
    pub max_ev_profiles: u32,
    /// EVs of one EV profile.
    pub max_evs_per_profile: u32,
    /// CC profiles.
    pub max_cc_profiles: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_mpr: u32::MAX,
            max_wimm: u32::MAX,
            max_wimm_dest: u32::MAX,
            max_ev_format_profiles: u32::MAX,
            max_ev_profiles: u32::MAX,
            max_evs_per_profile: u32::MAX,
            max_cc_profiles: u32::MAX,
        }
    }
}

/// QUERY_QP answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpInfo {
    /// State.
    pub state: QpState,
    /// Next send PSN.
    pub sq_psn: u32,
    /// Next expected receive PSN.
    pub rq_psn: u32,
    /// Usable EVs.
    pub usable_evs: u32,
}

/// QUERY_PORT answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortInfo {
    /// Port number.
    pub port: u8,
    /// Administratively up.
    pub admin_up: bool,
    /// Operationally up.
    pub oper_up: bool,
    /// Link speed, Mb/s.
    pub speed_mbps: u32,
    /// Plane.
    pub plane: u32,
}

/// QUERY_EV answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EvInfo {
    /// State.
    pub state: EvState,
    /// UDP / STEV value (low 32 bits of the second result word).
    pub value: u64,
    /// Last probe RTT, ns (0 = none).
    pub last_rtt_ns: u64,
}

/// FW_STATUS answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FwStatus {
    /// Slot the cores booted from.
    pub running_slot: u32,
    /// Update state.
    pub update_state: FwUpdateState,
    /// Running image version.
    pub running_version: u32,
    /// Staged image version.
    pub staged_version: u32,
}

fn oid(id: u32) -> ObjectId {
    ObjectId { id: id.into() }
}

/// One typed method per admin opcode. Results are decoded per the
/// [`Opcode`](mrc_abi::device::admin::Opcode) docs.
impl Device {
    /// QUERY_DEVICE.
    ///
    /// # Errors
    /// As [`Device::admin`].
    pub fn query_device(&self) -> Result<QueryDevice> {
        let r = self.admin(AdminCommand::QueryDevice)?;
        Ok(QueryDevice {
            fw_version: r[0] as u32,
            max_pds: r[1] as u32,
            max_mrs: (r[1] >> 32) as u32,
            max_qp_entries: r[2] as u32,
            max_cq_entries: (r[2] >> 32) as u32,
        })
    }
    /// QUERY_LIMITS.
    ///
    /// # Errors
    /// As [`Device::admin`].
    pub fn query_limits(&self) -> Result<Limits> {
        let r = self.admin(AdminCommand::QueryLimits)?;
        let or_max = |v: u64| if v == 0 { u32::MAX } else { v as u32 };
        Ok(Limits {
            max_mpr: or_max(r[0] / 128),
            max_wimm: or_max(r[1] >> 32),
            max_wimm_dest: or_max(r[1] & 0xffff_ffff),
            max_ev_format_profiles: or_max(r[2] >> 48),
            max_ev_profiles: or_max((r[2] >> 32) & 0xffff),
            max_evs_per_profile: or_max((r[2] >> 16) & 0xffff),
            max_cc_profiles: or_max(r[2] & 0xffff),
        })
    }
    /// ALLOC_PD: the PD number.
    ///
    /// # Errors
    /// As [`Device::admin`].
    pub fn alloc_pd(&self) -> Result<u32> {
        self.admin_id(AdminCommand::AllocPd)
    }
    /// DEALLOC_PD.
    ///
    /// # Errors
    /// As [`Device::admin`].
    pub fn dealloc_pd(&self, pd: u32) -> Result<()> {
        self.admin(AdminCommand::DeallocPd(oid(pd))).map(drop)
    }
    /// REG_MR: `(lkey, rkey)`.
    ///
    /// # Errors
    /// As [`Device::admin`].
    pub fn reg_mr(&self, body: RegMr) -> Result<(u32, u32)> {
        let r = self.admin(AdminCommand::RegMr(body))?;
        Ok((r[0] as u32, r[1] as u32))
    }
    /// DEREG_MR.
    ///
    /// # Errors
    /// As [`Device::admin`].
    pub fn dereg_mr(&self, lkey: u32) -> Result<()> {
        self.admin(AdminCommand::DeregMr(oid(lkey))).map(drop)
    }
    /// CREATE_CQ: the CQN.
    ///
    /// # Errors
    /// As [`Device::admin`].
    pub fn create_cq(&self, body: CreateCq) -> Result<u32> {
        self.admin_id(AdminCommand::CreateCq(body))
    }
    /// DESTROY_CQ.
    ///
    /// # Errors
    /// As [`Device::admin`].
    pub fn destroy_cq(&self, cqn: u32) -> Result<()> {
        self.admin(AdminCommand::DestroyCq(oid(cqn))).map(drop)
    }
    /// CREATE_QP: the QPN (its doorbell page).
    ///
    /// # Errors
    /// As [`Device::admin`].
    pub fn create_qp(&self, body: CreateQp) -> Result<u32> {
        self.admin_id(AdminCommand::CreateQp(body))
    }
    /// MODIFY_QP.
    ///
    /// # Errors
    /// As [`Device::admin`].
    pub fn modify_qp(&self, body: QpModify) -> Result<()> {
        self.admin(AdminCommand::ModifyQp(body)).map(drop)
    }
    /// QUERY_QP.
    ///
    /// # Errors
    /// As [`Device::admin`]; [`Error::Protocol`] for an unknown state code.
    pub fn query_qp(&self, qpn: u32) -> Result<QpInfo> {
        let r = self.admin(AdminCommand::QueryQp(oid(qpn)))?;
        let state = QpState::from_code(r[0] as u8)
            .ok_or_else(|| self.protocol(&format!("QUERY_QP: unknown state {}", r[0])))?;
        Ok(QpInfo {
            state,
            sq_psn: (r[1] >> 32) as u32,
            rq_psn: r[1] as u32,
            usable_evs: r[2] as u32,
        })
    }
    /// DESTROY_QP.
    ///
    /// # Errors
    /// As [`Device::admin`].
    pub fn destroy_qp(&self, qpn: u32) -> Result<()> {
        self.admin(AdminCommand::DestroyQp(oid(qpn))).map(drop)
    }
    /// SET_PORT_ADMIN_STATE.
    ///
    /// # Errors
    /// As [`Device::admin`].
    pub fn set_port_admin_state(&self, port: u8, up: bool) -> Result<()> {
        let b = PortAdmin {
            port,
            up: u8::from(up),
            rsvd: 0.into(),
        };
        self.admin(AdminCommand::SetPortAdminState(b)).map(drop)
    }
    /// QUERY_PORT.
    ///
    /// # Errors
    /// As [`Device::admin`].
    pub fn query_port(&self, port: u8) -> Result<PortInfo> {
        let r = self.admin(AdminCommand::QueryPort(oid(port.into())))?;
        Ok(PortInfo {
            port,
            admin_up: (r[0] >> 32) != 0,
            oper_up: r[0] as u32 != 0,
            speed_mbps: r[1] as u32,
            plane: r[2] as u32,
        })
    }
    /// CREATE_EV_FORMAT_PROFILE: the profile id.
    ///
    /// # Errors
    /// As [`Device::admin`].
    pub fn create_ev_format_profile(&self, body: EvFormatProfile) -> Result<u32> {
        self.admin_id(AdminCommand::CreateEvFormatProfile(body))
    }
    /// MODIFY_EV_FORMAT_PROFILE.
    ///
    /// # Errors
    /// As [`Device::admin`].
    pub fn modify_ev_format_profile(&self, body: EvFormatProfile) -> Result<()> {
        self.admin(AdminCommand::ModifyEvFormatProfile(body))
            .map(drop)
    }
    /// DESTROY_EV_FORMAT_PROFILE.
    ///
    /// # Errors
    /// As [`Device::admin`].
    pub fn destroy_ev_format_profile(&self, id: u32) -> Result<()> {
        self.admin(AdminCommand::DestroyEvFormatProfile(oid(id)))
            .map(drop)
    }
    /// CREATE_EV_PROFILE: the profile id.
    ///
    /// # Errors
    /// As [`Device::admin`].
    pub fn create_ev_profile(&self, body: EvProfile) -> Result<u32> {
        self.admin_id(AdminCommand::CreateEvProfile(body))
    }
    /// MODIFY_EV_PROFILE.
    ///
    /// # Errors
    /// As [`Device::admin`].
    pub fn modify_ev_profile(&self, body: EvProfile) -> Result<()> {
        self.admin(AdminCommand::ModifyEvProfile(body)).map(drop)
    }
    /// DESTROY_EV_PROFILE.
    ///
    /// # Errors
    /// As [`Device::admin`].
    pub fn destroy_ev_profile(&self, id: u32) -> Result<()> {
        self.admin(AdminCommand::DestroyEvProfile(oid(id)))
            .map(drop)
    }
    /// DENY_EV (`deny = false` allows it again).
    ///
    /// # Errors
    /// As [`Device::admin`].
    pub fn deny_ev(&self, profile: u32, ev_index: u16, deny: bool) -> Result<()> {
        let b = EvRef {
            profile: profile.into(),
            ev_index: ev_index.into(),
            deny: u8::from(deny),
            rsvd: 0,
        };
        self.admin(AdminCommand::DenyEv(b)).map(drop)
    }
    /// REPLACE_EV.
    ///
    /// # Errors
    /// As [`Device::admin`].
    pub fn replace_ev(&self, body: ReplaceEv) -> Result<()> {
        self.admin(AdminCommand::ReplaceEv(body)).map(drop)
    }
    /// QUERY_EV.
    ///
    /// # Errors
    /// As [`Device::admin`]; [`Error::Protocol`] for an unknown state code.
    pub fn query_ev(&self, profile: u32, ev_index: u16) -> Result<EvInfo> {
        let b = EvRef {
            profile: profile.into(),
            ev_index: ev_index.into(),
            deny: 0,
            rsvd: 0,
        };
        let r = self.admin(AdminCommand::QueryEv(b))?;
        let state = EvState::from_u8(r[0] as u8)
            .ok_or_else(|| self.protocol(&format!("QUERY_EV: unknown EV state {}", r[0])))?;
        Ok(EvInfo {
            state,
            value: r[1],
            last_rtt_ns: r[2],
        })
    }
    /// PROBE_EV (the result arrives as an `EvProbeResult` event).
    ///
    /// # Errors
    /// As [`Device::admin`].
    pub fn probe_ev(&self, body: ProbeEv) -> Result<()> {
        self.admin(AdminCommand::ProbeEv(body)).map(drop)
    }
    /// CREATE_CC_PROFILE: the profile id.
    ///
    /// # Errors
    /// As [`Device::admin`].
    pub fn create_cc_profile(&self, body: CcProfile) -> Result<u32> {
        self.admin_id(AdminCommand::CreateCcProfile(body))
    }
    /// MODIFY_CC_PROFILE.
    ///
    /// # Errors
    /// As [`Device::admin`].
    pub fn modify_cc_profile(&self, body: CcProfile) -> Result<()> {
        self.admin(AdminCommand::ModifyCcProfile(body)).map(drop)
    }
    /// DESTROY_CC_PROFILE.
    ///
    /// # Errors
    /// As [`Device::admin`].
    pub fn destroy_cc_profile(&self, id: u32) -> Result<()> {
        self.admin(AdminCommand::DestroyCcProfile(oid(id)))
            .map(drop)
    }
    /// FW_STATUS.
    ///
    /// # Errors
    /// As [`Device::admin`]; [`Error::Protocol`] for an unknown state code.
    pub fn fw_status(&self) -> Result<FwStatus> {
        let r = self.admin(AdminCommand::FwStatus)?;
        let update_state = FwUpdateState::from_code(r[0] as u8)
            .ok_or_else(|| self.protocol("FW_STATUS: unknown update state"))?;
        Ok(FwStatus {
            running_slot: (r[0] >> 32) as u32,
            update_state,
            running_version: r[1] as u32,
            staged_version: r[2] as u32,
        })
    }
    /// FW_BEGIN.
    ///
    /// # Errors
    /// As [`Device::admin`].
    pub fn fw_begin(&self, body: FwBegin) -> Result<()> {
        self.admin(AdminCommand::FwBegin(body)).map(drop)
    }
    /// FW_CHUNK.
    ///
    /// # Errors
    /// As [`Device::admin`].
    pub fn fw_chunk(&self, body: FwChunk) -> Result<()> {
        self.admin(AdminCommand::FwChunk(body)).map(drop)
    }
    /// FW_COMMIT with the CRC-32 of the whole image.
    ///
    /// # Errors
    /// As [`Device::admin`].
    pub fn fw_commit(&self, crc32: u32) -> Result<()> {
        self.admin(AdminCommand::FwCommit(oid(crc32))).map(drop)
    }
    /// FW_CONFIRM.
    ///
    /// # Errors
    /// As [`Device::admin`].
    pub fn fw_confirm(&self) -> Result<()> {
        self.admin(AdminCommand::FwConfirm).map(drop)
    }
    /// FW_ROLLBACK.
    ///
    /// # Errors
    /// As [`Device::admin`].
    pub fn fw_rollback(&self) -> Result<()> {
        self.admin(AdminCommand::FwRollback).map(drop)
    }
}

/// The EV profile states a MODIFY may move between (INIT -> ONLINE <-> OFFLINE): the rule
/// lives in mrc-abi, shared with the device side.
pub use mrc_abi::device::admin::ev_profile_transition_ok;
