//! post_send, post_recv and poll_cq do not touch the heap: a counting global allocator sees no
//! allocation across hundreds of batches. The simulated NIC's doorbells are held while the
//! driver is counted and released between rounds: the device model (the NIC and the fabric,
//! which run inside a doorbell write otherwise) is the hardware, not the driver.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use mrc_driver::api::*;
use mrc_sim::nic_host::SimHost;

mod common;
use common::{looped_qp, open_app, LoopSpec, Looped};

struct Counting;

thread_local! {
    static COUNT: Cell<bool> = const { Cell::new(false) };
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator; the bookkeeping touches only thread-locals of
// `Copy` types (no allocation, no re-entrancy).
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if COUNT.with(Cell::get) {
            ALLOCS.with(|a| a.set(a.get() + 1));
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn counted<T>(f: impl FnOnce() -> T) -> (T, u64) {
    ALLOCS.with(|a| a.set(0));
    COUNT.with(|c| c.set(true));
    let r = f();
    COUNT.with(|c| c.set(false));
    (r, ALLOCS.with(Cell::get))
}

#[test]
fn post_send_post_recv_poll_cq_do_not_allocate() {
    let host = SimHost::clos_pair().unwrap();
    let ctx = open_app(&host.nics()[0]);
    let Looped { qp, cq, mr, .. } = &mut looped_qp(&ctx, LoopSpec::default(), None);
    // Zero-length writes with immediates: a send and a receive completion each.
    let wr = SendWr {
        wr_id: 0,
        op: WriteOp::WriteImm(9),
        sg_list: &[],
        remote_addr: mr.addr(),
        rkey: mr.rkey(),
        signaled: true,
        solicited: false,
        fence: false,
    };
    let mut wcs = [WorkCompletion::default(); 32];
    let mut seen = 0usize;
    let mut allocs = 0;
    host.hold_doorbells(true);
    for round in 0..200u64 {
        // The completions of the round before, then this round's work.
        let (res, n) = counted(|| -> mrc_driver::Result<()> {
            while seen < 4 * round as usize {
                seen += cq.poll(&mut wcs)?;
            }
            qp.post_recv(&[
                RecvWr { wr_id: round },
                RecvWr {
                    wr_id: round + 1000,
                },
            ])?;
            let batch = [
                SendWr { wr_id: round, ..wr },
                SendWr {
                    wr_id: round + 1,
                    ..wr
                },
            ];
            qp.post_send(&batch)?;
            Ok(())
        });
        res.unwrap();
        allocs += n;
        // The device runs what the round posted.
        host.hold_doorbells(false);
        host.hold_doorbells(true);
    }
    host.hold_doorbells(false);
    let (res, n) = counted(|| -> mrc_driver::Result<()> {
        while seen < 800 {
            seen += cq.poll(&mut wcs)?;
        }
        Ok(())
    });
    allocs += n;
    res.unwrap();
    assert_eq!(seen, 800);
    assert_eq!(allocs, 0, "heap allocations on the data path");
    let _ = mr.lkey();
}
