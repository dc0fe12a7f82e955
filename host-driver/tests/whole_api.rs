//! Whole-API tests against the simulated NIC host interface, using only the public API the way
//! an OCP MRC application and controller would. The two NICs are the simulator's NIC model
//! (datapath stage, the NIC image's main loop on its cores, PCIe) on different leaves of a
//! 4-plane Clos fabric (`SimHost::clos_pair`).

use std::net::TcpListener;
use std::thread;
use std::time::Duration;

use mrc_driver::api::connect::{exchange_client, exchange_server, ConnInfo};
use mrc_driver::api::*;
use mrc_driver::ctl::plan::{self, Clos};
use mrc_driver::ctl::{
    self, Controller, EvFormatSpec, EvProfileSpec, NsccParams, ProfileKind, ProfileState,
};
use mrc_driver::device::DeviceConfig;
use mrc_driver::Error;
use mrc_sim::nic_host::{SimHost, SimNic};

mod common;
use common::{looped_qp, LoopSpec, Looped};

const BUF: usize = 64 * 1024;
const T: Duration = Duration::from_secs(5);

/// Controller setup on one NIC: an SRv6 EXPLICIT profile from the planner and an NSCC profile.
fn controller_setup(ctx: &Context) -> (u32, u32) {
    let ctl = Controller::new(ctx).unwrap();
    let fmt = ctl
        .create_ev_format_profile(&EvFormatSpec::srv6(0xfcbb_bb00))
        .unwrap();
    let clos = Clos {
        planes: 4,
        tiers: 2,
        leaves: 8,
        spines: 32,
        pods: 0,
        cores: 0,
        hosts_per_leaf: 4,
        block: 0xfcbb_bb00,
    };
    let evs = plan::plan(&clos, 0, 17, 128).unwrap();
    let ev = ctl::install_plan(&ctl, fmt, &evs, 16).unwrap();
    let cc = ctl.create_cc_profile(&NsccParams::default()).unwrap();
    (ev, cc)
}

struct App {
    ctx: Context,
    _pd: ProtectionDomain,
    mr: MemoryRegion,
    scq: CompletionQueue,
    rcq: CompletionQueue,
    qp: QueuePair,
}

fn app(ctx: Context, ev: u32, cc: u32) -> App {
    let pd = ctx.alloc_pd().unwrap();
    let mr = pd.reg_mr(BUF, Access::ALL).unwrap();
    let scq = ctx.create_cq(64, None).unwrap();
    let rcq = ctx.create_cq(64, None).unwrap();
    let mut qp = pd
        .create_qp(&QpInitAttr {
            send_cq: &scq,
            recv_cq: &rcq,
            sq_depth: 32,
            rq_depth: 32,
            hint: QpHint {
                bulk: true,
                ..QpHint::default()
            },
        })
        .unwrap();
    qp.modify_init(&InitAttr {
        ev_profile: ev,
        cc_profile: cc,
    })
    .unwrap();
    App {
        ctx,
        _pd: pd,
        mr,
        scq,
        rcq,
        qp,
    }
}

fn connect(a: &mut App, peer: &ConnInfo) {
    a.qp.modify_rtr(&RtrAttr {
        dest_qpn: peer.qpn,
        remote_addr: peer.gid,
        rq_psn: peer.psn,
        responder_mpr: 4,
        max_wimm: 8,
        dynamic_mpr: false,
    })
    .unwrap();
    a.qp.modify_rts(&RtsAttr {
        sq_psn: 100,
        requester_mpr: 4,
        max_wimm: 8,
        retry_count: 7,
        ack_timeout_exp: 14,
    })
    .unwrap();
}

fn info(a: &App) -> ConnInfo {
    ConnInfo {
        qpn: a.qp.qpn(),
        psn: 100,
        rkey: a.mr.rkey(),
        addr: a.mr.addr(),
        len: BUF as u64,
        gid: a.ctx.gid(),
    }
}

