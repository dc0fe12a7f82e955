//! The `Backend` boundary: MMIO, DMA memory, interrupts, config space. The only module with
//! unsafe code.
//!
//! Everything above this module (`device`, `queue`, `api`, `ctl`) talks to a NIC through the
//! [`Backend`] trait and never sees a raw pointer or a file descriptor number:
//!
//! - **MMIO** on BAR0 by byte offset, 32 and 64 bits wide, little-endian on the device side
//!   (values are returned in CPU order). Offsets are bounds- and alignment-checked: a bad offset
//!   is an [`Error`], never a panic and never an access outside the BAR.
//! - **DMA memory** as [`DmaRegion`]s: an owned, device-visible buffer with an [`Iova`]. It is
//!   accessed only through volatile reads and writes at checked offsets; no `&`/`&mut` to its
//!   bytes is ever handed out, because the device may write them at any time (vm-memory style).
//!   Dropping the region removes the device's access (IOMMU unmap) before the memory is freed.
//! - **Interrupts**: one eventfd per vector. [`Backend::interrupt_fd`] lends it for epoll, and
//!   [`Backend::wait_interrupt`] blocks on it with a timeout.
//! - **Config space** reads and writes by offset, bounds-checked.
//!
//! - **User memory**: [`Backend::map_user`] makes the application's own pages ([`UserRange`])
//!   device-visible at IOVA = their virtual address, so a peer's RDMA write lands in the
//!   application's buffer, not in a copy.
//!
//! Implementations: [`vfio::VfioBackend`] (real hardware through `/dev/vfio`),
//! [`vfio_user::VfioUserBackend`] (a device served by another process over a vfio-user
//! socket, e.g. `mrc-sim serve`), [`twin::Twin`] (in-memory test twin with an MMIO write hook;
//! the simulator builds on it or implements the trait itself).
//!
//! The trait is object-safe: `&dyn Backend` and `Box<dyn Backend>` work. Every method takes
//! `&self`: a device is shared hardware, and queues ring doorbells through a shared reference.
//!
//! ```
//! use mrc_driver::sys::{twin::{Twin, TwinConfig}, Backend};
//! let twin = Twin::new(TwinConfig::default()).unwrap();
//! twin.mmio_write32(0x10, 0xdead_beef).unwrap();
//! assert_eq!(twin.mmio_read32(0x10).unwrap(), 0xdead_beef);
//! assert!(twin.mmio_read32(twin.bar0_len()).is_err()); // out of range: an error, not a panic
//! let dma = twin.alloc_dma(4096).unwrap();
//! dma.write_u64(8, 42).unwrap();
//! assert_eq!(dma.read_u64(8).unwrap(), 42);
//! ```
#![allow(unsafe_code)]
#![warn(clippy::undocumented_unsafe_blocks)]

mod eventfd;
mod iova;
mod mem;
mod shm;
pub mod twin;
mod user;
pub mod vfio;
pub mod vfio_user;

use std::fmt;
use std::io;
use std::os::fd::BorrowedFd;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

pub use eventfd::EventFd;
pub use iova::{BadFree, IovaAllocator};
pub use mem::{DmaHandle, DmaRegion, DmaRelease};
pub use user::UserRange;

/// Result of every fallible `sys` operation.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An I/O virtual address: the address the device uses for DMA (after the IOMMU).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Iova(pub u64);

impl Iova {
    /// `self + offset`, or `None` on overflow.
    pub fn checked_add(self, offset: u64) -> Option<Iova> {
        self.0.checked_add(offset).map(Iova)
    }
}

impl fmt::Display for Iova {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "iova {:#x}", self.0)
    }
}

/// A PCI address, `domain:bus:device.function`, e.g. `0000:00:04.0`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Bdf {
    /// PCI segment (domain), 16 bits.
    pub domain: u16,
    /// Bus number.
    pub bus: u8,
    /// Device number, 0..=31.
    pub device: u8,
    /// Function number, 0..=7.
    pub function: u8,
}

impl Bdf {
    /// A BDF from its parts, or `None` when `device > 31` or `function > 7`.
    pub fn new(domain: u16, bus: u8, device: u8, function: u8) -> Option<Bdf> {
        (device < 32 && function < 8).then_some(Bdf {
            domain,
            bus,
            device,
            function,
        })
    }
}

