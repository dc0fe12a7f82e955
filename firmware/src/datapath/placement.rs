//! Receive placement check: where a received write packet's payload goes, by its RETH.
//!
//! # Hardware block
//!
//! - **State**: a table of up to `R` registered memory regions ([`MemRegion`]: rkey, base
//!   virtual address, length, access rights), written by firmware on memory registration. The
//!   lookup by rkey is a CAM (here a linear scan bounded by `R`).
//! - **Input**: one packet's RETH fields and payload length ([`PlacementTable::check_write`]).
//! - **Output**: [`Placement`]: the region slot and the byte offset into the region to write,
//!   or a [`PlacementError`] that maps to a NACK reason ([`PlacementError::nack_reason`]).
//! - **Capacity**: `1 <= R <= 65536` regions; rkeys are unique in the table.
//!
//! # Checks, in order
//!
//! 1. RETH DMA length equals the payload length, else [`PlacementError::LengthMismatch`].
//! 2. A zero-length write touches no memory: it is accepted without looking at rkey or address
//!    ([`Placement::Empty`]), as in InfiniBand.
//! 3. The rkey names a registered region, else [`PlacementError::BadRkey`].
//! 4. The region allows remote writes, else [`PlacementError::NoWriteAccess`].
//! 5. `[va, va + len)` lies inside `[base, base + length)`, computed without overflow (a
//!    `va + len` that wraps is out of bounds), else [`PlacementError::OutOfBounds`].

use super::ack_gen::NackReason;

/// Access rights of a registered region.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Access {
    /// Remote peers may write (RDMA WRITE).
    pub remote_write: bool,
    /// Remote peers may read (reserved: MRC has no reads yet).
    pub remote_read: bool,
}

impl Access {
    /// Remote write allowed.
    pub const REMOTE_WRITE: Access = Access {
        remote_write: true,
        remote_read: false,
    };
}

/// A registered memory region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct MemRegion {
    pub rkey: u32,
    /// Virtual address of the first byte.
    pub base_va: u64,
    /// Length in bytes; `base_va + length` must not exceed `2^64`.
    pub length: u64,
    pub access: Access,
}

/// Where a packet's payload goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Placement {
    /// Write `len` bytes at byte `offset` of the region in table slot `slot`.
    Write { slot: u16, offset: u64, len: u32 },
    /// Zero-length write: nothing to place.
    Empty,
}

/// Why a packet cannot be placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum PlacementError {
    /// No registered region has this rkey.
    BadRkey { rkey: u32 },
    /// The write does not fit inside the region.
    OutOfBounds { rkey: u32, va: u64, len: u32 },
    /// RETH DMA length differs from the payload length.
    LengthMismatch { dma_len: u32, payload_len: u32 },
    /// The region does not allow remote writes.
    NoWriteAccess { rkey: u32 },
}

impl PlacementError {
    /// The NACK the responder sends for this error.
    pub const fn nack_reason(self) -> NackReason {
        match self {
            Self::BadRkey { .. } | Self::OutOfBounds { .. } | Self::NoWriteAccess { .. } => {
                NackReason::RemoteAccess
            }
            Self::LengthMismatch { .. } => NackReason::Length,
        }
    }
}

/// A registration the table refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum RegisterError {
    /// Every slot is in use.
    TableFull,
    /// A region with this rkey is already registered.
    DuplicateRkey { rkey: u32 },
    /// `base_va + length` overflows the 64-bit address space.
    RegionWraps { base_va: u64, length: u64 },
    /// No region with this rkey (deregistration).
    UnknownRkey { rkey: u32 },
}

/// Placement counters (free-running, wrapping).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PlacementCounters {
    /// Packets accepted (including zero-length ones).
    pub placed: u64,
    pub bad_rkey: u64,
    pub out_of_bounds: u64,
    pub length_mismatch: u64,
    pub no_write_access: u64,
    /// Registrations and deregistrations refused.
    pub bad_registrations: u64,
}

