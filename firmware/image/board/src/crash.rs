//! The crash record: why the core last went down, kept in `NOINIT` RAM across reset.
//!
//! Layout (little-endian, 160 bytes, at the `NOINIT` origin):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | magic `b"MRCR"` (anything else: no record) |
//! | 4 | 2 | layout version (1) |
//! | 6 | 2 | reason: 1 panic, 2 watchdog, 3 exception |
//! | 8 | 4 | boot count at the crash |
//! | 12 | 4 | panic line / `mcause` |
//! | 16 | 4 | `mepc` (exceptions) or 0 |
//! | 20 | 4 | bytes of `file` used |
//! | 24 | 64 | panic file path (truncated from the left, UTF-8) |
//! | 88 | 4 | events recorded in total (index of the next slot is this mod 16) |
//! | 92 | 64 | the last 16 event codes, a ring of u32 |
//! | 156 | 4 | CRC-32 of bytes 0..156 |
//!
//! Event codes are `(kind << 24) | detail`, kinds in [`EventKind`].

/// Events kept.
pub const TRACE_LEN: usize = 16;
/// Path bytes kept.
pub const FILE_LEN: usize = 64;
const MAGIC: u32 = u32::from_le_bytes(*b"MRCR");

/// Why the core went down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u16)]
pub enum CrashReason {
    /// A Rust panic.
    Panic = 1,
    /// The watchdog was not kicked in time.
    Watchdog = 2,
    /// An unexpected trap (illegal instruction, access fault, ...).
    Exception = 3,
}

/// Kinds of traced events (top byte of an event code).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum EventKind {
    /// Boot; detail = boot count.
    Boot = 1,
    /// Port up; detail = port.
    PortUp = 2,
    /// Port down; detail = port << 8 | reason.
    PortDown = 3,
    /// Self-test phase; detail = phase.
    SelfTest = 4,
    /// Update step; detail = step.
    Update = 5,
    /// Main loop heartbeat; detail = iteration (low 24 bits).
    Heartbeat = 6,
}

/// An event code.
pub const fn event(kind: EventKind, detail: u32) -> u32 {
    ((kind as u32) << 24) | (detail & 0x00FF_FFFF)
}

/// The recent-event trace the main loop keeps (copied into the record on a crash).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventTrace {
    total: u32,
    ring: [u32; TRACE_LEN],
}

impl Default for EventTrace {
    fn default() -> Self {
        Self::new()
    }
}

impl EventTrace {
    /// No events.
    pub const fn new() -> Self {
        EventTrace {
            total: 0,
            ring: [0; TRACE_LEN],
        }
    }

    /// Record `code`.
    pub fn push(&mut self, code: u32) {
        self.ring[self.total as usize % TRACE_LEN] = code;
        self.total = self.total.wrapping_add(1);
    }

    /// The kept events, oldest first.
    pub fn recent(&self) -> impl Iterator<Item = u32> + '_ {
        let n = (self.total as usize).min(TRACE_LEN);
        let start = self.total as usize - n;
        (start..self.total as usize).map(move |i| self.ring[i % TRACE_LEN])
    }
}

/// The record (see the module docs for the byte layout).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct CrashRecord {
    magic: u32,
    version: u16,
    reason: u16,
    boot_count: u32,
    line_or_cause: u32,
    mepc: u32,
    file_len: u32,
    file: [u8; FILE_LEN],
    events_total: u32,
    events: [u32; TRACE_LEN],
    crc: u32,
}

/// A crash record as read back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Crash<'a> {
    /// Why.
    pub reason: CrashReason,
    /// Boot count when it happened.
    pub boot_count: u32,
    /// Panic line, or `mcause` for an exception.
    pub line_or_cause: u32,
    /// `mepc` for an exception.
    pub mepc: u32,
    /// Panic file (tail of the path).
    pub file: &'a str,
    /// The trace at the crash, oldest first (up to 16).
    pub events: EventTrace,
}

impl CrashRecord {
    /// No record.
    pub const EMPTY: CrashRecord = CrashRecord {
        magic: 0,
        version: 0,
        reason: 0,
        boot_count: 0,
        line_or_cause: 0,
        mepc: 0,
        file_len: 0,
        file: [0; FILE_LEN],
        events_total: 0,
        events: [0; TRACE_LEN],
        crc: 0,
    };

    /// Fill the record for a crash (then [`CrashRecord::to_bytes`] is what the host reads).
    pub fn record(
        &mut self,
        reason: CrashReason,
        boot_count: u32,
        file: &str,
        line_or_cause: u32,
        mepc: u32,
        trace: &EventTrace,
    ) {
        let f = file.as_bytes();
        // Keep the tail of the path, on a char boundary.
        let mut cut = f.len().saturating_sub(FILE_LEN);
        while cut < f.len() && !file.is_char_boundary(cut) {
            cut += 1;
        }
        let tail = &f[cut..];
        *self = CrashRecord::EMPTY;
        self.magic = MAGIC;
        self.version = 1;
        self.reason = reason as u16;
        self.boot_count = boot_count;
        self.line_or_cause = line_or_cause;
        self.mepc = mepc;
        self.file_len = tail.len() as u32;
        self.file[..tail.len()].copy_from_slice(tail);
        self.events_total = trace.total;
        self.events = trace.ring;
        self.crc = crc32(&self.to_bytes()[..156]);
    }

