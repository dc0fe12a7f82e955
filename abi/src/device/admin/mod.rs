//! Admin queue: commands (64 B) the host driver writes and responses (32 B) the device returns.
//!
//! Every host API operation that changes device state goes through here: the application API
//! (PDs, MRs, CQs, QPs and their RESET -> INIT -> RTR -> RTS transitions) and the controller API
//! (ports, EV format profiles, EV profiles and their EVs, CC profiles, EV probes), plus firmware
//! update. A command is an [`AdminCmd`] `{opcode, flags, command_id, body}` whose body is the
//! opcode's struct from [`body`]; [`AdminCmd::decode`] checks the opcode, every reserved byte and
//! every attribute value and returns a typed [`AdminCommand`] or an [`AdminError`] that names the
//! byte offset of the bad field and maps to an [`AdminStatus`].
//!
//! The response for the command in slot `i` goes into slot `i` of the response ring:
//! [`AdminResp`] `{status, flags (owner bit), command_id, syndrome, result[3]}`. The result words
//! of each opcode are documented on [`Opcode`].

pub mod body;

use crate::layout::le_struct;
use core::mem::{offset_of, size_of};
use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, IntoBytes};

use super::{all_zero, EvFormat, QPN_LIMIT};
use body::*;

/// Bytes of the body area of a command.
pub const BODY_BYTES: usize = 56;
/// Admin command flag: raise the admin queue interrupt when this command completes.
pub const CMD_IRQ: u8 = 1 << 0;
/// Response flag: owner (phase) bit, as for CQEs.
pub const RESP_OWNER: u8 = 1 << 0;
/// MR access: the device may write the region for local operations.
pub const ACCESS_LOCAL_WRITE: u32 = 1 << 0;
/// MR access: remote peers may RDMA-write the region.
pub const ACCESS_REMOTE_WRITE: u32 = 1 << 1;
/// Every defined access bit.
pub const ACCESS_ALL: u32 = ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE;
/// QP hint: latency-sensitive traffic (small messages, low window).
pub const HINT_LATENCY: u16 = 1 << 0;
/// QP hint: bulk traffic (large messages).
pub const HINT_BULK: u16 = 1 << 1;
/// RTR flag: the responder may grow and shrink its MPR dynamically.
pub const RTR_DYNAMIC_MPR: u8 = 1 << 0;
/// EV format flag: SRv6 routes longer than one carrier use an SRH.
pub const FMT_USE_SRH: u8 = 1 << 0;
/// EV format flag: send the timestamp extension (RTT measurement).
pub const FMT_TSX: u8 = 1 << 1;
/// EV event mask: report EVs becoming ASSUMED_BAD.
pub const EVENT_MASK_EV_BAD: u32 = 1 << 0;
/// EV event mask: report EVs returning to GOOD.
pub const EVENT_MASK_EV_GOOD: u32 = 1 << 1;
/// EV event mask: report denied / allowed EVs.
pub const EVENT_MASK_EV_DENIED: u32 = 1 << 2;
/// EV event mask: report usable EVs falling below `min_active_evs`.
pub const EVENT_MASK_MIN_ACTIVE: u32 = 1 << 3;
/// EV event mask: report probe results.
pub const EVENT_MASK_PROBE: u32 = 1 << 4;
/// Every defined EV event mask bit.
pub const EVENT_MASK_ALL: u32 = (1 << 5) - 1;
/// Firmware image magic: "MRCF".
pub const FW_IMAGE_MAGIC: u32 = u32::from_le_bytes(*b"MRCF");
/// Largest retry count (25 = retry forever).
pub const RETRY_FOREVER: u8 = 25;
/// Largest ACK timeout exponent.
pub const MAX_ACK_TIMEOUT_EXP: u8 = 24;
/// Most EVs in one EV profile.
pub const MAX_EVS_PER_PROFILE: u16 = 4096;

