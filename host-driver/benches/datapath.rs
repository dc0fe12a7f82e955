//! Per-core cost of the driver's data path against the simulated NIC's memory
//! (`mrc_sim::nic_host`): `post_send` of 32 work requests + one doorbell, and `poll_cq` of 32
//! completions, each next to a baseline measured in the same run that does the same memory work
//! without the API:
//!
//! - `post_send/api_32_doorbell`: `QueuePair::post_send` of 32 one-SGE Writes (validation,
//!   encoding, ring writes, `fence(Release)`, doorbell). The NIC holds its send doorbells
//!   ([`SimNic::hold_doorbells`]) while the clock runs, so the device model is not timed;
//!   releasing them, executing the WQEs and draining the CQ happen outside the timed region,
//!   after every [`ROUND`] batches posted back to back.
//! - `post_send/baseline_raw_ring_32_doorbell`: the same 32 descriptors, encoded once, copied
//!   into a DMA ring with the same volatile writes, one fence and one doorbell write to the same
//!   simulated BAR (a page no QP owns); timed in the same rounds, with the same untimed device
//!   model work between rounds, so both see the same cache disturbance.
//! - `poll_cq/api_32`: `CompletionQueue::poll` of 32 CQEs the NIC wrote (untimed) beforehand,
//!   [`ROUND`] polls back to back: owner-bit check, decode, ring tracking, one consumer
//!   doorbell per poll.
//! - `poll_cq/baseline_raw_cqe_32`: the driver's memory reads for 32 CQEs (owner word, acquire
//!   fence, the whole entry) plus one doorbell write; no decoding, no ring tracking; rounds and
//!   untimed model work as for the API.
//! - `mmio/doorbell_write`: one simulated doorbell write alone (the simulator's MMIO cost,
//!   included once per batch in every figure above).
//! - `end_to_end/post_32_poll_32_with_model`: both with the device model executing in between
//!   (the simulator's cost dominates; it says nothing about the driver budget).
//!
//! Targets: >= 20 M work requests/s and >= 50 M completions/s per core. Criterion
//! prints elements/s; the report quotes medians and the API/baseline ratio.

use std::sync::atomic::{fence, Ordering};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use mrc_abi::device::cqe::{expected_owner, Completion, CqeOpcode, CqeStatus};
use mrc_abi::device::doorbell::{CQ_DOORBELL_OFFSET, SQ_PRODUCER_OFFSET};
use mrc_abi::device::regs::defaults::DOORBELL_PAGES;
use mrc_abi::device::wqe::{self, SendRequest, SEND_SIGNALED};
use mrc_driver::api::*;
use mrc_driver::zerocopy::IntoBytes;
use mrc_sim::nic_host::{SimHost, SimNic};

#[path = "../tests/common/mod.rs"]
mod common;
use common::{bench_qp, bench_write, open_app, Looped};

const BATCH: usize = 32;
/// Batches posted (or polled) back to back between two runs of the device model: 512 WRs fit
/// the 1024-entry send ring and the 4096-entry CQ (`tests/burst.rs` holds such rounds to
/// completing).
const ROUND: u64 = 16;
/// A doorbell page no QP or CQ of the benchmark owns (the device ignores it).
const SPARE_PAGE: u64 = 63;

/// Polls `n` completions; the device ran everything posted when its doorbells were
/// released, so they are all in the CQ (a bounded number of polls, not a spin on a stalled
/// device).
fn drain(cq: &mut CompletionQueue, wcs: &mut [WorkCompletion], n: usize) {
    let mut got = 0;
    for _ in 0..n + 16 {
        if got >= n {
            return;
        }
        got += cq.poll(wcs).expect("poll");
    }
    assert!(got >= n, "the device completed {got} of {n} work requests");
}