impl fmt::Display for Bdf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04x}:{:02x}:{:02x}.{:x}",
            self.domain, self.bus, self.device, self.function
        )
    }
}

/// Why a string is not a PCI address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed PCI address {input:?}: {reason} (expected domain:bus:device.function, e.g. 0000:00:04.0)")]
pub struct BdfParseError {
    /// The text that was parsed.
    pub input: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl FromStr for Bdf {
    type Err = BdfParseError;

    /// Parses `DDDD:BB:DD.F` (hex); the short form `BB:DD.F` means domain 0.
    fn from_str(s: &str) -> Result<Bdf, BdfParseError> {
        let err = |reason| BdfParseError {
            input: s.to_owned(),
            reason,
        };
        let hex = |part: &str, max_digits: usize, what| {
            if part.is_empty() || part.len() > max_digits {
                return Err(err(what));
            }
            if !part.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(err("non-hex digit"));
            }
            u32::from_str_radix(part, 16).map_err(|_| err(what))
        };
        let (head, func) = s
            .rsplit_once('.')
            .ok_or_else(|| err("missing '.function'"))?;
        let parts: Vec<&str> = head.split(':').collect();
        let (domain, bus, dev) = match parts.as_slice() {
            [d, b, v] => (hex(d, 4, "domain must be 1-4 hex digits")?, *b, *v),
            [b, v] => (0, *b, *v),
            _ => return Err(err("expected 2 or 3 ':'-separated fields before '.'")),
        };
        let bus = hex(bus, 2, "bus must be 1-2 hex digits")?;
        let dev = hex(dev, 2, "device must be 1-2 hex digits")?;
        let func = hex(func, 1, "function must be 1 hex digit")?;
        if dev > 31 {
            return Err(err("device number above 0x1f"));
        }
        if func > 7 {
            return Err(err("function number above 7"));
        }
        // Each value fits: checked by digit counts and ranges above.
        Ok(Bdf {
            domain: domain as u16,
            bus: bus as u8,
            device: dev as u8,
            function: func as u8,
        })
    }
}

/// A device in an IOMMU group and the driver it is bound to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupMember {
    /// The member's PCI address.
    pub bdf: Bdf,
    /// Its driver (`vfio-pci`, `ixgbe`, ...), `None` when unbound.
    pub driver: Option<String>,
}

impl fmt::Display for GroupMember {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.driver {
            Some(d) => write!(f, "{} (driver {d})", self.bdf),
            None => write!(f, "{} (no driver)", self.bdf),
        }
    }
}

fn list_members(members: &[GroupMember]) -> String {
    let names: Vec<String> = members.iter().map(ToString::to_string).collect();
    names.join(", ")
}

