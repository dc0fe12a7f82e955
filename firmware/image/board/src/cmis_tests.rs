extern crate std;
use std::vec;
use std::vec::Vec;

use super::*;
use embedded_hal::i2c::ErrorKind;
use embedded_hal_mock::eh1::delay::NoopDelay;
use embedded_hal_mock::eh1::i2c::{Mock, Transaction as T};

const A: u8 = MODULE_ADDR;

fn pad(s: &str) -> Vec<u8> {
    let mut v = s.as_bytes().to_vec();
    v.resize(16, b' ');
    v
}

/// The transactions of one healthy `link_state` read with the given flag bytes.
fn link(state: u8, tx_fault: u8, los: u8, lol: u8) -> Vec<T> {
    vec![
        T::write_read(A, vec![0], vec![0x18, 0x50, 0x00, state]),
        T::write(A, vec![127, 0x11]),
        T::write_read(A, vec![135], vec![tx_fault]),
        T::write_read(A, vec![147], vec![los, lol]),
    ]
}

const READY: u8 = 3 << 1;

#[test]
fn identity_is_read_from_lower_page_and_page_00() {
    let exp = [
        T::write_read(A, vec![0], vec![0x18, 0x52]),
        T::write(A, vec![127, 0x00]),
        T::write_read(A, vec![129], pad("ACME OPTICS")),
        T::write_read(A, vec![148], pad("QDD-400G-DR4")),
        T::write_read(A, vec![166], pad("SN0001")),
    ];
    let mut i2c = Mock::new(&exp);
    let mut t = Transceiver::new(i2c.clone(), 0, 4);
    let id = t.identify(&mut NoopDelay).unwrap();
    assert_eq!(id.identifier, 0x18);
    assert_eq!(id.cmis_revision, 0x52);
    assert_eq!(id.vendor_name.as_str(), "ACME OPTICS");
    assert_eq!(id.vendor_pn.as_str(), "QDD-400G-DR4");
    assert_eq!(id.vendor_sn.as_str(), "SN0001");
    i2c.done();
}

#[test]
fn non_cmis_module_is_refused() {
    let exp = [T::write_read(A, vec![0], vec![0x03, 0x00])]; // SFP
    let mut i2c = Mock::new(&exp);
    let mut t = Transceiver::new(i2c.clone(), 1, 4);
    assert_eq!(
        t.identify(&mut NoopDelay),
        Err(DownReason::NotCmis { identifier: 0x03 })
    );
    i2c.done();
}

#[test]
fn link_flaps_become_port_events_only_on_change() {
    let mut exp = Vec::new();
    exp.extend(link(READY, 0, 0, 0)); // up
    exp.extend(link(READY, 0, 0, 0)); // still up: no event
    exp.extend(link(READY, 0, 0b0100, 0)); // lane 2 LOS: down
    exp.extend(link(READY, 0, 0b0100, 0)); // still down: no event
    exp.extend(link(READY, 0, 0b1_0000, 0)); // LOS on lane 4, which this port does not use: up
    exp.extend(link(READY, 0, 0, 0b0001)); // CDR LOL lane 0: down
    exp.extend(link(READY, 0, 0, 0));
    exp.extend(link(READY, 0b0010, 0, 0)); // Tx fault
    let mut i2c = Mock::new(&exp);
    let mut t = Transceiver::new(i2c.clone(), 2, 4);
    let d = &mut NoopDelay;
    assert_eq!(t.poll(d), Some(PortEvent::Up { port: 2 }));
    assert_eq!(t.poll(d), None);
    assert_eq!(
        t.poll(d),
        Some(PortEvent::Down {
            port: 2,
            reason: DownReason::RxLos { lanes: 0b0100 }
        })
    );
    assert_eq!(t.poll(d), None);
    assert_eq!(t.poll(d), Some(PortEvent::Up { port: 2 }));
    assert_eq!(
        t.poll(d),
        Some(PortEvent::Down {
            port: 2,
            reason: DownReason::RxLol { lanes: 1 }
        })
    );
    assert_eq!(t.poll(d), Some(PortEvent::Up { port: 2 }));
    assert_eq!(
        t.poll(d),
        Some(PortEvent::Down {
            port: 2,
            reason: DownReason::TxFault { lanes: 2 }
        })
    );
    assert_eq!(t.counters().downs, 3);
    assert_eq!(t.counters().ups, 3);
    i2c.done();
}

#[test]
fn a_removed_module_is_a_port_down_after_retries() {
    let mut exp = link(READY, 0, 0, 0);
    for _ in 0..RETRIES {
        exp.push(T::write_read(A, vec![0], vec![0; 4]).with_error(ErrorKind::Other));
    }
    let mut i2c = Mock::new(&exp);
    let mut t = Transceiver::new(i2c.clone(), 3, 8);
    let d = &mut NoopDelay;
    assert_eq!(t.poll(d), Some(PortEvent::Up { port: 3 }));
    assert_eq!(
        t.poll(d),
        Some(PortEvent::Down {
            port: 3,
            reason: DownReason::ModuleLost
        })
    );
    assert_eq!(t.counters().i2c_errors, RETRIES);
    i2c.done();
}

#[test]
fn a_module_not_ready_is_down() {
    let exp = [T::write_read(A, vec![0], vec![0x19, 0x50, 0, 5 << 1])];
    let mut i2c = Mock::new(&exp);
    let mut t = Transceiver::new(i2c.clone(), 0, 8);
    assert_eq!(
        t.poll(&mut NoopDelay),
        Some(PortEvent::Down {
            port: 0,
            reason: DownReason::NotReady(ModuleState::Fault)
        })
    );
    i2c.done();
}

#[test]
fn retries_wait_with_delay_ns() {
    // A transient NACK, then success: the delay is asked for once.
    struct CountDelay(u32);
    impl DelayNs for CountDelay {
        fn delay_ns(&mut self, ns: u32) {
            self.0 += ns;
        }
    }
    let exp = [
        T::write_read(A, vec![0], vec![0; 2]).with_error(ErrorKind::Other),
        T::write_read(A, vec![0], vec![0x03, 0]),
    ];
    let mut i2c = Mock::new(&exp);
    let mut t = Transceiver::new(i2c.clone(), 0, 8);
    let mut d = CountDelay(0);
    assert_eq!(
        t.identify(&mut d),
        Err(DownReason::NotCmis { identifier: 3 })
    );
    assert_eq!(d.0, RETRY_DELAY_US * 1000);
    i2c.done();
}
