//! Admin command execution of a simulated NIC.

use mrc_abi::device::admin::body::*;
use mrc_abi::device::admin::{
    AdminCmd, AdminCommand, AdminReply, AdminStatus, EvProfileKind, EvProfileState, QpModify,
    QpState, ACCESS_REMOTE_WRITE, EVENT_MASK_EV_DENIED, FMT_TSX, FMT_USE_SRH,
};
use mrc_abi::device::event::Event;
use mrc_abi::device::regs::caps;
use mrc_abi::device::EvState;
use mrc_abi::wire::EvFormat;
use mrc_driver::device::ev_profile_transition_ok;
use mrc_driver::sys::Iova;
use mrc_driver::zerocopy::{FromBytes, IntoBytes};

use super::state::*;
use super::{World, ADMIN_CMD_BYTES};

/// A failed command: status and syndrome (byte offset of the field for attribute errors).
type Fail = (AdminStatus, u32);
type Res = Result<[u64; 3], Fail>;

const BODY: u32 = 8;
const OK: Res = Ok([0; 3]);

fn not_found(off: u32) -> Fail {
    (AdminStatus::NotFound, BODY + off)
}
fn bad_attr(off: u32) -> Fail {
    (AdminStatus::BadAttribute, BODY + off)
}
fn bad_state() -> Fail {
    (AdminStatus::BadState, 0)
}
fn in_use() -> Fail {
    (AdminStatus::InUse, 0)
}

/// Lowest free number in `1..limit` not in `used` nor in `also`. QPs and CQs share one
/// number space because doorbell page `n` holds the doorbells of QP `n` and of CQ `n`: with a
/// number in use by at most one queue, a page reaches exactly one queue, so it can be mapped
/// into one process without letting it ring another process's queue.
fn alloc_id<V, W>(
    used: &std::collections::BTreeMap<u32, V>,
    also: &std::collections::BTreeMap<u32, W>,
    limit: u32,
) -> Option<u32> {
    (1..limit).find(|i| !used.contains_key(i) && !also.contains_key(i))
}

impl World {
    /// The admin doorbell: run every command from the consumer index to `producer`.
    pub(crate) fn run_admin(&mut self, i: usize, producer: u32) {
        let nic = &self.nics[i];
        nic.reg_w(ADMIN + Q_PRODUCER, producer);
        if nic.reg(ADMIN + Q_STATUS) & 1 == 0 {
            return;
        }
        let log2 = nic.reg(ADMIN + Q_LOG2) as u8;
        let base = nic.reg64(ADMIN + Q_BASE_LO, ADMIN + Q_BASE_HI);
        let resp = nic.reg64(ADMIN + Q_RESP_LO, ADMIN + Q_RESP_HI);
        let mut cons = nic.reg(ADMIN + Q_CONSUMER);
        // A producer more than a ring ahead is a host bug: run at most one ring's worth.
        let mut budget = 1u32 << log2;
        while cons != producer && budget > 0 {
            budget -= 1;
            let slot = u64::from(cons & ((1 << log2) - 1));
            let mut raw = [0u8; ADMIN_CMD_BYTES as usize];
            let reply = if self.nics[i]
                .dev
                .dma_read(Iova(base + slot * ADMIN_CMD_BYTES), &mut raw)
                .is_err()
            {
                AdminReply {
                    command_id: 0,
                    status: AdminStatus::Internal,
                    syndrome: 0,
                    result: [0; 3],
                }
            } else {
                let cmd = AdminCmd::read_from_bytes(&raw).ok();
                let id = cmd.as_ref().map_or(0, |c| c.command_id.get());
                match cmd.map(|c| c.decode()) {
                    Some(Ok(c)) => {
                        let irq = raw[1] & mrc_abi::device::admin::CMD_IRQ != 0;
                        self.now_ns += 1_000;
                        let r = self.execute(i, c);
                        if irq {
                            let v = self.nics[i].reg(ADMIN + Q_IRQ);
                            self.nics[i].raise(v);
                        }
                        match r {
                            Ok(result) => AdminReply::ok(id, result),
                            Err((status, syndrome)) => AdminReply {
                                command_id: id,
                                status,
                                syndrome,
                                result: [0; 3],
                            },
                        }
                    }
                    Some(Err(e)) => AdminReply::rejected(id, e),
                    None => AdminReply {
                        command_id: 0,
                        status: AdminStatus::Internal,
                        syndrome: 0,
                        result: [0; 3],
                    },
                }
            };
            let nic = &mut self.nics[i];
            nic.counters.admin_commands += 1;
            if reply.status != AdminStatus::Ok {
                nic.counters.admin_errors += 1;
            }
            let r = reply.encode(mrc_abi::device::cqe::expected_owner(cons, log2));
            let _ = nic.dev.dma_write(Iova(resp + slot * 32), r.as_bytes());
            cons = cons.wrapping_add(1);
            nic.reg_w(ADMIN + Q_CONSUMER, cons);
        }
    }

