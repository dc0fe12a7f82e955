//! Semantic checks of a parsed scenario: ranges serde cannot express.

use std::collections::BTreeSet;

use crate::nic::HEADER_BYTES;

use super::file::{EvFormatFile, ScenarioFile, ShapeFile};
use crate::nic::{NicShape, Transport};
use crate::run::HostModel;

/// Most planes a simulated NIC has ports for.
pub const MAX_PLANES: u32 = crate::nic::MAX_PLANES as u32;
/// Wire MTU range accepted.
pub const MTU_BYTES: core::ops::RangeInclusive<u32> = 256..=9216;
/// Reorder threshold range (a SACK hole is judged only inside the ACK's 64-bit bitmap).
pub const REORDER_TX: core::ops::RangeInclusive<u32> = 1..=63;

type Bad = (String, String);

fn bad<T>(key: &str, why: impl Into<String>) -> Result<T, Bad> {
    Err((key.to_string(), why.into()))
}

impl ScenarioFile {
    /// Checks every value; the error is (dotted key, why).
    ///
    /// # Errors
    /// The first key whose value is out of range.
    pub fn validate(&self) -> Result<(), (String, String)> {
        if self.description.trim().is_empty() || self.description.contains('\n') {
            return bad("description", "must be one non-empty line");
        }
        if self.transports.is_empty() {
            return bad("transports", "must name at least one transport");
        }
        let mut seen = BTreeSet::new();
        for t in &self.transports {
            if !seen.insert(t.name()) {
                return bad("transports", format!("`{}` is listed twice", t.name()));
            }
        }
        if self.time_limit_us == 0 {
            return bad("time_limit_us", "must be > 0");
        }
        self.validate_fabric()?;
        let n = &self.nic;
        if n.ev_format != EvFormatFile::Srv6 && !self.transports.contains(&Transport::Mrc) {
            return bad(
                "nic.ev_format",
                "sets the EV format of the `mrc` transport, which this scenario does not run",
            );
        }
        if !MTU_BYTES.contains(&n.mtu_bytes) {
            return bad(
                "nic.mtu_bytes",
                format!(
                    "must be {}..={} (the payload per packet is this minus the {HEADER_BYTES} B \
                     header bytes: headers, FCS, preamble and gap)",
                    MTU_BYTES.start(),
                    MTU_BYTES.end()
                ),
            );
        }
        if !REORDER_TX.contains(&n.reorder_tx) {
            return bad(
                "nic.reorder_tx",
                "must be 1..=63 (a hole is judged only inside the ACK's 64-bit SACK bitmap)",
            );
        }
        if n.timeout_exp > 31 {
            return bad("nic.timeout_exp", "must be 0..=31");
        }
        if let Err((key, why)) = n.firmware.check() {
            return bad(&format!("nic.firmware.{key}"), why);
        }
        if let Err((key, why)) = n.datapath.check() {
            return bad(&format!("nic.datapath.{key}"), why);
        }
        if self.host.model == HostModel::Driver && n.firmware.shape() == NicShape::Image {
            return bad(
                "host.model",
                "the driver's NICs have the simulator's shape: set [nic.firmware] shape = \"sim\" \
                 or [host] model = \"flows\"",
            );
        }
        self.validate_workload()?;
        if let Some(t) = self.transceiver {
            if t.at_us >= self.time_limit_us {
                return bad("transceiver.at_us", "must be before time_limit_us");
            }
            let hosts = self.fabric.shape.to_shape().hosts();
            if u64::from(t.nic) >= u64::from(hosts) {
                return bad(
                    "transceiver.nic",
                    format!("this fabric has {hosts} hosts (0..={})", hosts - 1),
                );
            }
            if t.port >= self.fabric.planes {
                return bad(
                    "transceiver.port",
                    format!(
                        "a NIC has one port per plane: {} (0..={})",
                        self.fabric.planes,
                        self.fabric.planes - 1
                    ),
                );
            }
            if n.firmware.shape != Some(crate::nic::NicShape::Image) {
                return bad(
                    "transceiver",
                    "needs [nic.firmware] shape = \"image\": only the NIC image watches its \
                     transceivers (its port monitor, CMIS over I2C)",
                );
            }
            if self
                .transports
                .iter()
                .any(|t| *t != crate::nic::Transport::Mrc)
            {
                return bad(
                    "transceiver",
                    "needs transports = [\"mrc\"]: only the MRC NIC has the image's board",
                );
            }
        }
        if let Some(f) = self.failure {
            if f.at_us >= self.time_limit_us {
                return bad("failure.at_us", "must be before time_limit_us");
            }
            let links = self.t1_links_per_plane();
            if u64::from(f.t1_link) >= links {
                return bad(
                    "failure.t1_link",
                    format!(
                        "this fabric has {links} T0-T1 links per plane (0..={})",
                        links - 1
                    ),
                );
            }
        }
        Ok(())
    }

    fn validate_fabric(&self) -> Result<(), Bad> {
        let f = &self.fabric;
        if f.planes == 0 || f.planes > MAX_PLANES {
            return bad(
                "fabric.planes",
                format!("must be 1..={MAX_PLANES} (one NIC port per plane)"),
            );
        }
        if let Err(e) = f.to_config(self.seed).validate() {
            return bad(&format!("fabric.{}", e.field), e.why);
        }
        let hosts = f.to_config(self.seed).shape.hosts();
        if hosts < 2 {
            return bad(
                "fabric.shape",
                "needs at least 2 hosts (every host sends to another)",
            );
        }
        if hosts > 1 << 20 {
            return bad("fabric.shape", "at most 1,048,576 hosts");
        }
        Ok(())
    }

    /// The workload's own checks ([`Workload::validate`]) against the fabric's host count.
    fn validate_workload(&self) -> Result<(), Bad> {
        let hosts = self.fabric.shape.to_shape().hosts();
        self.workload
            .validate(hosts)
            .or_else(|e| bad(&format!("workload.{}", e.field), e.why))
    }

    /// T0-T1 links in one plane.
    pub fn t1_links_per_plane(&self) -> u64 {
        match self.fabric.shape {
            ShapeFile::LeafSpine { hosts, radix } => {
                let half = u64::from(radix / 2).max(1);
                u64::from(hosts).div_ceil(half) * half
            }
            ShapeFile::FatTree { k } => u64::from(k).pow(3) / 4,
        }
    }
}
