//! Step 3 publishes the loop's commands a group of [`PUBLISH_ENTRIES`] at a time, as it makes
//! them, and in the order one poll of the engine would give them.

use mrc_abi::device::csr::CsrEntry;
use mrc_abi::wire::EvFormat;
use mrc_firmware::engine::ev_state::EvConfig;
use mrc_firmware::engine::{CcProfile, EvProfile, QpAttrs, QpState};
use mrc_nicloop::{Datapath, LoopConfig, NicLoop, BUDGET, EVS, PLANES, PUBLISH_ENTRIES, QPS};

/// A datapath that takes every command and records each publication.
#[derive(Default)]
struct Recorder {
    pushes: Vec<Vec<CsrEntry>>,
}

impl Datapath for Recorder {
    fn peek_events(&mut self, _out: &mut [CsrEntry]) -> usize {
        0
    }
    fn consume_events(&mut self, _n: usize) {}
    fn orders_room(&mut self) -> usize {
        BUDGET
    }
    fn push_orders(&mut self, entries: &[CsrEntry]) -> usize {
        self.pushes.push(entries.to_vec());
        entries.len()
    }
    fn orders_written(&self) -> u32 {
        self.pushes.iter().map(Vec::len).sum::<usize>() as u32
    }
    fn orders_taken(&mut self) -> u32 {
        self.orders_written()
    }
}

/// A loop whose engine has every QP connected: their context writes wait as commands.
fn loop_with_commands() -> Box<NicLoop> {
    let mut l = Box::new(NicLoop::new(LoopConfig::DEFAULT).unwrap());
    let attrs = QpAttrs::connect(
        EvProfile {
            table: EvConfig::new(EVS as u16, PLANES as u8),
            format: EvFormat::Udp,
            value_base: 0xC000,
        },
        CcProfile::Fixed {
            cwnd_bytes: 1 << 20,
        },
        1,
    )
    .window(1, 8);
    for _ in 0..QPS {
        let q = l.engine_mut().create_qp().unwrap();
        for s in [QpState::Init, QpState::Rtr, QpState::Rts] {
            l.engine_mut().modify_qp(q, s, &attrs, 0).unwrap();
        }
    }
    l
}

#[test]
fn commands_are_published_in_groups_in_the_order_made() {
    let mut a = loop_with_commands();
    let mut b = loop_with_commands();
    let mut whole = [CsrEntry::ZERO; BUDGET];
    let n = b.poll_commands(&mut whole);
    assert!(
        n > 2 * PUBLISH_ENTRIES,
        "{n} commands: too few to show groups"
    );
    let mut dp = Recorder::default();
    assert!(a.step(1_000, &mut dp));
    assert!(dp.pushes.len() > 1);
    assert!(dp
        .pushes
        .iter()
        .all(|p| !p.is_empty() && p.len() <= PUBLISH_ENTRIES));
    let published: Vec<CsrEntry> = dp.pushes.concat();
    assert_eq!(published.as_slice(), &whole[..n]);
    assert_eq!(a.counters().commands, n as u64);
}
