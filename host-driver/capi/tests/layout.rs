//! The library's Rust declarations of the C types match the real headers: a C program compiled
//! against OCP's `mrc.h` / `mrc_ctl.h` and Debian's `infiniband/verbs.h` prints every `sizeof`,
//! `_Alignof`, `offsetof` and constant listed below, and each must equal what the library's
//! declaration gives. Needs `cc`, libibverbs-dev and OCP's headers (else `SKIPPED`, or a failure
//! under `CI`).

mod common;

use std::mem::{align_of, offset_of, size_of};
use std::process::Command;

use _mrc::ctypes::ctl::*;
use _mrc::ctypes::mrc::*;
use _mrc::ctypes::verbs::*;

/// One C expression and the value the library declares for it.
struct Check {
    c_expr: String,
    rust: u64,
}

macro_rules! size {
    ($c:literal, $t:ty) => {
        [
            Check {
                c_expr: format!("sizeof({})", $c),
                rust: size_of::<$t>() as u64,
            },
            Check {
                c_expr: format!("_Alignof({})", $c),
                rust: align_of::<$t>() as u64,
            },
        ]
    };
}

macro_rules! offsets {
    ($c:literal, $t:ty, $($($f:ident).+),+ $(,)?) => {
        [$(Check {
            c_expr: format!("offsetof({}, {})", $c, stringify!($($f).+)),
            rust: offset_of!($t, $($f).+) as u64,
        }),+]
    };
}

macro_rules! values {
    ($($c:ident = $r:expr),+ $(,)?) => {
        [$(Check {
            c_expr: format!("(unsigned int)({})", stringify!($c)),
            rust: u64::from($r as u32),
        }),+]
    };
}

