//! The link: two directions that serialise TLPs, the receivers' flow-control credits, the
//! NIC's read tags, and the transactions built from them (doorbells, DMA reads, DMA writes).
//!
//! Everything is computed when a transaction starts: each TLP is placed on its direction's
//! wire at the earliest time its credits allow and the wire is free, and the transaction
//! returns when its last TLP arrives. No event is scheduled per TLP.

use std::collections::VecDeque;

use super::config::{FcCredits, PcieConfig, TlpKind};
use crate::core::time::{Duration, Time, PS_PER_NS};

/// Bytes per data credit.
const CREDIT_BYTES: u32 = 16;
/// Reads and writes do not cross this address boundary (a PCIe rule for requests).
const PAGE: u64 = 4096;

/// One direction's wire: the busy intervals still ahead of (or around) the present, merged
/// and in time order. A TLP takes the earliest gap that holds it, so a transaction started
/// now is not queued behind completions already booked for later.
#[derive(Debug, Default)]
pub(crate) struct Wire {
    /// Busy `[start, end)` intervals (ps), disjoint, in order; those that ended before the
    /// last [`Wire::prune`] are gone.
    busy: VecDeque<(u64, u64)>,
    /// Time every TLP booked so far takes (ps).
    total: u64,
}

impl Wire {
    /// Forgets the intervals that ended at or before `now` (no later booking starts earlier).
    fn prune(&mut self, now: u64) {
        while self.busy.front().is_some_and(|b| b.1 <= now) {
            self.busy.pop_front();
        }
    }

    /// Books `dur` ps at the earliest time at or after `at` the wire is free that long;
    /// returns the start.
    fn book(&mut self, at: u64, dur: u64) -> u64 {
        self.total += dur;
        // The common case: after everything booked.
        match self.busy.back_mut() {
            None => {
                self.busy.push_back((at, at + dur));
                return at;
            }
            Some(b) if at >= b.1 => {
                if at == b.1 {
                    b.1 += dur;
                } else {
                    self.busy.push_back((at, at + dur));
                }
                return at;
            }
            Some(_) => {}
        }
        // From the first interval that ends after `at` (they are in order), the first gap
        // that holds `dur`.
        let mut t = at;
        let mut i = self.busy.partition_point(|b| b.1 <= at);
        while i < self.busy.len() {
            let (s, e) = self.busy[i];
            if t + dur <= s {
                break;
            }
            t = t.max(e);
            i += 1;
        }
        // [t, t + dur) fits before interval i (or after the last): insert and merge.
        let end = t + dur;
        let joins_prev = i > 0 && self.busy[i - 1].1 == t;
        let joins_next = i < self.busy.len() && self.busy[i].0 == end;
        match (joins_prev, joins_next) {
            (true, true) => {
                self.busy[i - 1].1 = self.busy[i].1;
                self.busy.remove(i);
            }
            (true, false) => self.busy[i - 1].1 = end,
            (false, true) => self.busy[i].0 = t,
            (false, false) => self.busy.insert(i, (t, end)),
        }
        t
    }

    /// Busy time from time zero to `t` (ps): everything booked but what lies after `t`.
    fn busy_through(&self, t: u64) -> u64 {
        let after: u64 = self
            .busy
            .iter()
            .map(|&(s, e)| e.saturating_sub(s.max(t)))
            .sum();
        self.total.saturating_sub(after)
    }
}

/// One kind of credit a receiver advertises: what is out, and when each part comes back.
///
/// Returns are kept in the order the credits were taken, which is their order in time but
/// for a TLP booked into a gap ahead of others: its credits then come back with the ones
/// taken before it (a little late, never early).
#[derive(Debug, Default)]
struct Pool {
    /// Advertised (0 = infinite).
    limit: u32,
    out: u32,
    back: VecDeque<(u64, u32)>,
    /// Time senders waited for these credits (ps).
    stalled: u64,
}

impl Pool {
    fn new(limit: u32) -> Pool {
        Pool {
            limit,
            ..Pool::default()
        }
    }

