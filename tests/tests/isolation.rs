//! Isolation and hostile input, one test per rule, through the whole system (driver <->
//! the simulator's NIC models on a Clos fabric). Raw frames come from outside the fabric
//! (`SimHost::inject_frame`): each is parsed as a NIC parses a received frame, checked, and
//! handed to the QP's datapath stage. A genuine frame built the same way is placed (the control that shows
//! each hostile variant differs from it in one thing only).
//!
//! Covered elsewhere, not repeated here: a wrong rkey (`whole_system.rs`
//! `bad_rkey_is_a_remote_access_error_through_the_engine`, `firmware/tests/nic_rules.rs`),
//! an application context asking for the controller API (`host-driver/tests/whole_api.rs`
//! `controller_ops_events_and_probes`), SGEs outside a registered region rejected by the driver
//! at post time (`whole_api.rs` `misuse_is_a_typed_error`), every truncation of a frame at the
//! parser (`abi/src/wire/frame.rs`).

use std::net::Ipv6Addr;

use mrc_abi::device::doorbell::{CqDoorbell, CQ_CONSUMER_MASK, CQ_DOORBELL_OFFSET};
use mrc_abi::wire::{
    Body, BthRepr, Encap, EthernetAddress, EthernetRepr, EvFormat, EvxRepr, Frame, Ipv6Repr,
    MrcRepr, MrhRepr, Opcode, RethRepr, Segment, TsxRepr, UdpRepr, IP_PROTO_UDP,
};
use mrc_abi::Psn;
use mrc_driver::api::*;
use mrc_driver::device::DeviceConfig;
use mrc_firmware::datapath::packet::{DropReason, RxVerdict};
use mrc_sim::nic_host::{InjectCounters, RxOutcome, SimHost, SimNicConfig};
use mrc_tests::swarm::harness::{self, App, Conn};
use mrc_tests::swarm::plan::{ConnPlan, Plan};

const REGION: u64 = 8192;
const PAYLOAD: &[u8] = b"hostile input must never land in memory";

/// Host 0 (A) is connected to host 1 (B): A's requester QP, B's responder QP and region.
struct Pair {
    host: SimHost,
    #[allow(dead_code)]
    apps: Vec<App>,
    conn: Conn,
    a_gid: [u8; 16],
    b_gid: [u8; 16],
}

fn pair() -> Pair {
    let mut plan = Plan::draw(0);
    plan.hosts = 2;
    plan.planes = 4;
    plan.evs = 16;
    plan.faults.clear();
    let c = ConnPlan {
        from: 0,
        to: 1,
        msgs: Vec::new(),
        batch: 1,
        start: 0,
        every: 1,
        region: REGION,
    };
    let host = SimHost::on_clos(&harness::nic_configs(&plan), plan.clos()).expect("host");
    let apps: Vec<App> = (0..2)
        .map(|i| harness::host_app(&plan, &host, i).expect("app"))
        .collect();
    let conn = harness::open(&apps, 0, &c, 1).expect("connection");
    let (a_gid, b_gid) = (host.nics()[0].gid(), host.nics()[1].gid());
    Pair {
        host,
        apps,
        conn,
        a_gid,
        b_gid,
    }
}

/// What a genuine first write from A to B looks like: WRITE_ONLY at the PSN B expects, into
/// B's region with B's rkey, from A's address to B's.
struct Spec {
    src: [u8; 16],
    dst: [u8; 16],
    qpn: u32,
    psn: u32,
    va: u64,
    rkey: u32,
}

impl Pair {
    fn genuine(&self) -> Spec {
        Spec {
            src: self.a_gid,
            dst: self.b_gid,
            qpn: self.conn.resp.qp.qpn(),
            psn: self.conn.req_psn,
            va: self.conn.peer.addr,
            rkey: self.conn.peer.rkey,
        }
    }

    /// B's region is untouched.
    fn b_untouched(&self) -> bool {
        let mut got = vec![0u8; REGION as usize];
        self.conn.resp.mr.read(0, &mut got).expect("read");
        got.iter().all(|b| *b == 0)
    }

    fn counters(&self) -> InjectCounters {
        self.host.clos_counters().injected
    }
}

