//! Application memory through VFIO: its pages mapped with VFIO_IOMMU_MAP_DMA at IOVA = their
//! address, in reference-counted page chunks (the kernel refuses to map a page twice and to
//! unmap part of a mapping), with the part inside the allocator's window reserved.

use std::sync::{Arc, Mutex};

use super::{VfioBackend, VfioSys};
use crate::sys::user::{ChunkMap, Released};
use crate::sys::{Bdf, DmaRegion, DmaRelease, Error, Iova, IovaAllocator, Result, UserRange};

/// A chunk's reservation in the IOVA window.
pub(super) type Reservation = Option<(Iova, u64)>;
/// The application pages a backend has mapped.
pub(super) type UserChunks = ChunkMap<Reservation>;

/// Unmaps a user registration's page chunks that no other registration still covers.
struct VfioUserRelease<S: VfioSys> {
    bdf: Bdf,
    sys: Arc<S>,
    iova: Arc<Mutex<IovaAllocator>>,
    user: Arc<Mutex<UserChunks>>,
    chunks: Vec<u64>,
}

/// Unmaps chunks whose last registration went and returns their window reservations; the first
/// unmap error is returned (the rest are still tried).
fn unmap_user_chunks<S: VfioSys>(
    bdf: Bdf,
    sys: &S,
    iova: &Mutex<IovaAllocator>,
    gone: Vec<Released<Reservation>>,
) -> Result<()> {
    let mut first = Ok(());
    for (start, len, reserved) in gone {
        let size = len as usize;
        match sys.dma_unmap(Iova(start), size) {
            Ok(()) => {
                if let Some((at, n)) = reserved {
                    let mut a = iova.lock().unwrap_or_else(|p| p.into_inner());
                    if let Err(e) = a.free(at, n) {
                        log::error!("{bdf}: {e}");
                    }
                }
            }
            Err(source) => {
                // The range stays reserved: nothing may be mapped over it.
                if first.is_ok() {
                    first = Err(Error::DmaUnmap {
                        bdf,
                        iova: Iova(start),
                        size,
                        source,
                    });
                }
            }
        }
    }
    first
}

impl<S: VfioSys> DmaRelease for VfioUserRelease<S> {
    fn release(&self, _iova: Iova, _len: usize) -> Result<()> {
        let gone = self
            .user
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .release(&self.chunks);
        unmap_user_chunks(self.bdf, &*self.sys, &self.iova, gone)
    }
}