    /// The earliest time at or after `at` that `n` credits are free (the credits returned by
    /// then are taken back).
    fn ready(&mut self, at: u64, n: u32) -> u64 {
        if self.limit == 0 || n == 0 {
            return at;
        }
        let mut t = at;
        while let Some(&(when, k)) = self.back.front() {
            if when > t && self.out + n <= self.limit {
                break;
            }
            self.back.pop_front();
            self.out -= k;
            t = t.max(when);
        }
        self.stalled += t - at;
        t
    }

    /// Whether `n` credits are free at `at` (the credits returned by then are taken back).
    fn room(&mut self, at: u64, n: u32) -> bool {
        if self.limit == 0 || n == 0 {
            return true;
        }
        while let Some(&(when, k)) = self.back.front() {
            if when > at {
                break;
            }
            self.back.pop_front();
            self.out -= k;
        }
        self.out + n <= self.limit
    }

    /// Takes `n` credits until `until`.
    fn take(&mut self, n: u32, until: u64) {
        if self.limit == 0 || n == 0 {
            return;
        }
        self.out += n;
        self.back.push_back((until, n));
    }
}

/// A receiver's credits by kind.
#[derive(Debug, Default)]
struct Credits {
    ph: Pool,
    pd: Pool,
    nph: Pool,
    cplh: Pool,
    cpld: Pool,
}

impl Credits {
    fn new(c: &FcCredits) -> Credits {
        Credits {
            ph: Pool::new(c.posted_hdr),
            pd: Pool::new(c.posted_data),
            nph: Pool::new(c.nonposted_hdr),
            cplh: Pool::new(c.completion_hdr),
            cpld: Pool::new(c.completion_data),
        }
    }

    fn pools(&mut self, kind: TlpKind) -> (&mut Pool, Option<&mut Pool>) {
        match kind {
            TlpKind::MemWrite => (&mut self.ph, Some(&mut self.pd)),
            TlpKind::MemRead => (&mut self.nph, None),
            TlpKind::Completion => (&mut self.cplh, Some(&mut self.cpld)),
        }
    }
}

/// One direction of the link and the credits of the receiver at its end.
#[derive(Debug, Default)]
pub(crate) struct Direction {
    wire: Wire,
    credits: Credits,
    /// TLPs sent.
    pub tlps: u64,
    /// Payload bytes they carried.
    pub payload: u64,
}

impl Direction {
    /// Time this direction's wire was busy from time zero to `t`.
    pub fn busy_through(&self, t: Time) -> Duration {
        Duration::from_ps(self.wire.busy_through(t.as_ps()))
    }

    /// Time senders waited for the receiver's credits.
    #[cfg(test)]
    pub fn credit_stall(&self) -> Duration {
        let c = &self.credits;
        Duration::from_ps(
            c.ph.stalled + c.pd.stalled + c.nph.stalled + c.cplh.stalled + c.cpld.stalled,
        )
    }
}

/// TLPs sent back to back: how many, their data credits, wire time and payload.
#[derive(Clone, Copy, Debug, Default)]
struct Train {
    tlps: u32,
    credits: u32,
    dur: u64,
    payload: u64,
}

impl Train {
    fn add(&mut self, t: &Timing, kind: TlpKind, data: u32) {
        self.add_n(t, kind, data, 1);
    }

    /// Adds `n` copies of the TLPs of `o` after these.
    fn append_n(&mut self, o: &Train, n: u32) {
        self.tlps += n * o.tlps;
        self.credits += n * o.credits;
        self.dur += u64::from(n) * o.dur;
        self.payload += u64::from(n) * o.payload;
    }

    /// Adds `n` TLPs of `kind` carrying `data` bytes each.
    fn add_n(&mut self, t: &Timing, kind: TlpKind, data: u32, n: u32) {
        self.tlps += n;
        self.credits += n * data.div_ceil(CREDIT_BYTES);
        self.dur += u64::from(n) * t.tlp(kind, data);
        self.payload += u64::from(n) * u64::from(data);
    }

