//! The `elf` firmware level held to the native one: two NICs, each the datapath model behind
//! its rings with the image's main loop as firmware, run once with `NicLoop::step_admin`
//! compiled natively and once with the `mrc-nic` ELF on the emulated core (`ElfCore::step`),
//! from the same admin commands (CQs, PDs, QPs through RESET -> INIT -> RTR -> RTS, a
//! remotely writable region) and the same traffic (64 writes over a wire that drops data
//! packets and ACKs). Every FW->DP entry each firmware wrote, every host write the datapath
//! passed on, every admin reply and every placed payload must be equal, step by step; each
//! emulated iteration must retire instructions.
//!
//! Builds the NIC image (`tests/build`): without the riscv32imac target it prints
//! `SKIPPED: ...` and passes, unless `CI` is set.

#[path = "../../../firmware/image/nicloop/tests/common/mod.rs"]
mod common;

mod build;

use common::{ModelDp, Wire, MTU, REGION_VA};
use mrc_abi::device::admin::body::*;
use mrc_abi::device::admin::{
    AdminCommand, AdminReply, AdminStatus, QpModify, QpState, ACCESS_LOCAL_WRITE,
    ACCESS_REMOTE_WRITE,
};
use mrc_abi::device::csr::{CsrEntry, CsrEvent, CsrKind};
use mrc_elfcore::{CoreConfig, ElfCore, Stop};
use mrc_firmware::datapath::packet::{LocalBuf, Packet, PacketBody, SendWr};
use mrc_nicloop::{LoopConfig, NicAdmin, NicLoop};

/// A NIC's firmware: one main-loop iteration at `now` with `dp` behind the rings.
trait Firmware {
    fn step(&mut self, now: u64, dp: &mut ModelDp);
}

struct Native {
    lp: Box<NicLoop>,
    admin: Box<NicAdmin>,
}

impl Firmware for Native {
    fn step(&mut self, now: u64, dp: &mut ModelDp) {
        self.lp.step_admin(now, dp, &mut self.admin);
    }
}

struct Elf {
    core: ElfCore,
    /// Instructions of each iteration.
    runs: Vec<u64>,
}

impl Firmware for Elf {
    fn step(&mut self, now: u64, dp: &mut ModelDp) {
        let run = self
            .core
            .step(now, dp)
            .unwrap_or_else(|e| panic!("iteration at {now} ns: {e}"));
        assert_eq!(run.stop, Stop::Iteration);
        self.runs.push(run.instructions);
    }
}

struct Nic<F> {
    fw: F,
    dp: ModelDp,
    gid: [u8; 16],
    next_id: u16,
}

impl<F: Firmware> Nic<F> {
    fn new(fw: F, last: u8) -> Self {
        let mut gid = [0u8; 16];
        gid[0] = 0xfd;
        gid[15] = last;
        Nic {
            fw,
            dp: ModelDp::new(),
            gid,
            next_id: 0,
        }
    }

    fn step(&mut self, now: u64) {
        self.dp.hw(now);
        self.fw.step(now, &mut self.dp);
        self.dp.hw(now);
    }

    fn ok(&mut self, c: AdminCommand) -> [u64; 3] {
        self.next_id += 1;
        let id = self.next_id;
        let cmd = c.encode(id, 0);
        let mut raw = [0u8; 64];
        raw[0] = cmd.opcode;
        raw[1] = cmd.flags;
        raw[2..4].copy_from_slice(&cmd.command_id.get().to_le_bytes());
        raw[8..].copy_from_slice(&cmd.body);
        self.dp.admin.push_back(raw);
        for _ in 0..4 {
            self.step(0);
            if let Some(r) = self.dp.replies.last().copied() {
                if r.command_id == id {
                    assert_eq!(r.status, AdminStatus::Ok, "{c:?}: {r:?}");
                    return r.result;
                }
            }
        }
        panic!("no reply to {c:?}");
    }
}

fn objects<F: Firmware>(n: &mut Nic<F>) -> (u32, u32, u32) {
    let pd = n.ok(AdminCommand::AllocPd)[0] as u32;
    let cq = n.ok(AdminCommand::CreateCq(CreateCq {
        log2_entries: 6,
        rsvd: 0,
        irq_vector: 1.into(),
        rsvd2: 0.into(),
        base: 0x1_0000.into(),
    }))[0] as u32;
    let qp = n.ok(AdminCommand::CreateQp(CreateQp {
        pd: pd.into(),
        send_cq: cq.into(),
        recv_cq: cq.into(),
        sq_log2: 4,
        rq_log2: 4,
        rsvd: 0.into(),
        sq_base: 0x2_0000.into(),
        rq_base: 0x3_0000.into(),
    }))[0] as u32;
    (pd, cq, qp)
}