fn open(nic: &SimNic) -> (Context, Context) {
    let c =
        Context::from_backend(nic.backend(), &DeviceConfig::default(), Role::Controller).unwrap();
    let a = Context::from_device(c.device(), Role::Application);
    (c, a)
}

fn poll_n(cq: &mut CompletionQueue, n: usize) -> Vec<WorkCompletion> {
    let mut out = Vec::new();
    let mut buf = [WorkCompletion::default(); 8];
    for _ in 0..1000 {
        let k = cq.poll(&mut buf).unwrap();
        out.extend_from_slice(&buf[..k]);
        if out.len() >= n {
            break;
        }
    }
    out
}

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

#[test]
fn two_apps_write_and_write_imm_over_tcp_exchange() {
    let host = SimHost::clos_pair().unwrap();
    let (ca, aa) = open(&host.nics()[0]);
    let (cb, ab) = open(&host.nics()[1]);
    let (eva, cca) = controller_setup(&ca);
    let (evb, ccb) = controller_setup(&cb);
    let mut a = app(aa, eva, cca);
    let mut b = app(ab, evb, ccb);

    // Out-of-band exchange over loopback TCP, as the OCP examples do.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let ib = info(&b);
    let server = thread::spawn(move || exchange_server(&listener, &ib, T).unwrap());
    let peer_of_a = exchange_client(addr, &info(&a), T).unwrap();
    let peer_of_b = server.join().unwrap();
    assert_eq!(peer_of_a.qpn, b.qp.qpn());
    assert_eq!(peer_of_b.rkey, a.mr.rkey());
    connect(&mut a, &peer_of_a);
    connect(&mut b, &peer_of_b);

    // B pre-posts receives for A's immediates.
    b.qp.post_recv(&[
        RecvWr { wr_id: 900 },
        RecvWr { wr_id: 901 },
        RecvWr { wr_id: 902 },
    ])
    .unwrap();

    let src = pattern(7, 3 * 4096);
    a.mr.write(0, &src).unwrap();
    let s0 = [a.mr.sge(0, 4096).unwrap()];
    // Scatter-gather: two pieces land contiguously at the remote address.
    let s1 = [a.mr.sge(4096, 1000).unwrap(), a.mr.sge(8192, 3000).unwrap()];
    let s2 = [a.mr.sge(0, 64).unwrap()];
    let wr = |wr_id, op, sg: &'static [Sge], off: u64, signaled| SendWr {
        wr_id,
        op,
        sg_list: sg,
        remote_addr: peer_of_a.addr + off,
        rkey: peer_of_a.rkey,
        signaled,
        solicited: false,
        fence: false,
    };
    let s0: &'static [Sge] = Box::leak(Box::new(s0));
    let s1: &'static [Sge] = Box::leak(Box::new(s1));
    let s2: &'static [Sge] = Box::leak(Box::new(s2));
    // One batch, one doorbell: unsignaled write, signaled write-with-imm (SG), signaled write,
    // then two more write-with-imm.
    a.qp.post_send(&[
        wr(1, WriteOp::Write, s0, 0, false),
        wr(2, WriteOp::WriteImm(0xA1), s1, 8192, true),
        wr(3, WriteOp::Write, s2, 20000, true),
        wr(4, WriteOp::WriteImm(0xA2), s2, 30000, true),
    ])
    .unwrap();
    a.qp.post_send(&[wr(5, WriteOp::WriteImm(0xA3), s0, 40000, true)])
        .unwrap();

    let sc = poll_n(&mut a.scq, 4);
    let ids: Vec<u64> = sc.iter().map(|c| c.wr_id).collect();
    assert_eq!(
        ids,
        vec![2, 3, 4, 5],
        "signaled completions in posting order"
    );
    assert!(sc.iter().all(|c| c.status == CqeStatus::Success));
    assert_eq!(sc[0].opcode, CqeOpcode::WriteImm);
    assert_eq!(sc[0].byte_len, 4000);
    assert_eq!(sc[1].opcode, CqeOpcode::Write);

    let rc = poll_n(&mut b.rcq, 3);
    let got: Vec<(u64, Option<u32>, u32)> =
        rc.iter().map(|c| (c.wr_id, c.imm, c.byte_len)).collect();
    assert_eq!(
        got,
        vec![
            (900, Some(0xA1), 4000),
            (901, Some(0xA2), 64),
            (902, Some(0xA3), 4096)
        ]
    );
    assert!(rc
        .iter()
        .all(|c| c.opcode == CqeOpcode::RecvWriteImm && c.qpn == b.qp.qpn()));

    // Every byte.
    let mut got = vec![0u8; 4096];
    b.mr.read(0, &mut got).unwrap();
    assert_eq!(got, src[..4096]);
    let mut got = vec![0u8; 4000];
    b.mr.read(8192, &mut got).unwrap();
    assert_eq!(got[..1000], src[4096..5096]);
    assert_eq!(got[1000..], src[8192..11192]);
    let mut got = vec![0u8; 64];
    b.mr.read(20000, &mut got).unwrap();
    assert_eq!(got, src[..64]);
    b.mr.read(30000, &mut got).unwrap();
    assert_eq!(got, src[..64]);
    let mut got = vec![0u8; 4096];
    b.mr.read(40000, &mut got).unwrap();
    assert_eq!(got, src[..4096]);
    // Untouched bytes stay zero.
    let mut z = vec![0u8; 100];
    b.mr.read(4096, &mut z).unwrap();
    assert!(z.iter().all(|x| *x == 0));
    assert_eq!(
        a.qp.sq_free(),
        a.qp.sq_depth(),
        "unsignaled WQE retired by a later CQE"
    );

    // B writes back to A (both directions work).
    b.mr.write(50000, b"pong").unwrap();
    let sg: &'static [Sge] = Box::leak(Box::new([b.mr.sge(50000, 4).unwrap()]));
    b.qp.post_send(&[SendWr {
        wr_id: 77,
        op: WriteOp::Write,
        sg_list: sg,
        remote_addr: peer_of_b.addr + 10,
        rkey: peer_of_b.rkey,
        signaled: true,
        solicited: false,
        fence: false,
    }])
    .unwrap();
    assert_eq!(poll_n(&mut b.scq, 1)[0].wr_id, 77);
    let mut p = [0u8; 4];
    a.mr.read(10, &mut p).unwrap();
    assert_eq!(&p, b"pong");
    // Every byte crossed the fabric and was placed by the receiving NIC's stage.
    let c = host.clos_counters();
    assert_eq!(c.place_failed, 0);
    assert_eq!(c.bytes_placed, 4096 + 4000 + 64 + 64 + 4096 + 4);
}

