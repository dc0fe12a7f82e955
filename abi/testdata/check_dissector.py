#!/usr/bin/env python3
"""Check abi/wireshark/mrc.lua against abi/testdata/vectors.json, through tshark.

For every vector (frame N of vectors.pcap is vector N-1 of vectors.json):
  well-formed: no expert info at all (any severity, any protocol) with udp.check_checksum on;
               every mrc.* field present in `fields` equals tshark's value, and tshark shows no
               mrc.<hdr>.* field for a header the vector does not have; the payload bytes are the
               last payload_len bytes of the frame; eth/ipv6/srh/inner_ipv6/udp values equal what
               Wireshark's own dissectors show (a check of the generator itself).
  malformed:   an expert item with the vector's severity whose message contains `expert.match`,
               and the MRC headers listed in `fields` decode to the listed values.

Usage: python3 abi/testdata/check_dissector.py [--tshark PATH] [--verbose]
Exits 0 when everything matches, 1 on any mismatch (each one printed), 2 on a setup error.
"""

import argparse
import json
import os
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ABI = os.path.dirname(HERE)
LUA = os.path.join(ABI, "wireshark", "mrc.lua")
JSON_PATH = os.path.join(HERE, "vectors.json")
PCAP_PATH = os.path.join(HERE, "vectors.pcap")

# The dissector's field names: the same names as the Rust decoder's JSON.
MRC_SCHEMA = {
    "bth": ["opcode", "se", "m", "pad_count", "tver", "pkey", "fecn", "becn", "dest_qp", "ack_req", "psn"],
    "mrh": ["version", "ev_format", "evx_present", "tsx_present", "trimmed", "trimmed_last_hop",
            "retransmit", "msn"],
    "evx": ["ev_index", "plane", "ev_value"],
    "tsx": ["tx_ts_ns", "echo_ts_ns"],
    "reth": ["va", "rkey", "dma_len"],
    "immdt": ["imm"],
    "ack": ["cum_psn", "sack_base", "sack_bitmap", "ev_index", "plane", "ecn_plane_mask", "ce_count",
            "pkt_count"],
    "nack": ["reason", "psn", "cum_psn", "ev_index", "plane"],
    "probe": ["probe_id", "ev_index", "plane"],
}
# Reserved fields: must read 0 on well-formed vectors (not part of the vectors' schema).
MRC_RESERVED = ["mrc.bth.reserved4", "mrc.bth.reserved8", "mrc.mrh.reserved0", "mrc.mrh.reserved1",
                "mrc.evx.reserved", "mrc.ack.reserved0", "mrc.ack.reserved4", "mrc.nack.reserved4",
                "mrc.nack.reserved11", "mrc.nack.reserved12", "mrc.probe.reserved"]

# vectors.json lower-layer keys -> Wireshark field names.
IPV6_MAP = {"traffic_class": "ipv6.tclass", "flow_label": "ipv6.flow", "payload_len": "ipv6.plen",
            "next_header": "ipv6.nxt", "hop_limit": "ipv6.hlim", "src": "ipv6.src", "dst": "ipv6.dst"}
SRH_MAP = {"next_header": "ipv6.routing.nxt", "hdr_ext_len": "ipv6.routing.len",
           "routing_type": "ipv6.routing.type", "segments_left": "ipv6.routing.segleft",
           "last_entry": "ipv6.routing.srh.last_entry", "flags": "ipv6.routing.srh.flags",
           "tag": "ipv6.routing.srh.tag", "segments": "ipv6.routing.srh.addr"}
UDP_MAP = {"src_port": "udp.srcport", "dst_port": "udp.dstport", "length": "udp.length",
           "checksum": "udp.checksum"}
ETH_MAP = {"dst": "eth.dst", "src": "eth.src", "ethertype": "eth.type"}

SEVERITY = {"error": 0x00800000, "warning": 0x00600000, "note": 0x00400000, "chat": 0x00200000}


def mrc_field_names():
    names = ["mrc.%s.%s" % (h, f) for h, fs in MRC_SCHEMA.items() for f in fs]
    return names + MRC_RESERVED + ["mrc.payload", "mrc.payload_len"]


def lower_field_names():
    names = set()
    for m in (IPV6_MAP, SRH_MAP, UDP_MAP, ETH_MAP):
        names.update(m.values())
    return sorted(names)


def run_tshark(tshark):
    fields = (["frame.number", "_ws.expert.message", "_ws.expert.severity"] + mrc_field_names()
              + lower_field_names())
    cmd = [tshark, "-r", PCAP_PATH, "-X", "lua_script:" + LUA, "-o", "udp.check_checksum:TRUE",
           "-T", "json"]
    for f in fields:
        cmd += ["-e", f]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        print("tshark failed (%d):\n%s" % (res.returncode, res.stderr), file=sys.stderr)
        sys.exit(2)
    bad = [l for l in res.stderr.splitlines() if "Running as user" not in l and l.strip()]
    if bad:  # Lua errors are printed on stderr without failing the run
        print("tshark stderr:\n" + "\n".join(bad), file=sys.stderr)
        sys.exit(2)
    return [pkt["_source"]["layers"] for pkt in json.loads(res.stdout)]


def read_pcap(path):
    with open(path, "rb") as fh:
        data = fh.read()
    magic, = struct.unpack("<I", data[:4])
    assert magic == 0xA1B2C3D4, "expected a little-endian microsecond pcap"
    linktype, = struct.unpack("<I", data[20:24])
    assert linktype == 1, "expected linktype Ethernet"
    off, frames = 24, []
    while off < len(data):
        _, _, incl, _ = struct.unpack("<IIII", data[off:off + 16])
        frames.append(data[off + 16:off + 16 + incl])
        off += 16 + incl
    return frames


