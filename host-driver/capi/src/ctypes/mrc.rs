//! `mrc.h` and `mrc_api_ver.h`: the application API's types and constants, declared here from
//! the header's text (`tests/layout.rs` checks them against the header itself).

use std::ffi::c_int;
use std::ffi::c_void;

use super::verbs::{ibv_pd, ibv_qp_cap};

/// `MRC_API_VER(major, minor, subminor)`.
pub const fn mrc_api_ver(major: u32, minor: u32, sub_minor: u32) -> u32 {
    (major << 24) | (minor << 16) | sub_minor
}
/// `MRC_API_CURRENT_VERSION` (1.0.1).
pub const MRC_API_CURRENT_VERSION: u32 = mrc_api_ver(1, 0, 1);
/// `MRC_API_LAST_SUPPORTED_VERSION` (0.0.0).
pub const MRC_API_LAST_SUPPORTED_VERSION: u32 = mrc_api_ver(0, 0, 0);
/// `MRC_VENDOR_API_CURRENT_VERSION` (1.0.0).
pub const MRC_VENDOR_API_CURRENT_VERSION: u32 = mrc_api_ver(1, 0, 0);
/// `MRC_VENDOR_API_LAST_SUPPORTED_VERSION` (0.0.0).
pub const MRC_VENDOR_API_LAST_SUPPORTED_VERSION: u32 = mrc_api_ver(0, 0, 0);
/// `MRC_API_VER_LATEST`.
pub const MRC_API_VER_LATEST: u32 = mrc_api_ver(0xff, 0xff, 0xffff);

/// `MRC_MAX_VENDOR_CFG_SIZE`.
pub const MRC_MAX_VENDOR_CFG_SIZE: usize = 128;

/// `enum mrc_protocol_version`.
pub const MRC_PROTOCOL_VERSION_0: u32 = 0;
/// `enum mrc_protocol_version`: the one wire version this device speaks.
pub const MRC_PROTOCOL_VERSION_1: u32 = 1;

/// `enum mrc_device_cap`.
pub mod device_cap {
    pub const MRC_DEVICE_CAP_TRIM_NACK: u32 = 1 << 0;
    pub const MRC_DEVICE_CAP_DYNAMIC_MPR: u32 = 1 << 1;
    pub const MRC_DEVICE_CAP_SVC_TIME: u32 = 1 << 2;
}

/// Opaque `struct mrc_context` (a handle, never dereferenced by either side).
#[repr(C)]
pub struct mrc_context {
    _opaque: [u8; 0],
}
/// Opaque `struct mrc_qp_hint`.
#[repr(C)]
pub struct mrc_qp_hint {
    _opaque: [u8; 0],
}
/// Opaque `struct mrc_qp`.
#[repr(C)]
pub struct mrc_qp {
    _opaque: [u8; 0],
}
/// Opaque `struct mrc_cq`.
#[repr(C)]
pub struct mrc_cq {
    _opaque: [u8; 0],
}
/// Opaque `struct mrc_comp_channel`.
#[repr(C)]
pub struct mrc_comp_channel {
    _opaque: [u8; 0],
}

/// `mrc_device_attr.wimm_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct mrc_wimm_attr {
    pub max_wimm: u16,
    pub max_wimm_dest: u16,
}

/// `mrc_device_attr.mpr_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct mrc_mpr_attr {
    pub max_mpr: u8,
    pub mpr_resolution: u8,
}

/// `mrc_device_attr.qp_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct mrc_dev_qp_attr {
    pub max_qp_hint: u32,
}

/// `struct mrc_device_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct mrc_device_attr {
    pub mrc_protocol_version: u32,
    pub wimm_attr: mrc_wimm_attr,
    pub mpr_attr: mrc_mpr_attr,
    pub qp_attr: mrc_dev_qp_attr,
    pub cap: u32,
}

/// `struct mrc_context_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct mrc_context_attr {
    pub mrc_api_version_used: u32,
    pub mrc_vendor_api_version_used: u32,
}

/// `struct mrc_qp_hint_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct mrc_qp_hint_attr {
    pub num_qps_per_peer: c_int,
    pub num_send_peers: c_int,
    pub num_remote_recv_peers: c_int,
    pub vendor_cfg: [u8; MRC_MAX_VENDOR_CFG_SIZE],
}

impl Default for mrc_qp_hint_attr {
    fn default() -> Self {
        mrc_qp_hint_attr {
            num_qps_per_peer: 0,
            num_send_peers: 0,
            num_remote_recv_peers: 0,
            vendor_cfg: [0; MRC_MAX_VENDOR_CFG_SIZE],
        }
    }
}

