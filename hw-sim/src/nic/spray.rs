//! `spray-oblivious`: a uniformly random plane and path per packet, and no path feedback.
//!
//! The MRC NIC model runs the real engine unchanged; two things make it oblivious:
//!
//! 1. **Routing ignores the EV.** For every packet the engine emits (data, retransmission,
//!    ACK, NACK, probe), the NIC asks a [`SpraySelector`] for the route instead of mapping the
//!    packet's EV to a path: a uniformly random plane (`0..planes`) and a uniformly random
//!    uSID path (`0..path_count(src, dst)`), from a stream seeded per host. Whatever the
//!    engine learns about an EV says nothing about any path, so even the feedback that remains
//!    cannot steer traffic away from a bad link.
//! 2. **The engine's per-EV reactions are switched off** as far as its knobs go
//!    ([`oblivious_ev_config`]): no retirement on loss (`immediate_retire = false`), no skip on
//!    persistent ECN (threshold 1.0, which an EWMA with gain < 1 of 0/1 samples never reaches),
//!    a gray-loss test that needs about 130 losses in a row on one EV, with no delivery
//!    acknowledged on it in between, to fire, and `min_active = evs`, so that even then the
//!    guard only skips the EV once instead of retiring it. No EV is ever retired.
//!
//! What the engine still does (there is no knob for it, and none is needed for a fair
//! baseline): it infers losses from SACK holes and retransmits them (reliability), retransmits
//! trimmed packets on NACK, runs NSCC per QP (a congestion window from ECN and delay, which is
//! per-QP congestion control, not path choice), keeps per-EV statistics, rotates its sprayer
//! over EV indices (which no longer name paths) and prefers a different EV for a
//! retransmission (meaningless here), and would retire every EV of a plane on a NIC port-down
//! event (the simulator raises none). Probes only go to retired EVs, so none are sent.
//!
//! # Hooking it in
//! In the MRC NIC's transmit path, for `Transport::SprayOblivious`:
//! ```
//! use mrc_sim::fabric::{FabricConfig, Fabric, Shape};
//! use mrc_sim::core::ComponentId;
//! use mrc_sim::nic::spray::SpraySelector;
//! let mut cfg = FabricConfig::htsim_reference(Shape::LeafSpine { hosts: 8, radix: 4 });
//! cfg.planes = 2;
//! let fab = Fabric::new(cfg, ComponentId(0)).unwrap();
//! let mut sel = SpraySelector::new(1, 0); // seed, host
//! let pick = sel.pick(fab.topology(), 0, 5).unwrap();
//! assert!(pick.plane < 2 && pick.path < 2);
//! // fab.inject(s, host, pick.plane, Packet { route: pick.route, .. })
//! ```
//! and build the QPs' EV profile from [`oblivious_ev_config`] instead of `EvConfig::new`.

use mrc_firmware::engine::ev_state::EvConfig;
use mrc_firmware::engine::fixed::Q16_ONE;
use mrc_firmware::engine::sprt::SprtParams;

use crate::core::rng::Rng;
use crate::fabric::{Route, RouteError, Topology};

/// One packet's route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SprayPick {
    /// Plane (NIC port) to inject on.
    pub plane: u32,
    /// Path index (below [`Topology::path_count`]).
    pub path: u32,
    /// The uSID source route for that path.
    pub route: Route,
}

/// A seeded per-host stream of uniformly random (plane, path) choices.
#[derive(Clone, Debug)]
pub struct SpraySelector {
    rng: Rng,
}

impl SpraySelector {
    /// The selector of `host` in a run seeded with `seed` (independent streams per host; same
    /// seed and host, same sequence).
    pub fn new(seed: u64, host: u32) -> SpraySelector {
        SpraySelector {
            rng: Rng::new(seed ^ 0x7370_7261_7900_0000).fork(u64::from(host)),
        }
    }

    /// A uniformly random plane of `topo` and a uniformly random path from `src` to `dst`.
    ///
    /// # Errors
    /// [`RouteError`] for an unknown host or `src == dst` (nothing is drawn then).
    pub fn pick(&mut self, topo: &Topology, src: u32, dst: u32) -> Result<SprayPick, RouteError> {
        self.pick_within(topo, src, dst, topo.planes())
    }

    /// As [`SpraySelector::pick`] over the first `planes` planes only (a NIC with fewer ports
    /// than the fabric has planes; clamped to `1..=topo.planes()`).
    ///
    /// # Errors
    /// [`RouteError`] for an unknown host or `src == dst` (nothing is drawn then).
    pub fn pick_within(
        &mut self,
        topo: &Topology,
        src: u32,
        dst: u32,
        planes: u32,
    ) -> Result<SprayPick, RouteError> {
        // Validate first, so an error consumes no randomness.
        topo.usid_route(src, dst, 0)?;
        let planes = planes.clamp(1, topo.planes().max(1));
        let plane = self.rng.below(u64::from(planes)) as u32;
        let path = self.rng.below(u64::from(topo.path_count(src, dst).max(1))) as u32;
        let route = Route::Usid(topo.usid_route(src, dst, path)?);
        Ok(SprayPick { plane, path, route })
    }
}

