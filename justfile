# mrc workflows. `just` lists them. Install just with `pip install rust-just`.

set shell := ["bash", "-euo", "pipefail", "-c"]

riscv := "riscv32imac-unknown-none-elf"
image := "firmware/image/target/riscv32imac-unknown-none-elf/release/mrc-nic"
qemu_image := "firmware/image/target/qemu/riscv32imac-unknown-none-elf/release/mrc-nic"
# The workspace's target directory (where `cargo build` puts the host binaries).
cargo_target := env_var_or_default("CARGO_TARGET_DIR", "target")
export DEFMT_LOG := "info"

# List the recipes.
default:
    @just --list

# The default simulation (the project's main job).
sim *ARGS:
    cargo run --release -- {{ARGS}}

# The test command of the README.
test:
    cargo test --workspace

# What CI runs: install the tools, then the tests, the dissector check and a fuzz smoke run.
ci:
    bash .ci/run

# Regenerate fpga-rtl/generated/mrc_abi_pkg.sv and abi/REGISTERS.md from mrc-abi.
regs:
    cargo run -q -p mrc-abi --features std --example regs

# Write one sample frame of every kind in every EV format to a pcap file.
samples OUT="target/mrc-samples.pcap":
    cargo run -q -p mrc-abi --features std --example pcap -- samples {{OUT}}

# Decode a pcap file to one JSON object per packet.
decode IN:
    cargo run -q -p mrc-abi --features std --example pcap -- decode {{IN}}

# Open the samples in tshark with the MRC dissector.
tshark PCAP="target/mrc-samples.pcap": (samples PCAP)
    tshark -r {{PCAP}} -X lua_script:abi/wireshark/mrc.lua -o udp.check_checksum:TRUE -V

# Regenerate the scapy vectors, check they match the committed ones, check the dissector on them.
wireshark-check:
    sh abi/testdata/check_dissector.sh

# Fuzz one target for SECS seconds (cargo-fuzz on nightly).
fuzz TARGET="decode" SECS="60":
    mkdir -p target/fuzz-corpus/{{TARGET}}
    cd fuzz && cargo +nightly fuzz run {{TARGET}} ../target/fuzz-corpus/{{TARGET}} corpus/{{TARGET}} -- -max_total_time={{SECS}}

# Build the NIC image (release, LTO; the artifact is firmware/image/target/.../mrc-nic).
# The image workspace keeps its own target dirs (target/ for the NIC, target/qemu/ for the
# self-test build) whatever CARGO_TARGET_DIR says, so the two builds never overwrite each other.
firmware:
    cargo build -p mrc-firmware --release --target {{riscv}}
    cd firmware/image && CARGO_TARGET_DIR=target cargo build --release

# Host tests of the image's board support and memory-map generator.
fw-test:
    cd firmware/image && CARGO_TARGET_DIR=target cargo test --target x86_64-unknown-linux-gnu -p mrc-nic-board -p mrc-memmap -p mrc-nicloop

# Regenerate the linker scripts and probe-rs chip description (with the flash algorithm built from
# firmware/flash-algo) from firmware/memory-map.toml.
fw-gen:
    cd firmware/image && CARGO_TARGET_DIR=target UPDATE_GENERATED=1 cargo test --target x86_64-unknown-linux-gnu -p mrc-memmap --test generated

# Build the QEMU self-test image (two NICs' engines over lossy planes, a plane failure, every
# byte checked) and run it under QEMU, decoding defmt with the in-repo decoder. Fails when QEMU
# exits non-zero (a failed check) or the stream does not decode.
qemu:
    cd firmware/image && CARGO_TARGET_DIR=target/qemu cargo build --release --features qemu
    mkdir -p target
    firmware/image/qemu-run {{qemu_image}} > target/mrc-nic-qemu.defmt
    cargo run -q -p mrc-defmt-dec -- {{qemu_image}} target/mrc-nic-qemu.defmt

# Firmware cost on the emulated core: the self-test's one-way stream (50,000 data packets, 256
# EVs, 1 % loss) with the image's main loop as each NIC's firmware and the datapath models
# standing in for the hardware; guest instructions (minstret under -icount shift=0) of the
# main loop + engine alone, per delivered packet (budget 120) and per event, as one JSON line
# (also target/fw-cost.json). Fails over budget or when the stream does not deliver.
# The simulator's firmware cores charge these per-event figures from hw-sim/src/nic/fw_cost.rs;
# hw-sim/tests/fw_cost_table.rs runs this same measurement and fails when the two drift apart.
fw-cost:
    cd firmware/image && CARGO_TARGET_DIR=target/qemu cargo build --release --features qemu
    mkdir -p target
    firmware/image/qemu-run {{qemu_image}} fw-cost > target/mrc-nic-fw-cost.defmt 2> target/fw-cost.json || status=$?; cargo run -q -p mrc-defmt-dec -- {{qemu_image}} target/mrc-nic-fw-cost.defmt; cat target/fw-cost.json; exit ${status:-0}

