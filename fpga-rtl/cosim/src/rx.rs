//! `rx_psn_tracker.sv` against `RxBitmap<4>` (a 256-PSN window).

use crate::{mismatch, Mismatch, Report, Rng, Rtl, Words};
use mrc_abi::Psn;
use mrc_firmware::datapath::blocks::{RxTrackerCmd as Cmd, RxTrackerRsp};
use mrc_firmware::datapath::{RxBitmap, RxOutcome};
use std::collections::VecDeque;

/// Window words of the RTL instance (`rx_psn_tracker` parameter WORDS).
pub const WORDS: usize = 4;
const W: i64 = 64 * WORDS as i64;

/// One response as the RTL gives it (outcome code, 32-bit counters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rsp {
    pub outcome: u8,
    pub cum: u32,
    pub next_max: u32,
    pub sack_base: u32,
    pub bitmap: u64,
    pub counters: [u32; 3],
}

/// The RTL's outcome code.
pub(crate) fn outcome_code(o: RxOutcome) -> u8 {
    match o {
        RxOutcome::New => 0,
        RxOutcome::Duplicate => 1,
        RxOutcome::OutOfWindow => 2,
    }
}

/// The outcome of an RTL outcome code (3, which the block never gives, reads as out of
/// window).
pub(crate) fn outcome_of(code: u8) -> RxOutcome {
    match code {
        0 => RxOutcome::New,
        1 => RxOutcome::Duplicate,
        _ => RxOutcome::OutOfWindow,
    }
}

/// The model's response to `cmd` as the RTL gives it.
pub(crate) fn rsp(cmd: Cmd, r: &RxTrackerRsp) -> Rsp {
    let c = r.counters;
    Rsp {
        outcome: outcome_code(r.outcome),
        cum: r.cum_psn.value(),
        next_max: r.next_max_psn.value(),
        sack_base: cmd.psn().value(),
        bitmap: r.sack_bitmap,
        counters: [c.new as u32, c.duplicates as u32, c.out_of_window as u32],
    }
}

fn gen(rng: &mut Rng, cum: Psn) -> Cmd {
    let near = |rng: &mut Rng, lo: i64, hi: i64| {
        let off = lo + rng.below((hi - lo) as u64) as i64;
        Psn::new((i64::from(cum.value()) + off) as u32)
    };
    match rng.below(1000) {
        0..=4 => {
            // Reset, often close to the 24-bit wrap.
            let v = if rng.bit() {
                (1 << 24) - rng.below(300) as u32
            } else {
                rng.next_u64() as u32
            };
            Cmd::Reset(Psn::new(v))
        }
        5..=14 => Cmd::Receive(Psn::new(rng.next_u64() as u32)),
        15..=214 => Cmd::Sack(near(rng, -80, W + 20)),
        // Mostly the next few PSNs (so `cum` moves), with reordering, duplicates, window edges.
        215..=700 => Cmd::Receive(near(rng, 0, 8)),
        _ => Cmd::Receive(near(rng, -40, W + 40)),
    }
}

fn apply(m: &mut RxBitmap<WORDS>, c: Cmd) -> Rsp {
    rsp(c, &m.apply(c))
}

/// The input words of one clock: command `c` offered (`None`: `cmd_valid` low), `rsp_ready`.
pub(crate) fn encode(c: Option<Cmd>, rsp_ready: bool) -> Words {
    let (op, psn) = match c {
        None => (0, 0),
        Some(Cmd::Receive(p)) => (0, p.value()),
        Some(Cmd::Sack(p)) => (1, p.value()),
        Some(Cmd::Reset(p)) => (2, p.value()),
    };
    let mut w = Words::default();
    w.b(c.is_some()).u(op, 2).u(psn.into(), 24).b(rsp_ready);
    w
}

/// Input `i` of the timing measurement (`crate::timing`), response always taken: receives of
/// PSNs `i`, some out of order, with a SACK every 8th command.
pub(crate) fn timing_input(i: usize, valid: bool) -> Words {
    let psn = Psn::new((i ^ 1) as u32);
    let cmd = if i % 8 == 7 {
        Cmd::Sack(Psn::new(0))
    } else {
        Cmd::Receive(psn)
    };
    encode(valid.then_some(cmd), true)
}

/// One clock's outputs: `cmd_ready`, `rsp_valid` and the response ports.
pub(crate) fn decode(mut o: crate::Out) -> (bool, bool, Rsp) {
    let cmd_ready = o.b();
    let rsp_valid = o.b();
    let rsp = Rsp {
        outcome: o.u(2) as u8,
        cum: o.u(24) as u32,
        next_max: o.u(24) as u32,
        sack_base: o.u(24) as u32,
        bitmap: o.u(64),
        counters: [o.u(32) as u32, o.u(32) as u32, o.u(32) as u32],
    };
    (cmd_ready, rsp_valid, rsp)
}

/// Drive the tracker for `cycles` clocks.
pub fn run(mut rtl: Rtl, seed: u64, cycles: u64) -> Result<Report, Mismatch> {
    let mut rng = Rng::new(seed);
    let mut model: RxBitmap<WORDS> = RxBitmap::new(Psn::new(0));
    let mut pending: Option<Cmd> = None;
    let mut expect: VecDeque<(Cmd, Rsp)> = VecDeque::new();
    let mut compared = 0u64;
    for cycle in 0..cycles {
        if pending.is_none() && rng.chance(85) {
            pending = Some(gen(&mut rng, model.cum_psn()));
        }
        let rsp_ready = rng.chance(75);
        let (cmd_ready, rsp_valid, got) = decode(rtl.step(&encode(pending, rsp_ready)));
        if rsp_valid && rsp_ready {
            let Some((cmd, want)) = expect.pop_front() else {
                return Err(mismatch(
                    cycle,
                    compared,
                    "response without a command".into(),
                ));
            };
            if got != want {
                return Err(mismatch(
                    cycle,
                    compared,
                    format!("{cmd:?}: rtl {got:x?}, model {want:x?}"),
                ));
            }
            compared += 1;
        }
        if let (Some(c), true) = (pending, cmd_ready) {
            expect.push_back((c, apply(&mut model, c)));
            pending = None;
        }
    }
    Ok(Report {
        cycles,
        transactions: compared,
    })
}