    /// Adds the TLPs of `kind` that carry `[addr, addr + len)` cut as [`cut_runs`] cuts it
    /// into MPS-sized pieces after the first (ending at `first_end`): what [`Train::add`] of
    /// each piece gives, in a few steps rather than one per TLP.
    fn add_cut(&mut self, t: &Timing, kind: TlpKind, addr: u64, len: u32, first_end: u64) {
        let mps = u32::from(t.cfg.mps);
        let (first, full, last) = cut_runs(addr, len, first_end, mps);
        if first != 0 {
            self.add(t, kind, first);
        }
        if full != 0 {
            // (`add_n` of MPS-sized TLPs, their wire time looked up)
            self.tlps += full;
            self.credits += full * mps.div_ceil(CREDIT_BYTES);
            self.dur += u64::from(full) * t.mps_tlp[kind as usize];
            self.payload += u64::from(full) * u64::from(mps);
        }
        if last != 0 {
            self.add(t, kind, last);
        }
    }
}

/// The link's timing: what a TLP takes on the wire and on the way.
#[derive(Debug)]
struct Timing {
    cfg: PcieConfig,
    fs_per_byte: u64,
    /// Per [`TlpKind`]: header and framing bytes ([`PcieConfig::tlp_overhead`]).
    overhead: [u32; 3],
    /// Per [`TlpKind`]: wire time of a TLP carrying MPS bytes (ps).
    mps_tlp: [u64; 3],
    /// The completions of a read request of MRRS bytes from an RCB boundary (most requests
    /// of a long read: [`request_runs`]).
    aligned_request: Train,
    /// One-way latency (ps).
    latency: u64,
    /// Host memory (ps).
    completer: u64,
}

impl Timing {
    /// The timing of a link configured as `cfg`.
    fn new(cfg: PcieConfig) -> Timing {
        let mut t = Timing {
            cfg,
            fs_per_byte: cfg.fs_per_byte(),
            overhead: TlpKind::ALL.map(|k| cfg.tlp_overhead(k)),
            mps_tlp: [0; 3],
            aligned_request: Train::default(),
            latency: cfg.latency_ns * PS_PER_NS,
            completer: cfg.completer_ns * PS_PER_NS,
        };
        t.mps_tlp = TlpKind::ALL.map(|k| t.tlp(k, u32::from(cfg.mps)));
        t.aligned_request = t.completions(0, u32::from(cfg.mrrs));
        t
    }

    /// The completions of a read request of `len` bytes at `addr`, summed: at most MPS bytes
    /// each, every one but the last ending on an RCB boundary ([`completions`]).
    fn request_train(&self, addr: u64, len: u32) -> Train {
        if len == u32::from(self.cfg.mrrs) && addr.is_multiple_of(u64::from(self.cfg.rcb)) {
            return self.aligned_request;
        }
        self.completions(addr, len)
    }

    /// [`Timing::request_train`], worked out.
    fn completions(&self, addr: u64, len: u32) -> Train {
        let (mps, rcb) = (u32::from(self.cfg.mps), u32::from(self.cfg.rcb));
        let mut tr = Train::default();
        tr.add_cut(
            self,
            TlpKind::Completion,
            addr,
            len,
            completion_end(addr, mps, rcb),
        );
        tr
    }

    /// Wire time of one TLP of `kind` carrying `data` bytes (ps).
    fn tlp(&self, kind: TlpKind, data: u32) -> u64 {
        (u64::from(self.overhead[kind as usize] + data) * self.fs_per_byte).div_ceil(1_000)
    }

