//! The libibverbs calls MRC programs make, for MRC devices: device lists and names, open and
//! close, device / port / GID / P_Key queries, protection domains and memory registration.
//!
//! Objects are C structs the caller reads (`ibv_context`, `ibv_pd`, `ibv_mr`); the library
//! keeps the Rust object behind each and looks it up by the struct's address
//! ([`crate::handle::AddrMap`]). A parent cannot be freed while it has children (`EBUSY`):
//! contexts with PDs or MRC contexts, PDs with MRs or QPs.

use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use mrc_driver::api::{Access, MemoryRegion, ProtectionDomain};

use crate::ctypes::verbs::*;
use crate::device::{self, DeviceEntry, OpenDevice};
use crate::error::{CapiError, Result, EBUSY, EOPNOTSUPP};
use crate::ffi::CBox;
use crate::state::{lock, TABLES};

/// Counts the children of an object; the object cannot be destroyed while any is live.
#[derive(Debug, Default)]
pub struct Users(AtomicUsize);

impl Users {
    /// One more child.
    pub fn add(&self) {
        self.0.fetch_add(1, Ordering::AcqRel);
    }
    /// One child fewer.
    pub fn sub(&self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
    /// Live children.
    pub fn count(&self) -> usize {
        self.0.load(Ordering::Acquire)
    }
    /// `EBUSY` naming `what` and its `children` while any is live.
    ///
    /// # Errors
    /// `EBUSY`.
    pub fn check_idle(&self, what: &str, children: &str) -> Result<()> {
        match self.count() {
            0 => Ok(()),
            n => Err(CapiError::new(
                EBUSY,
                format!("{what} still has {n} {children}; destroy them first"),
            )),
        }
    }
}

/// Every device struct ever handed out (they outlive the lists that named them).
static ENTRIES: Mutex<Vec<Arc<DeviceEntry>>> = Mutex::new(Vec::new());

/// A `NULL`-terminated array from `ibv_get_device_list`.
pub struct DeviceList {
    /// The array.
    pub c: CBox<[*mut ibv_device]>,
}

/// `ibv_get_device_list`: the array and its length (without the NULL).
///
/// With no device directory configured the list is empty and a warning says how to configure
/// one.
///
/// # Errors
/// The directory cannot be read.
pub fn get_device_list() -> Result<(*mut *mut ibv_device, usize)> {
    let paths = match device::list() {
        Ok(p) => p,
        Err(e) if device::device_dir().is_none() => {
            crate::error::record("ibv_get_device_list", &e);
            Vec::new()
        }
        Err(e) => return Err(e),
    };
    let mut entries = lock(&ENTRIES);
    let mut ptrs: Vec<*mut ibv_device> = Vec::with_capacity(paths.len() + 1);
    for (i, p) in paths.iter().enumerate() {
        let name = format!("mrc{i}");
        let e = match entries.iter().find(|e| e.path == *p && e.name == name) {
            Some(e) => e.clone(),
            None => {
                let e = Arc::new(DeviceEntry::new(i, p));
                entries.push(e.clone());
                e
            }
        };
        ptrs.push(e.ibv.ptr());
    }
    drop(entries);
    let n = ptrs.len();
    ptrs.push(std::ptr::null_mut());
    let list = Arc::new(DeviceList {
        c: CBox::from_box(ptrs.into_boxed_slice()),
    });
    let ptr = list.c.ptr().cast::<*mut ibv_device>();
    lock(&TABLES.lists).insert(ptr as usize, list);
    Ok((ptr, n))
}

/// `ibv_free_device_list`.
///
/// # Errors
/// `EINVAL` for a pointer that is not a live list.
pub fn free_device_list(list: usize) -> Result<()> {
    lock(&TABLES.lists).remove(list, "list").map(drop)
}

/// The entry behind a `struct ibv_device *`.
///
/// # Errors
/// `EINVAL` for NULL or a pointer no list of this library returned.
pub fn entry(dev: usize) -> Result<Arc<DeviceEntry>> {
    if dev == 0 {
        return Err(CapiError::inval("device is NULL"));
    }
    lock(&ENTRIES)
        .iter()
        .find(|e| e.ibv.addr() == dev)
        .cloned()
        .ok_or_else(|| {
            CapiError::inval(format!(
                "device {dev:#x} is not an MRC device of this library's device lists"
            ))
        })
}

/// `ibv_get_device_index`: the device number.
///
/// # Errors
/// As [`entry`].
pub fn device_index(dev: usize) -> Result<i32> {
    let e = entry(dev)?;
    Ok(e.name.trim_start_matches("mrc").parse().unwrap_or(-1))
}

/// `ibv_get_device_guid`: the node GUID of a device this process has open (0 otherwise: the
/// address is learnt by opening the device, which resets it).
///
/// # Errors
/// As [`entry`].
pub fn device_guid(dev: usize) -> Result<u64> {
    let e = entry(dev)?;
    let open = lock(&TABLES.vctxs)
        .values()
        .find(|v| v.entry.ibv.addr() == e.ibv.addr())
        .map(|v| device::node_guid(v.dev.dev()));
    Ok(open.unwrap_or(0))
}

/// An open device as an `ibv_context`.
pub struct VerbsContext {
    /// The struct callers hold.
    pub c: CBox<ibv_context>,
    /// The device.
    pub dev: Arc<OpenDevice>,
    /// Its entry (for `context->device`).
    pub entry: Arc<DeviceEntry>,
    /// PDs and MRC contexts made from it.
    pub users: Users,
}

/// `ibv_open_device`.
///
/// # Errors
/// As [`entry`] and [`device::open`].
pub fn open_device(dev: usize) -> Result<*mut ibv_context> {
    let e = entry(dev)?;
    let open = device::open(&e)?;
    let vectors = open.dev().backend().interrupt_vectors();
    let c = CBox::new(ibv_context {
        device: e.ibv.ptr(),
        ops: ibv_context_ops {
            ops: [std::ptr::null_mut(); IBV_CONTEXT_OPS],
        },
        cmd_fd: -1,
        async_fd: -1,
        // Vector 0 serves the device's admin and event queues; channels take the rest.
        num_comp_vectors: vectors.saturating_sub(1).max(1) as i32,
        mutex: libc::PTHREAD_MUTEX_INITIALIZER,
        abi_compat: std::ptr::null_mut(),
    });
    let ptr = c.ptr();
    let v = Arc::new(VerbsContext {
        c,
        dev: open,
        entry: e,
        users: Users::default(),
    });
    lock(&TABLES.vctxs).insert(ptr as usize, v);
    Ok(ptr)
}

/// The context behind a `struct ibv_context *`.
///
/// # Errors
/// `EINVAL` for NULL or a pointer that is not a live context of this library.
pub fn vctx(ctx: usize) -> Result<Arc<VerbsContext>> {
    lock(&TABLES.vctxs).get(ctx, "context")
}

/// `ibv_close_device`.
///
/// # Errors
/// `EINVAL` for a bad context, `EBUSY` while it has PDs or MRC contexts.
pub fn close_device(ctx: usize) -> Result<()> {
    let mut t = lock(&TABLES.vctxs);
    let v = t.get(ctx, "context")?;
    v.users
        .check_idle("the context", "protection domains or MRC contexts")?;
    t.remove(ctx, "context").map(drop)
}

/// `ibv_query_device`.
///
/// # Errors
/// A bad context.
pub fn query_device(ctx: usize) -> Result<ibv_device_attr> {
    let v = vctx(ctx)?;
    v.dev.dev().check()?;
    Ok(device::device_attr(v.dev.dev()))
}

/// `ibv_query_port`.
///
/// # Errors
/// A bad context or port, device errors.
pub fn query_port(ctx: usize, port: u8) -> Result<ibv_port_attr> {
    device::port_attr(vctx(ctx)?.dev.dev(), port.into())
}

/// `ibv_query_gid`.
///
/// # Errors
/// A bad context, port or index.
pub fn query_gid(ctx: usize, port: u32, index: i64) -> Result<ibv_gid> {
    device::gid(vctx(ctx)?.dev.dev(), port, index)
}

/// `ibv_query_gid_ex` (`_ibv_query_gid_ex`).
///
/// # Errors
/// A bad context, port or index, flags other than 0, an entry size below the struct's.
pub fn query_gid_ex(
    ctx: usize,
    port: u32,
    index: u32,
    flags: u32,
    entry_size: usize,
) -> Result<ibv_gid_entry> {
    if flags != 0 {
        return Err(CapiError::inval(format!(
            "flags {flags:#x}: no flag is defined"
        )));
    }
    if entry_size < std::mem::size_of::<ibv_gid_entry>() {
        return Err(CapiError::inval(format!(
            "entry_size {entry_size} is below sizeof(struct ibv_gid_entry)"
        )));
    }
    let gid = query_gid(ctx, port, index.into())?;
    Ok(ibv_gid_entry {
        gid,
        gid_index: index,
        port_num: port,
        gid_type: gid_type::IBV_GID_TYPE_ROCE_V2,
        ndev_ifindex: 0,
    })
}

/// `ibv_query_pkey`: the one P_Key, the default full-membership 0xffff (network order).
///
/// # Errors
/// A bad context or port, an index other than 0.
pub fn query_pkey(ctx: usize, port: u8, index: i32) -> Result<u16> {
    device::check_port(vctx(ctx)?.dev.dev(), port.into())?;
    if index != 0 {
        return Err(CapiError::inval(format!(
            "P_Key index {index}: an MRC port has one P_Key, index 0"
        )));
    }
    Ok(0xffff_u16.to_be())
}

/// A protection domain as an `ibv_pd`.
pub struct Pd {
    /// The struct callers hold.
    pub c: CBox<ibv_pd>,
    /// Its context.
    pub vctx: Arc<VerbsContext>,
    /// The driver's PD.
    pub pd: ProtectionDomain,
    /// MRs and QPs in it.
    pub users: Users,
}

/// `ibv_alloc_pd`.
///
/// # Errors
/// A bad context, device errors.
pub fn alloc_pd(ctx: usize) -> Result<*mut ibv_pd> {
    let v = {
        let t = lock(&TABLES.vctxs);
        let v = t.get(ctx, "context")?;
        v.users.add();
        v
    };
    let pd = match v.dev.app.alloc_pd() {
        Ok(pd) => pd,
        Err(e) => {
            v.users.sub();
            return Err(e.into());
        }
    };
    let c = CBox::new(ibv_pd {
        context: v.c.ptr(),
        handle: pd.pdn(),
    });
    let ptr = c.ptr();
    let p = Arc::new(Pd {
        c,
        vctx: v,
        pd,
        users: Users::default(),
    });
    lock(&TABLES.pds).insert(ptr as usize, p);
    Ok(ptr)
}

/// The PD behind a `struct ibv_pd *`.
///
/// # Errors
/// `EINVAL` for NULL or a pointer that is not a live PD of this library.
pub fn pd(ptr: usize) -> Result<Arc<Pd>> {
    lock(&TABLES.pds).get(ptr, "pd")
}

/// `ibv_dealloc_pd`.
///
/// # Errors
/// A bad PD, `EBUSY` while it has MRs or QPs.
pub fn dealloc_pd(ptr: usize) -> Result<()> {
    let mut t = lock(&TABLES.pds);
    let p = t.get(ptr, "pd")?;
    p.users.check_idle("the protection domain", "MRs or QPs")?;
    t.remove(ptr, "pd")?;
    drop(t);
    p.vctx.users.sub();
    Ok(())
}

/// Registered memory as an `ibv_mr`.
pub struct Mr {
    /// The struct callers hold.
    pub c: CBox<ibv_mr>,
    /// Its PD.
    pub pd: Arc<Pd>,
    /// The driver's region.
    pub mr: MemoryRegion,
}

/// Access flags `ibv_reg_mr` accepts for an MRC device.
const MR_ACCESS: u32 = access::IBV_ACCESS_LOCAL_WRITE
    | access::IBV_ACCESS_REMOTE_WRITE
    | access::IBV_ACCESS_REMOTE_READ
    | access::IBV_ACCESS_OPTIONAL_RANGE;

/// Checks `ibv_reg_mr` access flags and returns the device's access rights.
///
/// Remote read is accepted and has no effect (no MRC operation reads); the optional range
/// (relaxed ordering and later hints) is a hint providers may ignore.
///
/// # Errors
/// `EINVAL` for atomic, memory window, zero-based, on-demand or huge-page access, and for
/// remote write without local write (verbs' rule).
pub fn mr_access(flags: u32) -> Result<Access> {
    let bad = flags & !MR_ACCESS;
    if bad != 0 {
        return Err(CapiError::inval(format!(
            "access {flags:#x}: bits {bad:#x} (atomic, memory windows, zero-based, on-demand or \
             huge pages) are not supported on MRC devices"
        )));
    }
    let local_write = flags & access::IBV_ACCESS_LOCAL_WRITE != 0;
    let remote_write = flags & access::IBV_ACCESS_REMOTE_WRITE != 0;
    if remote_write && !local_write {
        return Err(CapiError::inval(
            "access has IBV_ACCESS_REMOTE_WRITE without IBV_ACCESS_LOCAL_WRITE",
        ));
    }
    Ok(Access {
        local_write,
        remote_write,
    })
}

/// The pieces of an `ibv_reg_mr*` call, checked.
pub struct MrRequest {
    /// The PD.
    pub pd: Arc<Pd>,
    /// Device access rights.
    pub access: Access,
}

/// Checks an `ibv_reg_mr*` call before the memory is touched.
///
/// # Errors
/// A bad PD, NULL or empty memory, an `iova` other than `addr`, bad access flags.
pub fn check_reg_mr(
    pd_ptr: usize,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: u32,
) -> Result<MrRequest> {
    let p = pd(pd_ptr)?;
    if addr.is_null() || length == 0 {
        return Err(CapiError::inval(format!(
            "addr {addr:p}, length {length}: the region must be non-NULL and non-empty"
        )));
    }
    if iova != addr as u64 {
        return Err(CapiError::new(
            EOPNOTSUPP,
            format!(
                "iova {iova:#x} differs from addr {addr:p}: an MRC region is addressed by its \
                 own virtual address"
            ),
        ));
    }
    let access = mr_access(access)?;
    Ok(MrRequest { pd: p, access })
}

/// Finishes `ibv_reg_mr*` with the driver's region.
pub fn register(req: MrRequest, addr: *mut c_void, length: usize, mr: MemoryRegion) -> *mut ibv_mr {
    let c = CBox::new(ibv_mr {
        context: req.pd.vctx.c.ptr(),
        pd: req.pd.c.ptr(),
        addr,
        length,
        handle: mr.lkey(),
        lkey: mr.lkey(),
        rkey: mr.rkey(),
    });
    let ptr = c.ptr();
    req.pd.users.add();
    let m = Arc::new(Mr { c, pd: req.pd, mr });
    lock(&TABLES.mrs).insert(ptr as usize, m);
    ptr
}

/// `ibv_dereg_mr`.
///
/// # Errors
/// A bad MR.
pub fn dereg_mr(ptr: usize) -> Result<()> {
    let m = lock(&TABLES.mrs).remove(ptr, "mr")?;
    m.pd.users.sub();
    Ok(())
}

/// `ibv_wc_status_str`, as rdma-core words it.
pub fn wc_status_str(status: u32) -> &'static std::ffi::CStr {
    const S: [&std::ffi::CStr; 24] = [
        c"success",
        c"local length error",
        c"local QP operation error",
        c"local EE context operation error",
        c"local protection error",
        c"Work Request Flushed Error",
        c"memory management operation error",
        c"bad response error",
        c"local access error",
        c"remote invalid request error",
        c"remote access error",
        c"remote operation error",
        c"transport retry counter exceeded",
        c"RNR retry counter exceeded",
        c"local RDD violation error",
        c"remote invalid RD request",
        c"aborted error",
        c"invalid EE context number",
        c"invalid EE context state",
        c"fatal error",
        c"response timeout error",
        c"general error",
        c"TM error",
        c"TM software rendezvous",
    ];
    S.get(status as usize).copied().unwrap_or(c"unknown")
}