le_struct! {
/// An admin command as laid out in the ring, 64 bytes.
pub struct AdminCmd {
    /// [`Opcode`].
    pub opcode: u8,
    /// `CMD_*` flags.
    pub flags: u8,
    /// Caller's id, echoed in the response.
    pub command_id: U16,
    /// Reserved (0).
    pub rsvd: U32,
    /// The opcode's body struct, zero-padded.
    pub body: [u8; BODY_BYTES],
}
}

le_struct! {
/// An admin response as laid out in the response ring, 32 bytes.
pub struct AdminResp {
    /// [`AdminStatus`].
    pub status: u8,
    /// `RESP_OWNER`.
    pub flags: u8,
    /// The command's `command_id`.
    pub command_id: U16,
    /// Error detail: for `BAD_ATTRIBUTE` / `RESERVED_SET`, the byte offset of the field.
    pub syndrome: U32,
    /// Result words (per opcode, see [`Opcode`]).
    pub result: [U64; 3],
}
}

const _: () = {
    assert!(size_of::<AdminCmd>() == 64);
    assert!(offset_of!(AdminCmd, command_id) == 2);
    assert!(offset_of!(AdminCmd, body) == 8);
    assert!(size_of::<AdminResp>() == 32);
    assert!(offset_of!(AdminResp, syndrome) == 4);
    assert!(offset_of!(AdminResp, result) == 8);
};

