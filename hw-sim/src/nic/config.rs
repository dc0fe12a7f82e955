//! The NIC model's configuration, counters and errors.

use mrc_abi::wire::EvFormat;

use super::cores::FirmwareConfig;
use super::pcie::PcieConfig;
use crate::core::time::Duration;

/// Which transport the NICs run (serde names = report names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Transport {
    /// MRC spraying over 256 EVs on every plane (uSID source routes).
    Mrc,
    /// MRC with every packet of a QP pinned to one plane and one ECMP flow hash.
    #[serde(rename = "mrc-1ev")]
    Mrc1Ev,
    /// RoCE: one path per QP by ECMP hash, go-back-N, DCQCN, PFC lossless. The RoCE RC model
    /// (`nic::roce`) runs it; the MRC NIC refuses it with [`NicError::Config`].
    RoceEcmp,
    /// A random EV per packet and no path feedback: the MRC NIC with the settings of
    /// `nic::spray`.
    SprayOblivious,
}

impl Transport {
    /// Every transport, in report order.
    pub const ALL: [Transport; 4] = [
        Transport::Mrc,
        Transport::Mrc1Ev,
        Transport::RoceEcmp,
        Transport::SprayOblivious,
    ];

    /// The report name.
    pub fn name(self) -> &'static str {
        match self {
            Transport::Mrc => "mrc",
            Transport::Mrc1Ev => "mrc-1ev",
            Transport::RoceEcmp => "roce-ecmp",
            Transport::SprayOblivious => "spray-oblivious",
        }
    }

    /// The EV format the engine writes for this transport by default (sizes its headers);
    /// `mrc` may run any of the three ([`NicConfig::ev_format`]).
    pub fn ev_format(self) -> EvFormat {
        match self {
            Transport::Mrc | Transport::SprayOblivious => EvFormat::Srv6,
            Transport::Mrc1Ev | Transport::RoceEcmp => EvFormat::Udp,
        }
    }
}

impl NicConfig {
    /// The EV format the NICs' engines write.
    pub fn ev_format(&self) -> EvFormat {
        match self.transport {
            Transport::Mrc => self.mrc_ev_format,
            t => t.ev_format(),
        }
    }
}

/// What a NIC needs to know about the run.
#[derive(Clone, Copy, Debug)]
pub struct NicConfig {
    /// Transport.
    pub transport: Transport,
    /// The `mrc` transport's EV format: `Srv6` sprays uSID source routes (EV -> path), `Udp`
    /// and `Stev` write the EV into the UDP source port (and flow label) and the switches
    /// hash it (ECMP). The other transports keep their own ([`Transport::ev_format`]).
    pub mrc_ev_format: EvFormat,
    /// Planes (ports).
    pub planes: u8,
    /// Rate of one port (bits per second).
    pub port_bps: u64,
    /// Payload bytes per full packet.
    pub mtu_payload: u32,
    /// Unloaded round trip (for congestion control).
    pub base_rtt: Duration,
    /// Loss inference: a SACK hole is a loss after this many later transmissions are
    /// acknowledged ([`mrc_firmware::engine::EngineConfig::reorder_tx`], written to each QP's
    /// datapath context).
    pub reorder_tx: u32,
    /// Engine ACK timeout exponent (`1.024 us * 2^t`).
    pub timeout_exp: u8,
    /// Retries before the engine gives up.
    pub retry_cnt: u8,
    /// Seed (mixed into the 1-EV flow hash).
    pub seed: u64,
    /// Host interface timing.
    pub pcie: PcieConfig,
    /// The firmware cores (module `cores`).
    pub firmware: FirmwareConfig,
    /// Test only: the datapath stages carry the planted bug
    /// ([`mrc_firmware::datapath::stage::DatapathConfig::planted_bug`]: a last-hop trim NACK
    /// taken as the packet's ACK), so a checker can be shown to catch it.
    pub stage_planted_bug: bool,
    /// What runs the datapath stage's blocks (`[nic.datapath]`, module `blocks`).
    pub datapath: DatapathLevelConfig,
    /// The time of a port event of the run (a transceiver pulled or dark): each QP notes the
    /// end of its longest una stall ending after it ([`crate::nic::Nic::recovered_at`]).
    pub stall_mark: Option<crate::core::time::Time>,
}

/// What answers the datapath stage's hardware blocks (`[nic.datapath] level`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DatapathLevel {
    /// The Rust reference models, clocked with the RTL's latencies and intervals.
    #[default]
    Model,
    /// The Verilator-built RTL blocks (`mrc-rtl-cosim`; needs mrc-sim built with the `rtl`
    /// feature and Verilator).
    Rtl,
}

impl DatapathLevel {
    /// The level's name (`model`, `rtl`).
    pub fn name(self) -> &'static str {
        match self {
            DatapathLevel::Model => "model",
            DatapathLevel::Rtl => "rtl",
        }
    }
}

