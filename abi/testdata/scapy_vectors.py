#!/usr/bin/env python3
"""Independent MRC test vectors, built with scapy from abi/WIRE.md (wire version 1).

Outputs (deterministic: fixed values, no randomness, no timestamps):
  abi/testdata/vectors.json  {"vectors": [{"name", "hex", "malformed", "fields", ...}]}
  abi/testdata/vectors.pcap  the same frames in the same order (linktype Ethernet)

The MRC headers are written here with `struct` straight from WIRE.md, never from the Rust codec:
this file is the cross-check of `mrc_abi::wire` and of `abi/wireshark/mrc.lua`. Ethernet, IPv6,
SRH and UDP come from scapy, which also computes the UDP checksum over the pseudo-header of the
IPv6 header that carries the UDP header (the inner one for SRv6). Every well-formed frame is
re-parsed and its checksum recomputed independently before it is written.

`fields` schema (a subset of what a decoder reports for the frame):
  eth {dst, src, ethertype}; ipv6 (outer or only) and inner_ipv6 (SRv6 only) {traffic_class,
  flow_label, payload_len, next_header, hop_limit, src, dst} with RFC 5952 addresses; srh (only
  when present) {next_header, hdr_ext_len, routing_type, segments_left, last_entry, flags, tag,
  segments (wire order)}; udp {src_port, dst_port, length, checksum}; ev_format "udp"|"stev"|"srv6";
  bth, mrh, evx, tsx, reth, immdt, ack, nack, probe (field names as in the dissector, booleans as
  JSON true/false, mrh.ev_format as its number); payload_len.

Malformed vectors carry `"malformed": true`, an `"error"` kind, an `"expert"` object
{"severity": "error"|"warning", "match": substring} naming the expert info the dissector must
raise, and `fields` for the layers that still decode. Error kinds: truncated_bth, bad_version,
ev_format_3, unknown_opcode, reth_length_mismatch (a parseable packet that breaks the RETH rule),
truncated_reth, truncated_ackx, srh_segments_left, zero_udp_checksum, reserved_nonzero (BTH byte 4
reserved bits set; only a warning for the dissector, a decoder may accept it but then cannot
re-emit the same bytes).

Run from anywhere: python3 abi/testdata/scapy_vectors.py
"""

import ipaddress
import json
import os
import struct
import sys

from scapy.layers.inet import UDP
from scapy.layers.inet6 import (
    IPv6,
    IPv6ExtHdrSegmentRouting,
    IPv6ExtHdrSegmentRoutingTLVPad1,
    IPv6ExtHdrSegmentRoutingTLVPadN,
)
from scapy.layers.l2 import Ether
from scapy.packet import Raw
from scapy.utils import wrpcap

HERE = os.path.dirname(os.path.abspath(__file__))
MRC_PORT = 4791

ETH_DST = "02:00:00:00:00:01"
ETH_SRC = "02:00:00:00:00:02"
NIC_SRC = "fd00::1"
NIC_DST = "fd00::2"
HOP_LIMIT = 64

OPCODES = {
    "WRITE_FIRST": 0xC0,
    "WRITE_MIDDLE": 0xC1,
    "WRITE_LAST": 0xC2,
    "WRITE_LAST_IMM": 0xC3,
    "WRITE_ONLY": 0xC4,
    "WRITE_ONLY_IMM": 0xC5,
    "ACK": 0xD0,
    "NACK": 0xD1,
    "EV_PROBE": 0xD2,
    "EV_PROBE_REPLY": 0xD3,
}
WRITES = ("WRITE_FIRST", "WRITE_MIDDLE", "WRITE_LAST", "WRITE_LAST_IMM", "WRITE_ONLY", "WRITE_ONLY_IMM")
WITH_IMM = ("WRITE_LAST_IMM", "WRITE_ONLY_IMM")
NACK_REASONS = {
    1: "TRIMMED",
    2: "TRIMMED_LAST_HOP",
    3: "OUT_OF_WINDOW",
    4: "REMOTE_ACCESS",
    5: "LENGTH",
    6: "NO_RECV_BUFFER",
    7: "INVALID_QP",
    8: "TOO_MANY_WIMM",
}
EV_FORMAT_NUM = {"udp": 0, "stev": 1, "srv6": 2}


