//! The `mrc.h` entry points. Conventions per the header: "-1 (errno set)" (`ret_minus_one`),
//! "errors like ibv_X()" for int-returning verbs calls that return the errno value
//! (`ret_errno`), NULL for constructors (`ret_null`).

use std::ffi::{c_int, c_uint, c_void};

use super::{
    read_in, read_opt, ret_count, ret_errno, ret_minus_one, ret_null, ret_void, write_out,
};
use crate::context;
use crate::cq;
use crate::ctypes::mrc::*;
use crate::ctypes::verbs::*;
use crate::error::CapiError;
use crate::events::Element;
use crate::handle::Token;
use crate::qp::{self, SgeStore};
use mrc_abi::device::wqe::MAX_SEND_SGE;

fn token<T>(p: *mut T) -> Token {
    p as usize as Token
}

fn handle<T>(t: Token) -> *mut T {
    t as usize as *mut T
}

/// `mrc_query_device_ex`.
#[no_mangle]
pub extern "C" fn mrc_query_device_ex(
    context: *mut ibv_context,
    mcontext: *mut mrc_context,
    attr: *mut mrc_device_attr,
    supported: *mut c_int,
) -> c_int {
    ret_minus_one("mrc_query_device_ex", || {
        let a = context::query_device_ex(context as usize, token(mcontext))?;
        // SAFETY: out pointers of the header; NULL is caught.
        unsafe { super::write_supported(attr, a, supported) }
    })
}

/// `mrc_query_device` (API 1.0.0 semantics: the same attributes).
#[no_mangle]
pub extern "C" fn mrc_query_device(
    context: *mut ibv_context,
    attr: *mut mrc_device_attr,
    supported: *mut c_int,
) -> c_int {
    ret_minus_one("mrc_query_device", || {
        let a = context::query_device(context as usize)?;
        // SAFETY: out pointers of the header; NULL is caught.
        unsafe { super::write_supported(attr, a, supported) }
    })
}

fn write_versions(out: [*mut u32; 4], v: [u32; 4]) {
    for (p, v) in out.into_iter().zip(v) {
        if !p.is_null() {
            // SAFETY: a non-NULL out `uint32_t *` of the header.
            unsafe { p.write_unaligned(v) };
        }
    }
}

/// `mrc_query_version` (NULL outputs are skipped).
#[no_mangle]
pub extern "C" fn mrc_query_version(
    current_version: *mut u32,
    last_supported_version: *mut u32,
    vendor_version: *mut u32,
    last_supported_vendor_version: *mut u32,
) {
    write_versions(
        [
            current_version,
            last_supported_version,
            vendor_version,
            last_supported_vendor_version,
        ],
        context::versions(),
    );
}

/// `mrc_create_context`.
#[no_mangle]
pub extern "C" fn mrc_create_context(
    vcontext: *mut ibv_context,
    context_attr: *mut mrc_context_attr,
) -> *mut mrc_context {
    ret_null("mrc_create_context", || {
        // SAFETY: an optional in struct of the header.
        let attr = unsafe { read_opt(context_attr) };
        context::create_context(vcontext as usize, attr).map(handle)
    })
}

/// `mrc_destroy_context`.
#[no_mangle]
pub extern "C" fn mrc_destroy_context(mrc_ctx: *mut mrc_context) -> c_int {
    ret_minus_one("mrc_destroy_context", || {
        context::destroy_context(token(mrc_ctx))
    })
}

/// `mrc_create_comp_channel`.
#[no_mangle]
pub extern "C" fn mrc_create_comp_channel(
    mrc_ctx: *mut mrc_context,
    channel: *mut *mut mrc_comp_channel,
) -> c_int {
    ret_errno("mrc_create_comp_channel", || {
        if channel.is_null() {
            return Err(CapiError::inval("channel is NULL"));
        }
        let t = cq::create_channel(token(mrc_ctx))?;
        // SAFETY: checked non-NULL; the header's out pointer.
        unsafe { write_out(channel, handle(t), "channel") }
    })
}

