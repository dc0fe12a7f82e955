//! Wire formats. See `abi/WIRE.md`.
