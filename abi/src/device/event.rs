//! Asynchronous event records, 32 bytes, written by the device into the event queue.
//!
//! Ownership uses the same phase-bit rule as completions ([`crate::device::cqe::expected_owner`]).
//! Each kind uses the generic words `object` and `arg[0..4]` as documented on [`Event`]; unused
//! words are 0.

use crate::layout::le_struct;
use core::mem::{offset_of, size_of};
use zerocopy::little_endian::{U32, U64};

use super::{EvState, QPN_LIMIT};

/// Event kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u8)]
pub enum EventKind {
    /// A QP entered ERROR.
    QpFatal = 1,
    /// A CQ failed (overflow or DMA error).
    CqError = 2,
    /// A port came up.
    PortUp = 3,
    /// A port went down (every EV on its plane is retired).
    PortDown = 4,
    /// An EV of a QP changed state.
    EvStateChange = 5,
    /// An EV probe finished.
    EvProbeResult = 6,
    /// The device hit a fatal error (see the DEVICE status register).
    DeviceFatal = 7,
    /// A firmware event.
    Firmware = 8,
}

impl EventKind {
    /// The kind with code `v`, if any.
    pub const fn from_u8(v: u8) -> Option<Self> {
        match v {
            1 => Some(Self::QpFatal),
            2 => Some(Self::CqError),
            3 => Some(Self::PortUp),
            4 => Some(Self::PortDown),
            5 => Some(Self::EvStateChange),
            6 => Some(Self::EvProbeResult),
            7 => Some(Self::DeviceFatal),
            8 => Some(Self::Firmware),
            _ => None,
        }
    }
}

/// Why a CQ failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u8)]
pub enum CqErrorReason {
    /// The CQ was full when a completion had to be written.
    Overflow = 1,
    /// A DMA write of the CQ ring failed.
    AccessError = 2,
}

/// Firmware event codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u8)]
pub enum FwEventCode {
    /// A staged image was verified and committed; it runs after the next reset.
    UpdateCommitted = 1,
    /// The new image booted and waits for confirmation.
    UpdatePendingConfirm = 2,
    /// The device rolled back to the previous image.
    RolledBack = 3,
    /// A crash record from the previous boot is available (FW block).
    CrashRecorded = 4,
    /// The log ring overwrote unread data.
    LogOverflow = 5,
}

impl FwEventCode {
    /// The code with value `v`, if any.
    pub const fn from_u8(v: u8) -> Option<Self> {
        match v {
            1 => Some(Self::UpdateCommitted),
            2 => Some(Self::UpdatePendingConfirm),
            3 => Some(Self::RolledBack),
            4 => Some(Self::CrashRecorded),
            5 => Some(Self::LogOverflow),
            _ => None,
        }
    }
}

/// Event record flag: owner (phase) bit.
pub const EVENT_OWNER: u8 = 1 << 0;

le_struct! {
/// The event record as laid out in the ring, 32 bytes.
pub struct EventRecord {
    /// [`EventKind`].
    pub kind: u8,
    /// `EVENT_OWNER`.
    pub flags: u8,
    /// Reserved (0).
    pub rsvd: [u8; 2],
    /// The object: QPN, CQN or port number (per kind).
    pub object: U32,
    /// Kind-specific words.
    pub arg: [U32; 4],
    /// Device time of the event, ns.
    pub timestamp_ns: U64,
}
}

const _: () = {
    assert!(size_of::<EventRecord>() == 32);
    assert!(offset_of!(EventRecord, object) == 4);
    assert!(offset_of!(EventRecord, arg) == 8);
    assert!(offset_of!(EventRecord, timestamp_ns) == 24);
};

