//! Completion channels and CQs: `mrc_create_comp_channel` ... `mrc_ack_cq_events`, and the EV
//! event CQs of the controller (`mrc_ctl_create_ev_event_cq`).
//!
//! # Completion events
//! A channel is an interrupt vector of the device; `mrc_req_notify_cq` arms a CQ on the device
//! and records it in its channel. `mrc_get_cq_event` returns an armed CQ of the channel that has
//! a completion waiting, blocking on the vector's eventfd in between (in slices, so a device
//! that dies is noticed and a vector shared with another channel is never waited on forever);
//! when the channel's fd is non-blocking it returns `EAGAIN` instead of waiting. Each returned
//! event must be acknowledged (`mrc_ack_cq_events`); a CQ with unacknowledged events cannot be
//! destroyed (`EBUSY`, where verbs would wait).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mrc_driver::api::{CompletionChannel, CompletionQueue, CqeOpcode, CqeStatus, WorkCompletion};

use crate::context::{context, MrcContext};
use crate::ctypes::verbs::{ibv_wc, wc_opcode, wc_status as ws, IBV_WC_WITH_IMM};
use crate::device::OpenDevice;
use crate::error::{CapiError, Result, EAGAIN, EBUSY, EIO};
use crate::handle::Token;
use crate::state::{get, lock, TABLES};
use crate::verbs::Users;

/// A completion channel.
pub struct Channel {
    /// Its MRC context.
    pub ctx: Token,
    /// The device.
    pub dev: Arc<OpenDevice>,
    /// The driver's channel (an interrupt vector).
    pub ch: CompletionChannel,
    /// The fd the caller gets: an epoll instance watching the vector's eventfd (see
    /// [`crate::ffi::epoll_watching`]).
    pub fd: std::os::fd::OwnedFd,
    /// CQs reporting to it.
    pub users: Users,
    /// Armed CQs (token, CQ).
    armed: Mutex<Vec<(Token, Arc<Cq>)>>,
}

/// What a CQ holds.
pub enum CqKind {
    /// Work completions.
    Completion(Mutex<CompletionQueue>),
    /// EV events of the controller (queued by the device's [`crate::events::EventHub`]).
    EvEvent,
}

/// A CQ.
pub struct Cq {
    /// Its MRC context.
    pub ctx: Token,
    /// The device.
    pub dev: Arc<OpenDevice>,
    /// Completion or EV event CQ.
    pub kind: CqKind,
    /// The application's `cq_context`.
    pub cq_context: usize,
    /// Its channel (token), 0 for none.
    pub channel: Token,
    /// The channel object.
    pub channel_obj: Option<Arc<Channel>>,
    /// Entries asked for (`cqe`).
    pub cqe: u32,
    /// QPs completing on it.
    pub users: Users,
    /// CQ events returned and not yet acknowledged.
    pub unacked: AtomicU64,
    /// Work completions staged by `mrc_poll_cq` (reused, never shrunk).
    scratch: Mutex<Vec<WorkCompletion>>,
}

impl Cq {
    /// The driver's CQ number (0 for EV event CQs).
    pub fn cqn(&self) -> u32 {
        match &self.kind {
            CqKind::Completion(c) => lock(c).cqn(),
            CqKind::EvEvent => 0,
        }
    }
}

/// `mrc_create_comp_channel`.
///
/// # Errors
/// A bad context, the device is gone.
pub fn create_channel(ctx: Token) -> Result<Token> {
    let c = context(ctx, "mrc_ctx")?;
    let ch = c.app.create_comp_channel()?;
    let fd = crate::ffi::epoll_watching(ch.fd()?)
        .map_err(|e| CapiError::new(e.raw_os_error().unwrap_or(EIO), format!("epoll: {e}")))?;
    let obj = Arc::new(Channel {
        ctx,
        dev: c.dev().clone(),
        ch,
        fd,
        users: Users::default(),
        armed: Mutex::new(Vec::new()),
    });
    let token = lock(&TABLES.channels).insert(obj)?;
    lock(&c.children).channels.push(token);
    Ok(token)
}

/// The channel named by `token`.
///
/// # Errors
/// A bad handle.
pub fn channel(token: Token) -> Result<Arc<Channel>> {
    get(&TABLES.channels, token, "channel")
}

/// `mrc_get_comp_channel_fd`.
///
/// # Errors
/// A bad channel, the device is gone.
pub fn channel_fd(token: Token) -> Result<i32> {
    use std::os::fd::AsRawFd;
    let ch = channel(token)?;
    ch.dev.dev().check()?;
    Ok(ch.fd.as_raw_fd())
}

