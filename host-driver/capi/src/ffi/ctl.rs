//! The `mrc_ctl.h` entry points. All return 0 / -1 with `errno`, except
//! `mrc_ctl_create_ev_event_cq` (NULL) and `mrc_ctl_poll_ev_event` (a count, or minus the
//! errno value, as its header says).

use std::ffi::{c_char, c_int, c_void, CStr};

use super::{call, read_in, ret_minus_one, ret_null, write_out};
use crate::ctl;
use crate::ctypes::ctl::*;
use crate::ctypes::mrc::{mrc_comp_channel, mrc_context, mrc_cq};
use crate::ctypes::verbs::ibv_context;
use crate::error::{CapiError, Result, ETIMEDOUT};
use crate::handle::Token;

fn token<T>(p: *mut T) -> Token {
    p as usize as Token
}

/// The NULL-terminated list of CC algorithm names (static, never freed).
struct Algorithms([*const c_char; 2]);
// SAFETY: two pointers to a static C string literal and NULL, never written: sharing them
// between threads shares read-only data.
unsafe impl Sync for Algorithms {}
static ALGORITHMS: Algorithms = Algorithms([ctl::NSCC.as_ptr(), std::ptr::null()]);

/// `device_attr.cc.algorithms`.
pub fn algorithms() -> *const *const c_char {
    ALGORITHMS.0.as_ptr()
}

/// The caller's array `(p, count)` as a slice (empty for NULL or 0).
///
/// # Safety
/// A non-NULL `p` must point to `count` initialised, writable `T`s not otherwise referenced
/// during the call (the header's in/out arrays).
unsafe fn array<'a, T>(p: *mut T, count: c_int, what: &str) -> Result<&'a mut [T]> {
    let n = usize::try_from(count)
        .map_err(|_| CapiError::inval(format!("{what} count {count} is negative")))?;
    if n == 0 {
        return Ok(&mut []);
    }
    if p.is_null() {
        return Err(CapiError::inval(format!("{what} is NULL with count {n}")));
    }
    // SAFETY: the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts_mut(p, n) })
}

/// `mrc_ctl_query_device_ex`.
#[no_mangle]
pub extern "C" fn mrc_ctl_query_device_ex(
    context: *mut ibv_context,
    mcontext: *mut mrc_context,
    ctl_attr: *mut mrc_ctl_device_attr,
    supported: *mut c_int,
) -> c_int {
    ret_minus_one("mrc_ctl_query_device_ex", || {
        let a = ctl::query_device(context as usize, token(mcontext))?;
        // SAFETY: the header's out pointers; NULL is caught.
        unsafe { super::write_supported(ctl_attr, a, supported) }
    })
}

/// `mrc_ctl_query_device`.
#[no_mangle]
pub extern "C" fn mrc_ctl_query_device(
    context: *mut ibv_context,
    ctl_attr: *mut mrc_ctl_device_attr,
) -> c_int {
    ret_minus_one("mrc_ctl_query_device", || {
        let a = ctl::query_device(context as usize, 0)?;
        // SAFETY: the header's out pointer; NULL is caught.
        unsafe { write_out(ctl_attr, a, "ctl_attr") }
    })
}

/// `mrc_ctl_query_version` (NULL outputs are skipped).
#[no_mangle]
pub extern "C" fn mrc_ctl_query_version(
    current_version: *mut u32,
    last_supported_version: *mut u32,
    vendor_version: *mut u32,
    last_supported_vendor_version: *mut u32,
) {
    let out = [
        current_version,
        last_supported_version,
        vendor_version,
        last_supported_vendor_version,
    ];
    for (p, v) in out.into_iter().zip(ctl::versions()) {
        if !p.is_null() {
            // SAFETY: a non-NULL out `uint32_t *` of the header.
            unsafe { p.write_unaligned(v) };
        }
    }
}

