//! Probes the host asks for (admin `PROBE_EV`): a QP sends an EV probe on the EV the host
//! names and reports its outcome, the reply's round trip or a timeout, as a `ProbeResult`
//! command for the host. The EV table's own probes (of retired EVs) are separate: a probe id
//! with [`HOST_PROBE`] set is the host's, and its reply changes no EV state.

use crate::engine::qp::QpError;

/// The bit that marks a probe id on the wire as a host probe's (the EV table's ids never
/// set it).
pub const HOST_PROBE: u32 = 1 << 31;

/// Host probes one QP keeps outstanding at once.
pub const HOST_PROBES: usize = 4;

#[derive(Clone, Copy, Debug)]
struct Probe {
    ev: u16,
    /// The host's id, echoed in the result.
    host_id: u32,
    /// The id on the wire (with [`HOST_PROBE`]).
    wire_id: u32,
    deadline_ns: u64,
    /// Its `SendProbe` was written.
    sent: bool,
}

/// What a host probe came to: the EV, the host's id, and the round trip (`None`: timed out).
pub type Outcome = (u16, u32, Option<u32>);

/// One QP's outstanding host probes. The questions asked after every event (anything to
/// send, the earliest timeout) are answered from two fields kept with the slots.
#[derive(Clone, Copy, Debug)]
pub struct HostProbes {
    slots: [Option<Probe>; HOST_PROBES],
    seq: u32,
    /// Probes whose `SendProbe` is not written.
    unsent: u8,
    /// The earliest timeout (`u64::MAX`: none outstanding).
    earliest: u64,
}

impl HostProbes {
    /// None outstanding.
    pub const fn new() -> Self {
        HostProbes {
            slots: [None; HOST_PROBES],
            seq: 0,
            unsent: 0,
            earliest: u64::MAX,
        }
    }

    fn update_earliest(&mut self) {
        self.earliest = self
            .slots
            .iter()
            .flatten()
            .map(|p| p.deadline_ns)
            .min()
            .unwrap_or(u64::MAX);
    }

    /// Forget every probe (the QP was reset or closed): none reports.
    pub fn clear(&mut self) {
        self.slots = [None; HOST_PROBES];
        self.unsent = 0;
        self.earliest = u64::MAX;
    }

    /// Probe EV `ev` for the host's probe `host_id`, timing out `timeout_ns` after `now_ns`.
    ///
    /// # Errors
    /// [`QpError::QueueFull`] when [`HOST_PROBES`] are outstanding.
    pub fn start(
        &mut self,
        now_ns: u64,
        ev: u16,
        host_id: u32,
        timeout_ns: u64,
    ) -> Result<(), QpError> {
        let slot = self
            .slots
            .iter_mut()
            .find(|s| s.is_none())
            .ok_or(QpError::QueueFull)?;
        self.seq = self.seq.wrapping_add(1);
        let deadline_ns = now_ns.saturating_add(timeout_ns);
        *slot = Some(Probe {
            ev,
            host_id,
            wire_id: HOST_PROBE | self.seq,
            deadline_ns,
            sent: false,
        });
        self.unsent += 1;
        self.earliest = self.earliest.min(deadline_ns);
        Ok(())
    }

    /// A probe to send, as (EV, wire id); it counts as sent.
    pub fn poll_send(&mut self) -> Option<(u16, u32)> {
        if self.unsent == 0 {
            return None;
        }
        let p = self.slots.iter_mut().flatten().find(|p| !p.sent)?;
        p.sent = true;
        self.unsent -= 1;
        Some((p.ev, p.wire_id))
    }

    /// Whether a probe waits for its `SendProbe`.
    #[inline]
    pub fn has_unsent(&self) -> bool {
        self.unsent != 0
    }

    /// The reply to wire id `wire_id` arrived after `rtt_ns`: its outcome, or `None` for a
    /// reply no probe waits for (late, after its timeout, or never asked).
    pub fn reply(&mut self, wire_id: u32, rtt_ns: u32) -> Option<Outcome> {
        let slot = self
            .slots
            .iter_mut()
            .find(|s| s.is_some_and(|p| p.sent && p.wire_id == wire_id))?;
        let p = slot.take()?;
        self.update_earliest();
        Some((p.ev, p.host_id, Some(rtt_ns)))
    }

    /// The earliest timeout.
    #[inline]
    pub fn next_deadline(&self) -> Option<u64> {
        (self.earliest != u64::MAX).then_some(self.earliest)
    }

    /// A probe whose timeout passed by `now_ns`, as its outcome.
    pub fn poll_expired(&mut self, now_ns: u64) -> Option<Outcome> {
        if self.earliest > now_ns {
            return None;
        }
        let slot = self
            .slots
            .iter_mut()
            .find(|s| s.is_some_and(|p| p.deadline_ns <= now_ns))?;
        let p = slot.take()?;
        if !p.sent {
            self.unsent -= 1;
        }
        self.update_earliest();
        Some((p.ev, p.host_id, None))
    }
}

impl Default for HostProbes {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_answers_its_probe_once_and_a_timeout_the_rest() {
        let mut h = HostProbes::new();
        for id in 0..HOST_PROBES as u32 {
            h.start(100, id as u16, 1000 + id, 50 + u64::from(id))
                .unwrap();
        }
        assert_eq!(h.start(100, 9, 9, 1), Err(QpError::QueueFull));
        assert_eq!(h.next_deadline(), Some(150));
        let mut wire = [(0u16, 0u32); HOST_PROBES];
        for w in wire.iter_mut() {
            *w = h.poll_send().unwrap();
            assert_ne!(w.1 & HOST_PROBE, 0);
        }
        assert_eq!(h.poll_send(), None);
        assert!(!h.has_unsent());
        assert_eq!(h.reply(wire[1].1, 7), Some((1, 1001, Some(7))));
        assert_eq!(h.reply(wire[1].1, 7), None, "answered once");
        assert_eq!(h.reply(wire[0].1 ^ 0x40, 7), None, "an unknown id");
        assert_eq!(h.poll_expired(149), None);
        assert_eq!(h.poll_expired(150), Some((0, 1000, None)));
        assert_eq!(h.poll_expired(200), Some((2, 1002, None)));
        assert_eq!(h.poll_expired(200), Some((3, 1003, None)));
        assert_eq!(h.poll_expired(u64::MAX), None);
        assert_eq!(h.next_deadline(), None);
        assert_eq!(h.reply(wire[2].1, 1), None, "late, after its timeout");
        // A slot is free again, and a new probe gets a new wire id.
        h.start(300, 4, 5, 10).unwrap();
        let (_, id) = h.poll_send().unwrap();
        assert!(wire.iter().all(|w| w.1 != id));
    }

    #[test]
    fn a_reply_before_the_send_is_not_its_reply() {
        let mut h = HostProbes::new();
        h.start(0, 3, 77, 10).unwrap();
        assert_eq!(h.reply(HOST_PROBE | 1, 5), None);
        let (ev, id) = h.poll_send().unwrap();
        assert_eq!((ev, id), (3, HOST_PROBE | 1));
        h.clear();
        assert_eq!(h.reply(id, 5), None, "cleared");
        assert_eq!(h.poll_expired(u64::MAX), None);
    }
}
