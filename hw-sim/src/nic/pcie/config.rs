//! The link's parameters ([`PcieConfig`]), their presets and the `[nic.pcie]` table of a
//! scenario file.

use serde::{Deserialize, Serialize};

use crate::core::time::PS_PER_S;

/// Flow-control credits one receiver advertises (PCIe InitFC values). Header credits count
/// TLPs, data credits 16-byte units (4 DW). `0` is infinite, as PCIe advertises it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FcCredits {
    /// Posted request headers (memory writes).
    pub posted_hdr: u32,
    /// Posted request data (16 B units).
    pub posted_data: u32,
    /// Non-posted request headers (memory reads).
    pub nonposted_hdr: u32,
    /// Completion headers.
    pub completion_hdr: u32,
    /// Completion data (16 B units).
    pub completion_data: u32,
}

impl FcCredits {
    /// Infinite credits of every kind.
    pub const INFINITE: FcCredits = FcCredits {
        posted_hdr: 0,
        posted_data: 0,
        nonposted_hdr: 0,
        completion_hdr: 0,
        completion_data: 0,
    };
}

/// The host interface of a NIC: one PCIe link (see the module docs of `pcie` for what is
/// modelled and where each default comes from).
///
/// In a scenario file (`[nic.pcie]`): `preset = "gen6-x16"` (the default), `"gen5-x16"` or
/// `"ideal"`, then any field below to override the preset's, e.g.
/// `generation = 5`, `lanes = 8`, `mps = 512`, `host_credits = { posted_hdr = 64, ... }`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "PcieFile")]
pub struct PcieConfig {
    /// No host interface at all: work requests and payloads are on the NIC the moment the
    /// host has them, writes to the host cost nothing (the transport alone, as htsim models
    /// it). The link fields are then unused.
    pub ideal: bool,
    /// PCIe generation 1..=7: 2.5, 5, 8, 16, 32, 64, 128 GT/s per lane; 8b/10b (1, 2),
    /// 128b/130b (3..=5) or 256-byte FLITs (6, 7).
    pub generation: u8,
    /// Lanes: 1, 2, 4, 8, 16 or 32.
    pub lanes: u8,
    /// Max Payload Size (bytes, 128..=4096, a power of two): the largest write TLP and
    /// read completion.
    pub mps: u16,
    /// Max Read Request Size (bytes, 128..=4096, a power of two).
    pub mrrs: u16,
    /// Read Completion Boundary of the root complex (64 or 128 bytes).
    pub rcb: u16,
    /// One-way latency of a TLP, transaction layer to transaction layer (both ports' pipelines
    /// and the channel), ns; flow-control updates take it back.
    pub latency_ns: u64,
    /// Host memory: from a read request reaching the root complex to its first completion
    /// leaving (ns).
    pub completer_ns: u64,
    /// Link bandwidth taken by DLLPs (ACK/NAK, UpdateFC) and ordered sets, parts per million
    /// of each direction (non-FLIT generations; FLITs carry DLLPs in their own bytes).
    pub dllp_ppm: u32,
    /// Read requests the NIC may have outstanding (tags).
    pub read_tags: u16,
    /// Credits the host's root port advertises (it receives the NIC's writes and reads).
    pub host_credits: FcCredits,
    /// Credits the NIC advertises (it receives doorbells and read completions).
    pub nic_credits: FcCredits,
}

