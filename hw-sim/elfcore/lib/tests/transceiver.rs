//! The board's transceivers, live, in the NIC image: two NICs run writes from A to B (the
//! differential test's harness) with the `mrc-nic` ELF on the emulated core; mid-run, A's
//! port 1 module is pulled from its cage and port 2's module raises loss of signal, and each
//! plane's packets stop getting through. The image's port monitor must see both through the
//! I2C controller (port 1 by its cage's presence pin, port 2 by `IntL` and a CMIS poll over the
//! bus that reads the latched LOS flag), take each port down through the loop's port path (a
//! PORT_DOWN event for the host, the plane down in the engine: a `PlaneDown` for the datapath
//! and every EV on the plane retired), and every write must still complete, each byte placed.
//! Port 1's module seated again later is polled over I2C and brings the port back up.
//!
//! Builds the NIC image (`tests/build`): without the riscv32imac target it prints
//! `SKIPPED: ...` and passes, unless `CI` is set.

mod build;
mod twonic;

use std::cell::Cell;
use std::collections::BTreeSet;

use mrc_abi::device::csr::{CsrEvent, EvUpdate};
use mrc_abi::device::event::Event;
use mrc_abi::device::EvState;
use twonic::*;

const PULLED: usize = 1;
const DARK: usize = 2;
const PULL_ROUND: u64 = 400;
const LOS_ROUND: u64 = 700;
const INSERT_ROUND: u64 = 4_000;

#[test]
fn pulled_and_dark_transceivers_take_their_planes_down_through_the_image_and_writes_complete() {
    let Some(image) = build::nic_image("pulled_and_dark_transceivers") else {
        return;
    };
    let pulled = Cell::new(false);
    let dark = Cell::new(false);
    // A's module transfers on each port just before the events.
    let before = Cell::new((0u32, 0u32));
    let (out, fws) = run_with(
        elf(&image),
        elf(&image),
        MESSAGES,
        ROUNDS,
        1,
        |k, a: &mut Elf| {
            let i2c = &mut a.core.device_mut().i2c;
            let transfers = |i2c: &mrc_elfcore::board::i2c::I2cController, p: usize| {
                i2c.module(p).unwrap().counters().transfers
            };
            if k == PULL_ROUND {
                before.set((transfers(i2c, PULLED), transfers(i2c, DARK)));
                i2c.module_mut(PULLED).unwrap().pull();
                pulled.set(true);
            }
            if k == LOS_ROUND {
                i2c.module_mut(DARK).unwrap().set_los(0b0001);
                dark.set(true);
            }
            if k == INSERT_ROUND {
                i2c.module_mut(PULLED).unwrap().insert();
                pulled.set(false);
            }
        },
        |p, _| {
            let plane = usize::from(p.evx.plane);
            (pulled.get() && plane == PULLED) || (dark.get() && plane == DARK)
        },
    );
    let [a, _b] = &fws;
    let i2c = &a.core.device().i2c;

    // The monitor read the pins every period and talked I2C: at boot to every module, to the
    // dark one after its LOS (the latched flag), to the pulled one only once it was seated
    // again (a pulled module is down by its presence pin, without a transfer).
    let c = i2c.counters();
    assert!(c.pin_reads > 100, "pins read each period: {c:?}");
    assert!(c.commands > 0 && c.nacks == 0, "{c:?}");
    let (pulled_before, dark_before) = before.get();
    assert!(
        pulled_before > 0 && dark_before > 0,
        "every module polled at boot"
    );
    let dark_m = i2c.module(DARK).unwrap().counters();
    assert!(
        dark_m.transfers > dark_before && dark_m.bytes_read > 0,
        "the LOS was read over I2C: {dark_m:?}"
    );
    let pulled_m = i2c.module(PULLED).unwrap().counters();
    assert_eq!(pulled_m.absent_nacks, 0, "no transfer to the empty cage");
    assert!(
        pulled_m.transfers > pulled_before,
        "polled once seated again"
    );

    // The port path: PORT_DOWN for both (then PORT_UP for the re-seated one) on A's host, the
    // planes down in the engine, the EVs on them retired in the datapath's EV table.
    let events: Vec<Event> = out.host[0]
        .iter()
        .filter_map(|e| match e.decode() {
            Ok(CsrEvent::PostEvent(p)) => p.event().ok(),
            _ => None,
        })
        .collect();
    for port in [PULLED, DARK] {
        let (port, plane) = (port as u8, port as u8);
        assert!(
            events.contains(&Event::PortDown { port, plane }),
            "PORT_DOWN {port}: {events:?}"
        );
    }
    assert!(events
        .iter()
        .any(|e| matches!(e, Event::PortUp { port, .. } if usize::from(*port) == PULLED)));
    assert!(!events
        .iter()
        .any(|e| matches!(e, Event::PortUp { port, .. } if usize::from(*port) == DARK)));
    let log: Vec<CsrEvent> = out.log[0].iter().filter_map(|e| e.decode().ok()).collect();
    for plane in [PULLED, DARK] {
        let at = log
            .iter()
            .position(|e| matches!(e, CsrEvent::PlaneDown(p) if usize::from(p.plane) == plane))
            .unwrap_or_else(|| panic!("no PlaneDown for plane {plane}"));
        let retired: Vec<&EvUpdate> = log[at..]
            .iter()
            .filter_map(|e| match e {
                CsrEvent::EvUpdate(u) if usize::from(u.plane) == plane => Some(u),
                _ => None,
            })
            .collect();
        assert!(
            retired.iter().any(|u| u.state == EvState::AssumedBad as u8),
            "plane {plane}'s EVs retired"
        );
    }

    // What watching the ports costs the loop once the traffic is done (the last 1,000
    // rounds, 1 us apart: a pin read every 10th): the idle iterations' instructions, median,
    // with and without the pin read.
    let tail = &a.runs[a.runs.len() - 1_000..];
    let median = |mut v: Vec<u64>| {
        v.sort_unstable();
        v[v.len() / 2]
    };
    let mut by_rate: Vec<Vec<u64>> = vec![Vec::new(); 10];
    for (i, &n) in tail.iter().enumerate() {
        by_rate[(a.runs.len() - 1_000 + i) % 10].push(n);
    }
    let per_phase: Vec<u64> = by_rate.into_iter().map(median).collect();
    let (lo, hi) = (
        *per_phase.iter().min().unwrap(),
        *per_phase.iter().max().unwrap(),
    );
    assert!(hi > lo, "the pin read costs instructions: {per_phase:?}");
    println!(
        "idle main-loop iteration: {lo} instructions; with the port monitor's pin read: {hi} \
         (+{})",
        hi - lo
    );

    // Every write completed with every byte placed once at B.
    assert_eq!(out.sent_cqes, MESSAGES as usize, "every write completed");
    let want: u64 = (0..MESSAGES)
        .map(|i| u64::from(1 + (i as u32 * 977) % (3 * MTU)))
        .sum();
    let placed: BTreeSet<_> = out.placed.iter().copied().collect();
    let got: u64 = placed.iter().map(|p| u64::from(p.2)).sum();
    assert_eq!(got, want, "every byte placed");
}
