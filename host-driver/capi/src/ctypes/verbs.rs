//! The libibverbs types and constants the MRC headers use, as rdma-core 44's `verbs.h` lays
//! them out (x86_64 and aarch64 Linux). `tests/layout.rs` compiles a C file against the real
//! header and compares every size, offset and value listed here.
//!
//! Unions whose other arms this library never touches are declared as the arm it uses followed
//! by padding to the union's size.

use std::ffi::{c_char, c_int, c_uint, c_void};

/// `union ibv_gid`: 16 bytes, aligned as its `__be64` halves.
#[repr(C, align(8))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_gid {
    /// The address bytes, network order.
    pub raw: [u8; 16],
}

/// `enum ibv_gid_type`.
pub mod gid_type {
    /// InfiniBand GID.
    pub const IBV_GID_TYPE_IB: u32 = 0;
    /// RoCE v1.
    pub const IBV_GID_TYPE_ROCE_V1: u32 = 1;
    /// RoCE v2 (UDP/IP): the only type an MRC port has.
    pub const IBV_GID_TYPE_ROCE_V2: u32 = 2;
}

/// `struct ibv_gid_entry` (`ibv_query_gid_ex`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ibv_gid_entry {
    pub gid: ibv_gid,
    pub gid_index: u32,
    pub port_num: u32,
    pub gid_type: u32,
    pub ndev_ifindex: u32,
}

/// `enum ibv_node_type`: an MRC NIC is a channel adapter.
pub const IBV_NODE_CA: c_int = 1;
/// `enum ibv_transport_type`: RoCE devices report the IB transport.
pub const IBV_TRANSPORT_IB: c_int = 0;

/// `struct _ibv_device_ops` (obsolete, never used, always zero).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct _ibv_device_ops {
    pub _dummy1: *mut c_void,
    pub _dummy2: *mut c_void,
}

/// `IBV_SYSFS_NAME_MAX`.
pub const IBV_SYSFS_NAME_MAX: usize = 64;
/// `IBV_SYSFS_PATH_MAX`.
pub const IBV_SYSFS_PATH_MAX: usize = 256;

/// `struct ibv_device`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_device {
    pub _ops: _ibv_device_ops,
    pub node_type: c_int,
    pub transport_type: c_int,
    pub name: [c_char; IBV_SYSFS_NAME_MAX],
    pub dev_name: [c_char; IBV_SYSFS_NAME_MAX],
    pub dev_path: [c_char; IBV_SYSFS_PATH_MAX],
    pub ibdev_path: [c_char; IBV_SYSFS_PATH_MAX],
}

/// Function pointers of `struct ibv_context_ops` (32 of them, mostly `_compat_*`).
pub const IBV_CONTEXT_OPS: usize = 32;

/// `struct ibv_context_ops`: every slot takes an object (CQ, QP, SRQ, MW) this library never
/// hands out, so all stay NULL.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_context_ops {
    pub ops: [*mut c_void; IBV_CONTEXT_OPS],
}

/// `struct ibv_context`. `abi_compat` is not `__VERBS_ABI_IS_EXTENDED`, so the header's inline
/// wrappers (`ibv_query_port`, `ibv_create_cq_ex`, ...) take their non-extended paths: the
/// exported symbol, or `EOPNOTSUPP` for extended verbs.
#[repr(C)]
pub struct ibv_context {
    pub device: *mut ibv_device,
    pub ops: ibv_context_ops,
    pub cmd_fd: c_int,
    pub async_fd: c_int,
    pub num_comp_vectors: c_int,
    pub mutex: libc::pthread_mutex_t,
    pub abi_compat: *mut c_void,
}

/// `struct ibv_pd`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_pd {
    pub context: *mut ibv_context,
    pub handle: u32,
}

/// `struct ibv_mr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_mr {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub addr: *mut c_void,
    pub length: usize,
    pub handle: u32,
    pub lkey: u32,
    pub rkey: u32,
}

