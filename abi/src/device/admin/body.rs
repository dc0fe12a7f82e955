//! Per-command body structs of admin commands (little-endian, at most 56 bytes each, written at
//! byte 8 of the [`super::AdminCmd`]; the rest of the body area is reserved and must be 0).

use crate::layout::le_struct;
use core::mem::size_of;
use zerocopy::little_endian::{U16, U32, U64};

use super::BODY_BYTES;

macro_rules! body {
    ($(#[doc = $sd:literal])* $name:ident { $($(#[doc = $d:literal])* $f:ident : $t:ty),* $(,)? }) => {
        le_struct! {
            $(#[doc = $sd])*
            pub struct $name {
                $($(#[doc = $d])* pub $f: $t,)*
            }
        }
        const _: () = assert!(size_of::<$name>() <= BODY_BYTES && size_of::<$name>() % 4 == 0);
    };
}

body!(
    /// A command that names one object (dealloc PD, dereg MR, destroy CQ/QP/profiles, query QP,
    /// query port, fw commit with image CRC, ...).
    ObjectId {
        /// The object's handle (PD number, lkey, CQN, QPN, profile id, port, CRC).
        id: U32,
    }
);
body!(
    /// REG_MR: register `length` bytes at virtual address `va`, mapped contiguously at `iova`.
    RegMr {
        /// Protection domain.
        pd: U32,
        /// `ACCESS_*` bits.
        access: U32,
        /// Virtual address the region is addressed by (SGEs and RETHs).
        va: U64,
        /// IOVA the device DMAs to.
        iova: U64,
        /// Length in bytes (> 0).
        length: U64,
    }
);
body!(
    /// CREATE_CQ.
    CreateCq {
        /// log2 entries (1..=24).
        log2_entries: u8,
        /// Reserved (0).
        rsvd: u8,
        /// MSI-X vector for armed completions.
        irq_vector: U16,
        /// Reserved (0).
        rsvd2: U32,
        /// Ring IOVA (32-byte CQEs).
        base: U64,
    }
);
body!(
    /// CREATE_QP: a QP in RESET.
    CreateQp {
        /// Protection domain.
        pd: U32,
        /// CQ for send completions.
        send_cq: U32,
        /// CQ for receive completions.
        recv_cq: U32,
        /// log2 send ring entries (1..=16).
        sq_log2: u8,
        /// log2 receive ring entries (1..=16).
        rq_log2: u8,
        /// Reserved (0).
        rsvd: U16,
        /// Send ring IOVA (64-byte WQEs).
        sq_base: U64,
        /// Receive ring IOVA (32-byte WQEs).
        rq_base: U64,
    }
);
body!(
    /// MODIFY_QP to INIT (from RESET).
    QpInit {
        /// QPN.
        qpn: U32,
        /// Target state ([`super::QpState::Init`]).
        to_state: u8,
        /// QP hint: traffic class (DSCP, 0..=63).
        dscp: u8,
        /// QP hint: `HINT_*` flags.
        hint_flags: U16,
        /// EV profile the QP sprays over.
        ev_profile: U32,
        /// CC profile.
        cc_profile: U32,
    }
);
body!(
    /// MODIFY_QP to RTR (from INIT).
    QpRtr {
        /// QPN.
        qpn: U32,
        /// Target state ([`super::QpState::Rtr`]).
        to_state: u8,
        /// `RTR_*` flags.
        flags: u8,
        /// Responder MPR in units of 128 PSNs (>= 1).
        responder_mpr: U16,
        /// Remote QPN.
        dest_qpn: U32,
        /// Most Write-with-Immediate in flight accepted (>= 1).
        max_wimm: U16,
        /// Reserved (0).
        rsvd: U16,
        /// First expected PSN (24 bits).
        rq_psn: U32,
        /// Remote NIC IPv6 address.
        remote_addr: [u8; 16],
    }
);
body!(
    /// MODIFY_QP to RTS (from RTR).
    QpRts {
        /// QPN.
        qpn: U32,
        /// Target state ([`super::QpState::Rts`]).
        to_state: u8,
        /// Retry count, 0..=25 (<= 7 linear backoff, > 7 exponential, 25 = retry forever).
        retry_count: u8,
        /// Requester MPR in units of 128 PSNs (>= 1).
        requester_mpr: U16,
        /// Most Write-with-Immediate in flight (>= 1).
        max_wimm: U16,
        /// ACK timeout exponent t <= 24: timeout = 1.024 us * 2^t.
        ack_timeout_exp: u8,
        /// Reserved (0).
        rsvd: u8,
        /// First PSN to send (24 bits).
        sq_psn: U32,
    }
);
body!(
    /// MODIFY_QP to RESET or ERROR (from any state).
    QpReset {
        /// QPN.
        qpn: U32,
        /// Target state ([`super::QpState::Reset`] or [`super::QpState::Error`]).
        to_state: u8,
        /// Reserved (0).
        rsvd: [u8; 3],
    }
);
body!(
    /// SET_PORT_ADMIN_STATE.
    PortAdmin {
        /// Port.
        port: u8,
        /// 1 up, 0 down.
        up: u8,
        /// Reserved (0).
        rsvd: U16,
    }
);
body!(
    /// CREATE / MODIFY_EV_FORMAT_PROFILE: how EVs are carried.
    EvFormatProfile {
        /// Profile id (MODIFY; 0 in CREATE).
        id: U32,
        /// [`crate::device::EvFormat`] code.
        encoding: u8,
        /// `FMT_*` flags.
        flags: u8,
        /// DSCP of data packets (0..=63).
        dscp: u8,
        /// Hop limit (> 0).
        hop_limit: u8,
        /// SRv6: the 32-bit uSID locator block (e.g. 0xfcbbbb00).
        locator_block: U32,
        /// UDP / STEV: lowest source port used.
        src_port_min: U16,
        /// UDP / STEV: highest source port used (>= min).
        src_port_max: U16,
    }
);
body!(
    /// CREATE / MODIFY_EV_PROFILE: which EVs a QP may use.
    EvProfile {
        /// Profile id (MODIFY; 0 in CREATE).
        id: U32,
        /// EV format profile.
        format_profile: U32,
        /// [`super::EvProfileKind`] code (CREATE; must match in MODIFY).
        kind: u8,
        /// [`super::EvProfileState`] code (CREATE: INIT).
        state: u8,
        /// Fewest usable EVs before the QP reports an event (>= 1, <= num_evs).
        min_active_evs: U16,
        /// EVs in the profile (1..=4096).
        num_evs: U16,
        /// Reserved (0).
        rsvd: U16,
        /// `EVENT_MASK_*` bits: which EV events reach the host.
        event_mask: U32,
        /// GENERATED: seed of the EV generator.
        seed: U32,
    }
);
body!(
    /// DENY_EV / QUERY_EV.
    EvRef {
        /// EV profile.
        profile: U32,
        /// EV index.
        ev_index: U16,
        /// DENY_EV: 1 deny, 0 allow again. QUERY_EV: 0.
        deny: u8,
        /// Reserved (0).
        rsvd: u8,
    }
);
body!(
    /// REPLACE_EV: set EV `ev_index` of an EXPLICIT profile.
    ReplaceEv {
        /// EV profile.
        profile: U32,
        /// EV index.
        ev_index: U16,
        /// Reserved (0).
        rsvd: U16,
        /// UDP / STEV value (0 for SRv6).
        value: U32,
        /// SRv6: the uSID carrier (outer destination); zero for UDP / STEV.
        carrier: [u8; 16],
    }
);
body!(
    /// PROBE_EV: probe one EV of a QP; the result arrives as an `EvProbeResult` event.
    ProbeEv {
        /// QPN.
        qpn: U32,
        /// EV index.
        ev_index: U16,
        /// Reserved (0).
        rsvd: U16,
        /// Probe id echoed in the event.
        probe_id: U32,
        /// Timeout in us (>= 1).
        timeout_us: U32,
    }
);
body!(
    /// CREATE / MODIFY_CC_PROFILE: NSCC parameters in unsigned Q16.16 fixed point.
    CcProfile {
        /// Profile id (MODIFY; 0 in CREATE).
        id: U32,
        /// eta: additive increase, bytes per ACK (Q16.16).
        eta_q16: U32,
        /// fi: fair increase, bytes (Q16.16).
        fi_q16: U32,
        /// fi_scale (Q16.16).
        fi_scale_q16: U32,
        /// gamma: multiplicative decrease factor, in (0, 1] (Q16.16, 1..=0x10000).
        gamma_q16: U32,
        /// max_md_jump: largest single decrease, fraction of cwnd in (0, 1] (Q16.16).
        max_md_jump_q16: U32,
        /// Target queueing delay, ns (> 0).
        target_qdelay_ns: U32,
        /// Base RTT, ns (> 0).
        base_rtt_ns: U32,
    }
);
body!(
    /// FW_BEGIN: start an update with the image header.
    FwBegin {
        /// Image magic ([`super::FW_IMAGE_MAGIC`]).
        magic: U32,
        /// Image version (major 31:24, minor 23:16, patch 15:0).
        version: U32,
        /// Image size in bytes (> 0).
        size: U32,
        /// CRC-32 of the image.
        crc32: U32,
        /// SHA-256 of the image.
        sha256: [u8; 32],
    }
);
body!(
    /// FW_CHUNK: the device DMAs `len` bytes from `iova` into the staged image at `offset`.
    FwChunk {
        /// Offset in the image.
        offset: U32,
        /// Bytes (1..=65536).
        len: U32,
        /// Host buffer IOVA.
        iova: U64,
    }
);
