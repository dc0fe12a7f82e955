use super::*;
use crate::ctypes::verbs::ibv_gid;
use crate::error::EINVAL;

const L: QpLimits = QpLimits {
    num_ports: 4,
    gid_tbl_len: 4,
    max_mpr: 4,
    max_wimm: 32,
    max_wimm_dest: 32,
    dynamic_mpr: true,
    trim_nack: true,
};

fn gid(last: u8) -> ibv_gid {
    let mut raw = [0u8; 16];
    raw[0] = 0xfd;
    raw[15] = last;
    ibv_gid { raw }
}

/// Applies a planned modify as the device would (always succeeding).
fn step(
    cur: &QpAttrs,
    v: &ibv_qp_attr,
    vmask: u32,
    mr: &mrc_qp_attr,
    mmask: u32,
) -> Result<(QpAttrs, Transition)> {
    plan_modify(cur, Some(v), vmask, Some(mr), mmask, &L)
}

/// OCP's benchmark: INIT with STATE | PKEY_INDEX | PORT | ACCESS_FLAGS and no MRC attribute;
/// RTR with AV | DEST_QPN | RQ_PSN | PATH_MTU; RTS with SQ_PSN | RETRY_CNT | RNR_RETRY | TIMEOUT.
#[test]
fn ocp_benchmark_sequence_reaches_rts_with_defaults() {
    let none = mrc_qp_attr::default();
    let a0 = QpAttrs::new(&L);
    let v = ibv_qp_attr {
        qp_state: qp_state::IBV_QPS_INIT,
        port_num: 1,
        qp_access_flags: access::IBV_ACCESS_LOCAL_WRITE | access::IBV_ACCESS_REMOTE_WRITE,
        ..Default::default()
    };
    let mask = m::IBV_QP_STATE | m::IBV_QP_PKEY_INDEX | m::IBV_QP_PORT | m::IBV_QP_ACCESS_FLAGS;
    let (a1, t) = step(&a0, &v, mask, &none, 0).unwrap();
    assert_eq!(t, Transition::Init(0, 0, 0));
    assert_eq!(a1.state, QpState::Init);

    let mut v = ibv_qp_attr {
        qp_state: qp_state::IBV_QPS_RTR,
        path_mtu: mtu::IBV_MTU_4096,
        dest_qp_num: 0x12,
        rq_psn: 0xabcdef,
        ..Default::default()
    };
    v.ah_attr.is_global = 1;
    v.ah_attr.grh.dgid = gid(2);
    v.ah_attr.grh.sgid_index = 3;
    v.ah_attr.port_num = 1;
    let mask =
        m::IBV_QP_STATE | m::IBV_QP_AV | m::IBV_QP_DEST_QPN | m::IBV_QP_RQ_PSN | m::IBV_QP_PATH_MTU;
    let (a2, t) = step(&a1, &v, mask, &none, 0).unwrap();
    assert_eq!(
        t,
        Transition::Rtr(RtrAttr {
            dest_qpn: 0x12,
            remote_addr: gid(2).raw,
            rq_psn: 0xabcdef,
            responder_mpr: 4,
            max_wimm: 32,
            dynamic_mpr: false,
        })
    );

    let v = ibv_qp_attr {
        qp_state: qp_state::IBV_QPS_RTS,
        sq_psn: 0x123,
        timeout: 7,
        retry_cnt: 14,
        rnr_retry: 14,
        ..Default::default()
    };
    let mask = m::IBV_QP_STATE
        | m::IBV_QP_SQ_PSN
        | m::IBV_QP_RETRY_CNT
        | m::IBV_QP_RNR_RETRY
        | m::IBV_QP_TIMEOUT;
    let (a3, t) = step(&a2, &v, mask, &none, 0).unwrap();
    assert_eq!(
        t,
        Transition::Rts(RtsAttr {
            sq_psn: 0x123,
            requester_mpr: 4,
            max_wimm: 32,
            retry_count: RETRY_FOREVER,
            ack_timeout_exp: QpDefaults::TIMEOUT,
        }),
        "the verbs timeout/retry are ignored; the MRC defaults apply"
    );
    assert_eq!(a3.state, QpState::Rts);
}