    fn execute(&mut self, i: usize, cmd: AdminCommand) -> Res {
        use AdminCommand as C;
        let now = self.now_ns;
        let n = &mut self.nics[i];
        match cmd {
            C::QueryDevice => Ok([
                self.fw_version(i).into(),
                (1024u64 << 32) | 256,
                (1u64 << 24 << 32) | (1 << 16),
            ]),
            C::AllocPd => {
                let pd = n.next_pd;
                n.next_pd += 1;
                n.pds.insert(pd, ());
                Ok([pd.into(), 0, 0])
            }
            C::DeallocPd(b) => {
                let pd = b.id.get();
                if !n.pds.contains_key(&pd) {
                    return Err(not_found(0));
                }
                if n.mrs.values().any(|m| m.pd == pd) || n.qps.values().any(|q| q.pd == pd) {
                    return Err(in_use());
                }
                n.pds.remove(&pd);
                OK
            }
            C::RegMr(b) => {
                if !n.pds.contains_key(&b.pd.get()) {
                    return Err(not_found(0));
                }
                // The IOMMU must map the whole range: probe its first and last byte.
                let (iova, len) = (b.iova.get(), b.length.get());
                let mut byte = [0u8; 1];
                if n.dev.dma_read(Iova(iova), &mut byte).is_err()
                    || n.dev.dma_read(Iova(iova + len - 1), &mut byte).is_err()
                {
                    return Err(bad_attr(16));
                }
                if n.mrs.len() >= 1024 {
                    return Err((AdminStatus::NoResources, 0));
                }
                let lkey = n.next_mr << 8 | 0x5a;
                n.next_mr += 1;
                n.mrs.insert(
                    lkey,
                    Mr {
                        pd: b.pd.get(),
                        access: b.access.get(),
                        va: b.va.get(),
                        iova,
                        len,
                    },
                );
                Ok([lkey.into(), (lkey | RKEY_BIT).into(), 0])
            }
            C::DeregMr(b) => n
                .mrs
                .remove(&b.id.get())
                .map(|_| [0; 3])
                .ok_or(not_found(0)),
            C::CreateCq(b) => {
                let limit = n.params.max_cqs.min(n.params.doorbell_pages);
                let cqn = alloc_id(&n.cqs, &n.qps, limit).ok_or((AdminStatus::NoResources, 0))?;
                let vector = u32::from(b.irq_vector.get());
                if vector >= n.dev_vectors() {
                    return Err(bad_attr(2));
                }
                let mut probe = [0u8; 32];
                if n.dev.dma_read(Iova(b.base.get()), &mut probe).is_err() {
                    return Err(bad_attr(8));
                }
                n.cqs.insert(
                    cqn,
                    Cq {
                        base: b.base.get(),
                        log2: b.log2_entries,
                        vector,
                        producer: 0,
                        consumer: 0,
                        armed: None,
                    },
                );
                Ok([cqn.into(), 0, 0])
            }
            C::DestroyCq(b) => {
                let cqn = b.id.get();
                if !n.cqs.contains_key(&cqn) {
                    return Err(not_found(0));
                }
                if n.qps.values().any(|q| q.send_cq == cqn || q.recv_cq == cqn) {
                    return Err(in_use());
                }
                n.cqs.remove(&cqn);
                OK
            }
            C::CreateQp(b) => {
                if !n.pds.contains_key(&b.pd.get()) {
                    return Err(not_found(0));
                }
                if !n.cqs.contains_key(&b.send_cq.get()) {
                    return Err(not_found(4));
                }
                if !n.cqs.contains_key(&b.recv_cq.get()) {
                    return Err(not_found(8));
                }
                let limit = n.params.max_qps.min(n.params.doorbell_pages);
                let qpn = alloc_id(&n.qps, &n.cqs, limit).ok_or((AdminStatus::NoResources, 0))?;
                n.qps.insert(
                    qpn,
                    Qp {
                        pd: b.pd.get(),
                        send_cq: b.send_cq.get(),
                        recv_cq: b.recv_cq.get(),
                        sq_base: b.sq_base.get(),
                        sq_log2: b.sq_log2,
                        rq_base: b.rq_base.get(),
                        rq_log2: b.rq_log2,
                        state: QpState::Reset,
                        sq_prod: 0,
                        sq_cons: 0,
                        rq_prod: 0,
                        rq_cons: 0,
                        dest_qpn: 0,
                        remote_addr: [0; 16],
                        ev_profile: 0,
                        cc_profile: 0,
                        sq_psn: 0,
                        rq_psn: 0,
                    },
                );
                Ok([qpn.into(), 0, 0])
            }
            C::ModifyQp(m) => self.modify_qp(i, m),
            C::QueryQp(b) => {
                let q = n.qps.get(&b.id.get()).ok_or(not_found(0))?;
                Ok([
                    q.state as u64,
                    (u64::from(q.sq_psn) << 32) | u64::from(q.rq_psn),
                    n.usable_evs(q.ev_profile).into(),
                ])
            }
            C::DestroyQp(b) => n
                .qps
                .remove(&b.id.get())
                .map(|_| [0; 3])
                .ok_or(not_found(0)),
            C::SetPortAdminState(b) => {
                let p = usize::from(b.port);
                if p >= n.port_admin.len() {
                    return Err(not_found(0));
                }
                let up = b.up == 1;
                if n.port_admin[p] != up {
                    let was = n.port_admin[p] && n.port_link[p];
                    n.port_admin[p] = up;
                    n.publish_port(p);
                    let oper = up && n.port_link[p];
                    if oper != was {
                        let plane = n.port_plane(p);
                        let ev = if oper {
                            Event::PortUp {
                                port: b.port,
                                plane,
                                speed_mbps: PORT_SPEED_MBPS,
                            }
                        } else {
                            Event::PortDown {
                                port: b.port,
                                plane,
                            }
                        };
                        n.post_event(ev, now);
                    }
                }
                OK
            }
            C::QueryPort(b) => {
                let p = b.id.get() as usize;
                if p >= n.port_admin.len() {
                    return Err(not_found(0));
                }
                let oper = n.port_admin[p] && n.port_link[p];
                Ok([
                    (u64::from(n.port_admin[p]) << 32) | u64::from(oper),
                    if oper { PORT_SPEED_MBPS.into() } else { 0 },
                    n.port_plane(p).into(),
                ])
            }
            C::CreateEvFormatProfile(b) => {
                check_format(n.params.capabilities, &b)?;
                let id = n.next_profile;
                n.next_profile += 1;
                n.formats.insert(id, EvFormatProfile { id: id.into(), ..b });
                Ok([id.into(), 0, 0])
            }
            C::ModifyEvFormatProfile(b) => {
                check_format(n.params.capabilities, &b)?;
                let slot = n.formats.get_mut(&b.id.get()).ok_or(not_found(0))?;
                *slot = b;
                OK
            }
            C::DestroyEvFormatProfile(b) => {
                let id = b.id.get();
                if !n.formats.contains_key(&id) {
                    return Err(not_found(0));
                }
                if n.ev_profiles.values().any(|p| p.format == id) {
                    return Err(in_use());
                }
                n.formats.remove(&id);
                OK
            }
            C::CreateEvProfile(b) => {
                let fmt = *n.formats.get(&b.format_profile.get()).ok_or(not_found(4))?;
                let num = b.num_evs.get();
                if u32::from(num) > n.params.max_evs_per_qp {
                    return Err(bad_attr(12));
                }
                // Decode validated the kind and state codes.
                let kind = EvProfileKind::from_code(b.kind).ok_or(bad_attr(8))?;
                let id = n.next_profile;
                n.next_profile += 1;
                let evs = super::state::NicState::make_evs(&fmt, kind, num, b.seed.get());
                n.ev_profiles.insert(
                    id,
                    EvProf {
                        format: b.format_profile.get(),
                        kind,
                        state: EvProfileState::Init,
                        min_active: b.min_active_evs.get(),
                        event_mask: b.event_mask.get(),
                        evs,
                    },
                );
                Ok([id.into(), 0, 0])
            }
            C::ModifyEvProfile(b) => {
                let p = n.ev_profiles.get_mut(&b.id.get()).ok_or(not_found(0))?;
                if b.kind != p.kind as u8 {
                    return Err(bad_attr(8));
                }
                if usize::from(b.num_evs.get()) != p.evs.len() {
                    return Err(bad_attr(12));
                }
                if b.format_profile.get() != p.format {
                    return Err(bad_attr(4));
                }
                let to = EvProfileState::from_code(b.state).ok_or(bad_attr(9))?;
                if !ev_profile_transition_ok(p.state, to) {
                    return Err(bad_state());
                }
                p.state = to;
                p.min_active = b.min_active_evs.get();
                p.event_mask = b.event_mask.get();
                OK
            }
            C::DestroyEvProfile(b) => {
                let id = b.id.get();
                if !n.ev_profiles.contains_key(&id) {
                    return Err(not_found(0));
                }
                if n.qps.values().any(|q| q.ev_profile == id) {
                    return Err(in_use());
                }
                n.ev_profiles.remove(&id);
                OK
            }
            C::DenyEv(b) => {
                let pid = b.profile.get();
                let p = n.ev_profiles.get_mut(&pid).ok_or(not_found(0))?;
                let idx = usize::from(b.ev_index.get());
                let ev = p.evs.get_mut(idx).ok_or(bad_attr(4))?;
                let old = ev.state;
                let new = if b.deny == 1 {
                    EvState::Denied
                } else if old == EvState::Denied {
                    EvState::Good
                } else {
                    old
                };
                ev.state = new;
                let report = p.event_mask & EVENT_MASK_EV_DENIED != 0 && old != new;
                if report {
                    let qpns: Vec<u32> = n
                        .qps
                        .iter()
                        .filter(|(_, q)| q.ev_profile == pid && q.state != QpState::Reset)
                        .map(|(k, _)| *k)
                        .collect();
                    for qpn in qpns {
                        n.post_event(
                            Event::EvStateChange {
                                qpn,
                                ev_index: b.ev_index.get(),
                                old,
                                new,
                            },
                            now,
                        );
                    }
                }
                OK
            }
            C::ReplaceEv(b) => {
                let p = n.ev_profiles.get(&b.profile.get()).ok_or(not_found(0))?;
                if p.kind != EvProfileKind::Explicit {
                    return Err(bad_state());
                }
                let fmt = n.formats.get(&p.format).copied().ok_or(bad_state())?;
                let srv6 = fmt.encoding() == Some(EvFormat::Srv6);
                let carrier_set = b.carrier.iter().any(|x| *x != 0);
                if srv6 != carrier_set {
                    return Err(bad_attr(if srv6 { 12 } else { 8 }));
                }
                if srv6 && b.carrier[..4] != fmt.locator_block.get().to_be_bytes() {
                    return Err(bad_attr(12));
                }
                if !srv6
                    && !(u32::from(fmt.src_port_min.get())..=u32::from(fmt.src_port_max.get()))
                        .contains(&b.value.get())
                {
                    return Err(bad_attr(8));
                }
                let p = n
                    .ev_profiles
                    .get_mut(&b.profile.get())
                    .ok_or(not_found(0))?;
                let ev = p
                    .evs
                    .get_mut(usize::from(b.ev_index.get()))
                    .ok_or(bad_attr(4))?;
                ev.value = b.value.get();
                ev.carrier = b.carrier;
                OK
            }
            C::QueryEv(b) => {
                let p = n.ev_profiles.get(&b.profile.get()).ok_or(not_found(0))?;
                let ev = p
                    .evs
                    .get(usize::from(b.ev_index.get()))
                    .ok_or(bad_attr(4))?;
                let value = if ev.value != 0 {
                    u64::from(ev.value)
                } else {
                    u64::from_be_bytes(ev.carrier[8..16].try_into().unwrap_or([0; 8]))
                };
                Ok([ev.state as u64, value, ev.rtt_ns.into()])
            }
            C::ProbeEv(b) => self.probe_ev(i, b),
            C::CreateCcProfile(b) => {
                let id = n.next_profile;
                n.next_profile += 1;
                n.cc_profiles.insert(id, CcProfile { id: id.into(), ..b });
                Ok([id.into(), 0, 0])
            }
            C::ModifyCcProfile(b) => {
                let slot = n.cc_profiles.get_mut(&b.id.get()).ok_or(not_found(0))?;
                *slot = b;
                OK
            }
            C::DestroyCcProfile(b) => {
                let id = b.id.get();
                if !n.cc_profiles.contains_key(&id) {
                    return Err(not_found(0));
                }
                if n.qps.values().any(|q| q.cc_profile == id) {
                    return Err(in_use());
                }
                n.cc_profiles.remove(&id);
                OK
            }
            C::FwStatus
            | C::FwBegin(_)
            | C::FwChunk(_)
            | C::FwCommit(_)
            | C::FwConfirm
            | C::FwRollback => self.fw_execute(i, cmd),
        }
    }

