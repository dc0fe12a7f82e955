//! `mrc-sim`: the default run of the project (`cargo run --release` at the root).
//!
//! The cycle-level simulator of NICs and fabric is not built yet (issue 5). Until it lands this
//! binary says so, then shows the part of the path that exists: an SRv6 uSID data packet built by
//! `mrc-abi`, walked hop by hop through the source route the way fabric switches will walk it,
//! and checked at the destination.

use mrc_abi::wire::ipv6::{self, Ipv6Packet};
use mrc_abi::wire::srh::SrhPacket;
use mrc_abi::wire::usid::{self, Step};
use mrc_abi::wire::{ethernet, samples, EvFormat, Frame, Header};
use std::process::ExitCode;

fn main() -> ExitCode {
    println!(
        "mrc-sim: the NIC + fabric simulator has not landed yet (issue 5); nothing is simulated."
    );
    println!("What runs today: one MRC Write-with-Immediate over an SRv6 uSID route with an SRH,");
    println!("forwarded hop by hop by the uSID rule (keep the 32-bit block, shift by 16).\n");
    match walk() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn walk() -> Result<(), mrc_abi::wire::Error> {
    let frame = samples::write_only_imm(EvFormat::Srv6, true);
    let mut buf = vec![0u8; frame.buffer_len()];
    let len = frame.emit(&mut buf)?;
    println!(
        "sent {len}-byte frame, outer destination {}",
        frame.encap.outer().dst
    );
    for hop in 1.. {
        let (ip_bytes, rest) = buf[ethernet::HEADER_LEN..].split_at_mut(ipv6::HEADER_LEN);
        let mut outer = Ipv6Packet::new_checked(ip_bytes, Header::Ipv6)?;
        let mut srh = SrhPacket::new_checked(rest)?;
        match usid::advance(&mut outer, Some(&mut srh)) {
            Step::Hop(u) => println!(
                "  hop {hop}: switch takes uSID {u:#06x}, rewrites destination to {} (segments left {})",
                outer.dst(),
                srh.segments_left()
            ),
            Step::Deliver => {
                println!("  hop {hop}: route used up, deliver by the inner destination");
                break;
            }
        }
    }
    let arrived = Frame::parse(&buf)?;
    assert_eq!(arrived.mrc, frame.mrc);
    println!(
        "received: {:?} to QP {} PSN {}, {} payload bytes, UDP checksum intact",
        arrived.mrc.body.opcode(),
        arrived.mrc.bth.dest_qp,
        arrived.mrc.bth.psn,
        arrived.payload.len()
    );
    Ok(())
}