fn connect<F: Firmware>(n: &mut Nic<F>, qp: u32, peer: u32, gid: [u8; 16]) {
    n.ok(AdminCommand::ModifyQp(QpModify::Init(QpInit {
        qpn: qp.into(),
        to_state: QpState::Init as u8,
        dscp: 26,
        hint_flags: 0.into(),
        ev_profile: 0.into(),
        cc_profile: 0.into(),
    })));
    n.ok(AdminCommand::ModifyQp(QpModify::Rtr(QpRtr {
        qpn: qp.into(),
        to_state: QpState::Rtr as u8,
        flags: 0,
        responder_mpr: 1.into(),
        dest_qpn: peer.into(),
        max_wimm: 8.into(),
        rsvd: 0.into(),
        rq_psn: 0.into(),
        remote_addr: gid,
    })));
    n.ok(AdminCommand::ModifyQp(QpModify::Rts(QpRts {
        qpn: qp.into(),
        to_state: QpState::Rts as u8,
        retry_count: 7,
        requester_mpr: 1.into(),
        max_wimm: 8.into(),
        ack_timeout_exp: 6,
        rsvd: 0,
        sq_psn: 0.into(),
    })));
}

/// Messages A writes to B.
const MESSAGES: u64 = 64;
/// Main-loop iterations of each NIC, 1 us apart.
const ROUNDS: u64 = 6_000;

/// What a run produced, per NIC: FW->DP entries, host writes, admin replies; and the payload
/// placed at B.
struct Outcome {
    log: [Vec<CsrEntry>; 2],
    host: [Vec<CsrEntry>; 2],
    replies: [Vec<AdminReply>; 2],
    placed: Vec<(u16, u64, u32)>,
    sent_cqes: usize,
}

/// Drops every 7th data packet A sends and every 5th packet B sends (its ACKs); `n` counts
/// A's data packets, or all of B's packets.
fn lossy(p: &Packet, n: u64, from_a: bool) -> bool {
    if from_a {
        matches!(p.body, PacketBody::Write { .. }) && n % 7 == 3
    } else {
        n % 5 == 2
    }
}

fn run<F: Firmware>(a: F, b: F) -> (Outcome, [F; 2]) {
    let mut a = Nic::new(a, 1);
    let mut b = Nic::new(b, 2);
    let (_, _, qp_a) = objects(&mut a);
    let (pd_b, _, qp_b) = objects(&mut b);
    let (gid_a, gid_b) = (a.gid, b.gid);
    connect(&mut a, qp_a, qp_b, gid_b);
    connect(&mut b, qp_b, qp_a, gid_a);
    let mr = b.ok(AdminCommand::RegMr(RegMr {
        pd: pd_b.into(),
        access: (ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE).into(),
        va: REGION_VA.into(),
        iova: 0x5000_0000.into(),
        length: (1u64 << 20).into(),
    }));
    let rkey = mr[1] as u32;
    let mut wires = [Wire::default(), Wire::default()];
    let mut posted = 0;
    let mut b_sent = 0u64;
    for k in 0..ROUNDS {
        let now = 1_000 * k;
        while posted < MESSAGES {
            let wr = SendWr {
                wr_id: posted,
                local: LocalBuf::default(),
                remote_va: REGION_VA + posted * 4 * u64::from(MTU),
                rkey,
                len: 1 + (posted as u32 * 977) % (3 * MTU),
                imm: None,
                signaled: true,
            };
            if a.dp.stage.post_send(qp_a, wr).is_err() {
                break;
            }
            posted += 1;
        }
        a.step(now);
        b.step(now);
        wires[0].carry(now, &mut a.dp, &mut b.dp, |p, n| lossy(p, n, true));
        wires[1].carry(now, &mut b.dp, &mut a.dp, |p, _| {
            b_sent += 1;
            lossy(p, b_sent, false)
        });
    }
    let sent_cqes =
        a.dp.host_writes()
            .iter()
            .filter(|e| matches!(e, CsrEvent::PostCqe(_)))
            .count();
    let out = Outcome {
        log: [a.dp.log.clone(), b.dp.log.clone()],
        host: [a.dp.host.clone(), b.dp.host.clone()],
        replies: [a.dp.replies.clone(), b.dp.replies.clone()],
        placed: wires[0].placed.clone(),
        sent_cqes,
    };
    (out, [a.fw, b.fw])
}

