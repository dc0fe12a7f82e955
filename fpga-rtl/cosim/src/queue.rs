//! `csr_event_queue.sv` against [`RingModel`]: the ABI ring rules of `mrc_abi::device::csr`.

use crate::{mismatch, Mismatch, Report, Rng, Rtl, Words};
use mrc_abi::device::csr::{
    CsrEvent, CsrRing, EvUpdate, Retransmit, SendProbe, WindowUpdate, ENTRY_BYTES,
};
use mrc_abi::device::EvState;
use mrc_abi::Psn;
use std::collections::VecDeque;

/// log2 entries of the RTL instance (`csr_event_queue` parameter LOG2_ENTRIES).
pub const LOG2_ENTRIES: u8 = 4;

/// Producer/consumer model of one CSR queue: free-running indices, drop-and-count when full.
#[derive(Debug, Clone)]
pub struct RingModel {
    ring: CsrRing,
    entries: VecDeque<[u8; ENTRY_BYTES]>,
    /// Free-running producer index.
    pub producer: u32,
    /// Free-running consumer index.
    pub consumer: u32,
    /// Entries dropped because the ring was full.
    pub overflow: u32,
}

impl RingModel {
    /// An empty ring of `2^log2` entries.
    pub fn new(log2: u8) -> Self {
        RingModel {
            ring: CsrRing::new(log2).expect("log2 <= 16"),
            entries: VecDeque::new(),
            producer: 0,
            consumer: 0,
            overflow: 0,
        }
    }
    /// Producer: append or drop (returns false when dropped).
    pub fn push(&mut self, e: [u8; ENTRY_BYTES]) -> bool {
        if self.ring.is_full(self.producer, self.consumer) {
            self.overflow = self.overflow.wrapping_add(1);
            false
        } else {
            self.entries.push_back(e);
            self.producer = self.producer.wrapping_add(1);
            true
        }
    }
    /// The entry at the consumer index.
    pub fn front(&self) -> Option<&[u8; ENTRY_BYTES]> {
        self.entries.front()
    }
    /// Consumer: take the entry at the consumer index.
    pub fn pop(&mut self) -> Option<[u8; ENTRY_BYTES]> {
        let e = self.entries.pop_front()?;
        self.consumer = self.consumer.wrapping_add(1);
        Some(e)
    }
    /// The 32-bit word at byte offset `addr` of the queue's `CsrQueueRegs` block.
    pub fn reg(&self, base: u32, addr: usize) -> u32 {
        use core::mem::offset_of;
        use mrc_abi::device::csr::CsrQueueRegs as R;
        match addr & !3 {
            a if a == offset_of!(R, base) => base,
            a if a == offset_of!(R, log2_entries) => u32::from(self.ring.log2_entries),
            a if a == offset_of!(R, producer) => self.producer,
            a if a == offset_of!(R, consumer) => self.consumer,
            a if a == offset_of!(R, overflow) => self.overflow,
            _ => 0,
        }
    }
}

fn entry(rng: &mut Rng) -> [u8; ENTRY_BYTES] {
    let qpn = rng.below(1 << 24) as u32;
    let ev = rng.below(4096) as u16;
    // Entries of every firmware-command kind the queue carries most (the queue does not look
    // inside them: any 32 bytes must come out as they went in).
    let ev = match rng.below(4) {
        0 => CsrEvent::Retransmit(Retransmit::new(
            qpn,
            Psn::new(rng.next_u64() as u32),
            ev,
            (rng.below(2)) as u8,
        )),
        1 => CsrEvent::EvUpdate(EvUpdate::new(qpn, ev, EvState::Good, rng.below(8) as u8)),
        2 => CsrEvent::SendProbe(SendProbe::new(
            qpn,
            ev,
            rng.below(8) as u8,
            rng.next_u64() as u32,
        )),
        _ => CsrEvent::WindowUpdate(WindowUpdate::new(qpn, rng.next_u64())),
    };
    ev.encode().0
}

/// The input words of one clock: `push` offered on the producer side (`None`: `s_valid`
/// low), the consumer's `m_ready`, the register read address.
pub(crate) fn encode(push: Option<&[u8; ENTRY_BYTES]>, m_ready: bool, reg_addr: usize) -> Words {
    let mut w = Words::default();
    w.b(push.is_some())
        .bytes_le(push.unwrap_or(&[0; ENTRY_BYTES]))
        .b(m_ready)
        .u(reg_addr as u64, 5);
    w
}

/// One clock's outputs: `s_ready`, `m_valid`, `m_data`, `reg_rdata`.
pub(crate) fn decode(mut o: crate::Out) -> (bool, bool, [u8; ENTRY_BYTES], u32) {
    let s_ready = o.b();
    let m_valid = o.b();
    let mut data = [0u8; ENTRY_BYTES];
    data.copy_from_slice(&o.bytes_le(ENTRY_BYTES * 8));
    let rdata = o.u(32) as u32;
    (s_ready, m_valid, data, rdata)
}

/// Input `i` of the timing measurement (`crate::timing`): a push of a random entry when
/// `valid`, the consumer always ready.
pub(crate) fn timing_input(i: usize, valid: bool) -> Words {
    let data = entry(&mut Rng::new(i as u64));
    let mut w = Words::default();
    w.b(valid).bytes_le(&data).b(true).u(0, 5);
    w
}

/// Drive the queue for `cycles` clocks; bursts of pushes and stalls make it fill and overflow.
pub fn run(mut rtl: Rtl, seed: u64, cycles: u64) -> Result<Report, Mismatch> {
    let mut rng = Rng::new(seed);
    let mut model = RingModel::new(LOG2_ENTRIES);
    let mut compared = 0u64;
    let mut phase_push = 50;
    let mut phase_pop = 50;
    for cycle in 0..cycles {
        if cycle % 64 == 0 {
            phase_push = rng.below(101);
            phase_pop = rng.below(101);
        }
        let push = rng.chance(phase_push);
        let data = entry(&mut rng);
        let m_ready = rng.chance(phase_pop);
        let addr = rng.below(8) * 4;
        let (s_ready, m_valid, m_data, rdata) =
            decode(rtl.step(&encode(push.then_some(&data), m_ready, addr as usize)));
        let want_reg = model.reg(0, addr as usize);
        if !s_ready || rdata != want_reg {
            return Err(mismatch(
                cycle,
                compared,
                format!("s_ready {s_ready}, reg @{addr:#x}: rtl {rdata:#x}, model {want_reg:#x}"),
            ));
        }
        if m_valid != model.front().is_some() {
            return Err(mismatch(cycle, compared, format!("m_valid rtl {m_valid}")));
        }
        // Push sees the occupancy at the start of the clock, before this clock's pop.
        if push {
            model.push(data);
            compared += 1;
        }
        if m_valid && m_ready {
            let want = model.pop().unwrap_or([0; ENTRY_BYTES]);
            if m_data[..] != want[..] {
                return Err(mismatch(
                    cycle,
                    compared,
                    format!(
                        "popped {:02x?}, model {:02x?} ({:?})",
                        m_data,
                        want,
                        CsrEvent::decode(&want)
                    ),
                ));
            }
            compared += 1;
        }
    }
    Ok(Report {
        cycles,
        transactions: compared,
    })
}