/// `mrc_ctl_query_port`.
#[no_mangle]
pub extern "C" fn mrc_ctl_query_port(
    context: *mut mrc_context,
    port_num: u8,
    attr: *mut mrc_ctl_port_attr,
    attr_mask: c_int,
) -> c_int {
    ret_minus_one("mrc_ctl_query_port", || {
        if attr.is_null() {
            return Err(CapiError::inval("attr is NULL"));
        }
        if let Some(a) = ctl::query_port(token(context), port_num, attr_mask as u32)? {
            // SAFETY: checked non-NULL; the header's out struct.
            unsafe { write_out(attr, a, "attr")? };
        }
        Ok(())
    })
}

/// `mrc_ctl_modify_port`.
#[no_mangle]
pub extern "C" fn mrc_ctl_modify_port(
    context: *mut mrc_context,
    port_num: u8,
    attr: *mut mrc_ctl_port_attr,
    attr_mask: c_int,
) -> c_int {
    ret_minus_one("mrc_ctl_modify_port", || {
        // SAFETY: the header's in struct; NULL is caught.
        let a = unsafe { read_in(attr, "attr") }?;
        ctl::modify_port(token(context), port_num, a, attr_mask as u32)
    })
}

/// `mrc_ctl_modify_ev_fmt_profile`.
#[no_mangle]
pub extern "C" fn mrc_ctl_modify_ev_fmt_profile(
    mrc_ctx: *mut mrc_context,
    ev_fmt_profile_id: u64,
    attr: *mut mrc_ctl_ev_fmt_profile_attr,
    attr_mask: c_int,
) -> c_int {
    ret_minus_one("mrc_ctl_modify_ev_fmt_profile", || {
        // SAFETY: the header's in struct; NULL is caught.
        let a = unsafe { read_in(attr, "attr") }?;
        let mask = attr_mask as u32;
        let fields = if mask & fmt_mask::MRC_CTL_EV_FMT_PROFILE_OP != 0
            && a.ev_fmt_op.op == fmt_op::MRC_CTL_EV_FMT_OP_MODIFY_FIELDS
        {
            // SAFETY: the operation's array of `fmt_field_count` fields (header).
            Some(&*unsafe {
                array(
                    a.ev_fmt_op.fmt_fields,
                    a.ev_fmt_op.fmt_field_count,
                    "fmt_fields",
                )
            }?)
        } else {
            None
        };
        ctl::modify_fmt(token(mrc_ctx), ev_fmt_profile_id, &a, mask, fields)
    })
}

/// `mrc_ctl_query_ev_fmt_profile`.
#[no_mangle]
pub extern "C" fn mrc_ctl_query_ev_fmt_profile(
    mrc_ctx: *mut mrc_context,
    ev_fmt_profile_id: u64,
    attr: *mut mrc_ctl_ev_fmt_profile_attr,
    attr_mask: c_int,
) -> c_int {
    ret_minus_one("mrc_ctl_query_ev_fmt_profile", || {
        // SAFETY: the header's in/out struct; NULL is caught.
        let mut a = unsafe { read_in(attr, "attr") }?;
        let mask = attr_mask as u32;
        let out = if mask & fmt_mask::MRC_CTL_EV_FMT_PROFILE_OP != 0 {
            // SAFETY: the operation's out array of `fmt_field_count` fields (header).
            Some(unsafe {
                array(
                    a.ev_fmt_op.fmt_fields,
                    a.ev_fmt_op.fmt_field_count,
                    "fmt_fields",
                )
            }?)
        } else {
            None
        };
        let r = ctl::query_fmt(token(mrc_ctx), ev_fmt_profile_id, &mut a, mask, out);
        // The count is reported on E2BIG too.
        // SAFETY: as above.
        unsafe { write_out(attr, a, "attr")? };
        r
    })
}

/// The EV and field arrays of an EV profile call.
///
/// # Safety
/// `a`'s arrays are the caller's, as the header describes them.
unsafe fn ev_arrays<'a>(
    a: &mrc_ctl_ev_profile_attr,
    mask: u32,
) -> Result<(&'a mut [mrc_ctl_ev_op_entry], &'a mut [mrc_ctl_ev_field])> {
    let entries = if mask & ev_mask::MRC_CTL_EV_PROFILE_EV_OP != 0 {
        // SAFETY: the caller's contract.
        unsafe { array(a.ev_op.entries, a.ev_op.entry_count, "ev_op.entries") }?
    } else {
        &mut []
    };
    let fields = if mask & ev_mask::MRC_CTL_EV_PROFILE_EV_FIELDS_OP != 0 {
        // SAFETY: the caller's contract.
        unsafe {
            array(
                a.ev_fields_op.fields,
                a.ev_fields_op.field_count,
                "ev_fields_op.fields",
            )
        }?
    } else {
        &mut []
    };
    Ok((entries, fields))
}