    /// Sends one TLP of `kind` carrying `data` payload bytes on `dir` no earlier than `at`;
    /// returns when it has arrived (ps).
    fn send(&self, dir: &mut Direction, at: u64, kind: TlpKind, data: u32) -> u64 {
        let dc = data.div_ceil(CREDIT_BYTES);
        let (h, d) = dir.credits.pools(kind);
        let mut t = h.ready(at, 1);
        if let Some(d) = d {
            t = d.ready(t, dc);
        }
        let dur = self.tlp(kind, data);
        let start = dir.wire.book(t, dur);
        let arrive = start + dur + self.latency;
        // The receiver frees the buffer as the TLP arrives; its UpdateFC takes a latency back.
        let (h, d) = dir.credits.pools(kind);
        h.take(1, arrive + self.latency);
        if let Some(d) = d {
            d.take(dc, arrive + self.latency);
        }
        dir.tlps += 1;
        dir.payload += u64::from(data);
        arrive
    }

    /// Books the TLPs of `kind` summed in `tr` back to back on `dir` from `at` as one train,
    /// when the receiver's credits take them all at once; `None` (nothing booked) when they do
    /// not: send them one by one. Returns the train's start and length (ps). Their credits come
    /// back together, a latency after the last arrived (late by up to the train's length for
    /// the first ones, never early).
    fn book(&self, dir: &mut Direction, at: u64, kind: TlpKind, tr: &Train) -> Option<(u64, u64)> {
        let Train {
            tlps: k,
            credits: dc,
            dur,
            payload,
        } = *tr;
        let (h, d) = dir.credits.pools(kind);
        if k == 0 || !h.room(at, k) || !d.is_none_or(|d| d.room(at, dc)) {
            return None;
        }
        let start = dir.wire.book(at, dur);
        let back = start + dur + 2 * self.latency;
        let (h, d) = dir.credits.pools(kind);
        h.take(k, back);
        if let Some(d) = d {
            d.take(dc, back);
        }
        dir.tlps += u64::from(k);
        dir.payload += payload;
        Some((start, dur))
    }
}

/// The read tags in use: when each comes back, in issue order, as runs of tags that come
/// back a fixed interval apart (a read's requests of one shape are answered one completion
/// train after another), so that a read of nine requests is at most four entries.
#[derive(Debug, Default)]
pub(super) struct Tags {
    runs: VecDeque<TagRun>,
    /// Tags in all runs.
    len: usize,
}

/// `count` tags, coming back at `next`, `next + step`, ...
#[derive(Clone, Copy, Debug)]
struct TagRun {
    next: u64,
    step: u64,
    count: u32,
}

impl Tags {
    /// Tags in use.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Frees the oldest tags while they come back at or before `t` (the first that comes back
    /// later stops it, as a queue's head would).
    pub(super) fn release_through(&mut self, t: u64) {
        while let Some(r) = self.runs.front_mut() {
            if r.next > t {
                return;
            }
            // Tags of the run back by `t` (all of them when they come back together).
            let back = match (t - r.next).checked_div(r.step) {
                Some(k) => u32::try_from(k.saturating_add(1)).unwrap_or(u32::MAX),
                None => r.count,
            };
            if back < r.count {
                r.next += u64::from(back) * r.step;
                r.count -= back;
                self.len -= back as usize;
                return;
            }
            self.len -= r.count as usize;
            self.runs.pop_front();
        }
    }

    /// Takes the oldest tag; returns when it comes back.
    pub(super) fn pop_oldest(&mut self) -> Option<u64> {
        let r = self.runs.front_mut()?;
        let t = r.next;
        r.next += r.step;
        r.count -= 1;
        if r.count == 0 {
            self.runs.pop_front();
        }
        self.len -= 1;
        Some(t)
    }

    /// Takes `count` tags (none when 0) that come back at `first`, `first + step`, ...
    pub(super) fn push_run(&mut self, first: u64, step: u64, count: u32) {
        if count == 0 {
            return;
        }
        self.runs.push_back(TagRun {
            next: first,
            step,
            count,
        });
        self.len += count as usize;
    }
}

/// The NIC's PCIe link. "rx" is host -> NIC, "tx" NIC -> host.
#[derive(Debug)]
pub(crate) struct PcieLink {
    t: Timing,
    /// Host -> NIC: doorbells, read completions.
    pub rx: Direction,
    /// NIC -> host: read requests, payload writes, CQEs and events.
    pub tx: Direction,
    /// When each outstanding read request's tag comes back (its last completion), in issue
    /// order (completions return in order).
    tags: Tags,
    /// Payload bytes moved by DMA (reads and writes).
    pub dma_bytes: u64,
}

