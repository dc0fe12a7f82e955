# mrc workflows. `just` lists them. Install just with `pip install rust-just`.
# Recipes whose work has not landed yet say so and exit non-zero.

set shell := ["bash", "-euo", "pipefail", "-c"]

riscv := "riscv32imac-unknown-none-elf"

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

# Build the no_std engine crate for the NIC cores.
firmware:
    cargo build -p mrc-firmware --release --target {{riscv}}

# Build the NIC image and run its self-test under QEMU.
qemu:
    @just _pending 4 "the NIC image and its QEMU self-test"

# Flash the NIC image with probe-rs.
flash:
    @just _pending 4 "the NIC image and its probe-rs chip description"

# Sizes of the NIC image.
fw-size:
    @just _pending 4 "the NIC image"

# Bind a PCI device to vfio-pci for the driver.
bind BDF:
    @just _pending 6 "mrcctl bind {{BDF}}"

# Lint and co-simulate the RTL.
rtl:
    @just _pending 7 "the SystemVerilog datapath"

# Synthesis report of the RTL blocks.
rtl-report:
    @just _pending 7 "the SystemVerilog datapath"

# Benchmarks.
bench:
    @just _pending 6 "driver and simulator benchmarks"

# Simulator speed and scale benchmark.
bench-sim *SIZE:
    @just _pending 8 "the simulator at scale"

# Swarm fault testing over N seeds.
swarm N="100":
    @just _pending 9 "swarm testing"

_pending ISSUE WHAT:
    @echo "not yet: {{WHAT}} lands with issue {{ISSUE}}; nothing was run." >&2
    @exit 1
