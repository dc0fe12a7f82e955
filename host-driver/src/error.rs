//! The error type of everything above `sys`: each variant names the device, queue or object
//! that failed and what was expected, so a caller can act on it without a debugger.

use mrc_abi::device::admin::{AdminStatus, Opcode, QpState};
use mrc_abi::device::regs::DiscoverError;
use mrc_abi::device::version::AbiVersion;

use crate::sys::{self, Bdf};

/// Result of every fallible operation above `sys`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong, with context.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The `sys` layer (MMIO, DMA, interrupts, VFIO, vfio-user) failed.
    #[error(transparent)]
    Sys(sys::Error),
    /// The device no longer answers (an MMIO read returned all ones: surprise removal, link
    /// down or a dead function; or its vfio-user server is gone). Every later call on every
    /// object of this device returns this.
    #[error("{bdf}: device is gone (MMIO reads return all ones, or its vfio-user server closed the connection); every object of it is dead")]
    DeviceGone {
        /// The device.
        bdf: Bdf,
    },
    /// The register chain of BAR0 could not be walked.
    #[error("{bdf}: BAR0 register discovery failed: {reason:?}")]
    Discover {
        /// The device.
        bdf: Bdf,
        /// What the walk found.
        reason: DiscoverError,
    },
    /// The device speaks an ABI this driver cannot use.
    #[error("{bdf}: ABI version mismatch: driver speaks {}.{}, device speaks {}.{} ({reason})",
        host.major, host.minor, device.major, device.minor)]
    AbiMismatch {
        /// The device.
        bdf: Bdf,
        /// The driver's version.
        host: AbiVersion,
        /// The device's version.
        device: AbiVersion,
        /// The rule that failed.
        reason: String,
    },
    /// The device did not become ready within the bring-up timeout.
    #[error("{bdf}: device not ready after {waited_ms} ms (status {status:#x})")]
    NotReady {
        /// The device.
        bdf: Bdf,
        /// How long the driver waited.
        waited_ms: u64,
        /// The last status register value.
        status: u32,
    },
    /// The device reports a fatal error.
    #[error("{bdf}: device fatal error, code {code:#x}")]
    DeviceFatal {
        /// The device.
        bdf: Bdf,
        /// Fatal code from the status register.
        code: u16,
    },
    /// A device queue (admin or event) could not be enabled.
    #[error("{bdf}: {queue} queue not enabled (status {status:#x}: bad base or size)")]
    QueueEnable {
        /// The device.
        bdf: Bdf,
        /// "admin" or "event".
        queue: &'static str,
        /// Its status register.
        status: u32,
    },
    /// An admin command got no response in time.
    #[error("{bdf}: admin command {opcode:?} (id {command_id}) timed out after {waited_ms} ms")]
    AdminTimeout {
        /// The device.
        bdf: Bdf,
        /// The command.
        opcode: Opcode,
        /// Its id.
        command_id: u16,
        /// How long the driver waited.
        waited_ms: u64,
    },
    /// The device rejected an admin command.
    #[error("{bdf}: admin command {opcode:?} failed: {status:?} (syndrome {syndrome:#x})")]
    Admin {
        /// The device.
        bdf: Bdf,
        /// The command.
        opcode: Opcode,
        /// The device's status.
        status: AdminStatus,
        /// Detail (for attribute errors, the byte offset of the field in the command).
        syndrome: u32,
    },
    /// The device broke the admin or event queue protocol.
    #[error("{bdf}: {what}")]
    Protocol {
        /// The device.
        bdf: Bdf,
        /// What was wrong.
        what: String,
    },
    /// A ring is full.
    #[error("{queue} of {object} {id} is full ({depth} entries)")]
    QueueFull {
        /// "send queue", "receive queue", ...
        queue: &'static str,
        /// "QP", "CQ".
        object: &'static str,
        /// Its number.
        id: u32,
        /// Ring size.
        depth: u32,
    },
    /// An operation that the QP's state does not allow.
    #[error("QP {qpn}: {op} needs state {needed:?}, QP is in {state:?}")]
    QpState {
        /// The QP.
        qpn: u32,
        /// What was attempted.
        op: &'static str,
        /// Where the QP is.
        state: QpState,
        /// Where it must be.
        needed: QpState,
    },
    /// A QP transition the state machine does not have.
    #[error("QP {qpn}: no transition {from:?} -> {to:?} (RESET -> INIT -> RTR -> RTS; any -> RESET/ERROR)")]
    BadTransition {
        /// The QP.
        qpn: u32,
        /// Current state.
        from: QpState,
        /// Requested state.
        to: QpState,
    },
    /// An attribute out of range.
    #[error("{object}: attribute {field} = {value} is invalid: {rule}")]
    InvalidAttribute {
        /// The object ("QP 5", "CQ", "MR", ...).
        object: String,
        /// The field.
        field: &'static str,
        /// The rejected value.
        value: u64,
        /// The rule it breaks.
        rule: &'static str,
    },
    /// A work request that cannot be posted.
    #[error("QP {qpn}: work request {wr_id:#x} rejected: {reason}")]
    BadWorkRequest {
        /// The QP.
        qpn: u32,
        /// The request's id.
        wr_id: u64,
        /// Why.
        reason: &'static str,
    },
    /// An object used with a device, PD or context it does not belong to.
    #[error("{what} belongs to another {owner}")]
    ForeignObject {
        /// The object.
        what: &'static str,
        /// "device", "protection domain", ...
        owner: &'static str,
    },
    /// A controller operation from an application context.
    #[error("{bdf}: {op} is a controller operation; this is an application context")]
    NotController {
        /// The device.
        bdf: Bdf,
        /// The operation.
        op: &'static str,
    },
    /// A malformed completion or event record from the device.
    #[error("{bdf}: malformed {what} at index {index}: {detail}")]
    BadRecord {
        /// The device.
        bdf: Bdf,
        /// "CQE", "event record".
        what: &'static str,
        /// Ring index.
        index: u32,
        /// Decoder's complaint.
        detail: String,
    },
    /// An MR buffer access outside the region.
    #[error("MR lkey {lkey:#x}: access of {len} bytes at offset {offset:#x} is outside its {size} bytes")]
    MrRange {
        /// The region.
        lkey: u32,
        /// Offset in the region.
        offset: u64,
        /// Bytes.
        len: usize,
        /// Region size.
        size: usize,
    },
    /// The connection helper failed.
    #[error("connection exchange with {peer}: {what}")]
    Connect {
        /// The peer's address.
        peer: String,
        /// The step that failed.
        what: &'static str,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A path planner input that describes no valid topology.
    #[error("topology: {0}")]
    Topology(String),
}

impl From<sys::Error> for Error {
    /// A vfio-user connection that is gone is the device being gone.
    fn from(e: sys::Error) -> Error {
        match e {
            sys::Error::Disconnected { bdf, .. } => Error::DeviceGone { bdf },
            e => Error::Sys(e),
        }
    }
}

impl Error {
    /// True for [`Error::DeviceGone`].
    pub fn is_gone(&self) -> bool {
        matches!(self, Error::DeviceGone { .. })
    }
}
