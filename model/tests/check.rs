//! Model checking in `cargo test`: the protocol holds its properties over every interleaving
//! within the fault budget (full breadth-first exploration, no depth bound: every path ends
//! because faults are bounded), and each planted bug is found.

use mrc_model::{Budget, PlantedBug, Protocol};
use stateright::{Checker, Model};

const ONE_OF_EACH: Budget = Budget {
    losses: 1,
    dups: 1,
    trims: 1,
    blackholes: 1,
};

/// Two messages of two PSNs over two EVs, window 2.
fn two_evs(bug: Option<PlantedBug>) -> Protocol {
    Protocol {
        psns: 4,
        msg_psns: 2,
        window: 2,
        evs: 2,
        min_active: 1,
        reorder: 1,
        retry_cnt: 7,
        net_cap: 3,
        budget: ONE_OF_EACH,
        bug,
    }
}

/// Three one-PSN messages over three EVs, window 2.
fn three_evs(bug: Option<PlantedBug>) -> Protocol {
    Protocol {
        psns: 3,
        msg_psns: 1,
        evs: 3,
        ..two_evs(bug)
    }
}

fn check_clean(p: Protocol, min_states: usize) {
    assert!(p.is_valid());
    let c = p.checker().spawn_bfs().join();
    let states = c.unique_state_count();
    eprintln!(
        "{} EVs, {} PSNs: {states} unique states, depth {}",
        p.evs,
        p.psns,
        c.max_depth()
    );
    assert!(c.is_done());
    c.assert_properties();
    assert!(
        states >= min_states,
        "explored {states} states: the model shrank"
    );
}

#[test]
fn two_evs_every_property_holds() {
    check_clean(two_evs(None), 400_000);
}

#[test]
fn three_evs_every_property_holds() {
    check_clean(three_evs(None), 700_000);
}

fn finds(bug: PlantedBug, property: &'static str) {
    // A smaller instance is enough to find each bug quickly.
    let p = Protocol {
        psns: 2,
        msg_psns: 1,
        ..three_evs(Some(bug))
    };
    let c = p.checker().spawn_bfs().join();
    let path = c
        .discovery(property)
        .unwrap_or_else(|| panic!("{bug:?}: no counterexample to {property:?}"));
    let actions = path.into_actions();
    eprintln!(
        "{bug:?}: {property:?} broken after {} steps: {actions:?}",
        actions.len()
    );
}

#[test]
fn planted_duplicate_write_is_found() {
    finds(PlantedBug::NoDuplicateCheck, "exactly once");
}

#[test]
fn planted_sack_as_cumulative_is_found() {
    finds(PlantedBug::SackAsCumulative, "acknowledged data was placed");
}

#[test]
fn planted_retransmit_on_dead_ev_is_found() {
    finds(PlantedBug::RetransmitOnLostEv, "every message completes");
}