fn frame(s: &Spec) -> Vec<u8> {
    let f = Frame {
        eth: EthernetRepr {
            dst: EthernetAddress([2, 0, 0, 0, 0, 2]),
            src: EthernetAddress([2, 0, 0, 0, 0, 1]),
        },
        encap: Encap::Plain(Ipv6Repr {
            src: Ipv6Addr::from(s.src),
            dst: Ipv6Addr::from(s.dst),
            next_header: IP_PROTO_UDP,
            hop_limit: 64,
            traffic_class: 2,
            flow_label: 0,
        }),
        udp: UdpRepr { src_port: 0xC000 },
        mrc: MrcRepr {
            bth: BthRepr {
                opcode: Opcode::WriteOnly,
                se: false,
                pkey: 0xffff,
                fecn: false,
                becn: false,
                dest_qp: s.qpn,
                ack_req: true,
                psn: Psn::new(s.psn),
            },
            mrh: MrhRepr {
                ev_format: EvFormat::Udp,
                trimmed: false,
                trimmed_last_hop: false,
                retransmit: false,
                msn: 0,
            },
            evx: Some(EvxRepr {
                ev_index: 0,
                plane: 0,
                ev_value: 0xC000,
            }),
            tsx: Some(TsxRepr {
                tx_ts_ns: 1,
                echo_ts_ns: 0,
            }),
            body: Body::Write {
                segment: Segment::Only { imm: None },
                reth: RethRepr {
                    va: s.va,
                    rkey: s.rkey,
                    dma_len: PAYLOAD.len() as u32,
                },
            },
        },
        payload: PAYLOAD,
    };
    let mut buf = vec![0u8; f.buffer_len()];
    let n = f.emit(&mut buf).expect("emit");
    buf.truncate(n);
    buf
}

#[test]
fn a_genuine_injected_frame_is_placed() {
    let p = pair();
    let out = p.host.inject_frame(1, &frame(&p.genuine()));
    assert!(
        matches!(out, RxOutcome::Engine(RxVerdict::Place { .. })),
        "{out:?}"
    );
    let mut got = vec![0u8; PAYLOAD.len()];
    p.conn.resp.mr.read(0, &mut got).expect("read");
    assert_eq!(got, PAYLOAD);
}

#[test]
fn unknown_qpn_is_dropped_counted_never_written() {
    let p = pair();
    let s = Spec {
        qpn: 0x00_7777,
        ..p.genuine()
    };
    assert_eq!(p.host.inject_frame(1, &frame(&s)), RxOutcome::UnknownQp);
    assert_eq!(p.counters().unknown_qp, 1);
    assert!(p.b_untouched());
}

#[test]
fn out_of_window_psn_is_nacked_counted_never_written() {
    let p = pair();
    let before = p.host.datapath_counters(1).expect("datapath");
    for off in [4096u32, 0x80_0000, 0xff_ffff] {
        let s = Spec {
            psn: (p.conn.req_psn + off) & 0xff_ffff,
            ..p.genuine()
        };
        let out = p.host.inject_frame(1, &frame(&s));
        assert!(
            matches!(
                out,
                RxOutcome::Engine(RxVerdict::Dropped(
                    DropReason::OutOfWindow | DropReason::Duplicate
                ))
            ),
            "PSN +{off:#x}: {out:?}"
        );
    }
    let after = p.host.datapath_counters(1).expect("datapath");
    assert_eq!(
        (after.rx_out_of_window + after.rx_duplicate)
            - (before.rx_out_of_window + before.rx_duplicate),
        3,
        "{after:?}"
    );
    assert!(after.rx_out_of_window > before.rx_out_of_window);
    assert!(p.b_untouched());
}

#[test]
fn out_of_bounds_reth_is_nacked_counted_never_written() {
    // Past the end, before the start, at the top of the address space (a fresh pair each:
    // the NACK moves the QP to ERROR).
    for k in 0..3 {
        let q = pair();
        let base = q.conn.peer.addr;
        let va = [base + REGION - 4, base.wrapping_sub(16), u64::MAX - 8][k];
        let s = Spec { va, ..q.genuine() };
        let out = q.host.inject_frame(1, &frame(&s));
        assert_eq!(
            out,
            RxOutcome::Engine(RxVerdict::Dropped(DropReason::RemoteAccess)),
            "va {va:#x}"
        );
        let e = q.host.datapath_counters(1).expect("datapath");
        assert_eq!(e.rx_remote_access, 1, "{e:?}");
        assert!(q.b_untouched());
    }
}

