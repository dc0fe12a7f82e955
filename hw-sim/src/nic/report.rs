//! What one NIC's hardware did over a run: the objects of `transports[].nics` in the JSON
//! report (one per NIC of a run of the MRC NIC model; `roce-ecmp` runs its own model and has
//! none) and the NIC rows of the table.
//!
//! Each part of the NIC reports its own figures: the firmware cores ([`FirmwareReport`]), the
//! host interface ([`PcieReport`]) and the datapath blocks ([`BlockReport`], pipeline order).
//! Utilisations are fractions `0..=1` of the run's length (time zero to the end of the run).

use super::Nic;
use crate::core::time::{Duration, Time};

/// One NIC over a run.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct NicReport {
    /// The host.
    pub host: u32,
    /// Its firmware cores and CSR queues.
    #[serde(flatten)]
    pub firmware: FirmwareReport,
    /// Its host interface.
    #[serde(flatten)]
    pub pcie: PcieReport,
    /// Its datapath blocks, in pipeline order.
    pub datapath: Vec<BlockReport>,
    /// At the `rtl` datapath level, what its RTL blocks did (absent at the `model` level).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rtl: Option<super::RtlReport>,
}

/// The firmware cores and the CSR queues between them and the datapath (all zero with
/// firmware time off; the default's level is `native`).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct FirmwareReport {
    /// Busy core cycles over the cores' cycles (cores x run).
    pub core_utilisation: f64,
    /// Most DP->FW entries in one core's CSR ring at once (at most
    /// [`mrc_nicloop::RING_ENTRIES`]).
    pub csr_queue_max_depth: u64,
    /// DP->FW reports the stages had to hold because their core's ring was full, each counted
    /// once (back-pressure: nothing is dropped).
    pub csr_backpressure: u64,
    /// Deliveries dropped because the port's RX FIFO was full behind one a stage refused (its
    /// event buffer full behind a full ring): back-pressure that overflowed the port.
    pub rx_refused: u64,
    /// Main-loop steps the cores ran.
    pub core_steps: u64,
    /// Who ran the main loop: `native` or `elf` ([`super::FirmwareLevel::name`]).
    pub firmware_level: &'static str,
    /// `elf`: instructions the NIC's emulated cores retired, boots included (`null` at the
    /// native level, whose cost table is not executed).
    pub guest_instructions: Option<u64>,
    /// Main-loop iterations that failed (an emulated core faulted, hung or parked; its
    /// shard's firmware ran no more).
    pub firmware_faults: u64,
}

impl Default for FirmwareReport {
    fn default() -> Self {
        FirmwareReport {
            core_utilisation: 0.0,
            csr_queue_max_depth: 0,
            csr_backpressure: 0,
            rx_refused: 0,
            core_steps: 0,
            firmware_level: super::FirmwareLevel::Native.name(),
            guest_instructions: None,
            firmware_faults: 0,
        }
    }
}

/// The host interface (PCIe).
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct PcieReport {
    /// NIC -> host direction (read requests, payload writes, CQEs, events): time its wire
    /// was serialising TLPs over the run.
    pub pcie_tx_utilisation: f64,
    /// Host -> NIC direction (doorbells, read completions): the same.
    pub pcie_rx_utilisation: f64,
    /// Doorbell writes the host made (one per batch of work requests).
    pub doorbells: u64,
    /// Bytes the NIC moved by DMA, both directions: WQEs and payloads read, payloads, CQEs
    /// and event records written (TLP payload bytes, without headers).
    pub dma_bytes: u64,
}

/// One datapath block.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct BlockReport {
    /// The block (its RTL module name).
    pub block: &'static str,
    /// Cycles the block accepted an input over the run's cycles.
    pub occupancy: f64,
    /// Cycles an input waited because the block was busy.
    pub backpressure_cycles: u64,
}

/// `busy` over `cores` x `span`, 0 for an empty span.
pub(crate) fn utilisation(busy: Duration, span: Duration, cores: u64) -> f64 {
    let whole = u128::from(span.as_ps()) * u128::from(cores.max(1));
    if whole == 0 {
        return 0.0;
    }
    (busy.as_ps() as f64 / whole as f64).min(1.0)
}

impl Nic {
    /// What this NIC's hardware did from time zero to `end`.
    pub fn report(&self, end: Time) -> NicReport {
        NicReport {
            host: self.host,
            firmware: self.firmware_report(end),
            pcie: self.pcie_report(end),
            datapath: self.dp.report(end),
            rtl: (self.cfg.datapath.level == super::DatapathLevel::Rtl).then(|| self.rtl_report()),
        }
    }

    fn firmware_report(&self, end: Time) -> FirmwareReport {
        FirmwareReport {
            core_utilisation: utilisation(
                self.cores_busy_through(end),
                end.since_start(),
                self.cores.len() as u64,
            ),
            csr_queue_max_depth: self
                .cores
                .iter()
                .map(|c| c.ring_max as u64)
                .max()
                .unwrap_or(0),
            csr_backpressure: self.counters.csr_held,
            rx_refused: self.counters.rx_refused,
            core_steps: self.cores.iter().map(|c| c.steps).sum(),
            firmware_level: self.cfg.firmware.level.name(),
            guest_instructions: self.guest_instructions(),
            firmware_faults: self.counters.fw_faults,
        }
    }

    fn pcie_report(&self, end: Time) -> PcieReport {
        let span = end.since_start();
        PcieReport {
            pcie_tx_utilisation: utilisation(self.link.tx.busy_through(end), span, 1),
            pcie_rx_utilisation: utilisation(self.link.rx.busy_through(end), span, 1),
            doorbells: self.counters.doorbells,
            dma_bytes: self.link.dma_bytes,
        }
    }

    /// What this NIC's parts were busy with from time zero to `now`, by name, for plots of
    /// utilisation over time: `(name, busy time, units)`, the busy time summed over the units
    /// (a utilisation is busy / (units x time)).
    pub fn busy_series(&self, now: Time) -> Vec<(&'static str, Duration, u32)> {
        let mut series = vec![
            ("PCIe NIC->host", self.link.tx.busy_through(now), 1),
            ("PCIe host->NIC", self.link.rx.busy_through(now), 1),
        ];
        if !self.cores.is_empty() {
            let busy = self.cores_busy_through(now);
            series.push(("firmware cores", busy, self.cores.len() as u32));
        }
        series
    }

    /// The firmware cores' busy time from time zero to `now`, summed over the cores. A step
    /// is charged when it starts: the part of a running step still ahead of `now` is not
    /// busy time yet.
    fn cores_busy_through(&self, now: Time) -> Duration {
        let fw = self.cfg.firmware;
        self.cores.iter().fold(Duration::ZERO, |sum, c| {
            let charged = fw.time_of(c.busy_cycles);
            let ahead = c
                .busy_until
                .filter(|&u| u > now)
                .map_or(Duration::ZERO, |u| u.duration_since(now));
            sum.saturating_add(charged.saturating_sub(ahead))
        })
    }
}