/// `mrc_get_comp_channel_fd`.
#[no_mangle]
pub extern "C" fn mrc_get_comp_channel_fd(channel: *mut mrc_comp_channel, fd: *mut c_int) -> c_int {
    ret_minus_one("mrc_get_comp_channel_fd", || {
        let f = cq::channel_fd(token(channel))?;
        // SAFETY: the header's out pointer; NULL is caught.
        unsafe { write_out(fd, f, "fd") }
    })
}

/// `mrc_destroy_comp_channel`.
#[no_mangle]
pub extern "C" fn mrc_destroy_comp_channel(channel: *mut mrc_comp_channel) -> c_int {
    ret_errno("mrc_destroy_comp_channel", || {
        cq::destroy_channel(token(channel))
    })
}

/// `mrc_create_cq`.
#[no_mangle]
pub extern "C" fn mrc_create_cq(
    mrc_ctx: *mut mrc_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut mrc_comp_channel,
    comp_vector: c_int,
) -> *mut mrc_cq {
    ret_null("mrc_create_cq", || {
        cq::create_cq(
            token(mrc_ctx),
            cqe,
            cq_context as usize,
            token(channel),
            comp_vector,
        )
        .map(handle)
    })
}

/// `mrc_poll_cq`.
#[no_mangle]
pub extern "C" fn mrc_poll_cq(cq: *mut mrc_cq, num_entries: c_int, wc: *mut ibv_wc) -> c_int {
    ret_count("mrc_poll_cq", || {
        if num_entries < 0 {
            return Err(CapiError::inval(format!(
                "num_entries {num_entries} is negative"
            )));
        }
        if num_entries == 0 {
            cq::cq(token(cq))?;
            return Ok(0);
        }
        if wc.is_null() {
            return Err(CapiError::inval("wc is NULL"));
        }
        // SAFETY: the header's out array of `num_entries` `struct ibv_wc`; non-NULL, and no
        // other reference to it exists during the call.
        let out = unsafe { std::slice::from_raw_parts_mut(wc, num_entries as usize) };
        cq::poll(token(cq), out).map(|n| n as c_int)
    })
}

/// `mrc_destroy_cq`.
#[no_mangle]
pub extern "C" fn mrc_destroy_cq(cq: *mut mrc_cq) -> c_int {
    ret_errno("mrc_destroy_cq", || cq::destroy_cq(token(cq)))
}

/// `mrc_create_qp_hint`.
#[no_mangle]
pub extern "C" fn mrc_create_qp_hint(
    mrc_ctx: *mut mrc_context,
    init_attr: *mut mrc_qp_hint_init_attr,
) -> *mut mrc_qp_hint {
    ret_null("mrc_create_qp_hint", || {
        // SAFETY: the header's in struct; NULL is caught.
        let a = unsafe { read_in(init_attr, "init_attr") }?;
        qp::create_hint(token(mrc_ctx), a).map(handle)
    })
}

/// `mrc_destroy_qp_hint`.
#[no_mangle]
pub extern "C" fn mrc_destroy_qp_hint(qp_hint: *mut mrc_qp_hint) -> c_int {
    ret_minus_one("mrc_destroy_qp_hint", || qp::destroy_hint(token(qp_hint)))
}

/// `mrc_query_qp_hint`.
#[no_mangle]
pub extern "C" fn mrc_query_qp_hint(
    qp_hint: *mut mrc_qp_hint,
    qp_hint_attr: *mut mrc_qp_hint_attr,
    qp_hint_attr_mask: c_int,
) -> c_int {
    ret_minus_one("mrc_query_qp_hint", || {
        // SAFETY: the header's in/out struct; NULL is caught.
        let mut a = unsafe { read_in(qp_hint_attr, "qp_hint_attr") }?;
        qp::query_hint(token(qp_hint), &mut a, qp_hint_attr_mask as u32)?;
        // SAFETY: as above.
        unsafe { write_out(qp_hint_attr, a, "qp_hint_attr") }
    })
}

/// `mrc_modify_qp_hint`.
#[no_mangle]
pub extern "C" fn mrc_modify_qp_hint(
    qp_hint: *mut mrc_qp_hint,
    qp_hint_attr: *mut mrc_qp_hint_attr,
    qp_hint_attr_mask: c_int,
) -> c_int {
    ret_minus_one("mrc_modify_qp_hint", || {
        // SAFETY: the header's in struct; NULL is caught.
        let a = unsafe { read_in(qp_hint_attr, "qp_hint_attr") }?;
        qp::modify_hint(token(qp_hint), &a, qp_hint_attr_mask as u32)
    })
}

