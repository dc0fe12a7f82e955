//! The link by hand: TLP splits, a read's completion time, credit and tag stalls, the wire's
//! gap filling, rates and the scenario file's `[nic.pcie]`.

use super::config::{FcCredits, PcieConfig};
use super::link::{
    completion_end, completions, cut_runs, request_runs, requests, write_end, writes, PcieLink,
    Tags,
};
use crate::core::time::{Duration, Time};

fn sizes(v: impl Iterator<Item = (u64, u32)>) -> Vec<u32> {
    v.map(|p| p.1).collect()
}

/// The pieces `cut_runs` describes, one by one.
fn expand((first, full, last): (u32, u32, u32), step: u32) -> Vec<u32> {
    let mut v = Vec::new();
    v.extend((first != 0).then_some(first));
    v.extend(std::iter::repeat_n(step, full as usize));
    v.extend((last != 0).then_some(last));
    v
}

proptest::proptest! {
    /// The trains of a read's completions and of a write are summed from `cut_runs`: it must
    /// give the pieces `completions` and `writes` give, one by one.
    #[test]
    fn cut_runs_gives_the_pieces_of_completions_and_writes(
        addr in 0u64..1 << 20,
        len in 0u32..20_000,
        mps_log in 7u32..=12,
        rcb in proptest::sample::select(vec![64u32, 128]),
    ) {
        let mps = 1 << mps_log;
        let first_end = completion_end(addr, mps, rcb);
        proptest::prop_assert_eq!(
            expand(cut_runs(addr, len, first_end, mps), mps),
            sizes(completions(addr, len, mps, rcb))
        );
        let first_end = write_end(addr, mps);
        proptest::prop_assert_eq!(
            expand(cut_runs(addr, len, first_end, mps), mps),
            sizes(writes(addr, len, mps))
        );
    }
}

proptest::proptest! {
    /// A read's train is summed from `request_runs`: expanded, the runs must be the requests
    /// `requests` cuts, one by one, address and length.
    #[test]
    fn request_runs_are_the_requests(
        addr in 0u64..1 << 20,
        len in 0u32..40_000,
        mrrs_log in 7u32..=12,
    ) {
        let mrrs = 1 << mrrs_log;
        let expanded: Vec<(u64, u32)> = request_runs(addr, len, mrrs)
            .iter()
            .flat_map(|r| (0..u64::from(r.count)).map(move |i| (r.addr + i * u64::from(r.len), r.len)))
            .collect();
        proptest::prop_assert_eq!(expanded, requests(addr, len, mrrs).collect::<Vec<_>>());
    }
}

/// An operation on the read tags.
#[derive(Clone, Debug)]
enum TagOp {
    /// `push_run(first, step, count)`.
    Push(u64, u64, u32),
    /// `release_through(t)`.
    Release(u64),
    /// `pop_oldest()`.
    Pop,
}

fn tag_op() -> impl proptest::strategy::Strategy<Value = TagOp> {
    use proptest::prelude::*;
    prop_oneof![
        (0u64..10_000, 0u64..500, 0u32..6).prop_map(|(f, s, c)| TagOp::Push(f, s, c)),
        (0u64..12_000).prop_map(TagOp::Release),
        Just(TagOp::Pop),
    ]
}

proptest::proptest! {
    /// The tags kept as runs behave as a queue of every tag's time (the plain model).
    #[test]
    fn tag_runs_are_a_queue_of_times(ops in proptest::collection::vec(tag_op(), 0..60)) {
        let mut tags = Tags::default();
        let mut model = std::collections::VecDeque::<u64>::new();
        for op in ops {
            match op {
                TagOp::Push(first, step, count) => {
                    tags.push_run(first, step, count);
                    model.extend((0..u64::from(count)).map(|i| first + i * step));
                }
                TagOp::Release(t) => {
                    tags.release_through(t);
                    while model.front().is_some_and(|&r| r <= t) {
                        model.pop_front();
                    }
                }
                TagOp::Pop => proptest::prop_assert_eq!(tags.pop_oldest(), model.pop_front()),
            }
            proptest::prop_assert_eq!(tags.len(), model.len());
        }
    }
}

#[test]
fn requests_split_by_mrrs_and_never_cross_4k() {
    assert_eq!(sizes(requests(0, 4096, 512)), vec![512; 8]);
    assert_eq!(sizes(requests(0, 4096, 4096)), vec![4096]);
    // 4000..4200 crosses the page at 4096.
    assert_eq!(sizes(requests(4000, 200, 512)), vec![96, 104]);
    assert_eq!(sizes(requests(0, 1000, 512)), vec![512, 488]);
    assert_eq!(sizes(requests(0, 0, 512)), Vec::<u32>::new());
}

