//! The simulated NIC's side of the core's queues: a [`Datapath`] (what the image's main loop
//! sees through its `hal`) bridged to the rings the guest keeps in its DTCM. One
//! [`ElfCore::step`] is one main-loop iteration with the datapath's queues as the native
//! `NicLoop::step_admin` sees them:
//!
//! - **DP->FW**: the guest's ring mirrors the datapath's unconsumed reports: before the run the
//!   reports the ring does not hold yet are written into it (as far as it has room) and the
//!   producer index moves; after it, the entries the guest consumed are released
//!   ([`Datapath::consume_events`]).
//! - **FW->DP**: the guest's ring is the datapath's command ring: its consumer index is what
//!   the datapath has taken ([`Datapath::orders_taken`]), so the guest finds the room the
//!   native loop would; after the run the entries it published are handed over
//!   ([`Datapath::push_orders`]; a refusal is counted in [`BridgeCounters::orders_refused`]).
//! - **Admin**: commands the datapath's host interface fetched ([`Datapath::pop_admin`]) go
//!   into the guest's command ring while it has room; replies the guest published go back
//!   ([`Datapath::push_admin_reply`]), and the reply ring is empty again for the next run.
//! - **Reset**: an iteration that ends in a reset (watchdog, `SW_RESET`) is read out as
//!   above, then the core boots again and its `hal` sets the rings up anew: the datapath's
//!   unconsumed reports go into the new DP->FW ring, admin commands the guest had not taken
//!   are lost (counted).

use mrc_abi::device::admin::AdminResp;
use mrc_abi::device::csr::{CsrEntry, ENTRY_BYTES};
use mrc_nicloop::Datapath;
use zerocopy::FromBytes;

use crate::core::{ElfCore, Run};
use crate::device::Queue;
use crate::ElfError;

/// What the bridge could not pass on (each a device or guest defect; the run goes on).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BridgeCounters {
    /// FW->DP entries the datapath refused after the guest found room.
    pub orders_refused: u64,
    /// Admin replies the datapath refused.
    pub replies_refused: u64,
    /// Admin replies the guest wrote that do not decode (unknown status, reserved bits).
    pub bad_replies: u64,
    /// Admin commands in the guest's ring, not taken, when it reset (no reply will come).
    pub admin_lost_at_reset: u64,
}

/// When, within the last [`ElfCore::step`], the guest moved its queue indices, in
/// instructions retired since the iteration began (exact to the translated block the write
/// is in): the simulator times each CSR crossing by them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StepTiming {
    /// FW->DP publications: (entries published in this step so far, instructions then).
    pub published: Vec<(u32, u64)>,
    /// DP->FW: the instructions when the guest last moved its consumer index (`None`: it
    /// consumed nothing).
    pub consumed_at: Option<u64>,
}

/// A checked ring: entries and where its memory is.
#[derive(Clone, Copy, Debug)]
struct Ring {
    base: u32,
    entries: u32,
    entry_bytes: u32,
}

impl Ring {
    fn addr(&self, index: u32) -> u32 {
        self.base + (index & (self.entries - 1)) * self.entry_bytes
    }
}

impl ElfCore {
    /// The ring `q` as the guest set it up, checked: a size of at most 2^16 entries, all of
    /// its memory in the DTCM.
    fn ring(&self, q: Queue) -> Result<Ring, ElfError> {
        let r = self.device().queue(q);
        let bad = |why: String| ElfError::Ring { queue: q, why };
        if r.log2_entries > u32::from(mrc_abi::device::csr::CsrRing::MAX_LOG2) {
            return Err(bad(format!("log2_entries {} is too large", r.log2_entries)));
        }
        let entries = 1u32 << r.log2_entries;
        let eb = q.entry_bytes();
        if !r.base.is_multiple_of(eb) || !self.map.dtcm.holds(r.base, entries * eb) {
            return Err(bad(format!(
                "{entries} entries of {eb} bytes at {:#x} are not aligned DTCM",
                r.base
            )));
        }
        if r.used() > entries {
            return Err(bad(format!(
                "producer {} and consumer {} are more than {entries} apart",
                r.producer, r.consumer
            )));
        }
        Ok(Ring {
            base: r.base,
            entries,
            entry_bytes: eb,
        })
    }

