//! MRC devices as libibverbs shows them: discovery, names, shared opens, and the port, GID and
//! device attributes of `ibv_query_port` / `ibv_query_gid` / `ibv_query_device`.
//!
//! # Discovery
//! The devices are the vfio-user sockets in `$MRC_VFIO_USER_DIR` (the `--socket-dir` of
//! `mrc-sim serve`), sorted by name; socket `i` is device `mrc{i}`. Without the variable there
//! is no device (`ibv_get_device_list` returns an empty list; opening says so, `ENODEV`).
//!
//! # Opens
//! A process opens each device once: later `ibv_open_device` calls of the same device share
//! it (bring-up resets a device, and one process owns it: its applications and its controller
//! share it). The device closes with its last `ibv_context`.
//!
//! # Addresses
//! An MRC port is a RoCE v2 port with one address, the NIC's IPv6 address. Its GID table has
//! [`GID_TBL_LEN`] entries that all hold that address, so programs that take index 3 (the
//! RoCE v2 IPv4-mapped slot on mlx5 NICs, OCP's benchmark's default) and programs that take 0
//! both name the NIC.

use std::ffi::c_char;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use mrc_abi::device::wqe::MAX_SEND_SGE;
use mrc_driver::api::{Context, Role};
use mrc_driver::device::{Device, PortInfo};

use crate::ctypes::verbs::*;
use crate::error::{CapiError, Result, ENODEV};
use crate::events::EventHub;

/// The environment variable naming the directory of device sockets.
pub const DEVICE_DIR_ENV: &str = "MRC_VFIO_USER_DIR";
/// GID table entries per port (all the NIC's address).
pub const GID_TBL_LEN: u8 = 4;
/// The MTU this library reports for MRC ports.
pub const PORT_MTU: u32 = mtu::IBV_MTU_4096;

/// The device directory, if configured.
pub fn device_dir() -> Option<PathBuf> {
    std::env::var_os(DEVICE_DIR_ENV)
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
}

/// The device sockets, in device-number order.
///
/// # Errors
/// `ENODEV` when no directory is configured; the directory cannot be read.
pub fn list() -> Result<Vec<PathBuf>> {
    let dir = device_dir().ok_or_else(|| {
        CapiError::new(
            ENODEV,
            format!(
                "no MRC device directory: set {DEVICE_DIR_ENV} to the socket directory of \
                 `mrc-sim serve` (its --socket-dir)"
            ),
        )
    })?;
    mrc_driver::sys::vfio_user::list_devices(&dir).map_err(|e| {
        CapiError::new(
            ENODEV,
            format!(
                "listing MRC devices in {} ({DEVICE_DIR_ENV}): {e}",
                dir.display()
            ),
        )
    })
}

/// Writes `s` NUL-terminated into `out` (truncated to fit).
pub fn c_string(out: &mut [c_char], s: &str) {
    out.fill(0);
    let room = out.len().saturating_sub(1);
    for (o, b) in out.iter_mut().zip(s.bytes().take(room)) {
        *o = b as c_char;
    }
}

/// A device as one `ibv_get_device_list` named it.
pub struct DeviceEntry {
    /// `mrc{index}`.
    pub name: String,
    /// Its socket.
    pub path: PathBuf,
    /// The `struct ibv_device` callers hold (never freed: device structs outlive lists).
    pub ibv: crate::ffi::CBox<ibv_device>,
}

impl DeviceEntry {
    /// The entry of socket `path` as device number `index`.
    pub fn new(index: usize, path: &Path) -> DeviceEntry {
        let name = format!("mrc{index}");
        let mut d = ibv_device {
            _ops: _ibv_device_ops {
                _dummy1: std::ptr::null_mut(),
                _dummy2: std::ptr::null_mut(),
            },
            node_type: IBV_NODE_CA,
            transport_type: IBV_TRANSPORT_IB,
            name: [0; IBV_SYSFS_NAME_MAX],
            dev_name: [0; IBV_SYSFS_NAME_MAX],
            dev_path: [0; IBV_SYSFS_PATH_MAX],
            ibdev_path: [0; IBV_SYSFS_PATH_MAX],
        };
        c_string(&mut d.name, &name);
        c_string(&mut d.dev_name, &format!("vfio-user-{name}"));
        c_string(&mut d.dev_path, &path.to_string_lossy());
        c_string(&mut d.ibdev_path, &path.to_string_lossy());
        DeviceEntry {
            name,
            path: path.to_owned(),
            ibv: crate::ffi::CBox::new(d),
        }
    }
}

