//! The QPN word: every entry kind that names a QP, except `PostCqe` (which carries the CQ
//! number there and the QPN at 8), carries its QPN in bytes 4..8. Firmware reads and rewrites
//! it without decoding the entry (the NIC main loop translates device and engine QPNs in
//! place; the engine routes a report to its QP).

use super::{entries::*, CsrEntry, CsrKind};
use core::mem::offset_of;

impl CsrKind {
    /// The kinds whose entries carry a QPN in bytes 4..8 ([`CsrEntry::qpn_word`]).
    pub const WITH_QPN_WORD: [CsrKind; 25] = [
        CsrKind::AckSummary,
        CsrKind::Loss,
        CsrKind::Nack,
        CsrKind::TxStart,
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
        CsrKind::ProbeResult,
        CsrKind::CompleteSends,
    ];

    /// Whether entries of kind code `code` (any byte: unknown codes are `false`) carry a QPN
    /// in bytes 4..8: one of [`Self::WITH_QPN_WORD`].
    #[inline]
    pub const fn has_qpn_word(code: u8) -> bool {
        code & 0x40 == 0 && QPN_BITS[(code >> 7) as usize] >> (code & 0x3F) & 1 != 0
    }
}

/// [`CsrKind::WITH_QPN_WORD`] as a bit per code: DP->FW codes `0x00..0x40` in word 0, FW->DP
/// codes `0x80..0xC0` in word 1.
const QPN_BITS: [u64; 2] = {
    let mut m = [0u64; 2];
    let mut i = 0;
    while i < CsrKind::WITH_QPN_WORD.len() {
        let c = CsrKind::WITH_QPN_WORD[i] as u8;
        assert!(c < 0x40 || (c >= 0x80 && c < 0xC0));
        m[(c >> 7) as usize] |= 1 << (c & 0x3F);
        i += 1;
    }
    m
};

impl CsrEntry {
    /// The QPN of an entry whose kind [`CsrKind::has_qpn_word`].
    #[inline]
    pub fn qpn_word(&self) -> u32 {
        u32::from_le_bytes([self.0[4], self.0[5], self.0[6], self.0[7]])
    }

    /// Rewrite the QPN of an entry whose kind [`CsrKind::has_qpn_word`].
    #[inline]
    pub fn set_qpn_word(&mut self, qpn: u32) {
        self.0[4..8].copy_from_slice(&qpn.to_le_bytes());
    }
}

const _: () = {
    assert!(offset_of!(AckSummary, qpn) == 4);
    assert!(offset_of!(LossEntry, qpn) == 4);
    assert!(offset_of!(NackEntry, qpn) == 4);
    assert!(offset_of!(TxStart, qpn) == 4);
    assert!(offset_of!(CompleteSends, qpn) == 4);
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