impl PlacementCounters {
    /// All zero (what `Default` gives, usable in `const fn`).
    pub const ZERO: PlacementCounters = PlacementCounters {
        placed: 0,
        bad_rkey: 0,
        out_of_bounds: 0,
        length_mismatch: 0,
        no_write_access: 0,
        bad_registrations: 0,
    };
}

/// What the datapath stage needs of a registered-region table, whatever its size (implemented
/// by [`PlacementTable`]).
pub trait Regions {
    /// An empty table.
    fn empty() -> Self;
    /// See [`PlacementTable::register`].
    ///
    /// # Errors
    /// As there.
    fn register(&mut self, region: MemRegion) -> Result<u16, RegisterError>;
    /// See [`PlacementTable::deregister`].
    ///
    /// # Errors
    /// As there.
    fn deregister(&mut self, rkey: u32) -> Result<MemRegion, RegisterError>;
    /// See [`PlacementTable::check_write`].
    ///
    /// # Errors
    /// As there.
    fn check_write(
        &mut self,
        rkey: u32,
        va: u64,
        dma_len: u32,
        payload_len: u32,
    ) -> Result<Placement, PlacementError>;
    /// The `n` writes of a receive run whose payloads are one span, `len` bytes from `va` of
    /// `rkey` (each payload its RETH length, none empty, each starting where the one before
    /// ended), checked at once: the span's placement (its `offset` is the first write's),
    /// counted as `n` placed writes, when it passes, which it does exactly when each write's
    /// [`Self::check_write`] would; `None`, nothing counted, otherwise (then check one write
    /// at a time). A table without span checks always says `None`.
    fn check_span(&mut self, rkey: u32, va: u64, len: u32, n: u64) -> Option<Placement> {
        let _ = (rkey, va, len, n);
        None
    }
    /// See [`PlacementTable::region`].
    fn region(&self, slot: u16) -> Option<MemRegion>;
    /// See [`PlacementTable::counters`].
    fn counters(&self) -> PlacementCounters;
}

impl<const R: usize> Regions for PlacementTable<R> {
    fn empty() -> Self {
        Self::new()
    }
    fn register(&mut self, region: MemRegion) -> Result<u16, RegisterError> {
        PlacementTable::register(self, region)
    }
    fn deregister(&mut self, rkey: u32) -> Result<MemRegion, RegisterError> {
        PlacementTable::deregister(self, rkey)
    }
    #[inline]
    fn check_write(
        &mut self,
        rkey: u32,
        va: u64,
        dma_len: u32,
        payload_len: u32,
    ) -> Result<Placement, PlacementError> {
        PlacementTable::check_write(self, rkey, va, dma_len, payload_len)
    }
    #[inline(always)]
    fn check_span(&mut self, rkey: u32, va: u64, len: u32, n: u64) -> Option<Placement> {
        let p = self.write_ok_uncounted(rkey, va, len)?;
        self.count_placed(n);
        Some(p)
    }
    fn region(&self, slot: u16) -> Option<MemRegion> {
        PlacementTable::region(self, slot)
    }
    fn counters(&self) -> PlacementCounters {
        PlacementTable::counters(self)
    }
}

/// The registered-region table. See the module docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacementTable<const R: usize> {
    regions: [Option<MemRegion>; R],
    counters: PlacementCounters,
}

impl<const R: usize> Default for PlacementTable<R> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const R: usize> PlacementTable<R> {
    const CAPACITY_OK: () = assert!(R >= 1 && R <= 65536, "PlacementTable needs 1 <= R <= 65536");

    /// An empty table.
    pub const fn new() -> Self {
        #[allow(clippy::let_unit_value)]
        let () = Self::CAPACITY_OK;
        PlacementTable {
            regions: [None; R],
            counters: PlacementCounters::ZERO,
        }
    }

    /// The counters.
    pub fn counters(&self) -> PlacementCounters {
        self.counters
    }

    /// The region in `slot`, if any.
    pub fn region(&self, slot: u16) -> Option<MemRegion> {
        self.regions.get(usize::from(slot)).copied().flatten()
    }