/// `enum ibv_access_flags`.
pub mod access {
    pub const IBV_ACCESS_LOCAL_WRITE: u32 = 1;
    pub const IBV_ACCESS_REMOTE_WRITE: u32 = 1 << 1;
    pub const IBV_ACCESS_REMOTE_READ: u32 = 1 << 2;
    pub const IBV_ACCESS_REMOTE_ATOMIC: u32 = 1 << 3;
    pub const IBV_ACCESS_MW_BIND: u32 = 1 << 4;
    pub const IBV_ACCESS_ZERO_BASED: u32 = 1 << 5;
    pub const IBV_ACCESS_ON_DEMAND: u32 = 1 << 6;
    pub const IBV_ACCESS_HUGETLB: u32 = 1 << 7;
    /// `IBV_ACCESS_OPTIONAL_FIRST`: bits from here to 29 are hints a provider may ignore.
    pub const IBV_ACCESS_RELAXED_ORDERING: u32 = 1 << 20;
    /// `IBV_ACCESS_OPTIONAL_RANGE`.
    pub const IBV_ACCESS_OPTIONAL_RANGE: u32 = ((1 << 29) << 1) - (1 << 20);
}

/// `enum ibv_port_state`.
pub mod port_state {
    pub const IBV_PORT_NOP: u32 = 0;
    pub const IBV_PORT_DOWN: u32 = 1;
    pub const IBV_PORT_INIT: u32 = 2;
    pub const IBV_PORT_ARMED: u32 = 3;
    pub const IBV_PORT_ACTIVE: u32 = 4;
    pub const IBV_PORT_ACTIVE_DEFER: u32 = 5;
}

/// `enum ibv_mtu`.
pub mod mtu {
    pub const IBV_MTU_256: u32 = 1;
    pub const IBV_MTU_512: u32 = 2;
    pub const IBV_MTU_1024: u32 = 3;
    pub const IBV_MTU_2048: u32 = 4;
    pub const IBV_MTU_4096: u32 = 5;
}

/// `IBV_LINK_LAYER_ETHERNET`.
pub const IBV_LINK_LAYER_ETHERNET: u8 = 2;
/// `IBV_PORT_IP_BASED_GIDS` (`enum ibv_port_cap_flags`).
pub const IBV_PORT_IP_BASED_GIDS: u32 = 1 << 26;

/// `struct ibv_port_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ibv_port_attr {
    pub state: u32,
    pub max_mtu: u32,
    pub active_mtu: u32,
    pub gid_tbl_len: c_int,
    pub port_cap_flags: u32,
    pub max_msg_sz: u32,
    pub bad_pkey_cntr: u32,
    pub qkey_viol_cntr: u32,
    pub pkey_tbl_len: u16,
    pub lid: u16,
    pub sm_lid: u16,
    pub lmc: u8,
    pub max_vl_num: u8,
    pub sm_sl: u8,
    pub subnet_timeout: u8,
    pub init_type_reply: u8,
    pub active_width: u8,
    pub active_speed: u8,
    pub phys_state: u8,
    pub link_layer: u8,
    pub flags: u8,
    pub port_cap_flags2: u16,
}

/// Bytes of `struct _compat_ibv_port_attr`, what `ibv_query_port@IBVERBS_1.1` may write: the
/// fields of `ibv_port_attr` up to `link_layer` (the header's inline wrapper zeroes the rest).
pub const COMPAT_PORT_ATTR_BYTES: usize = std::mem::offset_of!(ibv_port_attr, flags);

