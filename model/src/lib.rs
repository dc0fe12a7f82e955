//! # mrc-model: model checking the MRC protocol
//!
//! A [`stateright`] model of one MRC connection: a requester spraying a few PSNs over two or
//! three EVs, a responder built on the firmware's receive tracker
//! ([`mrc_firmware::datapath::rx_bitmap::RxBitmap`]), and a network that drops, duplicates,
//! trims, reorders and blackholes packets within a fault budget. [`protocol`] states the rules
//! modelled; [`state`] the state. The checker explores every interleaving breadth-first and
//! checks:
//! - **safety** in every state: exactly-once placement, acknowledged data was placed,
//!   completions only of acknowledged messages and in order, the min-active guard;
//! - **liveness** on every path that ends: every message completes and the QP is not in
//!   ERROR;
//! - **reachability** (so the model is not vacuous): a run completes across a blackholed EV,
//!   and after a trim.
//!
//! Planted bugs ([`protocol::PlantedBug`]) show the checker finds a safety and a liveness
//! violation. The model is a specification of the engine's rules, not the engine: the engine
//! itself is tested against the same properties by the firmware test kit's randomized runs.
#![forbid(unsafe_code)]

pub mod protocol;
pub mod state;

pub use protocol::{Action, PlantedBug, Protocol};
pub use state::{Budget, State};
