extern crate std;
use super::*;
use proptest::prelude::*;

#[test]
fn byte_literal_rts() {
    let rts = QpRts {
        qpn: 0x12.into(),
        to_state: QpState::Rts as u8,
        retry_count: 7,
        requester_mpr: 4.into(),
        max_wimm: 8.into(),
        ack_timeout_exp: 14,
        rsvd: 0,
        sq_psn: 0x00AB_CDEF.into(),
    };
    let cmd = AdminCommand::ModifyQp(QpModify::Rts(rts)).encode(0x0102, CMD_IRQ);
    let b = cmd.as_bytes();
    assert_eq!(&b[..8], &[0x09, 1, 0x02, 0x01, 0, 0, 0, 0]);
    assert_eq!(
        &b[8..24],
        &[0x12, 0, 0, 0, 3, 7, 4, 0, 8, 0, 14, 0, 0xEF, 0xCD, 0xAB, 0]
    );
    assert!(all_zero(&b[24..]));
    assert_eq!(
        AdminCmd::ref_from(b).unwrap().decode(),
        Ok(AdminCommand::ModifyQp(QpModify::Rts(rts)))
    );
    assert_eq!(rts.requester_window_psns(), 512);

    let mut bad = cmd;
    bad.body[5] = 26; // retry count 26
    assert_eq!(bad.decode(), Err(AdminError::BadAttribute(13)));
    let mut bad = cmd;
    bad.body[10] = 25; // ACK timeout exponent 25
    assert_eq!(bad.decode(), Err(AdminError::BadAttribute(18)));
    let mut bad = cmd;
    bad.body[40] = 1;
    assert_eq!(bad.decode(), Err(AdminError::ReservedSet(48)));
    let mut bad = cmd;
    bad.opcode = 0x7F;
    assert_eq!(bad.decode(), Err(AdminError::UnknownOpcode(0x7F)));
    let mut bad = cmd;
    bad.flags = 0x80;
    assert_eq!(bad.decode(), Err(AdminError::ReservedSet(1)));
    assert_eq!(
        AdminError::BadAttribute(13).status(),
        (AdminStatus::BadAttribute, 13)
    );
}

#[test]
fn response_byte_literal() {
    let r = AdminReply::ok(7, [0x11, 0x22, 0]).encode(true);
    assert_eq!(
        &r.as_bytes()[..12],
        &[0, 1, 7, 0, 0, 0, 0, 0, 0x11, 0, 0, 0]
    );
    assert_eq!(r.decode(), Ok(AdminReply::ok(7, [0x11, 0x22, 0])));
    let e = AdminReply::rejected(9, AdminError::UnknownOpcode(0x7F)).encode(false);
    assert_eq!(e.decode().unwrap().status, AdminStatus::UnknownOpcode);
}

#[test]
fn retry_and_timeout_rules() {
    assert_eq!(retry_backoff_factor(7, 7), Some(1));
    assert_eq!(retry_backoff_factor(7, 8), None);
    assert_eq!(retry_backoff_factor(10, 9), Some(4));
    assert_eq!(retry_backoff_factor(10, 11), None);
    assert_eq!(retry_backoff_factor(25, 1_000_000), Some(1 << 16));
    assert_eq!(ack_timeout_ns(0), Some(1024));
    assert_eq!(ack_timeout_ns(24), Some(1024 << 24));
    assert_eq!(ack_timeout_ns(25), None);
}

