//! A non-blocking Linux eventfd: the interrupt notification object (VFIO writes it when an MSI-X
//! vector fires; the twin writes it when a test raises an interrupt).
//!
//! It wraps rust-vmm's `vmm_sys_util::eventfd::EventFd`, the type `vfio-ioctls` takes when it
//! wires interrupt vectors ([`EventFd::as_vmm`]).

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::time::Duration;

use vmm_sys_util::eventfd::EventFd as VmmEventFd;

/// An eventfd counter (`EFD_NONBLOCK | EFD_CLOEXEC`).
#[derive(Debug)]
pub struct EventFd {
    fd: VmmEventFd,
}

impl EventFd {
    /// A new eventfd with count 0.
    ///
    /// # Errors
    /// `eventfd(2)` failed (e.g. out of file descriptors).
    pub fn new() -> io::Result<EventFd> {
        let fd = VmmEventFd::new(libc::EFD_NONBLOCK | libc::EFD_CLOEXEC)?;
        Ok(EventFd { fd })
    }

    /// Takes an eventfd another process sent (a vfio-user client's SET_IRQS), after checking
    /// it is one, and makes it non-blocking so that signalling it can never stall the caller.
    ///
    /// # Errors
    /// `InvalidInput` when `fd` is not an eventfd; `fcntl` failed.
    pub fn adopt(fd: OwnedFd) -> io::Result<EventFd> {
        let link = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))?;
        if link.as_os_str() != "anon_inode:[eventfd]" {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("not an eventfd: {}", link.display()),
            ));
        }
        // SAFETY: fcntl(F_GETFL) on a descriptor `fd` owns.
        let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
        if flags < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fcntl(F_SETFL) on a descriptor `fd` owns, with its flags plus O_NONBLOCK.
        if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the descriptor is an eventfd (checked above) whose ownership moves here.
        let fd = unsafe { VmmEventFd::from_raw_fd(fd.into_raw_fd()) };
        Ok(EventFd { fd })
    }

    /// Another handle on the same counter (for sending it to another process).
    ///
    /// # Errors
    /// `dup` failed.
    pub fn try_clone(&self) -> io::Result<EventFd> {
        Ok(EventFd {
            fd: self.fd.try_clone()?,
        })
    }

    /// Adds `n` to the counter (what the kernel does when the interrupt fires).
    ///
    /// # Errors
    /// `write(2)` failed (the counter would overflow).
    pub fn signal(&self, n: u64) -> io::Result<()> {
        self.fd.write(n)
    }

    /// Reads and resets the counter; 0 when nothing is pending.
    ///
    /// # Errors
    /// `read(2)` failed with something other than `EAGAIN`.
    pub fn take(&self) -> io::Result<u64> {
        match self.fd.read() {
            Ok(n) => Ok(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
            Err(e) => Err(e),
        }
    }

    /// The rust-vmm eventfd inside (what `vfio-ioctls` wires to a vector).
    pub(crate) fn as_vmm(&self) -> &VmmEventFd {
        &self.fd
    }

    /// Waits up to `timeout` for a non-zero count, then takes it; 0 on timeout.
    ///
    /// # Errors
    /// `poll(2)` or `read(2)` failed.
    pub fn wait(&self, timeout: Duration) -> io::Result<u64> {
        let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
        // Round sub-millisecond timeouts up so a non-zero timeout never busy-returns.
        let ms = if ms == 0 && !timeout.is_zero() { 1 } else { ms };
        loop {
            let mut pfd = libc::pollfd {
                fd: self.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: `pfd` is one valid pollfd and we pass a count of 1.
            let r = unsafe { libc::poll(&mut pfd, 1, ms) };
            if r < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            return if r == 0 { Ok(0) } else { self.take() };
        }
    }
}

impl AsFd for EventFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: the descriptor is owned by `self.fd` and stays open for as long as `self`
        // is borrowed, which bounds the returned lifetime.
        unsafe { BorrowedFd::borrow_raw(self.fd.as_raw_fd()) }
    }
}

impl AsRawFd for EventFd {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_accumulate_and_reset() {
        let e = EventFd::new().unwrap();
        assert_eq!(e.take().unwrap(), 0);
        e.signal(1).unwrap();
        e.signal(2).unwrap();
        assert_eq!(e.wait(Duration::from_millis(10)).unwrap(), 3);
        assert_eq!(
            e.wait(Duration::from_millis(1)).unwrap(),
            0,
            "timeout gives 0"
        );
        assert!(
            e.signal(u64::MAX).is_err(),
            "0xffff_ffff_ffff_ffff is not a valid add"
        );
    }

    #[test]
    fn adopt_takes_eventfds_only() {
        let e = EventFd::new().unwrap();
        let copy = e.as_fd().try_clone_to_owned().unwrap();
        let adopted = EventFd::adopt(copy).unwrap();
        adopted.signal(5).unwrap();
        assert_eq!(e.take().unwrap(), 5, "one counter, two handles");
        let file = std::fs::File::open("/proc/self/maps").unwrap();
        let err = EventFd::adopt(file.into()).unwrap_err();
        assert!(err.to_string().contains("not an eventfd"), "{err}");
    }
}
