//! Handles: how a C pointer names a library object, and how a NULL, foreign or stale one is
//! caught before anything is touched.
//!
//! - **Opaque MRC objects** (`mrc_context`, `mrc_cq`, `mrc_qp`, `mrc_qp_hint`,
//!   `mrc_comp_channel`) are never dereferenced by the caller, so their "pointers" are tokens:
//!   a kind tag (bits 63..56), the slot's generation (bits 55..24) and the slot index (bits
//!   23..0). A token of another kind, of a freed object or of a slot reused since is refused
//!   exactly, forever (generations only grow).
//! - **Verbs objects** (`ibv_context`, `ibv_pd`, `ibv_mr`, device lists) are real C structs the
//!   caller reads, so their handle is their address. [`AddrMap`] knows every live one; a freed
//!   struct's memory is held in a quarantine of the last [`QUARANTINE`] frees before it is
//!   released, so a stale pointer is refused unless that many objects of its kind were freed
//!   since and the allocator reused its address for a new one.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use crate::error::{CapiError, Result};

/// Kind tags of opaque handles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// `struct mrc_context *`.
    Context = 0xc1,
    /// `struct mrc_cq *` (completion and EV event CQs).
    Cq = 0xc2,
    /// `struct mrc_qp *`.
    Qp = 0xc3,
    /// `struct mrc_qp_hint *`.
    Hint = 0xc4,
    /// `struct mrc_comp_channel *`.
    Channel = 0xc5,
}

impl Kind {
    /// The C type's name, for messages.
    pub fn c_name(self) -> &'static str {
        match self {
            Kind::Context => "struct mrc_context",
            Kind::Cq => "struct mrc_cq",
            Kind::Qp => "struct mrc_qp",
            Kind::Hint => "struct mrc_qp_hint",
            Kind::Channel => "struct mrc_comp_channel",
        }
    }
}

/// Most live objects of one kind (24-bit slot index).
pub const MAX_OBJECTS: usize = 1 << 24;

/// An opaque handle value (what the C caller holds as a pointer).
pub type Token = u64;

struct Slot<T> {
    generation: u32,
    value: Option<Arc<T>>,
}

/// Objects of one [`Kind`], named by generation-checked tokens.
pub struct Slab<T> {
    kind: Kind,
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
    live: usize,
}

impl<T> Slab<T> {
    /// An empty slab of `kind` handles.
    pub const fn new(kind: Kind) -> Slab<T> {
        Slab {
            kind,
            slots: Vec::new(),
            free: Vec::new(),
            live: 0,
        }
    }

    fn token(&self, index: u32, generation: u32) -> Token {
        (u64::from(self.kind as u8) << 56) | (u64::from(generation) << 24) | u64::from(index)
    }

    /// Stores `value` and returns its token.
    ///
    /// # Errors
    /// `ENOMEM` when [`MAX_OBJECTS`] are live.
    pub fn insert(&mut self, value: Arc<T>) -> Result<Token> {
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                if self.slots.len() >= MAX_OBJECTS {
                    return Err(CapiError::new(
                        crate::error::ENOMEM,
                        format!("{} objects of {} are live", MAX_OBJECTS, self.kind.c_name()),
                    ));
                }
                self.slots.push(Slot {
                    generation: 0,
                    value: None,
                });
                (self.slots.len() - 1) as u32
            }
        };
        let slot = &mut self.slots[index as usize];
        // A slot's generation moves on every reuse, so older tokens never match again. After
        // 2^32 reuses of one slot it is retired instead of wrapping.
        slot.generation = slot.generation.wrapping_add(1);
        slot.value = Some(value);
        let generation = slot.generation;
        self.live += 1;
        Ok(self.token(index, generation))
    }

    fn locate(&self, token: Token, what: &str) -> Result<usize> {
        if token == 0 {
            return Err(CapiError::inval(format!("{what} is NULL")));
        }
        let tag = (token >> 56) as u8;
        if tag != self.kind as u8 {
            return Err(CapiError::inval(format!(
                "{what} ({token:#x}) is not a {} handle of this library",
                self.kind.c_name()
            )));
        }
        let index = (token & 0xff_ffff) as usize;
        let generation = (token >> 24) as u32;
        match self.slots.get(index) {
            Some(s) if s.generation == generation && s.value.is_some() => Ok(index),
            Some(_) => Err(CapiError::inval(format!(
                "{what} ({token:#x}) is a stale {}: it was destroyed",
                self.kind.c_name()
            ))),
            None => Err(CapiError::inval(format!(
                "{what} ({token:#x}) is not a {} handle of this library",
                self.kind.c_name()
            ))),
        }
    }

    /// The live object named by `token`.
    ///
    /// # Errors
    /// `EINVAL` naming `what` for NULL, another kind, a stale or an unknown handle.
    pub fn get(&self, token: Token, what: &str) -> Result<Arc<T>> {
        let i = self.locate(token, what)?;
        Ok(self.slots[i]
            .value
            .clone()
            .expect("located slots hold a value"))
    }

    /// Removes the object named by `token` (its slot's next use gets a new generation).
    ///
    /// # Errors
    /// As [`Slab::get`].
    pub fn remove(&mut self, token: Token, what: &str) -> Result<Arc<T>> {
        let i = self.locate(token, what)?;
        let v = self.slots[i]
            .value
            .take()
            .expect("located slots hold a value");
        self.live -= 1;
        if self.slots[i].generation != u32::MAX {
            self.free.push(i as u32);
        }
        Ok(v)
    }

    /// Live objects.
    pub fn len(&self) -> usize {
        self.live
    }

    /// Every live object with its token.
    pub fn iter(&self) -> impl Iterator<Item = (Token, &Arc<T>)> {
        self.slots.iter().enumerate().filter_map(|(i, s)| {
            s.value
                .as_ref()
                .map(|v| (self.token(i as u32, s.generation), v))
        })
    }

    /// No live object.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }
}