/// A valid command of opcode `op` built from random bytes by clamping every field into range.
fn valid(op: Opcode, raw: [u8; BODY_BYTES]) -> AdminCommand {
    use AdminCommand as C;
    fn rd<T: FromBytes>(raw: &[u8; BODY_BYTES]) -> T {
        T::read_from_prefix(raw).unwrap().0
    }
    let qpn = |v: U32| U32::new(v.get() % QPN_LIMIT);
    let id = |raw: &[u8; BODY_BYTES]| rd::<ObjectId>(raw);
    match op {
        Opcode::QueryDevice => C::QueryDevice,
        Opcode::QueryLimits => C::QueryLimits,
        Opcode::AllocPd => C::AllocPd,
        Opcode::FwStatus => C::FwStatus,
        Opcode::FwConfirm => C::FwConfirm,
        Opcode::FwRollback => C::FwRollback,
        Opcode::DeallocPd => C::DeallocPd(id(&raw)),
        Opcode::DeregMr => C::DeregMr(id(&raw)),
        Opcode::DestroyCq => C::DestroyCq(id(&raw)),
        Opcode::QueryQp => C::QueryQp(ObjectId {
            id: qpn(id(&raw).id),
        }),
        Opcode::DestroyQp => C::DestroyQp(ObjectId {
            id: qpn(id(&raw).id),
        }),
        Opcode::QueryPort => C::QueryPort(ObjectId {
            id: u32::from(raw[0]).into(),
        }),
        Opcode::DestroyEvFormatProfile => C::DestroyEvFormatProfile(id(&raw)),
        Opcode::DestroyEvProfile => C::DestroyEvProfile(id(&raw)),
        Opcode::DestroyCcProfile => C::DestroyCcProfile(id(&raw)),
        Opcode::FwCommit => C::FwCommit(id(&raw)),
        Opcode::RegMr => {
            let mut b: RegMr = rd(&raw);
            b.access = (b.access.get() & ACCESS_ALL).into();
            b.length = (b.length.get() >> 20).max(1).into();
            b.va = (b.va.get() >> 1).into();
            b.iova = (b.iova.get() >> 1).into();
            C::RegMr(b)
        }
        Opcode::CreateCq => {
            let mut b: CreateCq = rd(&raw);
            b.log2_entries = b.log2_entries % 24 + 1;
            b.rsvd = 0;
            b.rsvd2 = 0.into();
            b.base = (b.base.get() & !31).into();
            C::CreateCq(b)
        }
        Opcode::CreateQp => {
            let mut b: CreateQp = rd(&raw);
            b.sq_log2 = b.sq_log2 % 16 + 1;
            b.rq_log2 = b.rq_log2 % 16 + 1;
            b.rsvd = 0.into();
            b.sq_base = (b.sq_base.get() & !63).into();
            b.rq_base = (b.rq_base.get() & !31).into();
            C::CreateQp(b)
        }
        Opcode::ModifyQp => C::ModifyQp(match raw[55] % 5 {
            0 => {
                let mut b: QpInit = rd(&raw);
                (b.qpn, b.to_state, b.dscp) = (qpn(b.qpn), 1, b.dscp % 64);
                b.hint_flags = (b.hint_flags.get() & 3).into();
                QpModify::Init(b)
            }
            1 => {
                let mut b: QpRtr = rd(&raw);
                (b.qpn, b.to_state, b.flags) = (qpn(b.qpn), 2, b.flags & RTR_DYNAMIC_MPR);
                b.responder_mpr = b.responder_mpr.get().max(1).into();
                b.dest_qpn = qpn(b.dest_qpn);
                b.max_wimm = b.max_wimm.get().max(1).into();
                b.rsvd = 0.into();
                b.rq_psn = qpn(b.rq_psn);
                QpModify::Rtr(b)
            }
            2 => {
                let mut b: QpRts = rd(&raw);
                (b.qpn, b.to_state, b.retry_count) = (qpn(b.qpn), 3, b.retry_count % 26);
                b.requester_mpr = b.requester_mpr.get().max(1).into();
                b.max_wimm = b.max_wimm.get().max(1).into();
                (b.ack_timeout_exp, b.rsvd, b.sq_psn) = (b.ack_timeout_exp % 25, 0, qpn(b.sq_psn));
                QpModify::Rts(b)
            }
            s => QpModify::Reset(QpReset {
                qpn: qpn(rd::<QpReset>(&raw).qpn),
                to_state: if s == 3 { 0 } else { 4 },
                rsvd: [0; 3],
            }),
        }),
        Opcode::SetPortAdminState => C::SetPortAdminState(PortAdmin {
            port: raw[0],
            up: raw[1] & 1,
            rsvd: 0.into(),
        }),
        Opcode::CreateEvFormatProfile | Opcode::ModifyEvFormatProfile => {
            let mut b: EvFormatProfile = rd(&raw);
            let create = op == Opcode::CreateEvFormatProfile;
            if create {
                b.id = 0.into();
            }
            (b.encoding, b.flags, b.dscp, b.hop_limit) =
                (b.encoding % 3, b.flags & 3, b.dscp % 64, b.hop_limit.max(1));
            if b.src_port_min.get() > b.src_port_max.get() {
                core::mem::swap(&mut b.src_port_min, &mut b.src_port_max);
            }
            if create {
                C::CreateEvFormatProfile(b)
            } else {
                C::ModifyEvFormatProfile(b)
            }
        }
        Opcode::CreateEvProfile | Opcode::ModifyEvProfile => {
            let mut b: EvProfile = rd(&raw);
            let create = op == Opcode::CreateEvProfile;
            (b.kind, b.state) = (b.kind % 3, if create { 0 } else { b.state % 3 });
            if create {
                b.id = 0.into();
            }
            let n = b.num_evs.get() % MAX_EVS_PER_PROFILE + 1;
            b.num_evs = n.into();
            b.min_active_evs = (b.min_active_evs.get() % n + 1).into();
            b.rsvd = 0.into();
            b.event_mask = (b.event_mask.get() & EVENT_MASK_ALL).into();
            if create {
                C::CreateEvProfile(b)
            } else {
                C::ModifyEvProfile(b)
            }
        }
        Opcode::DenyEv | Opcode::QueryEv => {
            let mut b: EvRef = rd(&raw);
            b.ev_index = (b.ev_index.get() % MAX_EVS_PER_PROFILE).into();
            b.rsvd = 0;
            if op == Opcode::DenyEv {
                b.deny &= 1;
                C::DenyEv(b)
            } else {
                b.deny = 0;
                C::QueryEv(b)
            }
        }
        Opcode::ReplaceEv => {
            let mut b: ReplaceEv = rd(&raw);
            b.ev_index = (b.ev_index.get() % MAX_EVS_PER_PROFILE).into();
            b.rsvd = 0.into();
            if raw[55] & 1 == 0 {
                b.carrier = [0; 16];
            } else {
                b.value = 0.into();
            }
            C::ReplaceEv(b)
        }
        Opcode::ProbeEv => {
            let mut b: ProbeEv = rd(&raw);
            b.qpn = qpn(b.qpn);
            b.rsvd = 0.into();
            b.timeout_us = b.timeout_us.get().max(1).into();
            C::ProbeEv(b)
        }
        Opcode::CreateCcProfile | Opcode::ModifyCcProfile => {
            let mut b: CcProfile = rd(&raw);
            let create = op == Opcode::CreateCcProfile;
            if create {
                b.id = 0.into();
            }
            b.gamma_q16 = (b.gamma_q16.get() % 0x10000 + 1).into();
            b.max_md_jump_q16 = (b.max_md_jump_q16.get() % 0x10000 + 1).into();
            b.target_qdelay_ns = b.target_qdelay_ns.get().max(1).into();
            b.base_rtt_ns = b.base_rtt_ns.get().max(1).into();
            if create {
                C::CreateCcProfile(b)
            } else {
                C::ModifyCcProfile(b)
            }
        }
        Opcode::FwBegin => {
            let mut b: FwBegin = rd(&raw);
            b.magic = FW_IMAGE_MAGIC.into();
            b.size = b.size.get().max(1).into();
            C::FwBegin(b)
        }
        Opcode::FwChunk => {
            let mut b: FwChunk = rd(&raw);
            b.len = (b.len.get() % 65536 + 1).into();
            b.offset = (b.offset.get() >> 1).into();
            C::FwChunk(b)
        }
    }
}