    /// Firmware write: register a region in the first free slot; returns the slot.
    ///
    /// # Errors
    /// [`RegisterError::RegionWraps`], [`RegisterError::DuplicateRkey`],
    /// [`RegisterError::TableFull`].
    pub fn register(&mut self, region: MemRegion) -> Result<u16, RegisterError> {
        let result = self.try_register(region);
        if result.is_err() {
            self.counters.bad_registrations = self.counters.bad_registrations.wrapping_add(1);
        }
        result
    }

    fn try_register(&mut self, region: MemRegion) -> Result<u16, RegisterError> {
        if region.base_va.checked_add(region.length).is_none() {
            return Err(RegisterError::RegionWraps {
                base_va: region.base_va,
                length: region.length,
            });
        }
        if self.find(region.rkey).is_some() {
            return Err(RegisterError::DuplicateRkey { rkey: region.rkey });
        }
        let (slot, entry) = self
            .regions
            .iter_mut()
            .enumerate()
            .find(|(_, r)| r.is_none())
            .ok_or(RegisterError::TableFull)?;
        *entry = Some(region);
        u16::try_from(slot).map_err(|_| RegisterError::TableFull)
    }

    /// Firmware write: remove the region with `rkey`; returns it.
    ///
    /// # Errors
    /// [`RegisterError::UnknownRkey`].
    pub fn deregister(&mut self, rkey: u32) -> Result<MemRegion, RegisterError> {
        let found = self.find(rkey).and_then(|(slot, _)| {
            self.regions
                .get_mut(usize::from(slot))
                .and_then(Option::take)
        });
        found.ok_or_else(|| {
            self.counters.bad_registrations = self.counters.bad_registrations.wrapping_add(1);
            RegisterError::UnknownRkey { rkey }
        })
    }

    // Always inlined, as `check`: on every received write's path.
    #[inline(always)]
    fn find(&self, rkey: u32) -> Option<(u16, MemRegion)> {
        self.regions
            .iter()
            .enumerate()
            .find_map(|(slot, r)| match r {
                Some(r) if r.rkey == rkey => u16::try_from(slot).ok().map(|s| (s, *r)),
                _ => None,
            })
    }

    /// Per-packet check of a write packet's RETH (`rkey`, `va`, `dma_len`) against its actual
    /// `payload_len`.
    ///
    /// # Errors
    /// [`PlacementError`], see the module docs for the order of checks.
    pub fn check_write(
        &mut self,
        rkey: u32,
        va: u64,
        dma_len: u32,
        payload_len: u32,
    ) -> Result<Placement, PlacementError> {
        let result = self.check(rkey, va, dma_len, payload_len);
        let c = &mut self.counters;
        let counter = match result {
            Ok(_) => &mut c.placed,
            Err(PlacementError::BadRkey { .. }) => &mut c.bad_rkey,
            Err(PlacementError::OutOfBounds { .. }) => &mut c.out_of_bounds,
            Err(PlacementError::LengthMismatch { .. }) => &mut c.length_mismatch,
            Err(PlacementError::NoWriteAccess { .. }) => &mut c.no_write_access,
        };
        *counter = counter.wrapping_add(1);
        result
    }

    /// [`Self::check_write`] when it passes (counted), `None` (nothing counted) when it
    /// fails: the caller then calls [`Self::check_write`] for the error and its counter.
    #[inline]
    pub fn check_write_ok(
        &mut self,
        rkey: u32,
        va: u64,
        dma_len: u32,
        payload_len: u32,
    ) -> Option<Placement> {
        let p = self.check(rkey, va, dma_len, payload_len).ok()?;
        self.counters.placed = self.counters.placed.wrapping_add(1);
        Some(p)
    }

    /// [`Self::check_write_ok`] for a write whose payload is its RETH length, *not counted*:
    /// the engine's receive run checks its packets' whole span (one rkey, contiguous
    /// addresses) with one call, which passes exactly when each packet's check would, and
    /// counts them with [`Self::count_placed`]. `None` (nothing counted) when it fails.
    #[inline]
    pub fn write_ok_uncounted(&self, rkey: u32, va: u64, dma_len: u32) -> Option<Placement> {
        self.check(rkey, va, dma_len, dma_len).ok()
    }

