//! Port link changes the firmware learns itself (its transceiver monitor, over I2C/CMIS): the
//! same path as an admin state change ([`mrc_firmware::admin::port_changed`]).

use mrc_firmware::admin::port_changed;
use mrc_firmware::capacity::Capacity;

use crate::admin::RegionCommand;
use crate::{Fw, NicLoop};

impl<C: Capacity> NicLoop<C> {
    /// Port `port`'s link is now `up` (the image's transceiver monitor saw its module go, come
    /// back, or raise or clear loss of signal). When the port's operational state changes, the
    /// loop posts the host's PORT_DOWN / PORT_UP event and the engine takes the plane down
    /// (retiring every EV on it) or brings it back, exactly as SET_PORT_ADMIN_STATE does.
    /// Returns whether the link state changed; a port the NIC does not have is counted in
    /// `LoopCounters::bad_link_ports` and changes nothing.
    pub fn set_port_link(&mut self, now_ns: u64, port: usize, up: bool) -> bool {
        self.fw.set_port_link(now_ns, port, up)
    }
}

impl<C: Capacity> Fw<C> {
    fn set_port_link(&mut self, now_ns: u64, port: usize, up: bool) -> bool {
        let Some(link) = self.ports.link.get(port).copied() else {
            self.counters.bad_link_ports += 1;
            return false;
        };
        if link == up {
            return false;
        }
        let was = link && self.ports.admin[port];
        self.ports.link[port] = up;
        self.counters.link_changes += 1;
        let mut regions = RegionCommand::new(self.mtu_payload);
        // (a link change sends no update command)
        let mut fw = crate::admin::NoFirmware;
        let (mut env, mut qps) = self.parts(&mut regions, &mut fw);
        port_changed(&mut env, &mut qps, now_ns, port, was);
        true
    }
}
