//! Every refusal named in the update contract, each with the running slot left in place.
use mrc_fw_update::header::HeaderError;
use mrc_fw_update::sign::{sign_header, ImageMeta};
use mrc_fw_update::slots::{BootControl, BootDecision, Slot, SlotState};
use mrc_fw_update::test_key;
use mrc_fw_update::update::{RamSlots, UpdateError, UpdatePolicy, Updater};
use proptest::prelude::*;

const CAP: usize = 8192;
const POLICY: UpdatePolicy = UpdatePolicy {
    abi_major: 1,
    public_key: test_key::PUBLIC_KEY,
};

fn pack_image(body: &[u8], meta: &ImageMeta, seed: &[u8; 32]) -> Vec<u8> {
    let mut v = sign_header(body, meta, seed).to_vec();
    v.extend_from_slice(body);
    v
}

fn body() -> Vec<u8> {
    (0..3000u32).map(|i| (i * 31 + 7) as u8).collect()
}

fn good() -> Vec<u8> {
    pack_image(&body(), &ImageMeta::new(2, 1), &test_key::SEED)
}

/// Stream `image` in 100-byte chunks and finish; check the running slot A stays preferred on error.
fn install(image: &[u8]) -> (Result<SlotState, UpdateError>, BootControl) {
    let mut flash = RamSlots::<CAP>::new();
    let mut control = BootControl::factory(1, 3);
    let mut up = Updater::new(Slot::A);
    up.begin(&mut control, &mut flash).unwrap();
    for (i, chunk) in image.chunks(100).enumerate() {
        if let Err(e) = up.write(&mut flash, (i * 100) as u32, chunk) {
            return (Err(e), control);
        }
    }
    let r = up
        .finish(&mut control, &flash, &POLICY)
        .map(|_| control.slot(Slot::B).state);
    if r.is_err() {
        assert_eq!(
            control.preferred(),
            Slot::A,
            "running slot must stay preferred"
        );
        assert_eq!(control.slot(Slot::A).state, SlotState::Confirmed);
        assert_eq!(
            control.clone().select_boot(),
            BootDecision::Boot {
                slot: Slot::A,
                trial: false
            }
        );
        assert_eq!(up.counters().refused, 1);
    }
    (r, control)
}

#[test]
fn good_image_goes_on_trial() {
    let (r, mut c) = install(&good());
    assert_eq!(r, Ok(SlotState::Trial { boots: 0 }));
    assert_eq!(c.slot(Slot::B).image_version, 2);
    assert_eq!(
        c.select_boot(),
        BootDecision::Boot {
            slot: Slot::B,
            trial: true
        }
    );
}

#[test]
fn bad_crc_is_refused() {
    let mut img = good();
    img[500] ^= 0x40;
    let (r, c) = install(&img);
    assert!(matches!(r, Err(UpdateError::BadCrc { .. })), "{r:?}");
    assert_eq!(c.slot(Slot::B).state, SlotState::Invalid);
}

#[test]
fn bad_signature_is_refused() {
    // Body and CRC intact, signature from another key.
    let other = pack_image(&body(), &ImageMeta::new(2, 1), &[9; 32]);
    assert_eq!(install(&other).0, Err(UpdateError::BadSignature));
    // A header field changed after signing (the CRC only covers the body).
    let mut img = good();
    img[8] ^= 1; // image_version
    assert_eq!(install(&img).0, Err(UpdateError::BadSignature));
}

#[test]
fn wrong_abi_is_refused() {
    let img = pack_image(&body(), &ImageMeta::new(2, 7), &test_key::SEED);
    assert_eq!(
        install(&img).0,
        Err(UpdateError::WrongAbi {
            image: 7,
            device: 1
        })
    );
}

#[test]
fn truncated_image_is_refused() {
    let img = good();
    let (r, _) = install(&img[..img.len() - 1]);
    assert_eq!(
        r,
        Err(UpdateError::Truncated {
            expected: img.len() as u32,
            got: img.len() as u32 - 1
        })
    );
    assert_eq!(
        install(&img[..60]).0,
        Err(UpdateError::Header(HeaderError::Short { len: 60 }))
    );
}

#[test]
fn trailing_and_oversized_are_refused() {
    let mut img = good();
    img.push(0);
    assert!(matches!(
        install(&img).0,
        Err(UpdateError::TrailingBytes { .. })
    ));
    let big = pack_image(&vec![0; CAP], &ImageMeta::new(2, 1), &test_key::SEED);
    assert!(matches!(install(&big).0, Err(UpdateError::TooLarge { .. })));
}

#[test]
fn bad_magic_is_refused() {
    let mut img = good();
    img[0] = 0;
    assert!(matches!(
        install(&img).0,
        Err(UpdateError::Header(HeaderError::BadMagic { .. }))
    ));
}

#[test]
fn session_errors_are_typed() {
    let mut flash = RamSlots::<CAP>::new();
    let mut control = BootControl::factory(1, 3);
    let mut up = Updater::new(Slot::A);
    assert_eq!(up.write(&mut flash, 0, b"x"), Err(UpdateError::NotStarted));
    up.begin(&mut control, &mut flash).unwrap();
    assert_eq!(up.begin(&mut control, &mut flash), Err(UpdateError::Busy));
    up.write(&mut flash, 0, b"abc").unwrap();
    assert_eq!(
        up.write(&mut flash, 10, b"x"),
        Err(UpdateError::OutOfOrder {
            expected: 3,
            got: 10
        })
    );
}

#[test]
fn confirmed_update_survives_resets_and_unconfirmed_rolls_back() {
    let (_, mut c) = install(&good());
    for _ in 0..3 {
        assert!(matches!(
            c.select_boot(),
            BootDecision::Boot {
                slot: Slot::B,
                trial: true
            }
        ));
    }
    assert_eq!(
        c.select_boot(),
        BootDecision::RolledBack {
            from: Slot::B,
            to: Slot::A
        }
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    /// Any single corrupted byte is refused (never accepted, never a panic).
    #[test]
    fn any_flipped_byte_is_refused(at in 0usize..3128, bit in 0u8..8) {
        let mut img = good();
        img[at] ^= 1 << bit;
        let (r, _) = install(&img);
        prop_assert!(r.is_err());
    }
}
