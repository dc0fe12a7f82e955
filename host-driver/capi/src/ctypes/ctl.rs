//! `mrc_ctl.h` and `mrc_ctl_api_ver.h`: the controller API's types and constants, declared
//! here from the header's text (`tests/layout.rs` checks them against the header itself).

use std::ffi::{c_char, c_int, c_uint, c_void};

use super::mrc::mrc_api_ver;
use super::verbs::ibv_gid;

/// `MRC_CTL_API_CURRENT_VERSION` (1.0.1).
pub const MRC_CTL_API_CURRENT_VERSION: u32 = mrc_api_ver(1, 0, 1);
/// `MRC_CTL_API_LAST_SUPPORTED_VERSION` (0.0.0).
pub const MRC_CTL_API_LAST_SUPPORTED_VERSION: u32 = mrc_api_ver(0, 0, 0);
/// `MRC_CTL_VENDOR_API_CURRENT_VERSION` (1.0.0).
pub const MRC_CTL_VENDOR_API_CURRENT_VERSION: u32 = mrc_api_ver(1, 0, 0);
/// `MRC_CTL_VENDOR_API_LAST_SUPPORTED_VERSION` (0.0.0).
pub const MRC_CTL_VENDOR_API_LAST_SUPPORTED_VERSION: u32 = mrc_api_ver(0, 0, 0);

/// `MRC_CTL_MAX_VENDOR_CFG_SIZE`.
pub const MRC_CTL_MAX_VENDOR_CFG_SIZE: usize = 128;
/// `MRC_CTL_EV_MAX_BYTES`.
pub const MRC_CTL_EV_MAX_BYTES: usize = 32;

/// `enum mrc_ctl_protocol_version`.
pub const MRC_CTL_PROTOCOL_VERSION_1: u32 = 1;

/// `enum mrc_ctl_profile_state`.
pub mod profile_state {
    pub const MRC_CTL_PROFILE_INIT: u32 = 0;
    pub const MRC_CTL_PROFILE_OFFLINE: u32 = 1;
    pub const MRC_CTL_PROFILE_ONLINE: u32 = 2;
}

/// `enum mrc_ctl_attr_opt`.
pub mod attr_opt {
    pub const MRC_CTL_OPT_CAP_EV_PROFILE_MODIFY_ONLINE: u32 = 1 << 0;
    pub const MRC_CTL_OPT_CAP_CC_PROFILE_MODIFY_ONLINE: u32 = 1 << 1;
    pub const MRC_CTL_OPT_CAP_EV_EVENT: u32 = 1 << 2;
    pub const MRC_CTL_OPT_CAP_EV_EXPLICIT_RANGE: u32 = 1 << 3;
    pub const MRC_CTL_OPT_CAP_EV_EVENT_PRECISE_DROP_CNT: u32 = 1 << 4;
    pub const MRC_CTL_OPT_CAP_EP_OP_EV_PROBE: u32 = 1 << 5;
}

/// `mrc_ctl_device_attr.ev`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct mrc_ctl_device_attr_ev {
    pub ev_max_fmt_profiles: u32,
    pub ev_max_profiles: u32,
    pub ev_max_count: u32,
    pub ev_free_count: u32,
    pub ev_max_count_profile: u32,
    pub ev_count_align: u32,
    pub ev_max_width: u32,
    pub ev_fmt_mode_mask: u32,
    pub ev_mode_mask: u32,
    pub ev_op_max_entries: u32,
}

/// `mrc_ctl_device_attr.cc`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct mrc_ctl_device_attr_cc {
    pub cc_max_profiles: u32,
    pub algorithms: *const *const c_char,
}

/// `struct mrc_ctl_device_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct mrc_ctl_device_attr {
    pub mrc_ctl_protocol_version: u32,
    pub ev: mrc_ctl_device_attr_ev,
    pub cc: mrc_ctl_device_attr_cc,
    pub phy_port_mask: u32,
    pub opt_attr: u32,
}

/// `enum mrc_ctl_port_admin_state`.
pub mod port_admin {
    pub const MRC_CTL_PORT_ADMIN_DISABLED: u32 = 0;
    pub const MRC_CTL_PORT_ADMIN_ENABLED: u32 = 1;
}

/// `enum mrc_ctl_port_attr_mask`.
pub const MRC_CTL_PORT_ADMIN_STATE: u32 = 1 << 0;

/// `struct mrc_ctl_port_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct mrc_ctl_port_attr {
    pub port_admin_state: u32,
}

/// `enum mrc_ctl_ev_fmt_mode`.
pub mod fmt_mode {
    pub const MRC_CTL_EV_FMT_MODE_STEV: u32 = 1 << 0;
    pub const MRC_CTL_EV_FMT_MODE_SRV6: u32 = 1 << 1;
    pub const MRC_CTL_EV_FMT_MODE_UDP: u32 = 1 << 2;
}

/// `enum mrc_ctl_ev_fmt_op`.
pub mod fmt_op {
    pub const MRC_CTL_EV_FMT_OP_MODIFY_FIELDS: u32 = 0;
    pub const MRC_CTL_EV_FMT_OP_QUERY_FIELDS: u32 = 1;
}