# Speed of the `elf` firmware level (the NIC ELF on the emulated core, hw-sim/elfcore): guest
# instructions per second against the native main loop on the same two-NIC stream, medians.
elf-speed:
    cd hw-sim/elfcore && CARGO_TARGET_DIR=../../target cargo run --release -q --example elf_speed

# Tests of the `elf` firmware level (hw-sim/elfcore, its own workspace: it builds the Unicorn
# engine, which needs cmake and libclang): the ELF against the native loop, resets, the flash
# algorithm and the boot ROM, firmware updates through the admin rings; then the hil scenario in
# the simulator and `mrcctl fw update` against the elf level (`--sim elf`).
elf-test:
    cd hw-sim/elfcore && CARGO_TARGET_DIR=../../target cargo test
    just elf-hil-test
    cargo test -p mrcctl --features elf --test fw_elf

# The elf level inside the simulator (mrc-sim's `elf` feature): the `hil` scenario run with the
# image's main loop compiled in and with the ELF on emulated cores must deliver the same bytes
# and completions, and a bug planted in the ELF's main loop must be caught.
elf-hil-test:
    cargo test --release -p mrc-sim --features elf --test hil_elf -- --nocapture

# Hardware-in-the-loop: the `hil` scenario (8 hosts, 4 planes, all-to-all, a link failure) at
# every firmware x datapath level (mrc_sim::hil::LEVELS; the elf level builds
# the Unicorn engine: cmake, libclang), a table, and target/hil.json. Fails if two levels
# deliver different bytes or completions.
hil:
    cargo run --release -q -p mrc-sim --features elf,rtl --example hil -- target/hil.json

# The two host models on the default scenario (64 hosts, all-to-all, a link failure):
# applications on the driver against the NIC model's flow table, every byte checked, completion
# and longest stall within the stated tolerance (hw-sim/tests/driver_hosts.rs).
host-diff:
    cargo test --release -p mrc-sim --test driver_hosts -- --include-ignored

# The probe-rs flash algorithm for the NIC's QSPI flash (listed in mrc-nic.chip.yaml; `just
# fw-gen` rebuilds it and rewrites the chip description).
flash-algo:
    cd firmware/flash-algo && cargo build --release

# Write the NIC image into flash slot A on hardware (a probe on the NIC core's JTAG): the ELF
# flattened and signed into a slot image (mrc-fw-pack, TEST-ONLY key unless you pass your own
# `--seed-file` by hand), then downloaded by probe-rs through the chip description's flash
# algorithm at the slot's address (FLASH_SLOT_A in firmware/memory-map.toml).
flash VERSION="1": firmware
    mkdir -p target
    cargo run -q -p mrc-fw-update --features std --bin mrc-fw-pack -- {{image}} target/mrc-nic-slot-a.bin --version {{VERSION}}
    probe-rs download --chip-description-path firmware/image/mrc-nic.chip.yaml --chip MRC-NIC --binary-format bin --base-address 0x60000000 target/mrc-nic-slot-a.bin

# Section sizes of the NIC image (budget: .text <= 128 KiB) and the self-test's guest
# instructions per delivered data packet (minstret under -icount shift=0).
fw-size: firmware
    size -A {{image}} | grep -E '^\.(text|rodata|data|bss|noinit) '
    text=$(size -A {{image}} | awk '$1 == ".text" {print $2}'); echo ".text $text of 131072 bytes budget"; test "$text" -le 131072
    just qemu | grep -E 'instr per delivered data packet|instr/iteration|instr per command|admin path stack|self-test passed'
    size -A {{qemu_image}} | awk '$1 == ".text" {print "QEMU self-test build (engine + test kit + verifier) .text", $2}'

