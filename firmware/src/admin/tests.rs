//! The executor on its own: hostile command bytes never panic, and whatever sequence of
//! commands arrives, every device QP and the engine QP behind it stay in the same state.

extern crate std;

use std::vec;
use std::vec::Vec;

use mrc_abi::device::admin::body::*;
use mrc_abi::device::admin::{AdminCommand, QpModify, QpState};
use mrc_abi::device::event::Event;
use mrc_abi::device::regs::{caps, DeviceParams};
use proptest::prelude::*;

use super::*;
use crate::datapath::stage::Datapath;
use crate::engine::{Engine, EngineConfig};

crate::capacity! {
    struct AdminCap {
        qps: 4, evs: 16, planes: 2, window_psns: 256, send_queue: 8, recv_queue: 8, regions: 4,
    }
}

/// The engine and the datapath stage the executor drives.
struct TestEngine {
    fw: Engine<AdminCap>,
    dp: Datapath<AdminCap>,
}

impl TestEngine {
    fn qp_state(&self, qpn: u32) -> Option<crate::engine::QpState> {
        self.fw.qp_state(qpn)
    }
}
type TestAdmin = Admin<4, 4, 4, 4, 2, 2, 16, 2>;

const PARAMS: DeviceParams = DeviceParams {
    device_id: 1,
    capabilities: caps::ALL,
    num_ports: 2,
    num_planes: 2,
    max_qps: 8,
    max_cqs: 8,
    max_evs_per_qp: 16,
    doorbell_pages: 8,
};

#[derive(Default)]
struct Env {
    events: Vec<Event>,
    admin: [bool; 2],
}

impl AdminEnv for Env {
    fn vectors(&self) -> u32 {
        2
    }
    fn dma_mapped(&mut self, iova: u64, _len: u64) -> bool {
        iova != 0xdead_0000
    }
    fn post_event(&mut self, event: Event) {
        self.events.push(event);
    }
    fn fw_version(&self) -> u32 {
        7
    }
    fn num_ports(&self) -> usize {
        2
    }
    fn port_admin(&self, p: usize) -> bool {
        !self.admin[p]
    }
    fn port_link(&self, _p: usize) -> bool {
        true
    }
    fn set_port_admin(&mut self, p: usize, up: bool) {
        self.admin[p] = !up;
    }
    fn port_plane(&self, p: usize) -> u8 {
        p as u8
    }
    fn port_speed_mbps(&self) -> u32 {
        1
    }
    fn firmware(&mut self, _cmd: &AdminCommand) -> AdminResult {
        Err((AdminStatus::Busy, 0))
    }
}

fn engine() -> std::boxed::Box<TestEngine> {
    std::boxed::Box::new(TestEngine {
        fw: Engine::new(EngineConfig::default()).unwrap(),
        dp: Datapath::new(Default::default()),
    })
}

fn run(a: &mut TestAdmin, env: &mut Env, eng: &mut TestEngine, c: AdminCommand) -> Done {
    let mut core = crate::admin::Core {
        engine: &mut eng.fw,
        regions: &mut eng.dp,
    };
    let mut cx = Ctx {
        params: &PARAMS,
        env,
        engine: &mut core,
        now_ns: 0,
    };
    a.execute(c, &mut cx)
}

fn engine_state(s: QpState) -> EngineState {
    match s {
        QpState::Reset => EngineState::Reset,
        QpState::Init => EngineState::Init,
        QpState::Rtr => EngineState::Rtr,
        QpState::Rts => EngineState::Rts,
        QpState::Error => EngineState::Error,
    }
}

