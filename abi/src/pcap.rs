//! pcap files of MRC frames (std only), through the `pcap-file` crate: Ethernet link type,
//! microsecond timestamps. Wireshark and tshark read what this writes.

use std::io::{Read, Write};
use std::time::Duration;
use std::vec::Vec;

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapReader, PcapWriter};
use pcap_file::DataLink;

/// Why a pcap file could not be read or written.
#[derive(Debug)]
pub enum PcapError {
    /// The pcap layer failed (I/O or a malformed file).
    Pcap(pcap_file::PcapError),
    /// The file's link type is not Ethernet.
    NotEthernet(DataLink),
}

impl std::fmt::Display for PcapError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PcapError::Pcap(e) => write!(f, "pcap: {e}"),
            PcapError::NotEthernet(l) => write!(f, "pcap link type {l:?} is not Ethernet"),
        }
    }
}

impl std::error::Error for PcapError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PcapError::Pcap(e) => Some(e),
            PcapError::NotEthernet(_) => None,
        }
    }
}

impl From<pcap_file::PcapError> for PcapError {
    fn from(e: pcap_file::PcapError) -> Self {
        PcapError::Pcap(e)
    }
}

/// Writes Ethernet frames to a pcap stream.
pub struct Writer<W: Write> {
    inner: PcapWriter<W>,
}

impl<W: Write> Writer<W> {
    /// Start a pcap stream (Ethernet, microseconds, snaplen 65535).
    pub fn new(w: W) -> Result<Self, PcapError> {
        let header = PcapHeader {
            datalink: DataLink::ETHERNET,
            snaplen: 65535,
            ..Default::default()
        };
        Ok(Writer {
            inner: PcapWriter::with_header(w, header)?,
        })
    }

    /// Append one frame captured at `ts` (simulated or wall time since the epoch).
    pub fn write(&mut self, ts: Duration, frame: &[u8]) -> Result<(), PcapError> {
        let len = frame.len() as u32;
        self.inner.write_packet(&PcapPacket::new(ts, len, frame))?;
        Ok(())
    }

    /// Finish and return the underlying writer.
    pub fn into_inner(self) -> W {
        self.inner.into_writer()
    }
}

/// Reads Ethernet frames from a pcap stream.
pub struct Reader<R: Read> {
    inner: PcapReader<R>,
}

impl<R: Read> Reader<R> {
    /// Open a pcap stream; errors when it is not a pcap file or not Ethernet.
    pub fn new(r: R) -> Result<Self, PcapError> {
        let inner = PcapReader::new(r)?;
        let dl = inner.header().datalink;
        if dl != DataLink::ETHERNET {
            return Err(PcapError::NotEthernet(dl));
        }
        Ok(Reader { inner })
    }

    /// The next frame as (timestamp, bytes), `None` at the end.
    pub fn next_frame(&mut self) -> Option<Result<(Duration, Vec<u8>), PcapError>> {
        self.inner.next_packet().map(|r| {
            r.map(|p| (p.timestamp, p.data.into_owned()))
                .map_err(PcapError::from)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec;

    #[test]
    fn round_trip_in_memory() {
        let mut w = Writer::new(Vec::new()).unwrap();
        w.write(Duration::from_micros(5), &[1, 2, 3]).unwrap();
        w.write(Duration::from_micros(6), &[4; 100]).unwrap();
        let bytes = w.into_inner();
        let mut r = Reader::new(&bytes[..]).unwrap();
        assert_eq!(
            r.next_frame().unwrap().unwrap(),
            (Duration::from_micros(5), vec![1, 2, 3])
        );
        assert_eq!(r.next_frame().unwrap().unwrap().1.len(), 100);
        assert!(r.next_frame().is_none());
        assert!(Reader::new(&b"not a pcap file at all"[..]).is_err());
    }
}
