//! The QEMU self-test: two NICs (the main loop around the engine, the datapath models standing
//! in for the hardware) exchanging a few thousand checked messages over lossy, reordering
//! planes with a plane failure ([`crate::twonic`]), the cost stream ([`crate::fwcost`]), engine
//! blocks with fixed inputs, the main loop's admin path, the update verifier (Ed25519 on the
//! core) and the crash record; prints counters and a final `self-test passed` /
//! `self-test FAILED` record.

use mrc_firmware::engine::cc::{Controller, Nscc, NsccParams};
use mrc_firmware::engine::retry::{RetryDecision, RetryState};
use mrc_firmware::engine::rng::Rng;
use mrc_firmware::engine::timer_wheel::{TimerId, TimerWheel};
use mrc_fw_update::slots::{BootControl, BootDecision, Slot};
use mrc_fw_update::test_key;
use mrc_fw_update::update::{RamSlots, SlotStorage, UpdateError, UpdatePolicy, Updater};
use mrc_nic_board::cmis::{DownReason, PortEvent};
use mrc_nic_board::crash::{event, CrashReason, CrashRecord, EventKind, EventTrace};

use mrc_abi::device::admin::body::{CreateCq, CreateQp, ObjectId, QpInit, QpRtr, QpRts};
use mrc_abi::device::admin::{AdminCommand, AdminReply, AdminStatus, QpModify, QpState};
use mrc_abi::device::csr::CsrEntry;
use mrc_nicloop::{Datapath, NicAdmin, NicLoop};

use crate::hal;
use crate::runtime::Runtime;

static TEST_IMAGE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/test-image.bin"));

/// Check counts; a failed check logs what failed.
pub struct Check {
    passed: u32,
    failed: u32,
}

impl Check {
    /// Count `ok`; log `what` when it is false.
    pub fn that(&mut self, ok: bool, what: &str) {
        if ok {
            self.passed += 1;
        } else {
            self.failed += 1;
            defmt::error!("check failed: {=str}", what);
        }
    }
}

/// Run everything; true when every check passed.
pub fn run() -> bool {
    let mut c = Check {
        passed: 0,
        failed: 0,
    };
    crate::twonic::checked_pair(&mut c);
    crate::twonic::planted_bug(&mut c);
    stream(&mut c);
    timer_wheel(&mut c);
    retry(&mut c);
    congestion(&mut c);
    building_blocks(&mut c);
    let mark = hal::stack_paint();
    admin(&mut c);
    let depth = hal::stack_used_below(mark);
    defmt::info!(
        "boot and admin path stack: {} bytes deep (budget {})",
        depth,
        mrc_nicloop::STACK_BUDGET
    );
    c.that(
        depth <= mrc_nicloop::STACK_BUDGET,
        "boot and admin path stack within budget",
    );
    update(&mut c);
    crash_record(&mut c);
    defmt::info!("checks: {} passed, {} failed", c.passed, c.failed);
    if c.failed == 0 {
        defmt::info!("self-test passed");
        true
    } else {
        defmt::error!("self-test FAILED");
        false
    }
}

/// Whether QEMU was started with the semihosting argument `fw-cost` (`just fw-cost`).
pub fn fw_cost_requested() -> bool {
    semihosting::experimental::env::args::<256>()
        .is_ok_and(|a| (&a).into_iter().any(|s| s == Ok("fw-cost")))
}

/// `just fw-cost`: the firmware cost JSON on semihosting stderr; passes when both runs
/// delivered every packet within the budget.
pub fn fw_cost() -> bool {
    match crate::fwcost::json() {
        Some(per_packet) => {
            defmt::info!(
                "firmware: {} instr per delivered packet (budget {})",
                per_packet,
                crate::fwcost::BUDGET_PER_PACKET
            );
            per_packet <= crate::fwcost::BUDGET_PER_PACKET
        }
        None => {
            defmt::error!("fw-cost: a stream run failed");
            false
        }
    }
}

/// The cost stream once (batched): every packet delivered once; the firmware's instructions
/// per delivered packet.
fn stream(c: &mut Check) {
    hal::trace(event(EventKind::SelfTest, 9));
    let r = crate::fwcost::run(false);
    c.that(
        !r.report.failed && r.report.delivered_packets == crate::fwcost::PACKETS,
        "stream delivers every packet once",
    );
    defmt::info!(
        "stream: {} data packets delivered, {} lost, {} retransmits; firmware (main loop + engine, both NICs) {} instr per delivered data packet, whole run {}",
        r.report.delivered_packets,
        r.report.channel.lost,
        r.report.sender.retransmits_sent,
        r.per_packet(),
        r.instructions / r.report.delivered_packets.max(1)
    );
}

