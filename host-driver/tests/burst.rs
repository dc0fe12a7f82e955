//! The driver benchmark's rounds (`benches/datapath.rs`): batches of 32 Writes posted while
//! the NIC holds its send doorbells, released, then polled. Every work request of every round
//! completes, successfully, round after round (the send ring wraps several times, the CQ
//! too). A QP connected to itself gets its whole burst back at once: 512 deliveries overflow
//! its stage's event buffer while its firmware core works through its CSR ring, and wait in
//! the port's RX FIFO (dropping them exhausted the QP's retries).

use mrc_abi::device::cqe::CqeStatus;
use mrc_driver::api::*;
use mrc_sim::nic_host::SimHost;

mod common;
use common::{bench_qp, bench_write, open_app, Looped};

/// Per round: successful completions, and the first other status seen.
fn rounds(batches: usize, rounds: usize) -> Vec<(usize, Option<CqeStatus>)> {
    let host = SimHost::clos_pair().expect("simulated host");
    let nic = &host.nics()[0];
    let ctx = open_app(nic);
    let Looped { qp, cq, mr, .. } = &mut bench_qp(&ctx);
    let sge = [mr.sge(0, 64).expect("sge")];
    let wr = bench_write(mr, &sge);
    let batch = [wr; 32];
    let mut wcs = [WorkCompletion::default(); 32];
    let mut seen = Vec::new();
    for _ in 0..rounds {
        nic.hold_doorbells(true);
        for _ in 0..batches {
            qp.post_send(&batch).expect("post_send");
        }
        // Released, the device runs everything posted: the completions are in the CQ.
        nic.hold_doorbells(false);
        let (mut ok, mut other, mut polls) = (0, None, 0);
        while ok < batches * 32 && other.is_none() && polls < 10 * batches {
            let n = cq.poll(&mut wcs).expect("poll");
            for w in &wcs[..n] {
                if w.status == CqeStatus::Success {
                    ok += 1;
                } else {
                    other.get_or_insert(w.status);
                }
            }
            polls += 1;
        }
        seen.push((ok, other));
        if other.is_some() || ok < batches * 32 {
            break;
        }
    }
    seen
}

#[test]
fn every_round_of_the_driver_benchmark_completes() {
    assert_eq!(rounds(4, 40), vec![(128, None); 40]);
    // 16 batches: the benchmark's round.
    assert_eq!(rounds(16, 10), vec![(512, None); 10]);
}