    /// Count `n` packets accepted by [`Self::write_ok_uncounted`] (as many `check_write_ok`
    /// calls would).
    #[inline]
    pub fn count_placed(&mut self, n: u64) {
        self.counters.placed = self.counters.placed.wrapping_add(n);
    }

    // Always inlined: on every received write's path, one packet or a run at a time.
    #[inline(always)]
    fn check(
        &self,
        rkey: u32,
        va: u64,
        dma_len: u32,
        payload_len: u32,
    ) -> Result<Placement, PlacementError> {
        if dma_len != payload_len {
            return Err(PlacementError::LengthMismatch {
                dma_len,
                payload_len,
            });
        }
        if dma_len == 0 {
            return Ok(Placement::Empty);
        }
        let (slot, region) = self.find(rkey).ok_or(PlacementError::BadRkey { rkey })?;
        if !region.access.remote_write {
            return Err(PlacementError::NoWriteAccess { rkey });
        }
        let oob = PlacementError::OutOfBounds {
            rkey,
            va,
            len: dma_len,
        };
        let offset = va.checked_sub(region.base_va).ok_or(oob)?;
        let end = offset.checked_add(u64::from(dma_len)).ok_or(oob)?;
        if end > region.length {
            return Err(oob);
        }
        Ok(Placement::Write {
            slot,
            offset,
            len: dma_len,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    type T = PlacementTable<4>;

    fn region(rkey: u32, base_va: u64, length: u64) -> MemRegion {
        MemRegion {
            rkey,
            base_va,
            length,
            access: Access::REMOTE_WRITE,
        }
    }

    #[test]
    fn places_inside_and_rejects_outside() {
        let mut t = T::new();
        assert_eq!(t.register(region(0x100, 0x1000, 0x100)), Ok(0));
        assert_eq!(
            t.check_write(0x100, 0x1000, 0x100, 0x100),
            Ok(Placement::Write {
                slot: 0,
                offset: 0,
                len: 0x100
            })
        );
        assert_eq!(
            t.check_write(0x100, 0x10ff, 1, 1),
            Ok(Placement::Write {
                slot: 0,
                offset: 0xff,
                len: 1
            })
        );
        let oob = |va, len| PlacementError::OutOfBounds {
            rkey: 0x100,
            va,
            len,
        };
        assert_eq!(t.check_write(0x100, 0x10ff, 2, 2), Err(oob(0x10ff, 2)));
        assert_eq!(t.check_write(0x100, 0xfff, 1, 1), Err(oob(0xfff, 1)));
        assert_eq!(t.check_write(0x100, u64::MAX, 1, 1), Err(oob(u64::MAX, 1)));
        assert_eq!(
            t.check_write(0x101, 0x1000, 1, 1),
            Err(PlacementError::BadRkey { rkey: 0x101 })
        );
        assert_eq!(
            t.check_write(0x100, 0x1000, 8, 7),
            Err(PlacementError::LengthMismatch {
                dma_len: 8,
                payload_len: 7
            })
        );
        assert_eq!(t.check_write(0xdead, 0, 0, 0), Ok(Placement::Empty));
        let c = t.counters();
        assert_eq!(
            (c.placed, c.out_of_bounds, c.bad_rkey, c.length_mismatch),
            (3, 3, 1, 1)
        );
    }

    #[test]
    fn region_at_top_of_address_space() {
        let mut t = T::new();
        // The region ends at u64::MAX (exclusive): the last byte is u64::MAX - 1.
        t.register(region(1, u64::MAX - 16, 16)).unwrap();
        assert!(t.check_write(1, u64::MAX - 16, 16, 16).is_ok());
        assert!(t.check_write(1, u64::MAX - 1, 1, 1).is_ok());
        assert!(t.check_write(1, u64::MAX - 1, 2, 2).is_err());
        assert!(t.check_write(1, u64::MAX, 1, 1).is_err());
        assert_eq!(
            t.register(region(2, u64::MAX, 2)),
            Err(RegisterError::RegionWraps {
                base_va: u64::MAX,
                length: 2
            })
        );
    }

    #[test]
    fn access_rights_and_error_mapping() {
        let mut t = T::new();
        t.register(MemRegion {
            access: Access::default(),
            ..region(7, 0, 64)
        })
        .unwrap();
        let e = t.check_write(7, 0, 8, 8).unwrap_err();
        assert_eq!(e, PlacementError::NoWriteAccess { rkey: 7 });
        assert_eq!(e.nack_reason(), NackReason::RemoteAccess);
        assert_eq!(
            PlacementError::LengthMismatch {
                dma_len: 1,
                payload_len: 2
            }
            .nack_reason(),
            NackReason::Length
        );
        assert_eq!(
            PlacementError::BadRkey { rkey: 0 }.nack_reason(),
            NackReason::RemoteAccess
        );
    }

    #[test]
    fn registration_table_limits() {
        let mut t = T::new();
        for k in 0..4 {
            assert_eq!(t.register(region(k, 0, 1)), Ok(k as u16));
        }
        assert_eq!(t.register(region(9, 0, 1)), Err(RegisterError::TableFull));
        assert_eq!(
            t.register(region(2, 0, 1)),
            Err(RegisterError::DuplicateRkey { rkey: 2 })
        );
        assert_eq!(t.deregister(2), Ok(region(2, 0, 1)));
        assert_eq!(t.deregister(2), Err(RegisterError::UnknownRkey { rkey: 2 }));
        assert_eq!(t.register(region(9, 0, 1)), Ok(2));
        assert_eq!(t.region(2), Some(region(9, 0, 1)));
        assert_eq!(t.region(100), None);
        assert_eq!(t.counters().bad_registrations, 3);
    }

    proptest! {
        #[test]
        fn never_ok_outside_the_region(
            base in any::<u64>(),
            length in any::<u64>(),
            rkey in any::<u32>(),
            q_rkey in any::<u32>(),
            va_near in any::<bool>(),
            va_delta in -300i64..300,
            va_any in any::<u64>(),
            dma_len in prop_oneof![0u32..600, any::<u32>()],
            same_len in any::<bool>(),
            payload_other in any::<u32>(),
        ) {
            let length = length.min(u64::MAX - base).min(if base % 2 == 0 { 512 } else { u64::MAX });
            let mut t = T::new();
            t.register(region(rkey, base, length)).unwrap();
            let q_rkey = if va_near { rkey } else { q_rkey };
            let va = if va_near { base.wrapping_add_signed(va_delta) } else { va_any };
            let payload = if same_len { dma_len } else { payload_other };
            match t.check_write(q_rkey, va, dma_len, payload) {
                Ok(Placement::Write { slot, offset, len }) => {
                    prop_assert_eq!(slot, 0);
                    prop_assert_eq!(q_rkey, rkey);
                    prop_assert_eq!(len, dma_len);
                    prop_assert_eq!(len, payload);
                    prop_assert!(len > 0);
                    prop_assert!(va >= base);
                    prop_assert_eq!(offset, va - base);
                    // Inside, computed in 128 bits so nothing can wrap.
                    prop_assert!(u128::from(va) + u128::from(len) <= u128::from(base) + u128::from(length));
                }
                Ok(Placement::Empty) => prop_assert!(dma_len == 0 && payload == 0),
                Err(e) => {
                    let inside = va >= base
                        && u128::from(va) + u128::from(dma_len) <= u128::from(base) + u128::from(length);
                    let expect = if dma_len != payload {
                        PlacementError::LengthMismatch { dma_len, payload_len: payload }
                    } else if q_rkey != rkey {
                        PlacementError::BadRkey { rkey: q_rkey }
                    } else {
                        prop_assert!(!inside);
                        PlacementError::OutOfBounds { rkey, va, len: dma_len }
                    };
                    prop_assert_eq!(e, expect);
                }
            }
        }
    }
}