fn native() -> Native {
    Native {
        lp: Box::new(NicLoop::new(LoopConfig::DEFAULT).expect("the image's loop config")),
        admin: Box::new(NicAdmin::new()),
    }
}

fn elf(image: &[u8]) -> Elf {
    Elf {
        core: ElfCore::boot(image, CoreConfig::DEFAULT).expect("the image boots"),
        runs: Vec::new(),
    }
}

/// The first entry where two logs differ, decoded, for the failure message.
fn first_difference(what: &str, native: &[CsrEntry], elf: &[CsrEntry]) -> Option<String> {
    let i = native.iter().zip(elf).position(|(a, b)| a != b);
    match i {
        Some(i) => Some(format!(
            "{what}: entry {i} differs: native {:?}, elf {:?}",
            native[i].decode(),
            elf[i].decode()
        )),
        None if native.len() != elf.len() => Some(format!(
            "{what}: native wrote {} entries, elf {}",
            native.len(),
            elf.len()
        )),
        None => None,
    }
}

#[test]
fn the_elf_main_loop_writes_what_the_native_one_writes() {
    let Some(image) = build::nic_image("the_elf_main_loop_writes_what_the_native_one_writes")
    else {
        return;
    };
    let (want, _) = run(native(), native());
    // The run is worth comparing: every write completed through losses, retransmissions and
    // timeouts, with CQEs on the host side.
    assert_eq!(want.sent_cqes, MESSAGES as usize, "every write completed");
    let kinds =
        |log: &[CsrEntry], k: CsrKind| log.iter().filter(|e| e.kind_code() == k as u8).count();
    let resent =
        kinds(&want.log[0], CsrKind::Retransmit) + kinds(&want.log[0], CsrKind::RetransmitUnacked);
    assert!(resent > 0, "losses were repaired");
    assert!(
        kinds(&want.log[0], CsrKind::WindowUpdate) > 0,
        "congestion control ran"
    );

    let t = std::time::Instant::now();
    let (got, fws) = run(elf(&image), elf(&image));
    let wall = t.elapsed();
    for (i, name) in ["A", "B"].iter().enumerate() {
        if let Some(d) = first_difference(&format!("NIC {name} FW->DP"), &want.log[i], &got.log[i])
        {
            panic!("{d}");
        }
        if let Some(d) = first_difference(
            &format!("NIC {name} host writes"),
            &want.host[i],
            &got.host[i],
        ) {
            panic!("{d}");
        }
        assert_eq!(want.replies[i], got.replies[i], "NIC {name} admin replies");
    }
    assert_eq!(want.placed, got.placed, "payload placed at B");

    // Every iteration retired instructions; the counts add up to the core's.
    let mut total = 0;
    for f in &fws {
        assert!(
            f.runs.iter().all(|&n| n > 0),
            "an iteration retired nothing"
        );
        assert!(f.core.boot_instructions() > 0);
        let sum: u64 = f.runs.iter().sum();
        assert_eq!(f.core.retired(), f.core.boot_instructions() + sum);
        assert_eq!(f.core.runs(), f.runs.len() as u64);
        assert_eq!(f.core.bridge_counters(), Default::default());
        let d = f.core.device().counters;
        assert_eq!((d.unknown_reads, d.unknown_writes, d.bad_kicks), (0, 0, 0));
        // (the boot's `watchdog_start` kicks once)
        assert_eq!(
            d.kicks,
            f.runs.len() as u64 + 1,
            "a watchdog kick per iteration"
        );
        assert_eq!(
            f.core.device().wdt_timeout_ns,
            50_000_000,
            "the image's period"
        );
        total += f.core.retired();
    }
    println!(
        "elf level: {} iterations, {total} guest instructions in {:.3} s of wall time \
         (with the datapath models): {:.1} M instructions/s",
        fws[0].runs.len() + fws[1].runs.len(),
        wall.as_secs_f64(),
        total as f64 / wall.as_secs_f64() / 1e6
    );
}