# Engine cost: 1,000,000 data packets over 256 EVs with 1 % loss, instructions counted by callgrind
# (exact and deterministic), printed per delivered packet against the budget of 300; then split
# into the cost of a message and of a packet by a second run with 32 packets per message.
engine-cost:
    cargo build -q --release -p mrc-firmware --features testkit --example engine_cost
    mkdir -p target
    valgrind --tool=callgrind --callgrind-out-file=target/engine_cost.callgrind {{cargo_target}}/release/examples/engine_cost > target/engine_cost.json
    cat target/engine_cost.json
    callgrind_annotate target/engine_cost.callgrind > target/engine_cost.annotate.txt
    head -n 30 target/engine_cost.annotate.txt
    total=$(sed -n 's/^totals: //p' target/engine_cost.callgrind); packets=$(sed -n 's/.*"delivered_packets":\([0-9]*\).*/\1/p' target/engine_cost.json); echo "$total instructions / $packets delivered packets = $((total / packets)) per packet (budget 300)"
    valgrind --tool=callgrind --callgrind-out-file=target/engine_cost_32.callgrind {{cargo_target}}/release/examples/engine_cost 1000000 32 > target/engine_cost_32.json 2> /dev/null
    total=$(sed -n 's/^totals: //p' target/engine_cost.callgrind); msgs=$(sed -n 's/.*"messages":\([0-9]*\).*/\1/p' target/engine_cost.json); total32=$(sed -n 's/^totals: //p' target/engine_cost_32.callgrind); msgs32=$(sed -n 's/.*"messages":\([0-9]*\).*/\1/p' target/engine_cost_32.json); packets=$(sed -n 's/.*"delivered_packets":\([0-9]*\).*/\1/p' target/engine_cost.json); per_msg=$(( (total - total32) / (msgs - msgs32) )); echo "split (a second run with 32 packets per message): $per_msg instructions per message ($((per_msg / 16)) per packet at 16 per message) and $(( (total - per_msg * msgs) / packets )) per packet"

# lib_mrc.so, the OCP MRC C API (mrc.h, mrc_ctl.h and the libibverbs calls they use), in
# target/capi, with libibverbs.so.1 beside it: the same library, for programs linked against
# rdma-core's libibverbs. OCP's makefiles take MRC_LIB_DIR=target/capi.
capi:
    cargo build --release -p mrc-capi
    mkdir -p target/capi
    cp {{cargo_target}}/release/lib_mrc.so target/capi/lib_mrc.so
    ln -sf lib_mrc.so target/capi/libibverbs.so.1
    @echo "target/capi/lib_mrc.so, target/capi/libibverbs.so.1 -> lib_mrc.so"

# lib_mrc.so's message rate against the Rust API's, same run, same simulator (a fresh
# `mrc-sim serve SCENARIO --once` per measurement): 64-byte writes from mrc0 to mrc1 in one
# process, OCP's benchmark loop. Prints per-round rates, the medians and their ratio; fails when
# lib_mrc.so is more than 1.5x slower. SCENARIO=healthy leaves out the link failure.
bench-capi ROUNDS="5" MESSAGES="50000" SCENARIO="pair": capi
    #!/usr/bin/env bash
    set -euo pipefail
    ocp="${MRC_OCP_DIR:-../shared/ocp-mrc}"
    cargo build --release -q -p mrc-sim
    cargo build --release -q -p mrc-capi --example bench_capi
    cc -O2 -Wall -I "$ocp" -o target/capi/rate host-driver/capi/benches/rate.c \
        -Wl,-rpath,"$PWD/target/capi" target/capi/lib_mrc.so -libverbs
    mkdir -p target/bench-capi
    {{cargo_target}}/release/examples/bench_capi --mrc-sim {{cargo_target}}/release/mrc-sim \
        --c-rate target/capi/rate --work-dir target/bench-capi --scenario {{SCENARIO}} \
        --rounds {{ROUNDS}} --messages {{MESSAGES}}

# Bind a PCI device to vfio-pci for the driver.
bind BDF:
    cargo run -q -p mrcctl -- bind {{BDF}}

# Give a device back to its kernel driver.
unbind BDF:
    cargo run -q -p mrcctl -- unbind {{BDF}}

# mrcctl against the simulated NICs, e.g. `just mrcctl perf write-bw`.
mrcctl *ARGS:
    cargo run -q --release -p mrcctl -- --sim default {{ARGS}}