/// `enum mrc_qp_hint_attr_mask`.
pub mod hint_mask {
    pub const MRC_QP_HINT_NUM_QPS_PER_PEER: u32 = 1 << 0;
    pub const MRC_QP_HINT_NUM_SEND_PEERS: u32 = 1 << 1;
    pub const MRC_QP_HINT_NUM_REMOTE_RECV_PEERS: u32 = 1 << 2;
    pub const MRC_QP_HINT_VENDOR_CFG: u32 = 1 << 31;
    /// Every defined bit.
    pub const ALL: u32 = MRC_QP_HINT_NUM_QPS_PER_PEER
        | MRC_QP_HINT_NUM_SEND_PEERS
        | MRC_QP_HINT_NUM_REMOTE_RECV_PEERS
        | MRC_QP_HINT_VENDOR_CFG;
}

/// `struct mrc_qp_hint_init_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct mrc_qp_hint_init_attr {
    pub attr: mrc_qp_hint_attr,
}

/// `struct mrc_qp_init_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct mrc_qp_init_attr {
    pub qp_context: *mut c_void,
    pub send_cq: *mut mrc_cq,
    pub recv_cq: *mut mrc_cq,
    pub cap: ibv_qp_cap,
    pub sq_sig_all: c_int,
    pub pd: *mut ibv_pd,
    pub send_ops_flags: u64,
    pub protocol_version: u32,
}

/// `enum mrc_qp_attr_mask`.
pub mod qp_mask {
    pub const MRC_QP_MAX_WIMM: u32 = 1 << 0;
    pub const MRC_QP_MAX_WIMM_DEST: u32 = 1 << 1;
    pub const MRC_QP_MPR: u32 = 1 << 2;
    pub const MRC_QP_MPR_DEST: u32 = 1 << 3;
    pub const MRC_QP_TIMEOUT: u32 = 1 << 4;
    pub const MRC_QP_EV_PROFILE_ID: u32 = 1 << 5;
    pub const MRC_QP_CC_PROFILE_ID: u32 = 1 << 6;
    pub const MRC_QP_HINT: u32 = 1 << 7;
    pub const MRC_QP_RETRY_CNT: u32 = 1 << 8;
    pub const MRC_QP_CAP: u32 = 1 << 9;
    pub const MRC_QP_VENDOR_CFG: u32 = 1 << 31;
    /// Every defined bit.
    pub const ALL: u32 = ((1 << 10) - 1) | MRC_QP_VENDOR_CFG;
}

/// `enum mrc_qp_cap`.
pub mod qp_cap {
    pub const MRC_QP_CAP_TRIM_NACK_DEST_UNSUPPORTED: u32 = 1 << 0;
    pub const MRC_QP_CAP_DYNAMIC_MPR: u32 = 1 << 1;
    pub const MRC_QP_CAP_SVC_TIME_DEST_UNSUPPORTED: u32 = 1 << 2;
    /// Every defined bit.
    pub const ALL: u32 = (1 << 3) - 1;
}

/// `mrc_qp_attr.mpr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct mrc_qp_attr_mpr {
    pub mpr: u8,
    pub mpr_dest: u8,
}

/// `mrc_qp_attr.wimm`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct mrc_qp_attr_wimm {
    pub max_wimm: u16,
    pub max_wimm_dest: u16,
}

/// `mrc_qp_attr.profile`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct mrc_qp_attr_profile {
    pub ev_profile_id: u64,
    pub cc_profile_id: u64,
}

/// `mrc_qp_attr.retry`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct mrc_qp_attr_retry {
    pub linear_cnt: u8,
    pub exp_cnt: u8,
}

/// `struct mrc_qp_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct mrc_qp_attr {
    pub mpr: mrc_qp_attr_mpr,
    pub wimm: mrc_qp_attr_wimm,
    pub timeout: u8,
    pub profile: mrc_qp_attr_profile,
    pub retry: mrc_qp_attr_retry,
    pub qp_hint: *mut mrc_qp_hint,
    pub cap: u32,
    pub vendor_cfg: [u8; MRC_MAX_VENDOR_CFG_SIZE],
}

impl Default for mrc_qp_attr {
    fn default() -> Self {
        mrc_qp_attr {
            mpr: mrc_qp_attr_mpr::default(),
            wimm: mrc_qp_attr_wimm::default(),
            timeout: 0,
            profile: mrc_qp_attr_profile::default(),
            retry: mrc_qp_attr_retry::default(),
            qp_hint: std::ptr::null_mut(),
            cap: 0,
            vendor_cfg: [0; MRC_MAX_VENDOR_CFG_SIZE],
        }
    }
}

/// `mrc_async_event.element`. Written, never read, by this library.
#[repr(C)]
#[derive(Clone, Copy)]
pub union mrc_async_event_element {
    pub cq: *mut mrc_cq,
    pub qp: *mut mrc_qp,
    pub port_num: c_int,
}

/// `struct mrc_async_event`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct mrc_async_event {
    pub element: mrc_async_event_element,
    pub event_type: u32,
}
