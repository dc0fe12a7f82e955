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
}

/// The firmware cores and the CSR queues between them and the datapath.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct FirmwareReport {
    /// Busy core time over the cores' total time.
    pub core_utilisation: f64,
    /// Most DP->FW entries waiting for a core at once.
    pub csr_queue_max_depth: u64,
}

/// The host interface (PCIe).
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct PcieReport {
    /// NIC -> host direction: busy time over the run.
    pub pcie_tx_utilisation: f64,
    /// Host -> NIC direction: busy time over the run.
    pub pcie_rx_utilisation: f64,
    /// Doorbell writes the host made.
    pub doorbells: u64,
    /// Bytes the NIC moved by DMA (both directions, payload and descriptors).
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
        let span = end.since_start();
        NicReport {
            host: self.host,
            firmware: self.firmware_report(span),
            pcie: self.pcie_report(span),
            datapath: self.dp.report(end),
        }
    }

    fn firmware_report(&self, span: Duration) -> FirmwareReport {
        FirmwareReport {
            core_utilisation: utilisation(self.counters.fw_busy, span, self.fw_free.len() as u64),
            csr_queue_max_depth: self.counters.fw_queue_max,
        }
    }

    fn pcie_report(&self, span: Duration) -> PcieReport {
        PcieReport {
            pcie_tx_utilisation: 0.0,
            pcie_rx_utilisation: utilisation(self.dma.busy, span, 1),
            doorbells: self.counters.doorbells,
            dma_bytes: self.dma.moved,
        }
    }
}
