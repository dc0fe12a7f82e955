extern crate std;

use super::*;

fn write_only() -> RxhEntry {
    RxhEntry {
        opcode: Opcode::WriteOnly as u8,
        flags: flags::ACK_REQ | flags::CE,
        ev_format: EvFormat::Udp as u8,
        plane: 2,
        dest_qpn: 0x12_3456.into(),
        psn: 0xFF_FFFF.into(),
        msn: 7.into(),
        ev_index: 200.into(),
        tx_ts: 0xDEAD_BEEF.into(),
        echo_ts: 0.into(),
        remote_va: 0x40_0000_1000.into(),
        rkey: 0x200.into(),
        dma_len: 1024.into(),
        imm: 0.into(),
        payload_len: 1024.into(),
        verdict: 0,
        drop_reason: 0,
        slot: 0.into(),
        place_len: 0.into(),
        place_offset: 0.into(),
    }
}

#[test]
fn byte_literal_entry_decodes() {
    let mut b = [0u8; RXH_ENTRY_BYTES];
    b[0] = 0xc4; // WRITE_ONLY
    b[1] = 0x01; // ACK_REQ
    b[3] = 1; // plane
    b[4..8].copy_from_slice(&[0x05, 0, 0, 0]); // QPN 5
    b[8..12].copy_from_slice(&[0x10, 0, 0, 0]); // PSN 16
    b[24..32].copy_from_slice(&0x1000u64.to_le_bytes());
    b[32..36].copy_from_slice(&0x200u32.to_le_bytes());
    b[36..40].copy_from_slice(&64u32.to_le_bytes());
    b[44..48].copy_from_slice(&64u32.to_le_bytes());
    let e = RxhEntry::decode(&b).unwrap();
    assert_eq!(e.dest_qpn.get(), 5);
    assert_eq!(e.psn.get(), 16);
    assert_eq!(e.remote_va.get(), 0x1000);
    assert_eq!(e.opcode(), Ok(Opcode::WriteOnly));
    assert!(e.has(flags::ACK_REQ) && !e.has(flags::CE));
    assert_eq!(e.encode(), b);
}

#[test]
fn round_trip_and_every_check() {
    let e = write_only();
    assert_eq!(RxhEntry::decode(&e.encode()), Ok(e));
    let bad = |f: &dyn Fn(&mut RxhEntry)| {
        let mut x = write_only();
        f(&mut x);
        RxhEntry::decode(&x.encode())
    };
    assert_eq!(
        bad(&|x| x.opcode = Opcode::Ack as u8),
        Err(RxhError::Opcode(0xd0))
    );
    assert_eq!(bad(&|x| x.opcode = 0x01), Err(RxhError::Opcode(0x01)));
    assert_eq!(bad(&|x| x.flags = 0x40), Err(RxhError::ReservedSet));
    assert_eq!(
        bad(&|x| x.flags = flags::TRIMMED_LAST_HOP),
        Err(RxhError::ReservedSet)
    );
    assert_eq!(bad(&|x| x.imm = 1.into()), Err(RxhError::ReservedSet));
    assert_eq!(bad(&|x| x.ev_format = 3), Err(RxhError::BadValue(2)));
    assert_eq!(
        bad(&|x| x.dest_qpn = QPN_LIMIT.into()),
        Err(RxhError::BadValue(4))
    );
    assert_eq!(
        bad(&|x| x.psn = QPN_LIMIT.into()),
        Err(RxhError::BadValue(8))
    );
    assert_eq!(bad(&|x| x.verdict = 1), Err(RxhError::NotPending));
    assert_eq!(
        bad(&|x| x.place_offset = 1.into()),
        Err(RxhError::NotPending)
    );
    // An immediate is fine on the opcodes that carry one.
    assert!(bad(&|x| {
        x.opcode = Opcode::WriteOnlyImm as u8;
        x.imm = 9.into();
    })
    .is_ok());
    // A probe carries no RETH (its probe id is in `rkey`).
    let probe = |x: &mut RxhEntry| {
        x.opcode = Opcode::EvProbe as u8;
        x.remote_va = 0.into();
        x.dma_len = 0.into();
        x.rkey = 77.into();
    };
    assert!(bad(&probe).is_ok());
    assert_eq!(
        bad(&|x| {
            probe(x);
            x.dma_len = 1.into();
        }),
        Err(RxhError::ReservedSet)
    );
    assert_eq!(RxhEntry::decode(&[0u8; 63]), Err(RxhError::Truncated));
}

#[test]
fn decode_never_panics() {
    let mut seed = 0x1234_5678_9abc_def0u64;
    let mut ok = 0;
    for _ in 0..20_000 {
        let mut b = write_only().encode();
        for _ in 0..3 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            b[(seed % 64) as usize] = (seed >> 32) as u8;
        }
        ok += usize::from(RxhEntry::decode(&b).is_ok());
    }
    assert!(ok > 0 && ok < 20_000, "{ok}");
}

#[test]
fn verdict_lands_on_the_entry_tail() {
    let v = RxhVerdict::place(3, 0x1_0000_0040, 1024);
    let mut b = write_only().encode();
    b[RXH_VERDICT_OFFSET..].copy_from_slice(&v.encode());
    let e = RxhEntry::read_from_bytes(&b[..]).unwrap();
    assert_eq!(e.verdict, RxhVerdictCode::Place as u8);
    assert_eq!(e.slot.get(), 3);
    assert_eq!(e.place_offset.get(), 0x1_0000_0040);
    assert_eq!(e.place_len.get(), 1024);
    assert_eq!(
        RxhVerdict::decode(&v.encode()),
        (Some(RxhVerdictCode::Place), v)
    );
    let d = RxhVerdict::dropped(RxhDropReason::Duplicate).encode();
    assert_eq!(&d[..2], &[3, 4]);
    assert_eq!(RxhVerdict::decode(&[9; 16]).0, None);
    assert_eq!(RxhVerdict::consumed().encode()[0], 2);
}

#[test]
fn ring_offsets() {
    let r = RxhRing::new(4).unwrap();
    assert_eq!(r.byte_offset(17), 64);
    assert!(RxhRing::new(17).is_none());
}