/// `mrc_destroy_comp_channel`.
///
/// # Errors
/// A bad channel, `EBUSY` while CQs report to it.
pub fn destroy_channel(token: Token) -> Result<()> {
    let mut t = lock(&TABLES.channels);
    let ch = t.get(token, "channel")?;
    ch.users.check_idle("the completion channel", "CQs")?;
    t.remove(token, "channel")?;
    drop(t);
    if let Ok(c) = context(ch.ctx, "mrc_ctx") {
        lock(&c.children).channels.retain(|&x| x != token);
    }
    Ok(())
}

fn check_cqe(cqe: i32) -> Result<u32> {
    u32::try_from(cqe)
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| CapiError::inval(format!("cqe {cqe}: a CQ needs at least one entry")))
}

/// Looks up `channel` for a new CQ of `c` and counts the CQ as its user.
fn use_channel(c: &MrcContext, channel: Token, comp_vector: i32) -> Result<Option<Arc<Channel>>> {
    if comp_vector < 0 {
        return Err(CapiError::inval(format!(
            "comp_vector {comp_vector} is negative"
        )));
    }
    if channel == 0 {
        return Ok(None);
    }
    let t = lock(&TABLES.channels);
    let ch = t.get(channel, "channel")?;
    if !Arc::ptr_eq(&ch.dev, c.dev()) {
        return Err(CapiError::inval(
            "channel belongs to a context of another device",
        ));
    }
    ch.users.add();
    Ok(Some(ch))
}

/// How a completion CQ's driver CQ is made (context, depth, channel).
type MakeCq<'a> =
    dyn Fn(&MrcContext, u32, Option<&CompletionChannel>) -> Result<CompletionQueue> + 'a;

/// Makes a CQ of context `ctx`: its channel counted, the driver's CQ made by `make` for
/// completion CQs (`None` for an EV event CQ), the handle registered.
fn new_cq(
    ctx: Token,
    cqe: i32,
    cq_context: usize,
    channel: Token,
    comp_vector: i32,
    make: Option<&MakeCq<'_>>,
) -> Result<(Token, Arc<Cq>)> {
    let c = context(ctx, "mrc_ctx")?;
    if make.is_none() {
        c.controller()?;
    }
    let depth = check_cqe(cqe)?;
    let ch = use_channel(&c, channel, comp_vector)?;
    let made = (|| {
        let kind = match make {
            Some(f) => CqKind::Completion(Mutex::new(f(&c, depth, ch.as_ref().map(|x| &x.ch))?)),
            None => CqKind::EvEvent,
        };
        let obj = Arc::new(Cq {
            ctx,
            dev: c.dev().clone(),
            kind,
            cq_context,
            channel,
            channel_obj: ch.clone(),
            cqe: depth,
            users: Users::default(),
            unacked: AtomicU64::new(0),
            scratch: Mutex::new(Vec::new()),
        });
        let token = lock(&TABLES.cqs).insert(obj.clone())?;
        Ok((token, obj))
    })();
    match made {
        Ok((token, obj)) => {
            lock(&c.children).cqs.push(token);
            Ok((token, obj))
        }
        Err(e) => {
            if let Some(ch) = &ch {
                ch.users.sub();
            }
            Err(e)
        }
    }
}

/// `mrc_create_cq`. `comp_vector` is checked and otherwise unused: the channel chooses the
/// interrupt vector.
///
/// # Errors
/// A bad context, channel or size, device errors.
pub fn create_cq(
    ctx: Token,
    cqe: i32,
    cq_context: usize,
    channel: Token,
    comp_vector: i32,
) -> Result<Token> {
    let make = |c: &MrcContext, depth, ch: Option<&CompletionChannel>| {
        c.app.create_cq(depth, ch).map_err(CapiError::from)
    };
    let (token, cq) = new_cq(ctx, cqe, cq_context, channel, comp_vector, Some(&make))?;
    cq.dev.events.add_cq(cq.cqn(), ctx, token);
    Ok(token)
}

/// `mrc_ctl_create_ev_event_cq`: a CQ of EV events (needs the controller).
///
/// # Errors
/// A bad context or size, `EPERM` without `CAP_NET_ADMIN`.
pub fn create_ev_cq(
    ctx: Token,
    cqe: i32,
    cq_context: usize,
    channel: Token,
    comp_vector: i32,
) -> Result<Token> {
    let (token, cq) = new_cq(ctx, cqe, cq_context, channel, comp_vector, None)?;
    cq.dev.events.add_ev_cq(ctx, token, cq.cqe as usize);
    Ok(token)
}