/// A device this process opened: shared by its `ibv_context`s.
pub struct OpenDevice {
    /// `mrc{i}`.
    pub name: String,
    /// Its socket.
    pub path: PathBuf,
    /// The driver's application context on it.
    pub app: Context,
    /// Async events, EV events and probe results, routed to their consumers.
    pub events: EventHub,
    /// The controller's profiles on this device.
    pub ctl: crate::ctl::DeviceCtl,
}

impl OpenDevice {
    /// The driver's device.
    pub fn dev(&self) -> &Arc<Device> {
        self.app.device()
    }
}

/// The devices this process has open, by socket.
static OPEN: Mutex<Vec<(PathBuf, Weak<OpenDevice>)>> = Mutex::new(Vec::new());

/// Opens `entry`'s device, or shares the process's open of it.
///
/// # Errors
/// `ENODEV` when nothing serves the socket (refused, silent, closed); bringing the device up
/// (`EIO`, `EPROTO` for an ABI mismatch), with the driver's message.
pub fn open(entry: &DeviceEntry) -> Result<Arc<OpenDevice>> {
    let mut open = OPEN.lock().unwrap_or_else(|p| p.into_inner());
    open.retain(|(_, w)| w.strong_count() > 0);
    if let Some(d) = open
        .iter()
        .find(|(p, _)| *p == entry.path)
        .and_then(|(_, w)| w.upgrade())
    {
        return Ok(d);
    }
    let app = Context::open_vfio_user(&entry.path, Role::Application).map_err(|e| {
        // Nobody serving the socket (refused, silent, gone) is no device, as a missing
        // /dev/infiniband node is for verbs.
        let no_device = matches!(
            e,
            mrc_driver::Error::Sys(_) | mrc_driver::Error::DeviceGone { .. }
        );
        let mut c = CapiError::from(e);
        if no_device {
            c.errno = ENODEV;
        }
        c.message = format!("{} ({}): {}", entry.name, entry.path.display(), c.message);
        c
    })?;
    let d = Arc::new(OpenDevice {
        name: entry.name.clone(),
        path: entry.path.clone(),
        app,
        events: EventHub::default(),
        ctl: crate::ctl::DeviceCtl::default(),
    });
    open.push((entry.path.clone(), Arc::downgrade(&d)));
    Ok(d)
}

/// Checks a 1-based port number.
///
/// # Errors
/// `EINVAL` for 0 or a port the device does not have.
pub fn check_port(dev: &Device, port: u32) -> Result<u8> {
    let n = dev.attrs().num_ports;
    if port == 0 || port > n || port > 255 {
        return Err(CapiError::inval(format!(
            "port {port} is not a port of {} (1..={n})",
            dev.bdf()
        )));
    }
    Ok(port as u8)
}

/// The device's state of 1-based `port`.
///
/// # Errors
/// A bad port, device errors.
pub fn port_info(dev: &Device, port: u32) -> Result<PortInfo> {
    let p = check_port(dev, port)?;
    Ok(dev.query_port(p - 1)?)
}

/// `(active_width, active_speed)` in the IB encoding for a link of `mbps`.
fn width_speed(mbps: u32) -> (u8, u8) {
    const W1X: u8 = 1;
    const W4X: u8 = 2;
    const W8X: u8 = 4;
    const W2X: u8 = 16;
    const EDR: u8 = 32;
    const HDR: u8 = 64;
    const NDR: u8 = 128;
    const SDR: u8 = 1;
    match mbps {
        800_000.. => (W8X, NDR),
        400_000.. => (W4X, NDR),
        200_000.. => (W2X, NDR),
        100_000.. => (W1X, NDR),
        50_000.. => (W1X, HDR),
        25_000.. => (W1X, EDR),
        _ => (W1X, SDR),
    }
}