#[test]
fn controller_ops_events_and_probes() {
    let host = SimHost::clos_pair().unwrap();
    let (c, a) = open(&host.nics()[0]);
    assert!(matches!(
        Controller::new(&a),
        Err(Error::NotController { .. })
    ));
    let ctl = Controller::new(&c).unwrap();
    let fmt = ctl
        .create_ev_format_profile(&EvFormatSpec::udp((49152, 49407)))
        .unwrap();
    let spec = EvProfileSpec {
        format_profile: fmt,
        kind: ProfileKind::Generated,
        num_evs: 128,
        min_active_evs: 64,
        event_mask: ctl::EVENT_MASK_ALL,
        seed: 42,
    };
    let ev = ctl.create_ev_profile(&spec).unwrap();
    // A QP cannot use a profile still in INIT.
    let pd = a.alloc_pd().unwrap();
    let cq = a.create_cq(16, None).unwrap();
    let mut qp = pd
        .create_qp(&QpInitAttr {
            send_cq: &cq,
            recv_cq: &cq,
            sq_depth: 8,
            rq_depth: 8,
            hint: QpHint::default(),
        })
        .unwrap();
    let e = qp
        .modify_init(&InitAttr {
            ev_profile: ev,
            cc_profile: 0,
        })
        .unwrap_err();
    assert!(matches!(e, Error::Admin { .. }), "{e}");
    ctl.set_ev_profile_state(ev, &spec, ProfileState::Online)
        .unwrap();
    qp.modify_init(&InitAttr {
        ev_profile: ev,
        cc_profile: 0,
    })
    .unwrap();
    let q = ctl.query_ev(ev, 5).unwrap();
    assert!(
        (49152..=49407).contains(&q.value),
        "generated value in range: {q:?}"
    );
    assert_eq!(q, ctl.query_ev(ev, 5).unwrap());
    ctl.deny_ev(ev, 5).unwrap();
    assert_eq!(
        ctl.query_ev(ev, 5).unwrap().state,
        mrc_abi::device::EvState::Denied
    );
    let e = ctl.poll_event().unwrap().unwrap();
    assert!(
        matches!(e.event, Event::EvStateChange { ev_index: 5, .. }),
        "{e:?}"
    );
    ctl.allow_ev(ev, 5).unwrap();
    assert_eq!(
        ctl.query_ev(ev, 5).unwrap().state,
        mrc_abi::device::EvState::Good
    );
    assert!(
        ctl.replace_ev_value(ev, 1, 50000).is_err(),
        "REPLACE only for EXPLICIT"
    );
    assert!(ctl.destroy_ev_profile(ev).is_err(), "in use by the QP");
    // Ports: admin down posts a PORT_DOWN event.
    while ctl.poll_event().unwrap().is_some() {}
    ctl.set_port_admin_state(1, false).unwrap();
    let p = ctl.query_port(1).unwrap();
    assert!(!p.admin_up && !p.oper_up);
    assert!(matches!(
        ctl.poll_event().unwrap().unwrap().event,
        Event::PortDown { port: 1, .. }
    ));
    // Probes need an RTS QP: connect the QP to itself.
    qp.modify_rtr(&RtrAttr {
        dest_qpn: qp.qpn(),
        remote_addr: a.gid(),
        rq_psn: 0,
        responder_mpr: 1,
        max_wimm: 1,
        dynamic_mpr: false,
    })
    .unwrap();
    qp.modify_rts(&RtsAttr {
        sq_psn: 0,
        requester_mpr: 1,
        max_wimm: 1,
        retry_count: 25,
        ack_timeout_exp: 24,
    })
    .unwrap();
    // The QP is its own peer, so its NIC loops the probe back; the result event follows the
    // EV events of the port taken down above (the profile reports every EV event). Probes
    // across the fabric: `tests/tests/whole_system.rs`.
    ctl.probe_ev(qp.qpn(), 9, 1234, 100).unwrap();
    let mut others = Vec::new();
    let result = loop {
        match ctl.poll_event().unwrap().map(|e| e.event) {
            Some(Event::EvProbeResult {
                qpn,
                ev_index,
                probe_id,
                replied,
                rtt_ns,
            }) => break (qpn, ev_index, probe_id, replied, rtt_ns),
            Some(other) => others.push(other),
            None => panic!("no probe result; other events: {others:?}"),
        }
    };
    let (qpn, ev_index, probe_id, replied, rtt_ns) = result;
    assert_eq!(
        (qpn, ev_index, probe_id, replied),
        (qp.qpn(), 9, 1234, true)
    );
    assert!(
        (1..100_000).contains(&rtt_ns),
        "RTT {rtt_ns} ns, within the timeout"
    );
    assert!(
        others
            .iter()
            .all(|e| matches!(e, Event::EvStateChange { qpn: q, .. } if *q == qp.qpn())),
        "{others:?}"
    );
    assert!(ctl
        .create_cc_profile(&NsccParams {
            gamma: 1.5,
            ..NsccParams::default()
        })
        .is_err());
}