# Lint every RTL block (Verilator -Wall, Icarus), run the Icarus bench, co-simulate against the models.
rtl:
    #!/usr/bin/env bash
    set -euo pipefail
    P=fpga-rtl/generated/mrc_abi_pkg.sv
    for b in ev_sprayer rx_psn_tracker csr_event_queue hdr_builder; do
      verilator --lint-only -Wall -Ifpga-rtl/rtl $P fpga-rtl/rtl/$b.sv
    done
    mkdir -p target
    iverilog -g2012 -Ifpga-rtl/rtl -o target/rtl-all.vvp $P fpga-rtl/rtl/*.sv
    # The co-simulation, the lint test and every Icarus bench (with its planted-bug rerun).
    cargo test -p mrc-rtl-cosim -- --nocapture

# The rtl datapath level (the Verilator-built blocks inside the simulated NICs): the differential
# test (hil at model and rtl, planted ev_sprayer and rx_psn_tracker bugs caught), then
# SCENARIO's mrc run at both levels: same results, and data packets per CPU second of each
# (same run, same machine).
rtl-sim scenario="default":
    #!/usr/bin/env bash
    set -euo pipefail
    cargo test -q --release -p mrc-sim --features rtl --test rtl_level -- --nocapture
    cargo build -q --release -p mrc-sim --features rtl
    for level in model rtl; do
      {{cargo_target}}/release/mrc-sim run {{scenario}} --transport mrc --datapath $level \
        --json {{cargo_target}}/rtl-sim-$level.json >/dev/null
    done
    python3 - {{cargo_target}} <<'PY'
    import json, sys
    t = sys.argv[1]
    m, r = (json.load(open(f"{t}/rtl-sim-{l}.json")) for l in ("model", "rtl"))
    def results(d):
        tr = json.loads(json.dumps(d["transports"]))
        for x in tr:
            for n in x.get("nics", []):
                n.pop("rtl", None)
        return tr
    same = results(m) == results(r)
    pm, pr = (d["wall_clock"]["perf"]["mrc"] for d in (m, r))
    rtl = [n["rtl"] for n in r["transports"][0]["nics"]]
    print(f"results identical at model and rtl: {same}")
    blocks = ("ev_sprayer", "rx_psn_tracker", "hdr_builder", "csr_event_queue")
    print("RTL: " + ", ".join(f"{sum(n[b]['transactions'] for n in rtl)} {b}" for b in blocks)
          + f" transactions, {sum(n['differ'] for n in rtl)} differing from the models")
    for name, p in (("model", pm), ("rtl", pr)):
        print(f"{name:>5}: {p['data_packets']} data packets in {p['cpu_s'] or 0:.2f} CPU s "
              f"({p['wall_s']:.2f} s wall): {p['data_packets_per_cpu_s'] or 0:.0f} per CPU s")
    if pm["data_packets_per_cpu_s"] and pr["data_packets_per_cpu_s"]:
        print(f"rtl / model speed: {pr['data_packets_per_cpu_s'] / pm['data_packets_per_cpu_s']:.3f}")
    else:
        print("rtl / model speed: the run is too short to time (CPU time below 10 ms)")
    sys.exit(0 if same else 1)
    PY

# Yosys synth_xilinx of each block: a table of LUT/FF/BRAM counts (`just bench` records it).
rtl-report:
    fpga-rtl/scripts/synth.sh

# Every benchmark, each figure next to its baseline: writes BENCHMARKS.md, BENCHMARKS.json and
# the README's figures table. `just bench --only engine-cost driver` reruns some steps (the
# others keep their section from BENCHMARKS.json when it was measured on this kind of machine;
# without one the run refuses, unless --drop-others); `cargo run -q -p mrc-bench-report -- list`
# lists the steps.
bench *ARGS:
    cargo run -q --release -p mrc-bench-report -- run {{ARGS}}

# Simulator cost at 1K, 4K and 16K hosts (`just bench-sim full` adds the 128K-host two-tier
# fabric): target/bench-sim.json and target/bench-sim.svg.
bench-sim *SIZE:
    cargo run -q --release -p mrc-sim -- bench {{ if SIZE == "full" { "--full" } else { "" } }}

# Swarm fault testing over N seeds from FIRST (release), with a summary; a failing seed prints
# the command that replays it.
swarm N="100" FIRST="0":
    SWARM_SEEDS={{N}} SWARM_FIRST={{FIRST}} cargo test -q -p mrc-tests --release --test swarm -- --ignored --exact many --nocapture

# Replay one swarm seed (release), printing its report.
swarm-replay SEED:
    SWARM_SEED={{SEED}} cargo test -q -p mrc-tests --release --test swarm -- replay --exact --nocapture

# The swarm's second lane on the cycle-level fabric (Clos tiers, link flaps, blackholing
# switches, loss, corruption; conservation and completion checked) over N seeds.
swarm-cycle N="100" FIRST="0":
    SWARM_SEEDS={{N}} SWARM_FIRST={{FIRST}} cargo test -q -p mrc-tests --release --test swarm -- --ignored --exact cycle_many --nocapture

# Model-check the MRC protocol for one configuration (PSNS MSG_PSNS WINDOW EVS NET_CAP LOSSES DUPS TRIMS BLACKHOLES).
model *ARGS="4 2 2 2 3 1 1 1 1":
    cargo run -q --release -p mrc-model --example explore -- {{ARGS}}