impl PcieLink {
    pub fn new(cfg: PcieConfig) -> PcieLink {
        PcieLink {
            t: Timing::new(cfg),
            rx: Direction {
                credits: Credits::new(&cfg.nic_credits),
                ..Direction::default()
            },
            tx: Direction {
                credits: Credits::new(&cfg.host_credits),
                ..Direction::default()
            },
            tags: Tags::default(),
            dma_bytes: 0,
        }
    }

    /// Host memory answers reads `extra_ns` later than the configured completer time (slow
    /// DMA: a congested root complex or IOMMU); 0 restores it. Reads issued from now on see it.
    pub fn set_host_delay(&mut self, extra_ns: u64) {
        self.t.completer = (self.t.cfg.completer_ns + extra_ns) * PS_PER_NS;
    }

    /// Starts loading the oldest bookings of both wires and the oldest outstanding read tag
    /// (what [`PcieLink::prune`] and a read look at first). A hint; see
    /// [`crate::core::sys::prefetch`].
    #[inline]
    pub fn prefetch(&self) {
        crate::core::sys::prefetch_head(self.rx.wire.busy.front());
        crate::core::sys::prefetch_head(self.tx.wire.busy.front());
        crate::core::sys::prefetch_head(self.tags.runs.front());
    }

    /// Forgets what ended before `now` (call with the simulation's time, never decreasing).
    pub fn prune(&mut self, now: Time) {
        self.rx.wire.prune(now.as_ps());
        self.tx.wire.prune(now.as_ps());
    }

    /// The host writes a doorbell (`bytes`, one posted MWr) at `at`; returns when the NIC has
    /// it.
    pub fn doorbell(&mut self, at: Time, bytes: u32) -> Time {
        Time::from_ps(
            self.t
                .send(&mut self.rx, at.as_ps(), TlpKind::MemWrite, bytes),
        )
    }

    /// The NIC reads `len` bytes at host address `addr` from `at`: MRRS-sized requests
    /// (never crossing 4 KiB) each holding a tag until its last completion, completions of at
    /// most MPS ending on RCB boundaries. Returns when the last completion has arrived.
    pub fn read(&mut self, at: Time, addr: u64, len: u32) -> Time {
        self.dma_bytes += u64::from(len);
        if let Some(done) = self.read_train(at.as_ps(), addr, len) {
            return Time::from_ps(done);
        }
        let c = self.t.cfg;
        let (mrrs, mps, rcb) = (u32::from(c.mrrs), u32::from(c.mps), u32::from(c.rcb));
        let mut done = at.as_ps();
        let mut t = at.as_ps();
        for (a, n) in requests(addr, len, mrrs) {
            // A tag: the oldest request's when all are out.
            self.tags.release_through(t);
            if self.tags.len() >= usize::from(c.read_tags) {
                if let Some(free) = self.tags.pop_oldest() {
                    t = t.max(free);
                }
            }
            let at_host = self.t.send(&mut self.tx, t, TlpKind::MemRead, 0);
            // The completer sends them in order, from `completer` after the request arrived.
            let mut last = at_host;
            let mut next = at_host + self.t.completer;
            for (_, n) in completions(a, n, mps, rcb) {
                last = self.t.send(&mut self.rx, next, TlpKind::Completion, n);
                next = last - self.t.latency;
            }
            self.tags.push_run(last, 0, 1);
            done = done.max(last);
        }
        Time::from_ps(done)
    }