/// A validated event (without the owner bit and timestamp).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Event {
    /// `object` = qpn, `arg0` = the [`crate::device::cqe::CqeStatus`] code, `arg1` = syndrome.
    QpFatal {
        /// QP number.
        qpn: u32,
        /// Completion status describing the failure.
        status: u8,
        /// Detail.
        syndrome: u32,
    },
    /// `object` = cqn, `arg0` = reason.
    CqError {
        /// CQ number.
        cqn: u32,
        /// Why.
        reason: CqErrorReason,
    },
    /// `object` = port, `arg0` = plane, `arg1` = speed Mb/s.
    PortUp {
        /// Port number.
        port: u8,
        /// Plane.
        plane: u8,
        /// Link speed.
        speed_mbps: u32,
    },
    /// `object` = port, `arg0` = plane.
    PortDown {
        /// Port number.
        port: u8,
        /// Plane.
        plane: u8,
    },
    /// `object` = qpn, `arg0` = ev index, `arg1` = old state (7:0) | new state (15:8).
    EvStateChange {
        /// QP number.
        qpn: u32,
        /// EV index in the QP's table.
        ev_index: u16,
        /// Previous state.
        old: EvState,
        /// New state.
        new: EvState,
    },
    /// `object` = qpn, `arg0` = ev index, `arg1` = probe id, `arg2` = RTT ns (0 = lost),
    /// `arg3` = 1 when a reply arrived.
    EvProbeResult {
        /// QP number.
        qpn: u32,
        /// EV index probed.
        ev_index: u16,
        /// Probe id from the request.
        probe_id: u32,
        /// Round-trip time in ns, when `replied`.
        rtt_ns: u32,
        /// A reply arrived before the timeout.
        replied: bool,
    },
    /// `object` = 0, `arg0` = fatal code.
    DeviceFatal {
        /// Fatal code (also in the DEVICE status register).
        code: u16,
    },
    /// `object` = 0, `arg0` = code, `arg1` = argument (e.g. the image version).
    Firmware {
        /// What happened.
        code: FwEventCode,
        /// Detail.
        arg: u32,
    },
}

/// Why an event record is malformed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum EventError {
    /// Unknown kind.
    UnknownKind(u8),
    /// A field value is out of range for this kind (the field's byte offset).
    BadValue(u8),
    /// A reserved or unused field is not 0.
    ReservedSet,
}

impl Event {
    /// The kind of this event.
    pub const fn kind(&self) -> EventKind {
        match self {
            Event::QpFatal { .. } => EventKind::QpFatal,
            Event::CqError { .. } => EventKind::CqError,
            Event::PortUp { .. } => EventKind::PortUp,
            Event::PortDown { .. } => EventKind::PortDown,
            Event::EvStateChange { .. } => EventKind::EvStateChange,
            Event::EvProbeResult { .. } => EventKind::EvProbeResult,
            Event::DeviceFatal { .. } => EventKind::DeviceFatal,
            Event::Firmware { .. } => EventKind::Firmware,
        }
    }

    /// The generic words `(object, arg)` of this event (used by CSR `PostEvent` too).
    pub fn words(&self) -> (u32, [u32; 4]) {
        match *self {
            Event::QpFatal {
                qpn,
                status,
                syndrome,
            } => (qpn, [status.into(), syndrome, 0, 0]),
            Event::CqError { cqn, reason } => (cqn, [reason as u32, 0, 0, 0]),
            Event::PortUp {
                port,
                plane,
                speed_mbps,
            } => (port.into(), [plane.into(), speed_mbps, 0, 0]),
            Event::PortDown { port, plane } => (port.into(), [plane.into(), 0, 0, 0]),
            Event::EvStateChange {
                qpn,
                ev_index,
                old,
                new,
            } => (qpn, [ev_index.into(), old as u32 | (new as u32) << 8, 0, 0]),
            Event::EvProbeResult {
                qpn,
                ev_index,
                probe_id,
                rtt_ns,
                replied,
            } => (qpn, [ev_index.into(), probe_id, rtt_ns, replied.into()]),
            Event::DeviceFatal { code } => (0, [code.into(), 0, 0, 0]),
            Event::Firmware { code, arg } => (0, [code as u32, arg, 0, 0]),
        }
    }