/// `struct ibv_device_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_device_attr {
    pub fw_ver: [c_char; 64],
    pub node_guid: u64,
    pub sys_image_guid: u64,
    pub max_mr_size: u64,
    pub page_size_cap: u64,
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub hw_ver: u32,
    pub max_qp: c_int,
    pub max_qp_wr: c_int,
    pub device_cap_flags: c_uint,
    pub max_sge: c_int,
    pub max_sge_rd: c_int,
    pub max_cq: c_int,
    pub max_cqe: c_int,
    pub max_mr: c_int,
    pub max_pd: c_int,
    pub max_qp_rd_atom: c_int,
    pub max_ee_rd_atom: c_int,
    pub max_res_rd_atom: c_int,
    pub max_qp_init_rd_atom: c_int,
    pub max_ee_init_rd_atom: c_int,
    pub atomic_cap: c_int,
    pub max_ee: c_int,
    pub max_rdd: c_int,
    pub max_mw: c_int,
    pub max_raw_ipv6_qp: c_int,
    pub max_raw_ethy_qp: c_int,
    pub max_mcast_grp: c_int,
    pub max_mcast_qp_attach: c_int,
    pub max_total_mcast_qp_attach: c_int,
    pub max_ah: c_int,
    pub max_fmr: c_int,
    pub max_map_per_fmr: c_int,
    pub max_srq: c_int,
    pub max_srq_wr: c_int,
    pub max_srq_sge: c_int,
    pub max_pkeys: u16,
    pub local_ca_ack_delay: u8,
    pub phys_port_cnt: u8,
}

/// `enum ibv_event_type`.
pub mod event_type {
    pub const IBV_EVENT_CQ_ERR: u32 = 0;
    pub const IBV_EVENT_QP_FATAL: u32 = 1;
    pub const IBV_EVENT_QP_REQ_ERR: u32 = 2;
    pub const IBV_EVENT_QP_ACCESS_ERR: u32 = 3;
    pub const IBV_EVENT_COMM_EST: u32 = 4;
    pub const IBV_EVENT_SQ_DRAINED: u32 = 5;
    pub const IBV_EVENT_PATH_MIG: u32 = 6;
    pub const IBV_EVENT_PATH_MIG_ERR: u32 = 7;
    pub const IBV_EVENT_DEVICE_FATAL: u32 = 8;
    pub const IBV_EVENT_PORT_ACTIVE: u32 = 9;
    pub const IBV_EVENT_PORT_ERR: u32 = 10;
    pub const IBV_EVENT_LID_CHANGE: u32 = 11;
    pub const IBV_EVENT_PKEY_CHANGE: u32 = 12;
    pub const IBV_EVENT_SM_CHANGE: u32 = 13;
    pub const IBV_EVENT_SRQ_ERR: u32 = 14;
    pub const IBV_EVENT_SRQ_LIMIT_REACHED: u32 = 15;
    pub const IBV_EVENT_QP_LAST_WQE_REACHED: u32 = 16;
    pub const IBV_EVENT_CLIENT_REREGISTER: u32 = 17;
    pub const IBV_EVENT_GID_CHANGE: u32 = 18;
    pub const IBV_EVENT_WQ_FATAL: u32 = 19;
}

/// `enum ibv_wc_status`.
pub mod wc_status {
    pub const IBV_WC_SUCCESS: u32 = 0;
    pub const IBV_WC_LOC_LEN_ERR: u32 = 1;
    pub const IBV_WC_LOC_QP_OP_ERR: u32 = 2;
    pub const IBV_WC_LOC_EEC_OP_ERR: u32 = 3;
    pub const IBV_WC_LOC_PROT_ERR: u32 = 4;
    pub const IBV_WC_WR_FLUSH_ERR: u32 = 5;
    pub const IBV_WC_MW_BIND_ERR: u32 = 6;
    pub const IBV_WC_BAD_RESP_ERR: u32 = 7;
    pub const IBV_WC_LOC_ACCESS_ERR: u32 = 8;
    pub const IBV_WC_REM_INV_REQ_ERR: u32 = 9;
    pub const IBV_WC_REM_ACCESS_ERR: u32 = 10;
    pub const IBV_WC_REM_OP_ERR: u32 = 11;
    pub const IBV_WC_RETRY_EXC_ERR: u32 = 12;
    pub const IBV_WC_RNR_RETRY_EXC_ERR: u32 = 13;
    pub const IBV_WC_LOC_RDD_VIOL_ERR: u32 = 14;
    pub const IBV_WC_REM_INV_RD_REQ_ERR: u32 = 15;
    pub const IBV_WC_REM_ABORT_ERR: u32 = 16;
    pub const IBV_WC_INV_EECN_ERR: u32 = 17;
    pub const IBV_WC_INV_EEC_STATE_ERR: u32 = 18;
    pub const IBV_WC_FATAL_ERR: u32 = 19;
    pub const IBV_WC_RESP_TIMEOUT_ERR: u32 = 20;
    pub const IBV_WC_GENERAL_ERR: u32 = 21;
    pub const IBV_WC_TM_ERR: u32 = 22;
    pub const IBV_WC_TM_RNDV_INCOMPLETE: u32 = 23;
}

