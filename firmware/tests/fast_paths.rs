//! The datapath stage's fast paths (transmit runs over work requests, receive runs of writes)
//! against its general paths, packet for packet: two NICs with two QPs each (burst turns),
//! Write and Write-with-Immediate messages of any length, some unsignaled, over a wire that
//! loses, duplicates, trims, CE-marks and reorders, with transmit and receive batches of random
//! sizes. A seeded run with the fast paths on and the same run with them off must send the
//! same packets, give the same verdicts and host writes, and end with the same counters and QP
//! states.

use std::collections::VecDeque;

use mrc_abi::Psn;
use mrc_firmware::datapath::ack_gen::TrimMark;
use mrc_firmware::datapath::packet::{LocalBuf, Packet, RxVerdict, SendWr};
use mrc_firmware::datapath::placement::{Access, MemRegion};
use mrc_firmware::datapath::stage::{DatapathConfig, DatapathCounters, QpView};
use mrc_firmware::engine::ev_state::EvConfig;
use mrc_firmware::engine::{
    CcProfile, EngineConfig, EngineCounters, EvProfile, FwQpView, QpAttrs, QpState,
};
use mrc_firmware::testkit::{HostWrite, Nic, TestKit};
use proptest::prelude::*;

const VA: u64 = 0x8000_0000;
const RKEY: u32 = 0x55;
const MTU: u32 = 256;

/// A small deterministic generator (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// True with probability `ppm` per million.
    fn chance(&mut self, ppm: u64) -> bool {
        self.below(1_000_000) < ppm
    }
}

fn attrs(dest: u32, cwnd_pkts: u64) -> QpAttrs {
    QpAttrs::connect(
        EvProfile::udp(EvConfig::new(16, 2)),
        CcProfile::Fixed {
            cwnd_bytes: cwnd_pkts * u64::from(MTU),
        },
        dest,
    )
    .psns(Psn::new(100), Psn::new(100))
    .window(2, 4)
    .retry(25, 5)
}

fn nic() -> Box<Nic<TestKit>> {
    let dp = DatapathConfig {
        mtu_payload: MTU,
        ..DatapathConfig::DEFAULT
    };
    let fw = EngineConfig {
        reorder_tx: 8,
        ..EngineConfig::default()
    };
    Box::new(Nic::new(dp, fw).expect("engine config"))
}

/// Everything a run shows from outside, in order.
#[derive(Debug, PartialEq)]
enum Seen {
    Sent(usize, Packet),
    Verdict(usize, RxVerdict),
    Host(usize, HostWrite),
}

/// What a run leaves.
#[derive(Debug, PartialEq)]
struct Outcome {
    seen: Vec<Seen>,
    now_ns: u64,
    datapaths: [DatapathCounters; 2],
    engines: [EngineCounters; 2],
    qps: Vec<(Option<QpView>, Option<FwQpView>)>,
}