/// Freed verbs structs held back from the allocator (per kind).
pub const QUARANTINE: usize = 1024;

/// Live verbs objects by the address of their C struct, with a quarantine of freed ones.
pub struct AddrMap<T> {
    what: &'static str,
    live: HashMap<usize, Arc<T>>,
    quarantine: VecDeque<Arc<T>>,
}

impl<T> AddrMap<T> {
    /// An empty map of `what` objects (`"struct ibv_pd"`).
    pub fn new(what: &'static str) -> AddrMap<T> {
        AddrMap {
            what,
            live: HashMap::new(),
            quarantine: VecDeque::new(),
        }
    }

    /// Registers `value`, whose C struct is at `addr`.
    pub fn insert(&mut self, addr: usize, value: Arc<T>) {
        self.live.insert(addr, value);
    }

    /// The live object at `addr`.
    ///
    /// # Errors
    /// `EINVAL` naming `what` for NULL or an address that is not a live object of this kind.
    pub fn get(&self, addr: usize, what: &str) -> Result<Arc<T>> {
        if addr == 0 {
            return Err(CapiError::inval(format!("{what} is NULL")));
        }
        self.live.get(&addr).cloned().ok_or_else(|| {
            CapiError::inval(format!(
                "{what} ({addr:#x}) is not a live {} of this library (freed, or never made here)",
                self.what
            ))
        })
    }

    /// Unregisters the object at `addr`; its memory stays allocated while it is among the last
    /// [`QUARANTINE`] freed.
    ///
    /// # Errors
    /// As [`AddrMap::get`].
    pub fn remove(&mut self, addr: usize, what: &str) -> Result<Arc<T>> {
        self.get(addr, what)?;
        let v = self.live.remove(&addr).expect("checked above");
        if self.quarantine.len() == QUARANTINE {
            self.quarantine.pop_front();
        }
        self.quarantine.push_back(v.clone());
        Ok(v)
    }

    /// Live objects.
    pub fn len(&self) -> usize {
        self.live.len()
    }

    /// No live object.
    pub fn is_empty(&self) -> bool {
        self.live.is_empty()
    }

    /// Every live object.
    pub fn values(&self) -> impl Iterator<Item = &Arc<T>> {
        self.live.values()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_catch_null_kind_stale_and_unknown() {
        let mut s: Slab<u32> = Slab::new(Kind::Cq);
        let a = s.insert(Arc::new(1)).unwrap();
        assert_eq!(*s.get(a, "cq").unwrap(), 1);
        assert!(s.get(0, "cq").unwrap_err().message.contains("NULL"));
        let qp_like = (a & !(0xff << 56)) | (u64::from(Kind::Qp as u8) << 56);
        assert!(s
            .get(qp_like, "cq")
            .unwrap_err()
            .message
            .contains("not a struct mrc_cq"));
        s.remove(a, "cq").unwrap();
        assert!(s.get(a, "cq").unwrap_err().message.contains("stale"));
        // The slot is reused with a new generation: the old token stays stale.
        let b = s.insert(Arc::new(2)).unwrap();
        assert_ne!(a, b);
        assert_eq!(a & 0xff_ffff, b & 0xff_ffff, "same slot");
        assert!(s.get(a, "cq").unwrap_err().message.contains("stale"));
        assert_eq!(*s.get(b, "cq").unwrap(), 2);
        assert!(s.remove(a, "cq").is_err());
        let far = b + 1000;
        assert!(s.get(far, "cq").unwrap_err().message.contains("not a"));
        assert_eq!(s.len(), 1);
    }

    #[test]
    fn addresses_are_known_until_removed() {
        let mut m: AddrMap<u8> = AddrMap::new("struct ibv_pd");
        m.insert(0x1000, Arc::new(7));
        assert_eq!(*m.get(0x1000, "pd").unwrap(), 7);
        assert!(m.get(0, "pd").unwrap_err().message.contains("NULL"));
        assert!(m.get(0x2000, "pd").is_err());
        let v = m.remove(0x1000, "pd").unwrap();
        assert_eq!(Arc::strong_count(&v), 2, "quarantined");
        assert!(m
            .get(0x1000, "pd")
            .unwrap_err()
            .message
            .contains("not a live"));
        for i in 0..QUARANTINE {
            m.insert(0x10_0000 + i, Arc::new(0));
            m.remove(0x10_0000 + i, "pd").unwrap();
        }
        assert_eq!(Arc::strong_count(&v), 1, "released after QUARANTINE frees");
    }
}
