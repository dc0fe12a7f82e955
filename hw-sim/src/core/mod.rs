//! The deterministic discrete-event core: picosecond time, event queue, clock domains.