/// `mrc_ctl_modify_ev_profile`.
#[no_mangle]
pub extern "C" fn mrc_ctl_modify_ev_profile(
    mrc_ctx: *mut mrc_context,
    ev_profile_id: u64,
    attr: *mut mrc_ctl_ev_profile_attr,
    attr_mask: c_int,
) -> c_int {
    ret_minus_one("mrc_ctl_modify_ev_profile", || {
        // SAFETY: the header's in struct; NULL is caught.
        let a = unsafe { read_in(attr, "attr") }?;
        let mask = attr_mask as u32;
        // SAFETY: the arrays `a` names are the caller's (header).
        let (entries, fields) = unsafe { ev_arrays(&a, mask) }?;
        ctl::modify_ev(token(mrc_ctx), ev_profile_id, &a, mask, entries, fields)
    })
}

/// `mrc_ctl_query_ev_profile`.
#[no_mangle]
pub extern "C" fn mrc_ctl_query_ev_profile(
    mrc_ctx: *mut mrc_context,
    ev_profile_id: u64,
    attr: *mut mrc_ctl_ev_profile_attr,
    attr_mask: c_int,
) -> c_int {
    ret_minus_one("mrc_ctl_query_ev_profile", || {
        // SAFETY: the header's in/out struct; NULL is caught.
        let mut a = unsafe { read_in(attr, "attr") }?;
        let mask = attr_mask as u32;
        // SAFETY: the arrays `a` names are the caller's (header).
        let (entries, fields) = unsafe { ev_arrays(&a, mask) }?;
        let r = ctl::query_ev(token(mrc_ctx), ev_profile_id, &mut a, mask, entries, fields);
        // SAFETY: as above (counts are reported on E2BIG too).
        unsafe { write_out(attr, a, "attr")? };
        r
    })
}

/// `mrc_ctl_modify_cc_profile`.
#[no_mangle]
pub extern "C" fn mrc_ctl_modify_cc_profile(
    mrc_ctx: *mut mrc_context,
    cc_profile_id: u64,
    attr: *mut mrc_ctl_cc_profile_attr,
    attr_mask: c_int,
) -> c_int {
    ret_minus_one("mrc_ctl_modify_cc_profile", || {
        // SAFETY: the header's in struct; NULL is caught.
        let a = unsafe { read_in(attr, "attr") }?;
        let mask = attr_mask as u32;
        let algorithm =
            if mask & cc_mask::MRC_CTL_CC_PROFILE_ALGORITHM != 0 && !a.algorithm.is_null() {
                // SAFETY: a non-NULL C string of the caller (header: must match an algorithm name).
                Some(unsafe { CStr::from_ptr(a.algorithm) })
            } else {
                None
            };
        let config = if mask & cc_mask::MRC_CTL_CC_PROFILE_CONFIG != 0 {
            // SAFETY: for NSCC (the one algorithm) `cc_config` points to a
            // `struct mrc_ctl_cc_nscc_cfg` (header); NULL gives None.
            unsafe { super::read_opt(a.cc_config.cast::<mrc_ctl_cc_nscc_cfg>()) }
        } else {
            None
        };
        ctl::modify_cc(token(mrc_ctx), cc_profile_id, &a, mask, algorithm, config)
    })
}

/// `mrc_ctl_query_cc_profile`.
#[no_mangle]
pub extern "C" fn mrc_ctl_query_cc_profile(
    mrc_ctx: *mut mrc_context,
    cc_profile_id: u64,
    attr: *mut mrc_ctl_cc_profile_attr,
    attr_mask: c_int,
) -> c_int {
    ret_minus_one("mrc_ctl_query_cc_profile", || {
        // SAFETY: the header's in/out struct; NULL is caught.
        let mut a = unsafe { read_in(attr, "attr") }?;
        ctl::query_cc(token(mrc_ctx), cc_profile_id, &mut a, attr_mask as u32)?;
        // SAFETY: as above.
        unsafe { write_out(attr, a, "attr") }
    })
}