fn verbs_checks() -> Vec<Check> {
    let mut v = Vec::new();
    v.extend(size!("union ibv_gid", ibv_gid));
    v.extend(size!("struct ibv_gid_entry", ibv_gid_entry));
    v.extend(offsets!(
        "struct ibv_gid_entry",
        ibv_gid_entry,
        gid,
        gid_index,
        port_num,
        gid_type,
        ndev_ifindex
    ));
    v.extend(size!("struct ibv_device", ibv_device));
    v.extend(offsets!(
        "struct ibv_device",
        ibv_device,
        node_type,
        transport_type,
        name,
        dev_name,
        dev_path,
        ibdev_path
    ));
    v.extend(size!("struct ibv_context_ops", ibv_context_ops));
    v.extend(size!("struct ibv_context", ibv_context));
    v.extend(offsets!(
        "struct ibv_context",
        ibv_context,
        device,
        ops,
        cmd_fd,
        async_fd,
        num_comp_vectors,
        mutex,
        abi_compat
    ));
    v.extend(size!("struct ibv_pd", ibv_pd));
    v.extend(offsets!("struct ibv_pd", ibv_pd, context, handle));
    v.extend(size!("struct ibv_mr", ibv_mr));
    v.extend(offsets!(
        "struct ibv_mr",
        ibv_mr,
        context,
        pd,
        addr,
        length,
        handle,
        lkey,
        rkey
    ));
    v.extend(size!("struct ibv_port_attr", ibv_port_attr));
    v.extend(offsets!(
        "struct ibv_port_attr",
        ibv_port_attr,
        state,
        max_mtu,
        active_mtu,
        gid_tbl_len,
        port_cap_flags,
        max_msg_sz,
        bad_pkey_cntr,
        qkey_viol_cntr,
        pkey_tbl_len,
        lid,
        sm_lid,
        lmc,
        max_vl_num,
        sm_sl,
        subnet_timeout,
        init_type_reply,
        active_width,
        active_speed,
        phys_state,
        link_layer,
        flags,
        port_cap_flags2
    ));
    v.extend(size!("struct ibv_device_attr", ibv_device_attr));
    v.extend(offsets!(
        "struct ibv_device_attr",
        ibv_device_attr,
        fw_ver,
        node_guid,
        sys_image_guid,
        max_mr_size,
        page_size_cap,
        vendor_id,
        vendor_part_id,
        hw_ver,
        max_qp,
        max_qp_wr,
        device_cap_flags,
        max_sge,
        max_sge_rd,
        max_cq,
        max_cqe,
        max_mr,
        max_pd,
        max_qp_rd_atom,
        atomic_cap,
        max_ah,
        max_srq_sge,
        max_pkeys,
        local_ca_ack_delay,
        phys_port_cnt
    ));
    v.extend(size!("struct ibv_wc", ibv_wc));
    v.extend(offsets!(
        "struct ibv_wc",
        ibv_wc,
        wr_id,
        status,
        opcode,
        vendor_err,
        byte_len,
        imm_data,
        qp_num,
        src_qp,
        wc_flags,
        pkey_index,
        slid,
        sl,
        dlid_path_bits
    ));
    v.extend(size!("struct ibv_global_route", ibv_global_route));
    v.extend(offsets!(
        "struct ibv_global_route",
        ibv_global_route,
        dgid,
        flow_label,
        sgid_index,
        hop_limit,
        traffic_class
    ));
    v.extend(size!("struct ibv_ah_attr", ibv_ah_attr));
    v.extend(offsets!(
        "struct ibv_ah_attr",
        ibv_ah_attr,
        grh,
        dlid,
        sl,
        src_path_bits,
        static_rate,
        is_global,
        port_num
    ));
    v.extend(size!("struct ibv_qp_cap", ibv_qp_cap));
    v.extend(offsets!(
        "struct ibv_qp_cap",
        ibv_qp_cap,
        max_send_wr,
        max_recv_wr,
        max_send_sge,
        max_recv_sge,
        max_inline_data
    ));
    v.extend(size!("struct ibv_qp_attr", ibv_qp_attr));
    v.extend(offsets!(
        "struct ibv_qp_attr",
        ibv_qp_attr,
        qp_state,
        cur_qp_state,
        path_mtu,
        path_mig_state,
        qkey,
        rq_psn,
        sq_psn,
        dest_qp_num,
        qp_access_flags,
        cap,
        ah_attr,
        alt_ah_attr,
        pkey_index,
        alt_pkey_index,
        en_sqd_async_notify,
        sq_draining,
        max_rd_atomic,
        max_dest_rd_atomic,
        min_rnr_timer,
        port_num,
        timeout,
        retry_cnt,
        rnr_retry,
        alt_port_num,
        alt_timeout,
        rate_limit
    ));
    v.extend(size!("struct ibv_sge", ibv_sge));
    v.extend(offsets!("struct ibv_sge", ibv_sge, addr, length, lkey));
    v.extend(size!("struct ibv_send_wr", ibv_send_wr));
    v.extend(offsets!(
        "struct ibv_send_wr",
        ibv_send_wr,
        wr_id,
        next,
        sg_list,
        num_sge,
        opcode,
        send_flags,
        imm_data,
        wr.rdma.remote_addr,
        wr.rdma.rkey,
        qp_type
    ));
    v.push(Check {
        c_expr: "sizeof(((struct ibv_send_wr *)0)->wr)".into(),
        rust: size_of::<ibv_send_wr_wr>() as u64,
    });
    v.push(Check {
        c_expr: "offsetof(struct ibv_send_wr, bind_mw)".into(),
        rust: offset_of!(ibv_send_wr, _bind_mw_tso) as u64,
    });
    v.extend(size!("struct ibv_recv_wr", ibv_recv_wr));
    v.extend(offsets!(
        "struct ibv_recv_wr",
        ibv_recv_wr,
        wr_id,
        next,
        sg_list,
        num_sge
    ));
    v.push(Check {
        c_expr: "offsetof(struct ibv_port_attr, flags)".into(),
        rust: COMPAT_PORT_ATTR_BYTES as u64,
    });
    v.extend(values!(
        IBV_SYSFS_NAME_MAX = IBV_SYSFS_NAME_MAX,
        IBV_SYSFS_PATH_MAX = IBV_SYSFS_PATH_MAX,
        IBV_NODE_CA = IBV_NODE_CA,
        IBV_TRANSPORT_IB = IBV_TRANSPORT_IB,
        IBV_GID_TYPE_IB = gid_type::IBV_GID_TYPE_IB,
        IBV_GID_TYPE_ROCE_V1 = gid_type::IBV_GID_TYPE_ROCE_V1,
        IBV_GID_TYPE_ROCE_V2 = gid_type::IBV_GID_TYPE_ROCE_V2,
        IBV_ACCESS_LOCAL_WRITE = access::IBV_ACCESS_LOCAL_WRITE,
        IBV_ACCESS_REMOTE_WRITE = access::IBV_ACCESS_REMOTE_WRITE,
        IBV_ACCESS_REMOTE_READ = access::IBV_ACCESS_REMOTE_READ,
        IBV_ACCESS_REMOTE_ATOMIC = access::IBV_ACCESS_REMOTE_ATOMIC,
        IBV_ACCESS_MW_BIND = access::IBV_ACCESS_MW_BIND,
        IBV_ACCESS_ZERO_BASED = access::IBV_ACCESS_ZERO_BASED,
        IBV_ACCESS_ON_DEMAND = access::IBV_ACCESS_ON_DEMAND,
        IBV_ACCESS_HUGETLB = access::IBV_ACCESS_HUGETLB,
        IBV_ACCESS_RELAXED_ORDERING = access::IBV_ACCESS_RELAXED_ORDERING,
        IBV_ACCESS_OPTIONAL_RANGE = access::IBV_ACCESS_OPTIONAL_RANGE,
        IBV_PORT_DOWN = port_state::IBV_PORT_DOWN,
        IBV_PORT_ACTIVE = port_state::IBV_PORT_ACTIVE,
        IBV_PORT_INIT = port_state::IBV_PORT_INIT,
        IBV_PORT_ARMED = port_state::IBV_PORT_ARMED,
        IBV_PORT_NOP = port_state::IBV_PORT_NOP,
        IBV_PORT_ACTIVE_DEFER = port_state::IBV_PORT_ACTIVE_DEFER,
        IBV_MTU_256 = mtu::IBV_MTU_256,
        IBV_MTU_512 = mtu::IBV_MTU_512,
        IBV_MTU_1024 = mtu::IBV_MTU_1024,
        IBV_MTU_2048 = mtu::IBV_MTU_2048,
        IBV_MTU_4096 = mtu::IBV_MTU_4096,
        IBV_LINK_LAYER_ETHERNET = IBV_LINK_LAYER_ETHERNET,
        IBV_PORT_IP_BASED_GIDS = IBV_PORT_IP_BASED_GIDS,
        IBV_EVENT_CQ_ERR = event_type::IBV_EVENT_CQ_ERR,
        IBV_EVENT_QP_FATAL = event_type::IBV_EVENT_QP_FATAL,
        IBV_EVENT_QP_REQ_ERR = event_type::IBV_EVENT_QP_REQ_ERR,
        IBV_EVENT_QP_ACCESS_ERR = event_type::IBV_EVENT_QP_ACCESS_ERR,
        IBV_EVENT_COMM_EST = event_type::IBV_EVENT_COMM_EST,
        IBV_EVENT_DEVICE_FATAL = event_type::IBV_EVENT_DEVICE_FATAL,
        IBV_EVENT_PORT_ACTIVE = event_type::IBV_EVENT_PORT_ACTIVE,
        IBV_EVENT_PORT_ERR = event_type::IBV_EVENT_PORT_ERR,
        IBV_EVENT_GID_CHANGE = event_type::IBV_EVENT_GID_CHANGE,
        IBV_EVENT_WQ_FATAL = event_type::IBV_EVENT_WQ_FATAL,
        IBV_WC_SUCCESS = wc_status::IBV_WC_SUCCESS,
        IBV_WC_LOC_LEN_ERR = wc_status::IBV_WC_LOC_LEN_ERR,
        IBV_WC_LOC_QP_OP_ERR = wc_status::IBV_WC_LOC_QP_OP_ERR,
        IBV_WC_LOC_PROT_ERR = wc_status::IBV_WC_LOC_PROT_ERR,
        IBV_WC_WR_FLUSH_ERR = wc_status::IBV_WC_WR_FLUSH_ERR,
        IBV_WC_LOC_ACCESS_ERR = wc_status::IBV_WC_LOC_ACCESS_ERR,
        IBV_WC_REM_INV_REQ_ERR = wc_status::IBV_WC_REM_INV_REQ_ERR,
        IBV_WC_REM_ACCESS_ERR = wc_status::IBV_WC_REM_ACCESS_ERR,
        IBV_WC_REM_OP_ERR = wc_status::IBV_WC_REM_OP_ERR,
        IBV_WC_RETRY_EXC_ERR = wc_status::IBV_WC_RETRY_EXC_ERR,
        IBV_WC_RNR_RETRY_EXC_ERR = wc_status::IBV_WC_RNR_RETRY_EXC_ERR,
        IBV_WC_FATAL_ERR = wc_status::IBV_WC_FATAL_ERR,
        IBV_WC_GENERAL_ERR = wc_status::IBV_WC_GENERAL_ERR,
        IBV_WC_TM_RNDV_INCOMPLETE = wc_status::IBV_WC_TM_RNDV_INCOMPLETE,
        IBV_WC_RDMA_WRITE = wc_opcode::IBV_WC_RDMA_WRITE,
        IBV_WC_RECV = wc_opcode::IBV_WC_RECV,
        IBV_WC_RECV_RDMA_WITH_IMM = wc_opcode::IBV_WC_RECV_RDMA_WITH_IMM,
        IBV_WC_WITH_IMM = IBV_WC_WITH_IMM,
        IBV_QP_STATE = qp_attr_mask::IBV_QP_STATE,
        IBV_QP_CUR_STATE = qp_attr_mask::IBV_QP_CUR_STATE,
        IBV_QP_EN_SQD_ASYNC_NOTIFY = qp_attr_mask::IBV_QP_EN_SQD_ASYNC_NOTIFY,
        IBV_QP_ACCESS_FLAGS = qp_attr_mask::IBV_QP_ACCESS_FLAGS,
        IBV_QP_PKEY_INDEX = qp_attr_mask::IBV_QP_PKEY_INDEX,
        IBV_QP_PORT = qp_attr_mask::IBV_QP_PORT,
        IBV_QP_QKEY = qp_attr_mask::IBV_QP_QKEY,
        IBV_QP_AV = qp_attr_mask::IBV_QP_AV,
        IBV_QP_PATH_MTU = qp_attr_mask::IBV_QP_PATH_MTU,
        IBV_QP_TIMEOUT = qp_attr_mask::IBV_QP_TIMEOUT,
        IBV_QP_RETRY_CNT = qp_attr_mask::IBV_QP_RETRY_CNT,
        IBV_QP_RNR_RETRY = qp_attr_mask::IBV_QP_RNR_RETRY,
        IBV_QP_RQ_PSN = qp_attr_mask::IBV_QP_RQ_PSN,
        IBV_QP_MAX_QP_RD_ATOMIC = qp_attr_mask::IBV_QP_MAX_QP_RD_ATOMIC,
        IBV_QP_ALT_PATH = qp_attr_mask::IBV_QP_ALT_PATH,
        IBV_QP_MIN_RNR_TIMER = qp_attr_mask::IBV_QP_MIN_RNR_TIMER,
        IBV_QP_SQ_PSN = qp_attr_mask::IBV_QP_SQ_PSN,
        IBV_QP_MAX_DEST_RD_ATOMIC = qp_attr_mask::IBV_QP_MAX_DEST_RD_ATOMIC,
        IBV_QP_PATH_MIG_STATE = qp_attr_mask::IBV_QP_PATH_MIG_STATE,
        IBV_QP_CAP = qp_attr_mask::IBV_QP_CAP,
        IBV_QP_DEST_QPN = qp_attr_mask::IBV_QP_DEST_QPN,
        IBV_QP_RATE_LIMIT = qp_attr_mask::IBV_QP_RATE_LIMIT,
        IBV_QPS_RESET = qp_state::IBV_QPS_RESET,
        IBV_QPS_INIT = qp_state::IBV_QPS_INIT,
        IBV_QPS_RTR = qp_state::IBV_QPS_RTR,
        IBV_QPS_RTS = qp_state::IBV_QPS_RTS,
        IBV_QPS_SQD = qp_state::IBV_QPS_SQD,
        IBV_QPS_SQE = qp_state::IBV_QPS_SQE,
        IBV_QPS_ERR = qp_state::IBV_QPS_ERR,
        IBV_QPS_UNKNOWN = qp_state::IBV_QPS_UNKNOWN,
        IBV_WR_RDMA_WRITE = wr_opcode::IBV_WR_RDMA_WRITE,
        IBV_WR_RDMA_WRITE_WITH_IMM = wr_opcode::IBV_WR_RDMA_WRITE_WITH_IMM,
        IBV_WR_SEND = wr_opcode::IBV_WR_SEND,
        IBV_WR_SEND_WITH_IMM = wr_opcode::IBV_WR_SEND_WITH_IMM,
        IBV_WR_RDMA_READ = wr_opcode::IBV_WR_RDMA_READ,
        IBV_WR_ATOMIC_CMP_AND_SWP = wr_opcode::IBV_WR_ATOMIC_CMP_AND_SWP,
        IBV_WR_ATOMIC_FETCH_AND_ADD = wr_opcode::IBV_WR_ATOMIC_FETCH_AND_ADD,
        IBV_SEND_FENCE = send_flags::IBV_SEND_FENCE,
        IBV_SEND_SIGNALED = send_flags::IBV_SEND_SIGNALED,
        IBV_SEND_SOLICITED = send_flags::IBV_SEND_SOLICITED,
        IBV_SEND_INLINE = send_flags::IBV_SEND_INLINE,
        IBV_SEND_IP_CSUM = send_flags::IBV_SEND_IP_CSUM,
        IBV_QP_EX_WITH_RDMA_WRITE = send_ops::IBV_QP_EX_WITH_RDMA_WRITE,
        IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM = send_ops::IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM,
    ));
    v
}

