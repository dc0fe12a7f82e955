//! SRv6 uSID path planner for multi-plane Clos fabrics.
//!
//! Each plane is an independent Clos: `leaves` top-of-rack switches, `spines` above them
//! (two tiers), or for three tiers `pods` of `leaves / pods` leaves, `spines` aggregation
//! switches per pod and `cores` core switches split evenly over the aggregation index (agg `j`
//! of every pod connects to core group `j`). Host `h` is cabled to leaf `h / hosts_per_leaf` on
//! every plane.
//!
//! uSIDs (16 bits, never 0) name switches per plane: `tier << 12 | index + 1` with tier 1 =
//! leaf, 2 = spine / aggregation, 3 = core; hosts are `0xF000 | host + 1` (their leaf's
//! downlink, the end of the route). A switch matches its own uSID, shifts it out and routes on
//! the next one, so the carrier lists every switch of the path and then the peer host:
//! `leaf_src, spine, leaf_dst, host_dst` (two tiers). Different planes reuse the same numbers:
//! the plane is chosen by the NIC port the EV leaves on ([`PlannedEv::plane`]).
//!
//! EV `i` goes to plane `i % planes` (planes stay equally loaded) and to path
//! `(i / planes) % paths_per_plane`; more EVs than distinct paths repeat paths. The plan is a
//! pure function of its inputs.

use std::net::Ipv6Addr;

use mrc_abi::wire::usid;

use crate::error::{Error, Result};

/// A multi-plane Clos.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Clos {
    /// Independent planes (NIC ports).
    pub planes: u8,
    /// 2 or 3.
    pub tiers: u8,
    /// Leaves per plane.
    pub leaves: u16,
    /// Spines (2 tiers) or aggregation switches per pod (3 tiers).
    pub spines: u16,
    /// 3 tiers: pods (divides `leaves`).
    pub pods: u16,
    /// 3 tiers: core switches (a multiple of `spines`).
    pub cores: u16,
    /// Hosts per leaf.
    pub hosts_per_leaf: u16,
    /// SRv6 locator block.
    pub block: u32,
}

/// One planned EV.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlannedEv {
    /// Plane (NIC port) to send on.
    pub plane: u8,
    /// Outer IPv6 destination.
    pub carrier: Ipv6Addr,
}

const LEAF: u16 = 1;
const SPINE: u16 = 2;
const CORE: u16 = 3;

fn sid(tier: u16, index: u16) -> u16 {
    tier << 12 | (index + 1)
}

fn bad(what: &str) -> Error {
    Error::Topology(what.to_owned())
}

impl Clos {
    fn check(&self) -> Result<()> {
        if self.planes == 0 || self.leaves == 0 || self.spines == 0 || self.hosts_per_leaf == 0 {
            return Err(bad(
                "planes, leaves, spines and hosts_per_leaf must be >= 1",
            ));
        }
        if self.leaves >= 0x0FFF || self.spines >= 0x0FFF || self.cores >= 0x0FFF {
            return Err(bad("at most 4094 switches per tier (12-bit uSID index)"));
        }
        match self.tiers {
            2 => Ok(()),
            3 => {
                if self.pods == 0 || !self.leaves.is_multiple_of(self.pods) {
                    return Err(bad("3 tiers: pods must divide leaves"));
                }
                if self.cores == 0 || !self.cores.is_multiple_of(self.spines) {
                    return Err(bad("3 tiers: cores must be a non-zero multiple of spines"));
                }
                Ok(())
            }
            t => Err(Error::Topology(format!(
                "{t} tiers: only 2 and 3 are supported"
            ))),
        }
    }

    /// Hosts per plane.
    pub fn hosts(&self) -> u32 {
        u32::from(self.leaves) * u32::from(self.hosts_per_leaf)
    }

