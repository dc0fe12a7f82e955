//! Plane weights follow the EV table even when the command buffer fills with EV updates.

use mrc_abi::device::csr::{CsrEntry, CsrEvent};
use mrc_firmware::engine::ev_state::EvConfig;
use mrc_firmware::engine::{CcProfile, Engine, EngineConfig, EvProfile, QpAttrs, QpState};
use mrc_firmware::testkit::TestKit;

/// Commands of `fw`, polled into buffers of `len` entries until none is left.
fn poll_all(fw: &mut Engine<TestKit>, len: usize) -> Vec<Vec<CsrEvent>> {
    let mut polls = Vec::new();
    let mut buf = vec![CsrEntry::ZERO; len];
    loop {
        let n = fw.poll_commands(&mut buf);
        if n == 0 {
            return polls;
        }
        polls.push(buf[..n].iter().map(|e| e.decode().unwrap()).collect());
    }
}

/// An engine with one QP in RTS (64 EVs over 2 planes, a fixed window), its setup commands
/// polled.
fn connected() -> (Engine<TestKit>, u32) {
    let mut fw = Engine::<TestKit>::new(EngineConfig::default()).unwrap();
    let q = fw.create_qp().unwrap();
    let ev = EvProfile::udp(EvConfig::new(64, 2));
    let attrs = QpAttrs::connect(
        ev,
        CcProfile::Fixed {
            cwnd_bytes: 1 << 20,
        },
        1,
    );
    for s in [QpState::Init, QpState::Rtr, QpState::Rts] {
        fw.modify_qp(q, s, &attrs, 0).unwrap();
    }
    poll_all(&mut fw, 64);
    (fw, q)
}

#[test]
fn a_weight_change_is_written_when_ev_updates_filled_the_buffer() {
    let (mut fw, q) = connected();
    // Four EVs of plane 0 retire: their EvUpdate + EvEvent pairs fill a buffer of 8 exactly.
    for e in [0u16, 2, 4, 6] {
        fw.handle_shared_loss(0, q, e).unwrap();
    }
    let polls = poll_all(&mut fw, 8);
    let evs = |p: &Vec<CsrEvent>| {
        p.iter()
            .filter(|c| matches!(c, CsrEvent::EvUpdate(_)))
            .count()
    };
    assert_eq!(evs(&polls[0]), 4, "{polls:?}");
    // Plane 0 kept 28 of 32 EVs: its weight drops below plane 1's in a later poll.
    let weights: Vec<(u8, u8)> = polls
        .iter()
        .flatten()
        .filter_map(|c| match c {
            CsrEvent::PlaneWeight(w) => Some((w.plane, w.weight)),
            _ => None,
        })
        .collect();
    let w = |p: u8| weights.iter().rev().find(|w| w.0 == p).map(|w| w.1);
    assert!(w(0).zip(w(1)).is_some_and(|(a, b)| a < b), "{weights:?}");
}

/// A plane down: the datapath's `PlaneDown` takes it out of the sprayer (weight 0), so the
/// firmware writes no weight for it while it is down (not even while its EV table writes are
/// going out, which would put it back); once it is up, its weight is written again, after the
/// EV table writes that retired its EVs.
#[test]
fn a_down_planes_weight_is_the_datapaths_zero_until_it_is_up_again() {
    let (mut fw, _) = connected();
    fw.handle_plane_down(10, 1);
    let down: Vec<CsrEvent> = poll_all(&mut fw, 8).into_iter().flatten().collect();
    assert!(
        matches!(down.first(), Some(CsrEvent::PlaneDown(p)) if p.plane == 1),
        "{down:?}"
    );
    let retired = down
        .iter()
        .filter(|c| matches!(c, CsrEvent::EvUpdate(u) if u.plane == 1))
        .count();
    assert_eq!(retired, 32, "every EV of plane 1 retired in the table");
    assert!(
        !down
            .iter()
            .any(|c| matches!(c, CsrEvent::PlaneWeight(w) if w.plane == 1)),
        "no weight for plane 1 while down: {down:?}"
    );
    // Up again: the EV table writes of plane 1 all came before; its weight is written now.
    fw.handle_plane_up(20, 1);
    let up: Vec<CsrEvent> = poll_all(&mut fw, 8).into_iter().flatten().collect();
    let weights: Vec<(u8, u8)> = up
        .iter()
        .filter_map(|c| match c {
            CsrEvent::PlaneWeight(w) => Some((w.plane, w.weight)),
            _ => None,
        })
        .collect();
    assert_eq!(weights.len(), 1, "{up:?}");
    assert_eq!(weights[0].0, 1);
    assert!(weights[0].1 >= 1);
    assert!(
        !up.iter().any(|c| matches!(c, CsrEvent::EvUpdate(_))),
        "the table writes went out while the plane was down"
    );
}
