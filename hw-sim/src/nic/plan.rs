//! The QPN plan: which connections (RC QPs) each NIC opens for a flow list, and their numbers.
//!
//! Every pair of hosts with at least one flow between them (either direction) gets one
//! connection: one QP on each side, which both sends and receives. On host `h` the QP toward
//! peer `p` is number `i` where `p` is the `i`-th smallest peer of `h`, so both ends can be
//! wired before either NIC exists: `h`'s QP toward `p` sends to QPN [`QpPlan::qpn`]`(p, h)`.

use crate::workload::Flow;

/// One connection of a NIC: the peer host and the peer's QPN for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Peer {
    /// The peer host.
    pub host: u32,
    /// The QPN of the peer's end of this connection.
    pub remote_qpn: u32,
}

/// Every host's sorted peer list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QpPlan {
    peers: Vec<Vec<u32>>,
}

impl QpPlan {
    /// The plan for `flows` over `hosts` hosts (flows naming a host >= `hosts` or a host itself
    /// are ignored).
    pub fn for_flows<'a>(hosts: u32, flows: impl IntoIterator<Item = &'a Flow>) -> QpPlan {
        let mut peers = vec![Vec::new(); hosts as usize];
        for f in flows {
            if f.src == f.dst || f.src >= hosts || f.dst >= hosts {
                continue;
            }
            peers[f.src as usize].push(f.dst);
            peers[f.dst as usize].push(f.src);
        }
        for p in &mut peers {
            p.sort_unstable();
            p.dedup();
        }
        QpPlan { peers }
    }

    /// Hosts.
    pub fn hosts(&self) -> u32 {
        self.peers.len() as u32
    }

    /// The QPN on `host` of its connection toward `peer`.
    pub fn qpn(&self, host: u32, peer: u32) -> Option<u32> {
        let p = self.peers.get(host as usize)?;
        p.binary_search(&peer).ok().map(|i| i as u32)
    }

    /// `host`'s connections in QPN order.
    pub fn peers_of(&self, host: u32) -> Vec<Peer> {
        let Some(list) = self.peers.get(host as usize) else {
            return Vec::new();
        };
        list.iter()
            .map(|&p| Peer {
                host: p,
                remote_qpn: self.qpn(p, host).unwrap_or(u32::MAX),
            })
            .collect()
    }

    /// Most connections any host has.
    pub fn max_connections(&self) -> usize {
        self.peers.iter().map(Vec::len).max().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::time::Time;

    fn flow(id: u32, src: u32, dst: u32) -> Flow {
        Flow {
            id,
            src,
            dst,
            bytes: 1,
            msg_bytes: 1,
            start: Time::ZERO,
            after: None,
        }
    }

    #[test]
    fn both_ends_agree() {
        let flows = [flow(0, 0, 3), flow(1, 3, 0), flow(2, 2, 0), flow(3, 1, 2)];
        let plan = QpPlan::for_flows(4, &flows);
        assert_eq!(plan.peers_of(0).len(), 2);
        for h in 0..4 {
            for (i, p) in plan.peers_of(h).iter().enumerate() {
                assert_eq!(plan.qpn(h, p.host), Some(i as u32));
                assert_eq!(plan.qpn(p.host, h), Some(p.remote_qpn));
            }
        }
        assert_eq!(plan.max_connections(), 2);
        assert_eq!(plan.qpn(1, 3), None);
    }
}
