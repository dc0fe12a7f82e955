extern crate std;

use super::*;

fn hdr(op: Opcode) -> TxhHeader {
    TxhHeader {
        opcode: op as u8,
        flags: flags::ACK_REQ,
        ev_format: EvFormat::Udp as u8,
        plane: 2,
        src_qpn: 0x12_3456.into(),
        dest_qpn: 0x65_4321.into(),
        psn: 0xFF_FFFF.into(),
        msn: 7.into(),
        ev_index: 200.into(),
        ev_value: 0xC0C8.into(),
        tx_ts: 0xDEAD_BEEF.into(),
        echo_ts: 0.into(),
    }
}

fn write_only() -> Txh {
    Txh {
        hdr: hdr(Opcode::WriteOnly),
        body: TxhBody::Write(TxhWrite {
            remote_va: 0x40_0000_1000.into(),
            rkey: 0x200.into(),
            dma_len: 1024.into(),
            imm: 0.into(),
            buf_handle: 3.into(),
            buf_offset: 0x1_0000_0400.into(),
        }),
    }
}

fn ack() -> Txh {
    Txh {
        hdr: hdr(Opcode::Ack),
        body: TxhBody::Ack(TxhAck {
            cum_psn: 10.into(),
            sack_base: 11.into(),
            sack_bitmap: 0b101.into(),
            ev_index: 5.into(),
            plane: 1,
            ecn_plane_mask: 2,
            ce_count: 1.into(),
            pkt_count: 3.into(),
            rsvd: [0; 8],
        }),
    }
}

fn nack() -> Txh {
    Txh {
        hdr: hdr(Opcode::Nack),
        body: TxhBody::Nack(TxhNack {
            reason: NackReason::Trimmed as u8,
            plane: 1,
            ev_index: 5.into(),
            psn: 12.into(),
            cum_psn: 10.into(),
            rsvd: [0; 20],
        }),
    }
}

fn probe(reply: bool) -> Txh {
    let p = TxhProbe {
        probe_id: 77.into(),
        ev_index: 9.into(),
        plane: 3,
        rsvd0: 0,
        rsvd: [0; 24],
    };
    Txh {
        hdr: hdr(if reply {
            Opcode::EvProbeReply
        } else {
            Opcode::EvProbe
        }),
        body: if reply {
            TxhBody::ProbeReply(p)
        } else {
            TxhBody::Probe(p)
        },
    }
}

#[test]
fn byte_literal_entry_decodes() {
    let mut b = [0u8; TXH_ENTRY_BYTES];
    b[0] = 0xc4; // WRITE_ONLY
    b[1] = 0x03; // ACK_REQ | RETRANSMIT
    b[3] = 1; // plane
    b[4..8].copy_from_slice(&[0x02, 0, 0, 0]); // src QPN 2
    b[8..12].copy_from_slice(&[0x05, 0, 0, 0]); // dest QPN 5
    b[12..16].copy_from_slice(&[0x10, 0, 0, 0]); // PSN 16
    b[20..24].copy_from_slice(&0xC001u32.to_le_bytes()); // EV value
    b[32..40].copy_from_slice(&0x1000u64.to_le_bytes()); // RETH VA
    b[40..44].copy_from_slice(&0x200u32.to_le_bytes()); // R_Key
    b[44..48].copy_from_slice(&64u32.to_le_bytes()); // DMA length
    b[52..56].copy_from_slice(&4u32.to_le_bytes()); // buffer handle
    b[56..64].copy_from_slice(&0x80u64.to_le_bytes()); // buffer offset
    let e = Txh::decode(&b).unwrap();
    assert_eq!(e.hdr.src_qpn.get(), 2);
    assert_eq!(e.hdr.dest_qpn.get(), 5);
    assert_eq!(e.hdr.psn.get(), 16);
    assert_eq!(e.hdr.ev_value.get(), 0xC001);
    assert_eq!(e.opcode(), Ok(Opcode::WriteOnly));
    assert!(e.has(flags::ACK_REQ) && e.has(flags::RETRANSMIT));
    let TxhBody::Write(w) = e.body else {
        panic!("a write body")
    };
    assert_eq!(w.remote_va.get(), 0x1000);
    assert_eq!(w.dma_len.get(), 64);
    assert_eq!(w.buf_handle.get(), 4);
    assert_eq!(w.buf_offset.get(), 0x80);
    assert_eq!(e.encode(), b);

    let mut a = [0u8; TXH_ENTRY_BYTES];
    a[0] = 0xd0; // ACK
    a[32..36].copy_from_slice(&9u32.to_le_bytes());
    a[40..48].copy_from_slice(&0xF0u64.to_le_bytes());
    let e = Txh::decode(&a).unwrap();
    assert!(
        matches!(e.body, TxhBody::Ack(x) if x.cum_psn.get() == 9 && x.sack_bitmap.get() == 0xF0)
    );
    assert_eq!(e.encode(), a);
}