impl PcieConfig {
    /// PCIe Gen6 x16 (64 GT/s PAM4, FLIT mode: ~118 GB/s of TLP bytes each way), what an
    /// 800G NIC needs. The default.
    pub const GEN6_X16: PcieConfig = PcieConfig {
        ideal: false,
        generation: 6,
        lanes: 16,
        mps: 256,
        mrrs: 512,
        rcb: 64,
        latency_ns: 200,
        completer_ns: 400,
        dllp_ppm: 0,
        read_tags: 512,
        host_credits: FcCredits {
            posted_hdr: 256,
            posted_data: 4096,
            nonposted_hdr: 256,
            completion_hdr: 0,
            completion_data: 0,
        },
        nic_credits: FcCredits {
            posted_hdr: 64,
            posted_data: 256,
            nonposted_hdr: 64,
            completion_hdr: 0,
            completion_data: 0,
        },
    };
    /// PCIe Gen5 x16 (32 GT/s, 128b/130b: ~63 GB/s each way before DLLPs and TLP headers;
    /// caps a NIC near 400 Gb/s).
    pub const GEN5_X16: PcieConfig = PcieConfig {
        generation: 5,
        dllp_ppm: 10_000,
        ..PcieConfig::GEN6_X16
    };
    /// No host interface time at all (the transport alone).
    pub const IDEAL: PcieConfig = PcieConfig {
        ideal: true,
        ..PcieConfig::GEN6_X16
    };

    /// Raw transfer rate per lane (megatransfers per second) and the encoding's useful bytes
    /// per coded bytes (FLIT generations: TLP bytes per 256-byte FLIT).
    fn rate(&self) -> Option<(u64, u64, u64)> {
        Some(match self.generation {
            1 => (2_500, 8, 10),
            2 => (5_000, 8, 10),
            3 => (8_000, 128, 130),
            4 => (16_000, 128, 130),
            5 => (32_000, 128, 130),
            // FLIT: 236 TLP bytes, 6 DLLP bytes, 8 CRC bytes, 6 FEC bytes per 256.
            6 => (64_000, 236, 256),
            7 => (128_000, 236, 256),
            _ => return None,
        })
    }

    /// True for the FLIT-mode generations (6 and later).
    pub fn flit(&self) -> bool {
        self.generation >= 6
    }

    /// TLP bytes each direction carries per second (after encoding and DLLPs).
    pub fn tlp_bytes_per_s(&self) -> u64 {
        let Some((mts, num, den)) = self.rate() else {
            return 0;
        };
        let bits = u128::from(mts) * 1_000_000 * u128::from(self.lanes) * u128::from(num)
            / u128::from(den);
        let bits = bits * u128::from(1_000_000 - self.dllp_ppm.min(999_999)) / 1_000_000;
        (bits / 8) as u64
    }

    /// Femtoseconds one TLP byte takes on the wire.
    pub(crate) fn fs_per_byte(&self) -> u64 {
        (u128::from(PS_PER_S) * 1_000 / u128::from(self.tlp_bytes_per_s().max(1))) as u64
    }

    /// Bytes a TLP adds to its payload: the header (4 DW for memory requests with 64-bit
    /// addresses, 3 DW for completions) and, before FLIT mode, the framing token with the
    /// sequence number and the LCRC (8 bytes; FLITs carry those per FLIT, counted in the
    /// encoding). No ECRC.
    pub(crate) fn tlp_overhead(&self, kind: TlpKind) -> u32 {
        let hdr = match kind {
            TlpKind::MemWrite | TlpKind::MemRead => 16,
            TlpKind::Completion => 12,
        };
        if self.flit() {
            hdr
        } else {
            hdr + 8
        }
    }

