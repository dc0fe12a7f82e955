//! The C boundary: every exported function, and the only unsafe code of the crate.
//!
//! Each entry point (1) checks its pointers are non-NULL and copies the caller's input structs,
//! (2) calls the safe implementation with plain values and handles, (3) writes the outputs, and
//! (4) turns an error into the header's convention through `ret_minus_one`, `ret_errno` or
//! `ret_null`, which also set `errno` and record the message. A panic never crosses the
//! boundary: it becomes `EIO` ("internal error") like any other failure.
//!
//! Caller memory is trusted only as far as the header says it must be valid: a pointer the
//! caller passes for a struct is read or written once, whole, as that struct. Handles (opaque
//! MRC objects and verbs structs) are looked up before use, so a NULL, foreign or stale one is
//! an error, not a dereference.
#![allow(unsafe_code)]
#![warn(clippy::undocumented_unsafe_blocks)]
// The exported functions take C pointers by the headers' contract (a C caller cannot be made to
// write `unsafe`); each dereference is an `unsafe` block naming that contract.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

pub mod app;
pub mod ctl;
pub mod verbs;

use std::ffi::{c_char, c_int};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::NonNull;

use crate::error::{record, CapiError, Result, EIO};

/// A C struct this library owns and hands to C callers by address: allocated once, never
/// moved, freed on drop. Rust code never holds a reference into it after construction (the
/// caller may read it at any time), only its address.
pub struct CBox<T: ?Sized>(NonNull<T>);

// SAFETY: the boxed value is written only while it is being constructed (before its address
// escapes) and is otherwise only read, by C callers; the raw pointers inside it are plain
// data to Rust. Moving the owner between threads moves no data.
unsafe impl<T: ?Sized> Send for CBox<T> {}
// SAFETY: as above: no `&T`/`&mut T` is ever handed out, so shared access is address-only.
unsafe impl<T: ?Sized> Sync for CBox<T> {}

impl<T> CBox<T> {
    /// Boxes `value`.
    pub fn new(value: T) -> CBox<T> {
        CBox::from_box(Box::new(value))
    }
}

impl<T: ?Sized> CBox<T> {
    /// Takes over `b` (e.g. a boxed slice).
    pub fn from_box(b: Box<T>) -> CBox<T> {
        CBox(NonNull::from(Box::leak(b)))
    }
    /// Its address, as C callers hold it.
    pub fn ptr(&self) -> *mut T {
        self.0.as_ptr()
    }
    /// Its address as an integer (the key of [`crate::handle::AddrMap`]).
    pub fn addr(&self) -> usize {
        self.0.as_ptr().cast::<u8>() as usize
    }
}

impl<T: ?Sized> Drop for CBox<T> {
    fn drop(&mut self) {
        // SAFETY: the pointer came from `Box::leak` in `new` and is dropped exactly once.
        drop(unsafe { Box::from_raw(self.0.as_ptr()) });
    }
}

impl<T: ?Sized> std::fmt::Debug for CBox<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CBox({:p})", self.0)
    }
}

/// C structs the library keeps copies of: plain data whose pointer fields are handles or the
/// caller's values handed back, never dereferenced by Rust.
pub trait PlainC: Copy {}
impl PlainC for crate::ctypes::mrc::mrc_qp_attr {}
impl PlainC for crate::ctypes::mrc::mrc_qp_init_attr {}

/// A kept copy of a [`PlainC`] struct, shareable between threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(transparent)]
pub struct CData<T: PlainC>(pub T);

// SAFETY: `PlainC` types are plain data to Rust (their raw pointers are never dereferenced
// here), so moving a copy between threads moves only integers.
unsafe impl<T: PlainC> Send for CData<T> {}
// SAFETY: as above; shared access reads plain data.
unsafe impl<T: PlainC> Sync for CData<T> {}

impl<T: PlainC> std::ops::Deref for CData<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: PlainC> std::ops::DerefMut for CData<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

/// Sets the calling thread's `errno`.
pub fn set_errno(e: c_int) {
    // SAFETY: `__errno_location` returns the calling thread's errno slot, always valid.
    unsafe { *libc::__errno_location() = e };
}

/// Runs `f` as C function `name`; an error (or a panic) is recorded, sets `errno`, and is
/// turned into the return value by `on_err`.
pub(crate) fn call<T>(
    name: &str,
    on_err: impl FnOnce(c_int) -> T,
    f: impl FnOnce() -> Result<T>,
) -> T {
    let e = match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => return v,
        Ok(Err(e)) => e,
        Err(p) => {
            let what = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            CapiError::new(EIO, format!("internal error in lib_mrc: {what}"))
        }
    };
    record(name, &e);
    set_errno(e.errno);
    on_err(e.errno)
}

/// Convention "0 on success, -1 on failure (errno set)".
pub(crate) fn ret_minus_one(name: &str, f: impl FnOnce() -> Result<()>) -> c_int {
    call(name, |_| -1, || f().map(|()| 0))
}

