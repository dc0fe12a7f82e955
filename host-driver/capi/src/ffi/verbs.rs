//! The libibverbs entry points, exported with rdma-core's symbol versions.
//!
//! Each function is defined under an implementation name (`__mrc_verbs_*`) and bound to its
//! verbs name and version by a `.symver` directive in this module's `global_asm!` (the
//! directive must sit in the same object as the definition, so the functions and the directives
//! stay in this one module). The versions are the default (`@@`) ones of rdma-core 44, the ones a
//! program linked against Debian's libibverbs-dev records; the version nodes come from
//! `verbs.map` (see `build.rs`).
//!
//! With `lib_mrc.so` also installed as `libibverbs.so.1` (a link to the same file, as
//! `just capi` lays it out), such a program binds these symbols at run time with no rebuild.

use std::ffi::{c_char, c_int, c_uint, c_void};

use super::{ret_errno, ret_minus_one, ret_null, ret_void, write_out};
use crate::ctypes::verbs::*;
use crate::error::CapiError;
use crate::verbs;

// Every `ibv_*` name of this module, with its version. Keep in step with the functions below
// (a missing definition fails the link; `tests/symbols.rs` checks the exported table).
std::arch::global_asm!(
    ".symver __mrc_verbs_get_device_list, ibv_get_device_list@@IBVERBS_1.1",
    ".symver __mrc_verbs_free_device_list, ibv_free_device_list@@IBVERBS_1.1",
    ".symver __mrc_verbs_get_device_name, ibv_get_device_name@@IBVERBS_1.1",
    ".symver __mrc_verbs_get_device_guid, ibv_get_device_guid@@IBVERBS_1.1",
    ".symver __mrc_verbs_get_device_index, ibv_get_device_index@@IBVERBS_1.9",
    ".symver __mrc_verbs_open_device, ibv_open_device@@IBVERBS_1.1",
    ".symver __mrc_verbs_close_device, ibv_close_device@@IBVERBS_1.1",
    ".symver __mrc_verbs_query_device, ibv_query_device@@IBVERBS_1.1",
    ".symver __mrc_verbs_query_port, ibv_query_port@@IBVERBS_1.1",
    ".symver __mrc_verbs_query_gid, ibv_query_gid@@IBVERBS_1.1",
    ".symver __mrc_verbs_query_gid_ex, _ibv_query_gid_ex@@IBVERBS_1.11",
    ".symver __mrc_verbs_query_pkey, ibv_query_pkey@@IBVERBS_1.1",
    ".symver __mrc_verbs_alloc_pd, ibv_alloc_pd@@IBVERBS_1.1",
    ".symver __mrc_verbs_dealloc_pd, ibv_dealloc_pd@@IBVERBS_1.1",
    ".symver __mrc_verbs_reg_mr, ibv_reg_mr@@IBVERBS_1.1",
    ".symver __mrc_verbs_reg_mr_iova, ibv_reg_mr_iova@@IBVERBS_1.7",
    ".symver __mrc_verbs_reg_mr_iova2, ibv_reg_mr_iova2@@IBVERBS_1.8",
    ".symver __mrc_verbs_dereg_mr, ibv_dereg_mr@@IBVERBS_1.1",
    ".symver __mrc_verbs_wc_status_str, ibv_wc_status_str@@IBVERBS_1.1",
    ".symver __mrc_verbs_node_type_str, ibv_node_type_str@@IBVERBS_1.1",
    ".symver __mrc_verbs_port_state_str, ibv_port_state_str@@IBVERBS_1.1",
    ".symver __mrc_verbs_event_type_str, ibv_event_type_str@@IBVERBS_1.1",
);

/// `ibv_get_device_list`.
#[no_mangle]
pub extern "C" fn __mrc_verbs_get_device_list(num_devices: *mut c_int) -> *mut *mut ibv_device {
    if !num_devices.is_null() {
        // SAFETY: non-NULL; the header makes `num_devices` an optional `int *` out (0 until a
        // list is made, as rdma-core does).
        unsafe { num_devices.write(0) };
    }
    ret_null("ibv_get_device_list", || {
        let (list, n) = verbs::get_device_list()?;
        if !num_devices.is_null() {
            // SAFETY: non-NULL; the header makes `num_devices` an optional `int *` out.
            unsafe { num_devices.write(n as c_int) };
        }
        Ok(list)
    })
}

