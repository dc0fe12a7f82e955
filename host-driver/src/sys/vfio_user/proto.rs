//! The vfio-user wire format (protocol version 0.1, the one rust-vmm's `vfio_user` crate and
//! libvfio-user speak): a 16-byte header, then a command-specific body in host byte order.
//!
//! Only what the client sends and checks lives here; every reply is validated against the
//! request it answers ([`check_reply`]) before any of its bytes are used.

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// Protocol version this client speaks.
pub const VERSION_MAJOR: u16 = 0;
/// Minor version.
pub const VERSION_MINOR: u16 = 1;

/// Largest message the client accepts (header included): a 1 MiB data transfer plus slack for
/// headers and a region's capability list.
pub const MAX_MSG_BYTES: u32 = (1 << 20) + 4096;

/// Commands (`vfio_user_command`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u16)]
pub enum Command {
    /// Version and capability negotiation.
    Version = 1,
    /// Share DMA memory (a file descriptor) with the server.
    DmaMap = 2,
    /// Take DMA memory back.
    DmaUnmap = 3,
    /// Device flags, regions, IRQ indexes.
    DeviceGetInfo = 4,
    /// One region's size and flags.
    DeviceGetRegionInfo = 5,
    /// One IRQ index's vector count.
    GetIrqInfo = 7,
    /// Wire interrupt vectors to eventfds.
    SetIrqs = 8,
    /// Read a region (BAR, config space).
    RegionRead = 9,
    /// Write a region.
    RegionWrite = 10,
    /// Reset the device.
    DeviceReset = 13,
}

impl Command {
    /// The command's name, for errors.
    pub fn name(self) -> &'static str {
        match self {
            Command::Version => "VFIO_USER_VERSION",
            Command::DmaMap => "VFIO_USER_DMA_MAP",
            Command::DmaUnmap => "VFIO_USER_DMA_UNMAP",
            Command::DeviceGetInfo => "VFIO_USER_DEVICE_GET_INFO",
            Command::DeviceGetRegionInfo => "VFIO_USER_DEVICE_GET_REGION_INFO",
            Command::GetIrqInfo => "VFIO_USER_DEVICE_GET_IRQ_INFO",
            Command::SetIrqs => "VFIO_USER_DEVICE_SET_IRQS",
            Command::RegionRead => "VFIO_USER_REGION_READ",
            Command::RegionWrite => "VFIO_USER_REGION_WRITE",
            Command::DeviceReset => "VFIO_USER_DEVICE_RESET",
        }
    }
}

/// Header flags: message type in bits 0..4.
pub const FLAG_TYPE_MASK: u32 = 0xf;
/// Type: a command.
pub const FLAG_COMMAND: u32 = 0;
/// Type: a reply.
pub const FLAG_REPLY: u32 = 1;
/// The sender wants no reply.
pub const FLAG_NO_REPLY: u32 = 1 << 4;
/// The reply reports an error (`Header::error` is an errno).
pub const FLAG_ERROR: u32 = 1 << 5;

/// DMA_MAP flags: the device may read / write the memory.
pub const DMA_READ: u32 = 1;
/// See [`DMA_READ`].
pub const DMA_WRITE: u32 = 2;

/// The message header.
#[repr(C)]
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct Header {
    /// Matches a reply to its command.
    pub msg_id: u16,
    /// [`Command`].
    pub command: u16,
    /// Whole message, header included.
    pub msg_size: u32,
    /// `FLAG_*`.
    pub flags: u32,
    /// errno of a failed command (replies with [`FLAG_ERROR`]).
    pub error: u32,
}

/// Size of [`Header`].
pub const HEADER_BYTES: usize = core::mem::size_of::<Header>();

/// VERSION body (followed by a NUL-terminated JSON capability object).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Version {
    /// Major version.
    pub major: u16,
    /// Minor version.
    pub minor: u16,
}

/// DMA_MAP body.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct DmaMap {
    /// Size of this body.
    pub argsz: u32,
    /// `DMA_READ | DMA_WRITE`.
    pub flags: u32,
    /// Offset in the file descriptor sent with the message.
    pub offset: u64,
    /// IOVA.
    pub address: u64,
    /// Bytes.
    pub size: u64,
}

