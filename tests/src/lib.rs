//! Whole-system test support: the swarm tester ([`swarm`]) that `tests/swarm.rs` and
//! `just swarm N` run.

pub mod swarm;