fn datapath(c: &mut Criterion) {
    let host = SimHost::clos_pair().expect("simulated host");
    let nic: &SimNic = &host.nics()[0];
    let ctx = open_app(nic);
    let Looped { qp, cq, mr, .. } = &mut bench_qp(&ctx);
    let sge = [mr.sge(0, 64).expect("sge")];
    let wr = bench_write(mr, &sge);
    let mut batch = [wr; BATCH];
    for (i, w) in batch.iter_mut().enumerate() {
        w.wr_id = i as u64;
    }
    let mut wcs = [WorkCompletion::default(); BATCH];

    // Baseline memory: a send ring and a completion ring in the same simulated DMA memory.
    let backend = nic.backend();
    let ring = backend.alloc_dma(64 * 1024).expect("ring");
    let raw_wqes: Vec<wqe::SendWqe> = batch
        .iter()
        .map(|w| {
            let mut sges = heapless::Vec::new();
            let _ = sges.push(wqe::Sge::new(sge[0].addr, sge[0].len, sge[0].lkey));
            SendRequest {
                wr_id: w.wr_id,
                imm: None,
                flags: SEND_SIGNALED,
                remote_va: w.remote_addr,
                rkey: w.rkey,
                sges,
            }
            .encode()
            .expect("encode")
        })
        .collect();
    let cq_log2 = 10u8;
    let cqes = backend.alloc_dma(32 << cq_log2).expect("cq ring");
    for i in 0..BATCH as u32 {
        let cqe = Completion {
            wr_id: u64::from(i),
            status: CqeStatus::Success,
            opcode: CqeOpcode::Write,
            byte_len: 64,
            imm: None,
            qpn: qp.qpn(),
            wqe_index: i as u16,
            solicited: false,
            syndrome: 0,
        }
        .encode(expected_owner(i, cq_log2))
        .expect("cqe");
        cqes.write_slice(u64::from(i) * 32, cqe.as_bytes())
            .expect("write cqe");
    }
    let spare = u64::from(DOORBELL_PAGES) + SPARE_PAGE * 4096;

    let mut g = c.benchmark_group("post_send");
    g.throughput(Throughput::Elements(BATCH as u64));
    g.bench_function("api_32_doorbell", |b| {
        b.iter_custom(|iters| {
            let mut t = Duration::ZERO;
            let mut left = iters;
            while left > 0 {
                let k = left.min(ROUND);
                nic.hold_doorbells(true);
                let start = Instant::now();
                for _ in 0..k {
                    qp.post_send(&batch).expect("post_send");
                }
                t += start.elapsed();
                nic.hold_doorbells(false);
                drain(cq, &mut wcs, k as usize * BATCH);
                left -= k;
            }
            t
        })
    });
    let mut producer = 0u32;
    let mut raw_batch = || {
        for w in &raw_wqes {
            let slot = u64::from(producer & 1023);
            ring.write_slice(slot * 64, w.as_bytes()).expect("ring");
            producer = producer.wrapping_add(1);
        }
        fence(Ordering::Release);
        backend
            .mmio_write32(spare + SQ_PRODUCER_OFFSET as u64, producer)
            .expect("doorbell");
    };
    g.bench_function("baseline_raw_ring_32_doorbell", |b| {
        b.iter_custom(|iters| {
            let mut t = Duration::ZERO;
            let mut left = iters;
            while left > 0 {
                let k = left.min(ROUND);
                let start = Instant::now();
                for _ in 0..k {
                    raw_batch();
                }
                t += start.elapsed();
                // The same untimed device-model work between rounds as the API case.
                for _ in 0..k {
                    qp.post_send(&batch).expect("post_send");
                }
                drain(cq, &mut wcs, k as usize * BATCH);
                left -= k;
            }
            t
        })
    });
    g.finish();

    let mut g = c.benchmark_group("poll_cq");
    g.throughput(Throughput::Elements(BATCH as u64));
    g.bench_function("api_32", |b| {
        b.iter_custom(|iters| {
            let mut t = Duration::ZERO;
            let mut left = iters;
            while left > 0 {
                let k = left.min(ROUND);
                for _ in 0..k {
                    qp.post_send(&batch).expect("post_send");
                }
                let start = Instant::now();
                drain(cq, &mut wcs, k as usize * BATCH);
                t += start.elapsed();
                left -= k;
            }
            t
        })
    });
    let mut buf = [0u8; 32];
    let mut raw_poll = || {
        let mut sum = 0u64;
        for i in 0..BATCH as u64 {
            // The same reads as the driver: the owner word, a fence, the whole entry.
            let w2 = cqes.read_u64(i * 32 + 16).expect("owner");
            if (w2 >> 48) & 1 != u64::from(expected_owner(i as u32, cq_log2)) {
                break;
            }
            fence(Ordering::Acquire);
            cqes.read_slice(i * 32, &mut buf).expect("cqe");
            sum = sum.wrapping_add(u64::from(buf[0]) ^ w2);
        }
        backend
            .mmio_write32(spare + CQ_DOORBELL_OFFSET as u64, BATCH as u32)
            .expect("doorbell");
        sum
    };
    g.bench_function("baseline_raw_cqe_32", |b| {
        b.iter_custom(|iters| {
            let mut t = Duration::ZERO;
            let mut left = iters;
            while left > 0 {
                let k = left.min(ROUND);
                // The same untimed device-model work between rounds as the API case.
                for _ in 0..k {
                    qp.post_send(&batch).expect("post_send");
                }
                drain(cq, &mut wcs, k as usize * BATCH);
                let start = Instant::now();
                for _ in 0..k {
                    std::hint::black_box(raw_poll());
                }
                t += start.elapsed();
                left -= k;
            }
            t
        })
    });
    g.finish();

    // What one doorbell costs in the simulator (twin hook + device-state lock), paid once per
    // batch by the API and the baselines alike; on hardware it is one posted MMIO write.
    let mut g = c.benchmark_group("mmio");
    g.throughput(Throughput::Elements(1));
    g.bench_function("doorbell_write", |b| {
        b.iter(|| {
            backend
                .mmio_write32(spare + SQ_PRODUCER_OFFSET as u64, 0)
                .expect("doorbell");
        })
    });
    g.finish();

    let mut g = c.benchmark_group("end_to_end");
    g.throughput(Throughput::Elements(BATCH as u64));
    g.bench_function("post_32_poll_32_with_model", |b| {
        b.iter(|| {
            qp.post_send(&batch).expect("post_send");
            drain(cq, &mut wcs, BATCH);
        })
    });
    g.finish();
}

criterion_group!(benches, datapath);
criterion_main!(benches);
