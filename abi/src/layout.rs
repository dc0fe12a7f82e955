//! Layout tables for the generated SystemVerilog package and register documentation.
