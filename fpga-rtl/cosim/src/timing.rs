//! Each RTL block's latency and initiation interval, measured under Verilator and held to the
//! table in `mrc_abi::device::datapath_timing` (the one the simulator's NIC is clocked with).
//!
//! [`measure`] offers a block `n` inputs back to back (the next one in the clock after the
//! previous was accepted, i.e. `valid` held high) with its output always ready, and records per
//! input the clock it was accepted (`valid && ready` at the edge), the first clock its output
//! was valid and the clock of its last output beat. [`check`] compares every input's figures
//! with a [`BlockTiming`]: latency = first output - accept, interval = next accept - accept,
//! last output = last beat - accept (the header builder's beats follow its header length).

use crate::{hdr, queue, rx, sprayer, Block, Out, Rtl, Words};
use mrc_abi::device::datapath_timing::{
    BlockTiming, CSR_EVENT_QUEUE, EV_SPRAYER, HDR_BUILDER, RX_PSN_TRACKER,
};
use mrc_abi::wire::EvFormat;

/// One input's clocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// Output bytes (the header length; 0 for one-output blocks).
    pub len: u32,
    /// Clock the input was accepted.
    pub accept: u64,
    /// First clock its output was valid.
    pub first: u64,
    /// Clock of its last output beat.
    pub last: u64,
}

/// What a measurement saw, summarised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    /// Inputs measured.
    pub inputs: usize,
    /// Smallest and largest latency (clocks).
    pub latency: (u64, u64),
    /// Smallest and largest interval between accepted inputs (clocks).
    pub interval: (u64, u64),
    /// Smallest and largest output beats per input.
    pub beats: (u64, u64),
}

/// The stimulus of one measurement: the input words of input `i` (offered when `valid`).
type Input<'a> = Box<dyn Fn(usize, bool) -> Words + 'a>;
/// Reads (input ready, output valid, last beat) from a clock's outputs.
type Decode = fn(&mut Out) -> (bool, bool, bool);

fn handshake(o: &mut Out) -> (bool, bool, bool) {
    let ready = o.b();
    let valid = o.b();
    (ready, valid, valid)
}

fn hdr_handshake(o: &mut Out) -> (bool, bool, bool) {
    let b = hdr::Beat::read(o);
    (b.d_ready, b.m_valid, b.m_valid && b.last)
}

/// Header shapes that take 2, 3 and 4 beats: WRITE_ONLY with EVX and TSX in the UDP format,
/// in SRv6 without an SRH, and in SRv6 with a 4-segment SRH.
pub fn hdr_shapes() -> [hdr::Shape; 3] {
    let s = |format, segs| hdr::Shape {
        format,
        segs,
        kind: 4,
        evx: true,
        tsx: true,
    };
    [
        s(EvFormat::Udp, 0),
        s(EvFormat::Srv6, 0),
        s(EvFormat::Srv6, hdr::SEGS),
    ]
}

/// Drives `block` with `n` back-to-back inputs (header builder: of `shape`) and returns each
/// input's clocks, or why the run did not finish.
pub fn measure(block: Block, shape: Option<hdr::Shape>, n: usize) -> Result<Vec<Sample>, String> {
    let mut rtl = Rtl::new(block, false, None);
    let descs;
    let (input, decode, lens): (Input<'_>, Decode, Vec<u32>) = match block {
        Block::Sprayer => (Box::new(sprayer::timing_input), handshake, vec![0; n]),
        Block::RxTracker => (Box::new(rx::timing_input), handshake, vec![0; n]),
        Block::CsrQueue => (Box::new(queue::timing_input), handshake, vec![0; n]),
        Block::HdrBuilder => {
            let shape = shape.unwrap_or(hdr_shapes()[0]);
            descs = hdr::timing_inputs(0x7469_6d65, shape, n.max(1));
            let lens = descs.iter().map(|d| d.2 as u32).collect();
            let d = &descs;
            (
                Box::new(move |i: usize, valid: bool| {
                    let (on, off, _) = &d[i.min(d.len() - 1)];
                    if valid {
                        on.clone()
                    } else {
                        off.clone()
                    }
                }),
                hdr_handshake,
                lens,
            )
        }
    };
    let (mut accept, mut first, mut last) = (Vec::new(), Vec::new(), Vec::new());
    let mut in_output = false;
    let limit = 16 * n as u64 + 64;
    for cycle in 0..limit {
        let offer = accept.len() < n;
        let mut o = rtl.step(&input(accept.len(), offer));
        let (ready, valid, end) = decode(&mut o);
        if valid {
            if !in_output {
                first.push(cycle);
                in_output = true;
            }
            if end {
                last.push(cycle);
                in_output = false;
            }
        }
        if offer && ready {
            accept.push(cycle);
        }
        if last.len() == n {
            break;
        }
    }
    if last.len() != n || accept.len() != n {
        return Err(format!(
            "{block:?}: {} inputs accepted and {} outputs seen in {limit} clocks, {n} expected",
            accept.len(),
            last.len()
        ));
    }
    Ok((0..n)
        .map(|i| Sample {
            len: lens[i],
            accept: accept[i],
            first: first[i],
            last: last[i],
        })
        .collect())
}

/// Holds every sample to `t`: the first disagreement is the error.
pub fn check(samples: &[Sample], t: &BlockTiming) -> Result<Summary, String> {
    let mut sum = Summary {
        inputs: samples.len(),
        latency: (u64::MAX, 0),
        interval: (u64::MAX, 0),
        beats: (u64::MAX, 0),
    };
    let widen = |r: &mut (u64, u64), v: u64| *r = (r.0.min(v), r.1.max(v));
    for (i, s) in samples.iter().enumerate() {
        let latency = s.first - s.accept;
        let last = s.last - s.accept;
        let beats = s.last - s.first + 1;
        if latency != u64::from(t.latency_cycles) {
            return Err(format!(
                "{}: input {i} ({} bytes) accepted at clock {}, first output at {}: latency {latency}, table {}",
                t.block, s.len, s.accept, s.first, t.latency_cycles
            ));
        }
        if last != u64::from(t.last_output(s.len)) {
            return Err(format!(
                "{}: input {i} ({} bytes): last output beat {last} clocks after accept ({beats} beats), table {}",
                t.block,
                s.len,
                t.last_output(s.len)
            ));
        }
        widen(&mut sum.latency, latency);
        widen(&mut sum.beats, beats);
        if let Some(next) = samples.get(i + 1) {
            let interval = next.accept - s.accept;
            if interval != u64::from(t.interval(s.len)) {
                return Err(format!(
                    "{}: inputs {i} and {} accepted {interval} clocks apart, table {} ({} bytes)",
                    t.block,
                    i + 1,
                    t.interval(s.len),
                    s.len
                ));
            }
            widen(&mut sum.interval, interval);
        }
    }
    Ok(sum)
}

/// The table entry of `block`.
pub fn table(block: Block) -> BlockTiming {
    match block {
        Block::Sprayer => EV_SPRAYER,
        Block::RxTracker => RX_PSN_TRACKER,
        Block::CsrQueue => CSR_EVENT_QUEUE,
        Block::HdrBuilder => HDR_BUILDER,
    }
}
