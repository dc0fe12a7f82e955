//! The `Backend` boundary: MMIO, DMA memory, interrupts. The only module with unsafe code.