/// `ibv_query_port` for 1-based `port`: disabled ports are `IBV_PORT_DOWN` (as `mrc_ctl.h`
/// asks), ports without link are `IBV_PORT_DOWN` too.
///
/// # Errors
/// As [`port_info`].
pub fn port_attr(dev: &Device, port: u32) -> Result<ibv_port_attr> {
    let p = port_info(dev, port)?;
    let (width, speed) = if p.oper_up {
        width_speed(p.speed_mbps)
    } else {
        (0, 0)
    };
    Ok(ibv_port_attr {
        state: if p.oper_up {
            port_state::IBV_PORT_ACTIVE
        } else {
            port_state::IBV_PORT_DOWN
        },
        max_mtu: PORT_MTU,
        active_mtu: PORT_MTU,
        gid_tbl_len: GID_TBL_LEN.into(),
        port_cap_flags: IBV_PORT_IP_BASED_GIDS,
        max_msg_sz: u32::MAX,
        pkey_tbl_len: 1,
        active_width: width,
        active_speed: speed,
        // IB PortPhysicalState: 5 LinkUp, 2 Polling (enabled, no link), 3 Disabled.
        phys_state: match (p.admin_up, p.oper_up) {
            (_, true) => 5,
            (true, false) => 2,
            (false, false) => 3,
        },
        link_layer: IBV_LINK_LAYER_ETHERNET,
        ..Default::default()
    })
}

/// GID `index` of 1-based `port`.
///
/// # Errors
/// A bad port or index.
pub fn gid(dev: &Device, port: u32, index: i64) -> Result<ibv_gid> {
    check_port(dev, port)?;
    if !(0..i64::from(GID_TBL_LEN)).contains(&index) {
        return Err(CapiError::inval(format!(
            "GID index {index} is outside the table of port {port} (0..{GID_TBL_LEN})"
        )));
    }
    Ok(ibv_gid {
        raw: dev.attrs().gid,
    })
}

/// The node GUID: the low 8 bytes of the NIC's address (network order).
pub fn node_guid(dev: &Device) -> u64 {
    let g = dev.attrs().gid;
    u64::from_ne_bytes([g[8], g[9], g[10], g[11], g[12], g[13], g[14], g[15]])
}

fn clamp(v: u32) -> i32 {
    i32::try_from(v).unwrap_or(i32::MAX)
}

/// `ibv_query_device`.
pub fn device_attr(dev: &Device) -> ibv_device_attr {
    let a = dev.attrs();
    let fw = a.limits.fw_version;
    let mut d = ibv_device_attr {
        fw_ver: [0; 64],
        node_guid: node_guid(dev),
        sys_image_guid: node_guid(dev),
        max_mr_size: u64::MAX,
        page_size_cap: 4096,
        vendor_id: a.device_id >> 16,
        vendor_part_id: a.device_id & 0xffff,
        hw_ver: a.abi_version.major.into(),
        max_qp: clamp(a.max_qps),
        max_qp_wr: clamp(a.limits.max_qp_entries),
        device_cap_flags: 0,
        max_sge: MAX_SEND_SGE as i32,
        max_sge_rd: 0,
        max_cq: clamp(a.max_cqs),
        max_cqe: clamp(a.limits.max_cq_entries),
        max_mr: clamp(a.limits.max_mrs),
        max_pd: clamp(a.limits.max_pds),
        max_qp_rd_atom: 0,
        max_ee_rd_atom: 0,
        max_res_rd_atom: 0,
        max_qp_init_rd_atom: 0,
        max_ee_init_rd_atom: 0,
        atomic_cap: 0,
        max_ee: 0,
        max_rdd: 0,
        max_mw: 0,
        max_raw_ipv6_qp: 0,
        max_raw_ethy_qp: 0,
        max_mcast_grp: 0,
        max_mcast_qp_attach: 0,
        max_total_mcast_qp_attach: 0,
        max_ah: 0,
        max_fmr: 0,
        max_map_per_fmr: 0,
        max_srq: 0,
        max_srq_wr: 0,
        max_srq_sge: 0,
        max_pkeys: 1,
        local_ca_ack_delay: 0,
        phys_port_cnt: a.num_ports.min(255) as u8,
    };
    c_string(
        &mut d.fw_ver,
        &format!("{}.{}.{}", fw >> 24, (fw >> 16) & 0xff, fw & 0xffff),
    );
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_nul_terminated_and_truncated() {
        let mut b = [1 as c_char; 4];
        c_string(&mut b, "mrc12");
        assert_eq!(b, [b'm' as c_char, b'r' as c_char, b'c' as c_char, 0]);
        let e = DeviceEntry::new(3, Path::new("/tmp/s/nic03.sock"));
        assert_eq!(e.name, "mrc3");
    }

    #[test]
    fn link_speeds_use_the_ib_encoding() {
        assert_eq!(width_speed(200_000), (16, 128));
        assert_eq!(width_speed(100_000), (1, 128));
        assert_eq!(width_speed(400_000), (2, 128));
        assert_eq!(width_speed(1_000), (1, 1));
    }
}