/// `mrc_create_qp`: like `ibv_create_qp`, writes the capacities granted back into
/// `mrc_qp_attr->cap`.
#[no_mangle]
pub extern "C" fn mrc_create_qp(
    mrc_ctx: *mut mrc_context,
    mrc_qp_attr: *mut mrc_qp_init_attr,
) -> *mut mrc_qp {
    ret_null("mrc_create_qp", || {
        // SAFETY: the header's in struct; NULL is caught.
        let a = unsafe { read_in(mrc_qp_attr, "mrc_qp_attr") }?;
        let (t, granted) = qp::create_qp(token(mrc_ctx), a)?;
        // SAFETY: the same struct, as ibv_create_qp updates its `cap`.
        unsafe { write_out(mrc_qp_attr, granted, "mrc_qp_attr")? };
        Ok(handle(t))
    })
}

/// `mrc_destroy_qp`.
#[no_mangle]
pub extern "C" fn mrc_destroy_qp(qp: *mut mrc_qp) -> c_int {
    ret_errno("mrc_destroy_qp", || qp::destroy_qp(token(qp)))
}

/// `mrc_query_qp`: fills what the masks ask (the rest of `vattr` and `mrc_attr` untouched);
/// `init_attr` (optional) gets the creation attributes.
#[no_mangle]
pub extern "C" fn mrc_query_qp(
    qp: *mut mrc_qp,
    vattr: *mut ibv_qp_attr,
    vattr_mask: c_int,
    mrc_attr: *mut mrc_qp_attr,
    mrc_attr_mask: c_int,
    init_attr: *mut mrc_qp_init_attr,
) -> c_int {
    ret_errno("mrc_query_qp", || {
        let (vmask, mmask) = (vattr_mask as u32, mrc_attr_mask as u32);
        if vmask != 0 && vattr.is_null() {
            return Err(CapiError::inval("vattr is NULL but vattr_mask is not 0"));
        }
        if mmask != 0 && mrc_attr.is_null() {
            return Err(CapiError::inval(
                "mrc_attr is NULL but mrc_attr_mask is not 0",
            ));
        }
        let (v, m, i) = qp::query_qp(token(qp), vmask, mmask)?;
        if vmask != 0 {
            // SAFETY: the header's out struct, non-NULL (checked).
            unsafe { write_out(vattr, v, "vattr")? };
        }
        if mmask != 0 {
            // SAFETY: the header's in/out struct, non-NULL (checked).
            let mut cur = unsafe { read_in(mrc_attr, "mrc_attr") }?;
            qp::masked_mrc_attr(&mut cur, &m, mmask);
            // SAFETY: as above.
            unsafe { write_out(mrc_attr, cur, "mrc_attr")? };
        }
        if !init_attr.is_null() {
            // SAFETY: an optional out struct of the header, non-NULL.
            unsafe { write_out(init_attr, i, "init_attr")? };
        }
        Ok(())
    })
}

/// `mrc_modify_qp`.
#[no_mangle]
pub extern "C" fn mrc_modify_qp(
    qp: *mut mrc_qp,
    vattr: *mut ibv_qp_attr,
    vattr_mask: c_int,
    mrc_attr: *mut mrc_qp_attr,
    mrc_attr_mask: c_int,
) -> c_int {
    ret_errno("mrc_modify_qp", || {
        // SAFETY: the header's optional in structs (NULL with a non-zero mask is refused by
        // the planner).
        let (v, m) = unsafe { (read_opt(vattr), read_opt(mrc_attr)) };
        qp::modify_qp(
            token(qp),
            v.as_ref(),
            vattr_mask as u32,
            m.as_ref(),
            mrc_attr_mask as u32,
        )
    })
}

/// `mrc_get_qpn`.
#[no_mangle]
pub extern "C" fn mrc_get_qpn(qp: *mut mrc_qp, qpn: *mut u32) -> c_int {
    ret_minus_one("mrc_get_qpn", || {
        let n = qp::qpn(token(qp))?;
        // SAFETY: the header's out pointer; NULL is caught.
        unsafe { write_out(qpn, n, "qpn") }
    })
}