    /// The event in its generic words.
    ///
    /// # Errors
    /// See [`EventError`]; `BadValue` carries the byte offset in the [`EventRecord`].
    pub fn from_words(kind: u8, object: u32, a: [u32; 4]) -> Result<Self, EventError> {
        let kind = EventKind::from_u8(kind).ok_or(EventError::UnknownKind(kind))?;
        let used = |n: usize| a[n..].iter().all(|w| *w == 0);
        let qpn = || {
            if object < QPN_LIMIT {
                Ok(object)
            } else {
                Err(EventError::BadValue(4))
            }
        };
        let small = |v: u32, max: u32, off: u8| {
            if v <= max {
                Ok(v)
            } else {
                Err(EventError::BadValue(off))
            }
        };
        let (ev, n) = match kind {
            EventKind::QpFatal => {
                let status = small(a[0], 0xFF, 8)? as u8;
                (
                    Event::QpFatal {
                        qpn: qpn()?,
                        status,
                        syndrome: a[1],
                    },
                    2,
                )
            }
            EventKind::CqError => {
                let reason = match a[0] {
                    1 => CqErrorReason::Overflow,
                    2 => CqErrorReason::AccessError,
                    _ => return Err(EventError::BadValue(8)),
                };
                (
                    Event::CqError {
                        cqn: object,
                        reason,
                    },
                    1,
                )
            }
            EventKind::PortUp | EventKind::PortDown => {
                let port = small(object, 0xFF, 4)? as u8;
                let plane = small(a[0], 0xFF, 8)? as u8;
                if kind == EventKind::PortUp {
                    (
                        Event::PortUp {
                            port,
                            plane,
                            speed_mbps: a[1],
                        },
                        2,
                    )
                } else {
                    (Event::PortDown { port, plane }, 1)
                }
            }
            EventKind::EvStateChange => {
                let ev_index = small(a[0], 0xFFFF, 8)? as u16;
                let s = small(a[1], 0xFFFF, 12)?;
                let old = EvState::from_u8(s as u8).ok_or(EventError::BadValue(12))?;
                let new = EvState::from_u8((s >> 8) as u8).ok_or(EventError::BadValue(13))?;
                (
                    Event::EvStateChange {
                        qpn: qpn()?,
                        ev_index,
                        old,
                        new,
                    },
                    2,
                )
            }
            EventKind::EvProbeResult => {
                let ev_index = small(a[0], 0xFFFF, 8)? as u16;
                let replied = small(a[3], 1, 20)? == 1;
                let ev = Event::EvProbeResult {
                    qpn: qpn()?,
                    ev_index,
                    probe_id: a[1],
                    rtt_ns: a[2],
                    replied,
                };
                (ev, 4)
            }
            EventKind::DeviceFatal => (
                Event::DeviceFatal {
                    code: small(a[0], 0xFFFF, 8)? as u16,
                },
                1,
            ),
            EventKind::Firmware => {
                let code = FwEventCode::from_u8(small(a[0], 0xFF, 8)? as u8)
                    .ok_or(EventError::BadValue(8))?;
                (Event::Firmware { code, arg: a[1] }, 2)
            }
        };
        let object_unused = matches!(kind, EventKind::DeviceFatal | EventKind::Firmware);
        if !used(n) || (object_unused && object != 0) {
            return Err(EventError::ReservedSet);
        }
        Ok(ev)
    }

    /// The ring entry.
    pub fn encode(&self, owner: bool, timestamp_ns: u64) -> EventRecord {
        let (object, arg) = self.words();
        EventRecord {
            kind: self.kind() as u8,
            flags: if owner { EVENT_OWNER } else { 0 },
            rsvd: [0; 2],
            object: object.into(),
            arg: arg.map(U32::new),
            timestamp_ns: timestamp_ns.into(),
        }
    }
}