/// `ibv_free_device_list`.
#[no_mangle]
pub extern "C" fn __mrc_verbs_free_device_list(list: *mut *mut ibv_device) {
    ret_void("ibv_free_device_list", || {
        verbs::free_device_list(list as usize)
    })
}

/// `ibv_get_device_name`: the device's `name` field (NULL for a device not of this library).
#[no_mangle]
pub extern "C" fn __mrc_verbs_get_device_name(device: *mut ibv_device) -> *const c_char {
    super::call(
        "ibv_get_device_name",
        |_| std::ptr::null(),
        || {
            let e = verbs::entry(device as usize)?;
            Ok(e.ibv
                .ptr()
                .cast::<u8>()
                .wrapping_add(std::mem::offset_of!(ibv_device, name))
                .cast::<c_char>())
        },
    )
}

/// `ibv_get_device_guid` (network order; 0 when unknown).
#[no_mangle]
pub extern "C" fn __mrc_verbs_get_device_guid(device: *mut ibv_device) -> u64 {
    super::call(
        "ibv_get_device_guid",
        |_| 0,
        || verbs::device_guid(device as usize),
    )
}

/// `ibv_get_device_index` (-1 on failure).
#[no_mangle]
pub extern "C" fn __mrc_verbs_get_device_index(device: *mut ibv_device) -> c_int {
    super::call(
        "ibv_get_device_index",
        |_| -1,
        || verbs::device_index(device as usize),
    )
}

/// `ibv_open_device`.
#[no_mangle]
pub extern "C" fn __mrc_verbs_open_device(device: *mut ibv_device) -> *mut ibv_context {
    ret_null("ibv_open_device", || verbs::open_device(device as usize))
}

/// `ibv_close_device`.
#[no_mangle]
pub extern "C" fn __mrc_verbs_close_device(context: *mut ibv_context) -> c_int {
    ret_errno("ibv_close_device", || verbs::close_device(context as usize))
}

/// `ibv_query_device`.
#[no_mangle]
pub extern "C" fn __mrc_verbs_query_device(
    context: *mut ibv_context,
    device_attr: *mut ibv_device_attr,
) -> c_int {
    ret_errno("ibv_query_device", || {
        let a = verbs::query_device(context as usize)?;
        // SAFETY: the header makes `device_attr` an out struct; NULL is caught.
        unsafe { write_out(device_attr, a, "device_attr") }
    })
}

/// `ibv_query_port` (the `IBVERBS_1.1` symbol the header's inline wrapper calls: it writes the
/// fields of `struct _compat_ibv_port_attr`, the wrapper zeroes the rest).
#[no_mangle]
pub extern "C" fn __mrc_verbs_query_port(
    context: *mut ibv_context,
    port_num: u8,
    port_attr: *mut c_void,
) -> c_int {
    ret_errno("ibv_query_port", || {
        let a = verbs::query_port(context as usize, port_num)?;
        if port_attr.is_null() {
            return Err(CapiError::inval("port_attr is NULL"));
        }
        // SAFETY: `port_attr` is non-NULL and, per the header, points to at least a
        // `struct _compat_ibv_port_attr`, whose bytes are the first COMPAT_PORT_ATTR_BYTES of
        // `struct ibv_port_attr`; exactly those are copied.
        unsafe {
            std::ptr::copy_nonoverlapping(
                (&a as *const ibv_port_attr).cast::<u8>(),
                port_attr.cast::<u8>(),
                COMPAT_PORT_ATTR_BYTES,
            )
        };
        Ok(())
    })
}

/// `ibv_query_gid` (-1 on failure).
#[no_mangle]
pub extern "C" fn __mrc_verbs_query_gid(
    context: *mut ibv_context,
    port_num: u8,
    index: c_int,
    gid: *mut ibv_gid,
) -> c_int {
    ret_minus_one("ibv_query_gid", || {
        let g = verbs::query_gid(context as usize, port_num.into(), index.into())?;
        // SAFETY: `gid` is the header's out `union ibv_gid *`; NULL is caught.
        unsafe { write_out(gid, g, "gid") }
    })
}