#[test]
fn misuse_is_a_typed_error() {
    let host = SimHost::clos_pair().unwrap();
    let (_c, a) = open(&host.nics()[0]);
    let pd = a.alloc_pd().unwrap();
    let mr = pd.reg_mr(4096, Access::ALL).unwrap();
    assert!(matches!(
        mr.write(4090, &[0; 10]),
        Err(Error::MrRange { .. })
    ));
    assert!(matches!(
        a.create_cq(0, None),
        Err(Error::InvalidAttribute { .. })
    ));
    let cq = a.create_cq(16, None).unwrap();
    let mut qp = pd
        .create_qp(&QpInitAttr {
            send_cq: &cq,
            recv_cq: &cq,
            sq_depth: 4,
            rq_depth: 4,
            hint: QpHint::default(),
        })
        .unwrap();
    // The responder of `qp`'s writes: another QP of the same NIC (the NIC loops them back).
    let mut peer = pd
        .create_qp(&QpInitAttr {
            send_cq: &cq,
            recv_cq: &cq,
            sq_depth: 4,
            rq_depth: 4,
            hint: QpHint::default(),
        })
        .unwrap();
    let sg = [mr.sge(0, 16).unwrap()];
    let wr = SendWr {
        wr_id: 1,
        op: WriteOp::Write,
        sg_list: &sg,
        remote_addr: 0,
        rkey: 0,
        signaled: true,
        solicited: false,
        fence: false,
    };
    assert!(
        matches!(qp.post_send(&[wr]), Err(Error::QpState { .. })),
        "RESET QP"
    );
    assert!(matches!(
        qp.post_recv(&[RecvWr { wr_id: 1 }]),
        Err(Error::QpState { .. })
    ));
    let rtr = RtrAttr {
        dest_qpn: 1,
        remote_addr: a.gid(),
        rq_psn: 0,
        responder_mpr: 1,
        max_wimm: 1,
        dynamic_mpr: false,
    };
    assert!(
        matches!(qp.modify_rtr(&rtr), Err(Error::BadTransition { .. })),
        "RESET -> RTR"
    );
    qp.modify_init(&InitAttr::default()).unwrap();
    assert!(matches!(
        qp.modify_rtr(&RtrAttr {
            responder_mpr: 0,
            ..rtr
        }),
        Err(Error::InvalidAttribute {
            field: "responder_mpr",
            ..
        })
    ));
    assert!(matches!(
        qp.modify_rtr(&RtrAttr {
            rq_psn: 1 << 24,
            ..rtr
        }),
        Err(Error::InvalidAttribute {
            field: "rq_psn",
            ..
        })
    ));
    qp.modify_rtr(&RtrAttr {
        dest_qpn: peer.qpn(),
        ..rtr
    })
    .unwrap();
    peer.modify_init(&InitAttr::default()).unwrap();
    peer.modify_rtr(&RtrAttr {
        dest_qpn: qp.qpn(),
        ..rtr
    })
    .unwrap();
    let rts = RtsAttr {
        sq_psn: 0,
        requester_mpr: 1,
        max_wimm: 1,
        retry_count: 26,
        ack_timeout_exp: 1,
    };
    assert!(matches!(
        qp.modify_rts(&rts),
        Err(Error::InvalidAttribute {
            field: "retry_count",
            ..
        })
    ));
    assert!(matches!(
        qp.modify_rts(&RtsAttr {
            retry_count: 1,
            ack_timeout_exp: 25,
            ..rts
        }),
        Err(Error::InvalidAttribute {
            field: "ack_timeout_exp",
            ..
        })
    ));
    qp.modify_rts(&RtsAttr {
        retry_count: 1,
        ..rts
    })
    .unwrap();
    // Bad SGEs: foreign lkey, out of range, too many.
    let bad = [Sge {
        addr: mr.addr(),
        len: 8,
        lkey: 0xdead,
    }];
    assert!(matches!(
        qp.post_send(&[SendWr {
            sg_list: &bad,
            ..wr
        }]),
        Err(Error::BadWorkRequest { .. })
    ));
    let bad = [Sge {
        addr: mr.addr() + 4000,
        len: 200,
        lkey: mr.lkey(),
    }];
    assert!(matches!(
        qp.post_send(&[SendWr {
            sg_list: &bad,
            ..wr
        }]),
        Err(Error::BadWorkRequest { .. })
    ));
    let three = [sg[0]; 3];
    assert!(matches!(
        qp.post_send(&[SendWr {
            sg_list: &three,
            ..wr
        }]),
        Err(Error::BadWorkRequest { .. })
    ));
    // Ring full: 5 WRs into a 4-entry ring, nothing posted.
    assert!(matches!(
        qp.post_send(&[wr; 5]),
        Err(Error::QueueFull { .. })
    ));
    // A bad rkey is the device's business: error completion, QP to ERROR, fatal event.
    let mut cq = cq;
    qp.post_send(&[SendWr {
        rkey: 0x8000_0bad,
        remote_addr: mr.addr(),
        ..wr
    }])
    .unwrap();
    let c = poll_n(&mut cq, 1);
    assert_eq!(c[0].status, CqeStatus::RemoteAccess);
    assert_eq!(qp.query_state().unwrap(), QpState::Error);
    assert!(matches!(
        a.poll_async_event().unwrap().unwrap().event,
        Event::QpFatal { .. }
    ));
}