/// Everything that can fail in `sys`, with the context needed to act on it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An MMIO access outside the BAR.
    #[error("{bdf}: MMIO access of {size} bytes at offset {offset:#x} is outside BAR{region} ({len:#x} bytes)")]
    MmioOutOfRange {
        bdf: Bdf,
        region: u32,
        offset: u64,
        size: usize,
        len: u64,
    },
    /// An MMIO access not aligned to its width.
    #[error("{bdf}: MMIO access of {size} bytes at offset {offset:#x} in BAR{region} is not {size}-byte aligned")]
    MmioMisaligned {
        bdf: Bdf,
        region: u32,
        offset: u64,
        size: usize,
    },
    /// A DMA region access outside the region.
    #[error("DMA region at {iova}: access of {size} bytes at offset {offset:#x} is outside its {len:#x} bytes")]
    DmaOutOfRange {
        iova: Iova,
        offset: u64,
        size: usize,
        len: usize,
    },
    /// A multi-byte DMA region access not aligned to its width.
    #[error("DMA region at {iova}: access of {size} bytes at offset {offset:#x} is not {size}-byte aligned")]
    DmaMisaligned {
        iova: Iova,
        offset: u64,
        size: usize,
    },
    /// A device-side access to an IOVA no live DMA region covers (an IOMMU fault).
    #[error("{bdf}: device access of {size} bytes at {iova} hits no mapped DMA region")]
    DmaFault { bdf: Bdf, iova: Iova, size: usize },
    /// `alloc_dma(0)`.
    #[error("{bdf}: DMA allocation of zero bytes")]
    DmaZeroSize { bdf: Bdf },
    /// The IOVA window has no free range of this size.
    #[error("{bdf}: no free IOVA range of {size:#x} bytes (window {base} + {span:#x})")]
    IovaExhausted {
        bdf: Bdf,
        size: u64,
        base: Iova,
        span: u64,
    },
    /// Allocating host pages for DMA failed.
    #[error("{bdf}: allocating {size:#x} bytes of DMA memory failed")]
    DmaAlloc {
        bdf: Bdf,
        size: usize,
        #[source]
        source: io::Error,
    },
    /// VFIO_IOMMU_MAP_DMA failed.
    #[error("{bdf}: VFIO_IOMMU_MAP_DMA of {size:#x} bytes at {iova} failed")]
    DmaMap {
        bdf: Bdf,
        iova: Iova,
        size: usize,
        #[source]
        source: io::Error,
    },
    /// VFIO_IOMMU_UNMAP_DMA failed (the pages are leaked, never freed while mapped).
    #[error("{bdf}: VFIO_IOMMU_UNMAP_DMA of {size:#x} bytes at {iova} failed; pages leaked")]
    DmaUnmap {
        bdf: Bdf,
        iova: Iova,
        size: usize,
        #[source]
        source: io::Error,
    },
    /// A config-space access outside the config space.
    #[error("{bdf}: config access of {size} bytes at offset {offset:#x} is outside the {len:#x}-byte config space")]
    ConfigOutOfRange {
        bdf: Bdf,
        offset: u64,
        size: usize,
        len: u64,
    },
    /// An interrupt vector that is not enabled.
    #[error("{bdf}: interrupt vector {vector} is not enabled ({count} vectors)")]
    NoSuchVector { bdf: Bdf, vector: u32, count: u32 },
    /// A failed system call, named, on a device.
    #[error("{bdf}: {op} failed")]
    Sys {
        bdf: Bdf,
        op: &'static str,
        #[source]
        source: io::Error,
    },
    /// A system call on a VFIO region failed.
    #[error("{bdf}: {op} on region {region} at offset {offset:#x} ({size} bytes) failed")]
    Region {
        bdf: Bdf,
        op: &'static str,
        region: u32,
        offset: u64,
        size: usize,
        #[source]
        source: io::Error,
    },
    /// The device's IOMMU group could not be found in sysfs.
    #[error("{bdf}: cannot resolve its IOMMU group from sysfs (is the IOMMU enabled? intel_iommu=on / amd_iommu=on)")]
    IommuGroup {
        bdf: Bdf,
        #[source]
        source: io::Error,
    },
    /// `/dev/vfio/vfio` could not be opened.
    #[error("cannot open the VFIO container /dev/vfio/vfio (is the vfio-pci module loaded?)")]
    OpenContainer {
        #[source]
        source: io::Error,
    },
    /// The kernel speaks another VFIO API version (`found` is `None` when the backend does not
    /// report the kernel's answer: `vfio-ioctls` only says that it differs).
    #[error("VFIO API version {}, this driver speaks {expected}", found.map_or_else(|| "mismatch".to_owned(), |v| v.to_string()))]
    ApiVersion { found: Option<i32>, expected: i32 },
    /// The kernel has no TYPE1v2 IOMMU backend (the one `vfio-ioctls` sets).
    #[error("the VFIO container does not offer the TYPE1v2 IOMMU (is vfio_iommu_type1 loaded?)")]
    NoType1Iommu,
    /// `/dev/vfio/<group>` could not be opened.
    #[error("{bdf}: cannot open /dev/vfio/{group} (device driver: {driver}; bind it to vfio-pci and check permissions)")]
    OpenGroup {
        bdf: Bdf,
        group: u32,
        driver: String,
        #[source]
        source: io::Error,
    },
    /// Some device in the IOMMU group is not bound to vfio-pci.
    #[error(
        "IOMMU group {group} is not viable: bind every device in it to vfio-pci; offending: {}",
        list_members(offending)
    )]
    GroupNotViable {
        group: u32,
        offending: Vec<GroupMember>,
    },
    /// A region the driver needs is missing or smaller than required.
    #[error("{bdf}: region {region} is {size:#x} bytes, need at least {need:#x}")]
    RegionTooSmall {
        bdf: Bdf,
        region: u32,
        size: u64,
        need: u64,
    },
    /// BAR0 cannot be mmapped.
    #[error("{bdf}: region {region} does not support mmap (flags {flags:#x})")]
    RegionNotMappable { bdf: Bdf, region: u32, flags: u32 },
    /// Interrupts were requested but the device offers neither MSI-X nor MSI.
    #[error("{bdf}: {wanted} interrupt vectors requested, device has no MSI-X or MSI vectors")]
    NoMsi { bdf: Bdf, wanted: u32 },
    /// Application memory that cannot be registered (or a failed step while mapping it).
    #[error("user memory {addr:#x} + {len:#x}: {what}")]
    UserMemory {
        addr: u64,
        len: usize,
        what: String,
        #[source]
        source: Option<io::Error>,
    },
    /// The backend cannot map application memory.
    #[error("{bdf}: the {backend} backend cannot register application memory")]
    UserMemoryUnsupported { bdf: Bdf, backend: &'static str },
    /// A DMA mapping would give one IOVA two meanings (user memory at IOVA = address against
    /// memory mapped at an allocated IOVA).
    #[error("{bdf}: IOVA range {iova} + {size:#x} is already mapped to other memory")]
    IovaConflict { bdf: Bdf, iova: Iova, size: u64 },
    /// A vfio-user socket operation failed.
    #[error("vfio-user device {}: {op} failed", path.display())]
    Socket {
        path: PathBuf,
        op: &'static str,
        #[source]
        source: io::Error,
    },
    /// The vfio-user server broke the protocol (the connection is closed: the framing can no
    /// longer be trusted).
    #[error("vfio-user device {}: protocol error: {what}", path.display())]
    Protocol { path: PathBuf, what: String },
    /// The vfio-user server answered a request with an error.
    #[error("vfio-user device {}: the server refused {command}: {source}", path.display())]
    Refused {
        path: PathBuf,
        command: &'static str,
        #[source]
        source: io::Error,
    },
    /// The vfio-user connection is gone (the server closed it, died, or stopped answering);
    /// every later request fails with this, and MMIO reads return all ones as a surprise-
    /// removed PCIe device's do.
    #[error("{bdf}: vfio-user device {} is gone: {why}", path.display())]
    Disconnected {
        bdf: Bdf,
        path: PathBuf,
        why: String,
    },
}

