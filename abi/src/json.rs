//! JSON rendering of decoded frames (std only): one object per packet, every field, IPv6
//! addresses as RFC 5952 text, the SRH segment list in wire order. The field names are those of
//! `abi/WIRE.md` and of the Wireshark dissector (`mrc.<header>.<field>`).

use crate::wire::ethernet::{self, EthernetPacket};
use crate::wire::ipv6::{self, Ipv6Packet};
use crate::wire::mrc::{Body, MrcPacket, Segment};
use crate::wire::srh::SrhPacket;
use crate::wire::{BthPacket, Encap, Error, Frame, Header, Ipv6Repr, UdpPacket};
use serde_json::{json, Map, Value};
use std::string::{String, ToString};
use std::vec::Vec;

/// Decode one frame into a JSON object, or the error that makes it malformed.
pub fn decode(buf: &[u8]) -> Result<Value, Error> {
    let f = Frame::parse(buf)?;
    // Frame::parse validated every length below, so these views are in bounds.
    let l3 = &buf[ethernet::HEADER_LEN..];
    let outer = Ipv6Packet::new_checked(l3, Header::Ipv6)?;
    let mut o = Map::new();
    let eth = EthernetPacket::new_checked(buf)?;
    o.insert(
        "eth".into(),
        json!({"dst": f.eth.dst.to_string(), "src": f.eth.src.to_string(), "ethertype": eth.ethertype()}),
    );
    o.insert("ipv6".into(), ip_json(f.encap.outer(), outer.payload_len()));
    let mut udp_at = ethernet::HEADER_LEN + ipv6::HEADER_LEN;
    if let Encap::Srv6 { srh, inner, .. } = &f.encap {
        if let Some(s) = srh {
            let p = SrhPacket::new_checked(&buf[udp_at..])?;
            let segs: Vec<String> = s.segments.iter().map(|a| a.to_string()).collect();
            o.insert(
                "srh".into(),
                json!({
                    "next_header": s.next_header, "hdr_ext_len": p.hdr_ext_len(),
                    "routing_type": p.routing_type(), "segments_left": s.segments_left,
                    "last_entry": p.last_entry(), "flags": s.flags, "tag": s.tag, "segments": segs,
                }),
            );
            udp_at += p.header_len();
        }
        let ip = Ipv6Packet::new_checked(&buf[udp_at..], Header::InnerIpv6)?;
        o.insert("inner_ipv6".into(), ip_json(inner, ip.payload_len()));
        udp_at += ipv6::HEADER_LEN;
    }
    let udp = UdpPacket::new_checked(&buf[udp_at..])?;
    o.insert(
        "udp".into(),
        json!({"src_port": udp.src_port(), "dst_port": udp.dst_port(), "length": udp.len(), "checksum": udp.checksum()}),
    );
    let m = &f.mrc;
    o.insert("ev_format".into(), json!(m.mrh.ev_format.name()));
    let bth = BthPacket::new_checked(udp.payload())?;
    o.insert(
        "bth".into(),
        json!({
            "opcode": bth.opcode(), "se": bth.se(), "m": bth.m(), "pad_count": bth.pad_count(),
            "tver": bth.tver(), "pkey": bth.pkey(), "fecn": bth.fecn(), "becn": bth.becn(),
            "dest_qp": bth.dest_qp(), "ack_req": bth.ack_req(), "psn": bth.psn().value(),
        }),
    );
    let mp = MrcPacket::new_checked(udp.payload())?;
    o.insert(
        "mrh".into(),
        json!({
            "version": mp.mrh()[0] >> 4, "ev_format": m.mrh.ev_format as u8,
            "evx_present": m.evx.is_some(), "tsx_present": m.tsx.is_some(),
            "trimmed": m.mrh.trimmed, "trimmed_last_hop": m.mrh.trimmed_last_hop,
            "retransmit": m.mrh.retransmit, "msn": m.mrh.msn,
        }),
    );
    if let Some(e) = m.evx {
        o.insert(
            "evx".into(),
            json!({"ev_index": e.ev_index, "plane": e.plane, "ev_value": e.ev_value}),
        );
    }
    if let Some(t) = m.tsx {
        o.insert(
            "tsx".into(),
            json!({"tx_ts_ns": t.tx_ts_ns, "echo_ts_ns": t.echo_ts_ns}),
        );
    }
    body_json(&m.body, &mut o);
    o.insert("payload_len".into(), json!(f.payload.len()));
    Ok(Value::Object(o))
}

fn ip_json(ip: &Ipv6Repr, payload_len: u16) -> Value {
    json!({
        "traffic_class": ip.traffic_class, "flow_label": ip.flow_label, "payload_len": payload_len,
        "next_header": ip.next_header, "hop_limit": ip.hop_limit,
        "src": ip.src.to_string(), "dst": ip.dst.to_string(),
    })
}

fn body_json(body: &Body, o: &mut Map<String, Value>) {
    match body {
        Body::Write { segment, reth } => {
            o.insert(
                "reth".into(),
                json!({"va": reth.va, "rkey": reth.rkey, "dma_len": reth.dma_len}),
            );
            if let Segment::Last { imm: Some(i) } | Segment::Only { imm: Some(i) } = segment {
                o.insert("immdt".into(), json!({"imm": i}));
            }
        }
        Body::Ack(a) => {
            o.insert(
                "ack".into(),
                json!({
                    "cum_psn": a.cum_psn.value(), "sack_base": a.sack_base.value(),
                    "sack_bitmap": a.sack_bitmap, "ev_index": a.ev_index, "plane": a.plane,
                    "ecn_plane_mask": a.ecn_plane_mask, "ce_count": a.ce_count, "pkt_count": a.pkt_count,
                }),
            );
        }
        Body::Nack(n) => {
            o.insert(
                "nack".into(),
                json!({
                    "reason": n.reason as u8, "psn": n.psn.value(), "cum_psn": n.cum_psn.value(),
                    "ev_index": n.ev_index, "plane": n.plane,
                }),
            );
        }
        Body::Probe(p) | Body::ProbeReply(p) => {
            o.insert(
                "probe".into(),
                json!({"probe_id": p.probe_id, "ev_index": p.ev_index, "plane": p.plane}),
            );
        }
    }
}

/// The decoder's output line for packet `index`: the decoded object with `index` first, or
/// `{"index": i, "error": "..."}` naming what is wrong.
pub fn decode_line(index: usize, buf: &[u8]) -> Value {
    let mut o = Map::new();
    o.insert("index".into(), json!(index));
    match decode(buf) {
        Ok(Value::Object(m)) => o.extend(m),
        Ok(other) => {
            o.insert("value".into(), other);
        }
        Err(e) => {
            o.insert("error".into(), json!(e.to_string()));
        }
    }
    Value::Object(o)
}