#[test]
fn surprise_removal_fails_every_object_without_hanging() {
    let host = SimHost::clos_pair().unwrap();
    let nic = &host.nics()[0];
    let (c, a) = open(nic);
    let pd = a.alloc_pd().unwrap();
    let mr = pd.reg_mr(4096, Access::ALL).unwrap();
    let ch = a.create_comp_channel().unwrap();
    let mut cq = a.create_cq(16, Some(&ch)).unwrap();
    let mut qp = pd
        .create_qp(&QpInitAttr {
            send_cq: &cq,
            recv_cq: &cq,
            sq_depth: 4,
            rq_depth: 4,
            hint: QpHint::default(),
        })
        .unwrap();
    qp.modify_init(&InitAttr::default()).unwrap();
    nic.surprise_remove();
    let start = std::time::Instant::now();
    // The first MMIO read sees all ones.
    assert!(a.poll_async_event().unwrap_err().is_gone());
    assert!(a.alloc_pd().unwrap_err().is_gone());
    assert!(pd.reg_mr(64, Access::ALL).unwrap_err().is_gone());
    assert!(mr.write(0, &[1]).unwrap_err().is_gone());
    assert!(cq
        .poll(&mut [WorkCompletion::default(); 4])
        .unwrap_err()
        .is_gone());
    assert!(cq.req_notify(false).unwrap_err().is_gone());
    assert!(ch.wait(Duration::from_millis(5)).unwrap_err().is_gone());
    assert!(qp.post_recv(&[RecvWr { wr_id: 1 }]).unwrap_err().is_gone());
    assert!(qp
        .modify_reset_or_error(QpState::Error)
        .unwrap_err()
        .is_gone());
    assert!(Controller::new(&c).unwrap_err().is_gone());
    assert!(c.device().query_device().unwrap_err().is_gone());
    // A hang would be a wait for some timeout per call (the admin timeout is 2 s); the bound is
    // loose so a loaded machine cannot fail it.
    assert!(start.elapsed() < Duration::from_secs(20), "no hang");
    // Dropping everything is fine too.
    drop((qp, cq, mr, pd));
}

