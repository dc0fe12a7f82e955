//! Device QPN <-> engine QPN, for the entries that cross the loop with the admin tables.
//!
//! The entries are rewritten in place through their QPN word (`CsrEntry::qpn_word`, every
//! kind that names a QP except `PostCqe`, which the engine never makes: the loop builds it
//! with the device QPN).

use crate::{NicAdmin, DEVICE_QPNS};

/// No engine QP behind a device QPN.
const NONE: u8 = u8::MAX;

/// The two directions of the QPN translation. Built from the admin tables after every admin
/// command ([`QpnMap::update`]).
///
/// Device -> engine follows the tables exactly: once a device QP is destroyed, entries the
/// datapath still reports for it are dropped. Engine -> device keeps a destroyed QP's device
/// number until its engine slot is reused, so the engine's last commands for it (its RESET)
/// still reach the datapath context they are for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct QpnMap {
    to_engine: [u8; DEVICE_QPNS],
    to_device: [u32; DEVICE_QPNS],
}

impl QpnMap {
    pub(crate) const EMPTY: QpnMap = QpnMap {
        to_engine: [NONE; DEVICE_QPNS],
        to_device: [0; DEVICE_QPNS],
    };

    /// Follow the admin tables' QPs.
    pub(crate) fn update(&mut self, admin: &NicAdmin) {
        self.to_engine = [NONE; DEVICE_QPNS];
        for (&dev, q) in admin.qps.iter() {
            let Some(e) = q.engine_qpn() else { continue };
            let (Some(d), Some(slot)) = (
                self.to_engine.get_mut(dev as usize),
                self.to_device.get_mut(e as usize),
            ) else {
                continue;
            };
            if let Ok(e) = u8::try_from(e) {
                *d = e;
                *slot = dev;
            }
        }
    }

    /// The engine QP behind device QP `dev`.
    #[inline]
    pub(crate) fn engine(&self, dev: u32) -> Option<u32> {
        match self.to_engine.get(dev as usize) {
            Some(&e) if e != NONE => Some(u32::from(e)),
            _ => None,
        }
    }

    /// The device QP of engine QP `e` (0 is no device QPN: `None`).
    #[inline]
    pub(crate) fn device(&self, e: u32) -> Option<u32> {
        self.to_device.get(e as usize).copied().filter(|&d| d != 0)
    }
}