/// Requests converted and posted per device call.
const POST_BATCH: usize = 16;
/// Longest request list walked (a cycle in `next` is an error, not a hang).
const MAX_CHAIN: usize = 1 << 20;

/// Walks the caller's NULL-terminated request list from `first` and posts it in batches of
/// [`POST_BATCH`], for `mrc_post_send` and `mrc_post_recv` alike.
///
/// `read` reads one request (the caller's memory, read unaligned) and checks what can be
/// checked without the device, returning the converted request and the list's `next`; `post`
/// posts a batch, returning the index of the request that failed. The requests before the
/// first bad one are posted, in order; the error names the bad one (a request that could not
/// be read, one `post` refused, or the one past [`MAX_CHAIN`]).
fn post_list<W: Copy, R>(
    first: *mut W,
    mut read: impl FnMut(&W) -> Result<(R, *mut W), CapiError>,
    mut post: impl FnMut(&[R]) -> Result<(), (usize, CapiError)>,
) -> Result<(), (*mut W, CapiError)> {
    if first.is_null() {
        return Err((first, CapiError::inval("wr is NULL")));
    }
    let mut cur = first;
    let mut walked = 0usize;
    while !cur.is_null() {
        let mut ptrs = [std::ptr::null_mut::<W>(); POST_BATCH];
        let mut batch: heapless::Vec<R, POST_BATCH> = heapless::Vec::new();
        let mut stop = None;
        while !cur.is_null() && !batch.is_full() {
            walked += 1;
            if walked > MAX_CHAIN {
                stop = Some(CapiError::inval(format!(
                    "the wr list is longer than {MAX_CHAIN} requests (a cycle?)"
                )));
                break;
            }
            // SAFETY: a request of the caller's NULL-terminated list (header contract).
            let w = unsafe { cur.read_unaligned() };
            match read(&w) {
                Ok((r, next)) => {
                    ptrs[batch.len()] = cur;
                    let _ = batch.push(r);
                    cur = next;
                }
                Err(e) => {
                    stop = Some(e);
                    break;
                }
            }
        }
        if !batch.is_empty() {
            post(&batch).map_err(|(k, e)| (ptrs[k.min(batch.len() - 1)], e))?;
        }
        if let Some(e) = stop {
            return Err((cur, e));
        }
    }
    Ok(())
}

/// `mrc_post_send`: the requests before the first bad one are posted; `*bad_wr` names it.
#[no_mangle]
pub extern "C" fn mrc_post_send(
    qp: *mut mrc_qp,
    wr: *mut ibv_send_wr,
    bad_wr: *mut *mut ibv_send_wr,
) -> c_int {
    let mut failed: *mut ibv_send_wr = wr;
    let rc = ret_errno("mrc_post_send", || {
        let q = qp::qp(token(qp))?;
        let read = |w: &ibv_send_wr| {
            let n = usize::try_from(w.num_sge).unwrap_or(usize::MAX);
            if n > MAX_SEND_SGE || (n > 0 && w.sg_list.is_null()) {
                return Err(CapiError::inval(format!(
                    "wr_id {:#x}: num_sge {} (at most {MAX_SEND_SGE}) with sg_list {:p}",
                    w.wr_id, w.num_sge, w.sg_list
                )));
            }
            let mut sges = [ibv_sge::default(); MAX_SEND_SGE];
            for (k, s) in sges.iter_mut().enumerate().take(n) {
                // SAFETY: `sg_list` holds `num_sge` (checked, non-NULL) entries.
                *s = unsafe { w.sg_list.add(k).read_unaligned() };
            }
            Ok(((*w, sges, n), w.next))
        };
        let post = |batch: &[(ibv_send_wr, [ibv_sge; MAX_SEND_SGE], usize)]| {
            let mut stores: [SgeStore; POST_BATCH] = Default::default();
            let mut wrs: heapless::Vec<mrc_driver::api::SendWr<'_>, POST_BATCH> =
                heapless::Vec::new();
            let mut bad = None;
            for (k, ((w, sges, n), store)) in batch.iter().zip(stores.iter_mut()).enumerate() {
                match qp::convert_send(&q, w, &sges[..*n], store) {
                    Ok(x) => {
                        let _ = wrs.push(x);
                    }
                    Err(e) => {
                        bad = Some((k, e));
                        break;
                    }
                }
            }
            // The requests before one that does not convert are posted first.
            if !wrs.is_empty() {
                q.post_send(&wrs)?;
            }
            bad.map_or(Ok(()), Err)
        };
        post_list(wr, read, post).map_err(|(at, e)| {
            failed = at;
            e
        })
    });
    super::report_bad_wr(rc, bad_wr, failed)
}