macro_rules! codes {
    ($(#[$m:meta])* $name:ident : $repr:ty { $($(#[$vm:meta])* $v:ident = $c:expr),* $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[cfg_attr(feature = "defmt", derive(defmt::Format))]
        #[repr($repr)]
        pub enum $name { $($(#[$vm])* $v = $c,)* }
        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$v),*];
            /// The value with code `v`, if any.
            pub fn from_code(v: $repr) -> Option<Self> {
                Self::ALL.iter().copied().find(|x| *x as $repr == v)
            }
        }
    };
}

codes!(
    /// Admin opcodes. "Result" lists the response's result words (unlisted: none).
    Opcode: u8 {
        /// Body none. Result: (fw image version, max MRs << 32 | max PDs, max CQ entries << 32 | max QP entries).
        QueryDevice = 0x01,
        /// Body none. Result: (PD number).
        AllocPd = 0x02,
        /// Body [`ObjectId`] (PD).
        DeallocPd = 0x03,
        /// Body [`RegMr`]. Result: (lkey, rkey).
        RegMr = 0x04,
        /// Body [`ObjectId`] (lkey).
        DeregMr = 0x05,
        /// Body [`CreateCq`]. Result: (CQN).
        CreateCq = 0x06,
        /// Body [`ObjectId`] (CQN).
        DestroyCq = 0x07,
        /// Body [`CreateQp`]. Result: (QPN (its doorbell page index)).
        CreateQp = 0x08,
        /// Body [`QpInit`], [`QpRtr`], [`QpRts`] or [`QpReset`] by `to_state`.
        ModifyQp = 0x09,
        /// Body [`ObjectId`] (QPN). Result: (state, sq psn << 32 | rq psn, usable EVs).
        QueryQp = 0x0A,
        /// Body [`ObjectId`] (QPN).
        DestroyQp = 0x0B,
        /// Body none. Result: (PSN window per direction, send work requests << 32 | receive
        /// work requests, EV format profiles << 48 | EV profiles << 32 | EVs per profile << 16 |
        /// CC profiles): what one QP's engine holds (the largest MPR is the window / 128, the
        /// largest max WIMM as requester / responder the send / receive work requests) and the
        /// capacities of the profile tables. A field of 0 means no limit beyond the attribute's
        /// own range. Since ABI 1.3.
        QueryLimits = 0x0C,
        /// Body [`PortAdmin`].
        SetPortAdminState = 0x10,
        /// Body [`ObjectId`] (port). Result: (admin << 32 | oper, speed Mb/s, plane).
        QueryPort = 0x11,
        /// Body [`EvFormatProfile`]. Result: (profile id).
        CreateEvFormatProfile = 0x20,
        /// Body [`EvFormatProfile`].
        ModifyEvFormatProfile = 0x21,
        /// Body [`ObjectId`].
        DestroyEvFormatProfile = 0x22,
        /// Body [`EvProfile`]. Result: (profile id).
        CreateEvProfile = 0x23,
        /// Body [`EvProfile`] (state changes INIT -> ONLINE <-> OFFLINE, min active, mask).
        ModifyEvProfile = 0x24,
        /// Body [`ObjectId`].
        DestroyEvProfile = 0x25,
        /// Body [`EvRef`].
        DenyEv = 0x26,
        /// Body [`ReplaceEv`].
        ReplaceEv = 0x27,
        /// Body [`EvRef`]. Result: (state, value, last RTT ns).
        QueryEv = 0x28,
        /// Body [`ProbeEv`] (result comes as an event).
        ProbeEv = 0x29,
        /// Body [`CcProfile`]. Result: (profile id).
        CreateCcProfile = 0x30,
        /// Body [`CcProfile`].
        ModifyCcProfile = 0x31,
        /// Body [`ObjectId`].
        DestroyCcProfile = 0x32,
        /// Body none. Result: (running slot << 32 | update state, running version, staged version).
        FwStatus = 0x40,
        /// Body [`FwBegin`].
        FwBegin = 0x41,
        /// Body [`FwChunk`].
        FwChunk = 0x42,
        /// Body [`ObjectId`] (CRC-32 of the whole image): verify and mark for next boot.
        FwCommit = 0x43,
        /// Body none: the running (new) image is good; stop the rollback timer.
        FwConfirm = 0x44,
        /// Body none: boot the previous image at the next reset.
        FwRollback = 0x45,
    }
);

codes!(
    /// Admin response status.
    AdminStatus: u8 {
        /// Done.
        Ok = 0,
        /// Unknown opcode.
        UnknownOpcode = 1,
        /// A reserved field or flag is set (syndrome: byte offset).
        ReservedSet = 2,
        /// An attribute value is invalid (syndrome: byte offset).
        BadAttribute = 3,
        /// Out of resources (table full).
        NoResources = 4,
        /// The named object does not exist.
        NotFound = 5,
        /// The object is in the wrong state (e.g. an invalid QP transition).
        BadState = 6,
        /// The object is still in use (e.g. a CQ with QPs).
        InUse = 7,
        /// The device is busy (e.g. an update in progress); retry later.
        Busy = 8,
        /// Not permitted (controller commands from an unprivileged function).
        Permission = 9,
        /// The firmware image failed verification.
        FwImageInvalid = 10,
        /// No update in progress.
        FwNoUpdate = 11,
        /// Internal device error.
        Internal = 12,
    }
);

codes!(
    /// QP states.
    QpState: u8 {
        /// Reset.
        Reset = 0,
        /// Initialised: profiles attached.
        Init = 1,
        /// Ready to receive.
        Rtr = 2,
        /// Ready to send.
        Rts = 3,
        /// Error: outstanding requests are flushed.
        Error = 4,
    }
);

codes!(
    /// How an EV profile gets its EVs.
    EvProfileKind: u8 {
        /// The device picks EVs (e.g. random source ports).
        Auto = 0,
        /// The controller supplies every EV with REPLACE_EV.
        Explicit = 1,
        /// EVs derived from a seed (reproducible across NICs).
        Generated = 2,
    }
);

codes!(
    /// EV profile state.
    EvProfileState: u8 {
        /// Being configured; QPs cannot use it yet.
        Init = 0,
        /// Temporarily unusable (QPs keep it, send nothing new on it).
        Offline = 1,
        /// In use.
        Online = 2,
    }
);

codes!(
    /// Firmware update state (FW block `update_state`, FW_STATUS result).
    FwUpdateState: u8 {
        /// No update.
        Idle = 0,
        /// FW_BEGIN accepted, receiving chunks.
        Receiving = 1,
        /// FW_COMMIT verified the image; it boots at the next reset.
        Committed = 2,
        /// The new image runs and waits for FW_CONFIRM (else it rolls back).
        PendingConfirm = 3,
    }
);

/// A MODIFY_QP body, by target state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum QpModify {
    Init(QpInit),
    Rtr(QpRtr),
    Rts(QpRts),
    /// To RESET or ERROR.
    Reset(QpReset),
}

