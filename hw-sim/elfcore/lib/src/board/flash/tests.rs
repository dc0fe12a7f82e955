//! The device driven by the NIC's own flash driver (`mrc_nic_board::flash`), and raw.

use super::*;
use mrc_nic_board::flash::Flash;

fn pattern(n: usize, seed: u32) -> Vec<u8> {
    (0..n as u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) ^ seed) as u8 >> 1)
        .collect()
}

#[test]
fn driver_erases_programs_and_the_window_reads_it_back() {
    let mut dev = FlashDevice::new(FlashTiming::TYPICAL);
    let data = pattern(5000, 7);
    let at = 0x10_0000 + 100; // slot B, not page-aligned
    let port = ControllerPort {
        dev: &mut dev,
        now_ns: 0,
        step_ns: 10,
    };
    let mut f = Flash::new(port);
    f.erase_range(at, data.len() as u32).unwrap();
    f.program(at, &data).unwrap();
    let elapsed = f.release().now_ns;
    assert_eq!(dev.read(at, data.len()).unwrap(), &data[..]);
    // The bytes around it are still erased.
    assert_eq!(dev.read(at - 100, 100).unwrap(), &[ERASED; 100][..]);
    let c = dev.counters();
    assert_eq!(c.erases, 2, "[at, at+5000) touches two sectors");
    let pages = (100 + data.len() as u64).div_ceil(u64::from(PAGE_BYTES));
    assert_eq!(c.programs, pages, "one command per page touched");
    assert_eq!((c.refused, c.unerased_programs, c.bad_accesses), (0, 0, 0));
    // The driver waited out every command at typical timing.
    let busy =
        2 * FlashTiming::TYPICAL.erase_sector_ns + pages * FlashTiming::TYPICAL.program_page_ns;
    assert!(elapsed >= busy, "{elapsed} ns < {busy} ns of device time");
    assert!(!dev.busy(elapsed));
}

#[test]
fn programming_only_clears_bits() {
    let mut dev = FlashDevice::new(FlashTiming::INSTANT);
    let port = ControllerPort {
        dev: &mut dev,
        now_ns: 0,
        step_ns: 1,
    };
    let mut f = Flash::new(port);
    f.program(0, &[0xf0, 0x0f]).unwrap();
    f.program(0, &[0x3c, 0x0f]).unwrap();
    f.release();
    assert_eq!(dev.read(0, 2).unwrap(), &[0x30, 0x0f]);
    assert_eq!(
        dev.counters().unerased_programs,
        1,
        "0x3c over 0xf0 wanted bits 2-3 set"
    );
}

#[test]
fn a_command_while_busy_is_refused_and_changes_nothing() {
    let mut dev = FlashDevice::new(FlashTiming::TYPICAL);
    dev.write_reg(0, reg::ADDR, 0);
    dev.write_reg(0, reg::CMD, cmd::ERASE_SECTOR);
    assert_eq!(dev.read_reg(1, reg::STATUS), status::BUSY);
    dev.write_reg(2, reg::BUF, 0);
    dev.write_reg(2, reg::LEN, 4);
    dev.write_reg(2, reg::CMD, cmd::PROGRAM);
    assert_eq!(dev.read_reg(3, reg::STATUS), status::BUSY | status::ERROR);
    assert_eq!(dev.read_reg(3, reg::ERR_CAUSE), ErrCause::Busy as u32);
    assert_eq!(dev.read(0, 4).unwrap(), &[ERASED; 4]);
    // The error stays until cleared; BUSY ends with the erase.
    let done = FlashTiming::TYPICAL.erase_sector_ns;
    assert_eq!(dev.read_reg(done, reg::STATUS), status::ERROR);
    dev.write_reg(done, reg::STATUS, status::ERROR);
    assert_eq!(dev.read_reg(done, reg::STATUS), 0);
    assert_eq!(dev.read_reg(done, reg::ERR_CAUSE), 0);
    assert_eq!(dev.counters().refused, 1);
}

#[test]
fn every_bad_operand_is_refused_with_its_cause() {
    let cases = [
        (cmd::ERASE_SECTOR, 100, 0, ErrCause::Unaligned),
        (cmd::ERASE_SECTOR, FLASH_BYTES, 0, ErrCause::OutOfRange),
        (cmd::PROGRAM, 0, 0, ErrCause::BadLength),
        (cmd::PROGRAM, 0, PAGE_BYTES + 1, ErrCause::BadLength),
        (cmd::PROGRAM, 200, 100, ErrCause::CrossesPage),
        (cmd::PROGRAM, FLASH_BYTES, 4, ErrCause::OutOfRange),
        (7, 0, 0, ErrCause::UnknownCommand),
    ];
    for (command, addr, len, cause) in cases {
        let mut dev = FlashDevice::new(FlashTiming::INSTANT);
        dev.write_reg(0, reg::BUF, 0);
        dev.write_reg(0, reg::ADDR, addr);
        dev.write_reg(0, reg::LEN, len);
        dev.write_reg(0, reg::CMD, command);
        assert_eq!(
            dev.read_reg(0, reg::ERR_CAUSE),
            cause as u32,
            "{command} {addr:#x} {len}"
        );
        assert!(dev.contents().iter().all(|b| *b == ERASED));
        assert_eq!(dev.counters().refused, 1);
    }
}

#[test]
fn the_driver_waits_out_a_command_it_did_not_start_and_clears_a_stale_error() {
    let mut dev = FlashDevice::new(FlashTiming::TYPICAL);
    dev.write_reg(0, reg::ADDR, 0);
    dev.write_reg(0, reg::CMD, cmd::ERASE_SECTOR);
    let port = ControllerPort {
        dev: &mut dev,
        now_ns: 0,
        step_ns: 1000,
    };
    let mut f = Flash::new(port);
    f.program(SECTOR_BYTES, &[1, 2, 3]).unwrap();
    assert!(f.release().now_ns >= FlashTiming::TYPICAL.erase_sector_ns);
    assert_eq!(
        dev.counters().refused,
        0,
        "the driver never met a busy device"
    );
    // A refusal left behind by another user does not fail the next user's commands.
    dev.write_reg(0, reg::CMD, 9);
    assert_eq!(dev.counters().refused, 1);
    let now = FlashTiming::TYPICAL.erase_sector_ns * 2;
    let port = ControllerPort {
        dev: &mut dev,
        now_ns: now,
        step_ns: 1,
    };
    let mut f = Flash::new(port);
    assert_eq!(f.erase_sector(0), Ok(()));
    f.release();
    assert_eq!(dev.read(SECTOR_BYTES, 3).unwrap(), &[1, 2, 3]);
    assert_eq!(dev.read(0, 1).unwrap(), &[ERASED]);
}

#[test]
fn registers_that_do_not_exist_read_zero_and_are_counted() {
    let mut dev = FlashDevice::new(FlashTiming::INSTANT);
    assert_eq!(dev.read_reg(0, 0x40), 0);
    dev.write_reg(0, 0x44, 1);
    dev.write_reg(0, reg::BUF + 2, 1); // unaligned buffer word
    dev.write_reg(0, reg::BUF + PAGE_BYTES, 1); // one past the buffer
    assert_eq!(dev.counters().bad_accesses, 4);
    dev.write_reg(0, reg::BUF + 4, 0x1234_5678);
    assert_eq!(dev.read_reg(0, reg::BUF + 4), 0x1234_5678);
    assert_eq!(dev.read(FLASH_BYTES - 1, 2), None);
}
