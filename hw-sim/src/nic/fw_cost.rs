//! What each step of the NIC's firmware main loop costs: guest instructions of the NIC image
//! per unit of work, the one cost table the simulated firmware cores charge
//! ([`FirmwareConfig`](super::FirmwareConfig) turns instructions into core cycles and time).
//!
//! # Provenance
//! `just fw-cost` runs the NIC image (`firmware/image`, riscv32imac, release build) under
//! `qemu-system-riscv32 -icount shift=0` and reads `minstret` around every call into the
//! image's main loop (`mrc-nicloop`) while the test kit's one-way stream runs through it:
//! 50,000 data packets in 16-packet messages over 256 EVs on 4 planes, 1 % loss, seed 1, the
//! datapath models standing in for the hardware (their instructions are not counted). Under
//! `-icount shift=0` `minstret` counts every retired instruction, so the figures are exact and
//! the same on every run. The per-kind figures come from the run that hands the loop one
//! event at a time: each includes the call's own overhead, so they are upper bounds of what
//! an event costs in a batch. The test `fw_cost_table` (hw-sim/tests) runs the same
//! measurement and fails when a measured figure and this table differ by more than
//! [`TOLERANCE_PERCENT`].
//!
//! Kinds the stream does not produce (it has no NACKs, immediates, port events, drop reports,
//! fatal errors, flushes, EV delivery counts or skip reports) have no measurement: they are
//! charged [`UNMEASURED_EVENT`], the dearest measured kind, and the test checks that the
//! stream still does not produce them.

use mrc_abi::device::csr::CsrKind;

/// Largest difference, in percent of the measured figure, the test allows between a
/// measurement and this table.
pub const TOLERANCE_PERCENT: u64 = 10;

/// One DP->FW entry kind's cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventCost {
    /// The entry kind.
    pub kind: CsrKind,
    /// Its name in the `events` object of the fw-cost JSON.
    pub name: &'static str,
    /// Guest instructions of the loop and engine per entry of this kind.
    pub instructions: u32,
    /// Measured by fw-cost (`false`: charged [`UNMEASURED_EVENT`]).
    pub measured: bool,
}

const fn m(kind: CsrKind, name: &'static str, instructions: u32) -> EventCost {
    EventCost {
        kind,
        name,
        instructions,
        measured: true,
    }
}

const fn u(kind: CsrKind, name: &'static str) -> EventCost {
    EventCost {
        kind,
        name,
        instructions: UNMEASURED_EVENT,
        measured: false,
    }
}

/// Charge of a DP->FW kind fw-cost does not measure: the loss event's, the dearest measured.
pub const UNMEASURED_EVENT: u32 = 991;

/// Guest instructions per DP->FW entry, by kind (`just fw-cost`, `events.*.instructions_per_event`).
pub const EVENTS: [EventCost; 12] = [
    m(CsrKind::AckSummary, "ack_summary", 619),
    m(CsrKind::Loss, "loss", 991),
    u(CsrKind::Nack, "nack"),
    m(CsrKind::TxStart, "tx_start", 305),
    u(CsrKind::WimmPlaced, "wimm_placed"),
    m(CsrKind::ProbeReply, "probe_reply", 434),
    u(CsrKind::PortEvent, "port_event"),
    u(CsrKind::RxDrops, "rx_drops"),
    u(CsrKind::RxFatal, "rx_fatal"),
    u(CsrKind::Flushed, "flushed"),
    u(CsrKind::EvDeliveries, "ev_deliveries"),
    u(CsrKind::SkipServed, "skip_served"),
];

/// Guest instructions per timer the engine fires (`timer.instructions_per_timer`: a timer run
/// that acted, re-arming included).
pub const TIMER_FIRED: u32 = 1333;

/// Guest instructions per FW->DP entry the loop writes (`commands.instructions_per_command`).
pub const COMMAND: u32 = 252;

/// Guest instructions of a step's timer check of one engine that finds nothing due
/// (`timer.instructions_per_idle_call`): every step checks each engine on its core.
pub const TIMER_CHECK: u32 = 64;

/// Guest instructions of a DP->FW entry of kind code `code`.
#[inline]
pub fn event(code: u8) -> u32 {
    match BY_CODE.get(usize::from(code)) {
        Some(&c) => c,
        None => UNMEASURED_EVENT,
    }
}

/// [`EVENTS`] by kind code (DP->FW codes are below 0x80), [`UNMEASURED_EVENT`] elsewhere.
const BY_CODE: [u32; 0x80] = {
    let mut t = [UNMEASURED_EVENT; 0x80];
    let mut i = 0;
    while i < EVENTS.len() {
        assert!(EVENTS[i].kind.is_event());
        t[EVENTS[i].kind as usize] = EVENTS[i].instructions;
        i += 1;
    }
    t
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_dp_to_fw_kind_has_a_cost_and_others_the_unmeasured_charge() {
        for e in EVENTS {
            assert_eq!(event(e.kind as u8), e.instructions);
            assert!(e.instructions > 0);
            assert!(e.measured || e.instructions == UNMEASURED_EVENT);
        }
        let dearest = EVENTS
            .iter()
            .filter(|e| e.measured)
            .map(|e| e.instructions)
            .max();
        assert_eq!(dearest, Some(UNMEASURED_EVENT));
        assert_eq!(event(0), UNMEASURED_EVENT);
        assert_eq!(event(CsrKind::Retransmit as u8), UNMEASURED_EVENT);
    }
}