/// Convention "0 on success, the errno value on failure" (`ibv_post_send` and kin; `errno`
/// is set too).
pub(crate) fn ret_errno(name: &str, f: impl FnOnce() -> Result<()>) -> c_int {
    call(name, |e| e, || f().map(|()| 0))
}

/// Convention "a count >= 0, or -1 on failure (errno set)".
pub(crate) fn ret_count(name: &str, f: impl FnOnce() -> Result<c_int>) -> c_int {
    call(name, |_| -1, f)
}

/// Convention "a pointer, or NULL on failure (errno set)".
pub(crate) fn ret_null<T>(name: &str, f: impl FnOnce() -> Result<*mut T>) -> *mut T {
    call(name, |_| std::ptr::null_mut(), f)
}

/// A `void` function: errors are recorded and set `errno`; nothing is returned.
pub(crate) fn ret_void(name: &str, f: impl FnOnce() -> Result<()>) {
    call(name, |_| (), f)
}

/// Copies the struct `p` points to.
///
/// # Errors
/// `EINVAL` naming `what` when `p` is NULL.
///
/// # Safety
/// A non-NULL `p` must point to a readable, initialised `T` (the header's contract for the
/// argument).
pub(crate) unsafe fn read_in<T: Copy>(p: *const T, what: &str) -> Result<T> {
    if p.is_null() {
        return Err(CapiError::inval(format!("{what} is NULL")));
    }
    // SAFETY: non-NULL, and the caller vouches for a readable `T`; `read_unaligned` needs no
    // alignment from the caller.
    Ok(unsafe { p.read_unaligned() })
}

/// Copies the struct `p` points to, or `None` for NULL.
///
/// # Safety
/// As [`read_in`].
pub(crate) unsafe fn read_opt<T: Copy>(p: *const T) -> Option<T> {
    // SAFETY: the caller's contract.
    (!p.is_null()).then(|| unsafe { p.read_unaligned() })
}

/// Writes `v` to `p`.
///
/// # Errors
/// `EINVAL` naming `what` when `p` is NULL.
///
/// # Safety
/// A non-NULL `p` must point to writable memory for a `T`.
pub(crate) unsafe fn write_out<T>(p: *mut T, v: T, what: &str) -> Result<()> {
    if p.is_null() {
        return Err(CapiError::inval(format!("{what} is NULL")));
    }
    // SAFETY: non-NULL, and the caller vouches for writable memory of a `T`.
    unsafe { p.write_unaligned(v) };
    Ok(())
}

/// Writes a query's attributes and `*supported = 1` (the `_query_device` calls).
///
/// # Errors
/// `EINVAL` for a NULL pointer.
///
/// # Safety
/// As [`write_out`], for both pointers.
pub(crate) unsafe fn write_supported<T>(attr: *mut T, a: T, supported: *mut c_int) -> Result<()> {
    // SAFETY: the caller's contract.
    unsafe {
        write_out(attr, a, "attr")?;
        write_out(supported, 1, "supported")
    }
}

/// Stores `failed` in `*bad_wr` when a post failed (`rc != 0`) and the caller gave `bad_wr`.
pub(crate) fn report_bad_wr<T>(rc: c_int, bad_wr: *mut *mut T, failed: *mut T) -> c_int {
    if rc != 0 && !bad_wr.is_null() {
        // SAFETY: a non-NULL out pointer of the header (`struct ibv_*_wr **bad_wr`).
        unsafe { bad_wr.write(failed) };
    }
    rc
}

/// The extension of this library: the message of the calling thread's last failure (empty
/// when none), valid until its next failing call.
#[no_mangle]
pub extern "C" fn mrc_capi_last_error() -> *const c_char {
    crate::error::last_error_ptr()
}

/// Whether the open file `fd` is in non-blocking mode.
pub fn fd_nonblocking(fd: BorrowedFd<'_>) -> bool {
    // SAFETY: F_GETFL only reads the flags of a descriptor the borrow keeps open.
    let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
    flags >= 0 && flags & libc::O_NONBLOCK != 0
}

/// A blocking epoll instance watching `fd` for input: the fd a completion channel shows its
/// caller. It is readable when `fd` is, and its file status flags (`O_NONBLOCK`) are the
/// caller's to set, apart from the driver's interrupt eventfd (always non-blocking).
///
/// # Errors
/// `epoll_create1` or `epoll_ctl` failed.
pub fn epoll_watching(fd: BorrowedFd<'_>) -> std::io::Result<OwnedFd> {
    // SAFETY: epoll_create1 takes no pointer; a non-negative return is a new descriptor we
    // own from here on.
    let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if ep < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `ep` was just created and is owned by nobody else.
    let ep = unsafe { OwnedFd::from_raw_fd(ep) };
    let mut ev = libc::epoll_event {
        events: libc::EPOLLIN as u32,
        u64: 0,
    };
    // SAFETY: both descriptors are open (owned / borrowed) and `ev` is a valid epoll_event
    // the call only reads.
    let rc =
        unsafe { libc::epoll_ctl(ep.as_raw_fd(), libc::EPOLL_CTL_ADD, fd.as_raw_fd(), &mut ev) };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(ep)
}
