//! Out-of-band connection setup: two peers swap a fixed 48-byte [`ConnInfo`] over TCP (the
//! way the OCP examples exchange QPN, address and rkey), with bounded timeouts on every step.
//!
//! Wire form (little-endian): magic `"MRCX"`, qpn, psn, rkey (u32 each), addr, len (u64 each),
//! gid (16 bytes).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

const MAGIC: [u8; 4] = *b"MRCX";
/// Bytes of an encoded [`ConnInfo`].
pub const CONN_INFO_BYTES: usize = 48;

/// What a peer needs to connect to us and write into our memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ConnInfo {
    /// Our QPN.
    pub qpn: u32,
    /// Our first send PSN (the peer's `rq_psn`).
    pub psn: u32,
    /// rkey of the buffer the peer may write.
    pub rkey: u32,
    /// Its virtual address.
    pub addr: u64,
    /// Its length.
    pub len: u64,
    /// Our NIC address.
    pub gid: [u8; 16],
}

impl ConnInfo {
    /// The wire form.
    pub fn encode(&self) -> [u8; CONN_INFO_BYTES] {
        let mut b = [0u8; CONN_INFO_BYTES];
        b[0..4].copy_from_slice(&MAGIC);
        b[4..8].copy_from_slice(&self.qpn.to_le_bytes());
        b[8..12].copy_from_slice(&self.psn.to_le_bytes());
        b[12..16].copy_from_slice(&self.rkey.to_le_bytes());
        b[16..24].copy_from_slice(&self.addr.to_le_bytes());
        b[24..32].copy_from_slice(&self.len.to_le_bytes());
        b[32..48].copy_from_slice(&self.gid);
        b
    }
    /// Parses the wire form; `None` on a bad magic.
    pub fn decode(b: &[u8; CONN_INFO_BYTES]) -> Option<ConnInfo> {
        if b[0..4] != MAGIC {
            return None;
        }
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(w)
        };
        let mut gid = [0u8; 16];
        gid.copy_from_slice(&b[32..48]);
        Some(ConnInfo {
            qpn: u32_at(4),
            psn: u32_at(8),
            rkey: u32_at(12),
            addr: u64_at(16),
            len: u64_at(24),
            gid,
        })
    }
}

fn io_err<'a>(peer: &'a str, what: &'static str) -> impl FnOnce(std::io::Error) -> Error + 'a {
    move |source| Error::Connect {
        peer: peer.to_owned(),
        what,
        source,
    }
}

fn swap(mut s: TcpStream, peer: &str, local: &ConnInfo, timeout: Duration) -> Result<ConnInfo> {
    s.set_read_timeout(Some(timeout))
        .map_err(io_err(peer, "set read timeout"))?;
    s.set_write_timeout(Some(timeout))
        .map_err(io_err(peer, "set write timeout"))?;
    s.set_nodelay(true).map_err(io_err(peer, "set nodelay"))?;
    s.write_all(&local.encode())
        .map_err(io_err(peer, "send connection info"))?;
    let mut b = [0u8; CONN_INFO_BYTES];
    s.read_exact(&mut b)
        .map_err(io_err(peer, "receive connection info"))?;
    ConnInfo::decode(&b).ok_or_else(|| Error::Connect {
        peer: peer.to_owned(),
        what: "peer sent no MRCX connection info",
        source: std::io::Error::from(std::io::ErrorKind::InvalidData),
    })
}

/// Accepts one peer on `listener` (waiting at most `timeout`) and swaps connection info.
///
/// # Errors
/// [`Error::Connect`] naming the step (accept timed out, short read, bad magic).
pub fn exchange_server(
    listener: &TcpListener,
    local: &ConnInfo,
    timeout: Duration,
) -> Result<ConnInfo> {
    let me = listener
        .local_addr()
        .map_or_else(|_| "listener".to_owned(), |a| a.to_string());
    listener
        .set_nonblocking(true)
        .map_err(io_err(&me, "set listener nonblocking"))?;
    let start = Instant::now();
    let stream = loop {
        match listener.accept() {
            Ok((s, _)) => break s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if start.elapsed() >= timeout {
                    return Err(Error::Connect {
                        peer: me,
                        what: "no peer connected before the timeout",
                        source: std::io::Error::from(std::io::ErrorKind::TimedOut),
                    });
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(e) => return Err(io_err(&me, "accept")(e)),
        }
    };
    stream
        .set_nonblocking(false)
        .map_err(io_err(&me, "set stream blocking"))?;
    let peer = stream
        .peer_addr()
        .map_or_else(|_| me.clone(), |a| a.to_string());
    swap(stream, &peer, local, timeout)
}

/// Connects to `peer` (at most `timeout`) and swaps connection info.
///
/// # Errors
/// [`Error::Connect`] naming the step.
pub fn exchange_client(peer: SocketAddr, local: &ConnInfo, timeout: Duration) -> Result<ConnInfo> {
    let name = peer.to_string();
    let s = TcpStream::connect_timeout(&peer, timeout).map_err(io_err(&name, "connect"))?;
    swap(s, &name, local, timeout)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conn_info_round_trips_and_rejects_garbage() {
        let c = ConnInfo {
            qpn: 7,
            psn: 0xabcdef,
            rkey: 0x8000_0001,
            addr: 0x1_0000_2000,
            len: 4096,
            gid: [0xfd; 16],
        };
        assert_eq!(ConnInfo::decode(&c.encode()), Some(c));
        assert_eq!(ConnInfo::decode(&[0; CONN_INFO_BYTES]), None);
    }

    #[test]
    fn server_times_out_without_peer() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let e = exchange_server(&l, &ConnInfo::default(), Duration::from_millis(30)).unwrap_err();
        assert!(e.to_string().contains("no peer connected"), "{e}");
    }
}
