// Tool-compatibility shims for referring to mrc_abi_pkg types. No layout lives here: every
// struct, width and constant comes from ../generated/mrc_abi_pkg.sv.
//
// - Yosys 0.23 rejects `import mrc_abi_pkg::*` and does not resolve struct members through a
//   local typedef alias, so it (and Verilator) use `mrc_abi_pkg::name_t` directly.
// - Icarus 11 aborts (elab_type.cc assertion) on a package-scoped struct type in a declaration,
//   but accepts a local `typedef mrc_abi_pkg::name_t name_t;`.
//
// - Icarus 11 re-runs an `always_comb` block whenever the block itself changes a variable it
//   also writes later (a block that assigns a variable twice, e.g. a default then a loop, keeps
//   re-triggering itself and simulation time never advances); `always @*` does not. Blocks use
//   `MRC_COMB`: `always @*` under Icarus, `always_comb` elsewhere.
//
// Use: `MRC_TYPEDEF(udp_t)` once inside the module, then declare with `MRC_T(udp_t) u;`.
`ifndef MRC_COMPAT_SVH
`define MRC_COMPAT_SVH
`ifdef __ICARUS__
`define MRC_TYPEDEF(name) typedef mrc_abi_pkg::name name;
`define MRC_T(name) name
`define MRC_COMB always @*
`else
`define MRC_TYPEDEF(name)
`define MRC_T(name) mrc_abi_pkg::name
`define MRC_COMB always_comb
`endif
`endif