/// DMA_UNMAP body.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct DmaUnmap {
    /// Size of this body.
    pub argsz: u32,
    /// No flags are used.
    pub flags: u32,
    /// IOVA.
    pub address: u64,
    /// Bytes.
    pub size: u64,
}

/// DEVICE_GET_INFO body (`vfio_device_info`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct DeviceInfo {
    /// Size of this body.
    pub argsz: u32,
    /// `VFIO_DEVICE_FLAGS_*`.
    pub flags: u32,
    /// Regions.
    pub num_regions: u32,
    /// IRQ indexes.
    pub num_irqs: u32,
}

/// DEVICE_GET_REGION_INFO body (`vfio_region_info`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RegionInfo {
    /// Size of this body plus capabilities.
    pub argsz: u32,
    /// `VFIO_REGION_INFO_FLAG_*`.
    pub flags: u32,
    /// Region index.
    pub index: u32,
    /// Offset of the first capability (0: none).
    pub cap_offset: u32,
    /// Region size.
    pub size: u64,
    /// Offset for mmap of the file descriptor sent with the reply.
    pub offset: u64,
}

/// DEVICE_GET_IRQ_INFO body (`vfio_irq_info`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct IrqInfo {
    /// Size of this body.
    pub argsz: u32,
    /// `VFIO_IRQ_INFO_*`.
    pub flags: u32,
    /// IRQ index.
    pub index: u32,
    /// Vectors.
    pub count: u32,
}

/// DEVICE_SET_IRQS body (`vfio_irq_set`, eventfds sent with the message).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct SetIrqs {
    /// Size of this body.
    pub argsz: u32,
    /// `VFIO_IRQ_SET_DATA_* | VFIO_IRQ_SET_ACTION_*`.
    pub flags: u32,
    /// IRQ index.
    pub index: u32,
    /// First vector.
    pub start: u32,
    /// Vectors.
    pub count: u32,
}

/// REGION_READ / REGION_WRITE body (data follows for writes and read replies).
#[repr(C)]
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct RegionAccess {
    /// Offset in the region.
    pub offset: u64,
    /// Region index.
    pub region: u32,
    /// Bytes.
    pub count: u32,
}

/// What is wrong with a reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReplyError {
    /// The header does not answer the request (framing can no longer be trusted).
    Mismatch(String),
    /// The server reports an error: its errno.
    Refused(u32),
}

/// Checks that `reply` answers command `command` with id `msg_id`, and that its size is sane.
///
/// # Errors
/// [`ReplyError::Mismatch`] for another message or a bad size; [`ReplyError::Refused`] for an
/// error reply (its size was checked: the caller may skip its body).
pub fn check_reply(reply: &Header, command: Command, msg_id: u16) -> Result<(), ReplyError> {
    if reply.flags & FLAG_TYPE_MASK != FLAG_REPLY {
        return Err(ReplyError::Mismatch(format!(
            "expected a reply, got message type {} ({reply:?})",
            reply.flags & FLAG_TYPE_MASK
        )));
    }
    if reply.msg_id != msg_id || reply.command != command as u16 {
        return Err(ReplyError::Mismatch(format!(
            "reply to command {} id {} while waiting for {} id {msg_id}",
            reply.command,
            reply.msg_id,
            command.name()
        )));
    }
    if (reply.msg_size as usize) < HEADER_BYTES || reply.msg_size > MAX_MSG_BYTES {
        return Err(ReplyError::Mismatch(format!(
            "reply size {} outside {HEADER_BYTES}..={MAX_MSG_BYTES}",
            reply.msg_size
        )));
    }
    if reply.flags & FLAG_ERROR != 0 {
        return Err(ReplyError::Refused(reply.error));
    }
    Ok(())
}

/// The capabilities this client announces: up to `max_fds` descriptors per message, data
/// transfers up to 1 MiB.
pub fn client_capabilities(max_fds: u32) -> String {
    format!(
        "{{\"capabilities\":{{\"max_msg_fds\":{max_fds},\"max_data_xfer_size\":{}}}}}",
        1u32 << 20
    )
}