# ---------------------------------------------------------------- MRC headers (WIRE.md, literally)

def u24(v):
    assert 0 <= v < 1 << 24
    return v.to_bytes(3, "big")


def enc_bth(b, rsvd4=0, rsvd8=0):
    """BTH, 12 bytes."""
    byte1 = (b["se"] << 7) | (b["m"] << 6) | (b["pad_count"] << 4) | b["tver"]
    byte4 = (b["fecn"] << 7) | (b["becn"] << 6) | rsvd4
    byte8 = (b["ack_req"] << 7) | rsvd8
    out = (bytes([b["opcode"], byte1]) + struct.pack(">H", b["pkey"]) + bytes([byte4])
           + u24(b["dest_qp"]) + bytes([byte8]) + u24(b["psn"]))
    assert len(out) == 12
    return out


def enc_mrh(m, rsvd0=0, rsvd1=0):
    """MRH, 4 bytes."""
    byte0 = (m["version"] << 4) | (m["ev_format"] << 2) | rsvd0
    byte1 = ((m["evx_present"] << 7) | (m["tsx_present"] << 6) | (m["trimmed"] << 5)
             | (m["trimmed_last_hop"] << 4) | (m["retransmit"] << 3) | rsvd1)
    return bytes([byte0, byte1]) + struct.pack(">H", m["msn"])


def enc_evx(e):
    return struct.pack(">HBBI", e["ev_index"], e["plane"], 0, e["ev_value"])


def enc_tsx(t):
    return struct.pack(">II", t["tx_ts_ns"], t["echo_ts_ns"])


def enc_reth(r):
    return struct.pack(">QII", r["va"], r["rkey"], r["dma_len"])


def enc_immdt(i):
    return struct.pack(">I", i["imm"])


def enc_ackx(a):
    out = (b"\x00" + u24(a["cum_psn"]) + b"\x00" + u24(a["sack_base"])
           + struct.pack(">QHBBHH", a["sack_bitmap"], a["ev_index"], a["plane"],
                         a["ecn_plane_mask"], a["ce_count"], a["pkt_count"]))
    assert len(out) == 24
    return out


def enc_nackx(n):
    out = (bytes([n["reason"]]) + u24(n["psn"]) + b"\x00" + u24(n["cum_psn"])
           + struct.pack(">HBBI", n["ev_index"], n["plane"], 0, 0))
    assert len(out) == 16
    return out


def enc_prbx(p):
    return struct.pack(">IHBB", p["probe_id"], p["ev_index"], p["plane"], 0)


def enc_mrc(f, payload):
    """All MRC headers of `f` (a fields dict) in wire order, then the payload."""
    out = enc_bth(f["bth"]) + enc_mrh(f["mrh"])
    if f["mrh"]["evx_present"]:
        out += enc_evx(f["evx"])
    if f["mrh"]["tsx_present"]:
        out += enc_tsx(f["tsx"])
    for hdr, enc in (("reth", enc_reth), ("immdt", enc_immdt), ("ack", enc_ackx),
                     ("nack", enc_nackx), ("probe", enc_prbx)):
        if hdr in f:
            out += enc(f[hdr])
    return out + payload


# ---------------------------------------------------------------- encapsulation

def stev_split(ev_value):
    """STEV value -> (flow label, UDP source port)."""
    return ev_value & 0xFFFFF, 0xC000 | ((ev_value >> 20) & 0xFFF)


def usid_carrier(*usids):
    """fcbb:bb00::/32 locator block followed by 16-bit uSIDs."""
    assert len(usids) <= 6
    words = [0xFCBB, 0xBB00] + list(usids) + [0] * (6 - len(usids))
    return str(ipaddress.IPv6Address(b"".join(struct.pack(">H", w) for w in words)))