    /// [`PcieLink::read`] as two trains when nothing waits (tags and credits to spare, the
    /// usual case): the requests back to back, then all their completions back to back from
    /// when the first request was answered. Each request's completions take at least as long
    /// as a request, so none leaves before its request arrived. `None` (nothing booked) when
    /// something would wait: the TLPs then go one by one.
    ///
    /// The requests are summed run by run ([`request_runs`]: at most four shapes per read),
    /// not one by one; each request's tag comes back when its last completion arrived.
    fn read_train(&mut self, at: u64, addr: u64, len: u32) -> Option<u64> {
        let c = self.t.cfg;
        let (mrrs, mps, rcb) = (u32::from(c.mrrs), u32::from(c.mps), u32::from(c.rcb));
        if mps % rcb != 0
            || !PAGE.is_multiple_of(u64::from(mrrs))
            || c.nic_credits.completion_hdr != 0
            || c.nic_credits.completion_data != 0
        {
            return None;
        }
        self.tags.release_through(at);
        let runs = request_runs(addr, len, mrrs);
        let mut trains = [Train::default(); 4];
        let mut cpl = Train::default();
        let mut n = 0u32;
        for (run, tr) in runs.iter().zip(&mut trains) {
            if run.count == 0 {
                continue;
            }
            // A request of 4 bytes or more is answered by completions of at least 16 bytes on
            // the wire, as long as the 16-byte request.
            if run.len < 4 {
                return None;
            }
            *tr = self.t.request_train(run.addr, run.len);
            cpl.append_n(tr, run.count);
            n += run.count;
        }
        if n == 0 || self.tags.len() + n as usize > usize::from(c.read_tags) {
            return None;
        }
        let mut req = Train::default();
        req.add_n(&self.t, TlpKind::MemRead, 0, n);
        let rd = self.t.tlp(TlpKind::MemRead, 0);
        let (mstart, _) = self.t.book(&mut self.tx, at, TlpKind::MemRead, &req)?;
        let first = mstart + rd + self.t.latency + self.t.completer;
        // (completion credits are infinite: the train is always taken)
        let (cstart, cdur) = self
            .t
            .book(&mut self.rx, first, TlpKind::Completion, &cpl)?;
        // Each request's tag: when its last completion arrives, a run's one train apart.
        let mut end = cstart + self.t.latency;
        for (run, tr) in runs.iter().zip(&trains) {
            if run.count != 0 {
                self.tags.push_run(end + tr.dur, tr.dur, run.count);
                end += u64::from(run.count) * tr.dur;
            }
        }
        Some(cstart + cdur + self.t.latency)
    }

    /// The NIC writes `len` bytes to host address `addr` from `at` (posted MWr TLPs of at most
    /// MPS, split on MPS boundaries); returns when the last has reached the host.
    pub fn write(&mut self, at: Time, addr: u64, len: u32) -> Time {
        self.dma_bytes += u64::from(len);
        let mps = u32::from(self.t.cfg.mps);
        let at = at.as_ps();
        let mut train = Train::default();
        let first_end = write_end(addr, mps);
        train.add_cut(&self.t, TlpKind::MemWrite, addr, len, first_end);
        if let Some((start, dur)) = self.t.book(&mut self.tx, at, TlpKind::MemWrite, &train) {
            return Time::from_ps(start + dur + self.t.latency);
        }
        // Out of credit: one by one, each as soon as its credits are back.
        let mut done = at;
        let mut next = at;
        for (_, n) in writes(addr, len, mps) {
            done = self.t.send(&mut self.tx, next, TlpKind::MemWrite, n);
            next = done - self.t.latency;
        }
        Time::from_ps(done)
    }

    /// A read of `len` bytes on an idle link: request out, host memory, completions back.
    pub fn idle_read(cfg: &PcieConfig, len: u32) -> Duration {
        PcieLink::new(*cfg).read(Time::ZERO, 0, len).since_start()
    }
}

/// `[addr, addr + len)` cut where `next(start)` says the piece starting at `start` must end.
fn cut(addr: u64, len: u32, next: impl Fn(u64) -> u64) -> impl Iterator<Item = (u64, u32)> {
    let end = addr + u64::from(len);
    let mut a = addr;
    std::iter::from_fn(move || {
        if a >= end {
            return None;
        }
        let e = next(a).min(end).max(a + 1);
        let piece = (a, (e - a) as u32);
        a = e;
        Some(piece)
    })
}

