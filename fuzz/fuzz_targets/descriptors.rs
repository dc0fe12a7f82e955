//! Descriptor and admin decode: any bytes, read as each host/NIC descriptor, decode to a typed
//! value or a typed error. Never a panic; the register-chain walk stays within its read limit.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mrc_abi::device::admin::{AdminCmd, AdminResp};
use mrc_abi::device::cqe::Cqe;
use mrc_abi::device::csr::CsrEvent;
use mrc_abi::device::event::EventRecord;
use mrc_abi::device::regs;
use mrc_abi::device::wqe::{RecvWqe, SendWqe};
use zerocopy::FromBytes;

fn read<T: FromBytes>(data: &[u8]) -> Option<T> {
    T::read_from_prefix(data).ok().map(|(t, _)| t)
}

fuzz_target!(|data: &[u8]| {
    if let Some(w) = read::<SendWqe>(data) {
        let _ = w.decode();
    }
    if let Some(w) = read::<RecvWqe>(data) {
        let _ = w.decode();
    }
    if let Some(c) = read::<Cqe>(data) {
        let _ = c.decode();
    }
    if let Some(e) = read::<EventRecord>(data) {
        let _ = e.decode();
    }
    if let Some(a) = read::<AdminCmd>(data) {
        let _ = a.decode();
    }
    if let Some(a) = read::<AdminResp>(data) {
        let _ = a.decode();
    }
    // A CSR entry that decodes encodes back to the same 32 bytes (no field is lost or
    // normalised behind the checker's back).
    if let Ok(e) = CsrEvent::decode(data) {
        assert_eq!(&e.encode().0[..], &data[..32]);
    }
    let _ = regs::discover_bytes(data);
});
