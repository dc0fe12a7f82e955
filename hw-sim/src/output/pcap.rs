//! pcap of selected packets: real MRC frames (`mrc_abi::wire::Frame::emit`) built from the
//! headers the NICs keep in their side tables, that tshark decodes with `abi/wireshark/mrc.lua`.
//!
//! # What a frame holds
//! Captured where the sender hands the packet to its port, at the simulated send time:
//! - Ethernet `02:00:PP:HH:HH:HH` (plane, host) for both ends;
//! - SRv6 EV format (what the simulated NICs use): outer IPv6 from the sender to the uSID
//!   carrier of the packet's route (`fcbb:bb00::/32`, an SRH when the route needs a second
//!   carrier); for `mrc` the route is the EV's path (`ev_index / planes % path_count`, as the
//!   NIC model picks it), for ECMP-routed transports the carrier is empty (end of carrier:
//!   switches route by the inner destination). Inner IPv6 between the NIC addresses
//!   `fd00:0:0:PP::HH:HH`, ECT(0). UDP and STEV formats get one plain IPv6 header;
//! - the MRC headers of [`StagePacket::to_repr`];
//! - for writes, the virtual payload spelled out: byte `i` is `(psn + i) mod 256`, the pattern
//!   the simulated receiver checks.
//!
//! # Filter
//! Terms separated by spaces or commas, all of which must match (an empty filter matches
//! everything): `host=N` (sent by or to host N), `qp=N` (source or destination QPN),
//! `psn=A..B` or `psn=N` (BTH PSN, inclusive), `kind=data|ack|nack|probe|probe-reply|control`,
//! `time_us=A..B` (send time, inclusive). At most [`Capture::max_frames`] frames are written.

use std::fs::File;
use std::io::BufWriter;
use std::net::Ipv6Addr;
use std::path::Path;

use crate::nic::StagePacket;
use mrc_abi::pcap::Writer;
use mrc_abi::wire::ev::stev_encode;
use mrc_abi::wire::usid::{carrier, DEFAULT_BLOCK};
use mrc_abi::wire::{
    Encap, EthernetAddress, EthernetRepr, EvFormat, Frame, Ipv6Repr, SrhRepr, UdpRepr,
    IP_PROTO_IPV6, IP_PROTO_ROUTING, IP_PROTO_UDP,
};
use mrc_firmware::datapath::packet::PacketBody;

use crate::core::time::Time;
use crate::nic::Transport;
use crate::run::{Tap, WorldView};

/// Packet kinds a filter can select.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// RDMA write packets (payload).
    Data,
    /// ACKs.
    Ack,
    /// NACKs.
    Nack,
    /// EV probes.
    Probe,
    /// EV probe replies.
    ProbeReply,
    /// Everything but data.
    Control,
}

impl Kind {
    fn matches(self, body: &PacketBody) -> bool {
        match (self, body) {
            (Kind::Data, PacketBody::Write { .. })
            | (Kind::Ack, PacketBody::Ack(_))
            | (Kind::Nack, PacketBody::Nack(_))
            | (Kind::Probe, PacketBody::Probe(_))
            | (Kind::ProbeReply, PacketBody::ProbeReply(_)) => true,
            (Kind::Control, b) => !matches!(b, PacketBody::Write { .. }),
            _ => false,
        }
    }
}

/// Which packets to capture (every set field must match).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    /// Sent by or to this host.
    pub host: Option<u32>,
    /// Source or destination QPN.
    pub qp: Option<u32>,
    /// PSN range, inclusive.
    pub psn: Option<(u32, u32)>,
    /// Packet kind.
    pub kind: Option<Kind>,
    /// Send time range in microseconds, inclusive.
    pub time_us: Option<(u64, u64)>,
}