/// The CQ named by `token`.
///
/// # Errors
/// A bad handle.
pub fn cq(token: Token) -> Result<Arc<Cq>> {
    get(&TABLES.cqs, token, "cq")
}

fn remove_cq(token: Token, check: bool) -> Result<()> {
    let mut t = lock(&TABLES.cqs);
    let cq = t.get(token, "cq")?;
    if check {
        cq.users.check_idle("the CQ", "QPs")?;
        let n = cq.unacked.load(Ordering::Acquire);
        if n > 0 {
            return Err(CapiError::new(
                EBUSY,
                format!("the CQ has {n} completion events not acknowledged (mrc_ack_cq_events)"),
            ));
        }
    }
    t.remove(token, "cq")?;
    drop(t);
    let ev = &cq.dev.events;
    match cq.kind {
        CqKind::Completion(_) => ev.remove_cq(cq.cqn()),
        CqKind::EvEvent => ev.remove_ev_cq(token),
    }
    ev.forget_element(cq.ctx, crate::events::Element::Cq(token));
    if let Some(ch) = &cq.channel_obj {
        lock(&ch.armed).retain(|(t, _)| *t != token);
        ch.users.sub();
    }
    if let Ok(c) = context(cq.ctx, "mrc_ctx") {
        lock(&c.children).cqs.retain(|&x| x != token);
    }
    Ok(())
}

/// `mrc_destroy_cq`.
///
/// # Errors
/// A bad CQ; `EBUSY` while QPs use it or events are unacknowledged.
pub fn destroy_cq(token: Token) -> Result<()> {
    remove_cq(token, true)
}

/// Destroys a CQ whatever uses it (its context is being destroyed, QPs first).
///
/// # Errors
/// A bad CQ.
pub fn destroy_cq_forced(token: Token) -> Result<()> {
    remove_cq(token, false)
}

/// `enum ibv_wc_status` of a device completion status.
pub fn wc_status(s: CqeStatus) -> u32 {
    match s {
        CqeStatus::Success => ws::IBV_WC_SUCCESS,
        CqeStatus::LocalLength => ws::IBV_WC_LOC_LEN_ERR,
        CqeStatus::LocalQpOperation => ws::IBV_WC_LOC_QP_OP_ERR,
        CqeStatus::LocalProtection => ws::IBV_WC_LOC_PROT_ERR,
        CqeStatus::WrFlushed => ws::IBV_WC_WR_FLUSH_ERR,
        CqeStatus::LocalAccess => ws::IBV_WC_LOC_ACCESS_ERR,
        CqeStatus::RemoteAccess => ws::IBV_WC_REM_ACCESS_ERR,
        CqeStatus::RemoteLength | CqeStatus::RemoteInvalidRequest => ws::IBV_WC_REM_INV_REQ_ERR,
        // No receive posted for a Write-with-Immediate: verbs' receiver-not-ready outcome.
        CqeStatus::RemoteNoRecvBuffer => ws::IBV_WC_RNR_RETRY_EXC_ERR,
        CqeStatus::RetryExceeded => ws::IBV_WC_RETRY_EXC_ERR,
        CqeStatus::RecvQueueOverflow => ws::IBV_WC_REM_OP_ERR,
        CqeStatus::Fatal => ws::IBV_WC_FATAL_ERR,
        #[allow(unreachable_patterns)]
        _ => ws::IBV_WC_GENERAL_ERR,
    }
}

/// A device completion as `struct ibv_wc`.
pub fn to_ibv_wc(w: &WorkCompletion) -> ibv_wc {
    let (opcode, flags, imm) = match (w.opcode, w.imm) {
        (CqeOpcode::RecvWriteImm, Some(imm)) => (
            wc_opcode::IBV_WC_RECV_RDMA_WITH_IMM,
            IBV_WC_WITH_IMM,
            imm.to_be(),
        ),
        (CqeOpcode::RecvWriteImm, None) => (wc_opcode::IBV_WC_RECV_RDMA_WITH_IMM, 0, 0),
        _ => (wc_opcode::IBV_WC_RDMA_WRITE, 0, 0),
    };
    ibv_wc {
        wr_id: w.wr_id,
        status: wc_status(w.status),
        opcode,
        vendor_err: if w.status == CqeStatus::Success {
            0
        } else {
            w.syndrome
        },
        byte_len: w.byte_len,
        imm_data: imm,
        qp_num: w.qpn,
        src_qp: 0,
        wc_flags: flags,
        pkey_index: 0,
        slid: 0,
        sl: 0,
        dlid_path_bits: 0,
    }
}