def build_frame(encap, mrc_bytes, ev_value=0, sport=None, tc=0, segments=None, segleft=None,
                tlvs=None, chksum=None):
    """Ethernet/IPv6[/SRH]/[IPv6/]UDP/MRC. `segments` is the SRH list in wire order."""
    flow = 0
    if encap == "udp":
        sport = ev_value
    elif encap == "stev":
        flow, sport = stev_split(ev_value)
    udp = UDP(sport=sport, dport=MRC_PORT) / Raw(mrc_bytes)
    if chksum is not None:
        udp[UDP].chksum = chksum
    eth = Ether(dst=ETH_DST, src=ETH_SRC, type=0x86DD)
    if encap in ("udp", "stev"):
        return eth / IPv6(tc=tc, fl=flow, nh=17, hlim=HOP_LIMIT, src=NIC_SRC, dst=NIC_DST) / udp
    inner = IPv6(tc=tc, fl=0, nh=17, hlim=HOP_LIMIT, src=NIC_SRC, dst=NIC_DST)
    if segments is None:  # srv6 without SRH: the route is the carrier in the outer destination
        outer = IPv6(tc=tc, fl=0, nh=41, hlim=HOP_LIMIT, src=NIC_SRC, dst=usid_carrier(1, 2, 3))
        return eth / outer / inner / udp
    if segleft is None:
        segleft = len(segments) - 1
    srh = IPv6ExtHdrSegmentRouting(nh=41, type=4, segleft=segleft, lastentry=len(segments) - 1,
                                   tag=0, addresses=list(segments), tlv_objects=tlvs or [])
    dst = segments[segleft] if segleft < len(segments) else segments[0]
    outer = IPv6(tc=tc, fl=0, nh=43, hlim=HOP_LIMIT, src=NIC_SRC, dst=dst)
    return eth / outer / srh / inner / udp


