//! Generators for `fpga-rtl/generated/mrc_abi_pkg.sv` and `abi/REGISTERS.md`.