    /// Forget the record (after the host has read it).
    pub fn clear(&mut self) {
        *self = CrashRecord::EMPTY;
    }

    /// The 160 bytes, little-endian.
    pub fn to_bytes(&self) -> [u8; 160] {
        let mut b = [0u8; 160];
        b[0..4].copy_from_slice(&self.magic.to_le_bytes());
        b[4..6].copy_from_slice(&self.version.to_le_bytes());
        b[6..8].copy_from_slice(&self.reason.to_le_bytes());
        b[8..12].copy_from_slice(&self.boot_count.to_le_bytes());
        b[12..16].copy_from_slice(&self.line_or_cause.to_le_bytes());
        b[16..20].copy_from_slice(&self.mepc.to_le_bytes());
        b[20..24].copy_from_slice(&self.file_len.to_le_bytes());
        b[24..88].copy_from_slice(&self.file);
        b[88..92].copy_from_slice(&self.events_total.to_le_bytes());
        for (i, e) in self.events.iter().enumerate() {
            b[92 + 4 * i..96 + 4 * i].copy_from_slice(&e.to_le_bytes());
        }
        b[156..160].copy_from_slice(&self.crc.to_le_bytes());
        b
    }

    /// The record from its 160 bytes as the host reads them from `NOINIT` (the inverse of
    /// [`CrashRecord::to_bytes`]; [`CrashRecord::read`] then checks it).
    pub fn from_bytes(b: &[u8; 160]) -> CrashRecord {
        let w = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        let h = |o: usize| u16::from_le_bytes([b[o], b[o + 1]]);
        let mut file = [0u8; FILE_LEN];
        file.copy_from_slice(&b[24..88]);
        let mut events = [0u32; TRACE_LEN];
        for (i, e) in events.iter_mut().enumerate() {
            *e = w(92 + 4 * i);
        }
        CrashRecord {
            magic: w(0),
            version: h(4),
            reason: h(6),
            boot_count: w(8),
            line_or_cause: w(12),
            mepc: w(16),
            file_len: w(20),
            file,
            events_total: w(88),
            events,
            crc: w(156),
        }
    }

    /// The crash, if the record is intact (magic, version, CRC, reason, path all valid). RAM
    /// after power-on holds garbage, so anything else is "no record".
    pub fn read(&self) -> Option<Crash<'_>> {
        if self.magic != MAGIC || self.version != 1 {
            return None;
        }
        if crc32(&self.to_bytes()[..156]) != self.crc {
            return None;
        }
        let reason = match self.reason {
            1 => CrashReason::Panic,
            2 => CrashReason::Watchdog,
            3 => CrashReason::Exception,
            _ => return None,
        };
        let file = core::str::from_utf8(self.file.get(..self.file_len as usize)?).ok()?;
        Some(Crash {
            reason,
            boot_count: self.boot_count,
            line_or_cause: self.line_or_cause,
            mepc: self.mepc,
            file,
            events: EventTrace {
                total: self.events_total,
                ring: self.events,
            },
        })
    }
}

/// CRC-32 (IEEE), bitwise: the record is written once per crash.
pub fn crc32(data: &[u8]) -> u32 {
    let mut c = 0xFFFF_FFFFu32;
    for &b in data {
        c ^= u32::from(b);
        for _ in 0..8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0xEDB8_8320
            } else {
                c >> 1
            };
        }
    }
    !c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_panic_reads_back() {
        let mut t = EventTrace::new();
        for i in 0..20 {
            t.push(event(EventKind::Heartbeat, i));
        }
        let mut r = CrashRecord::EMPTY;
        assert!(r.read().is_none());
        r.record(CrashReason::Panic, 7, "src/main.rs", 42, 0, &t);
        let c = r.read().unwrap();
        assert_eq!(c.reason, CrashReason::Panic);
        assert_eq!(
            (c.boot_count, c.line_or_cause, c.file),
            (7, 42, "src/main.rs")
        );
        let ev: heapless_free::Vec16 = c.events.recent().collect();
        assert_eq!(ev.0[0], event(EventKind::Heartbeat, 4));
        assert_eq!(ev.1, 16);
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        // The host's copy of the bytes reads back the same; a flipped bit is no record.
        let mut bytes = r.to_bytes();
        assert_eq!(CrashRecord::from_bytes(&bytes), r);
        bytes[30] ^= 1;
        assert!(CrashRecord::from_bytes(&bytes).read().is_none());
    }

    #[test]
    fn long_paths_keep_their_tail_and_corruption_is_no_record() {
        let long = "a/very/long/path/that/goes/on/and/on/and/on/forever/src/some/module/file.rs";
        let mut r = CrashRecord::EMPTY;
        r.record(CrashReason::Watchdog, 1, long, 0, 0, &EventTrace::new());
        assert!(long.ends_with(r.read().unwrap().file));
        assert_eq!(r.read().unwrap().file.len(), FILE_LEN);
        r.line_or_cause ^= 1;
        assert!(r.read().is_none(), "a corrupted record is not a crash");
    }

    mod heapless_free {
        /// Collect up to 16 events without alloc: (array, count).
        pub struct Vec16(pub [u32; 16], pub usize);
        impl FromIterator<u32> for Vec16 {
            fn from_iter<I: IntoIterator<Item = u32>>(it: I) -> Self {
                let mut v = Vec16([0; 16], 0);
                for x in it {
                    v.0[v.1] = x;
                    v.1 += 1;
                }
                v
            }
        }
    }
}