/// One command of a small vocabulary over small handles (so they often exist).
fn command() -> impl Strategy<Value = AdminCommand> {
    let h = 1u32..5;
    prop_oneof![
        1 => Just(AdminCommand::AllocPd),
        1 => h.clone().prop_map(|id| AdminCommand::DeallocPd(ObjectId { id: id.into() })),
        1 => (h.clone(), any::<bool>()).prop_map(|(pd, bad)| AdminCommand::RegMr(RegMr {
            pd: pd.into(),
            access: 2.into(),
            va: 0x1000.into(),
            iova: if bad { 0xdead_0000 } else { 0x2000 }.into(),
            length: 4096.into(),
        })),
        1 => (0u32..0x800).prop_map(|id| AdminCommand::DeregMr(ObjectId { id: id.into() })),
        1 => (0u16..3).prop_map(|v| AdminCommand::CreateCq(CreateCq {
            log2_entries: 4,
            rsvd: 0,
            irq_vector: v.into(),
            rsvd2: 0.into(),
            base: 0x4000.into(),
        })),
        1 => h.clone().prop_map(|id| AdminCommand::DestroyCq(ObjectId { id: id.into() })),
        1 => (h.clone(), h.clone(), h.clone()).prop_map(|(pd, s, r)| AdminCommand::CreateQp(
            CreateQp {
                pd: pd.into(),
                send_cq: s.into(),
                recv_cq: r.into(),
                sq_log2: 3,
                rq_log2: 3,
                rsvd: 0.into(),
                sq_base: 0x8000.into(),
                rq_base: 0x9000.into(),
            }
        )),
        1 => h.clone().prop_map(|id| AdminCommand::DestroyQp(ObjectId { id: id.into() })),
        4 => (2u32..4).prop_map(|q| AdminCommand::ModifyQp(QpModify::Init(QpInit {
            qpn: q.into(),
            to_state: 1,
            dscp: 0,
            hint_flags: 0.into(),
            ev_profile: 0.into(),
            cc_profile: 0.into(),
        }))),
        4 => (2u32..4, 0u16..3, 0u16..10).prop_map(|(q, mpr, wimm)| AdminCommand::ModifyQp(
            QpModify::Rtr(QpRtr {
                qpn: q.into(),
                to_state: 2,
                flags: 0,
                responder_mpr: mpr.into(),
                dest_qpn: 1.into(),
                max_wimm: wimm.into(),
                rsvd: 0.into(),
                rq_psn: 0.into(),
                remote_addr: [1; 16],
            })
        )),
        4 => (2u32..4, 0u16..3, 0u8..27).prop_map(|(q, mpr, retry)| AdminCommand::ModifyQp(
            QpModify::Rts(QpRts {
                qpn: q.into(),
                to_state: 3,
                retry_count: retry,
                requester_mpr: mpr.into(),
                max_wimm: 4.into(),
                ack_timeout_exp: 5,
                rsvd: 0,
                sq_psn: 0.into(),
            })
        )),
        1 => (h.clone(), prop_oneof![Just(0u8), Just(4u8)]).prop_map(|(q, to)| {
            AdminCommand::ModifyQp(QpModify::Reset(QpReset {
                qpn: q.into(),
                to_state: to,
                rsvd: [0; 3],
            }))
        }),
        1 => (0u8..3, 0u8..2).prop_map(|(port, up)| AdminCommand::SetPortAdminState(PortAdmin {
            port,
            up,
            rsvd: 0.into(),
        })),
    ]
}

/// Runs `cmds` after a PD and a CQ exist; checks the invariants after every command and
/// returns whether some QP reached RTS.
fn check_sequence(cmds: Vec<AdminCommand>) -> Result<bool, TestCaseError> {
    let mut a = TestAdmin::new();
    let mut env = Env::default();
    let mut eng = engine();
    let setup = [
        AdminCommand::AllocPd,
        AdminCommand::CreateCq(CreateCq {
            log2_entries: 4,
            rsvd: 0,
            irq_vector: 0.into(),
            rsvd2: 0.into(),
            base: 0x4000.into(),
        }),
        AdminCommand::CreateQp(CreateQp {
            pd: 1.into(),
            send_cq: 1.into(),
            recv_cq: 1.into(),
            sq_log2: 3,
            rq_log2: 3,
            rsvd: 0.into(),
            sq_base: 0x8000.into(),
            rq_base: 0x9000.into(),
        }),
    ];
    let mut reached_rts = false;
    for c in setup.into_iter().chain(cmds) {
        // Decodes as the device would see it: the encoder and decoder agree.
        let raw = c.encode(1, 0);
        let decoded = raw.decode();
        let before = a;
        let done = match decoded {
            Ok(d) => run(&mut a, &mut env, &mut eng, d),
            Err(_) => continue,
        };
        if done.result.is_err() {
            // A refusal changes no table.
            prop_assert_eq!(
                a.qps.iter().collect::<Vec<_>>(),
                before.qps.iter().collect::<Vec<_>>()
            );
            prop_assert_eq!(a.mrs.len(), before.mrs.len());
            prop_assert_eq!(a.cqs.len(), before.cqs.len());
            prop_assert_eq!(a.pds.len(), before.pds.len());
        }
        for (qpn, q) in a.qps.iter() {
            let e = q.engine_qpn();
            prop_assert!(e.is_some(), "QP {} has an engine QP", qpn);
            let e = e.unwrap_or(u32::MAX);
            prop_assert_eq!(eng.qp_state(e), Some(engine_state(q.state)), "QP {}", qpn);
            prop_assert_eq!(a.device_qpn(e), Some(*qpn));
        }
        reached_rts |= a.qps.values().any(|q| q.state == QpState::Rts);
        // Engine QPs exist only behind device QPs; regions only behind writable MRs.
        let engine_qps = (0..4).filter(|e| eng.qp_state(*e).is_some()).count();
        prop_assert_eq!(engine_qps, a.qps.len());
        let regions = (0..4)
            .filter(|s| eng.dp.regions().region(*s).is_some())
            .count();
        prop_assert_eq!(
            regions,
            a.mrs.values().filter(|m| m.remote_writable()).count()
        );
    }
    Ok(reached_rts)
}

