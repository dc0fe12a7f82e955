//! ECMP forwarding: destination routing over the equal-cost ports that the switch's routing
//! view holds up.
//!
//! The routing view ([`Link::rt_up`](super::engine)) follows each physical link state change
//! after the reconvergence delay. A port is eligible when its own link *and* the rest of a
//! shortest path to the destination are up in the view (what a converged routing protocol
//! would install). Selection is resilient: the flow's hashed port is kept if it is eligible, so
//! flows that did not cross a failure keep their path; otherwise the flow is rehashed over the
//! eligible ports. With every link up in the view the choice is `hash mod n`, no scan.

use super::counters::DropCause;
use super::engine::Fabric;
use super::topology::Dims;

/// A per-switch hash of the flow hash (so switches in different tiers do not polarize).
#[inline]
pub(crate) fn switch_hash(flow: u64, switch: u32) -> u64 {
    let mut z = flow ^ (switch as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Fabric {
    /// Routing-view state of port `port` of plane-local switch `sw` in the plane starting at
    /// global port `base`.
    #[inline]
    fn rt(&self, base: u32, sw: u32, port: u32) -> bool {
        let p = base + self.topo.local_port(sw, port);
        self.rt_up_port(p)
    }

    /// Picks one of `n` ports: the hashed one if eligible, else a rehash over eligible ones.
    #[inline]
    fn choose(&self, n: u32, hash: u64, eligible: impl Fn(u32) -> bool) -> Result<u32, DropCause> {
        let first = (hash % n as u64) as u32;
        if self.routes_all_up() || eligible(first) {
            return Ok(first);
        }
        let m = (0..n).filter(|c| eligible(*c)).count() as u64;
        if m == 0 {
            return Err(DropCause::NoRoute);
        }
        let pick = ((hash >> 32) % m) as usize;
        (0..n)
            .filter(|c| eligible(*c))
            .nth(pick)
            .ok_or(DropCause::NoRoute)
    }

    /// The ECMP output port (switch-local number) of global switch `sw` toward host `dst`.
    pub(crate) fn ecmp_port(&self, sw: u32, dst: u32, flow: u64) -> Result<u32, DropCause> {
        let topo = &self.topo;
        if dst >= topo.hosts() {
            return Err(DropCause::NoRoute);
        }
        let spp = topo.switches_per_plane();
        let local = sw % spp;
        let base = (sw / spp) * topo.ports_per_plane();
        let hash = switch_hash(flow, sw);
        match topo.dims {
            Dims::LeafSpine {
                hpl,
                leaves,
                spines,
            } => {
                let dl = dst / hpl;
                if local >= leaves {
                    return Ok(dl); // spine: one port per leaf
                }
                if dl == local {
                    return Ok(dst % hpl);
                }
                let s = self.choose(spines, hash, |s| {
                    self.rt(base, local, hpl + s) && self.rt(base, leaves + s, dl)
                })?;
                Ok(hpl + s)
            }
            Dims::FatTree { k, h } => {
                let de = dst / h;
                let dp = de / h;
                let aggs = k * h;
                // Aggregation (pod, j) down to the destination edge, via core i when needed.
                let agg = |pod: u32, j: u32| aggs + pod * h + j;
                let core = |j: u32, i: u32| 2 * aggs + j * h + i;
                let down_ok = |j: u32, i: u32| {
                    self.rt(base, core(j, i), dp) && self.rt(base, agg(dp, j), de % h)
                };
                if local < aggs {
                    // Edge switch `local`, pod local / h.
                    if de == local {
                        return Ok(dst % h);
                    }
                    let pod = local / h;
                    let j = self.choose(h, hash, |j| {
                        self.rt(base, local, h + j)
                            && if dp == pod {
                                self.rt(base, agg(pod, j), de % h)
                            } else {
                                (0..h).any(|i| self.rt(base, agg(pod, j), h + i) && down_ok(j, i))
                            }
                    })?;
                    Ok(h + j)
                } else if local < 2 * aggs {
                    let pod = (local - aggs) / h;
                    let j = (local - aggs) % h;
                    if dp == pod {
                        return Ok(de % h);
                    }
                    let i =
                        self.choose(h, hash, |i| self.rt(base, local, h + i) && down_ok(j, i))?;
                    Ok(h + i)
                } else {
                    Ok(dp) // core: one port per pod
                }
            }
        }
    }
}
