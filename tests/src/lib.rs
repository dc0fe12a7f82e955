//! Whole-system test support: the swarm tester ([`swarm`]) that `tests/swarm.rs` and
//! `just swarm N` run, and the host and connection setup ([`hosts`]) it shares with
//! `tests/whole_system.rs`.
#![forbid(unsafe_code)]

pub use mrc_sim::apps::hosts;
pub mod swarm;