#[test]
fn completions_split_by_mps_on_rcb_boundaries() {
    assert_eq!(sizes(completions(0, 512, 256, 64)), vec![256, 256]);
    // Unaligned: the first ends on the last RCB boundary within MPS (288 -> 256).
    assert_eq!(sizes(completions(32, 512, 256, 64)), vec![224, 256, 32]);
    assert_eq!(sizes(completions(0, 64, 256, 64)), vec![64]);
    assert_eq!(sizes(completions(96, 512, 256, 128)), vec![160, 256, 96]);
}

#[test]
fn writes_split_on_mps_boundaries() {
    assert_eq!(sizes(writes(0, 4096, 256)).len(), 16);
    assert_eq!(sizes(writes(100, 300, 256)), vec![156, 144]);
    assert_eq!(sizes(writes(0, 32, 256)), vec![32]);
}

#[test]
fn link_rates_follow_generation_lanes_and_encoding() {
    // Gen6 x16: 64 GT/s x 16 lanes x 236/256 FLIT bytes = 118 GB/s of TLP bytes.
    assert_eq!(PcieConfig::GEN6_X16.tlp_bytes_per_s(), 118_000_000_000);
    // Gen5 x16: 32 GT/s x 16 x 128/130, less 1 % of DLLPs.
    let g5 = 32_000_000_000u128 * 16 * 128 / 130 * 99 / 100 / 8;
    assert_eq!(u128::from(PcieConfig::GEN5_X16.tlp_bytes_per_s()), g5);
    let x8 = PcieConfig {
        lanes: 8,
        ..PcieConfig::GEN6_X16
    };
    assert_eq!(x8.tlp_bytes_per_s(), 59_000_000_000);
}

/// Picoseconds `bytes` take on a Gen6 x16 wire (8474 fs per byte at 118 GB/s).
fn ser(bytes: u64) -> u64 {
    assert_eq!(PcieConfig::GEN6_X16.fs_per_byte(), 8_474);
    (bytes * 8_474).div_ceil(1_000)
}

#[test]
fn a_read_completes_after_request_memory_and_completions() {
    let mut l = PcieLink::new(PcieConfig::GEN6_X16);
    let done = l.read(Time::ZERO, 0, 512);
    // MRd (16 B header) out, 200 ns, 400 ns of host memory, two CplDs of 12 + 256 B back to
    // back, 200 ns.
    let want = ser(16) + 200_000 + 400_000 + 2 * ser(12 + 256) + 200_000;
    assert_eq!(done.as_ps(), want);
    assert_eq!(l.tx.tlps, 1);
    assert_eq!(l.rx.tlps, 2);
    assert_eq!(l.dma_bytes, 512);
    assert_eq!(
        PcieConfig::GEN6_X16.packet_delay(512),
        Duration::from_ps(want)
    );
    // A 4 KiB payload: 8 requests, 16 completions.
    let mut l = PcieLink::new(PcieConfig::GEN6_X16);
    l.read(Time::ZERO, 0, 4096);
    assert_eq!((l.tx.tlps, l.rx.tlps), (8, 16));
}

#[test]
fn gen5_adds_framing_and_lcrc_to_every_tlp() {
    let mut l = PcieLink::new(PcieConfig::GEN5_X16);
    l.write(Time::ZERO, 0, 256);
    let fs = PcieConfig::GEN5_X16.fs_per_byte();
    // 16 B header + 8 B framing token and LCRC + 256 B.
    assert_eq!(
        l.tx.busy_through(Time::from_us(10)).as_ps(),
        (280 * fs).div_ceil(1_000)
    );
}

#[test]
fn a_sender_out_of_credit_waits_for_the_update() {
    let tight = PcieConfig {
        host_credits: FcCredits {
            posted_data: 16, // one 256 B write at a time
            ..FcCredits::INFINITE
        },
        ..PcieConfig::GEN6_X16
    };
    let mut f = PcieLink::new(PcieConfig::GEN6_X16);
    let free = f.write(Time::ZERO, 0, 1024);
    let t = ser(16 + 256);
    assert_eq!(free.as_ps(), 4 * t + 200_000);
    assert_eq!(f.tx.credit_stall(), Duration::ZERO);
    let mut l = PcieLink::new(tight);
    let stalled = l.write(Time::ZERO, 0, 1024);
    // Each TLP waits for the one before to arrive and its credits to come back (a latency
    // each way): 3 waits of t + 400 ns, then the last one's trip.
    assert_eq!(stalled.as_ps(), 3 * (t + 400_000) + t + 200_000);
    // Each of the last three was ready when the one before left the wire, and waited the
    // credit round trip.
    assert_eq!(l.tx.credit_stall().as_ps(), 3 * 400_000);
}