fn range(term: &str, v: &str) -> Result<(u64, u64), String> {
    let num = |s: &str| {
        s.trim()
            .replace('_', "")
            .parse::<u64>()
            .map_err(|_| format!("pcap filter `{term}`: `{s}` is not a number"))
    };
    let (a, b) = match v.split_once("..") {
        Some((a, b)) => (num(a)?, num(b.trim_start_matches('='))?),
        None => {
            let n = num(v)?;
            (n, n)
        }
    };
    if a > b {
        return Err(format!("pcap filter `{term}`: empty range (start > end)"));
    }
    Ok((a, b))
}

impl Filter {
    /// Parses a filter expression (see the module docs).
    ///
    /// # Errors
    /// A message naming the term that is wrong and why.
    pub fn parse(expr: &str) -> Result<Filter, String> {
        let mut f = Filter::default();
        for term in expr.split([' ', ',']).filter(|t| !t.is_empty()) {
            let Some((k, v)) = term.split_once('=') else {
                return Err(format!(
                    "pcap filter `{term}`: expected KEY=VALUE (keys: host, qp, psn, kind, time_us)"
                ));
            };
            let small = |x: u64| {
                u32::try_from(x).map_err(|_| format!("pcap filter `{term}`: {x} is too large"))
            };
            match k {
                "host" | "qp" if v.contains("..") => {
                    return Err(format!("pcap filter `{term}`: {k} takes one number"));
                }
                "host" => f.host = Some(small(range(term, v)?.0)?),
                "qp" => f.qp = Some(small(range(term, v)?.0)?),
                "psn" => {
                    let (a, b) = range(term, v)?;
                    f.psn = Some((small(a)?, small(b)?));
                }
                "time_us" => f.time_us = Some(range(term, v)?),
                "kind" => {
                    f.kind = Some(match v {
                        "data" => Kind::Data,
                        "ack" => Kind::Ack,
                        "nack" => Kind::Nack,
                        "probe" => Kind::Probe,
                        "probe-reply" => Kind::ProbeReply,
                        "control" => Kind::Control,
                        _ => {
                            return Err(format!(
                                "pcap filter `{term}`: kind must be data, ack, nack, probe, \
                                 probe-reply or control"
                            ))
                        }
                    })
                }
                _ => {
                    return Err(format!(
                    "pcap filter `{term}`: unknown key `{k}` (keys: host, qp, psn, kind, time_us)"
                ))
                }
            }
        }
        Ok(f)
    }

    /// What the run must tap for this filter.
    pub fn tap(&self) -> Tap {
        self.host.map_or(Tap::All, Tap::Host)
    }

    /// True when a packet `src -> dst` sent at `now` matches.
    pub fn matches(&self, now: Time, src: u32, dst: u32, p: &StagePacket) -> bool {
        let psn = p.psn.value();
        let us = now.as_ps() / 1_000_000;
        self.host.is_none_or(|h| h == src || h == dst)
            && self.qp.is_none_or(|q| q == p.src_qpn || q == p.dest_qpn)
            && self.psn.is_none_or(|(a, b)| (a..=b).contains(&psn))
            && self.kind.is_none_or(|k| k.matches(&p.body))
            && self.time_us.is_none_or(|(a, b)| (a..=b).contains(&us))
    }
}

/// A pcap file being written for one transport's run.
pub struct Capture {
    /// The filter.
    pub filter: Filter,
    /// The transport whose packets these are (decides the route shown).
    pub transport: Transport,
    /// Most frames written; later matches are counted in `over_limit`.
    pub max_frames: u64,
    /// Frames written.
    pub written: u64,
    /// Matching packets not written because of `max_frames`.
    pub over_limit: u64,
    /// The first error (frame building or I/O); capturing stops at it.
    pub error: Option<String>,
    writer: Option<Writer<BufWriter<File>>>,
    buf: Vec<u8>,
    payload: Vec<u8>,
}

