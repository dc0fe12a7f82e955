//! Device-side checks of the simulated NIC through the driver's device layer.

use super::*;
use mrc_driver::device::{Device, DeviceConfig};

#[test]
fn boots_answers_admin_and_reports_removal() {
    let host = SimHost::clos_pair().unwrap();
    let nic = host.nic(0).unwrap();
    let dev = Device::open(nic.backend(), &DeviceConfig::default()).unwrap();
    assert_eq!(dev.attrs().num_ports, 4);
    assert_eq!(dev.attrs().limits.max_pds, 256);
    let pd = dev.alloc_pd().unwrap();
    let e = dev.dealloc_pd(pd + 100).unwrap_err();
    assert!(e.to_string().contains("NotFound"), "{e}");
    dev.dealloc_pd(pd).unwrap();
    let c = nic.counters();
    assert_eq!((c.admin_commands, c.admin_errors), (5, 1));
    nic.surprise_remove();
    assert!(dev.alloc_pd().unwrap_err().is_gone());
    assert!(dev.query_device().unwrap_err().is_gone(), "sticky");
}