/// QUERY_LIMITS reports the engine's per-QP window and work-request capacities and the
/// tables' sizes (from the type parameters: a test with other sizes answers otherwise), and 0
/// (no limit) without an engine.
#[test]
fn query_limits_reports_engine_and_tables() {
    let mut a = TestAdmin::new();
    let mut env = Env::default();
    let mut eng = engine();
    let r = run(&mut a, &mut env, &mut eng, AdminCommand::QueryLimits).result;
    // TestEngine: WIN 256, SQ 8, RQ 8; TestAdmin: FMT 2, EVP 2, EVN 16, CC 2.
    assert_eq!(
        r,
        Ok([256, (8 << 32) | 8, (2 << 48) | (2 << 32) | (16 << 16) | 2])
    );
    let mut none = NoEngine;
    let mut cx = Ctx {
        params: &PARAMS,
        env: &mut env,
        engine: &mut none,
        now_ns: 0,
    };
    let r = Admin::<1, 1, 1, 1, 3, 4, 5, 6>::new()
        .execute(AdminCommand::QueryLimits, &mut cx)
        .result;
    assert_eq!(r, Ok([0, 0, (3 << 48) | (4 << 32) | (5 << 16) | 6]));
}

std::thread_local! {
    static RTS_SEEN: core::cell::Cell<u32> = const { core::cell::Cell::new(0) };
}

/// The random sequences do reach RTS (else the state check above would check little).
#[test]
fn random_sequences_reach_rts() {
    use proptest::test_runner::{Config, TestRunner};
    let mut runner = TestRunner::new(Config {
        cases: 64,
        ..Config::default()
    });
    RTS_SEEN.with(|c| c.set(0));
    let strategy = proptest::collection::vec(command(), 1..80);
    let r = runner.run(&strategy, |cmds| {
        let rts = check_sequence(cmds)?;
        RTS_SEEN.with(|c| c.set(c.get() + u32::from(rts)));
        Ok(())
    });
    assert!(r.is_ok(), "{r:?}");
    let seen = RTS_SEEN.with(core::cell::Cell::get);
    assert!(seen >= 8, "only {seen} of 64 sequences reached RTS");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn hostile_bytes_never_panic(cmds in proptest::collection::vec(proptest::array::uniform32(any::<u8>()), 1..40)) {
        let mut a = TestAdmin::new();
        let mut env = Env::default();
        let mut eng = engine();
        for half in cmds {
            let mut raw = [0u8; 64];
            raw[..32].copy_from_slice(&half);
            raw[32..].copy_from_slice(&half);
            // A valid opcode half of the time, so the body checks run.
            raw[0] %= 0x50;
            let mut core = crate::admin::Core { engine: &mut eng.fw, regions: &mut eng.dp };
            let mut cx = Ctx { params: &PARAMS, env: &mut env, engine: &mut core, now_ns: 0 };
            let (reply, _) = a.handle(&raw, &mut cx);
            let _ = reply;
        }
    }

    #[test]
    fn device_and_engine_qp_states_agree(cmds in proptest::collection::vec(command(), 1..80)) {
        check_sequence(cmds)?;
    }
}