fn run(seed: u64, fast: bool) -> Outcome {
    let mut rng = Rng(seed);
    // Per seed: a congestion window of a few, a few dozen or a few hundred packets, and
    // a wire from nearly clean to rough.
    let cwnd_pkts = [4, 24, 300][(seed % 3) as usize];
    let rough = 1 + (seed / 3) % 4;
    let mut nics = [nic(), nic()];
    for n in nics.iter_mut() {
        n.dp.set_fast_paths(fast);
        n.register_region(MemRegion {
            rkey: RKEY,
            base_va: VA,
            length: 1 << 20,
            access: Access::REMOTE_WRITE,
        })
        .expect("region");
        for q in 0..2 {
            assert_eq!(n.create_qp(), Ok(q));
            for s in [QpState::Init, QpState::Rtr, QpState::Rts] {
                n.modify_qp(q, s, &attrs(q, cwnd_pkts), 0).expect("modify");
            }
        }
        n.pump(0, &mut |_| {});
    }
    let mut seen = Vec::new();
    let mut now = 0u64;
    // (delivery time, destination NIC, packet), in send order.
    let mut wire: VecDeque<(u64, usize, Packet)> = VecDeque::new();
    let mut posted = 0u64;
    let mut buf = vec![Packet::FILL; 16];
    let mut verdicts = vec![RxVerdict::Consumed; 16];
    for _ in 0..4_000 {
        // Work: a few messages on a random QP of a random NIC (a receive first for an
        // immediate).
        if posted < 400 && rng.chance(300_000) {
            let (n, q) = (rng.below(2) as usize, rng.below(2) as u32);
            let len = match rng.below(4) {
                0 => rng.below(u64::from(MTU)) as u32,
                1 => MTU * (1 + rng.below(20) as u32),
                _ => rng.below(u64::from(MTU) * 24) as u32,
            };
            let imm = rng.chance(300_000).then(|| rng.next() as u32);
            if imm.is_some() {
                let _ = nics[1 - n].post_recv(q, posted);
            }
            let wr = SendWr {
                wr_id: posted,
                local: LocalBuf::default(),
                remote_va: VA + rng.below(1 << 19),
                rkey: RKEY,
                len,
                imm,
                signaled: !rng.chance(200_000),
            };
            if nics[n].post_send(q, wr).is_ok() {
                posted += 1;
            }
        }
        for (n, nic) in nics.iter_mut().enumerate() {
            nic.pump(now, &mut |w| seen.push(Seen::Host(n, w)));
            // Transmit in batches of random size until the NIC has nothing more.
            loop {
                let k = 1 + rng.below(buf.len() as u64) as usize;
                let sent = nic.transmit(now, &mut buf[..k], &mut |w| seen.push(Seen::Host(n, w)));
                for p in &buf[..sent] {
                    seen.push(Seen::Sent(n, *p));
                    if rng.chance(10_000 * rough) {
                        continue;
                    }
                    let copies = if rng.chance(7_000 * rough) { 2 } else { 1 };
                    for _ in 0..copies {
                        let mut p = *p;
                        if rng.chance(10_000 * rough) {
                            p.trim_to(TrimMark::Trimmed);
                        }
                        p.ce |= rng.chance(15_000 * rough);
                        let late = if rng.chance(15_000 * rough) {
                            rng.below(3_000)
                        } else {
                            0
                        };
                        wire.push_back((now + 1_000 + late, 1 - n, p));
                    }
                }
                if sent < k {
                    break;
                }
            }
        }
        // Deliver what is due, in wire order, in batches of random size per NIC.
        let mut due: Vec<(usize, Packet)> = Vec::new();
        wire.retain(|(at, to, p)| {
            if *at <= now {
                due.push((*to, *p));
                false
            } else {
                true
            }
        });
        let mut i = 0;
        while i < due.len() {
            let to = due[i].0;
            let mut j = i;
            let max = 1 + rng.below(verdicts.len() as u64) as usize;
            while j < due.len() && due[j].0 == to && j - i < max {
                j += 1;
            }
            let pkts: Vec<Packet> = due[i..j].iter().map(|d| d.1).collect();
            let v = &mut verdicts[..pkts.len()];
            nics[to].receive(now, &pkts, v, &mut |w| seen.push(Seen::Host(to, w)));
            seen.extend(v.iter().map(|v| Seen::Verdict(to, *v)));
            i = j;
        }
        for (n, nic) in nics.iter_mut().enumerate() {
            if nic.handle_timeout(now) {
                nic.pump(now, &mut |w| seen.push(Seen::Host(n, w)));
            }
        }
        // Time moves to the next delivery or timer, at most 500 ns at a time.
        let next = wire
            .iter()
            .map(|w| w.0)
            .chain(nics.iter().filter_map(|n| n.poll_timeout()))
            .min()
            .unwrap_or(now + 500);
        now = next.clamp(now + 1, now + 500);
    }
    let qps = (0..2)
        .flat_map(|n| (0..2).map(move |q| (n, q)))
        .map(|(n, q)| (nics[n].dp.qp(q), nics[n].fw.qp(q)))
        .collect();
    Outcome {
        seen,
        now_ns: now,
        datapaths: [nics[0].dp.counters(), nics[1].dp.counters()],
        engines: [nics[0].fw.counters(), nics[1].fw.counters()],
        qps,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn fast_paths_match_the_general_paths(seed in any::<u64>()) {
        let fast = run(seed, true);
        let general = run(seed, false);
        // (the run did something: data left both NICs and was placed)
        prop_assert!(fast.datapaths.iter().all(|c| c.data_sent > 0 && c.placed > 0));
        prop_assert!(fast == general, "seed {seed}: the fast paths changed the run");
    }
}