#[test]
fn completion_channel_fires_on_armed_cq() {
    let host = SimHost::clos_pair().unwrap();
    let (_c, a) = open(&host.nics()[0]);
    let ch = a.create_comp_channel().unwrap();
    let _fd = ch.fd().unwrap();
    let spec = LoopSpec {
        cq_depth: 16,
        sq_depth: 4,
        rq_depth: 4,
        ..LoopSpec::default()
    };
    let Looped { qp, cq, mr, .. } = &mut looped_qp(&a, spec, Some(&ch));
    cq.req_notify(false).unwrap();
    assert!(!ch.wait(Duration::from_millis(5)).unwrap(), "nothing yet");
    let sg = [mr.sge(0, 8).unwrap()];
    qp.post_send(&[SendWr {
        wr_id: 5,
        op: WriteOp::Write,
        sg_list: &sg,
        remote_addr: mr.addr() + 100,
        rkey: mr.rkey(),
        signaled: true,
        solicited: false,
        fence: false,
    }])
    .unwrap();
    assert!(ch.wait(Duration::from_secs(10)).unwrap());
    assert_eq!(poll_n(cq, 1)[0].wr_id, 5);
}

/// `reg_user_mr` on the in-process simulated NIC: the MR's address is the application's, a
/// peer's write lands in the application's own buffer, a local send reads it, and bad ranges
/// are typed errors.
#[test]
fn user_memory_registration_uses_the_applications_own_bytes() {
    let host = SimHost::clos_pair().unwrap();
    let (_ca, aa) = open(&host.nics()[0]);
    let (_cb, ab) = open(&host.nics()[1]);
    let mut a = app(aa, 0, 0);
    let mut b = app(ab, 0, 0);
    let (ia, ib) = (info(&a), info(&b));
    connect(&mut a, &ib);
    connect(&mut b, &ia);

    let mut src = pattern(5, 3000);
    let mut dst = vec![0u8; 5000];
    let pa = a._pd.clone();
    // SAFETY: `src` and `dst` outlive their regions; `dst` is read after the completions.
    let smr = unsafe { pa.reg_user_mr(src.as_mut_ptr(), src.len(), Access::ALL) }.unwrap();
    let pb = b._pd.clone();
    // SAFETY: as above.
    let dmr =
        unsafe { pb.reg_user_mr(dst.as_mut_ptr().wrapping_add(7), 4000, Access::ALL) }.unwrap();
    assert_eq!(smr.addr(), src.as_ptr() as u64);
    assert_eq!(dmr.addr(), dst.as_ptr() as u64 + 7);
    b.qp.post_recv(&[RecvWr { wr_id: 1 }]).unwrap();
    let sg = [smr.sge(0, 3000).unwrap()];
    a.qp.post_send(&[SendWr {
        wr_id: 9,
        op: WriteOp::WriteImm(0x55),
        sg_list: &sg,
        remote_addr: dmr.addr() + 100,
        rkey: dmr.rkey(),
        signaled: true,
        solicited: false,
        fence: false,
    }])
    .unwrap();
    assert_eq!(poll_n(&mut a.scq, 1)[0].status, CqeStatus::Success);
    assert_eq!(poll_n(&mut b.rcq, 1)[0].imm, Some(0x55));
    drop(dmr);
    assert_eq!(&dst[107..3107], &src[..], "in the application's own buffer");
    assert!(dst[..107].iter().chain(&dst[3107..]).all(|&x| x == 0));

    // SAFETY: refused before anything is mapped.
    let e = unsafe { pa.reg_user_mr(std::ptr::null_mut(), 10, Access::ALL) }.unwrap_err();
    assert!(e.to_string().contains("null address"), "{e}");
    // SAFETY: as above.
    let e = unsafe { pa.reg_user_mr(src.as_mut_ptr(), 0, Access::ALL) }.unwrap_err();
    assert!(e.to_string().contains("zero length"), "{e}");
    drop(smr);
}