impl Capture {
    /// Creates `path` and writes the pcap header.
    ///
    /// # Errors
    /// A message naming the file when it cannot be created.
    pub fn create(path: &Path, filter: Filter, transport: Transport) -> Result<Capture, String> {
        let f =
            File::create(path).map_err(|e| format!("{}: cannot create: {e}", path.display()))?;
        let writer = Writer::new(BufWriter::new(f))
            .map_err(|e| format!("{}: cannot write: {e}", path.display()))?;
        Ok(Capture {
            filter,
            transport,
            max_frames: 1_000_000,
            written: 0,
            over_limit: 0,
            error: None,
            writer: Some(writer),
            buf: vec![0u8; 1 << 16],
            payload: Vec::new(),
        })
    }

    /// Flushes and closes the file.
    ///
    /// # Errors
    /// The first error met while capturing, or the flush error.
    pub fn finish(mut self) -> Result<u64, String> {
        if let Some(w) = self.writer.take() {
            use std::io::Write;
            w.into_inner()
                .flush()
                .map_err(|e| format!("pcap: cannot flush: {e}"))?;
        }
        match self.error {
            Some(e) => Err(e),
            None => Ok(self.written),
        }
    }

    pub(crate) fn on_tx(
        &mut self,
        now: Time,
        world: &WorldView<'_>,
        src: u32,
        dst: u32,
        p: &StagePacket,
    ) {
        if self.error.is_some() || !self.filter.matches(now, src, dst, p) {
            return;
        }
        if self.written >= self.max_frames {
            self.over_limit += 1;
            return;
        }
        let len = match self.frame(world, src, dst, p) {
            Ok(n) => n,
            Err(e) => {
                self.error = Some(format!(
                    "pcap: cannot build the frame of PSN {}: {e}",
                    p.psn.value()
                ));
                return;
            }
        };
        let ts = std::time::Duration::from_nanos(now.as_ns());
        if let Some(w) = self.writer.as_mut() {
            match w.write(ts, &self.buf[..len]) {
                Ok(()) => self.written += 1,
                Err(e) => self.error = Some(format!("pcap: {e}")),
            }
        }
    }

    /// Emits the frame of `p` into `self.buf`; returns its length.
    fn frame(
        &mut self,
        world: &WorldView<'_>,
        src: u32,
        dst: u32,
        p: &StagePacket,
    ) -> Result<usize, String> {
        let plane = p.evx.plane;
        let len = p.payload_len as usize;
        self.payload.clear();
        let pattern = p.psn.value();
        self.payload
            .extend((0..len).map(|i| (pattern as usize).wrapping_add(i) as u8));
        let inner = ip(nic_addr(src, plane), nic_addr(dst, plane), IP_PROTO_UDP, 0);
        let (encap, udp) = match p.ev_format {
            EvFormat::Srv6 => {
                let (outer_dst, srh) = self.carriers(world, src, dst, p)?;
                let nh = if srh.is_some() {
                    IP_PROTO_ROUTING
                } else {
                    IP_PROTO_IPV6
                };
                (
                    Encap::Srv6 {
                        outer: ip(nic_addr(src, plane), outer_dst, nh, 0),
                        srh,
                        inner,
                    },
                    UdpRepr {
                        src_port: 0xc000 | (p.evx.ev_index & 0x3fff),
                    },
                )
            }
            EvFormat::Udp => (
                Encap::Plain(inner),
                UdpRepr {
                    src_port: p.evx.ev_value as u16,
                },
            ),
            EvFormat::Stev => {
                let (fl, port) = stev_encode(p.evx.ev_value);
                (
                    Encap::Plain(Ipv6Repr {
                        flow_label: fl,
                        ..inner
                    }),
                    UdpRepr { src_port: port },
                )
            }
        };
        let frame = Frame {
            eth: EthernetRepr {
                dst: mac(dst, plane),
                src: mac(src, plane),
            },
            encap,
            udp,
            mrc: p.to_repr(),
            payload: &self.payload,
        };
        let need = frame.buffer_len();
        if self.buf.len() < need {
            self.buf.resize(need, 0);
        }
        frame.emit(&mut self.buf).map_err(|e| format!("{e:?}"))
    }