    fn modify_qp(&mut self, i: usize, m: QpModify) -> Res {
        let now = self.now_ns;
        let n = &mut self.nics[i];
        let qpn = match m {
            QpModify::Init(b) => b.qpn.get(),
            QpModify::Rtr(b) => b.qpn.get(),
            QpModify::Rts(b) => b.qpn.get(),
            QpModify::Reset(b) => b.qpn.get(),
        };
        let q = *n.qps.get(&qpn).ok_or(not_found(0))?;
        let mut q2 = q;
        match m {
            QpModify::Init(b) => {
                if q.state != QpState::Reset {
                    return Err(bad_state());
                }
                let ev = b.ev_profile.get();
                if ev != 0 {
                    let p = n.ev_profiles.get(&ev).ok_or(not_found(8))?;
                    if p.state == EvProfileState::Init {
                        return Err(bad_state());
                    }
                    if p.evs.len() as u32 > n.params.max_evs_per_qp {
                        return Err(bad_attr(8));
                    }
                }
                let cc = b.cc_profile.get();
                if cc != 0 && !n.cc_profiles.contains_key(&cc) {
                    return Err(not_found(12));
                }
                q2.ev_profile = ev;
                q2.cc_profile = cc;
                q2.state = QpState::Init;
            }
            QpModify::Rtr(b) => {
                if q.state != QpState::Init {
                    return Err(bad_state());
                }
                if b.flags != 0 && n.params.capabilities & caps::DYNAMIC_MPR == 0 {
                    return Err(bad_attr(5));
                }
                if b.remote_addr == [0; 16] {
                    return Err(bad_attr(20));
                }
                q2.dest_qpn = b.dest_qpn.get();
                q2.remote_addr = b.remote_addr;
                q2.rq_psn = b.rq_psn.get();
                q2.state = QpState::Rtr;
            }
            QpModify::Rts(b) => {
                if q.state != QpState::Rtr {
                    return Err(bad_state());
                }
                q2.sq_psn = b.sq_psn.get();
                q2.state = QpState::Rts;
            }
            QpModify::Reset(b) => {
                let to = QpState::from_code(b.to_state).ok_or(bad_attr(4))?;
                q2.state = to;
                if to == QpState::Reset {
                    // Pending work is dropped; the rings restart where the host is.
                    q2.sq_cons = q.sq_prod;
                    q2.rq_cons = q.rq_prod;
                }
            }
        }
        n.qps.insert(qpn, q2);
        if q2.state == QpState::Error && q.state != QpState::Error {
            self.flush(i, qpn, now);
        }
        OK
    }