/// `ibv_port_state_str`.
pub fn port_state_str(state: u32) -> &'static std::ffi::CStr {
    const S: [&std::ffi::CStr; 6] = [
        c"no state change (NOP)",
        c"down",
        c"init",
        c"armed",
        c"active",
        c"active defer",
    ];
    S.get(state as usize).copied().unwrap_or(c"unknown")
}

/// `ibv_node_type_str`.
pub fn node_type_str(t: i32) -> &'static std::ffi::CStr {
    match t {
        1 => c"InfiniBand channel adapter",
        2 => c"InfiniBand switch",
        3 => c"InfiniBand router",
        4 => c"iWARP NIC",
        5 => c"usNIC",
        6 => c"usNIC UDP",
        7 => c"unspecified",
        _ => c"unknown",
    }
}

/// `ibv_event_type_str`.
pub fn event_type_str(t: u32) -> &'static std::ffi::CStr {
    const S: [&std::ffi::CStr; 20] = [
        c"CQ error",
        c"local work queue catastrophic error",
        c"invalid request local work queue error",
        c"local access violation work queue error",
        c"communication established",
        c"send queue drained",
        c"path migrated",
        c"path migration request error",
        c"local catastrophic error",
        c"port active",
        c"port error",
        c"LID change",
        c"P_Key change",
        c"SM change",
        c"SRQ catastrophic error",
        c"SRQ limit reached",
        c"last WQE reached",
        c"client reregistration",
        c"GID table change",
        c"WQ fatal",
    ];
    S.get(t as usize).copied().unwrap_or(c"unknown")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_flags_follow_verbs_rules() {
        assert_eq!(
            mr_access(
                access::IBV_ACCESS_LOCAL_WRITE
                    | access::IBV_ACCESS_REMOTE_WRITE
                    | access::IBV_ACCESS_RELAXED_ORDERING
            )
            .unwrap(),
            Access::ALL
        );
        assert!(mr_access(access::IBV_ACCESS_REMOTE_WRITE)
            .unwrap_err()
            .message
            .contains("without IBV_ACCESS_LOCAL_WRITE"));
        assert!(mr_access(access::IBV_ACCESS_REMOTE_ATOMIC).is_err());
        assert!(mr_access(access::IBV_ACCESS_ON_DEMAND).is_err());
        assert_eq!(mr_access(0).unwrap(), Access::default());
    }

    #[test]
    fn status_strings_match_rdma_core() {
        assert_eq!(wc_status_str(0), c"success");
        assert_eq!(wc_status_str(12), c"transport retry counter exceeded");
        assert_eq!(wc_status_str(999), c"unknown");
        assert_eq!(port_state_str(4), c"active");
    }
}