/// What the server announced in its VERSION reply (defaults per the specification).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerCaps {
    /// Descriptors per message (default 1).
    pub max_msg_fds: u32,
    /// Bytes per region access (default 1 MiB).
    pub max_data_xfer_size: u32,
}

/// Parses the server's NUL-terminated JSON capability object.
///
/// # Errors
/// A message naming what is malformed.
pub fn parse_server_caps(raw: &[u8]) -> Result<ServerCaps, String> {
    let text = raw
        .strip_suffix(&[0])
        .ok_or("capabilities not NUL-terminated")?;
    let v: serde_json::Value =
        serde_json::from_slice(text).map_err(|e| format!("capabilities are not JSON: {e}"))?;
    let caps = v
        .get("capabilities")
        .ok_or("no \"capabilities\" object in the VERSION reply")?;
    let field = |name: &str, default: u32| -> Result<u32, String> {
        match caps.get(name) {
            None => Ok(default),
            Some(x) => x
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .filter(|n| *n > 0)
                .ok_or(format!(
                    "capability {name} = {x} is not a positive 32-bit number"
                )),
        }
    };
    Ok(ServerCaps {
        max_msg_fds: field("max_msg_fds", 1)?,
        max_data_xfer_size: field("max_data_xfer_size", 1 << 20)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(cmd: Command, id: u16, size: u32, flags: u32) -> Header {
        Header {
            msg_id: id,
            command: cmd as u16,
            msg_size: size,
            flags,
            error: 22,
        }
    }

    #[test]
    fn layouts_match_the_specification() {
        assert_eq!(HEADER_BYTES, 16);
        assert_eq!(core::mem::size_of::<DmaMap>(), 32);
        assert_eq!(core::mem::size_of::<DmaUnmap>(), 24);
        assert_eq!(core::mem::size_of::<DeviceInfo>(), 16);
        assert_eq!(core::mem::size_of::<RegionInfo>(), 32);
        assert_eq!(core::mem::size_of::<IrqInfo>(), 16);
        assert_eq!(core::mem::size_of::<SetIrqs>(), 20);
        assert_eq!(core::mem::size_of::<RegionAccess>(), 16);
    }

    #[test]
    fn replies_are_matched_to_their_request() {
        let ok = reply(Command::RegionRead, 7, 36, FLAG_REPLY);
        assert_eq!(check_reply(&ok, Command::RegionRead, 7), Ok(()));
        for (bad, why) in [
            (reply(Command::RegionRead, 8, 36, FLAG_REPLY), "id"),
            (reply(Command::RegionWrite, 7, 36, FLAG_REPLY), "command"),
            (reply(Command::RegionRead, 7, 36, FLAG_COMMAND), "type"),
            (reply(Command::RegionRead, 7, 8, FLAG_REPLY), "size"),
            (reply(Command::RegionRead, 7, u32::MAX, FLAG_REPLY), "size"),
        ] {
            assert!(
                matches!(
                    check_reply(&bad, Command::RegionRead, 7),
                    Err(ReplyError::Mismatch(_))
                ),
                "{why}"
            );
        }
        let refused = reply(Command::DmaMap, 1, 16, FLAG_REPLY | FLAG_ERROR);
        assert_eq!(
            check_reply(&refused, Command::DmaMap, 1),
            Err(ReplyError::Refused(22))
        );
    }

    #[test]
    fn capabilities_round_trip_and_defaults() {
        let mine = client_capabilities(8);
        let mut raw = mine.into_bytes();
        raw.push(0);
        assert_eq!(
            parse_server_caps(&raw),
            Ok(ServerCaps {
                max_msg_fds: 8,
                max_data_xfer_size: 1 << 20
            })
        );
        assert_eq!(
            parse_server_caps(b"{\"capabilities\":{}}\0")
                .unwrap()
                .max_msg_fds,
            1,
            "the specification's default"
        );
        for bad in [
            &b"{\"capabilities\":{}}"[..],
            b"not json\0",
            b"{}\0",
            b"{\"capabilities\":{\"max_msg_fds\":-1}}\0",
            b"{\"capabilities\":{\"max_msg_fds\":0}}\0",
        ] {
            assert!(
                parse_server_caps(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