#[test]
fn round_trip_and_every_check() {
    for e in [write_only(), ack(), nack(), probe(false), probe(true)] {
        assert_eq!(Txh::decode(&e.encode()), Ok(e));
    }
    let bad = |e: Txh, f: &dyn Fn(&mut [u8; TXH_ENTRY_BYTES])| {
        let mut b = e.encode();
        f(&mut b);
        Txh::decode(&b)
    };
    assert_eq!(
        bad(write_only(), &|b| b[0] = 0x01),
        Err(TxhError::Opcode(1))
    );
    assert_eq!(
        bad(write_only(), &|b| b[1] = 0x04),
        Err(TxhError::ReservedSet)
    );
    assert_eq!(bad(write_only(), &|b| b[2] = 3), Err(TxhError::BadValue(2)));
    assert_eq!(bad(write_only(), &|b| b[7] = 1), Err(TxhError::BadValue(4)));
    assert_eq!(
        bad(write_only(), &|b| b[11] = 1),
        Err(TxhError::BadValue(8))
    );
    assert_eq!(
        bad(write_only(), &|b| b[15] = 1),
        Err(TxhError::BadValue(12))
    );
    // An immediate only on the opcodes that carry one.
    assert_eq!(
        bad(write_only(), &|b| b[48] = 1),
        Err(TxhError::ReservedSet)
    );
    assert!(bad(write_only(), &|b| {
        b[0] = Opcode::WriteOnlyImm as u8;
        b[48] = 1;
    })
    .is_ok());
    assert_eq!(bad(ack(), &|b| b[35] = 1), Err(TxhError::BadValue(32)));
    assert_eq!(bad(ack(), &|b| b[39] = 1), Err(TxhError::BadValue(36)));
    assert_eq!(bad(ack(), &|b| b[63] = 1), Err(TxhError::ReservedSet));
    assert_eq!(bad(nack(), &|b| b[32] = 0xEE), Err(TxhError::BadValue(32)));
    assert_eq!(bad(nack(), &|b| b[39] = 1), Err(TxhError::BadValue(36)));
    assert_eq!(bad(nack(), &|b| b[43] = 1), Err(TxhError::BadValue(40)));
    assert_eq!(bad(nack(), &|b| b[44] = 1), Err(TxhError::ReservedSet));
    assert_eq!(
        bad(probe(false), &|b| b[39] = 1),
        Err(TxhError::ReservedSet)
    );
    assert_eq!(bad(probe(true), &|b| b[63] = 1), Err(TxhError::ReservedSet));
    assert_eq!(Txh::decode(&[0u8; 63]), Err(TxhError::Truncated));
}

#[test]
fn decode_never_panics() {
    let mut seed = 0x1234_5678_9abc_def0u64;
    let mut ok = 0;
    let bases = [write_only(), ack(), nack(), probe(false), probe(true)];
    for i in 0..25_000 {
        let mut b = bases[i % bases.len()].encode();
        for _ in 0..2 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            b[(seed % 64) as usize] = (seed >> 32) as u8;
        }
        ok += usize::from(Txh::decode(&b).is_ok());
        // Fully random bytes, every length up to one entry.
        let len = (seed >> 8) as usize % (TXH_ENTRY_BYTES + 1);
        let r: std::vec::Vec<u8> = (0..len).map(|k| (seed >> (k % 56)) as u8).collect();
        let _ = Txh::decode(&r);
    }
    assert!(ok > 0 && ok < 25_000, "{ok}");
}

#[test]
fn ring_room() {
    let r = TxhRing::new(4).unwrap();
    assert_eq!(r.byte_offset(17), 64);
    assert_eq!(r.free(5, 5), 16);
    assert_eq!(r.free(20, 5), 1);
    assert_eq!(r.free(21, 5), 0);
    assert_eq!(r.free(3, u32::MAX - 12), 0);
    assert_eq!(r.free(0, 7), 0, "inconsistent indices: no room");
    assert!(TxhRing::new(17).is_none());
}