/// `enum ibv_wc_opcode` (the values MRC completions use).
pub mod wc_opcode {
    pub const IBV_WC_RDMA_WRITE: u32 = 1;
    pub const IBV_WC_RECV: u32 = 1 << 7;
    pub const IBV_WC_RECV_RDMA_WITH_IMM: u32 = (1 << 7) + 1;
}

/// `IBV_WC_WITH_IMM` (`enum ibv_wc_flags`).
pub const IBV_WC_WITH_IMM: c_uint = 1 << 1;

/// `struct ibv_wc`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_wc {
    pub wr_id: u64,
    pub status: u32,
    pub opcode: u32,
    pub vendor_err: u32,
    pub byte_len: u32,
    /// Immediate data in network byte order (the union's `imm_data` arm).
    pub imm_data: u32,
    pub qp_num: u32,
    pub src_qp: u32,
    pub wc_flags: c_uint,
    pub pkey_index: u16,
    pub slid: u16,
    pub sl: u8,
    pub dlid_path_bits: u8,
}

/// `struct ibv_global_route`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_global_route {
    pub dgid: ibv_gid,
    pub flow_label: u32,
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
}

/// `struct ibv_ah_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_ah_attr {
    pub grh: ibv_global_route,
    pub dlid: u16,
    pub sl: u8,
    pub src_path_bits: u8,
    pub static_rate: u8,
    pub is_global: u8,
    pub port_num: u8,
}

/// `struct ibv_qp_cap`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_qp_cap {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
}

/// `enum ibv_qp_attr_mask`.
pub mod qp_attr_mask {
    pub const IBV_QP_STATE: u32 = 1 << 0;
    pub const IBV_QP_CUR_STATE: u32 = 1 << 1;
    pub const IBV_QP_EN_SQD_ASYNC_NOTIFY: u32 = 1 << 2;
    pub const IBV_QP_ACCESS_FLAGS: u32 = 1 << 3;
    pub const IBV_QP_PKEY_INDEX: u32 = 1 << 4;
    pub const IBV_QP_PORT: u32 = 1 << 5;
    pub const IBV_QP_QKEY: u32 = 1 << 6;
    pub const IBV_QP_AV: u32 = 1 << 7;
    pub const IBV_QP_PATH_MTU: u32 = 1 << 8;
    pub const IBV_QP_TIMEOUT: u32 = 1 << 9;
    pub const IBV_QP_RETRY_CNT: u32 = 1 << 10;
    pub const IBV_QP_RNR_RETRY: u32 = 1 << 11;
    pub const IBV_QP_RQ_PSN: u32 = 1 << 12;
    pub const IBV_QP_MAX_QP_RD_ATOMIC: u32 = 1 << 13;
    pub const IBV_QP_ALT_PATH: u32 = 1 << 14;
    pub const IBV_QP_MIN_RNR_TIMER: u32 = 1 << 15;
    pub const IBV_QP_SQ_PSN: u32 = 1 << 16;
    pub const IBV_QP_MAX_DEST_RD_ATOMIC: u32 = 1 << 17;
    pub const IBV_QP_PATH_MIG_STATE: u32 = 1 << 18;
    pub const IBV_QP_CAP: u32 = 1 << 19;
    pub const IBV_QP_DEST_QPN: u32 = 1 << 20;
    pub const IBV_QP_RATE_LIMIT: u32 = 1 << 25;
    /// Every bit libibverbs defines.
    pub const ALL: u32 = ((1 << 21) - 1) | IBV_QP_RATE_LIMIT;
}