/// `mrc_ctl_create_ev_event_cq`.
#[no_mangle]
pub extern "C" fn mrc_ctl_create_ev_event_cq(
    mrc_ctx: *mut mrc_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut mrc_comp_channel,
    comp_vector: c_int,
) -> *mut mrc_cq {
    ret_null("mrc_ctl_create_ev_event_cq", || {
        crate::cq::create_ev_cq(
            token(mrc_ctx),
            cqe,
            cq_context as usize,
            token(channel),
            comp_vector,
        )
        .map(|t| t as usize as *mut mrc_cq)
    })
}

/// `mrc_ctl_poll_ev_event`: a count, or minus the errno value. Events are written with the
/// layout of the API version the context declared (1.0.0: without `state`).
#[no_mangle]
pub extern "C" fn mrc_ctl_poll_ev_event(
    ev_cq: *mut mrc_cq,
    num_entries: c_int,
    ev_event: *mut mrc_ctl_ev_event,
) -> c_int {
    call(
        "mrc_ctl_poll_ev_event",
        |e| -e,
        || {
            let n = usize::try_from(num_entries)
                .map_err(|_| CapiError::inval(format!("num_entries {num_entries} is negative")))?;
            if n > 0 && ev_event.is_null() {
                return Err(CapiError::inval("ev_event is NULL"));
            }
            let cq = crate::cq::cq(token(ev_cq))?;
            let v100 = ctl::ev_event_v100(cq.ctx);
            let events = ctl::poll_ev_event(token(ev_cq), n)?;
            let stride = if v100 {
                MRC_CTL_EV_EVENT_V1_0_0_BYTES
            } else {
                std::mem::size_of::<mrc_ctl_ev_event>()
            };
            for (i, e) in events.iter().enumerate() {
                // SAFETY: the caller's array holds `num_entries` events of the size its API
                // version gives them; `i < num_entries`, and only `stride` bytes are written.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        (e as *const mrc_ctl_ev_event).cast::<u8>(),
                        ev_event.cast::<u8>().add(i * stride),
                        stride,
                    )
                };
            }
            Ok(events.len() as c_int)
        },
    )
}

/// `mrc_ctl_ep_batch_send_wait`: on a timeout, the responses that came are in `rsp` and
/// `num_rsp`, and the call fails with `ETIMEDOUT`.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "C" fn mrc_ctl_ep_batch_send_wait(
    mrc_ctx: *mut mrc_context,
    req_tc: u8,
    op_type: u32,
    req: *mut mrc_ctl_ep_req,
    num_req: c_int,
    rsp_timeout: u32,
    rsp: *mut mrc_ctl_ep_rsp,
    num_rsp: *mut c_int,
) -> c_int {
    ret_minus_one("mrc_ctl_ep_batch_send_wait", || {
        if num_rsp.is_null() {
            return Err(CapiError::inval("num_rsp is NULL"));
        }
        // SAFETY: the header's in array of `num_req` requests.
        let reqs = unsafe { array(req, num_req, "req") }?;
        if !reqs.is_empty() && rsp.is_null() {
            return Err(CapiError::inval("rsp is NULL"));
        }
        let b = ctl::batch_send_wait(token(mrc_ctx), req_tc, op_type, reqs, rsp_timeout)?;
        for (i, r) in b.rsps.iter().enumerate() {
            // SAFETY: `rsp` holds `num_req` responses (header: "sized for num_req"); at most
            // one response per request is written.
            unsafe { rsp.add(i).write_unaligned(*r) };
        }
        // SAFETY: checked non-NULL out pointer.
        unsafe { num_rsp.write_unaligned(b.rsps.len() as c_int) };
        if !b.complete {
            return Err(CapiError::new(
                ETIMEDOUT,
                format!(
                    "{} of {} probes answered within {rsp_timeout} ns",
                    b.rsps.len(),
                    reqs.len()
                ),
            ));
        }
        Ok(())
    })
}