    /// The outer destination and SRH of an SRv6 packet.
    fn carriers(
        &self,
        world: &WorldView<'_>,
        src: u32,
        dst: u32,
        p: &StagePacket,
    ) -> Result<(Ipv6Addr, Option<SrhRepr>), String> {
        let bad = |e: mrc_abi::wire::Error| format!("uSID carrier: {e:?}");
        if self.transport != Transport::Mrc {
            return Ok((carrier(DEFAULT_BLOCK, &[]).map_err(bad)?, None));
        }
        let topo = world.fabric().topology();
        let planes = world.fabric().config().planes.max(1);
        let n = topo.path_count(src, dst).max(1);
        let path = u32::from(p.evx.ev_index) / planes % n;
        let route = topo
            .usid_route(src, dst, path)
            .map_err(|e| format!("no route {src} -> {dst}: {e:?}"))?;
        let cs = route.carriers();
        let used = |c: &[u16]| {
            c.iter()
                .copied()
                .take_while(|u| *u != 0)
                .collect::<Vec<u16>>()
        };
        let c1 = carrier(DEFAULT_BLOCK, &used(&cs[0])).map_err(bad)?;
        if !route.has_second_carrier() {
            return Ok((c1, None));
        }
        let c2 = carrier(DEFAULT_BLOCK, &used(&cs[1])).map_err(bad)?;
        let srh = SrhRepr::from_path(IP_PROTO_IPV6, &[c1, c2]).map_err(bad)?;
        Ok((c1, Some(srh)))
    }
}

fn ip(src: Ipv6Addr, dst: Ipv6Addr, next_header: u8, flow_label: u32) -> Ipv6Repr {
    Ipv6Repr {
        src,
        dst,
        next_header,
        hop_limit: 64,
        traffic_class: 0x02, // ECT(0)
        flow_label,
    }
}

/// The address of `host`'s NIC port on `plane`.
pub fn nic_addr(host: u32, plane: u8) -> Ipv6Addr {
    Ipv6Addr::new(
        0xfd00,
        0,
        0,
        u16::from(plane),
        0,
        0,
        (host >> 16) as u16,
        host as u16,
    )
}

fn mac(host: u32, plane: u8) -> EthernetAddress {
    let h = host.to_be_bytes();
    EthernetAddress([0x02, 0, plane, h[1], h[2], h[3]])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_parses_every_term() {
        let f = Filter::parse("host=3, qp=1 psn=10..20 kind=nack time_us=5..=9").unwrap();
        assert_eq!(
            f,
            Filter {
                host: Some(3),
                qp: Some(1),
                psn: Some((10, 20)),
                kind: Some(Kind::Nack),
                time_us: Some((5, 9)),
            }
        );
        assert_eq!(Filter::parse("").unwrap(), Filter::default());
        assert_eq!(Filter::parse("psn=7").unwrap().psn, Some((7, 7)));
        assert_eq!(Filter::parse("host=3").unwrap().tap(), Tap::Host(3));
        assert_eq!(Filter::parse("kind=data").unwrap().tap(), Tap::All);
    }

    #[test]
    fn filter_errors_name_the_term() {
        for (expr, want) in [
            ("host", "pcap filter `host`: expected KEY=VALUE (keys: host, qp, psn, kind, time_us)"),
            ("hots=1", "pcap filter `hots=1`: unknown key `hots` (keys: host, qp, psn, kind, time_us)"),
            ("psn=9..3", "pcap filter `psn=9..3`: empty range (start > end)"),
            ("psn=a..3", "pcap filter `psn=a..3`: `a` is not a number"),
            ("host=1..2", "pcap filter `host=1..2`: host takes one number"),
            ("host=99999999999", "pcap filter `host=99999999999`: 99999999999 is too large"),
            ("kind=ping", "pcap filter `kind=ping`: kind must be data, ack, nack, probe, probe-reply or control"),
        ] {
            assert_eq!(Filter::parse(expr).unwrap_err(), want);
        }
    }
}