    /// The uSID paths (without the block) from `src` to `dst` on one plane, in a fixed order.
    ///
    /// # Errors
    /// [`Error::Topology`]: bad description, unknown host, `src == dst`.
    pub fn paths(&self, src: u32, dst: u32) -> Result<Vec<Vec<u16>>> {
        self.check()?;
        if src >= self.hosts() || dst >= self.hosts() {
            return Err(Error::Topology(format!(
                "hosts {src} and {dst}: the fabric has {} hosts",
                self.hosts()
            )));
        }
        if src == dst {
            return Err(bad("source and destination are the same host"));
        }
        let host = 0xF000 | (dst as u16 + 1);
        let (ls, ld) = (
            (src / u32::from(self.hosts_per_leaf)) as u16,
            (dst / u32::from(self.hosts_per_leaf)) as u16,
        );
        if ls == ld {
            return Ok(vec![vec![sid(LEAF, ls), host]]);
        }
        let spine_paths = |pod_s: u16, pod_d: u16| -> Vec<Vec<u16>> {
            (0..self.spines)
                .map(|s| {
                    vec![
                        sid(LEAF, ls),
                        sid(SPINE, pod_s * self.spines + s),
                        sid(LEAF, ld),
                        host,
                    ]
                })
                .filter(|_| pod_s == pod_d)
                .collect()
        };
        if self.tiers == 2 {
            return Ok(spine_paths(0, 0));
        }
        let per_pod = self.leaves / self.pods;
        let (ps, pd) = (ls / per_pod, ld / per_pod);
        if ps == pd {
            return Ok(spine_paths(ps, pd));
        }
        let group = self.cores / self.spines;
        let mut out = Vec::new();
        for a in 0..self.spines {
            for c in 0..group {
                out.push(vec![
                    sid(LEAF, ls),
                    sid(SPINE, ps * self.spines + a),
                    sid(CORE, a * group + c),
                    sid(SPINE, pd * self.spines + a),
                    sid(LEAF, ld),
                    host,
                ]);
            }
        }
        Ok(out)
    }

    /// `num_evs` EVs from `src` to `dst` (see the module docs for the order).
    ///
    /// # Errors
    /// [`Error::Topology`]; `num_evs` outside 1..=4096.
    pub fn plan(&self, src: u32, dst: u32, num_evs: u16) -> Result<Vec<PlannedEv>> {
        if num_evs == 0 || num_evs > mrc_abi::device::admin::MAX_EVS_PER_PROFILE {
            return Err(bad("num_evs must be in 1..=4096"));
        }
        let paths = self.paths(src, dst)?;
        let planes = u16::from(self.planes);
        (0..num_evs)
            .map(|i| {
                let p = &paths[usize::from(i / planes) % paths.len()];
                let carrier = usid::carrier(self.block, p)
                    .map_err(|e| Error::Topology(format!("uSID carrier: {e:?}")))?;
                Ok(PlannedEv {
                    plane: (i % planes) as u8,
                    carrier,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_tier() -> Clos {
        Clos {
            planes: 4,
            tiers: 2,
            leaves: 16,
            spines: 32,
            pods: 0,
            cores: 0,
            hosts_per_leaf: 8,
            block: 0xfcbb_bb00,
        }
    }

    #[test]
    fn two_tier_plan_spreads_planes_and_spines() {
        let c = two_tier();
        let evs = c.plan(0, 100, 256).unwrap();
        assert_eq!(evs.len(), 256);
        for p in 0..4u8 {
            assert_eq!(evs.iter().filter(|e| e.plane == p).count(), 64);
        }
        // host 0 on leaf 0, host 100 on leaf 12, spine 0, then host 101 (0xF065).
        assert_eq!(
            evs[0].carrier,
            "fcbb:bb00:1001:2001:100d:f065::"
                .parse::<Ipv6Addr>()
                .unwrap()
        );
        assert_eq!(
            evs[4].carrier,
            "fcbb:bb00:1001:2002:100d:f065::"
                .parse::<Ipv6Addr>()
                .unwrap()
        );
        let distinct: std::collections::BTreeSet<_> = evs.iter().map(|e| e.carrier).collect();
        assert_eq!(distinct.len(), 32, "every spine used");
        assert_eq!(evs, c.plan(0, 100, 256).unwrap(), "deterministic");
        // Each switch consumes its uSID: after 4 shifts the carrier ends.
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
        assert_eq!(c.paths(0, 1).unwrap(), vec![vec![0x1001, 0xF002]]);
        let c3 = Clos {
            tiers: 3,
            pods: 4,
            spines: 4,
            cores: 16,
            ..c
        };
        let p = c3.paths(0, 127).unwrap();
        assert_eq!(p.len(), 16);
        assert!(p.iter().all(|x| x.len() == 6));
        assert_eq!(p[5], vec![0x1001, 0x2002, 0x3006, 0x200E, 0x1010, 0xF080]);
        assert_eq!(
            c3.paths(0, 8).unwrap().len(),
            4,
            "same pod: aggregation only"
        );
        assert_eq!(c3.plan(0, 127, 128).unwrap().len(), 128);
    }

    #[test]
    fn bad_topologies_are_errors() {
        let c = two_tier();
        assert!(c.plan(0, 0, 128).is_err());
        assert!(c.plan(0, 999, 128).is_err());
        assert!(c.plan(0, 1, 0).is_err());
        assert!(Clos { tiers: 4, ..c }.paths(0, 9).is_err());
        assert!(Clos {
            tiers: 3,
            pods: 3,
            ..c
        }
        .paths(0, 9)
        .is_err());
        assert!(Clos { planes: 0, ..c }.paths(0, 9).is_err());
    }
}
