#!/usr/bin/env bash
# Yosys synth_xilinx of every RTL block; prints a markdown table of LUT / FF / BRAM / LUTRAM and
# the Yosys wall time of each block.
# Usage: fpga-rtl/scripts/synth.sh [block...]   (default: all four)
# `just bench` runs it and keeps the table in BENCHMARKS.md.
# Each block's log is in $SYNTH_OUT (default /tmp/mrc-synth); a block that fails or runs longer
# than $SYNTH_TIMEOUT seconds (default 1800) stops the script with an error and its log tail.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
blocks=("$@")
[ ${#blocks[@]} -eq 0 ] && blocks=(csr_event_queue rx_psn_tracker hdr_builder ev_sprayer)
out="${SYNTH_OUT:-/tmp/mrc-synth}"
limit="${SYNTH_TIMEOUT:-1800}"
mkdir -p "$out"
echo "| block | LUT | FF | BRAM (RAMB18/36) | LUTRAM | Yosys wall time |"
echo "|---|---:|---:|---:|---:|---:|"
for b in "${blocks[@]}"; do
  log="$out/$b.log"
  start=$(date +%s)
  if ! timeout "$limit" yosys -q -l "$log" -p "read_verilog -sv -I$here/rtl $here/generated/mrc_abi_pkg.sv $here/rtl/$b.sv; synth_xilinx -top $b -flatten; stat" >/dev/null 2>&1; then
    echo "synth.sh: yosys failed or timed out (${limit} s) on $b; log $log:" >&2
    tail -n 20 "$log" >&2
    exit 1
  fi
  secs=$(( $(date +%s) - start ))
  # The last `stat` in the log is the final netlist: "     LUT6      1234" lines.
  cnt() { { grep -E "^\s+$1\s+[0-9]+\s*$" "$log" || true; } | awk '{v=$2} END {print v+0}'; }
  lut=0; for c in LUT1 LUT2 LUT3 LUT4 LUT5 LUT6; do lut=$((lut + $(cnt "$c"))); done
  ff=0; for c in FDRE FDSE FDCE FDPE; do ff=$((ff + $(cnt "$c"))); done
  bram=$(( $(cnt RAMB18E1) + $(cnt RAMB36E1) ))
  lutram=""; for c in RAM32M RAM64M RAM32X1D RAM64X1D RAM128X1D RAM256X1S RAM128X1S RAM64X1S RAM32X1S; do
    n=$(cnt "$c"); [ "$n" -gt 0 ] && lutram="${lutram:+$lutram + }$n $c"; done
  echo "| $b | $lut | $ff | $bram | ${lutram:-0} | ${secs} s |"
done