/// The boundary between the safe driver and a device (real, simulated or test twin).
///
/// # Contract
/// - Offsets are bytes from the start of BAR0 / config space / the DMA region.
/// - 32/64-bit MMIO accesses must be naturally aligned and inside BAR0, else
///   [`Error::MmioOutOfRange`] / [`Error::MmioMisaligned`]; nothing is accessed then.
/// - Registers are little-endian on the device; values are in CPU order.
/// - [`Backend::alloc_dma`] returns zeroed memory whose IOVA is aligned to at least 4 KiB.
/// - Interrupt vectors are numbered `0..interrupt_vectors()`.
pub trait Backend {
    /// The device's PCI address (for error context above this layer).
    fn bdf(&self) -> Bdf;
    /// BAR0 length in bytes.
    fn bar0_len(&self) -> u64;
    /// Reads a 32-bit register.
    ///
    /// # Errors
    /// Out-of-range or misaligned offset.
    fn mmio_read32(&self, offset: u64) -> Result<u32>;
    /// Writes a 32-bit register.
    ///
    /// # Errors
    /// Out-of-range or misaligned offset.
    fn mmio_write32(&self, offset: u64, value: u32) -> Result<()>;
    /// Reads a 64-bit register (one 8-byte access).
    ///
    /// # Errors
    /// Out-of-range or misaligned offset.
    fn mmio_read64(&self, offset: u64) -> Result<u64>;
    /// Writes a 64-bit register (one 8-byte access).
    ///
    /// # Errors
    /// Out-of-range or misaligned offset.
    fn mmio_write64(&self, offset: u64, value: u64) -> Result<()>;
    /// Allocates `size` bytes (rounded up to the page size) of zeroed device-visible memory.
    ///
    /// # Errors
    /// Zero size, no IOVA space, no host memory, or the IOMMU mapping failed.
    fn alloc_dma(&self, size: usize) -> Result<DmaRegion>;
    /// Number of enabled interrupt vectors.
    fn interrupt_vectors(&self) -> u32;
    /// The eventfd of `vector`, for epoll. It becomes readable when the vector fires; reading
    /// it (or [`Backend::wait_interrupt`]) consumes the pending count.
    ///
    /// # Errors
    /// [`Error::NoSuchVector`].
    fn interrupt_fd(&self, vector: u32) -> Result<BorrowedFd<'_>>;
    /// Waits up to `timeout` for `vector` to fire. Returns how many times it fired since the
    /// last wait (consuming them), or 0 if the timeout elapsed first.
    ///
    /// # Errors
    /// [`Error::NoSuchVector`], or the wait itself failed.
    fn wait_interrupt(&self, vector: u32, timeout: Duration) -> Result<u64>;
    /// Config space length in bytes (256 or 4096).
    fn config_len(&self) -> u64;
    /// Reads `buf.len()` bytes of config space at `offset`.
    ///
    /// # Errors
    /// [`Error::ConfigOutOfRange`], or the access failed.
    fn config_read(&self, offset: u64, buf: &mut [u8]) -> Result<()>;
    /// Writes `data` into config space at `offset`.
    ///
    /// # Errors
    /// [`Error::ConfigOutOfRange`], or the access failed.
    fn config_write(&self, offset: u64, data: &[u8]) -> Result<()>;