    /// Checks the values.
    ///
    /// # Errors
    /// A message naming the field that is out of range.
    pub fn validate(&self) -> Result<(), String> {
        if self.ideal {
            return Ok(());
        }
        if self.rate().is_none() {
            return Err(format!("generation {} (1..=7)", self.generation));
        }
        if ![1, 2, 4, 8, 16, 32].contains(&self.lanes) {
            return Err(format!("lanes {} (1, 2, 4, 8, 16 or 32)", self.lanes));
        }
        for (name, v) in [("mps", self.mps), ("mrrs", self.mrrs)] {
            if !(128..=4096).contains(&v) || !v.is_power_of_two() {
                return Err(format!("{name} {v} (128..=4096, a power of two)"));
            }
        }
        if ![64, 128].contains(&self.rcb) {
            return Err(format!("rcb {} (64 or 128)", self.rcb));
        }
        if self.read_tags == 0 {
            return Err("read_tags 0 (at least 1)".into());
        }
        if self.dllp_ppm >= 500_000 {
            return Err(format!("dllp_ppm {} (below 500000)", self.dllp_ppm));
        }
        // A receiver must take the largest TLP it can be sent, or the link deadlocks.
        let max_data = u32::from(self.mps) / 16;
        for (who, c) in [
            ("host_credits", &self.host_credits),
            ("nic_credits", &self.nic_credits),
        ] {
            for (name, v, least) in [
                ("posted_data", c.posted_data, max_data),
                ("completion_data", c.completion_data, max_data),
            ] {
                if v != 0 && v < least {
                    return Err(format!(
                        "{who}.{name} {v}: below one MPS TLP ({least} credits of 16 B; 0 = infinite)"
                    ));
                }
            }
        }
        Ok(())
    }
}

impl Default for PcieConfig {
    fn default() -> Self {
        PcieConfig::GEN6_X16
    }
}

/// The TLP kinds the model moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TlpKind {
    /// MWr (posted).
    MemWrite,
    /// MRd (non-posted).
    MemRead,
    /// CplD.
    Completion,
}

impl TlpKind {
    /// Every kind, in declaration order (`kind as usize` indexes tables built from it).
    pub(crate) const ALL: [TlpKind; 3] = [TlpKind::MemWrite, TlpKind::MemRead, TlpKind::Completion];
}

/// A preset by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum Preset {
    Gen6X16,
    Gen5X16,
    Ideal,
}

/// `[nic.pcie]` as written: a preset and overrides (and the keys of the delay-and-bandwidth
/// model this replaced, refused by name).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PcieFile {
    preset: Option<Preset>,
    ideal: Option<bool>,
    generation: Option<u8>,
    lanes: Option<u8>,
    mps: Option<u16>,
    mrrs: Option<u16>,
    rcb: Option<u16>,
    latency_ns: Option<u64>,
    completer_ns: Option<u64>,
    dllp_ppm: Option<u32>,
    read_tags: Option<u16>,
    host_credits: Option<FcCredits>,
    nic_credits: Option<FcCredits>,
    doorbell_ns: Option<serde::de::IgnoredAny>,
    dma_read_ns: Option<serde::de::IgnoredAny>,
    dma_bytes_per_s: Option<serde::de::IgnoredAny>,
}

impl TryFrom<PcieFile> for PcieConfig {
    type Error = String;

    fn try_from(f: PcieFile) -> Result<Self, Self::Error> {
        for (key, set) in [
            ("doorbell_ns", f.doorbell_ns.is_some()),
            ("dma_read_ns", f.dma_read_ns.is_some()),
            ("dma_bytes_per_s", f.dma_bytes_per_s.is_some()),
        ] {
            if set {
                return Err(format!(
                    "`{key}` is no longer a key: the host interface is a PCIe link (preset = \
                     \"gen6-x16\" | \"gen5-x16\" | \"ideal\", generation, lanes, mps, mrrs, rcb, \
                     latency_ns, completer_ns, dllp_ppm, read_tags, host_credits, nic_credits); \
                     `preset = \"ideal\"` takes no time"
                ));
            }
        }
        let mut c = match f.preset {
            None | Some(Preset::Gen6X16) => PcieConfig::GEN6_X16,
            Some(Preset::Gen5X16) => PcieConfig::GEN5_X16,
            Some(Preset::Ideal) => PcieConfig::IDEAL,
        };
        macro_rules! set {
            ($($field:ident),*) => {$(
                if let Some(v) = f.$field {
                    c.$field = v;
                }
            )*};
        }
        set!(
            ideal,
            generation,
            lanes,
            mps,
            mrrs,
            rcb,
            latency_ns,
            completer_ns,
            dllp_ppm,
            read_tags,
            host_credits,
            nic_credits
        );
        c.validate()?;
        Ok(c)
    }
}