/// A validated admin command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum AdminCommand {
    QueryDevice,
    AllocPd,
    DeallocPd(ObjectId),
    RegMr(RegMr),
    DeregMr(ObjectId),
    CreateCq(CreateCq),
    DestroyCq(ObjectId),
    CreateQp(CreateQp),
    ModifyQp(QpModify),
    QueryQp(ObjectId),
    DestroyQp(ObjectId),
    QueryLimits,
    SetPortAdminState(PortAdmin),
    QueryPort(ObjectId),
    CreateEvFormatProfile(EvFormatProfile),
    ModifyEvFormatProfile(EvFormatProfile),
    DestroyEvFormatProfile(ObjectId),
    CreateEvProfile(EvProfile),
    ModifyEvProfile(EvProfile),
    DestroyEvProfile(ObjectId),
    DenyEv(EvRef),
    ReplaceEv(ReplaceEv),
    QueryEv(EvRef),
    ProbeEv(ProbeEv),
    CreateCcProfile(CcProfile),
    ModifyCcProfile(CcProfile),
    DestroyCcProfile(ObjectId),
    FwStatus,
    FwBegin(FwBegin),
    FwChunk(FwChunk),
    FwCommit(ObjectId),
    FwConfirm,
    FwRollback,
}

/// Why a command is malformed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum AdminError {
    /// Unknown opcode.
    UnknownOpcode(u8),
    /// A reserved field, flag or body byte is set (byte offset in the command).
    ReservedSet(u8),
    /// An attribute value is invalid (byte offset in the command).
    BadAttribute(u8),
    /// Fewer than 64 bytes.
    Truncated,
}

impl AdminError {
    /// The response status reporting this error, and its syndrome.
    pub const fn status(self) -> (AdminStatus, u32) {
        match self {
            AdminError::UnknownOpcode(op) => (AdminStatus::UnknownOpcode, op as u32),
            AdminError::ReservedSet(off) => (AdminStatus::ReservedSet, off as u32),
            AdminError::BadAttribute(off) => (AdminStatus::BadAttribute, off as u32),
            AdminError::Truncated => (AdminStatus::BadAttribute, 0),
        }
    }
}

#[path = "validate.rs"]
mod validate;

impl AdminCommand {
    /// The opcode of this command.
    pub const fn opcode(&self) -> Opcode {
        use AdminCommand as C;
        match self {
            C::QueryDevice => Opcode::QueryDevice,
            C::AllocPd => Opcode::AllocPd,
            C::DeallocPd(_) => Opcode::DeallocPd,
            C::RegMr(_) => Opcode::RegMr,
            C::DeregMr(_) => Opcode::DeregMr,
            C::CreateCq(_) => Opcode::CreateCq,
            C::DestroyCq(_) => Opcode::DestroyCq,
            C::CreateQp(_) => Opcode::CreateQp,
            C::ModifyQp(_) => Opcode::ModifyQp,
            C::QueryQp(_) => Opcode::QueryQp,
            C::DestroyQp(_) => Opcode::DestroyQp,
            C::QueryLimits => Opcode::QueryLimits,
            C::SetPortAdminState(_) => Opcode::SetPortAdminState,
            C::QueryPort(_) => Opcode::QueryPort,
            C::CreateEvFormatProfile(_) => Opcode::CreateEvFormatProfile,
            C::ModifyEvFormatProfile(_) => Opcode::ModifyEvFormatProfile,
            C::DestroyEvFormatProfile(_) => Opcode::DestroyEvFormatProfile,
            C::CreateEvProfile(_) => Opcode::CreateEvProfile,
            C::ModifyEvProfile(_) => Opcode::ModifyEvProfile,
            C::DestroyEvProfile(_) => Opcode::DestroyEvProfile,
            C::DenyEv(_) => Opcode::DenyEv,
            C::ReplaceEv(_) => Opcode::ReplaceEv,
            C::QueryEv(_) => Opcode::QueryEv,
            C::ProbeEv(_) => Opcode::ProbeEv,
            C::CreateCcProfile(_) => Opcode::CreateCcProfile,
            C::ModifyCcProfile(_) => Opcode::ModifyCcProfile,
            C::DestroyCcProfile(_) => Opcode::DestroyCcProfile,
            C::FwStatus => Opcode::FwStatus,
            C::FwBegin(_) => Opcode::FwBegin,
            C::FwChunk(_) => Opcode::FwChunk,
            C::FwCommit(_) => Opcode::FwCommit,
            C::FwConfirm => Opcode::FwConfirm,
            C::FwRollback => Opcode::FwRollback,
        }
    }

