//! One vfio-user connection: framed requests and validated replies over a unix stream socket
//! with timeouts, and a watcher that notices the server hanging up while nobody is talking to
//! it.

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use vmm_sys_util::sock_ctrl_msg::ScmSocket;
use zerocopy::{FromBytes, IntoBytes};

use super::proto::{check_reply, Command, Header, ReplyError, FLAG_COMMAND, HEADER_BYTES};
use crate::sys::EventFd;

/// Why a request failed.
#[derive(Debug)]
pub(crate) enum ConnError {
    /// The socket failed, timed out or was closed: the connection is finished.
    Broken(io::Error),
    /// The server broke the framing or answered something else: the connection is finished.
    Protocol(String),
    /// The server answered with an error (its errno); the connection is still good.
    Refused(u32),
}

/// A connection's socket and message ids. Requests are strictly one at a time: a reply is read
/// completely (or the connection is declared broken) before the next request is sent.
pub(crate) struct Conn {
    stream: UnixStream,
    next_id: u16,
}

/// A reply body.
pub(crate) type Reply = Vec<u8>;

impl Conn {
    pub fn new(stream: UnixStream) -> Conn {
        Conn { stream, next_id: 0 }
    }

    /// Bounds every later socket read and write by `t`.
    pub fn set_timeout(&self, t: Duration) -> io::Result<()> {
        let t = Some(t.max(Duration::from_millis(1)));
        self.stream.set_read_timeout(t)?;
        self.stream.set_write_timeout(t)
    }

    pub fn stream(&self) -> &UnixStream {
        &self.stream
    }

    /// Sends `command` with a body made of `parts` (and `fds` as SCM_RIGHTS) and returns the
    /// reply's body after checking it answers this request.
    pub fn request(
        &mut self,
        command: Command,
        parts: &[&[u8]],
        fds: &[RawFd],
    ) -> Result<Reply, ConnError> {
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1);
        let body: usize = parts.iter().map(|p| p.len()).sum();
        let header = Header {
            msg_id: id,
            command: command as u16,
            msg_size: (HEADER_BYTES + body) as u32,
            flags: FLAG_COMMAND,
            error: 0,
        };
        let mut msg = Vec::with_capacity(HEADER_BYTES + body);
        msg.extend_from_slice(header.as_bytes());
        for p in parts {
            msg.extend_from_slice(p);
        }
        self.send(&msg, fds).map_err(ConnError::Broken)?;
        let mut raw = [0u8; HEADER_BYTES];
        self.stream
            .read_exact(&mut raw)
            .map_err(|e| ConnError::Broken(eof(e)))?;
        let reply = Header::read_from_bytes(&raw[..]).unwrap_or_default();
        let checked = check_reply(&reply, command, id);
        if let Err(ReplyError::Mismatch(what)) = checked {
            return Err(ConnError::Protocol(what));
        }
        let mut body = vec![0u8; reply.msg_size as usize - HEADER_BYTES];
        self.stream
            .read_exact(&mut body)
            .map_err(|e| ConnError::Broken(eof(e)))?;
        match checked {
            Err(ReplyError::Refused(errno)) => Err(ConnError::Refused(errno)),
            _ => Ok(body),
        }
    }

    /// Writes the whole message, the descriptors riding on its first bytes.
    fn send(&mut self, msg: &[u8], fds: &[RawFd]) -> io::Result<()> {
        let sent = if fds.is_empty() {
            0
        } else {
            self.stream
                .send_with_fds(&[msg], fds)
                .map_err(|e| io::Error::from_raw_os_error(e.errno()))?
        };
        self.stream.write_all(&msg[sent..])
    }
}

/// A clean end of stream is the server closing the connection: say so.
fn eof(e: io::Error) -> io::Error {
    if e.kind() == io::ErrorKind::UnexpectedEof {
        io::Error::new(
            io::ErrorKind::ConnectionAborted,
            "the server closed the connection",
        )
    } else {
        e
    }
}

/// Watches a connection's socket for the server hanging up (`POLLRDHUP`/`POLLHUP`); when it
/// does, sets `gone` and signals every eventfd in `wake` so that waiters return at once.
pub(crate) struct Watcher {
    stop: Arc<EventFd>,
    thread: Option<JoinHandle<()>>,
}

impl Watcher {
    /// Starts watching a duplicate of `stream`.
    ///
    /// # Errors
    /// `dup`, eventfd or thread creation failed.
    pub fn start(
        stream: &UnixStream,
        gone: Arc<AtomicBool>,
        wake: Vec<EventFd>,
        name: String,
    ) -> io::Result<Watcher> {
        let sock = stream.try_clone()?;
        let stop = Arc::new(EventFd::new()?);
        let stop2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name("vfio-user-watch".into())
            .spawn(move || {
                if wait_hangup(sock.as_raw_fd(), stop2.as_raw_fd()) {
                    if !gone.swap(true, Ordering::SeqCst) {
                        log::error!("{name}: the vfio-user server closed the connection");
                    }
                    for w in &wake {
                        let _ = w.signal(1);
                    }
                }
            })?;
        Ok(Watcher {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        let _ = self.stop.signal(1);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Blocks until `sock` reports a hang-up (true) or `stop` becomes readable (false).
fn wait_hangup(sock: RawFd, stop: RawFd) -> bool {
    loop {
        let mut fds = [
            libc::pollfd {
                fd: sock,
                events: libc::POLLRDHUP,
                revents: 0,
            },
            libc::pollfd {
                fd: stop,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: `fds` is an array of two valid pollfds and we pass its length.
        let r = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if r < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            // poll itself failed: stop watching; requests still see a dead socket.
            return false;
        }
        if fds[1].revents != 0 {
            return false;
        }
        let hangup = libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR | libc::POLLNVAL;
        if fds[0].revents & hangup != 0 {
            return true;
        }
    }
}