/// `enum mrc_ctl_ev_fmt_profile_attr_mask`.
pub mod fmt_mask {
    pub const MRC_CTL_EV_FMT_PROFILE_STATE: u32 = 1 << 0;
    pub const MRC_CTL_EV_FMT_PROFILE_CUR_STATE: u32 = 1 << 1;
    pub const MRC_CTL_EV_FMT_PROFILE_MODE: u32 = 1 << 2;
    pub const MRC_CTL_EV_FMT_PROFILE_OP: u32 = 1 << 3;
    pub const MRC_CTL_EV_FMT_VENDOR_CFG: u32 = 1 << 31;
    /// Every defined bit.
    pub const ALL: u32 = ((1 << 4) - 1) | MRC_CTL_EV_FMT_VENDOR_CFG;
}

/// `struct mrc_ctl_ev_fmt_field`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct mrc_ctl_ev_fmt_field {
    pub width: u8,
}

/// `mrc_ctl_ev_fmt_profile_attr.ev_fmt_op`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct mrc_ctl_ev_fmt_op {
    pub op: u32,
    pub fmt_fields: *mut mrc_ctl_ev_fmt_field,
    pub fmt_field_count: c_int,
}

/// `struct mrc_ctl_ev_fmt_profile_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct mrc_ctl_ev_fmt_profile_attr {
    pub profile_state: u32,
    pub cur_profile_state: u32,
    pub ev_fmt_mode: u32,
    pub ev_fmt_op: mrc_ctl_ev_fmt_op,
    pub vendor_cfg: [u8; MRC_CTL_MAX_VENDOR_CFG_SIZE],
}

/// `struct mrc_ctl_ev`: an EV value and the port (1-based) it leaves by.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct mrc_ctl_ev {
    pub val: [u8; MRC_CTL_EV_MAX_BYTES],
    pub port: u8,
}

/// `enum mrc_ctl_ev_state`.
pub mod ev_state {
    pub const MRC_CTL_EV_GOOD: u32 = 1 << 0;
    pub const MRC_CTL_EV_ASSUMED_BAD: u32 = 1 << 1;
    pub const MRC_CTL_EV_DENIED: u32 = 1 << 2;
    pub const MRC_CTL_EV_UNKNOWN: u32 = 1 << 31;
}

/// `enum mrc_ctl_ev_mode`.
pub mod ev_mode {
    pub const MRC_CTL_EV_MODE_AUTO: u32 = 1 << 0;
    pub const MRC_CTL_EV_MODE_EXP: u32 = 1 << 1;
    pub const MRC_CTL_EV_MODE_GEN: u32 = 1 << 2;
}

/// `enum mrc_ctl_ev_op`.
pub mod ev_op {
    pub const MRC_CTL_EV_OP_REPLACE_EV: u32 = 0;
    pub const MRC_CTL_EV_OP_MODIFY_EV_STATE: u32 = 1;
    pub const MRC_CTL_EV_OP_QUERY_EV_STATE: u32 = 2;
    pub const MRC_CTL_EV_OP_QUERY_EV_ARRAY: u32 = 3;
}

/// `enum mrc_ctl_ev_fields_op`.
pub mod ev_fields_op {
    pub const MRC_CTL_EV_FIELDS_OP_MODIFY_FIELDS: u32 = 0;
    pub const MRC_CTL_EV_FIELDS_OP_QUERY_FIELDS: u32 = 1;
}

/// `enum mrc_ctl_ev_profile_attr_mask`.
pub mod ev_mask {
    pub const MRC_CTL_EV_PROFILE_STATE: u32 = 1 << 0;
    pub const MRC_CTL_EV_PROFILE_CUR_STATE: u32 = 1 << 1;
    pub const MRC_CTL_EV_PROFILE_MODE: u32 = 1 << 2;
    pub const MRC_CTL_EV_PROFILE_FMT_ID: u32 = 1 << 3;
    pub const MRC_CTL_EV_PROFILE_COUNT: u32 = 1 << 4;
    pub const MRC_CTL_EV_PROFILE_MIN_ACTIVE: u32 = 1 << 5;
    pub const MRC_CTL_EV_PROFILE_EVENT_MASK: u32 = 1 << 6;
    pub const MRC_CTL_EV_PROFILE_EV_OP: u32 = 1 << 7;
    pub const MRC_CTL_EV_PROFILE_EV_FIELDS_OP: u32 = 1 << 8;
    pub const MRC_CTL_EV_PROFILE_VENDOR_CFG: u32 = 1 << 31;
    /// Every defined bit.
    pub const ALL: u32 = ((1 << 9) - 1) | MRC_CTL_EV_PROFILE_VENDOR_CFG;
}

/// `struct mrc_ctl_ev_field`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct mrc_ctl_ev_field {
    pub width: u32,
    pub init_val: u32,
    pub min_val: u32,
    pub max_val: u32,
    pub mask: u32,
}