def ones_complement_sum(data):
    if len(data) % 2:
        data += b"\x00"
    s = sum(struct.unpack(">%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s


def udp_checksum(src, dst, udp_bytes):
    """RFC 8200 section 8.1 pseudo-header checksum, computed without scapy."""
    pseudo = (ipaddress.IPv6Address(src).packed + ipaddress.IPv6Address(dst).packed
              + struct.pack(">I3xB", len(udp_bytes), 17))
    zeroed = udp_bytes[:6] + b"\x00\x00" + udp_bytes[8:]
    c = 0xFFFF - ones_complement_sum(pseudo + zeroed)
    return c if c != 0 else 0xFFFF


def addr(a):
    return str(ipaddress.IPv6Address(a))  # RFC 5952 text


def ipv6_fields(ip):
    return {"traffic_class": ip.tc, "flow_label": ip.fl, "payload_len": ip.plen,
            "next_header": ip.nh, "hop_limit": ip.hlim, "src": addr(ip.src), "dst": addr(ip.dst)}


def outer_fields(raw_frame, check=True):
    """Re-parse the built frame with scapy and return the eth/ipv6/srh/inner_ipv6/udp fields."""
    p = Ether(raw_frame)
    f = {"eth": {"dst": p.dst, "src": p.src, "ethertype": p.type}}
    ip = p[IPv6]
    f["ipv6"] = ipv6_fields(ip)
    carrier = ip
    if IPv6ExtHdrSegmentRouting in p:
        s = p[IPv6ExtHdrSegmentRouting]
        f["srh"] = {"next_header": s.nh, "hdr_ext_len": s.len, "routing_type": s.type,
                    "segments_left": s.segleft, "last_entry": s.lastentry,
                    "flags": raw_frame[14 + 40 + 5], "tag": s.tag,
                    "segments": [addr(a) for a in s.addresses]}
    if isinstance(ip.payload, IPv6) or (IPv6ExtHdrSegmentRouting in p
                                        and isinstance(p[IPv6ExtHdrSegmentRouting].payload, IPv6)):
        carrier = p[UDP].underlayer
        assert isinstance(carrier, IPv6)
        f["inner_ipv6"] = ipv6_fields(carrier)
    u = p[UDP]
    f["udp"] = {"src_port": u.sport, "dst_port": u.dport, "length": u.len, "checksum": u.chksum}
    if check:
        udp_bytes = bytes(u)
        assert u.len == len(udp_bytes), "UDP length"
        want = udp_checksum(carrier.src, carrier.dst, udp_bytes)
        assert want == u.chksum, "scapy UDP checksum 0x%04x != independent 0x%04x" % (u.chksum, want)
    return f


# ---------------------------------------------------------------- packet field sets

def payload_bytes(n, seed):
    return bytes((seed * 31 + i * 7) & 0xFF for i in range(n))


def mrc_fields(opcode, k, ev_format, ev_value, evx, tsx, nack_reason=None, payload_len=0,
               trimmed=False, trimmed_last_hop=False, retransmit=False, fecn=False, becn=False,
               ack_req=None, psn=None):
    """The MRC part of a vector's `fields` (all values derived from the integer k)."""
    is_write = opcode in WRITES
    f = {
        "bth": {"opcode": OPCODES[opcode], "se": opcode in WITH_IMM, "m": False, "pad_count": 0,
                "tver": 0, "pkey": 0xFFFF, "fecn": fecn, "becn": becn,
                "dest_qp": 0x000012 + 0x010101 * (k % 5),
                "ack_req": (opcode in ("WRITE_LAST", "WRITE_LAST_IMM", "WRITE_ONLY", "WRITE_ONLY_IMM",
                                       "EV_PROBE") or k % 3 == 0) if ack_req is None else ack_req,
                "psn": (100 + 1013 * k) & 0xFFFFFF if psn is None else psn},
        "mrh": {"version": 1, "ev_format": EV_FORMAT_NUM[ev_format], "evx_present": evx,
                "tsx_present": tsx, "trimmed": trimmed, "trimmed_last_hop": trimmed_last_hop,
                "retransmit": retransmit, "msn": (7 + 257 * k) & 0xFFFF},
    }
    reply = opcode in ("ACK", "NACK", "EV_PROBE_REPLY")
    if evx:
        f["evx"] = {"ev_index": (5 + 11 * k) % 256, "plane": k % 8, "ev_value": ev_value}
    if tsx:
        f["tsx"] = {"tx_ts_ns": (1_000_000 + 123_457 * k) & 0xFFFFFFFF,
                    "echo_ts_ns": (999_000 + 65_537 * k) & 0xFFFFFFFF if reply else 0}
    if is_write:
        f["reth"] = {"va": 0x00007F0000000000 + 0x1000 * k + 0x40, "rkey": 0x1000 + 17 * k,
                     "dma_len": payload_len}
    if opcode in WITH_IMM:
        f["immdt"] = {"imm": 0xC0DE0000 + k}
    if opcode == "ACK":
        cum = (2000 + 97 * k) & 0xFFFFFF
        f["ack"] = {"cum_psn": cum, "sack_base": (cum + 1) & 0xFFFFFF,
                    "sack_bitmap": 0x8000_0000_0000_0005 ^ (k << 8), "ev_index": (3 + 7 * k) % 256,
                    "plane": (k + 1) % 8, "ecn_plane_mask": 0x05 if becn else 0,
                    "ce_count": 2 if becn else 0, "pkt_count": 4 + k % 5}
    if opcode == "NACK":
        psn_n = (3000 + 89 * k) & 0xFFFFFF
        f["nack"] = {"reason": nack_reason, "psn": psn_n, "cum_psn": (psn_n - 3) & 0xFFFFFF,
                     "ev_index": (9 + 13 * k) % 256, "plane": (k + 2) % 8}
    if opcode in ("EV_PROBE", "EV_PROBE_REPLY"):
        f["probe"] = {"probe_id": 0x50000000 + 3 * k, "ev_index": (1 + 19 * k) % 256, "plane": k % 4}
    f["payload_len"] = 0 if trimmed else payload_len
    return f


def as_wire_ints(fields):
    """Copy of the MRC fields with booleans as 0/1, for encoding."""
    out = {}
    for hdr, v in fields.items():
        out[hdr] = {kk: int(vv) for kk, vv in v.items()} if isinstance(v, dict) else v
    return out


def ev_for(encap, k):
    """EV value for vector k: UDP port, STEV value or SRv6 route index."""
    if encap == "udp":
        return 0x9000 + 0x0101 * (k % 64)
    if encap == "stev":
        return (0x12345678 + 0x0100F00D * k) & 0xFFFFFFFF
    return k % 16


SRH_SEGMENTS_2 = [usid_carrier(0x0607), usid_carrier(0x0102, 0x0203)]
SRH_SEGMENTS_3 = [usid_carrier(0x0909), usid_carrier(0x0405, 0x0506), usid_carrier(0x0102, 0x0203)]


def make_vector(name, encap, opcode, k, *, srh=None, segleft=None, tlvs=None, nack_reason=None,
                payload_len=None, trimmed=False, trimmed_last_hop=False, retransmit=False,
                fecn=False, becn=False, tc=None, evx=None, tsx=None, psn=None):
    ev_format = "srv6" if encap.startswith("srv6") else encap
    ev_value = ev_for(ev_format, k)
    if evx is None:
        evx = k % 4 != 3
    if tsx is None:
        tsx = k % 2 == 0 or opcode in ("ACK", "NACK", "EV_PROBE_REPLY")
    if payload_len is None:
        payload_len = {"WRITE_FIRST": 1024, "WRITE_MIDDLE": 512, "WRITE_LAST": 300,
                       "WRITE_LAST_IMM": 77, "WRITE_ONLY": 64, "WRITE_ONLY_IMM": 0}.get(opcode, 0)
    mf = mrc_fields(opcode, k, ev_format, ev_value, evx, tsx, nack_reason, payload_len, trimmed,
                    trimmed_last_hop, retransmit, fecn, becn, psn=psn)
    sent_payload = b"" if trimmed else payload_bytes(payload_len, k)
    mrc = enc_mrc(as_wire_ints(mf), sent_payload)
    if tc is None:
        tc = (26 << 2) | 2 if opcode in WRITES else (46 << 2)
    sport = 0xC000 + (ev_value & 0xFFF) if ev_format == "srv6" else None
    frame = build_frame(ev_format, mrc, ev_value=ev_value, sport=sport, tc=tc, segments=srh,
                        segleft=segleft, tlvs=tlvs)
    raw_frame = bytes(frame)
    fields = outer_fields(raw_frame)
    fields["ev_format"] = ev_format
    fields.update(mf)
    assert raw_frame.endswith(mrc)
    return {"name": name, "hex": raw_frame.hex(), "malformed": False, "fields": fields}


def well_formed():
    vectors = []
    encaps = [("udp", None), ("stev", None), ("srv6", None), ("srv6_srh", "srh")]
    ops = [(op, None) for op in WRITES] + [("ACK", None)] + \
          [("NACK", r) for r in sorted(NACK_REASONS)] + [("EV_PROBE", None), ("EV_PROBE_REPLY", None)]
    k = 0
    for encap, _ in encaps:
        for op, reason in ops:
            k += 1
            name = "%s_%s" % (encap, op.lower())
            if reason is not None:
                name += "_" + NACK_REASONS[reason].lower()
            kw = {"nack_reason": reason}
            if encap == "srv6_srh":
                kw["srh"] = SRH_SEGMENTS_3 if k % 2 else SRH_SEGMENTS_2
                if op == "WRITE_ONLY_IMM":
                    # PadN and Pad1 TLVs after the segment list (8 bytes: PadN len 5, Pad1)
                    kw["tlvs"] = [IPv6ExtHdrSegmentRoutingTLVPadN(padding=b"\x00" * 5),
                                  IPv6ExtHdrSegmentRoutingTLVPad1()]
                    kw["srh"] = SRH_SEGMENTS_3
                    name += "_tlv"
                if op == "WRITE_MIDDLE":
                    kw["srh"] = SRH_SEGMENTS_3
                    kw["segleft"] = 1  # mid-route: the destination is List[1]
                    name += "_segleft1"
            if op == "WRITE_LAST" and encap == "udp":
                kw.update(fecn=True, tc=(26 << 2) | 3)  # CE-marked on the way
            if op == "ACK" and encap == "udp":
                kw["becn"] = True
            if op == "WRITE_FIRST" and encap == "stev":
                kw["retransmit"] = True
                name += "_retransmit"
            if op == "WRITE_MIDDLE" and encap == "stev":
                kw["psn"] = 0xFFFFFF  # last PSN before the wrap
            vectors.append(make_vector(name, encap, op, k, **kw))
    # trimmed packets: every header kept (RETH/ImmDt included), payload gone
    k += 1
    vectors.append(make_vector("udp_write_middle_trimmed", "udp", "WRITE_MIDDLE", k, trimmed=True))
    k += 1
    vectors.append(make_vector("stev_write_only_imm_trimmed_last_hop", "stev", "WRITE_ONLY_IMM", k,
                               payload_len=2048, trimmed=True, trimmed_last_hop=True))
    k += 1
    vectors.append(make_vector("srv6_srh_write_last_trimmed_retransmit", "srv6_srh", "WRITE_LAST", k,
                               srh=SRH_SEGMENTS_2, trimmed=True, retransmit=True))
    k += 1
    vectors.append(make_vector("srv6_write_first_trimmed_no_ext", "srv6", "WRITE_FIRST", k,
                               trimmed=True, evx=False, tsx=False))
    # both extensions off / both on, to pin the fixed EVX-then-TSX order
    k += 1
    vectors.append(make_vector("udp_write_only_no_ext", "udp", "WRITE_ONLY", k, evx=False, tsx=False))
    k += 1
    vectors.append(make_vector("srv6_write_first_both_ext_full", "srv6", "WRITE_FIRST", k,
                               evx=True, tsx=True, payload_len=4096))
    return vectors, k


# ---------------------------------------------------------------- malformed vectors

def malformed_vector(name, error, severity, match, frame, fields_extra=None):
    raw_frame = bytes(frame)
    fields = outer_fields(raw_frame, check=(error != "zero_udp_checksum"))
    if fields_extra:
        fields.update(fields_extra)
    return {"name": name, "hex": raw_frame.hex(), "malformed": True, "error": error,
            "expert": {"severity": severity, "match": match}, "fields": fields}


def malformed(k0):
    out = []
    k = k0

    def base(opcode, ev_format="udp", payload_len=64, **kw):
        nonlocal k
        k += 1
        ev = ev_for(ev_format, k)
        mf = mrc_fields(opcode, k, ev_format, ev, True, True, payload_len=payload_len, **kw)
        return mf, ev

    # 1. BTH cut after 8 of its 12 bytes
    mf, ev = base("WRITE_ONLY")
    mrc = enc_bth(as_wire_ints(mf)["bth"])[:8]
    out.append(malformed_vector("malformed_truncated_bth", "truncated_bth", "error",
                                "Truncated BTH: 4 bytes missing",
                                build_frame("udp", mrc, ev_value=ev), {"ev_format": "udp"}))
    # 2. MRH version 2
    mf, ev = base("WRITE_ONLY")
    mf["mrh"]["version"] = 2
    mrc = enc_mrc(as_wire_ints(mf), payload_bytes(64, k))
    out.append(malformed_vector("malformed_bad_mrh_version", "bad_version", "error",
                                "MRC version 2", build_frame("udp", mrc, ev_value=ev),
                                {"bth": mf["bth"]}))
    # 3. EV format 3
    mf, ev = base("ACK")
    mf["mrh"]["ev_format"] = 3
    mrc = enc_mrc(as_wire_ints(mf), b"")
    out.append(malformed_vector("malformed_ev_format_3", "ev_format_3", "error", "EV format 3",
                                build_frame("udp", mrc, ev_value=ev), {"bth": mf["bth"]}))
    # 4. opcode 0xC6 (unused MRC opcode) with an otherwise valid header stack
    mf, ev = base("WRITE_ONLY")
    mf["bth"]["opcode"] = 0xC6
    mrc = enc_mrc(as_wire_ints(mf), payload_bytes(64, k))
    out.append(malformed_vector("malformed_unknown_opcode", "unknown_opcode", "error",
                                "Unknown opcode 0xc6", build_frame("udp", mrc, ev_value=ev)))
    # 5. RETH DMA length 100, payload 64, not trimmed
    mf, ev = base("WRITE_ONLY", "stev")
    mf["reth"]["dma_len"] = 100
    mrc = enc_mrc(as_wire_ints(mf), payload_bytes(64, k))
    out.append(malformed_vector("malformed_reth_length_mismatch", "reth_length_mismatch", "error",
                                "RETH DMA length 100 != payload length 64",
                                build_frame("stev", mrc, ev_value=ev), {"bth": mf["bth"],
                                                                        "reth": mf["reth"]}))
    # 6. RETH cut after 10 of its 16 bytes
    mf, ev = base("WRITE_FIRST")
    mrc = enc_mrc(as_wire_ints(mf), b"")[:12 + 4 + 8 + 8 + 10]
    out.append(malformed_vector("malformed_truncated_reth", "truncated_reth", "error",
                                "Truncated RETH: 6 bytes missing",
                                build_frame("udp", mrc, ev_value=ev), {"bth": mf["bth"]}))
    # 7. ACKX cut after 20 of its 24 bytes
    mf, ev = base("ACK", payload_len=0)
    mrc = enc_mrc(as_wire_ints(mf), b"")[:-4]
    out.append(malformed_vector("malformed_truncated_ackx", "truncated_ackx", "error",
                                "Truncated ACKX: 4 bytes missing",
                                build_frame("udp", mrc, ev_value=ev), {"bth": mf["bth"]}))
    # 8. SRH with segments_left (3) > last_entry (1); outer dst = List[0]
    mf, ev = base("WRITE_ONLY", "srv6")
    mrc = enc_mrc(as_wire_ints(mf), payload_bytes(64, k))
    out.append(malformed_vector("malformed_srh_segleft_gt_last_entry", "srh_segments_left", "error",
                                "SRH segments left 3 > last entry 1",
                                build_frame("srv6", mrc, ev_value=ev, sport=0xC000 + ev,
                                            segments=SRH_SEGMENTS_2, segleft=3),
                                {"bth": mf["bth"]}))
    # 9. UDP checksum 0 (mandatory for MRC)
    mf, ev = base("WRITE_ONLY")
    mrc = enc_mrc(as_wire_ints(mf), payload_bytes(64, k))
    out.append(malformed_vector("malformed_zero_udp_checksum", "zero_udp_checksum", "error",
                                "UDP checksum is zero",
                                build_frame("udp", mrc, ev_value=ev, chksum=0), {"bth": mf["bth"]}))
    # 10. non-zero reserved bits in BTH byte 4 (a warning, not an error, for the dissector)
    mf, ev = base("EV_PROBE", payload_len=0)
    w = as_wire_ints(mf)
    mrc = enc_bth(w["bth"], rsvd4=0x01) + enc_mrc(w, b"")[12:]
    out.append(malformed_vector("malformed_bth_reserved_bits", "reserved_nonzero", "warning",
                                "BTH reserved bits", build_frame("udp", mrc, ev_value=ev),
                                {"bth": mf["bth"]}))
    return out


def main():
    vectors, k = well_formed()
    vectors += malformed(k)
    names = [v["name"] for v in vectors]
    assert len(names) == len(set(names)), "duplicate vector names"
    doc = {
        "comment": "Generated by abi/testdata/scapy_vectors.py from abi/WIRE.md; do not edit.",
        "vectors": vectors,
    }
    with open(os.path.join(HERE, "vectors.json"), "w") as fh:
        json.dump(doc, fh, indent=1, sort_keys=False)
        fh.write("\n")
    frames = [Ether(bytes.fromhex(v["hex"])) for v in vectors]
    for i, fr in enumerate(frames):
        fr.time = 1_700_000_000 + i  # fixed, so the pcap is byte-identical on every run
    wrpcap(os.path.join(HERE, "vectors.pcap"), frames, linktype=1)
    print("wrote %d vectors (%d malformed)" % (len(vectors), sum(v["malformed"] for v in vectors)),
          file=sys.stderr)


if __name__ == "__main__":
    main()