    fn probe_ev(&mut self, i: usize, b: ProbeEv) -> Res {
        let now = self.now_ns;
        let n = &mut self.nics[i];
        let q = n.qps.get(&b.qpn.get()).ok_or(not_found(0))?;
        if q.state != QpState::Rts {
            return Err(bad_state());
        }
        let idx = b.ev_index.get();
        let pid = q.ev_profile;
        let (replied, rtt_ns) = if pid == 0 {
            if u32::from(idx) >= n.params.max_evs_per_qp {
                return Err(bad_attr(4));
            }
            (true, 2_000 + 8 * u32::from(idx))
        } else {
            let p = n.ev_profiles.get_mut(&pid).ok_or(bad_state())?;
            let ev = p.evs.get_mut(usize::from(idx)).ok_or(bad_attr(4))?;
            // Loopback model: a fixed base RTT plus a per-EV path offset; denied EVs are not
            // sent on, so their probe is lost.
            let replied = ev.state != EvState::Denied;
            let rtt = if replied {
                2_000 + 8 * u32::from(idx)
            } else {
                0
            };
            if replied {
                ev.rtt_ns = rtt;
            }
            (replied, rtt)
        };
        n.post_event(
            Event::EvProbeResult {
                qpn: b.qpn.get(),
                ev_index: idx,
                probe_id: b.probe_id.get(),
                rtt_ns,
                replied,
            },
            now,
        );
        OK
    }
}

fn check_format(capabilities: u32, b: &EvFormatProfile) -> Result<(), Fail> {
    let need = match b.encoding() {
        Some(EvFormat::Udp) => caps::EV_UDP,
        Some(EvFormat::Stev) => caps::EV_STEV,
        Some(EvFormat::Srv6) => caps::EV_SRV6,
        None => return Err(bad_attr(4)),
    };
    if capabilities & need == 0 {
        return Err(bad_attr(4));
    }
    if b.flags & FMT_USE_SRH != 0 && capabilities & caps::SRH == 0 {
        return Err(bad_attr(5));
    }
    if b.flags & FMT_TSX != 0 && capabilities & caps::TSX == 0 {
        return Err(bad_attr(5));
    }
    if b.encoding() == Some(EvFormat::Srv6) && b.locator_block.get() == 0 {
        return Err(bad_attr(8));
    }
    Ok(())
}

/// Remote write permission of an MR.
pub(crate) fn remote_writable(mr: &Mr) -> bool {
    mr.access & ACCESS_REMOTE_WRITE != 0
}
