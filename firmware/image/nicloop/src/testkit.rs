//! The loop as a test-kit NIC's firmware (feature `testkit`): the image's self-test runs the
//! two-NIC checks and the cost stream through it, without admin tables.

use mrc_abi::device::csr::CsrEntry;
use mrc_firmware::capacity::Capacity;
use mrc_firmware::engine::Engine;
use mrc_firmware::testkit::nic::Firmware;

use crate::NicLoop;

impl<C: Capacity> Firmware<C> for NicLoop<C> {
    fn engine(&self) -> &Engine<C> {
        NicLoop::engine(self)
    }
    fn engine_mut(&mut self) -> &mut Engine<C> {
        NicLoop::engine_mut(self)
    }
    fn handle_events(&mut self, now_ns: u64, events: &[CsrEntry]) -> usize {
        NicLoop::handle_events(self, now_ns, events)
    }
    fn poll_commands(&mut self, out: &mut [CsrEntry]) -> usize {
        NicLoop::poll_commands(self, out)
    }
    fn commands_pending(&self) -> bool {
        NicLoop::commands_pending(self)
    }
    fn handle_timeout(&mut self, now_ns: u64) -> bool {
        NicLoop::handle_timeout(self, now_ns)
    }
    fn poll_timeout(&self) -> Option<u64> {
        NicLoop::poll_timeout(self)
    }
}
