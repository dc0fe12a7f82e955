//! Per-packet datapath reference models: what the RTL implements, cycle for cycle in function.