/// Completions staged per device poll.
const POLL_BATCH: usize = 64;

/// `mrc_poll_cq`: fills `out` from the front; returns how many.
///
/// # Errors
/// A bad or EV event CQ, the device is gone, a malformed completion.
pub fn poll(token: Token, out: &mut [ibv_wc]) -> Result<usize> {
    let cq = cq(token)?;
    let CqKind::Completion(inner) = &cq.kind else {
        return Err(CapiError::inval(
            "cq is an EV event CQ: poll it with mrc_ctl_poll_ev_event",
        ));
    };
    let mut scratch = lock(&cq.scratch);
    if scratch.len() < POLL_BATCH {
        scratch.resize(POLL_BATCH, WorkCompletion::default());
    }
    let mut q = lock(inner);
    let mut n = 0;
    while n < out.len() {
        let want = (out.len() - n).min(POLL_BATCH);
        let got = q.poll(&mut scratch[..want])?;
        for (o, w) in out[n..].iter_mut().zip(&scratch[..got]) {
            *o = to_ibv_wc(w);
        }
        n += got;
        if got < want {
            break;
        }
    }
    Ok(n)
}

/// `mrc_req_notify_cq`.
///
/// # Errors
/// A bad or EV event CQ, the device is gone.
pub fn req_notify(token: Token, solicited_only: bool) -> Result<()> {
    let cq = cq(token)?;
    match &cq.kind {
        CqKind::Completion(inner) => lock(inner).req_notify(solicited_only)?,
        CqKind::EvEvent => {}
    }
    if let Some(ch) = &cq.channel_obj {
        let mut armed = lock(&ch.armed);
        if !armed.iter().any(|(t, _)| *t == token) {
            armed.push((token, cq.clone()));
        }
    }
    Ok(())
}

/// An armed CQ of `ch` with something to read, disarmed: `(token, CQ)`.
fn ready(ch: &Channel) -> Result<Option<(Token, Arc<Cq>)>> {
    let mut armed = lock(&ch.armed);
    for i in 0..armed.len() {
        let c = &armed[i].1;
        let has = match &c.kind {
            CqKind::Completion(inner) => lock(inner).has_completion()?,
            CqKind::EvEvent => {
                let token = armed[i].0;
                c.dev
                    .events
                    .pump(c.dev.dev(), |p, x| crate::ctl::ev_at(&c.dev, p, x))?;
                c.dev.events.has_ev(token)
            }
        };
        if has {
            return Ok(Some(armed.swap_remove(i)));
        }
    }
    Ok(None)
}

/// How long one blocking wait on a channel's vector lasts before the armed CQs and the device
/// are checked again (EV event CQs, whose events do not raise the channel's vector, are
/// noticed within one slice).
const WAIT_SLICE: Duration = Duration::from_millis(20);

/// `mrc_get_cq_event`: `(cq token, cq_context)` of the next CQ event of the channel. When the
/// caller made the channel's fd non-blocking (`O_NONBLOCK`), returns `EAGAIN` instead of
/// waiting.
///
/// # Errors
/// A bad channel, `EAGAIN`, the device is gone.
pub fn get_cq_event(token: Token) -> Result<(Token, usize)> {
    use std::os::fd::AsFd;
    let ch = channel(token)?;
    let nonblocking = crate::ffi::fd_nonblocking(ch.fd.as_fd());
    loop {
        if let Some((t, cq)) = ready(&ch)? {
            cq.unacked.fetch_add(1, Ordering::AcqRel);
            return Ok((t, cq.cq_context));
        }
        if nonblocking {
            // Take the vector's pending count, so the caller's fd is readable again only
            // when a new completion fires it; then look once more.
            ch.ch.wait(Duration::ZERO)?;
            if let Some((t, cq)) = ready(&ch)? {
                cq.unacked.fetch_add(1, Ordering::AcqRel);
                return Ok((t, cq.cq_context));
            }
            return Err(CapiError::new(EAGAIN, "no CQ event pending").quiet());
        }
        ch.ch.wait(WAIT_SLICE)?;
    }
}

/// `mrc_ack_cq_events`.
///
/// # Errors
/// A bad CQ.
pub fn ack_cq_events(token: Token, n: u32) -> Result<()> {
    let cq = cq(token)?;
    let _ = cq
        .unacked
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| {
            Some(v.saturating_sub(u64::from(n)))
        });
    Ok(())
}