#[test]
fn reads_wait_for_a_free_tag() {
    let one = PcieConfig {
        read_tags: 1,
        ..PcieConfig::GEN6_X16
    };
    let mut l = PcieLink::new(one);
    let a = l.read(Time::ZERO, 0, 512);
    let b = l.read(Time::ZERO, 512, 512);
    // The second request leaves when the first's last completion arrived.
    assert!(b.as_ps() >= 2 * a.as_ps(), "{a:?} {b:?}");
    let mut l = PcieLink::new(PcieConfig::GEN6_X16);
    let a2 = l.read(Time::ZERO, 0, 512);
    let b2 = l.read(Time::ZERO, 512, 512);
    assert_eq!(a2, a);
    assert!(b2 < b, "with tags to spare the reads overlap");
}

#[test]
fn the_wire_fills_gaps_and_counts_busy_time() {
    let mut l = PcieLink::new(PcieConfig::GEN6_X16);
    // A completion booked for later does not hold up a doorbell now.
    let late = l.read(Time::ZERO, 0, 256);
    let bell = l.doorbell(Time::from_ns(300), 4);
    assert_eq!(bell.as_ps(), 300_000 + ser(16 + 4) + 200_000);
    assert!(bell < late);
    let busy = l.rx.busy_through(Time::from_us(10)).as_ps();
    assert_eq!(busy, ser(12 + 256) + ser(16 + 4));
    // Up to a time inside the doorbell: only what lay before it.
    let mid = Time::from_ps(300_000 + 10);
    assert_eq!(l.rx.busy_through(mid).as_ps(), 10);
}

#[test]
fn the_wire_books_into_the_earliest_gap_that_fits() {
    let cfg = PcieConfig::GEN6_X16;
    let mut l = PcieLink::new(cfg);
    let t = ser(16 + 256);
    // Two writes far apart leave a gap; one that fits goes there, one that does not after.
    let a = l.write(Time::from_us(1), 0, 256);
    let b = l.write(Time::ZERO, 0, 256);
    assert_eq!(a.as_ps(), 1_000_000 + t + 200_000);
    assert_eq!(b.as_ps(), t + 200_000);
    let c = l.write(Time::from_ps(1_000_000 - t / 2), 0, 256);
    assert_eq!(c.as_ps(), 1_000_000 + t + t + 200_000);
}

#[test]
fn scenario_keys_load_presets_overrides_and_refuse_old_keys() {
    #[derive(serde::Deserialize)]
    struct F {
        pcie: PcieConfig,
    }
    let f: F = toml::from_str("[pcie]\n").unwrap();
    assert_eq!(f.pcie, PcieConfig::GEN6_X16);
    let f: F = toml::from_str("[pcie]\npreset = \"gen5-x16\"\nlanes = 8\nmps = 512\n").unwrap();
    assert_eq!(
        f.pcie,
        PcieConfig {
            lanes: 8,
            mps: 512,
            ..PcieConfig::GEN5_X16
        }
    );
    let f: F = toml::from_str("[pcie]\npreset = \"ideal\"\n").unwrap();
    assert!(f.pcie.ideal);
    // What the config writes, it reads back.
    let text = toml::to_string(&F2 {
        pcie: PcieConfig::GEN5_X16,
    })
    .unwrap();
    let back: F = toml::from_str(&text).unwrap();
    assert_eq!(back.pcie, PcieConfig::GEN5_X16);
    for (text, key) in [
        ("[pcie]\ndma_read_ns = 0\n", "dma_read_ns"),
        ("[pcie]\ndoorbell_ns = 0\n", "doorbell_ns"),
        ("[pcie]\ndma_bytes_per_s = 1\n", "dma_bytes_per_s"),
        ("[pcie]\nmps = 100\n", "mps"),
        ("[pcie]\ngeneration = 9\n", "generation"),
        ("[pcie]\nlanes = 3\n", "lanes"),
        ("[pcie]\nbogus = 3\n", "bogus"),
        (
            "[pcie]\nhost_credits = { posted_hdr = 1, posted_data = 4, nonposted_hdr = 1, \
             completion_hdr = 0, completion_data = 0 }\n",
            "host_credits.posted_data",
        ),
    ] {
        let e = toml::from_str::<F>(text).err().expect(text).to_string();
        assert!(e.contains(key), "{text}: {e}");
    }
}

#[derive(serde::Serialize)]
struct F2 {
    pcie: PcieConfig,
}