/// `enum mrc_ctl_ev_op_flags`.
pub const MRC_CTL_EV_OP_F_ALL_COPIES: u32 = 1 << 0;

/// `struct mrc_ctl_ev_op_entry`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct mrc_ctl_ev_op_entry {
    pub ev: mrc_ctl_ev,
    pub ev_new: mrc_ctl_ev,
    pub state: u32,
    pub flags: u32,
}

/// `mrc_ctl_ev_profile_attr.ev_op`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct mrc_ctl_ev_profile_ev_op {
    pub op: u32,
    pub entries: *mut mrc_ctl_ev_op_entry,
    pub entry_count: c_int,
}

/// `mrc_ctl_ev_profile_attr.ev_fields_op`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct mrc_ctl_ev_profile_fields_op {
    pub op: u32,
    pub fields: *mut mrc_ctl_ev_field,
    pub field_count: c_int,
}

/// `struct mrc_ctl_ev_profile_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct mrc_ctl_ev_profile_attr {
    pub profile_state: u32,
    pub cur_profile_state: u32,
    pub ev_mode: u32,
    pub ev_fmt_profile_id: u64,
    pub ev_count: u32,
    pub ev_min_active: u32,
    pub ev_event_mask: c_int,
    pub ev_op: mrc_ctl_ev_profile_ev_op,
    pub ev_fields_op: mrc_ctl_ev_profile_fields_op,
    pub vendor_cfg: [u8; MRC_CTL_MAX_VENDOR_CFG_SIZE],
}

/// `enum mrc_ctl_cc_profile_attr_mask`.
pub mod cc_mask {
    pub const MRC_CTL_CC_PROFILE_STATE: u32 = 1 << 0;
    pub const MRC_CTL_CC_PROFILE_CUR_STATE: u32 = 1 << 1;
    pub const MRC_CTL_CC_PROFILE_ALGORITHM: u32 = 1 << 2;
    pub const MRC_CTL_CC_PROFILE_CONFIG: u32 = 1 << 3;
    pub const MRC_CTL_CC_PROFILE_VENDOR_CFG: u32 = 1 << 31;
    /// Every defined bit.
    pub const ALL: u32 = ((1 << 4) - 1) | MRC_CTL_CC_PROFILE_VENDOR_CFG;
}

/// `struct mrc_ctl_cc_profile_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct mrc_ctl_cc_profile_attr {
    pub profile_state: u32,
    pub cur_profile_state: u32,
    pub algorithm: *const c_char,
    pub cc_config: *const c_void,
    pub vendor_cfg: [u8; MRC_CTL_MAX_VENDOR_CFG_SIZE],
}

/// `struct mrc_ctl_cc_nscc_cfg`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct mrc_ctl_cc_nscc_cfg {
    pub disable_qa: u8,
    pub adjust_bytes_threshold: u32,
    pub adjust_period_threshold: u32,
    pub base_rtt: u32,
    pub eta: f32,
    pub fi: f32,
    pub fi_scale: f32,
    pub gamma: f32,
    pub max_md_jump: f32,
    pub max_cwnd: u32,
    pub qa_gate: u8,
    pub qa_threshold: u32,
    pub target_delay: u32,
}

/// `struct mrc_ctl_ev_event` as an API 1.0.1 program sees it (with `state`). A program built
/// for 1.0.0 sees the first [`MRC_CTL_EV_EVENT_V1_0_0_BYTES`] bytes, laid out alike.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct mrc_ctl_ev_event {
    pub profile_id: u64,
    pub ev: mrc_ctl_ev,
    pub drop_count: u32,
    pub state: u32,
}

/// `sizeof(struct mrc_ctl_ev_event)` under `MRC_CTL_API_VER_USED` 1.0.0 (no `state`).
pub const MRC_CTL_EV_EVENT_V1_0_0_BYTES: usize = 48;

/// `enum mrc_ctl_ep_op_type`.
pub mod ep_op {
    pub const MRC_CTL_EP_OP_EV_PROBE: u32 = 0;
    pub const MRC_CTL_EP_OP_PORT_STATUS_UPDATE: u32 = 1;
}

/// `mrc_ctl_ep_req.op.port_status_update`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct mrc_ctl_ep_port_status_update {
    pub port_status: u32,
}

/// `mrc_ctl_ep_req.op` (a union of one arm).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct mrc_ctl_ep_req_op {
    pub port_status_update: mrc_ctl_ep_port_status_update,
}

/// `struct mrc_ctl_ep_req`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct mrc_ctl_ep_req {
    pub req_id: u16,
    pub sgid: ibv_gid,
    pub dgid: ibv_gid,
    pub ev_fmt_mode: u32,
    pub req_ev: mrc_ctl_ev,
    pub op: mrc_ctl_ep_req_op,
}

/// `struct mrc_ctl_ep_rsp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct mrc_ctl_ep_rsp {
    pub req_id: u16,
    pub port: u8,
    pub rtt: c_uint,
    pub adj_svc_time: u8,
}