fn mrc_checks() -> Vec<Check> {
    let mut v = Vec::new();
    v.extend(size!("struct mrc_device_attr", mrc_device_attr));
    v.extend(offsets!(
        "struct mrc_device_attr",
        mrc_device_attr,
        mrc_protocol_version,
        wimm_attr.max_wimm,
        wimm_attr.max_wimm_dest,
        mpr_attr.max_mpr,
        mpr_attr.mpr_resolution,
        qp_attr.max_qp_hint,
        cap
    ));
    v.extend(size!("struct mrc_context_attr", mrc_context_attr));
    v.extend(offsets!(
        "struct mrc_context_attr",
        mrc_context_attr,
        mrc_api_version_used,
        mrc_vendor_api_version_used
    ));
    v.extend(size!("struct mrc_qp_hint_attr", mrc_qp_hint_attr));
    v.extend(offsets!(
        "struct mrc_qp_hint_attr",
        mrc_qp_hint_attr,
        num_qps_per_peer,
        num_send_peers,
        num_remote_recv_peers,
        vendor_cfg
    ));
    v.extend(size!("struct mrc_qp_hint_init_attr", mrc_qp_hint_init_attr));
    v.extend(size!("struct mrc_qp_init_attr", mrc_qp_init_attr));
    v.extend(offsets!(
        "struct mrc_qp_init_attr",
        mrc_qp_init_attr,
        qp_context,
        send_cq,
        recv_cq,
        cap,
        sq_sig_all,
        pd,
        send_ops_flags,
        protocol_version
    ));
    v.extend(size!("struct mrc_qp_attr", mrc_qp_attr));
    v.extend(offsets!(
        "struct mrc_qp_attr",
        mrc_qp_attr,
        mpr.mpr,
        mpr.mpr_dest,
        wimm.max_wimm,
        wimm.max_wimm_dest,
        timeout,
        profile.ev_profile_id,
        profile.cc_profile_id,
        retry.linear_cnt,
        retry.exp_cnt,
        qp_hint,
        cap,
        vendor_cfg
    ));
    v.extend(size!("struct mrc_async_event", mrc_async_event));
    v.extend(offsets!(
        "struct mrc_async_event",
        mrc_async_event,
        element,
        event_type
    ));
    v.extend(values!(
        MRC_API_CURRENT_VERSION = MRC_API_CURRENT_VERSION,
        MRC_API_LAST_SUPPORTED_VERSION = MRC_API_LAST_SUPPORTED_VERSION,
        MRC_VENDOR_API_CURRENT_VERSION = MRC_VENDOR_API_CURRENT_VERSION,
        MRC_VENDOR_API_LAST_SUPPORTED_VERSION = MRC_VENDOR_API_LAST_SUPPORTED_VERSION,
        MRC_API_VER_LATEST = MRC_API_VER_LATEST,
        MRC_MAX_VENDOR_CFG_SIZE = MRC_MAX_VENDOR_CFG_SIZE,
        MRC_PROTOCOL_VERSION_0 = MRC_PROTOCOL_VERSION_0,
        MRC_PROTOCOL_VERSION_1 = MRC_PROTOCOL_VERSION_1,
        MRC_DEVICE_CAP_TRIM_NACK = device_cap::MRC_DEVICE_CAP_TRIM_NACK,
        MRC_DEVICE_CAP_DYNAMIC_MPR = device_cap::MRC_DEVICE_CAP_DYNAMIC_MPR,
        MRC_DEVICE_CAP_SVC_TIME = device_cap::MRC_DEVICE_CAP_SVC_TIME,
        MRC_QP_HINT_NUM_QPS_PER_PEER = hint_mask::MRC_QP_HINT_NUM_QPS_PER_PEER,
        MRC_QP_HINT_NUM_SEND_PEERS = hint_mask::MRC_QP_HINT_NUM_SEND_PEERS,
        MRC_QP_HINT_NUM_REMOTE_RECV_PEERS = hint_mask::MRC_QP_HINT_NUM_REMOTE_RECV_PEERS,
        MRC_QP_HINT_VENDOR_CFG = hint_mask::MRC_QP_HINT_VENDOR_CFG,
        MRC_QP_MAX_WIMM = qp_mask::MRC_QP_MAX_WIMM,
        MRC_QP_MAX_WIMM_DEST = qp_mask::MRC_QP_MAX_WIMM_DEST,
        MRC_QP_MPR = qp_mask::MRC_QP_MPR,
        MRC_QP_MPR_DEST = qp_mask::MRC_QP_MPR_DEST,
        MRC_QP_TIMEOUT = qp_mask::MRC_QP_TIMEOUT,
        MRC_QP_EV_PROFILE_ID = qp_mask::MRC_QP_EV_PROFILE_ID,
        MRC_QP_CC_PROFILE_ID = qp_mask::MRC_QP_CC_PROFILE_ID,
        MRC_QP_HINT = qp_mask::MRC_QP_HINT,
        MRC_QP_RETRY_CNT = qp_mask::MRC_QP_RETRY_CNT,
        MRC_QP_CAP = qp_mask::MRC_QP_CAP,
        MRC_QP_VENDOR_CFG = qp_mask::MRC_QP_VENDOR_CFG,
        MRC_QP_CAP_TRIM_NACK_DEST_UNSUPPORTED = qp_cap::MRC_QP_CAP_TRIM_NACK_DEST_UNSUPPORTED,
        MRC_QP_CAP_DYNAMIC_MPR = qp_cap::MRC_QP_CAP_DYNAMIC_MPR,
        MRC_QP_CAP_SVC_TIME_DEST_UNSUPPORTED = qp_cap::MRC_QP_CAP_SVC_TIME_DEST_UNSUPPORTED,
    ));
    v
}