#[test]
fn spoofed_source_address_is_dropped_counted_never_written() {
    let p = pair();
    let mut other = p.a_gid;
    other[15] ^= 0x40;
    for src in [other, p.b_gid, [0; 16]] {
        let s = Spec { src, ..p.genuine() };
        assert_eq!(p.host.inject_frame(1, &frame(&s)), RxOutcome::Spoofed);
    }
    assert_eq!(p.counters().spoofed, 3);
    let s = Spec {
        dst: p.a_gid,
        ..p.genuine()
    };
    assert_eq!(p.host.inject_frame(1, &frame(&s)), RxOutcome::Misaddressed);
    assert_eq!(p.counters().misaddressed, 1);
    assert!(p.b_untouched());
}

#[test]
fn truncated_or_oversized_headers_are_dropped_counted_never_written() {
    let p = pair();
    let good = frame(&p.genuine());
    let mut bad = Vec::new();
    // Every truncation.
    for n in 0..good.len() {
        bad.push(good[..n].to_vec());
    }
    // Length fields larger than the frame: IPv6 payload length (bytes 18-19), UDP length
    // (bytes 58-59), and each grown by one.
    for (at, v) in [(18usize, 0xffffu16), (58, 0xffff)] {
        let mut f = good.clone();
        f[at..at + 2].copy_from_slice(&v.to_be_bytes());
        bad.push(f);
        let mut f = good.clone();
        let cur = u16::from_be_bytes([f[at], f[at + 1]]);
        f[at..at + 2].copy_from_slice(&(cur + 1).to_be_bytes());
        bad.push(f);
    }
    // A RETH length larger than the payload carried (header says more than there is).
    let s = p.genuine();
    let mut f = frame(&s);
    let reth_len_at = f.len() - PAYLOAD.len() - 4;
    f[reth_len_at..reth_len_at + 4].copy_from_slice(&0xffff_u32.to_be_bytes());
    bad.push(f);
    let mut malformed = 0;
    for f in &bad {
        match p.host.inject_frame(1, f) {
            RxOutcome::Malformed => malformed += 1,
            RxOutcome::Engine(RxVerdict::Dropped(_)) => {}
            other => panic!("a bad frame of {} bytes was taken: {other:?}", f.len()),
        }
    }
    assert_eq!(p.counters().malformed, malformed);
    assert!(
        malformed >= good.len() as u64,
        "every truncation is malformed"
    );
    assert!(p.b_untouched());
}

/// A send WQE whose local region is gone by the time the NIC fetches it (deregistered after
/// posting, before the doorbell runs) completes with LOCAL_PROTECTION, sends nothing and moves
/// the QP to ERROR.
#[test]
fn wr_outside_registered_memory_completes_with_error() {
    let p = pair();
    let Pair {
        host, apps, conn, ..
    } = p;
    let Conn {
        mut req,
        resp,
        peer,
        ..
    } = conn;
    let scratch = apps[0].pd.reg_mr(4096, Access::ALL).expect("MR");
    let sg = [scratch.sge(0, 100).expect("sge")];
    host.nics()[0].hold_doorbells(true);
    req.qp
        .post_send(&[SendWr {
            wr_id: 7,
            op: WriteOp::Write,
            sg_list: &sg,
            remote_addr: peer.addr,
            rkey: peer.rkey,
            signaled: true,
            solicited: false,
            fence: false,
        }])
        .expect("post");
    drop(scratch);
    host.nics()[0].hold_doorbells(false);
    let mut wc = [WorkCompletion::default(); 4];
    let n = req.scq.poll(&mut wc).expect("poll");
    assert_eq!(n, 1, "{:?}", &wc[..n]);
    assert_eq!(wc[0].wr_id, 7);
    assert_eq!(wc[0].status, CqeStatus::LocalProtection, "{:?}", wc[0]);
    assert_eq!(req.qp.query_state().expect("state"), QpState::Error);
    let mut got = vec![0u8; REGION as usize];
    resp.mr.read(0, &mut got).expect("read");
    assert!(got.iter().all(|b| *b == 0), "nothing was sent");
    assert_eq!(host.clos_counters().fabric.injected, 0);
}