impl EventRecord {
    /// The owner (phase) bit.
    pub const fn owner(&self) -> bool {
        self.flags & EVENT_OWNER != 0
    }

    /// Checks every field and returns the event.
    ///
    /// # Errors
    /// See [`EventError`].
    pub fn decode(&self) -> Result<Event, EventError> {
        if self.flags & !EVENT_OWNER != 0 || self.rsvd != [0; 2] {
            return Err(EventError::ReservedSet);
        }
        Event::from_words(self.kind, self.object.get(), self.arg.map(|w| w.get()))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    extern crate std;
    use super::*;
    use proptest::prelude::*;
    use zerocopy::{FromBytes, IntoBytes};

    #[test]
    fn byte_literal() {
        let e = Event::EvStateChange {
            qpn: 7,
            ev_index: 0x102,
            old: EvState::Good,
            new: EvState::AssumedBad,
        };
        let r = e.encode(true, 0x1000);
        assert_eq!(
            r.as_bytes(),
            &[
                5, 1, 0, 0, 7, 0, 0, 0, 2, 1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10, 0,
                0, 0, 0, 0, 0
            ]
        );
        assert_eq!(r.decode(), Ok(e));
        let mut bad = r;
        bad.arg[1] = 0x0900.into();
        assert_eq!(bad.decode(), Err(EventError::BadValue(13)));
        bad.kind = 99;
        assert_eq!(bad.decode(), Err(EventError::UnknownKind(99)));
    }

    pub(crate) fn event() -> impl Strategy<Value = Event> {
        let st = || proptest::sample::select(&EvState::ALL[..]);
        prop_oneof![
            (0..QPN_LIMIT, any::<u8>(), any::<u32>()).prop_map(|(qpn, status, syndrome)| {
                Event::QpFatal {
                    qpn,
                    status,
                    syndrome,
                }
            }),
            (any::<u32>(), any::<bool>()).prop_map(|(cqn, o)| Event::CqError {
                cqn,
                reason: if o {
                    CqErrorReason::Overflow
                } else {
                    CqErrorReason::AccessError
                }
            }),
            (any::<u8>(), any::<u8>(), any::<u32>()).prop_map(|(port, plane, speed_mbps)| {
                Event::PortUp {
                    port,
                    plane,
                    speed_mbps,
                }
            }),
            (any::<u8>(), any::<u8>()).prop_map(|(port, plane)| Event::PortDown { port, plane }),
            (0..QPN_LIMIT, any::<u16>(), st(), st()).prop_map(|(qpn, ev_index, old, new)| {
                Event::EvStateChange {
                    qpn,
                    ev_index,
                    old,
                    new,
                }
            }),
            (
                0..QPN_LIMIT,
                any::<u16>(),
                any::<u32>(),
                any::<u32>(),
                any::<bool>()
            )
                .prop_map(|(qpn, ev_index, probe_id, rtt_ns, replied)| {
                    Event::EvProbeResult {
                        qpn,
                        ev_index,
                        probe_id,
                        rtt_ns,
                        replied,
                    }
                }),
            any::<u16>().prop_map(|code| Event::DeviceFatal { code }),
            (1u8..=5, any::<u32>()).prop_map(|(c, arg)| Event::Firmware {
                code: FwEventCode::from_u8(c).unwrap(),
                arg
            }),
        ]
    }

    proptest! {
        #[test]
        fn round_trip(e in event(), owner: bool, ts: u64) {
            let r = e.encode(owner, ts);
            prop_assert_eq!(r.owner(), owner);
            prop_assert_eq!(r.decode(), Ok(e));
        }

        #[test]
        fn random_bytes_never_panic(b in proptest::array::uniform32(any::<u8>())) {
            let r = EventRecord::read_from_bytes(&b).unwrap();
            if let Ok(e) = r.decode() {
                let enc = e.encode(r.owner(), r.timestamp_ns.get());
                prop_assert_eq!(enc.as_bytes(), &b[..]);
            }
        }
    }
}