    /// One main-loop iteration at `now_ns` with `dp` behind the queues (see the module
    /// docs).
    ///
    /// # Errors
    /// A ring the guest set up wrongly, or [`ElfCore::run`]'s.
    pub fn step<D: Datapath>(&mut self, now_ns: u64, dp: &mut D) -> Result<Run, ElfError> {
        // DP->FW: the reports the ring does not hold yet.
        let ev = self.ring(Queue::Events)?;
        let held = self.device().events.used() as usize;
        let mut buf = std::mem::take(&mut self.scratch);
        buf.resize(ev.entries as usize, CsrEntry::ZERO);
        let n = dp.peek_events(&mut buf[..ev.entries as usize]);
        if n < held {
            self.scratch = buf;
            return Err(ElfError::Ring {
                queue: Queue::Events,
                why: format!("the datapath holds {n} reports, the ring {held}"),
            });
        }
        let producer = self.device().events.producer;
        self.write_entries(ev, producer, &buf[held..n])?;
        self.device_mut().events.producer = producer.wrapping_add((n - held) as u32);
        let ev_consumer = self.device().events.consumer;

        // Admin commands into the command ring while it has room.
        let cmd = self.ring(Queue::AdminCmd)?;
        while self.device().admin_cmd.used() < cmd.entries {
            let Some(c) = dp.pop_admin() else { break };
            let p = self.device().admin_cmd.producer;
            self.write_mem(cmd.addr(p), &c)?;
            self.device_mut().admin_cmd.producer = p.wrapping_add(1);
        }

        // FW->DP: the room the datapath has; the reply ring emptied.
        self.ring(Queue::Orders)?;
        let tx_before = self.device().orders.producer;
        // (the guest's indices restart at 0 when it resets: `orders_base` is the datapath's
        // count then; entries from before a reset the datapath has not taken yet count as
        // taken, so the guest may find more room than the datapath has: a refusal is counted)
        let base = match self.orders_base {
            Some(b) => b,
            None => {
                let b = dp
                    .orders_written()
                    .wrapping_sub(self.device().orders.producer);
                self.orders_base = Some(b);
                b
            }
        };
        let since = dp.orders_taken().wrapping_sub(base);
        self.device_mut().orders.consumer = if (since as i32) < 0 { 0 } else { since };
        let resp = self.ring(Queue::AdminResp)?;
        let resp_before = self.device().admin_resp.producer;
        self.device_mut().admin_resp.consumer = resp_before;

        let mut run = self.iterate(now_ns)?;

        // When the guest moved its indices.
        let mut timing = std::mem::take(&mut self.timing);
        timing.published.clear();
        timing.consumed_at = None;
        for &(q, v, at) in &self.device().marks {
            match q {
                Queue::Orders => timing.published.push((v.wrapping_sub(tx_before), at)),
                Queue::Events if v != ev_consumer => timing.consumed_at = Some(at),
                _ => {}
            }
        }
        self.timing = timing;

        // The reports the guest consumed.
        let consumed = self.device().events.consumer.wrapping_sub(ev_consumer);
        if consumed as usize > n {
            self.scratch = buf;
            return Err(ElfError::Ring {
                queue: Queue::Events,
                why: format!("the guest consumed {consumed} of {n} reports"),
            });
        }
        dp.consume_events(consumed as usize);

        // The commands it published.
        let orders_now = self.ring(Queue::Orders)?;
        let written = self.device().orders.producer.wrapping_sub(tx_before);
        if written > orders_now.entries {
            self.scratch = buf;
            return Err(ElfError::Ring {
                queue: Queue::Orders,
                why: format!(
                    "the guest published {written} entries into a ring of {}",
                    orders_now.entries
                ),
            });
        }
        buf.resize((written as usize).max(buf.len()), CsrEntry::ZERO);
        self.read_entries(orders_now, tx_before, &mut buf[..written as usize])?;
        let pushed = dp.push_orders(&buf[..written as usize]);
        self.bridge.orders_refused += (written as usize - pushed.min(written as usize)) as u64;

        // The admin replies.
        let replies = self.device().admin_resp.producer.wrapping_sub(resp_before);
        for k in 0..replies.min(resp.entries) {
            let mut w = [0u8; 32];
            self.read_mem(resp.addr(resp_before.wrapping_add(k)), &mut w)?;
            match AdminResp::read_from_bytes(&w[..])
                .ok()
                .and_then(|r| r.decode().ok())
            {
                Some(reply) => {
                    if !dp.push_admin_reply(&reply) {
                        self.bridge.replies_refused += 1;
                    }
                }
                None => self.bridge.bad_replies += 1,
            }
        }
        self.scratch = buf;
        if self.pending_reset.is_some() {
            // Commands the guest never took are lost with its rings (the host's admin
            // command times out, as on a NIC whose core resets).
            self.bridge.admin_lost_at_reset += u64::from(self.device().admin_cmd.used());
        }
        run.boot = self.finish_reset(now_ns)?;
        Ok(run)
    }

    /// Writes `entries` into `ring` from index `at` on: one guest-memory write per
    /// contiguous run of slots.
    fn write_entries(&mut self, ring: Ring, at: u32, entries: &[CsrEntry]) -> Result<(), ElfError> {
        let mut bytes = std::mem::take(&mut self.bytes);
        let mut done = 0;
        while done < entries.len() {
            let i = at.wrapping_add(done as u32);
            let room = (ring.entries - (i & (ring.entries - 1))) as usize;
            let k = room.min(entries.len() - done);
            bytes.clear();
            for e in &entries[done..done + k] {
                bytes.extend_from_slice(&e.0);
            }
            let r = self.write_mem(ring.addr(i), &bytes);
            if r.is_err() {
                self.bytes = bytes;
                return r;
            }
            done += k;
        }
        self.bytes = bytes;
        Ok(())
    }

    /// Reads `out.len()` entries of `ring` from index `at` on, as [`Self::write_entries`].
    fn read_entries(&mut self, ring: Ring, at: u32, out: &mut [CsrEntry]) -> Result<(), ElfError> {
        let mut bytes = std::mem::take(&mut self.bytes);
        let mut done = 0;
        while done < out.len() {
            let i = at.wrapping_add(done as u32);
            let room = (ring.entries - (i & (ring.entries - 1))) as usize;
            let k = room.min(out.len() - done);
            bytes.resize(k * ENTRY_BYTES, 0);
            let r = self.read_mem(ring.addr(i), &mut bytes);
            if r.is_err() {
                self.bytes = bytes;
                return r;
            }
            for (o, c) in out[done..done + k]
                .iter_mut()
                .zip(bytes.chunks_exact(ENTRY_BYTES))
            {
                o.0.copy_from_slice(c);
            }
            done += k;
        }
        self.bytes = bytes;
        Ok(())
    }

    /// When the last [`ElfCore::step`] published its FW->DP entries and consumed its DP->FW
    /// entries.
    pub fn step_timing(&self) -> &StepTiming {
        &self.timing
    }

    /// What the bridge could not pass on.
    pub fn bridge_counters(&self) -> BridgeCounters {
        self.bridge
    }
}
