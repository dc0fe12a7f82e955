//! Safety checks, run after every tick and at the end: every completion succeeds and arrives
//! in posting order, exactly once; a completion means its bytes (and those of every earlier
//! message of the connection) are in place; at the end every destination byte is right and
//! nothing else in the region was written.

use mrc_driver::api::{CqeOpcode, CqeStatus, WorkCompletion};

use super::harness::Conn;
use super::plan::{ConnPlan, Msg};

/// What one connection has seen so far.
pub struct Progress {
    /// Signaled messages in posting order (indices into the plan's messages).
    signaled: Vec<usize>,
    /// Write-with-Immediate messages in posting order.
    imms: Vec<usize>,
    sends_seen: usize,
    recvs_seen: usize,
    /// Messages `..placed` were checked in place.
    placed: usize,
}

impl Progress {
    pub fn new(c: &ConnPlan) -> Progress {
        let idx = |f: fn(&Msg) -> bool| {
            c.msgs
                .iter()
                .enumerate()
                .filter(|(_, m)| f(m))
                .map(|(k, _)| k)
                .collect()
        };
        Progress {
            signaled: idx(|m| m.signaled),
            imms: idx(|m| m.imm.is_some()),
            sends_seen: 0,
            recvs_seen: 0,
            placed: 0,
        }
    }

    /// Every completion expected has arrived.
    pub fn done(&self) -> bool {
        self.sends_seen == self.signaled.len() && self.recvs_seen == self.imms.len()
    }

    /// Completions still missing.
    pub fn missing(&self) -> usize {
        self.signaled.len() - self.sends_seen + self.imms.len() - self.recvs_seen
    }

    /// Polls both CQs of `conn` and checks what arrived. Returns the completions seen.
    pub fn poll(&mut self, c: &ConnPlan, conn: &mut Conn) -> Result<u64, String> {
        let mut buf = [WorkCompletion::default(); 32];
        let mut seen = 0;
        loop {
            let k = conn
                .req
                .scq
                .poll(&mut buf)
                .map_err(|e| format!("poll: {e}"))?;
            for w in &buf[..k] {
                let Some(&m) = self.signaled.get(self.sends_seen) else {
                    return Err(format!("an extra send completion {w:?}"));
                };
                let want = &c.msgs[m];
                if w.status != CqeStatus::Success {
                    return Err(format!("send completion of message {m} failed: {w:?}"));
                }
                if w.wr_id != want.wr_id {
                    return Err(format!(
                        "send completion out of order: got wr_id {:#x}, expected {:#x} \
                         (message {m})",
                        w.wr_id, want.wr_id
                    ));
                }
                self.sends_seen += 1;
                // Acknowledged: this message and all earlier ones are in place.
                self.check_placed(c, conn, m + 1)?;
            }
            seen += k as u64;
            if k == 0 {
                break;
            }
        }
        loop {
            let k = conn
                .resp
                .rcq
                .poll(&mut buf)
                .map_err(|e| format!("poll: {e}"))?;
            for w in &buf[..k] {
                let Some(&m) = self.imms.get(self.recvs_seen) else {
                    return Err(format!("an extra receive completion {w:?}"));
                };
                let want = &c.msgs[m];
                let exp = (want.recv_wr_id(), want.imm, want.len() as u32);
                if w.status != CqeStatus::Success || w.opcode != CqeOpcode::RecvWriteImm {
                    return Err(format!("receive completion of message {m} failed: {w:?}"));
                }
                if (w.wr_id, w.imm, w.byte_len) != exp {
                    return Err(format!(
                        "receive completion {w:?} is not the next expected (message {m}: \
                         wr_id, imm, len {exp:x?})"
                    ));
                }
                self.recvs_seen += 1;
                // An immediate completes only once every earlier PSN is placed.
                self.check_placed(c, conn, m + 1)?;
            }
            seen += k as u64;
            if k == 0 {
                break;
            }
        }
        Ok(seen)
    }

    /// Messages `..upto` are in place at the responder, byte for byte.
    fn check_placed(&mut self, c: &ConnPlan, conn: &Conn, upto: usize) -> Result<(), String> {
        for m in self.placed..upto {
            let msg = &c.msgs[m];
            let mut got = vec![0u8; msg.len() as usize];
            conn.resp
                .mr
                .read(msg.remote_off, &mut got)
                .map_err(|e| format!("read: {e}"))?;
            let want = expected(msg, &conn.src);
            if let Some(i) = (0..got.len()).find(|&i| got[i] != want[i]) {
                return Err(format!(
                    "message {m} completed but its byte {i} is {:#x}, expected {:#x}",
                    got[i], want[i]
                ));
            }
        }
        self.placed = self.placed.max(upto);
        Ok(())
    }
}

/// The bytes message `m` carries.
fn expected(m: &Msg, src: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(m.len() as usize);
    for &(o, l) in &m.pieces {
        out.extend_from_slice(&src[o as usize..o as usize + l as usize]);
    }
    out
}

/// The whole responder region: every message's bytes where it was sent, zeros elsewhere.
/// Returns the bytes compared.
pub fn region_exact(c: &ConnPlan, conn: &Conn) -> Result<u64, String> {
    let mut want = vec![0u8; c.region as usize];
    for m in &c.msgs {
        let at = m.remote_off as usize;
        want[at..at + m.len() as usize].copy_from_slice(&expected(m, &conn.src));
    }
    let mut got = vec![0u8; c.region as usize];
    conn.resp
        .mr
        .read(0, &mut got)
        .map_err(|e| format!("read: {e}"))?;
    if let Some(i) = (0..got.len()).find(|&i| got[i] != want[i]) {
        return Err(format!(
            "destination byte {i} of the region is {:#x}, expected {:#x}",
            got[i], want[i]
        ));
    }
    if conn.req.qp.sq_free() != conn.req.qp.sq_depth() {
        return Err(format!(
            "{} send WQEs never retired",
            conn.req.qp.sq_depth() - conn.req.qp.sq_free()
        ));
    }
    Ok(c.region)
}