/// `enum ibv_qp_state`.
pub mod qp_state {
    pub const IBV_QPS_RESET: u32 = 0;
    pub const IBV_QPS_INIT: u32 = 1;
    pub const IBV_QPS_RTR: u32 = 2;
    pub const IBV_QPS_RTS: u32 = 3;
    pub const IBV_QPS_SQD: u32 = 4;
    pub const IBV_QPS_SQE: u32 = 5;
    pub const IBV_QPS_ERR: u32 = 6;
    pub const IBV_QPS_UNKNOWN: u32 = 7;
}

/// `struct ibv_qp_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_qp_attr {
    pub qp_state: u32,
    pub cur_qp_state: u32,
    pub path_mtu: u32,
    pub path_mig_state: u32,
    pub qkey: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub dest_qp_num: u32,
    pub qp_access_flags: c_uint,
    pub cap: ibv_qp_cap,
    pub ah_attr: ibv_ah_attr,
    pub alt_ah_attr: ibv_ah_attr,
    pub pkey_index: u16,
    pub alt_pkey_index: u16,
    pub en_sqd_async_notify: u8,
    pub sq_draining: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub min_rnr_timer: u8,
    pub port_num: u8,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub alt_port_num: u8,
    pub alt_timeout: u8,
    pub rate_limit: u32,
}

/// `enum ibv_wr_opcode`.
pub mod wr_opcode {
    pub const IBV_WR_RDMA_WRITE: u32 = 0;
    pub const IBV_WR_RDMA_WRITE_WITH_IMM: u32 = 1;
    pub const IBV_WR_SEND: u32 = 2;
    pub const IBV_WR_SEND_WITH_IMM: u32 = 3;
    pub const IBV_WR_RDMA_READ: u32 = 4;
    pub const IBV_WR_ATOMIC_CMP_AND_SWP: u32 = 5;
    pub const IBV_WR_ATOMIC_FETCH_AND_ADD: u32 = 6;
}

/// `enum ibv_send_flags`.
pub mod send_flags {
    pub const IBV_SEND_FENCE: u32 = 1 << 0;
    pub const IBV_SEND_SIGNALED: u32 = 1 << 1;
    pub const IBV_SEND_SOLICITED: u32 = 1 << 2;
    pub const IBV_SEND_INLINE: u32 = 1 << 3;
    pub const IBV_SEND_IP_CSUM: u32 = 1 << 4;
}

/// `enum ibv_qp_create_send_ops_flags` (the two MRC allows).
pub mod send_ops {
    pub const IBV_QP_EX_WITH_RDMA_WRITE: u64 = 1 << 0;
    pub const IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM: u64 = 1 << 1;
}

/// `struct ibv_sge`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_sge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}

/// The `rdma` arm of `ibv_send_wr`'s `wr` union.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_send_wr_rdma {
    pub remote_addr: u64,
    pub rkey: u32,
}

/// `ibv_send_wr`'s `wr` union (32 bytes: its largest arm is `atomic`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_send_wr_wr {
    pub rdma: ibv_send_wr_rdma,
    pub _other_arms: [u64; 2],
}

/// `struct ibv_send_wr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_send_wr {
    pub wr_id: u64,
    pub next: *mut ibv_send_wr,
    pub sg_list: *mut ibv_sge,
    pub num_sge: c_int,
    pub opcode: u32,
    pub send_flags: c_uint,
    /// Immediate data in network byte order (the union's `imm_data` arm).
    pub imm_data: u32,
    pub wr: ibv_send_wr_wr,
    /// The `qp_type` union (`xrc.remote_srqn`).
    pub qp_type: u32,
    /// The `bind_mw` / `tso` union.
    pub _bind_mw_tso: [u64; 6],
}

/// `struct ibv_recv_wr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_recv_wr {
    pub wr_id: u64,
    pub next: *mut ibv_recv_wr,
    pub sg_list: *mut ibv_sge,
    pub num_sge: c_int,
}
