//! Two NICs, each the datapath model behind its rings (`mrc-nicloop`'s test model) with a
//! firmware behind them, set up through admin commands and running writes over lossy wires:
//! the harness of the differential test and of the `elf_speed` example.
#![allow(dead_code)]

#[path = "../../../../../firmware/image/nicloop/tests/common/mod.rs"]
mod common;

/// The harness's payload bytes per packet.
pub use common::MTU;
use common::*;
use mrc_abi::device::admin::{AdminCommand, AdminReply, AdminStatus};
use mrc_abi::device::csr::{CsrEntry, CsrEvent};
use mrc_elfcore::{CoreConfig, ElfCore, Stop};
use mrc_firmware::datapath::packet::{LocalBuf, Packet, PacketBody, SendWr};
use mrc_nicloop::{LoopConfig, NicAdmin, NicLoop};

/// A NIC's firmware: one main-loop iteration at `now` with `dp` behind the rings.
pub trait Firmware {
    fn step(&mut self, now: u64, dp: &mut ModelDp);
}

pub struct Native {
    pub lp: Box<NicLoop>,
    pub admin: Box<NicAdmin>,
}

impl Firmware for Native {
    fn step(&mut self, now: u64, dp: &mut ModelDp) {
        self.lp.step_admin(now, dp, &mut self.admin);
    }
}

pub struct Elf {
    pub core: ElfCore,
    /// Instructions of each iteration.
    pub runs: Vec<u64>,
    /// Wall time inside the core's steps.
    pub wall: std::time::Duration,
}

impl Firmware for Elf {
    fn step(&mut self, now: u64, dp: &mut ModelDp) {
        let t = std::time::Instant::now();
        let run = self
            .core
            .step(now, dp)
            .unwrap_or_else(|e| panic!("iteration at {now} ns: {e}"));
        self.wall += t.elapsed();
        assert_eq!(run.stop, Stop::Iteration);
        self.runs.push(run.instructions);
    }
}

pub struct Nic<F> {
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
        let raw = encode(&c, id);
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

pub fn objects<F: Firmware>(n: &mut Nic<F>) -> (u32, u32, u32) {
    let pd = n.ok(AdminCommand::AllocPd)[0] as u32;
    let cq = n.ok(create_cq())[0] as u32;
    let qp = n.ok(create_qp(pd, cq))[0] as u32;
    (pd, cq, qp)
}

/// QP `qp` through INIT, RTR and RTS towards `peer` at `gid` (default EV and CC profiles).
pub fn connect<F: Firmware>(n: &mut Nic<F>, qp: u32, peer: u32, gid: [u8; 16]) {
    n.ok(init(qp, 0));
    n.ok(rtr(qp, peer, gid, 1, 8));
    n.ok(rts(qp, 1, 7));
}

/// Messages A writes to B.
pub const MESSAGES: u64 = 64;
/// Main-loop iterations of each NIC, 1 us apart.
pub const ROUNDS: u64 = 6_000;

/// What a run produced, per NIC: FW->DP entries, host writes, admin replies; and the payload
/// placed at B.
pub struct Outcome {
    pub log: [Vec<CsrEntry>; 2],
    /// FW->DP entries written so far at the end of each round, per NIC: when each was
    /// written.
    pub marks: [Vec<usize>; 2],
    pub host: [Vec<CsrEntry>; 2],
    pub replies: [Vec<AdminReply>; 2],
    pub placed: Vec<(u16, u64, u32)>,
    pub sent_cqes: usize,
}

/// Drops every 7th data packet A sends and every 5th packet B sends (its ACKs); `n` counts
/// A's data packets, or all of B's packets.
pub fn lossy(p: &Packet, n: u64, from_a: bool) -> bool {
    if from_a {
        matches!(p.body, PacketBody::Write { .. }) && n % 7 == 3
    } else {
        n % 5 == 2
    }
}

/// `messages` writes from A to B over `rounds` rounds 1 us apart. A NIC's firmware runs an
/// iteration in a round when its datapath has reports or admin commands for it, and in every
/// `poll`-th round in any case (its timers): `poll` = 1 runs it every round, as a core that
/// polls; more stands for a core woken by work with a periodic timer check.
pub fn run<F: Firmware>(a: F, b: F, messages: u64, rounds: u64, poll: u64) -> (Outcome, [F; 2]) {
    run_with(a, b, messages, rounds, poll, |_, _| {}, |_, _| false)
}

/// [`run`] with `at_round(k, a's firmware)` called before each round `k`'s iterations (the
/// test changes A's board) and `cut(packet, from_a)` losing packets besides the lossy
/// wires' (a pulled transceiver's plane).
pub fn run_with<F: Firmware>(
    a: F,
    b: F,
    messages: u64,
    rounds: u64,
    poll: u64,
    mut at_round: impl FnMut(u64, &mut F),
    mut cut: impl FnMut(&Packet, bool) -> bool,
) -> (Outcome, [F; 2]) {
    let mut a = Nic::new(a, 1);
    let mut b = Nic::new(b, 2);
    let (_, _, qp_a) = objects(&mut a);
    let (pd_b, _, qp_b) = objects(&mut b);
    let (gid_a, gid_b) = (a.gid, b.gid);
    connect(&mut a, qp_a, qp_b, gid_b);
    connect(&mut b, qp_b, qp_a, gid_a);
    let mr = b.ok(reg_mr(pd_b));
    let rkey = mr[1] as u32;
    let mut wires = [Wire::default(), Wire::default()];
    let mut posted = 0;
    let mut b_sent = 0u64;
    let mut marks = [Vec::new(), Vec::new()];
    for k in 0..rounds {
        let now = 1_000 * k;
        while posted < messages {
            let wr = SendWr {
                wr_id: posted,
                local: LocalBuf::default(),
                // (the region is 1 MiB: 256 slots of 4 packets, reused)
                remote_va: REGION_VA + (posted % 256) * 4 * u64::from(MTU),
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
        at_round(k, &mut a.fw);
        for (n, m) in [&mut a, &mut b].into_iter().zip(&mut marks) {
            n.dp.hw(now);
            if k % poll == 0 || !n.dp.events.is_empty() || !n.dp.admin.is_empty() {
                n.step(now);
            }
            m.push(n.dp.log.len());
        }
        wires[0].carry(now, &mut a.dp, &mut b.dp, |p, n| {
            cut(p, true) || lossy(p, n, true)
        });
        wires[1].carry(now, &mut b.dp, &mut a.dp, |p, _| {
            if cut(p, false) {
                return true;
            }
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
        marks,
        host: [a.dp.host.clone(), b.dp.host.clone()],
        replies: [a.dp.replies.clone(), b.dp.replies.clone()],
        placed: wires[0].placed.clone(),
        sent_cqes,
    };
    (out, [a.fw, b.fw])
}

pub fn native() -> Native {
    Native {
        lp: Box::new(NicLoop::new(LoopConfig::DEFAULT).expect("the image's loop config")),
        admin: Box::new(NicAdmin::new()),
    }
}

pub fn elf(image: &[u8]) -> Elf {
    Elf {
        core: ElfCore::boot(image, CoreConfig::DEFAULT).expect("the image boots"),
        runs: Vec::new(),
        wall: std::time::Duration::ZERO,
    }
}