    /// The body bytes of this command.
    fn body_bytes(&self) -> &[u8] {
        use AdminCommand as C;
        match self {
            C::QueryDevice
            | C::QueryLimits
            | C::AllocPd
            | C::FwStatus
            | C::FwConfirm
            | C::FwRollback => &[],
            C::DeallocPd(b)
            | C::DeregMr(b)
            | C::DestroyCq(b)
            | C::QueryQp(b)
            | C::DestroyQp(b)
            | C::QueryPort(b)
            | C::DestroyEvFormatProfile(b)
            | C::DestroyEvProfile(b)
            | C::DestroyCcProfile(b)
            | C::FwCommit(b) => b.as_bytes(),
            C::RegMr(b) => b.as_bytes(),
            C::CreateCq(b) => b.as_bytes(),
            C::CreateQp(b) => b.as_bytes(),
            C::ModifyQp(QpModify::Init(b)) => b.as_bytes(),
            C::ModifyQp(QpModify::Rtr(b)) => b.as_bytes(),
            C::ModifyQp(QpModify::Rts(b)) => b.as_bytes(),
            C::ModifyQp(QpModify::Reset(b)) => b.as_bytes(),
            C::SetPortAdminState(b) => b.as_bytes(),
            C::CreateEvFormatProfile(b) | C::ModifyEvFormatProfile(b) => b.as_bytes(),
            C::CreateEvProfile(b) | C::ModifyEvProfile(b) => b.as_bytes(),
            C::DenyEv(b) | C::QueryEv(b) => b.as_bytes(),
            C::ReplaceEv(b) => b.as_bytes(),
            C::ProbeEv(b) => b.as_bytes(),
            C::CreateCcProfile(b) | C::ModifyCcProfile(b) => b.as_bytes(),
            C::FwBegin(b) => b.as_bytes(),
            C::FwChunk(b) => b.as_bytes(),
        }
    }

    /// The ring entry (written as is; the device's [`AdminCmd::decode`] validates it).
    pub fn encode(&self, command_id: u16, flags: u8) -> AdminCmd {
        let mut body = [0u8; BODY_BYTES];
        let b = self.body_bytes();
        body[..b.len()].copy_from_slice(b);
        AdminCmd {
            opcode: self.opcode() as u8,
            flags,
            command_id: command_id.into(),
            rsvd: 0.into(),
            body,
        }
    }
}

impl AdminCmd {
    /// The command at the start of `bytes`.
    ///
    /// # Errors
    /// [`AdminError::Truncated`].
    pub fn ref_from(bytes: &[u8]) -> Result<&Self, AdminError> {
        Self::ref_from_prefix(bytes)
            .map(|(c, _)| c)
            .map_err(|_| AdminError::Truncated)
    }

    /// Checks opcode, flags, reserved bytes and every attribute and returns the command.
    ///
    /// # Errors
    /// See [`AdminError`].
    pub fn decode(&self) -> Result<AdminCommand, AdminError> {
        let op = Opcode::from_code(self.opcode).ok_or(AdminError::UnknownOpcode(self.opcode))?;
        if self.flags & !CMD_IRQ != 0 {
            return Err(AdminError::ReservedSet(1));
        }
        if self.rsvd.get() != 0 {
            return Err(AdminError::ReservedSet(4));
        }
        validate::decode_body(op, &self.body)
    }
}

/// A decoded response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct AdminReply {
    /// The command's id.
    pub command_id: u16,
    /// Status.
    pub status: AdminStatus,
    /// Error detail.
    pub syndrome: u32,
    /// Result words.
    pub result: [u64; 3],
}