impl<S: VfioSys> VfioBackend<S> {
    /// [`Backend::map_user`]: see the module docs.
    pub(super) fn map_user_pages(&self, range: UserRange) -> Result<DmaRegion> {
        let bdf = self.bdf;
        let (start, end) = range.pages();
        let mut user = self.user.lock().unwrap_or_else(|p| p.into_inner());
        let taken = user.acquire(start, end, |g0, len| {
            let reserved = self
                .iova
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .reserve(Iova(g0), len)
                .map_err(|_| Error::IovaConflict {
                    bdf,
                    iova: Iova(g0),
                    size: len,
                })?;
            // SAFETY: the pages belong to a registration (`UserRange` contract: they stay
            // mapped until its region is dropped), and the chunk is unmapped when the last
            // registration covering it goes (`VfioUserRelease`), before that promise ends.
            if let Err(source) = unsafe { self.sys.dma_map_user(g0, len as usize, Iova(g0)) } {
                if let Some((at, n)) = reserved {
                    let _ = self
                        .iova
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .free(at, n);
                }
                return Err(Error::DmaMap {
                    bdf,
                    iova: Iova(g0),
                    size: len as usize,
                    source,
                });
            }
            Ok(reserved)
        });
        let chunks = match taken {
            Ok(c) => c,
            Err((e, taken)) => {
                let gone = user.release(&taken);
                drop(user);
                if let Err(u) = unmap_user_chunks(bdf, &*self.sys, &self.iova, gone) {
                    log::error!("{bdf}: undoing a failed registration: {u}");
                }
                return Err(e);
            }
        };
        drop(user);
        let release = VfioUserRelease {
            bdf,
            sys: self.sys.clone(),
            iova: self.iova.clone(),
            user: self.user.clone(),
            chunks,
        };
        Ok(DmaRegion::user(range, Some(Arc::new(release))))
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{open, open_cfg, Knobs};
    use super::super::VfioConfig;
    use crate::sys::{Backend, Error, Iova, UserRange};

    /// User memory is mapped at IOVA = address in page chunks: an overlapping registration maps
    /// only the pages not mapped yet, and a chunk is unmapped when its last registration goes.
    #[test]
    fn user_memory_is_mapped_once_per_page_at_its_address() {
        let dev = open(Knobs::default()).unwrap();
        let mut buf = vec![0u8; 6 * 4096];
        let page0 = (buf.as_mut_ptr() as u64).div_ceil(4096) * 4096;
        let p = |off: u64| (page0 + off) as *mut u8;
        // SAFETY: the fake maps nothing; `buf` outlives the regions.
        let a = dev
            .map_user(unsafe { UserRange::new(p(100), 5000) }.unwrap())
            .unwrap();
        assert_eq!(a.iova(), Iova(page0 + 100), "IOVA = address");
        assert_eq!(a.len(), 5000);
        assert_eq!(
            *dev.sys().mapped.lock().unwrap(),
            vec![(Iova(page0), 2 * 4096)]
        );
        // SAFETY: as above.
        let b = dev
            .map_user(unsafe { UserRange::new(p(4096), 8192) }.unwrap())
            .unwrap();
        assert_eq!(
            *dev.sys().mapped.lock().unwrap(),
            vec![(Iova(page0), 2 * 4096), (Iova(page0 + 2 * 4096), 4096)],
            "only the new page is mapped"
        );
        a.write_u32(0, 0x1234_5678).unwrap();
        // SAFETY: reading back through the region wrote into `buf`'s bytes.
        assert_eq!(buf[(page0 + 100 - buf.as_ptr() as u64) as usize], 0x78);
        drop(a);
        assert_eq!(
            dev.sys().mapped.lock().unwrap().len(),
            2,
            "b still covers both chunks"
        );
        drop(b);
        assert!(dev.sys().mapped.lock().unwrap().is_empty());

        let failing = open(Knobs {
            map_fail: true,
            ..Knobs::default()
        })
        .unwrap();
        // SAFETY: refused: nothing is mapped.
        let e = failing
            .map_user(unsafe { UserRange::new(p(0), 10) }.unwrap())
            .unwrap_err();
        assert!(matches!(e, Error::DmaMap { .. }), "{e}");
    }

    /// User memory inside the allocator's window is reserved, so DMA allocations avoid it, and an
    /// allocated range cannot be registered over.
    #[test]
    fn user_memory_in_the_iova_window_is_reserved() {
        let mut mem = vec![0u8; 8 * 4096];
        let page0 = (mem.as_mut_ptr() as u64).div_ceil(4096) * 4096;
        let cfg = VfioConfig {
            iova_base: Iova(page0),
            iova_span: 4 * 4096,
            hugepages: false,
            ..VfioConfig::default()
        };
        let dev = open_cfg(Knobs::default(), &cfg).unwrap();
        // SAFETY: the fake maps nothing; `mem` outlives the region.
        let u = dev
            .map_user(unsafe { UserRange::new(page0 as *mut u8, 4096) }.unwrap())
            .unwrap();
        let d = dev.alloc_dma(4096).unwrap();
        assert_eq!(
            d.iova(),
            Iova(page0 + 4096),
            "allocation skips the user page"
        );
        // SAFETY: refused: nothing is mapped.
        let e = dev
            .map_user(unsafe { UserRange::new((page0 + 4096) as *mut u8, 10) }.unwrap())
            .unwrap_err();
        assert!(matches!(e, Error::IovaConflict { .. }), "{e}");
        drop(u);
        assert_eq!(
            dev.alloc_dma(4096).unwrap().iova(),
            Iova(page0),
            "reservation returned"
        );
    }
}