/// `count` read requests of `len` bytes each, back to back from `addr`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct RequestRun {
    pub addr: u64,
    pub len: u32,
    pub count: u32,
}

/// The read requests of `[addr, addr + len)` ([`requests`]) as runs of equal requests, in
/// order: the MRRS-sized requests before the first page boundary, the one the boundary cuts
/// short, the MRRS-sized ones after it, the last one the read's end cuts short (empty runs
/// have `count == 0`). Requires `mrrs` to divide the 4 KiB page (a power of two up to 4096,
/// as the configuration checks): after the first boundary, MRRS cuts fall on page boundaries.
pub(crate) fn request_runs(addr: u64, len: u32, mrrs: u32) -> [RequestRun; 4] {
    let m = u64::from(mrrs);
    let end = addr + u64::from(len);
    let page_end = (addr / PAGE + 1) * PAGE;
    // The pieces of [from, to) cut every `mrrs` bytes from `from`: full ones, then the rest.
    let split = |from: u64, to: u64| {
        let n = to.saturating_sub(from);
        let full = n / m;
        let rest = (n % m) as u32;
        [
            RequestRun {
                addr: from,
                len: mrrs,
                count: full as u32,
            },
            RequestRun {
                addr: from + full * m,
                len: rest,
                count: u32::from(rest != 0),
            },
        ]
    };
    let [a, b] = split(addr, end.min(page_end));
    let [c, d] = split(page_end, end);
    [a, b, c, d]
}

/// Read requests: at most `mrrs` bytes, never crossing a 4 KiB boundary.
pub(crate) fn requests(addr: u64, len: u32, mrrs: u32) -> impl Iterator<Item = (u64, u32)> {
    cut(addr, len, move |a| {
        (a + u64::from(mrrs)).min((a / PAGE + 1) * PAGE)
    })
}

/// The completions of one read request: at most `mps` bytes each, every one but the last
/// ending on an `rcb` boundary (a completer returning the largest completions allowed).
pub(crate) fn completions(
    addr: u64,
    len: u32,
    mps: u32,
    rcb: u32,
) -> impl Iterator<Item = (u64, u32)> {
    cut(addr, len, move |a| completion_end(a, mps, rcb))
}

/// Where the completion starting at `a` ends (for [`completions`]). Every completion after it
/// but the last is `mps` long, as each starts on an RCB boundary (MPS is a multiple of RCB:
/// both are powers of two, MPS at least 128 and RCB at most 128).
pub(crate) fn completion_end(a: u64, mps: u32, rcb: u32) -> u64 {
    let (m, r) = (u64::from(mps), u64::from(rcb));
    let e = (a + m) / r * r;
    if e > a {
        e
    } else {
        a + m
    }
}

/// `[addr, addr + len)` as a first piece ending at `first_end` (or at the end), then pieces
/// of `step` bytes, then what is left: `(first, full pieces, last)` lengths. The cut of
/// [`cut`] when every piece after the first ends `step` bytes after it starts.
pub(crate) fn cut_runs(addr: u64, len: u32, first_end: u64, step: u32) -> (u32, u32, u32) {
    if len == 0 {
        return (0, 0, 0);
    }
    // (`cut` makes every piece at least a byte long)
    let first = first_end.saturating_sub(addr).clamp(1, u64::from(len)) as u32;
    let rest = len - first;
    (first, rest / step, rest % step)
}

/// Write TLPs: at most `mps` bytes, split on `mps` boundaries (so never across 4 KiB).
pub(crate) fn writes(addr: u64, len: u32, mps: u32) -> impl Iterator<Item = (u64, u32)> {
    cut(addr, len, move |a| write_end(a, mps))
}

/// Where the write TLP starting at `a` ends (for [`writes`]): the next MPS boundary, so every
/// TLP after it but the last is `mps` long.
pub(crate) fn write_end(a: u64, mps: u32) -> u64 {
    let m = u64::from(mps);
    (a / m + 1) * m
}