fn timer_wheel(c: &mut Check) {
    hal::trace(event(EventKind::SelfTest, 1));
    let mut w = match TimerWheel::<256>::new(1_024) {
        Ok(w) => w,
        Err(_) => return c.that(false, "timer wheel config"),
    };
    let mut rng = Rng::new(7);
    let start = hal::instret();
    for i in 0..256u32 {
        let armed = w.arm(TimerId(i), rng.below(10_000_000)).is_ok();
        c.that(armed, "arm");
    }
    let (mut n, mut last, mut ordered) = (0u32, 0u64, true);
    let mut now = 0;
    while now <= 10_000_000 {
        while let Some(e) = w.poll_expired(now) {
            ordered &= e.deadline_ns >= last && e.deadline_ns <= now;
            last = e.deadline_ns;
            n += 1;
        }
        now += 50_000;
    }
    let per_op = (hal::instret() - start) / 256;
    c.that(
        n == 256 && ordered,
        "timers fire once, in deadline order, never early",
    );
    defmt::info!("timer wheel: {} fired, {} instr per arm+expire", n, per_op);
}

fn retry(c: &mut Check) {
    hal::trace(event(EventKind::SelfTest, 2));
    let Ok(mut r) = RetryState::from_attributes(3, 7) else {
        return c.that(false, "retry attributes");
    };
    let mut now = r.arm(0);
    let mut retries = 0;
    loop {
        match r.on_timeout(now) {
            RetryDecision::Retry { deadline_ns, .. } => {
                c.that(
                    deadline_ns == now + 8_192,
                    "linear timeout is 1.024us * 2^3",
                );
                now = deadline_ns;
                retries += 1;
            }
            RetryDecision::GiveUp { retries: n } => {
                c.that(n == 7, "gives up after retry_cnt");
                break;
            }
        }
    }
    c.that(retries == 7, "seven retries");
    c.that(
        RetryState::from_attributes(25, 0).is_err(),
        "t > 24 refused",
    );
    defmt::info!("retry: {} retries then give-up", retries);
}

fn congestion(c: &mut Check) {
    hal::trace(event(EventKind::SelfTest, 3));
    let Ok(p) = NsccParams::for_link(100_000_000_000, 10_000, 4_096) else {
        return c.that(false, "nscc params");
    };
    let mut cc = Nscc::new(p);
    let init = cc.cwnd_bytes();
    for i in 0..200u64 {
        cc.on_ack(i * 1_000, 4_096, false, 10_000);
    }
    let grown = cc.cwnd_bytes();
    for i in 0..50u64 {
        cc.on_ack(300_000 + i * 1_000, 4_096, true, 60_000);
    }
    let shrunk = cc.cwnd_bytes();
    let in_bounds = shrunk >= p.min_cwnd_bytes && grown <= p.max_cwnd_bytes;
    c.that(grown >= init, "window grows without congestion");
    c.that(shrunk < grown, "ECN + delay shrinks the window");
    c.that(in_bounds, "window stays in bounds");
    defmt::info!("nscc: cwnd {} -> {} -> {}", init, grown, shrunk);
}

/// The engine's building blocks stepped like a loop on the core (timer wheel, an EV table,
/// port events): see [`crate::runtime`].
fn building_blocks(c: &mut Check) {
    hal::trace(event(EventKind::SelfTest, 4));
    let mut rt = Runtime::new();
    let before = rt.evs().active();
    rt.handle_port_event(
        0,
        PortEvent::Down {
            port: 1,
            reason: DownReason::RxLos { lanes: 1 },
        },
    );
    c.that(rt.evs().plane_is_down(1), "port down retires the plane");
    c.that(
        rt.evs().active() == before - before / 4,
        "a quarter of the EVs retired",
    );
    rt.handle_port_event(0, PortEvent::Up { port: 1 });
    const ITERS: u64 = 1_000;
    let start_ns = hal::now_ns();
    let start = hal::instret();
    for _ in 0..ITERS {
        let now_ns = hal::now_ns();
        hal::watchdog_kick();
        rt.step(now_ns);
    }
    let per_iter = (hal::instret() - start) / ITERS;
    let k = rt.counters();
    c.that(k.iterations == ITERS, "loop ran");
    c.that(k.probes > 0, "probes requested after plane up");
    defmt::info!(
        "building blocks: {} iterations over {} ns, {} instr/iteration, probes {}, timers {}",
        ITERS,
        hal::now_ns() - start_ns,
        per_iter,
        k.probes,
        k.timers_fired
    );
}