/// The EV table configuration of an oblivious sprayer: `evs` EVs over `planes` planes with
/// every per-EV reaction the engine has a knob for switched off (see the module docs for what
/// remains).
pub fn oblivious_ev_config(evs: u16, planes: u8) -> EvConfig {
    let mut c = EvConfig::new(evs, planes);
    c.immediate_retire = false;
    c.min_active = evs;
    c.ecn_skip_threshold_q16 = Q16_ONE;
    // Loss step ln(p1/p0) ~ 0.105, delivery step ln((1-p1)/(1-p0)) ~ -11.5, upper bound
    // ln((1-beta)/alpha) ~ 13.8: ~131 losses in a row with no delivery to retire.
    c.sprt = SprtParams {
        p0_ppm: 900_000,
        p1_ppm: 999_999,
        alpha_ppm: 1,
        beta_ppm: 1,
    };
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::sim::ComponentId;
    use crate::fabric::{Fabric, FabricConfig, Shape};
    use mrc_firmware::engine::ev_state::{AckFeedback, EvState, EvTable};

    fn fabric(shape: Shape, planes: u32) -> Fabric {
        let mut cfg = FabricConfig::htsim_reference(shape);
        cfg.planes = planes;
        Fabric::new(cfg, ComponentId(0)).unwrap()
    }

    #[test]
    fn every_plane_and_path_is_used_uniformly() {
        let fab = fabric(Shape::FatTree { k: 4 }, 4);
        let topo = fab.topology();
        // Inter-pod: 4 paths x 4 planes.
        let (src, dst) = (0, 15);
        assert_eq!(topo.path_count(src, dst), 4);
        let mut sel = SpraySelector::new(7, src);
        let mut counts = [[0u32; 4]; 4];
        let n = 64_000;
        for _ in 0..n {
            let p = sel.pick(topo, src, dst).unwrap();
            assert_eq!(
                p.route,
                Route::Usid(topo.usid_route(src, dst, p.path).unwrap())
            );
            counts[p.plane as usize][p.path as usize] += 1;
        }
        // Each of the 16 cells expects 4000; a 10% band is > 6 sigma.
        for row in counts {
            for c in row {
                assert!((3_600..4_400).contains(&c), "{counts:?}");
            }
        }
    }

    #[test]
    fn deterministic_per_seed_and_host() {
        let fab = fabric(Shape::LeafSpine { hosts: 8, radix: 4 }, 2);
        let topo = fab.topology();
        let seq = |seed, host| {
            let mut s = SpraySelector::new(seed, host);
            (0..64)
                .map(|_| {
                    let p = s.pick(topo, host, 7).unwrap();
                    (p.plane, p.path)
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(seq(1, 0), seq(1, 0));
        assert_ne!(seq(1, 0), seq(2, 0));
        assert_ne!(seq(1, 0), seq(1, 1));
        // Within a leaf there is one path; planes still vary.
        let mut s = SpraySelector::new(3, 0);
        let picks: Vec<_> = (0..100).map(|_| s.pick(topo, 0, 1).unwrap()).collect();
        assert!(picks.iter().all(|p| p.path == 0));
        assert!(picks.iter().any(|p| p.plane == 0) && picks.iter().any(|p| p.plane == 1));
        assert!((0..100).all(|_| s.pick_within(topo, 0, 5, 1).unwrap().plane == 0));
        assert!(s.pick(topo, 0, 0).is_err());
        assert!(s.pick(topo, 0, 99).is_err());
    }

    #[test]
    fn the_engine_accepts_the_oblivious_profile() {
        use crate::nic::WideShard;
        use mrc_abi::wire::EvFormat;
        use mrc_firmware::engine::cc::NsccParams;
        use mrc_firmware::engine::{CcProfile, Engine, EngineConfig, EvProfile, QpAttrs, QpState};
        let mut e = Box::new(Engine::<WideShard>::new(EngineConfig::default()).unwrap());
        let qpn = e.create_qp().unwrap();
        let nscc = NsccParams::for_link(800_000_000_000, 10_000, 4096).unwrap();
        let ev = EvProfile {
            table: oblivious_ev_config(256, 4),
            format: EvFormat::Srv6,
            value_base: 0xC000,
        };
        let attrs = QpAttrs::connect(ev, CcProfile::Nscc(nscc), qpn).retry(24, 5);
        for st in [QpState::Init, QpState::Rtr, QpState::Rts] {
            e.modify_qp(qpn, st, &attrs, 0).unwrap();
        }
        assert_eq!(e.qp(qpn).unwrap().active_evs, 256);
        for ev in 0..256u16 {
            let s = e.ev_stats(qpn, ev).unwrap();
            assert_eq!((s.state, s.plane), (EvState::Good, (ev % 4) as u8));
        }
    }

    #[test]
    fn the_ev_table_never_reacts_to_losses_or_ecn() {
        let mut t: EvTable<256> = EvTable::new(oblivious_ev_config(256, 4)).unwrap();
        for round in 0..1_000u64 {
            for ev in 0..256u16 {
                // Heavy loss with some deliveries in between, and every ACK ECN-marked.
                if round % 50 != 0 {
                    t.handle_loss(ev, round).unwrap();
                } else {
                    let fb = AckFeedback {
                        delivered: 1,
                        ecn_marked: true,
                        rtt_ns: 10_000,
                    };
                    t.handle_ack(ev, round, fb).unwrap();
                }
                t.handle_trim(ev).unwrap();
            }
            for ev in 0..256u16 {
                let fb = AckFeedback {
                    delivered: 0,
                    ecn_marked: true,
                    rtt_ns: 0,
                };
                t.handle_ack(ev, round, fb).unwrap();
            }
        }
        assert_eq!(t.poll_event(), None);
        assert_eq!(t.active(), 256);
        assert!((0..256).all(|ev| t.state(ev) == Ok(EvState::Good)));
        assert_eq!(t.poll_probe(u64::MAX), None);
    }
}
