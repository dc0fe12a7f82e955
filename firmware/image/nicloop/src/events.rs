//! Step 1: DP->FW entries into the engine, and what the loop keeps of them.

use mrc_abi::device::csr::{CsrEntry, CsrKind, PortEventEntry, RxDrops, WimmPlaced};
use mrc_firmware::capacity::Capacity;

use crate::{Fw, NicAdmin, WimmNote, BUDGET};

const WIMM_PLACED: u8 = CsrKind::WimmPlaced as u8;
const PORT_EVENT: u8 = CsrKind::PortEvent as u8;
const RX_DROPS: u8 = CsrKind::RxDrops as u8;

impl<C: Capacity> Fw<C> {
    /// Entries handed over as they are (no admin tables). Returns how many the engine took.
    /// What the loop keeps of the entries (see [`Self::note`]) is kept with the tables only.
    pub(crate) fn events(&mut self, now_ns: u64, events: &[CsrEntry]) -> usize {
        let k = self.engine.handle_events(now_ns, events);
        self.count_taken(k, events.len());
        k
    }

    /// Entries from the ring with the admin tables: each QPN translated to the engine's in
    /// place (entries for unknown QPs dropped and counted), then handed over. Returns how
    /// many of `buf`'s entries are done with (taken, or dropped before the first one the
    /// engine could not take).
    pub(crate) fn events_admin(
        &mut self,
        now_ns: u64,
        buf: &mut [CsrEntry],
        admin: &mut NicAdmin,
    ) -> usize {
        let n = buf.len().min(BUDGET);
        // Where each kept entry came from.
        let mut from = [0u8; BUDGET];
        let mut m = 0;
        for i in 0..n {
            let mut e = buf[i];
            if CsrKind::has_qpn_word(e.kind_code()) {
                match self.map.engine(e.qpn_word()) {
                    Some(q) => e.set_qpn_word(q),
                    None => continue,
                }
            }
            buf[m] = e;
            from[m] = i as u8;
            m += 1;
        }
        let k = self.engine.handle_events(now_ns, &buf[..m]);
        for e in buf.get(..k).unwrap_or_default() {
            self.note(e, Some(admin));
        }
        let done = if k >= m { n } else { usize::from(from[k]) };
        // (the dropped entries among the `done` first: `done - k`)
        self.counters.unknown_qpn += (done - k.min(done)) as u64;
        self.count_taken(k, m);
        done
    }

    #[inline]
    fn count_taken(&mut self, taken: usize, offered: usize) {
        self.counters.events += taken as u64;
        if taken < offered {
            self.counters.events_held += (offered - taken) as u64;
        }
    }

    /// What the loop keeps of an entry the engine took (QPN: the engine's; the engine counted
    /// a malformed one, which is skipped here).
    fn note(&mut self, e: &CsrEntry, admin: Option<&mut NicAdmin>) {
        match e.kind_code() {
            WIMM_PLACED => {
                self.counters.wimm_placed += 1;
                if admin.is_none() || e.check().is_err() {
                    return;
                }
                let w = e.view::<WimmPlaced>();
                let note = WimmNote {
                    qpn: w.qpn.get(),
                    msn: w.msn.get(),
                    solicited: w.flags & 1 != 0,
                    byte_len: w.byte_len.get(),
                };
                if self.wimm.is_full() {
                    self.wimm.pop_front();
                    self.counters.wimm_unmatched += 1;
                }
                let _ = self.wimm.push_back(note);
            }
            PORT_EVENT if e.check().is_ok() => {
                let p = e.view::<PortEventEntry>();
                self.counters.port_events += 1;
                if let Some(l) = self.ports.link.get_mut(usize::from(p.port)) {
                    *l = p.up == 1;
                }
            }
            RX_DROPS if e.check().is_ok() => {
                let d = e.view::<RxDrops>();
                let sum = [
                    d.bad_checksum,
                    d.bad_header,
                    d.unknown_qp,
                    d.out_of_window,
                    d.no_buffer,
                    d.trimmed,
                    d.other,
                ]
                .iter()
                .fold(0u64, |s, v| s.saturating_add(u64::from(v.get())));
                self.counters.dp_rx_drops = self.counters.dp_rx_drops.saturating_add(sum);
            }
            _ => {}
        }
    }

    /// The `WimmPlaced` details of the receive completion of message `msn` of engine QP
    /// `qpn`, taken out of the notes.
    pub(crate) fn take_wimm(&mut self, qpn: u32, msn: u16) -> Option<WimmNote> {
        let i = self
            .wimm
            .iter()
            .position(|w| w.qpn == qpn && w.msn == msn)?;
        let note = self.wimm.get(i).copied();
        // Notes are matched in order, so the one found is almost always the oldest; older
        // unmatched ones (their completion never came) go with it.
        for _ in 0..=i {
            self.wimm.pop_front();
        }
        self.counters.wimm_unmatched += i as u64;
        note
    }
}