fn ctl_checks() -> Vec<Check> {
    let mut v = Vec::new();
    v.extend(size!("struct mrc_ctl_device_attr", mrc_ctl_device_attr));
    v.extend(offsets!(
        "struct mrc_ctl_device_attr",
        mrc_ctl_device_attr,
        mrc_ctl_protocol_version,
        ev.ev_max_fmt_profiles,
        ev.ev_max_profiles,
        ev.ev_max_count,
        ev.ev_free_count,
        ev.ev_max_count_profile,
        ev.ev_count_align,
        ev.ev_max_width,
        ev.ev_fmt_mode_mask,
        ev.ev_mode_mask,
        ev.ev_op_max_entries,
        cc.cc_max_profiles,
        cc.algorithms,
        phy_port_mask,
        opt_attr
    ));
    v.extend(size!("struct mrc_ctl_port_attr", mrc_ctl_port_attr));
    v.extend(size!("struct mrc_ctl_ev_fmt_field", mrc_ctl_ev_fmt_field));
    v.extend(size!(
        "struct mrc_ctl_ev_fmt_profile_attr",
        mrc_ctl_ev_fmt_profile_attr
    ));
    v.extend(offsets!(
        "struct mrc_ctl_ev_fmt_profile_attr",
        mrc_ctl_ev_fmt_profile_attr,
        profile_state,
        cur_profile_state,
        ev_fmt_mode,
        ev_fmt_op.op,
        ev_fmt_op.fmt_fields,
        ev_fmt_op.fmt_field_count,
        vendor_cfg
    ));
    v.extend(size!("struct mrc_ctl_ev", mrc_ctl_ev));
    v.extend(offsets!("struct mrc_ctl_ev", mrc_ctl_ev, val, port));
    v.extend(size!("struct mrc_ctl_ev_field", mrc_ctl_ev_field));
    v.extend(offsets!(
        "struct mrc_ctl_ev_field",
        mrc_ctl_ev_field,
        width,
        init_val,
        min_val,
        max_val,
        mask
    ));
    v.extend(size!("struct mrc_ctl_ev_op_entry", mrc_ctl_ev_op_entry));
    v.extend(offsets!(
        "struct mrc_ctl_ev_op_entry",
        mrc_ctl_ev_op_entry,
        ev,
        ev_new,
        state,
        flags
    ));
    v.extend(size!(
        "struct mrc_ctl_ev_profile_attr",
        mrc_ctl_ev_profile_attr
    ));
    v.extend(offsets!(
        "struct mrc_ctl_ev_profile_attr",
        mrc_ctl_ev_profile_attr,
        profile_state,
        cur_profile_state,
        ev_mode,
        ev_fmt_profile_id,
        ev_count,
        ev_min_active,
        ev_event_mask,
        ev_op.op,
        ev_op.entries,
        ev_op.entry_count,
        ev_fields_op.op,
        ev_fields_op.fields,
        ev_fields_op.field_count,
        vendor_cfg
    ));
    v.extend(size!(
        "struct mrc_ctl_cc_profile_attr",
        mrc_ctl_cc_profile_attr
    ));
    v.extend(offsets!(
        "struct mrc_ctl_cc_profile_attr",
        mrc_ctl_cc_profile_attr,
        profile_state,
        cur_profile_state,
        algorithm,
        cc_config,
        vendor_cfg
    ));
    v.extend(size!("struct mrc_ctl_cc_nscc_cfg", mrc_ctl_cc_nscc_cfg));
    v.extend(offsets!(
        "struct mrc_ctl_cc_nscc_cfg",
        mrc_ctl_cc_nscc_cfg,
        disable_qa,
        adjust_bytes_threshold,
        adjust_period_threshold,
        base_rtt,
        eta,
        fi,
        fi_scale,
        gamma,
        max_md_jump,
        max_cwnd,
        qa_gate,
        qa_threshold,
        target_delay
    ));
    v.extend(size!("struct mrc_ctl_ev_event", mrc_ctl_ev_event));
    v.extend(offsets!(
        "struct mrc_ctl_ev_event",
        mrc_ctl_ev_event,
        profile_id,
        ev,
        drop_count,
        state
    ));
    v.extend(size!("struct mrc_ctl_ep_req", mrc_ctl_ep_req));
    v.extend(offsets!(
        "struct mrc_ctl_ep_req",
        mrc_ctl_ep_req,
        req_id,
        sgid,
        dgid,
        ev_fmt_mode,
        req_ev,
        op.port_status_update.port_status
    ));
    v.extend(size!("struct mrc_ctl_ep_rsp", mrc_ctl_ep_rsp));
    v.extend(offsets!(
        "struct mrc_ctl_ep_rsp",
        mrc_ctl_ep_rsp,
        req_id,
        port,
        rtt,
        adj_svc_time
    ));
    v.extend(values!(
        MRC_CTL_API_CURRENT_VERSION = MRC_CTL_API_CURRENT_VERSION,
        MRC_CTL_API_LAST_SUPPORTED_VERSION = MRC_CTL_API_LAST_SUPPORTED_VERSION,
        MRC_CTL_VENDOR_API_CURRENT_VERSION = MRC_CTL_VENDOR_API_CURRENT_VERSION,
        MRC_CTL_VENDOR_API_LAST_SUPPORTED_VERSION = MRC_CTL_VENDOR_API_LAST_SUPPORTED_VERSION,
        MRC_CTL_MAX_VENDOR_CFG_SIZE = MRC_CTL_MAX_VENDOR_CFG_SIZE,
        MRC_CTL_EV_MAX_BYTES = MRC_CTL_EV_MAX_BYTES,
        MRC_CTL_PROTOCOL_VERSION_1 = MRC_CTL_PROTOCOL_VERSION_1,
        MRC_CTL_PROFILE_INIT = profile_state::MRC_CTL_PROFILE_INIT,
        MRC_CTL_PROFILE_OFFLINE = profile_state::MRC_CTL_PROFILE_OFFLINE,
        MRC_CTL_PROFILE_ONLINE = profile_state::MRC_CTL_PROFILE_ONLINE,
        MRC_CTL_OPT_CAP_EV_PROFILE_MODIFY_ONLINE =
            attr_opt::MRC_CTL_OPT_CAP_EV_PROFILE_MODIFY_ONLINE,
        MRC_CTL_OPT_CAP_CC_PROFILE_MODIFY_ONLINE =
            attr_opt::MRC_CTL_OPT_CAP_CC_PROFILE_MODIFY_ONLINE,
        MRC_CTL_OPT_CAP_EV_EVENT = attr_opt::MRC_CTL_OPT_CAP_EV_EVENT,
        MRC_CTL_OPT_CAP_EV_EXPLICIT_RANGE = attr_opt::MRC_CTL_OPT_CAP_EV_EXPLICIT_RANGE,
        MRC_CTL_OPT_CAP_EV_EVENT_PRECISE_DROP_CNT =
            attr_opt::MRC_CTL_OPT_CAP_EV_EVENT_PRECISE_DROP_CNT,
        MRC_CTL_OPT_CAP_EP_OP_EV_PROBE = attr_opt::MRC_CTL_OPT_CAP_EP_OP_EV_PROBE,
        MRC_CTL_PORT_ADMIN_DISABLED = port_admin::MRC_CTL_PORT_ADMIN_DISABLED,
        MRC_CTL_PORT_ADMIN_ENABLED = port_admin::MRC_CTL_PORT_ADMIN_ENABLED,
        MRC_CTL_PORT_ADMIN_STATE = MRC_CTL_PORT_ADMIN_STATE,
        MRC_CTL_EV_FMT_MODE_STEV = fmt_mode::MRC_CTL_EV_FMT_MODE_STEV,
        MRC_CTL_EV_FMT_MODE_SRV6 = fmt_mode::MRC_CTL_EV_FMT_MODE_SRV6,
        MRC_CTL_EV_FMT_MODE_UDP = fmt_mode::MRC_CTL_EV_FMT_MODE_UDP,
        MRC_CTL_EV_FMT_OP_MODIFY_FIELDS = fmt_op::MRC_CTL_EV_FMT_OP_MODIFY_FIELDS,
        MRC_CTL_EV_FMT_OP_QUERY_FIELDS = fmt_op::MRC_CTL_EV_FMT_OP_QUERY_FIELDS,
        MRC_CTL_EV_FMT_PROFILE_STATE = fmt_mask::MRC_CTL_EV_FMT_PROFILE_STATE,
        MRC_CTL_EV_FMT_PROFILE_CUR_STATE = fmt_mask::MRC_CTL_EV_FMT_PROFILE_CUR_STATE,
        MRC_CTL_EV_FMT_PROFILE_MODE = fmt_mask::MRC_CTL_EV_FMT_PROFILE_MODE,
        MRC_CTL_EV_FMT_PROFILE_OP = fmt_mask::MRC_CTL_EV_FMT_PROFILE_OP,
        MRC_CTL_EV_FMT_VENDOR_CFG = fmt_mask::MRC_CTL_EV_FMT_VENDOR_CFG,
        MRC_CTL_EV_GOOD = ev_state::MRC_CTL_EV_GOOD,
        MRC_CTL_EV_ASSUMED_BAD = ev_state::MRC_CTL_EV_ASSUMED_BAD,
        MRC_CTL_EV_DENIED = ev_state::MRC_CTL_EV_DENIED,
        MRC_CTL_EV_UNKNOWN = ev_state::MRC_CTL_EV_UNKNOWN,
        MRC_CTL_EV_MODE_AUTO = ev_mode::MRC_CTL_EV_MODE_AUTO,
        MRC_CTL_EV_MODE_EXP = ev_mode::MRC_CTL_EV_MODE_EXP,
        MRC_CTL_EV_MODE_GEN = ev_mode::MRC_CTL_EV_MODE_GEN,
        MRC_CTL_EV_OP_REPLACE_EV = ev_op::MRC_CTL_EV_OP_REPLACE_EV,
        MRC_CTL_EV_OP_MODIFY_EV_STATE = ev_op::MRC_CTL_EV_OP_MODIFY_EV_STATE,
        MRC_CTL_EV_OP_QUERY_EV_STATE = ev_op::MRC_CTL_EV_OP_QUERY_EV_STATE,
        MRC_CTL_EV_OP_QUERY_EV_ARRAY = ev_op::MRC_CTL_EV_OP_QUERY_EV_ARRAY,
        MRC_CTL_EV_FIELDS_OP_MODIFY_FIELDS = ev_fields_op::MRC_CTL_EV_FIELDS_OP_MODIFY_FIELDS,
        MRC_CTL_EV_FIELDS_OP_QUERY_FIELDS = ev_fields_op::MRC_CTL_EV_FIELDS_OP_QUERY_FIELDS,
        MRC_CTL_EV_PROFILE_STATE = ev_mask::MRC_CTL_EV_PROFILE_STATE,
        MRC_CTL_EV_PROFILE_CUR_STATE = ev_mask::MRC_CTL_EV_PROFILE_CUR_STATE,
        MRC_CTL_EV_PROFILE_MODE = ev_mask::MRC_CTL_EV_PROFILE_MODE,
        MRC_CTL_EV_PROFILE_FMT_ID = ev_mask::MRC_CTL_EV_PROFILE_FMT_ID,
        MRC_CTL_EV_PROFILE_COUNT = ev_mask::MRC_CTL_EV_PROFILE_COUNT,
        MRC_CTL_EV_PROFILE_MIN_ACTIVE = ev_mask::MRC_CTL_EV_PROFILE_MIN_ACTIVE,
        MRC_CTL_EV_PROFILE_EVENT_MASK = ev_mask::MRC_CTL_EV_PROFILE_EVENT_MASK,
        MRC_CTL_EV_PROFILE_EV_OP = ev_mask::MRC_CTL_EV_PROFILE_EV_OP,
        MRC_CTL_EV_PROFILE_EV_FIELDS_OP = ev_mask::MRC_CTL_EV_PROFILE_EV_FIELDS_OP,
        MRC_CTL_EV_PROFILE_VENDOR_CFG = ev_mask::MRC_CTL_EV_PROFILE_VENDOR_CFG,
        MRC_CTL_EV_OP_F_ALL_COPIES = MRC_CTL_EV_OP_F_ALL_COPIES,
        MRC_CTL_CC_PROFILE_STATE = cc_mask::MRC_CTL_CC_PROFILE_STATE,
        MRC_CTL_CC_PROFILE_CUR_STATE = cc_mask::MRC_CTL_CC_PROFILE_CUR_STATE,
        MRC_CTL_CC_PROFILE_ALGORITHM = cc_mask::MRC_CTL_CC_PROFILE_ALGORITHM,
        MRC_CTL_CC_PROFILE_CONFIG = cc_mask::MRC_CTL_CC_PROFILE_CONFIG,
        MRC_CTL_CC_PROFILE_VENDOR_CFG = cc_mask::MRC_CTL_CC_PROFILE_VENDOR_CFG,
        MRC_CTL_EP_OP_EV_PROBE = ep_op::MRC_CTL_EP_OP_EV_PROBE,
        MRC_CTL_EP_OP_PORT_STATUS_UPDATE = ep_op::MRC_CTL_EP_OP_PORT_STATUS_UPDATE,
    ));
    v
}