/// A datapath with only an admin path: one command in, its reply out; FW->DP entries are
/// taken at once.
struct AdminOnly {
    cmd: Option<[u8; 64]>,
    reply: Option<AdminReply>,
    orders: u32,
}

impl Datapath for AdminOnly {
    fn peek_events(&mut self, _out: &mut [CsrEntry]) -> usize {
        0
    }
    fn consume_events(&mut self, _n: usize) {}
    fn orders_room(&mut self) -> usize {
        mrc_nicloop::BUDGET
    }
    fn push_orders(&mut self, entries: &[CsrEntry]) -> usize {
        // The datapath takes every entry at once.
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
        self.cmd.take()
    }
    fn push_admin_reply(&mut self, reply: &AdminReply) -> bool {
        self.reply = Some(*reply);
        true
    }
}

/// The NIC main loop built as the NIC builds it (in place, `hal::nic_loop`) and its admin path
/// on the core: a QP created and moved RESET -> INIT -> RTR -> RTS through admin commands (the
/// engine QP follows), an MPR the engine's window cannot hold refused with the field's offset,
/// teardown; instructions per command.
fn admin(c: &mut Check) {
    hal::trace(event(EventKind::SelfTest, 7));
    // The NIC's own loop and tables, built in place as the NIC image builds them.
    let (lp, tables) = hal::nic_loop();
    let mut dp = AdminOnly {
        cmd: None,
        reply: None,
        orders: 0,
    };
    let mut cmds = 0u64;
    let start = hal::instret();
    let mut run = |cmd: AdminCommand, lp: &mut NicLoop, tables: &mut NicAdmin| {
        let e = cmd.encode(1, 0);
        let mut raw = [0u8; 64];
        raw[0] = e.opcode;
        raw[2..4].copy_from_slice(&e.command_id.get().to_le_bytes());
        raw[8..].copy_from_slice(&e.body);
        dp.cmd = Some(raw);
        lp.step_admin(0, &mut dp, tables);
        cmds += 1;
        dp.reply.take().map_or((AdminStatus::Internal, 0, 0), |r| {
            (r.status, r.syndrome, r.result[0] as u32)
        })
    };
    let (s, _, pd) = run(AdminCommand::AllocPd, lp, tables);
    c.that(s == AdminStatus::Ok, "alloc pd");
    let cq = CreateCq {
        log2_entries: 4,
        rsvd: 0,
        irq_vector: 0.into(),
        rsvd2: 0.into(),
        base: 0x1000.into(),
    };
    let (_, _, cqn) = run(AdminCommand::CreateCq(cq), lp, tables);
    let qp = CreateQp {
        pd: pd.into(),
        send_cq: cqn.into(),
        recv_cq: cqn.into(),
        sq_log2: 4,
        rq_log2: 4,
        rsvd: 0.into(),
        sq_base: 0x2000.into(),
        rq_base: 0x3000.into(),
    };
    let (s, _, qpn) = run(AdminCommand::CreateQp(qp), lp, tables);
    c.that(s == AdminStatus::Ok, "create qp");
    let init = QpInit {
        qpn: qpn.into(),
        to_state: QpState::Init as u8,
        dscp: 0,
        hint_flags: 0.into(),
        ev_profile: 0.into(),
        cc_profile: 0.into(),
    };
    let rtr = |mpr: u16| QpRtr {
        qpn: qpn.into(),
        to_state: QpState::Rtr as u8,
        flags: 0,
        responder_mpr: mpr.into(),
        dest_qpn: qpn.into(),
        max_wimm: 4.into(),
        rsvd: 0.into(),
        rq_psn: 0.into(),
        remote_addr: [0xfd; 16],
    };
    let rts = QpRts {
        qpn: qpn.into(),
        to_state: QpState::Rts as u8,
        retry_count: 7,
        requester_mpr: 1.into(),
        max_wimm: 4.into(),
        ack_timeout_exp: 6,
        rsvd: 0,
        sq_psn: 0.into(),
    };
    let m = |q| AdminCommand::ModifyQp(q);
    let ok_init = run(m(QpModify::Init(init)), lp, tables).0 == AdminStatus::Ok;
    let big = run(m(QpModify::Rtr(rtr(3))), lp, tables);
    let ok_rtr = run(m(QpModify::Rtr(rtr(1))), lp, tables).0 == AdminStatus::Ok;
    let ok_rts = run(m(QpModify::Rts(rts)), lp, tables).0 == AdminStatus::Ok;
    c.that(ok_init && ok_rtr && ok_rts, "RESET -> INIT -> RTR -> RTS");
    c.that(
        big.0 == AdminStatus::BadAttribute && big.1 == 14,
        "MPR beyond the engine's window refused at its offset",
    );
    let engine_qpn = tables.qps.get(&qpn).and_then(|q| q.engine_qpn());
    c.that(
        engine_qpn.and_then(|e| lp.engine().qp_state(e))
            == Some(mrc_firmware::engine::QpState::Rts),
        "engine QP in RTS",
    );
    let id = |v: u32| ObjectId { id: v.into() };
    let ok_destroy = run(AdminCommand::DestroyQp(id(qpn)), lp, tables).0 == AdminStatus::Ok
        && run(AdminCommand::DestroyCq(id(cqn)), lp, tables).0 == AdminStatus::Ok;
    c.that(ok_destroy, "teardown");
    c.that(
        engine_qpn.is_some_and(|e| lp.engine().qp_state(e).is_none()),
        "engine QP destroyed",
    );
    let per_cmd = (hal::instret() - start) / cmds.max(1);
    defmt::info!(
        "admin: {} commands through the main loop, {} instr per command (main-loop step included)",
        cmds,
        per_cmd
    );
}