/// Why a response is malformed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum AdminRespError {
    /// Unknown status code.
    UnknownStatus(u8),
    /// Undefined flag bits set.
    ReservedSet,
}

impl AdminReply {
    /// A success reply.
    pub const fn ok(command_id: u16, result: [u64; 3]) -> Self {
        AdminReply {
            command_id,
            status: AdminStatus::Ok,
            syndrome: 0,
            result,
        }
    }

    /// The failure reply for a malformed command.
    pub const fn rejected(command_id: u16, err: AdminError) -> Self {
        let (status, syndrome) = err.status();
        AdminReply {
            command_id,
            status,
            syndrome,
            result: [0; 3],
        }
    }

    /// The ring entry with owner bit `owner`.
    pub fn encode(&self, owner: bool) -> AdminResp {
        AdminResp {
            status: self.status as u8,
            flags: if owner { RESP_OWNER } else { 0 },
            command_id: self.command_id.into(),
            syndrome: self.syndrome.into(),
            result: self.result.map(U64::new),
        }
    }
}

impl AdminResp {
    /// The owner (phase) bit.
    pub const fn owner(&self) -> bool {
        self.flags & RESP_OWNER != 0
    }

    /// Checks and returns the reply.
    ///
    /// # Errors
    /// See [`AdminRespError`].
    pub fn decode(&self) -> Result<AdminReply, AdminRespError> {
        let status = AdminStatus::from_code(self.status)
            .ok_or(AdminRespError::UnknownStatus(self.status))?;
        if self.flags & !RESP_OWNER != 0 {
            return Err(AdminRespError::ReservedSet);
        }
        Ok(AdminReply {
            command_id: self.command_id.get(),
            status,
            syndrome: self.syndrome.get(),
            result: self.result.map(|w| w.get()),
        })
    }
}

/// The EV profile states a MODIFY_EV_PROFILE may move between (INIT -> ONLINE <-> OFFLINE; a
/// state to itself except back to INIT from a later state).
pub const fn ev_profile_transition_ok(from: EvProfileState, to: EvProfileState) -> bool {
    use EvProfileState as S;
    matches!(
        (from, to),
        (S::Init, S::Init)
            | (S::Init, S::Online)
            | (S::Online, S::Offline)
            | (S::Offline, S::Online)
            | (S::Online, S::Online)
            | (S::Offline, S::Offline)
    )
}

/// The retry backoff rule of a retry count: attempt `n` (1-based) waits `timeout * factor(n)`.
///
/// Counts up to 7 back off linearly (factor 1 for every attempt); larger counts double the wait
/// after the 7th attempt (factor `2^(n-7)`, capped at 2^16); 25 retries forever. Returns `None`
/// when attempt `n` is not allowed (the request fails with `RETRY_EXCEEDED`).
pub const fn retry_backoff_factor(retry_count: u8, attempt: u32) -> Option<u32> {
    if retry_count != RETRY_FOREVER && attempt > retry_count as u32 {
        return None;
    }
    if retry_count <= 7 || attempt <= 7 {
        return Some(1);
    }
    let e = attempt - 7;
    Some(1 << if e > 16 { 16 } else { e })
}

/// The ACK timeout of exponent `t` in ns: 1.024 us * 2^t, or `None` when `t > 24`.
pub const fn ack_timeout_ns(t: u8) -> Option<u64> {
    if t > MAX_ACK_TIMEOUT_EXP {
        None
    } else {
        Some(1024u64 << t)
    }
}

impl QpRtr {
    /// Responder window in PSNs.
    pub fn responder_window_psns(&self) -> u32 {
        u32::from(self.responder_mpr.get()) * 128
    }
}

impl QpRts {
    /// Requester window in PSNs.
    pub fn requester_window_psns(&self) -> u32 {
        u32::from(self.requester_mpr.get()) * 128
    }
}

impl EvFormatProfile {
    /// The EV encoding, if the code is valid.
    pub fn encoding(&self) -> Option<EvFormat> {
        EvFormat::from_code(self.encoding).ok()
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
