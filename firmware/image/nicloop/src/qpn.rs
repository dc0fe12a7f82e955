//! Device QPN <-> engine QPN, for the entries that cross the loop with the admin tables.
//!
//! Every CSR entry kind that names a QP carries its QPN in bytes 4..8 (checked below at
//! compile time), except `PostCqe` (which the engine never makes; the loop builds it with the
//! device QPN).

use core::mem::offset_of;

use mrc_abi::device::csr::*;

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

/// The kinds whose entries carry a QPN in bytes 4..8.
const WITH_QPN: [CsrKind; 24] = [
    CsrKind::AckSummary,
    CsrKind::Loss,
    CsrKind::Nack,
    CsrKind::TxStart,
    CsrKind::TxDone,
    CsrKind::WimmPlaced,
    CsrKind::ProbeReply,
    CsrKind::RxFatal,
    CsrKind::Flushed,
    CsrKind::EvDeliveries,
    CsrKind::SkipServed,
    CsrKind::Retransmit,
    CsrKind::EvUpdate,
    CsrKind::SendProbe,
    CsrKind::WindowUpdate,
    CsrKind::Complete,
    CsrKind::EvEvent,
    CsrKind::PlaneWeight,
    CsrKind::RetransmitUnacked,
    CsrKind::TailProbe,
    CsrKind::QpInit,
    CsrKind::QpRtr,
    CsrKind::QpRts,
    CsrKind::QpState,
];

/// [`WITH_QPN`] as a bit per code: DP->FW codes `0x00..0x40` in word 0, FW->DP codes
/// `0x80..0xC0` in word 1.
const QPN_BITS: [u64; 2] = {
    let mut m = [0u64; 2];
    let mut i = 0;
    while i < WITH_QPN.len() {
        let c = WITH_QPN[i] as u8;
        assert!(c < 0x40 || (c >= 0x80 && c < 0xC0));
        m[(c >> 7) as usize] |= 1 << (c & 0x3F);
        i += 1;
    }
    m
};

/// Whether entries of kind code `kind` carry a QPN in bytes 4..8.
#[inline]
pub(crate) fn has_qpn(kind: u8) -> bool {
    kind & 0x40 == 0 && QPN_BITS[usize::from(kind >> 7)] >> (kind & 0x3F) & 1 != 0
}

/// The QPN of an entry that [`has_qpn`].
#[inline]
pub(crate) fn qpn_of(e: &CsrEntry) -> u32 {
    u32::from_le_bytes([e.0[4], e.0[5], e.0[6], e.0[7]])
}

/// Write the QPN of an entry that [`has_qpn`].
#[inline]
pub(crate) fn set_qpn(e: &mut CsrEntry, qpn: u32) {
    e.0[4..8].copy_from_slice(&qpn.to_le_bytes());
}

const _: () = {
    assert!(offset_of!(AckSummary, qpn) == 4);
    assert!(offset_of!(LossEntry, qpn) == 4);
    assert!(offset_of!(NackEntry, qpn) == 4);
    assert!(offset_of!(TxStart, qpn) == 4);
    assert!(offset_of!(TxDone, qpn) == 4);
    assert!(offset_of!(WimmPlaced, qpn) == 4);
    assert!(offset_of!(ProbeReply, qpn) == 4);
    assert!(offset_of!(RxFatal, qpn) == 4);
    assert!(offset_of!(Flushed, qpn) == 4);
    assert!(offset_of!(EvDeliveries, qpn) == 4);
    assert!(offset_of!(SkipServed, qpn) == 4);
    assert!(offset_of!(Retransmit, qpn) == 4);
    assert!(offset_of!(EvUpdate, qpn) == 4);
    assert!(offset_of!(SendProbe, qpn) == 4);
    assert!(offset_of!(WindowUpdate, qpn) == 4);
    assert!(offset_of!(Complete, qpn) == 4);
    assert!(offset_of!(EvEventEntry, qpn) == 4);
    assert!(offset_of!(PlaneWeight, qpn) == 4);
    assert!(offset_of!(RetransmitUnacked, qpn) == 4);
    assert!(offset_of!(TailProbe, qpn) == 4);
    assert!(offset_of!(QpInitCtx, qpn) == 4);
    assert!(offset_of!(QpRtrCtx, qpn) == 4);
    assert!(offset_of!(QpRtsCtx, qpn) == 4);
    assert!(offset_of!(QpStateEntry, qpn) == 4);
};

#[cfg(test)]
mod tests {
    use super::*;
    use mrc_abi::Psn;

    /// `has_qpn` names exactly the kinds whose decoded entry has a QPN, other than PostCqe.
    #[test]
    fn has_qpn_matches_the_decoder() {
        let samples = [
            CsrEvent::TxStart(TxStart::new(5, Psn::new(1))),
            CsrEvent::PortEvent(PortEventEntry::new(1, 1, true, 1)),
            CsrEvent::PlaneDown(PlaneDown::new(2)),
            CsrEvent::TailProbe(TailProbe::new(5)),
            CsrEvent::RegionWrite(RegionWrite::remove(5)),
            CsrEvent::QpState(QpStateEntry::new(5, QP_RESET)),
        ];
        for s in samples {
            let e = s.encode();
            assert_eq!(has_qpn(e.kind_code()), s.qpn().is_some(), "{s:?}");
            if let Some(q) = s.qpn() {
                assert_eq!(qpn_of(&e), q);
            }
        }
        for k in CsrKind::ALL {
            assert_eq!(has_qpn(k as u8), WITH_QPN.contains(&k), "{k:?}");
        }
        assert!(!has_qpn(CsrKind::PostCqe as u8) && !has_qpn(0x41) && !has_qpn(0xC1));
    }
}