/// Compiles a program printing each check's C value (one per line), runs it, and returns the
/// values.
fn c_values(ocp: &std::path::Path, name: &str, defines: &[&str], checks: &[Check]) -> Vec<u64> {
    let dir = common::scratch(name);
    let mut src = String::from(
        "#include <stddef.h>\n#include <stdio.h>\n#include <mrc_ctl.h>\nint main(void) {\n",
    );
    for c in checks {
        src.push_str(&format!(
            "  printf(\"%llu\\n\", (unsigned long long)({}));\n",
            c.c_expr
        ));
    }
    src.push_str("  return 0;\n}\n");
    let c_file = dir.join("layout.c");
    std::fs::write(&c_file, src).expect("write layout.c");
    let exe = dir.join("layout");
    let mut cc = Command::new("cc");
    cc.args(["-std=gnu11", "-Wall", "-Werror", "-I"]).arg(ocp);
    for d in defines {
        cc.arg(format!("-D{d}"));
    }
    common::run_ok(cc.arg("-o").arg(&exe).arg(&c_file));
    let out = common::run_ok(&mut Command::new(&exe));
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .lines()
        .map(|l| l.parse().expect("a number per line"))
        .collect()
}

fn compare(name: &str, defines: &[&str], checks: Vec<Check>) {
    let Some(ocp) = common::c_toolchain() else {
        return;
    };
    let got = c_values(&ocp, name, defines, &checks);
    assert_eq!(got.len(), checks.len(), "one line per check");
    let wrong: Vec<String> = checks
        .iter()
        .zip(&got)
        .filter(|(c, g)| c.rust != **g)
        .map(|(c, g)| format!("{}: C {g}, library {}", c.c_expr, c.rust))
        .collect();
    assert!(
        wrong.is_empty(),
        "{} of {} checks differ:\n{}",
        wrong.len(),
        checks.len(),
        wrong.join("\n")
    );
    println!("{} layout checks match the headers", checks.len());
}