/// `_ibv_query_gid_ex` (behind the header's `ibv_query_gid_ex`).
#[no_mangle]
pub extern "C" fn __mrc_verbs_query_gid_ex(
    context: *mut ibv_context,
    port_num: u32,
    gid_index: u32,
    entry: *mut ibv_gid_entry,
    flags: u32,
    entry_size: usize,
) -> c_int {
    ret_errno("ibv_query_gid_ex", || {
        let e = verbs::query_gid_ex(context as usize, port_num, gid_index, flags, entry_size)?;
        // SAFETY: `entry` points to `entry_size` (checked >= sizeof) writable bytes; NULL is
        // caught.
        unsafe { write_out(entry, e, "entry") }
    })
}

/// `ibv_query_pkey` (-1 on failure).
#[no_mangle]
pub extern "C" fn __mrc_verbs_query_pkey(
    context: *mut ibv_context,
    port_num: u8,
    index: c_int,
    pkey: *mut u16,
) -> c_int {
    ret_minus_one("ibv_query_pkey", || {
        let k = verbs::query_pkey(context as usize, port_num, index)?;
        // SAFETY: `pkey` is the header's out `__be16 *`; NULL is caught.
        unsafe { write_out(pkey, k, "pkey") }
    })
}

/// `ibv_alloc_pd`.
#[no_mangle]
pub extern "C" fn __mrc_verbs_alloc_pd(context: *mut ibv_context) -> *mut ibv_pd {
    ret_null("ibv_alloc_pd", || verbs::alloc_pd(context as usize))
}

/// `ibv_dealloc_pd`.
#[no_mangle]
pub extern "C" fn __mrc_verbs_dealloc_pd(pd: *mut ibv_pd) -> c_int {
    ret_errno("ibv_dealloc_pd", || verbs::dealloc_pd(pd as usize))
}

fn reg_mr(
    name: &str,
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: u32,
) -> *mut ibv_mr {
    ret_null(name, || {
        let req = verbs::check_reg_mr(pd as usize, addr, length, iova, access)?;
        // SAFETY: verbs' contract for `ibv_reg_mr`: `length` bytes at `addr` are the caller's
        // mapped memory and stay so until `ibv_dereg_mr`, and the caller reads bytes the NIC
        // writes only after the completion (or with volatile accesses) - the driver's
        // `reg_user_mr` contract. Not promised by verbs, and documented in the README: no other
        // thread writes those pages while this call runs.
        let mr = unsafe { req.pd.pd.reg_user_mr(addr.cast(), length, req.access) }?;
        Ok(verbs::register(req, addr, length, mr))
    })
}

/// `ibv_reg_mr`.
#[no_mangle]
pub extern "C" fn __mrc_verbs_reg_mr(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> *mut ibv_mr {
    reg_mr("ibv_reg_mr", pd, addr, length, addr as u64, access as u32)
}

/// `ibv_reg_mr_iova`.
#[no_mangle]
pub extern "C" fn __mrc_verbs_reg_mr_iova(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_int,
) -> *mut ibv_mr {
    reg_mr("ibv_reg_mr_iova", pd, addr, length, iova, access as u32)
}

/// `ibv_reg_mr_iova2` (what the header's `ibv_reg_mr` macro calls when the access flags have
/// optional bits, e.g. `IBV_ACCESS_RELAXED_ORDERING`).
#[no_mangle]
pub extern "C" fn __mrc_verbs_reg_mr_iova2(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_uint,
) -> *mut ibv_mr {
    reg_mr("ibv_reg_mr_iova2", pd, addr, length, iova, access)
}

/// `ibv_dereg_mr`.
#[no_mangle]
pub extern "C" fn __mrc_verbs_dereg_mr(mr: *mut ibv_mr) -> c_int {
    ret_errno("ibv_dereg_mr", || verbs::dereg_mr(mr as usize))
}

/// `ibv_wc_status_str`.
#[no_mangle]
pub extern "C" fn __mrc_verbs_wc_status_str(status: c_uint) -> *const c_char {
    verbs::wc_status_str(status).as_ptr()
}

/// `ibv_node_type_str`.
#[no_mangle]
pub extern "C" fn __mrc_verbs_node_type_str(node_type: c_int) -> *const c_char {
    verbs::node_type_str(node_type).as_ptr()
}

/// `ibv_port_state_str`.
#[no_mangle]
pub extern "C" fn __mrc_verbs_port_state_str(port_state: c_uint) -> *const c_char {
    verbs::port_state_str(port_state).as_ptr()
}

/// `ibv_event_type_str`.
#[no_mangle]
pub extern "C" fn __mrc_verbs_event_type_str(event: c_uint) -> *const c_char {
    verbs::event_type_str(event).as_ptr()
}