def num(s):
    """tshark value text -> int when it is a number (decimal, 0x-hex or bare hex bytes)."""
    try:
        return int(s, 0)
    except ValueError:
        pass
    try:
        return int(s.replace(":", ""), 16)
    except ValueError:
        return None


def same(expected, got):
    if isinstance(expected, bool):
        return num(got) == int(expected)
    if isinstance(expected, int):
        return num(got) == expected
    return str(expected).lower() == got.lower()


class Checker:
    def __init__(self, verbose):
        self.errors = 0
        self.checked = 0
        self.verbose = verbose

    def fail(self, vname, msg):
        self.errors += 1
        print("FAIL %s: %s" % (vname, msg))

    def eq(self, vname, what, expected, got_list, index=0):
        self.checked += 1
        if got_list is None or len(got_list) <= (index if index >= 0 else -index - 1):
            self.fail(vname, "%s missing (expected %r)" % (what, expected))
            return
        got = got_list[index]
        if not same(expected, got):
            self.fail(vname, "%s = %r, expected %r" % (what, got, expected))

    def check_mrc(self, v, layers, frame, strict):
        name, fields = v["name"], v["fields"]
        for hdr, names in MRC_SCHEMA.items():
            if hdr in fields:
                for f in names:
                    if f in fields[hdr]:
                        self.eq(name, "mrc.%s.%s" % (hdr, f), fields[hdr][f], layers.get("mrc.%s.%s" % (hdr, f)))
            elif strict:
                extra = [f for f in names if "mrc.%s.%s" % (hdr, f) in layers]
                if extra:
                    self.fail(name, "tshark decodes %s fields %s the vector does not have" % (hdr, extra))
        if "payload_len" in fields:
            self.eq(name, "mrc.payload_len", fields["payload_len"], layers.get("mrc.payload_len"))
            n = fields["payload_len"]
            want = frame[len(frame) - n:].hex() if n else None
            got = layers.get("mrc.payload", [None])[0]
            if got is not None:
                got = got.replace(":", "")
            if got != want:
                self.fail(name, "mrc.payload %r, expected %r" % (got and got[:32], want and want[:32]))
        if strict:
            for r in MRC_RESERVED:
                for val in layers.get(r, []):
                    if num(val) != 0:
                        self.fail(name, "%s = %s" % (r, val))

    def check_lower(self, v, layers):
        name, fields = v["name"], v["fields"]
        for k, wf in ETH_MAP.items():
            self.eq(name, wf, fields["eth"][k], layers.get(wf))
        for k, wf in IPV6_MAP.items():
            self.eq(name, "outer " + wf, fields["ipv6"][k], layers.get(wf), 0)
            if "inner_ipv6" in fields:
                self.eq(name, "inner " + wf, fields["inner_ipv6"][k], layers.get(wf), 1)
        if "srh" in fields:
            for k, wf in SRH_MAP.items():
                if k == "segments":
                    got = layers.get(wf, [])
                    if [g.lower() for g in got] != fields["srh"][k]:
                        self.fail(name, "SRH segments %r, expected %r" % (got, fields["srh"][k]))
                    self.checked += 1
                else:
                    self.eq(name, wf, fields["srh"][k], layers.get(wf))
        elif "ipv6.routing.type" in layers:
            self.fail(name, "Wireshark sees a routing header the vector does not have")
        for k, wf in UDP_MAP.items():
            self.eq(name, wf, fields["udp"][k], layers.get(wf), -1)

    def check_expert(self, v, layers):
        name = v["name"]
        msgs = layers.get("_ws.expert.message", [])
        sevs = [int(s) for s in layers.get("_ws.expert.severity", [])]
        self.checked += 1
        if not v["malformed"]:
            if msgs or sevs:
                self.fail(name, "unexpected expert info %r (severities %r)" % (msgs, sevs))
            return
        want = v["expert"]
        hits = [m for m, s in zip(msgs, sevs) if want["match"] in m and s == SEVERITY[want["severity"]]]
        if not hits:
            self.fail(name, "no %s expert containing %r; got %r" % (want["severity"], want["match"], msgs))
        elif self.verbose:
            print("ok   %s: %s" % (name, hits[0]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tshark", default="tshark")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()

    with open(JSON_PATH) as fh:
        vectors = json.load(fh)["vectors"]
    frames = read_pcap(PCAP_PATH)
    if [f.hex() for f in frames] != [v["hex"] for v in vectors]:
        print("vectors.pcap does not hold the frames of vectors.json (regenerate both)", file=sys.stderr)
        return 2
    packets = run_tshark(args.tshark)
    if len(packets) != len(vectors):
        print("tshark saw %d frames, vectors.json has %d" % (len(packets), len(vectors)), file=sys.stderr)
        return 2

    c = Checker(args.verbose)
    for i, (v, layers, frame) in enumerate(zip(vectors, packets, frames)):
        if layers.get("frame.number") != [str(i + 1)]:
            c.fail(v["name"], "frame number mismatch")
            continue
        before = c.errors
        c.check_expert(v, layers)
        c.check_mrc(v, layers, frame, strict=not v["malformed"])
        c.check_lower(v, layers)
        if c.verbose and c.errors == before and not v["malformed"]:
            print("ok   %s" % v["name"])

    good = sum(not v["malformed"] for v in vectors)
    print("%d vectors (%d well-formed, %d malformed), %d comparisons, %d mismatches"
          % (len(vectors), good, len(vectors) - good, c.checked, c.errors))
    return 1 if c.errors else 0


if __name__ == "__main__":
    sys.exit(main())