    /// Reads a little-endian 16-bit config register.
    ///
    /// # Errors
    /// As [`Backend::config_read`].
    fn config_read_u16(&self, offset: u64) -> Result<u16> {
        let mut b = [0u8; 2];
        self.config_read(offset, &mut b)?;
        Ok(u16::from_le_bytes(b))
    }
    /// Reads a little-endian 32-bit config register.
    ///
    /// # Errors
    /// As [`Backend::config_read`].
    fn config_read_u32(&self, offset: u64) -> Result<u32> {
        let mut b = [0u8; 4];
        self.config_read(offset, &mut b)?;
        Ok(u32::from_le_bytes(b))
    }
    /// Writes a little-endian 16-bit config register.
    ///
    /// # Errors
    /// As [`Backend::config_write`].
    fn config_write_u16(&self, offset: u64, value: u16) -> Result<()> {
        self.config_write(offset, &value.to_le_bytes())
    }

    /// Makes the application's memory `range` device-visible at IOVA = its address; the
    /// returned region reads and writes the application's own bytes, and dropping it takes the
    /// device's access away. Overlapping ranges may be mapped more than once.
    ///
    /// # Errors
    /// [`Error::UserMemoryUnsupported`] (the default), [`Error::IovaConflict`], or the mapping
    /// failed ([`Error::UserMemory`], [`Error::DmaMap`], ...).
    fn map_user(&self, range: UserRange) -> Result<DmaRegion> {
        let _ = range;
        Err(Error::UserMemoryUnsupported {
            bdf: self.bdf(),
            backend: "this",
        })
    }

    /// A flag the backend sets when it learns on its own that the device is gone (a vfio-user
    /// server closing the connection), for the device layer to share as its own "gone" flag
    /// so that callers that only poll memory (a spinning `poll_cq`) see it at once. `None`
    /// (the default) when the backend learns it only from all-ones MMIO reads.
    fn gone_flag(&self) -> Option<Arc<AtomicBool>> {
        None
    }
}

/// PCI config space: the command register.
pub const PCI_COMMAND: u64 = 0x04;
/// Command register: memory space enable.
pub const PCI_COMMAND_MEMORY: u16 = 1 << 1;
/// Command register: bus master enable (the device may issue DMA).
pub const PCI_COMMAND_MASTER: u16 = 1 << 2;

/// Enables memory decoding and bus mastering (read-modify-write of the command register).
///
/// # Errors
/// Config space access failed.
pub fn enable_bus_master<B: Backend + ?Sized>(dev: &B) -> Result<()> {
    let cmd = dev.config_read_u16(PCI_COMMAND)?;
    let want = cmd | PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER;
    if want != cmd {
        dev.config_write_u16(PCI_COMMAND, want)?;
    }
    Ok(())
}

/// `offset..offset+size` lies inside `0..len` (no overflow).
pub(crate) fn in_bounds(offset: u64, size: usize, len: u64) -> bool {
    offset
        .checked_add(size as u64)
        .is_some_and(|end| end <= len)
}

