//! SRv6 uSID path planner for multi-plane Clos fabrics.
//!
//! The topology description ([`Clos`]), what a uSID names and the paths between two hosts are
//! mrc-abi's ([`mrc_abi::wire::usid::clos`], `abi/WIRE.md` "uSIDs in a Clos"): a uSID names a
//! switch (`tier << 12 | index + 1`), the last one is the destination's local uSID on its leaf
//! (`0xF000 | downlink + 1`), and the simulator's switches forward by the same rules, so a
//! planned EV reaches its destination on the fabric the description matches.
//!
//! EV `i` goes to plane `i % planes` (planes stay equally loaded) and to path
//! `(i / planes) % paths`; more EVs than distinct paths repeat paths. The plan is a pure
//! function of its inputs.

use std::net::Ipv6Addr;

pub use mrc_abi::wire::usid::clos::Clos;
use mrc_abi::wire::usid::clos::ClosError;

use crate::error::{Error, Result};

/// One planned EV.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlannedEv {
    /// Plane (NIC port) to send on.
    pub plane: u8,
    /// Outer IPv6 destination.
    pub carrier: Ipv6Addr,
}

fn topology(e: ClosError) -> Error {
    Error::Topology(e.to_string())
}

/// The uSID paths (without the block) from `src` to `dst` on one plane, in path-index order.
///
/// # Errors
/// [`Error::Topology`]: bad description, unknown host, `src == dst`.
pub fn paths(clos: &Clos, src: u32, dst: u32) -> Result<Vec<Vec<u16>>> {
    let n = clos.path_count(src, dst).map_err(topology)?;
    (0..n)
        .map(|i| {
            clos.path(src, dst, i)
                .map(|p| p.usids().to_vec())
                .map_err(topology)
        })
        .collect()
}

/// `num_evs` EVs from `src` to `dst` (see the module docs for the order).
///
/// # Errors
/// [`Error::Topology`]; `num_evs` outside 1..=4096.
pub fn plan(clos: &Clos, src: u32, dst: u32, num_evs: u16) -> Result<Vec<PlannedEv>> {
    if num_evs == 0 || num_evs > mrc_abi::device::admin::MAX_EVS_PER_PROFILE {
        return Err(Error::Topology("num_evs must be in 1..=4096".into()));
    }
    (0..num_evs)
        .map(|i| {
            let (plane, carrier) = clos.ev(src, dst, i).map_err(topology)?;
            Ok(PlannedEv { plane, carrier })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use mrc_abi::wire::usid;

    fn two_tier() -> Clos {
        Clos::two_tier(4, 16, 32, 8, 0xfcbb_bb00)
    }

    #[test]
    fn two_tier_plan_spreads_planes_and_spines() {
        let c = two_tier();
        let evs = plan(&c, 0, 100, 256).unwrap();
        assert_eq!(evs.len(), 256);
        for p in 0..4u8 {
            assert_eq!(evs.iter().filter(|e| e.plane == p).count(), 64);
        }
        // Host 0 on leaf 0, host 100 on leaf 12 downlink 4: leaf 0, spine 0, leaf 12, 0xF005.
        assert_eq!(
            evs[0].carrier,
            "fcbb:bb00:1001:2001:100d:f005::"
                .parse::<Ipv6Addr>()
                .unwrap()
        );
        assert_eq!(
            evs[4].carrier,
            "fcbb:bb00:1001:2002:100d:f005::"
                .parse::<Ipv6Addr>()
                .unwrap()
        );
        let distinct: std::collections::BTreeSet<_> = evs.iter().map(|e| e.carrier).collect();
        assert_eq!(distinct.len(), 32, "every spine used");
        assert_eq!(evs, plan(&c, 0, 100, 256).unwrap(), "deterministic");
        // Four uSIDs: after 4 shifts the carrier ends.
        let mut a = evs[7].carrier;
        for _ in 0..4 {
            assert!(!usid::is_end_of_carrier(a));
            a = usid::shift(a);
        }
        assert!(usid::is_end_of_carrier(a));
    }

    #[test]
    fn same_leaf_and_three_tier() {
        let c = two_tier();
        assert_eq!(paths(&c, 0, 1).unwrap(), vec![vec![0x1001, 0xF002]]);
        let c3 = Clos {
            tiers: 3,
            pods: 4,
            spines: 4,
            cores: 16,
            ..c
        };
        let p = paths(&c3, 0, 127).unwrap();
        assert_eq!(p.len(), 16);
        assert!(p.iter().all(|x| x.len() == 6));
        // Path 5: aggregation 5 % 4 = 1 of pods 0 and 3, core 1 * 4 + 5 / 4 = 5; host 127 is
        // leaf 15 downlink 7.
        assert_eq!(p[5], vec![0x1001, 0x2002, 0x3006, 0x200E, 0x1010, 0xF008]);
        assert_eq!(
            paths(&c3, 0, 8).unwrap().len(),
            4,
            "same pod: aggregation only"
        );
        assert_eq!(plan(&c3, 0, 127, 128).unwrap().len(), 128);
    }

    #[test]
    fn bad_topologies_are_errors() {
        let c = two_tier();
        assert!(plan(&c, 0, 0, 128).is_err());
        assert!(plan(&c, 0, 999, 128).is_err());
        assert!(plan(&c, 0, 1, 0).is_err());
        assert!(paths(&Clos { tiers: 4, ..c }, 0, 9).is_err());
        let e = paths(
            &Clos {
                tiers: 3,
                pods: 3,
                ..c
            },
            0,
            9,
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "topology: 3 tiers: pods must divide leaves");
        assert!(paths(&Clos { planes: 0, ..c }, 0, 9).is_err());
    }
}
