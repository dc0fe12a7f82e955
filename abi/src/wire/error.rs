//! Decode and encode errors: small, `Copy`, and each says what is wrong where.

use core::fmt;

/// Which header an [`Error`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[allow(missing_docs)]
pub enum Header {
    Ethernet,
    Ipv6,
    InnerIpv6,
    Srh,
    Udp,
    Bth,
    Mrh,
    Evx,
    Tsx,
    Reth,
    ImmDt,
    Ack,
    Nack,
    Probe,
    Payload,
}

impl Header {
    /// The header's short name, as WIRE.md and the JSON decoder spell it.
    pub const fn name(self) -> &'static str {
        match self {
            Header::Ethernet => "eth",
            Header::Ipv6 => "ipv6",
            Header::InnerIpv6 => "inner_ipv6",
            Header::Srh => "srh",
            Header::Udp => "udp",
            Header::Bth => "bth",
            Header::Mrh => "mrh",
            Header::Evx => "evx",
            Header::Tsx => "tsx",
            Header::Reth => "reth",
            Header::ImmDt => "immdt",
            Header::Ack => "ack",
            Header::Nack => "nack",
            Header::Probe => "probe",
            Header::Payload => "payload",
        }
    }
}

/// Why a frame could not be parsed or emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Error {
    /// The buffer ends before the header does.
    Truncated {
        /// The header being read.
        header: Header,
        /// Bytes the header needs from its start.
        need: usize,
        /// Bytes that were there.
        have: usize,
    },
    /// A length field disagrees with the bytes present.
    LengthMismatch {
        /// The header whose length field is wrong.
        header: Header,
        /// The length the field announces.
        announced: usize,
        /// The length actually present.
        actual: usize,
    },
    /// The EtherType is not IPv6.
    BadEthertype(u16),
    /// The IP version nibble is not 6.
    BadIpVersion {
        /// Which IPv6 header.
        header: Header,
        /// The version found.
        version: u8,
    },
    /// A next-header value this encapsulation does not allow.
    BadNextHeader {
        /// The header carrying the value.
        header: Header,
        /// The value found.
        value: u8,
    },
    /// The routing header is not an SRH (routing type 4).
    BadRoutingType(u8),
    /// The SRH segment list does not fit in its header extension length.
    SrhSegmentListOverrun {
        /// Last Entry field.
        last_entry: u8,
        /// Hdr Ext Len field (8-octet units).
        hdr_ext_len: u8,
    },
    /// Segments Left points past Last Entry.
    SrhSegmentsLeft {
        /// Segments Left field.
        segments_left: u8,
        /// Last Entry field.
        last_entry: u8,
    },
    /// A TLV runs past the end of the SRH.
    SrhBadTlv {
        /// Byte offset of the TLV from the start of the SRH.
        offset: usize,
    },
    /// More segments or TLV bytes than this implementation holds.
    SrhTooLarge {
        /// Segments in the list.
        segments: usize,
        /// TLV bytes.
        tlv_bytes: usize,
    },
    /// An SRH to emit has an empty segment list.
    SrhEmpty,
    /// An STEV packet's UDP source port lacks the 0xC prefix.
    BadStevPort(u16),
    /// The UDP destination port is not 4791.
    BadUdpPort(u16),
    /// The UDP checksum is zero (MRC makes it mandatory).
    ZeroChecksum,
    /// The UDP checksum does not match the data.
    BadChecksum {
        /// Checksum in the packet.
        found: u16,
        /// Checksum computed over the packet.
        expected: u16,
    },
    /// BTH transport version is not 0 or pad count is not 0.
    BadBth {
        /// Transport version found.
        tver: u8,
        /// Pad count found.
        pad_count: u8,
    },
    /// Opcode outside the MRC opcode set.
    UnknownOpcode(u8),
    /// MRH version is not [`super::MRC_VERSION`].
    BadMrcVersion(u8),
    /// MRH EV format 3 (reserved).
    BadEvFormat(u8),
    /// The MRH EV format disagrees with the encapsulation (SRv6 format without an outer
    /// IPv6-in-IPv6 header, or the reverse).
    EvFormatMismatch,
    /// NACK reason code outside the defined set.
    UnknownNackReason(u8),
    /// RETH DMA length differs from the payload of an untrimmed packet.
    DmaLengthMismatch {
        /// DMA length in the RETH.
        dma_len: u32,
        /// Payload bytes present.
        payload: usize,
    },
    /// A trimmed packet still carries payload, or a control packet carries any.
    UnexpectedPayload(usize),
    /// An emit target buffer is too small.
    BufferTooSmall {
        /// Bytes needed.
        need: usize,
        /// Bytes given.
        have: usize,
    },
    /// The uSID carrier holds more than six uSIDs or a zero uSID before a non-zero one.
    BadUsidCarrier,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Error::Truncated { header, need, have } => {
                write!(f, "{} header truncated: needs {need} bytes, {have} present", header.name())
            }
            Error::LengthMismatch { header, announced, actual } => write!(
                f,
                "{} length field says {announced} bytes but {actual} are present",
                header.name()
            ),
            Error::BadEthertype(t) => write!(f, "ethertype 0x{t:04x} is not IPv6 (0x86dd)"),
            Error::BadIpVersion { header, version } => {
                write!(f, "{} version is {version}, expected 6", header.name())
            }
            Error::BadNextHeader { header, value } => {
                write!(f, "{} next header {value} is not allowed here", header.name())
            }
            Error::BadRoutingType(t) => write!(f, "routing type {t} is not SRH (4)"),
            Error::SrhSegmentListOverrun { last_entry, hdr_ext_len } => write!(
                f,
                "srh segment list of {} entries does not fit in hdr ext len {hdr_ext_len}",
                last_entry as usize + 1
            ),
            Error::SrhSegmentsLeft { segments_left, last_entry } => {
                write!(f, "srh segments left {segments_left} exceeds last entry {last_entry}")
            }
            Error::SrhBadTlv { offset } => write!(f, "srh TLV at byte {offset} runs past the header"),
            Error::SrhTooLarge { segments, tlv_bytes } => write!(
                f,
                "srh with {segments} segments and {tlv_bytes} TLV bytes exceeds {} segments / {} TLV bytes",
                super::srh::MAX_SEGMENTS,
                super::srh::MAX_TLV_BYTES
            ),
            Error::SrhEmpty => write!(f, "srh segment list is empty"),
            Error::BadStevPort(p) => {
                write!(f, "stev udp source port 0x{p:04x} lacks the 0xc000 prefix")
            }
            Error::BadUdpPort(p) => write!(f, "udp destination port {p} is not MRC (4791)"),
            Error::ZeroChecksum => write!(f, "udp checksum is zero; MRC requires it"),
            Error::BadChecksum { found, expected } => {
                write!(f, "udp checksum 0x{found:04x} is wrong, expected 0x{expected:04x}")
            }
            Error::BadBth { tver, pad_count } => {
                write!(f, "bth transport version {tver} / pad count {pad_count}, both must be 0")
            }
            Error::UnknownOpcode(o) => write!(f, "bth opcode 0x{o:02x} is not an MRC opcode"),
            Error::BadMrcVersion(v) => {
                write!(f, "mrh version {v} is not supported (expected {})", super::MRC_VERSION)
            }
            Error::BadEvFormat(v) => write!(f, "mrh ev format {v} is reserved"),
            Error::EvFormatMismatch => {
                write!(f, "mrh ev format does not match the encapsulation (srv6 needs IPv6-in-IPv6)")
            }
            Error::UnknownNackReason(r) => write!(f, "nack reason {r} is not defined"),
            Error::DmaLengthMismatch { dma_len, payload } => {
                write!(f, "reth dma length {dma_len} but the untrimmed payload has {payload} bytes")
            }
            Error::UnexpectedPayload(n) => {
                write!(f, "{n} payload bytes where none are allowed (control or trimmed packet)")
            }
            Error::BufferTooSmall { need, have } => {
                write!(f, "output buffer of {have} bytes, {need} needed")
            }
            Error::BadUsidCarrier => write!(f, "uSID carrier holds more than 6 uSIDs or a zero uSID"),
        }
    }
}

impl core::error::Error for Error {}