/// Checks an MMIO access of `size` bytes at `offset` in region `region` of length `len`.
pub(crate) fn check_mmio(bdf: Bdf, region: u32, offset: u64, size: usize, len: u64) -> Result<()> {
    if !in_bounds(offset, size, len) {
        return Err(Error::MmioOutOfRange {
            bdf,
            region,
            offset,
            size,
            len,
        });
    }
    if !offset.is_multiple_of(size as u64) {
        return Err(Error::MmioMisaligned {
            bdf,
            region,
            offset,
            size,
        });
    }
    Ok(())
}

/// Checks a config access.
pub(crate) fn check_config(bdf: Bdf, offset: u64, size: usize, len: u64) -> Result<()> {
    if in_bounds(offset, size, len) {
        Ok(())
    } else {
        Err(Error::ConfigOutOfRange {
            bdf,
            offset,
            size,
            len,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bdf_parses_and_prints() {
        let b: Bdf = "0000:00:04.0".parse().unwrap();
        assert_eq!(b, Bdf::new(0, 0, 4, 0).unwrap());
        assert_eq!(b.to_string(), "0000:00:04.0");
        let b: Bdf = "abcd:Ff:1f.7".parse().unwrap();
        assert_eq!(
            (b.domain, b.bus, b.device, b.function),
            (0xabcd, 0xff, 0x1f, 7)
        );
        assert_eq!(b.to_string(), "abcd:ff:1f.7");
        let short: Bdf = "03:00.1".parse().unwrap();
        assert_eq!(short, Bdf::new(0, 3, 0, 1).unwrap());
    }

    #[test]
    fn bdf_rejects_malformed_with_reason() {
        for (input, reason) in [
            ("", "missing '.function'"),
            ("0000:00:04", "missing '.function'"),
            ("0000:00:20.0", "device number above 0x1f"),
            ("0000:00:04.8", "function number above 7"),
            ("0000:00:04.10", "function must be 1 hex digit"),
            ("00000:00:04.0", "domain must be 1-4 hex digits"),
            ("0000:100:04.0", "bus must be 1-2 hex digits"),
            ("0000:0g:04.0", "non-hex digit"),
            ("0000:+1:04.0", "non-hex digit"),
            (
                "1:2:3:4.0",
                "expected 2 or 3 ':'-separated fields before '.'",
            ),
            ("0000::04.0", "bus must be 1-2 hex digits"),
        ] {
            let e = input.parse::<Bdf>().unwrap_err();
            assert_eq!(e.reason, reason, "input {input:?}");
            assert_eq!(e.input, input);
            assert!(e.to_string().contains("0000:00:04.0"), "hint in {e}");
        }
        assert!(Bdf::new(0, 0, 32, 0).is_none());
        assert!(Bdf::new(0, 0, 0, 8).is_none());
    }

    #[test]
    fn bounds_checks_do_not_overflow() {
        assert!(in_bounds(0, 4, 4));
        assert!(!in_bounds(1, 4, 4));
        assert!(!in_bounds(u64::MAX, 4, u64::MAX));
        assert!(in_bounds(4, 0, 4));
        let bdf = Bdf::default();
        assert!(matches!(
            check_mmio(bdf, 0, 6, 4, 16),
            Err(Error::MmioMisaligned {
                offset: 6,
                size: 4,
                ..
            })
        ));
        assert!(matches!(
            check_mmio(bdf, 0, 16, 4, 16),
            Err(Error::MmioOutOfRange {
                offset: 16,
                len: 16,
                ..
            })
        ));
        assert!(check_mmio(bdf, 0, 8, 8, 16).is_ok());
    }

    #[test]
    fn errors_name_their_context() {
        let e = Error::GroupNotViable {
            group: 7,
            offending: vec![GroupMember {
                bdf: "0000:00:05.0".parse().unwrap(),
                driver: Some("e1000e".into()),
            }],
        };
        let s = e.to_string();
        assert!(
            s.contains("group 7") && s.contains("0000:00:05.0 (driver e1000e)"),
            "{s}"
        );
        let e = Error::Sys {
            bdf: "0000:00:04.0".parse().unwrap(),
            op: "VFIO_DEVICE_RESET",
            source: io::Error::from_raw_os_error(libc::EIO),
        };
        assert!(e.to_string().contains("0000:00:04.0: VFIO_DEVICE_RESET"));
        assert!(std::error::Error::source(&e).is_some());
    }
}