/// OCP's `mrc_qp.md`: the RTR call also carries the requester's MPR and max WIMM, which are
/// kept for RTS.
#[test]
fn attributes_given_early_are_kept_for_their_transition() {
    let a = QpAttrs {
        state: QpState::Init,
        have_av: true,
        have_dest_qpn: true,
        ..QpAttrs::new(&L)
    };
    let v = ibv_qp_attr {
        qp_state: qp_state::IBV_QPS_RTR,
        ..Default::default()
    };
    let mut mr = mrc_qp_attr::default();
    mr.mpr.mpr = 2;
    mr.mpr.mpr_dest = 3;
    mr.wimm.max_wimm = 5;
    mr.wimm.max_wimm_dest = 6;
    mr.cap = qp_cap::MRC_QP_CAP_DYNAMIC_MPR;
    let mask = qp_mask::MRC_QP_MPR
        | qp_mask::MRC_QP_MPR_DEST
        | qp_mask::MRC_QP_MAX_WIMM
        | qp_mask::MRC_QP_MAX_WIMM_DEST
        | qp_mask::MRC_QP_CAP;
    let (a, t) = step(&a, &v, m::IBV_QP_STATE, &mr, mask).unwrap();
    let Transition::Rtr(r) = t else {
        panic!("{t:?}")
    };
    assert_eq!((r.responder_mpr, r.max_wimm, r.dynamic_mpr), (3, 6, true));
    let v = ibv_qp_attr {
        qp_state: qp_state::IBV_QPS_RTS,
        ..Default::default()
    };
    let (_, t) = step(&a, &v, m::IBV_QP_STATE, &mrc_qp_attr::default(), 0).unwrap();
    let Transition::Rts(r) = t else {
        panic!("{t:?}")
    };
    assert_eq!((r.requester_mpr, r.max_wimm), (2, 5));
}

#[test]
fn attributes_past_their_transition_are_refused() {
    let rts = QpAttrs {
        state: QpState::Rts,
        ..QpAttrs::new(&L)
    };
    let mut mr = mrc_qp_attr::default();
    mr.mpr.mpr = 1;
    let e = step(&rts, &ibv_qp_attr::default(), 0, &mr, qp_mask::MRC_QP_MPR).unwrap_err();
    assert_eq!(e.errno, EINVAL);
    assert!(e.message.contains("cannot change"), "{}", e.message);
    let e = step(
        &rts,
        &ibv_qp_attr::default(),
        0,
        &mr,
        qp_mask::MRC_QP_EV_PROFILE_ID,
    )
    .unwrap_err();
    assert!(e.message.contains("Init"), "{}", e.message);
    // RESET -> INIT cannot carry an attribute of RTR that it skips? It can: kept for later.
    let r = QpAttrs::new(&L);
    let v = ibv_qp_attr {
        qp_state: qp_state::IBV_QPS_INIT,
        dest_qp_num: 9,
        ..Default::default()
    };
    let (a, _) = step(&r, &v, m::IBV_QP_STATE | m::IBV_QP_DEST_QPN, &mr, 0).unwrap();
    assert!(a.have_dest_qpn && a.dest_qpn == 9);
}

