//! Errors as the C API reports them: an `errno` value and a message.
//!
//! Every failing entry point returns what its header prescribes (`-1`, `NULL`, or the errno
//! value itself for the calls documented "errors like ibv_post_send()"), sets `errno`, keeps
//! the message for [`crate::ffi`]'s `mrc_capi_last_error()` (per thread) and prints it to stderr
//! as `mrc: <function>: <message>`. `MRC_CAPI_LOG=off` silences the printing; conditions a
//! caller polls for (an empty queue, a full ring) are never printed.

use std::cell::RefCell;
use std::ffi::CString;
use std::sync::OnceLock;

use mrc_abi::device::admin::AdminStatus;
use mrc_driver::Error as DriverError;

pub use libc::{
    E2BIG, EAGAIN, EBUSY, EINVAL, EIO, ENODEV, ENOENT, ENOMEM, ENOTSUP, EOPNOTSUPP, EPERM,
    ETIMEDOUT,
};

/// What failed, as `errno` and a sentence for the user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CapiError {
    /// The `errno` value.
    pub errno: i32,
    /// What went wrong, naming the object and the rule.
    pub message: String,
    /// A condition callers poll for (full ring, nothing to read): not printed.
    pub quiet: bool,
}

/// Result of the library's safe layer.
pub type Result<T, E = CapiError> = std::result::Result<T, E>;

impl CapiError {
    /// An error with `errno` and `message`.
    pub fn new(errno: i32, message: impl Into<String>) -> CapiError {
        CapiError {
            errno,
            message: message.into(),
            quiet: false,
        }
    }
    /// `EINVAL`.
    pub fn inval(message: impl Into<String>) -> CapiError {
        CapiError::new(EINVAL, message)
    }
    /// The same error, not printed (the caller is expected to retry).
    pub fn quiet(mut self) -> CapiError {
        self.quiet = true;
        self
    }
}

impl std::fmt::Display for CapiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, errno_name(self.errno))
    }
}

/// The errno of a device admin status.
fn admin_errno(status: AdminStatus) -> i32 {
    match status {
        AdminStatus::Ok => 0,
        AdminStatus::NotFound => ENOENT,
        AdminStatus::NoResources => ENOMEM,
        AdminStatus::InUse | AdminStatus::Busy => EBUSY,
        AdminStatus::Permission => EPERM,
        AdminStatus::UnknownOpcode => EOPNOTSUPP,
        AdminStatus::Internal | AdminStatus::FwImageInvalid | AdminStatus::FwNoUpdate => EIO,
        AdminStatus::ReservedSet | AdminStatus::BadAttribute | AdminStatus::BadState => EINVAL,
    }
}

impl From<DriverError> for CapiError {
    fn from(e: DriverError) -> CapiError {
        let errno = match &e {
            DriverError::DeviceGone { .. }
            | DriverError::DeviceFatal { .. }
            | DriverError::Sys(_)
            | DriverError::Protocol { .. }
            | DriverError::BadRecord { .. }
            | DriverError::NotReady { .. }
            | DriverError::Discover { .. }
            | DriverError::QueueEnable { .. }
            | DriverError::Connect { .. } => EIO,
            DriverError::AbiMismatch { .. } => EPROTO,
            DriverError::AdminTimeout { .. } => ETIMEDOUT,
            DriverError::Admin { status, .. } => admin_errno(*status),
            DriverError::QueueFull { .. } => ENOMEM,
            DriverError::NotController { .. } => EPERM,
            DriverError::QpState { .. }
            | DriverError::BadTransition { .. }
            | DriverError::InvalidAttribute { .. }
            | DriverError::BadWorkRequest { .. }
            | DriverError::ForeignObject { .. }
            | DriverError::MrRange { .. }
            | DriverError::Topology(_) => EINVAL,
            _ => EIO,
        };
        let quiet = matches!(e, DriverError::QueueFull { .. });
        CapiError {
            errno,
            message: e.to_string(),
            quiet,
        }
    }
}

use libc::EPROTO;

/// The symbolic name of an errno value (for messages).
pub fn errno_name(e: i32) -> &'static str {
    match e {
        EINVAL => "EINVAL",
        ENOMEM => "ENOMEM",
        EIO => "EIO",
        EBUSY => "EBUSY",
        ENOENT => "ENOENT",
        ENODEV => "ENODEV",
        EPERM => "EPERM",
        E2BIG => "E2BIG",
        EAGAIN => "EAGAIN",
        ETIMEDOUT => "ETIMEDOUT",
        EOPNOTSUPP => "EOPNOTSUPP",
        EPROTO => "EPROTO",
        _ => "errno",
    }
}

thread_local! {
    static LAST: RefCell<CString> = RefCell::new(CString::default());
}

fn log_enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| {
        !matches!(
            std::env::var("MRC_CAPI_LOG").as_deref(),
            Ok("off" | "0" | "none")
        )
    })
}

/// Records `e` as this thread's last error of `function` and prints it unless quiet.
pub fn record(function: &str, e: &CapiError) {
    let line = format!("{function}: {e}");
    if !e.quiet && log_enabled() {
        eprintln!("mrc: {line}");
    }
    let c = CString::new(line.replace('\0', " ")).unwrap_or_default();
    LAST.with(|l| *l.borrow_mut() = c);
}

/// This thread's last error message (empty when none), as a C string that stays valid until
/// the thread's next failing call.
pub fn last_error_ptr() -> *const std::ffi::c_char {
    LAST.with(|l| l.borrow().as_ptr())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_errors_map_to_the_errno_verbs_uses() {
        let full = CapiError::from(DriverError::QueueFull {
            queue: "send queue",
            object: "QP",
            id: 3,
            depth: 8,
        });
        assert_eq!(full.errno, ENOMEM);
        assert!(full.quiet, "a full ring is retried, not reported");
        let gone = CapiError::from(DriverError::DeviceGone {
            bdf: Default::default(),
        });
        assert_eq!(gone.errno, EIO);
        assert!(gone.message.contains("gone"), "{}", gone.message);
        let busy = CapiError::from(DriverError::Admin {
            bdf: Default::default(),
            opcode: mrc_abi::device::admin::Opcode::DestroyCq,
            status: AdminStatus::InUse,
            syndrome: 0,
        });
        assert_eq!(busy.errno, EBUSY);
    }

    #[test]
    fn last_error_is_per_thread() {
        record("mrc_test", &CapiError::inval("bad thing").quiet());
        // SAFETY-free check: read back through the CString the pointer names.
        let here = LAST.with(|l| l.borrow().to_string_lossy().into_owned());
        assert_eq!(here, "mrc_test: bad thing (EINVAL)");
        let other = std::thread::spawn(|| LAST.with(|l| l.borrow().to_bytes().len()))
            .join()
            .unwrap();
        assert_eq!(other, 0);
    }
}
