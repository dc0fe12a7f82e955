#!/bin/sh
# Regenerate the scapy vectors, check they are byte-identical to the committed ones (the
# generator is deterministic), then check the Lua dissector against them through tshark.
# Usage: abi/testdata/check_dissector.sh   (from anywhere; needs python3 + scapy and tshark)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"
python3 abi/testdata/scapy_vectors.py
if command -v git >/dev/null 2>&1 && git rev-parse --git-dir >/dev/null 2>&1; then
    if ! git diff --quiet -- abi/testdata/vectors.json abi/testdata/vectors.pcap; then
        echo "vectors.json/vectors.pcap differ from the committed ones (see git diff)" >&2
        exit 1
    fi
fi
python3 abi/testdata/check_dissector.py "$@"
# The summary table: well-formed frames contribute nothing here.
tshark -r abi/testdata/vectors.pcap -X lua_script:abi/wireshark/mrc.lua \
    -o udp.check_checksum:TRUE -q -z expert 2>/dev/null
