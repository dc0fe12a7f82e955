//! The library's tables: every live object, by handle. One lock per table, held only to look
//! an object up or to add or remove one (never across a device call).

use std::sync::{Arc, LazyLock, Mutex, MutexGuard};

use crate::context::MrcContext;
use crate::cq::{Channel, Cq};
use crate::handle::{AddrMap, Kind, Slab, Token};
use crate::qp::{Hint, Qp};
use crate::verbs::{DeviceList, Mr, Pd, VerbsContext};

/// Every live object of the process.
pub struct Tables {
    /// `ibv_get_device_list` results not yet freed.
    pub lists: Mutex<AddrMap<DeviceList>>,
    /// `ibv_context`s.
    pub vctxs: Mutex<AddrMap<VerbsContext>>,
    /// `ibv_pd`s.
    pub pds: Mutex<AddrMap<Pd>>,
    /// `ibv_mr`s.
    pub mrs: Mutex<AddrMap<Mr>>,
    /// `mrc_context`s.
    pub contexts: Mutex<Slab<MrcContext>>,
    /// `mrc_comp_channel`s.
    pub channels: Mutex<Slab<Channel>>,
    /// `mrc_cq`s (completion and EV event CQs).
    pub cqs: Mutex<Slab<Cq>>,
    /// `mrc_qp_hint`s.
    pub hints: Mutex<Slab<Hint>>,
    /// `mrc_qp`s.
    pub qps: Mutex<Slab<Qp>>,
}

/// The process's tables.
pub static TABLES: LazyLock<Tables> = LazyLock::new(|| Tables {
    lists: Mutex::new(AddrMap::new("device list")),
    vctxs: Mutex::new(AddrMap::new("struct ibv_context")),
    pds: Mutex::new(AddrMap::new("struct ibv_pd")),
    mrs: Mutex::new(AddrMap::new("struct ibv_mr")),
    contexts: Mutex::new(Slab::new(Kind::Context)),
    channels: Mutex::new(Slab::new(Kind::Channel)),
    cqs: Mutex::new(Slab::new(Kind::Cq)),
    hints: Mutex::new(Slab::new(Kind::Hint)),
    qps: Mutex::new(Slab::new(Kind::Qp)),
});

/// Locks a table (a panic while it was held leaves it usable: every update is one insert or
/// remove).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Looks `token` up in `slab`.
pub fn get<T>(slab: &Mutex<Slab<T>>, token: Token, what: &str) -> crate::error::Result<Arc<T>> {
    lock(slab).get(token, what)
}
