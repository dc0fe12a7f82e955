//! `ev_sprayer.sv` against `Sprayer<256, 4>`.

use crate::{mismatch, Mismatch, Report, Rng, Rtl, Words};
use mrc_firmware::datapath::blocks::SprayerCmd as Cmd;
use mrc_firmware::datapath::{EvPick, EvSlot, Sprayer, SprayerCounters, SprayerError};
use std::collections::VecDeque;

/// EV table size of the RTL instance (`ev_sprayer` parameter N).
pub const N: usize = 256;
/// Planes of the RTL instance (parameter P).
pub const P: usize = 4;

/// One response as the RTL gives it (`rsp_err` code, 32-bit counters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rsp {
    pub pick: Option<EvPick>,
    pub err: u8,
    pub counters: [u32; 4],
}

pub(crate) fn err_code(r: Option<SprayerError>) -> u8 {
    match r {
        None => 0,
        Some(SprayerError::IndexOutOfRange { .. }) => 1,
        Some(SprayerError::BadWeight { .. }) => 2,
        Some(SprayerError::BadPlane { .. }) => 3,
    }
}

/// The low 32 bits of each counter (the RTL's counters are 32-bit).
pub(crate) fn counters(c: SprayerCounters) -> [u32; 4] {
    [
        c.picks as u32,
        c.no_usable as u32,
        c.skips as u32,
        c.bad_writes as u32,
    ]
}

fn gen(rng: &mut Rng, issued: u64) -> Cmd {
    let slot = |rng: &mut Rng, valid: bool| EvSlot {
        usable: rng.chance(85),
        weight: if valid {
            1 + rng.below(15) as u8
        } else {
            rng.below(18) as u8
        },
        plane: if valid {
            rng.below(P as u64) as u8
        } else {
            rng.below(P as u64 + 2) as u8
        },
        skip_once: rng.chance(10),
    };
    if issued < N as u64 && rng.chance(60) {
        return Cmd::SetEv(issued as u16, slot(rng, true));
    }
    let idx = |rng: &mut Rng| rng.below(N as u64 + 8) as u16;
    match rng.below(100) {
        0..=69 => Cmd::Next,
        70..=77 => {
            let valid = rng.chance(80);
            Cmd::SetEv(idx(rng), slot(rng, valid))
        }
        78..=86 => Cmd::SetUsable(idx(rng), rng.chance(50)),
        87..=96 => Cmd::MarkSkip(idx(rng)),
        _ => Cmd::PlaneWeight(rng.below(P as u64 + 1) as u8, rng.below(17) as u8),
    }
}

fn apply(m: &mut Sprayer<N, P>, c: Cmd) -> Rsp {
    let r = m.apply(c);
    Rsp {
        pick: r.pick,
        err: err_code(r.err),
        counters: counters(r.counters),
    }
}

/// The input words of one clock: command `c` offered (`None`: `cmd_valid` low), `rsp_ready`.
pub(crate) fn encode(c: Option<Cmd>, rsp_ready: bool) -> Words {
    let (op, idx, usable, weight, plane, skip) = match c.unwrap_or(Cmd::Next) {
        Cmd::Next => (0, 0, false, 0, 0, false),
        Cmd::SetEv(i, s) => (1, i, s.usable, s.weight, s.plane, s.skip_once),
        Cmd::SetUsable(i, u) => (2, i, u, 0, 0, false),
        Cmd::MarkSkip(i) => (3, i, false, 0, 0, false),
        Cmd::PlaneWeight(p, w) => (4, 0, false, w, p, false),
    };
    let mut w = Words::default();
    w.b(c.is_some())
        .u(op, 3)
        .u(idx.into(), 16)
        .b(usable)
        .u(weight.into(), 8)
        .u(plane.into(), 8)
        .b(skip)
        .b(rsp_ready);
    w
}

/// Input `i` of the timing measurement (`crate::timing`), response always taken: EV table
/// writes of slots 0..8 (usable, planes in turn), then `next_ev` decisions.
pub(crate) fn timing_input(i: usize, valid: bool) -> Words {
    let cmd = if i < 8 {
        Cmd::SetEv(
            i as u16,
            EvSlot {
                usable: true,
                weight: 1,
                plane: (i % P) as u8,
                skip_once: false,
            },
        )
    } else {
        Cmd::Next
    };
    encode(valid.then_some(cmd), true)
}

/// One clock's outputs: `cmd_ready`, `rsp_valid` and the response ports.
pub(crate) fn decode(mut o: crate::Out) -> (bool, bool, Rsp) {
    let cmd_ready = o.b();
    let rsp_valid = o.b();
    let found = o.b();
    let index = o.u(16) as u16;
    let plane = o.u(8) as u8;
    let err = o.u(2) as u8;
    let counters = [
        o.u(32) as u32,
        o.u(32) as u32,
        o.u(32) as u32,
        o.u(32) as u32,
    ];
    let rsp = Rsp {
        pick: found.then_some(EvPick { index, plane }),
        err,
        counters,
    };
    (cmd_ready, rsp_valid, rsp)
}

/// Drive the sprayer for `cycles` clocks.
pub fn run(mut rtl: Rtl, seed: u64, cycles: u64) -> Result<Report, Mismatch> {
    let mut rng = Rng::new(seed);
    let mut model: Sprayer<N, P> = Sprayer::new();
    let mut pending: Option<Cmd> = None;
    let mut expect: VecDeque<(Cmd, Rsp)> = VecDeque::new();
    let (mut issued, mut compared) = (0u64, 0u64);
    for cycle in 0..cycles {
        if pending.is_none() && rng.chance(85) {
            pending = Some(gen(&mut rng, issued));
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
                    format!("{cmd:?}: rtl {got:?}, model {want:?}"),
                ));
            }
            compared += 1;
        }
        if let (Some(c), true) = (pending, cmd_ready) {
            expect.push_back((c, apply(&mut model, c)));
            pending = None;
            issued += 1;
        }
    }
    Ok(Report {
        cycles,
        transactions: compared,
    })
}