/// Two processes on one NIC: A may write anything anywhere in the doorbell page of its own QP;
/// B's queues (here a CQ) are unaffected, and B's write completes normally.
#[test]
fn one_process_doorbell_page_cannot_reach_another_queue() {
    let host = SimHost::new(&[SimNicConfig::numbered(4)]).expect("host");
    let nic = &host.nics()[0];
    let ctl = Context::from_backend(nic.backend(), &DeviceConfig::default(), Role::Controller)
        .expect("controller");
    let b = Context::from_device(ctl.device(), Role::Application);
    let a = Context::from_device(ctl.device(), Role::Application);
    // B's CQ, then A's CQ and QP, then B's QP: with separate QP and CQ numbering, A's QP
    // would get the number of B's CQ, and its page would be that CQ's page too.
    let mut b_cq = b.create_cq(16, None).expect("B CQ");
    let b_pd = b.alloc_pd().expect("B PD");
    let b_mr = b_pd.reg_mr(4096, Access::ALL).expect("B MR");
    // Then A: its QP's doorbell page is the one it may write.
    let a_cq = a.create_cq(16, None).expect("A CQ");
    let a_pd = a.alloc_pd().expect("A PD");
    let a_qp = a_pd
        .create_qp(&QpInitAttr {
            send_cq: &a_cq,
            recv_cq: &a_cq,
            sq_depth: 16,
            rq_depth: 16,
            hint: QpHint::default(),
        })
        .expect("A QP");
    let mut b_qp = b_pd
        .create_qp(&QpInitAttr {
            send_cq: &b_cq,
            recv_cq: &b_cq,
            sq_depth: 16,
            rq_depth: 16,
            hint: QpHint::default(),
        })
        .expect("B QP");
    let page = a.device().doorbell_page(a_qp.qpn()).expect("A's page");
    let be = nic.backend();
    // A writes its page: CQ doorbell values that would mark a 16-entry CQ full (or arm it),
    // then every other word.
    let full = CqDoorbell {
        consumer: 0u32.wrapping_sub(16) & CQ_CONSUMER_MASK,
        arm: true,
        solicited_only: false,
    }
    .encode();
    be.mmio_write32(page + CQ_DOORBELL_OFFSET as u64, full)
        .expect("write");
    for off in (12..4096).step_by(4) {
        be.mmio_write32(page + off, 0xffff_ffff).expect("write");
    }
    // B loops a write back to itself: it completes, nothing dropped.
    b_qp.modify_init(&InitAttr::default()).expect("INIT");
    b_qp.modify_rtr(&RtrAttr {
        dest_qpn: b_qp.qpn(),
        remote_addr: b.gid(),
        rq_psn: 0,
        responder_mpr: 4,
        max_wimm: 8,
        dynamic_mpr: false,
    })
    .expect("RTR");
    b_qp.modify_rts(&RtsAttr {
        sq_psn: 0,
        requester_mpr: 4,
        max_wimm: 8,
        retry_count: 7,
        ack_timeout_exp: 7,
    })
    .expect("RTS");
    b_mr.write(0, PAYLOAD).expect("fill");
    let sg = [b_mr.sge(0, PAYLOAD.len() as u32).expect("sge")];
    let wrs: Vec<SendWr> = (0..16)
        .map(|k| SendWr {
            wr_id: k,
            op: WriteOp::Write,
            sg_list: &sg,
            remote_addr: b_mr.addr() + 1024,
            rkey: b_mr.rkey(),
            signaled: true,
            solicited: false,
            fence: false,
        })
        .collect();
    b_qp.post_send(&wrs).expect("post");
    let mut wc = [WorkCompletion::default(); 32];
    let n = b_cq.poll(&mut wc).expect("poll");
    assert_eq!(n, 16, "B's completions: {:?}", &wc[..n]);
    assert!(wc[..n].iter().all(|c| c.status == CqeStatus::Success));
    assert_eq!(nic.counters().cqes_dropped, 0, "{:?}", nic.counters());
}