#[test]
fn bad_masks_and_values_name_the_attribute() {
    let a = QpAttrs::new(&L);
    let v = ibv_qp_attr {
        qp_state: qp_state::IBV_QPS_INIT,
        ..Default::default()
    };
    let none = mrc_qp_attr::default();
    let cases: Vec<(u32, u32, ibv_qp_attr, mrc_qp_attr, &str)> = vec![
        (1 << 22, 0, v, none, "no enum ibv_qp_attr_mask"),
        (m::IBV_QP_QKEY, 0, v, none, "IBV_QP_QKEY"),
        (m::IBV_QP_CAP, 0, v, none, "IBV_QP_CAP"),
        (
            m::IBV_QP_STATE,
            1 << 12,
            v,
            none,
            "no enum mrc_qp_attr_mask",
        ),
        (
            m::IBV_QP_STATE,
            0,
            ibv_qp_attr {
                qp_state: qp_state::IBV_QPS_RTS,
                ..v
            },
            none,
            "no QP transition",
        ),
        (
            m::IBV_QP_STATE,
            0,
            ibv_qp_attr {
                qp_state: qp_state::IBV_QPS_SQD,
                ..v
            },
            none,
            "SQD",
        ),
        (
            m::IBV_QP_STATE | m::IBV_QP_PORT,
            0,
            ibv_qp_attr { port_num: 5, ..v },
            none,
            "port_num 5",
        ),
        (
            m::IBV_QP_STATE | m::IBV_QP_ACCESS_FLAGS,
            0,
            ibv_qp_attr {
                qp_access_flags: access::IBV_ACCESS_REMOTE_ATOMIC,
                ..v
            },
            none,
            "qp_access_flags",
        ),
        (
            m::IBV_QP_STATE | m::IBV_QP_CUR_STATE,
            0,
            ibv_qp_attr {
                cur_qp_state: qp_state::IBV_QPS_RTS,
                ..v
            },
            none,
            "cur_qp_state",
        ),
        (
            m::IBV_QP_STATE,
            qp_mask::MRC_QP_MPR,
            v,
            mrc_qp_attr {
                mpr: crate::ctypes::mrc::mrc_qp_attr_mpr {
                    mpr: 9,
                    mpr_dest: 0,
                },
                ..none
            },
            "mpr.mpr 9",
        ),
        (
            m::IBV_QP_STATE,
            qp_mask::MRC_QP_TIMEOUT,
            v,
            mrc_qp_attr {
                timeout: 25,
                ..none
            },
            "timeout 25",
        ),
        (
            m::IBV_QP_STATE,
            qp_mask::MRC_QP_VENDOR_CFG,
            v,
            {
                let mut x = none;
                x.vendor_cfg[3] = 1;
                x
            },
            "vendor_cfg",
        ),
        (
            m::IBV_QP_STATE,
            qp_mask::MRC_QP_CAP,
            v,
            mrc_qp_attr {
                cap: qp_cap::MRC_QP_CAP_TRIM_NACK_DEST_UNSUPPORTED,
                ..none
            },
            "TRIM NACK",
        ),
    ];
    for (vmask, mmask, v, mr, what) in cases {
        let e = step(&a, &v, vmask, &mr, mmask).unwrap_err();
        assert!(
            e.message.contains(what),
            "vmask {vmask:#x} mmask {mmask:#x}: {} should name {what}",
            e.message
        );
    }
    assert!(plan_modify(&a, None, m::IBV_QP_STATE, None, 0, &L)
        .unwrap_err()
        .message
        .contains("NULL"));
    assert!(plan_modify(&a, None, 0, None, qp_mask::MRC_QP_MPR, &L)
        .unwrap_err()
        .message
        .contains("NULL"));
}

#[test]
fn rtr_needs_the_peer() {
    let a = QpAttrs {
        state: QpState::Init,
        ..QpAttrs::new(&L)
    };
    let v = ibv_qp_attr {
        qp_state: qp_state::IBV_QPS_RTR,
        dest_qp_num: 1,
        ..Default::default()
    };
    let e = step(
        &a,
        &v,
        m::IBV_QP_STATE | m::IBV_QP_DEST_QPN,
        &mrc_qp_attr::default(),
        0,
    )
    .unwrap_err();
    assert!(e.message.contains("IBV_QP_AV"), "{}", e.message);
    let mut v = v;
    v.ah_attr.grh.dgid = gid(1);
    let e = step(
        &a,
        &v,
        m::IBV_QP_STATE | m::IBV_QP_DEST_QPN | m::IBV_QP_AV,
        &mrc_qp_attr::default(),
        0,
    )
    .unwrap_err();
    assert!(e.message.contains("is_global"), "{}", e.message);
}

#[test]
fn reset_forgets_and_error_keeps() {
    let mut a = QpAttrs {
        state: QpState::Rts,
        dest_qpn: 7,
        have_dest_qpn: true,
        ..QpAttrs::new(&L)
    };
    a.mrc.timeout = 3;
    let v = ibv_qp_attr {
        qp_state: qp_state::IBV_QPS_ERR,
        ..Default::default()
    };
    let none = mrc_qp_attr::default();
    let (e, t) = step(&a, &v, m::IBV_QP_STATE, &none, 0).unwrap();
    assert_eq!(
        (t, e.state, e.dest_qpn),
        (Transition::Error, QpState::Error, 7)
    );
    let v = ibv_qp_attr {
        qp_state: qp_state::IBV_QPS_RESET,
        ..Default::default()
    };
    let (r, t) = step(&e, &v, m::IBV_QP_STATE, &none, 0).unwrap();
    assert_eq!(t, Transition::Reset);
    assert_eq!(r, QpAttrs::new(&L));
}

#[test]
fn retry_counts_map_both_ways() {
    for count in (0..=24).chain([RETRY_FOREVER]) {
        let (l, e) = ocp_retry(count);
        assert_eq!(device_retry(l, e).unwrap(), count, "count {count}");
    }
    assert!(device_retry(8, 0).is_err());
    assert!(device_retry(7, 26).is_err());
    assert!(device_retry(3, 25)
        .unwrap_err()
        .message
        .contains("exactly 7"));
    assert!(device_retry(7, 18).unwrap_err().message.contains("17"));
}