fn raw_body() -> impl Strategy<Value = [u8; BODY_BYTES]> {
    proptest::collection::vec(any::<u8>(), BODY_BYTES).prop_map(|v| v.try_into().unwrap())
}

proptest! {
    #[test]
    fn every_command_round_trips(op in proptest::sample::select(Opcode::ALL), raw in raw_body(), id: u16, irq: bool) {
        let cmd = valid(op, raw);
        prop_assert_eq!(cmd.opcode(), op);
        let enc = cmd.encode(id, if irq { CMD_IRQ } else { 0 });
        prop_assert_eq!(enc.command_id.get(), id);
        prop_assert_eq!(enc.decode(), Ok(cmd));
    }

    #[test]
    fn random_commands_never_panic(op in proptest::sample::select(Opcode::ALL), raw in raw_body(), cut in 0usize..=BODY_BYTES) {
        // Random opcode with a random prefix of the body: exercises every validator.
        let mut body = [0u8; BODY_BYTES];
        body[..cut].copy_from_slice(&raw[..cut]);
        let cmd = AdminCmd { opcode: op as u8, flags: 0, command_id: 0.into(), rsvd: 0.into(), body };
        if let Ok(c) = cmd.decode() {
            prop_assert_eq!(c.encode(0, 0), cmd);
        }
        let mut any64 = [0u8; 64];
        any64[8..].copy_from_slice(&raw);
        any64[0] = raw[0];
        let _ = AdminCmd::ref_from(&any64).unwrap().decode();
    }

    #[test]
    fn responses_round_trip(id: u16, st in proptest::sample::select(AdminStatus::ALL), syndrome: u32, r: [u64; 3], owner: bool) {
        let reply = AdminReply { command_id: id, status: st, syndrome, result: r };
        let e = reply.encode(owner);
        prop_assert_eq!(e.owner(), owner);
        prop_assert_eq!(e.decode(), Ok(reply));
    }

    #[test]
    fn random_responses_never_panic(b in proptest::collection::vec(any::<u8>(), 32)) {
        let r = AdminResp::read_from_bytes(&b).unwrap();
        if let Ok(reply) = r.decode() {
            let enc = reply.encode(r.owner());
            prop_assert_eq!(enc.as_bytes(), &b[..]);
        }
    }
}