#[test]
fn verbs_types_match_rdma_core_44() {
    compare("layout-verbs", &[], verbs_checks());
}

#[test]
fn application_api_types_match_mrc_h() {
    compare("layout-mrc", &[], mrc_checks());
}

#[test]
fn controller_api_types_match_mrc_ctl_h() {
    compare("layout-ctl", &[], ctl_checks());
}

/// A controller built for control API 1.0.0 sees `struct mrc_ctl_ev_event` without `state`:
/// the library writes events of that size to contexts that declared the older API.
#[test]
fn ev_event_of_control_api_1_0_0_is_the_prefix() {
    let checks = vec![
        Check {
            c_expr: "sizeof(struct mrc_ctl_ev_event)".into(),
            rust: MRC_CTL_EV_EVENT_V1_0_0_BYTES as u64,
        },
        Check {
            c_expr: "offsetof(struct mrc_ctl_ev_event, drop_count)".into(),
            rust: offset_of!(mrc_ctl_ev_event, drop_count) as u64,
        },
    ];
    compare(
        "layout-ctl-1.0.0",
        &[
            "MRC_CTL_API_VER_USED=MRC_CTL_API_VER(1,0,0)",
            "MRC_API_VER_USED=MRC_API_VER(1,0,0)",
        ],
        checks,
    );
}