fn update(c: &mut Check) {
    hal::trace(event(EventKind::SelfTest, 5));
    let policy = UpdatePolicy {
        abi_major: crate::ABI_MAJOR,
        public_key: test_key::PUBLIC_KEY,
    };
    let mut flash = RamSlots::<2048>::new();
    let mut control = BootControl::factory(1, 2);
    let mut install = |image: &[u8], flip: Option<usize>, policy: &UpdatePolicy| {
        let mut up = Updater::new(Slot::A);
        if up.begin(&mut control, &mut flash).is_err() {
            return Err(UpdateError::Busy);
        }
        for (i, chunk) in image.chunks(256).enumerate() {
            up.write(&mut flash, (i * 256) as u32, chunk)?;
        }
        if let Some(at) = flip {
            let mut b = [0u8; 1];
            let _ = flash.read(Slot::B, at as u32, &mut b);
            let _ = flash.write(Slot::B, at as u32, &[b[0] ^ 0x10]);
        }
        up.finish(&mut control, &flash, policy)
            .map(|i| i.header.image_version)
    };
    let start = hal::instret();
    let good = install(TEST_IMAGE, None, &policy);
    let verify_instr = hal::instret() - start;
    c.that(good == Ok(2), "signed image accepted");
    c.that(
        matches!(
            install(TEST_IMAGE, Some(600), &policy),
            Err(UpdateError::BadCrc { .. })
        ),
        "bad CRC refused",
    );
    c.that(
        install(TEST_IMAGE, Some(70), &policy) == Err(UpdateError::BadSignature),
        "bad signature refused",
    );
    c.that(
        matches!(
            install(&TEST_IMAGE[..TEST_IMAGE.len() - 8], None, &policy),
            Err(UpdateError::Truncated { .. })
        ),
        "truncated image refused",
    );
    let other_abi = UpdatePolicy {
        abi_major: crate::ABI_MAJOR + 1,
        ..policy
    };
    c.that(
        matches!(
            install(TEST_IMAGE, None, &other_abi),
            Err(UpdateError::WrongAbi { .. })
        ),
        "wrong ABI refused",
    );
    // Accept, never confirm: rolled back after two trial boots.
    let _ = install(TEST_IMAGE, None, &policy);
    let d1 = control.select_boot();
    let d2 = control.select_boot();
    let d3 = control.select_boot();
    c.that(
        matches!(
            d1,
            BootDecision::Boot {
                slot: Slot::B,
                trial: true
            }
        ) && matches!(d2, BootDecision::Boot { trial: true, .. })
            && d3
                == BootDecision::RolledBack {
                    from: Slot::B,
                    to: Slot::A,
                },
        "unconfirmed image rolled back",
    );
    defmt::info!(
        "update: {} byte image verified (CRC + Ed25519) in {} instr",
        TEST_IMAGE.len(),
        verify_instr
    );
}

fn crash_record(c: &mut Check) {
    hal::trace(event(EventKind::SelfTest, 6));
    let mut t = EventTrace::new();
    t.push(event(EventKind::PortDown, 0x0105));
    let mut r = CrashRecord::EMPTY;
    r.record(CrashReason::Panic, 3, file!(), line!(), 0, &t);
    let ok = r
        .read()
        .is_some_and(|x| x.reason == CrashReason::Panic && x.file == file!());
    c.that(ok, "crash record round trip");
}