/// `mrc_post_recv` (-1 on failure, as the header says; `errno` names the error).
#[no_mangle]
pub extern "C" fn mrc_post_recv(
    qp: *mut mrc_qp,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    let mut failed: *mut ibv_recv_wr = wr;
    let rc = ret_minus_one("mrc_post_recv", || {
        let q = qp::qp(token(qp))?;
        let read = |w: &ibv_recv_wr| {
            q.check_recv_sge(w.wr_id, w.num_sge)?;
            Ok((mrc_driver::api::RecvWr { wr_id: w.wr_id }, w.next))
        };
        post_list(wr, read, |batch| q.post_recv(batch)).map_err(|(at, e)| {
            failed = at;
            e
        })
    });
    super::report_bad_wr(rc, bad_wr, failed)
}

/// `mrc_get_async_event`: blocks until an event of this context (checking the device every
/// few milliseconds: a device that dies makes it return -1 with `EIO`).
#[no_mangle]
pub extern "C" fn mrc_get_async_event(
    mrc_ctx: *mut mrc_context,
    event: *mut mrc_async_event,
) -> c_int {
    ret_minus_one("mrc_get_async_event", || {
        if event.is_null() {
            return Err(CapiError::inval("event is NULL"));
        }
        let rec = context::wait_async(token(mrc_ctx))?;
        let e = mrc_async_event {
            element: match rec.element {
                Element::Cq(t) => mrc_async_event_element { cq: handle(t) },
                Element::Qp(t) => mrc_async_event_element { qp: handle(t) },
                Element::Port(p) => mrc_async_event_element { port_num: p },
                Element::Device => mrc_async_event_element { port_num: 0 },
            },
            event_type: rec.event_type,
        };
        // SAFETY: checked non-NULL; the header's out struct.
        unsafe { write_out(event, e, "event") }
    })
}

/// `mrc_ack_async_event`: events are owned by the library until this call, which releases
/// nothing further (QPs and CQs may be destroyed with events outstanding).
#[no_mangle]
pub extern "C" fn mrc_ack_async_event(event: *mut mrc_async_event) {
    ret_void("mrc_ack_async_event", || {
        if event.is_null() {
            return Err(CapiError::inval("event is NULL"));
        }
        Ok(())
    })
}

/// `mrc_req_notify_cq`.
#[no_mangle]
pub extern "C" fn mrc_req_notify_cq(cq: *mut mrc_cq, solicited_only: c_int) -> c_int {
    ret_errno("mrc_req_notify_cq", || {
        cq::req_notify(token(cq), solicited_only != 0)
    })
}

/// `mrc_get_cq_event`: blocks unless the channel's fd is non-blocking (then `EAGAIN`).
#[no_mangle]
pub extern "C" fn mrc_get_cq_event(
    channel: *mut mrc_comp_channel,
    cq: *mut *mut mrc_cq,
    cq_context: *mut *mut c_void,
) -> c_int {
    ret_minus_one("mrc_get_cq_event", || {
        if cq.is_null() || cq_context.is_null() {
            return Err(CapiError::inval("cq or cq_context is NULL"));
        }
        let (t, ctx) = cq::get_cq_event(token(channel))?;
        // SAFETY: checked non-NULL out pointers of the header.
        unsafe {
            write_out(cq, handle(t), "cq")?;
            write_out(cq_context, ctx as *mut c_void, "cq_context")
        }
    })
}

/// `mrc_ack_cq_events`.
#[no_mangle]
pub extern "C" fn mrc_ack_cq_events(cq: *mut mrc_cq, nevents: c_uint) {
    ret_void("mrc_ack_cq_events", || {
        cq::ack_cq_events(token(cq), nevents)
    })
}