/// An RTL block by its module name (`[nic.datapath] planted_bug`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RtlBlock {
    /// `ev_sprayer.sv` (`-DPLANTED_BUG_PLANE`: the plane cursor skips plane 1 after a pick on
    /// plane 0).
    EvSprayer,
    /// `rx_psn_tracker.sv` (`-DPLANTED_BUG_SACK`: the SACK never reports the PSN after its
    /// base).
    RxPsnTracker,
    /// `hdr_builder.sv` (`-DPLANTED_BUG`: ImmDt left out of the UDP checksum, so only a run
    /// with Write-with-Immediate exercises it).
    HdrBuilder,
}

/// `[nic.datapath]`: the datapath level, and for checking the differential tests a planted
/// bug.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatapathLevelConfig {
    /// `"model"` (the default) or `"rtl"`.
    #[serde(default)]
    pub level: DatapathLevel,
    /// Test only, `rtl` level only: this block is its planted-bug variant (see [`RtlBlock`]),
    /// so a differential test can show that it catches a broken block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planted_bug: Option<RtlBlock>,
}

impl DatapathLevelConfig {
    /// The datapath at `level`, no planted bug.
    pub const fn at(level: DatapathLevel) -> Self {
        DatapathLevelConfig {
            level,
            planted_bug: None,
        }
    }

    /// The key and reason of a bad setting.
    ///
    /// # Errors
    /// A planted bug at the model level (it has no RTL block to plant it in).
    pub fn check(&self) -> Result<(), (&'static str, &'static str)> {
        if self.planted_bug.is_some() && self.level != DatapathLevel::Rtl {
            return Err((
                "planted_bug",
                "a planted bug is an RTL block's: it needs level = \"rtl\"",
            ));
        }
        Ok(())
    }
}

/// Per-NIC counters of the model itself (the engine has its own).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NicCounters {
    /// Packets handed to the fabric.
    pub tx_packets: u64,
    /// Their link bytes.
    pub tx_bytes: u64,
    /// Payload bytes of data packets handed to the fabric (retransmissions included).
    pub tx_payload_bytes: u64,
    /// Packets received from the fabric.
    pub rx_packets: u64,
    /// Their bytes as delivered (trimmed ones at their trimmed size).
    pub rx_bytes: u64,
    /// Deliveries without headers (their side-table entry was dropped; see `SIDE_SLOTS`).
    pub side_misses: u64,
    /// Untrimmed payloads whose checksum failed (dropped).
    pub bad_payload: u64,
    /// Deliveries naming a QPN this NIC does not have (dropped).
    pub unknown_qpn: u64,
    /// Deliveries dropped for back-pressure: packets that found the port's RX FIFO full behind
    /// one the stage refused (its event buffer full, its firmware core's CSR ring with no
    /// room), and frames injected from outside the fabric (`Nic::driver_inject`) that their
    /// stage refused.
    pub rx_refused: u64,
    /// Packets the fabric refused (unknown host or plane): a model bug if non-zero.
    pub inject_errors: u64,
    /// Send completions with an error status.
    pub completion_errors: u64,
    /// EV state changes the engines reported (`EvEvent` host writes: retire, deny, recover...).
    pub ev_state_changes: u64,
    /// Payload bytes the stages told this NIC to place (as a receiver).
    pub placed_bytes: u64,
    /// Reports the stages made that the engines took (DP->FW CSR entries).
    pub fw_events: u64,
    /// Commands the engines gave the stages (FW->DP CSR entries, host writes included).
    pub fw_commands: u64,
    /// DP->FW reports a stage had to keep because its firmware core's CSR ring was full, each
    /// counted once (firmware time on; back-pressure, nothing dropped).
    pub csr_held: u64,
    /// Doorbell writes: each time the host posted work requests to a QP.
    pub doorbells: u64,
    /// Main-loop iterations that failed (the `elf` core faulted, hung or parked: its shard's
    /// firmware runs no more; [`crate::nic::Nic::firmware_fault`] says why).
    pub fw_faults: u64,
    /// CQEs of the image's shape that named no QP or work request of their shard (dropped).
    pub bad_cqes: u64,
}

/// Why a NIC could not be set up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NicError {
    /// The engine or stage refused its configuration, a QP, a region or a QP transition.
    Engine(&'static str),
    /// A configuration value out of range.
    Config(&'static str),
    /// The NIC's firmware could not start, or refused its setup (the image's shape).
    Firmware(&'static str),
}

impl core::fmt::Display for NicError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            NicError::Engine(w) => write!(f, "engine refused {w}"),
            NicError::Config(w) => write!(f, "nic config: {w}"),
            NicError::Firmware(w) => write!(f, "nic firmware: {w}"),
        }
    }
}

impl std::error::Error for NicError {}
