//! ABI and wire version numbers, and the handshake rule.
//!
//! The ABI version covers everything in [`crate::device`]: register blocks, doorbells,
//! descriptors, admin commands and CSR entries. The device publishes its version in the DEVICE
//! register block (`abi_version`, major in bits 31:16, minor in bits 15:0); the host driver was
//! built against [`ABI_VERSION`] and calls [`check_compat`] before it touches anything else.
//!
//! Rule: the **major** numbers must be equal (a major bump is an incompatible layout change), and
//! the device's **minor** must be at least the host's (minors only add: new commands, new
//! capability bits, new register blocks that an older host skips). An older host on a newer device
//! works; a newer host on an older device does not, because it could send commands the device
//! does not know.

/// A major.minor ABI version.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct AbiVersion {
    /// Incompatible changes bump this.
    pub major: u16,
    /// Backwards-compatible additions bump this.
    pub minor: u16,
}

impl AbiVersion {
    /// A version from its parts.
    pub const fn new(major: u16, minor: u16) -> Self {
        AbiVersion { major, minor }
    }

    /// The register encoding: major in bits 31:16, minor in bits 15:0.
    pub const fn to_u32(self) -> u32 {
        ((self.major as u32) << 16) | self.minor as u32
    }

    /// The version in a register value (inverse of [`AbiVersion::to_u32`]).
    pub const fn from_u32(v: u32) -> Self {
        AbiVersion {
            major: (v >> 16) as u16,
            minor: v as u16,
        }
    }
}

/// The ABI version this crate describes. Minor 3 added the QUERY_LIMITS admin command; minor 4
/// has the datapath report coalesced events to the firmware and take its commands through the
/// CSR queues ([`super::csr`]), with no per-packet queue between them.
pub const ABI_VERSION: AbiVersion = AbiVersion::new(1, 4);

/// The wire format version (the MRH version field, `abi/WIRE.md`).
pub const WIRE_VERSION: u8 = crate::wire::MRC_VERSION;

/// Why a host and a device cannot work together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum VersionError {
    /// Different major versions: the layouts are incompatible.
    MajorMismatch {
        /// The host's major.
        host: u16,
        /// The device's major.
        device: u16,
    },
    /// The device is older than the host: it may not know commands the host sends.
    DeviceTooOld {
        /// The host's minor.
        host_minor: u16,
        /// The device's minor.
        device_minor: u16,
    },
}

impl core::fmt::Display for VersionError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::MajorMismatch { host, device } => {
                write!(f, "ABI major mismatch: host {host}, device {device}")
            }
            Self::DeviceTooOld {
                host_minor,
                device_minor,
            } => {
                write!(
                    f,
                    "device ABI minor {device_minor} older than host minor {host_minor}"
                )
            }
        }
    }
}

/// The handshake rule: same major, device minor >= host minor.
///
/// # Errors
/// [`VersionError::MajorMismatch`] or [`VersionError::DeviceTooOld`].
pub const fn check_compat(host: AbiVersion, device: AbiVersion) -> Result<(), VersionError> {
    if host.major != device.major {
        return Err(VersionError::MajorMismatch {
            host: host.major,
            device: device.major,
        });
    }
    if device.minor < host.minor {
        return Err(VersionError::DeviceTooOld {
            host_minor: host.minor,
            device_minor: device.minor,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use proptest::prelude::*;

    #[test]
    fn handshake_rule() {
        let v = |a, b| AbiVersion::new(a, b);
        assert_eq!(check_compat(v(1, 0), v(1, 0)), Ok(()));
        assert_eq!(check_compat(v(1, 0), v(1, 3)), Ok(()));
        assert_eq!(
            check_compat(v(1, 2), v(1, 1)),
            Err(VersionError::DeviceTooOld {
                host_minor: 2,
                device_minor: 1
            })
        );
        assert_eq!(
            check_compat(v(1, 0), v(2, 0)),
            Err(VersionError::MajorMismatch { host: 1, device: 2 })
        );
        assert_eq!(ABI_VERSION.to_u32(), 0x0001_0004);
    }

    proptest! {
        #[test]
        fn register_encoding_round_trips(v in any::<u32>()) {
            prop_assert_eq!(AbiVersion::from_u32(v).to_u32(), v);
        }

        #[test]
        fn compat_matches_model(a in any::<u16>(), b in any::<u16>(), c in any::<u16>(), d in any::<u16>()) {
            let ok = check_compat(AbiVersion::new(a, b), AbiVersion::new(c, d)).is_ok();
            prop_assert_eq!(ok, a == c && d >= b);
        }
    }
}
