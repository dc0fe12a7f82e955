//! Firmware update of the `mrc-nic` ELF on the emulated core, end to end through its admin
//! rings: the boot ROM boots the factory image from slot A of the simulated flash; the host
//! streams a signed image with `FW_BEGIN` / `FW_CHUNK` (the image fetches each chunk with its
//! host DMA engine) / `FW_COMMIT`; the image writes slot B through its flash driver, verifies
//! it and puts it on trial in the boot record; a device reset boots it through the boot ROM.
//! Bad images are refused with their reason and the factory image keeps running; an image that
//! hangs is reset by the watchdog until the boot record rolls it back.
//!
//! Builds the NIC image (`tests/build`): without the riscv32imac target it prints
//! `SKIPPED: ...` and passes, unless `CI` is set.

mod build;

use mrc_abi::device::admin::body::{FwBegin, FwChunk, ObjectId};
use mrc_abi::device::admin::{
    AdminCommand, AdminReply, AdminStatus, FwUpdateState, FW_IMAGE_MAGIC,
};
use mrc_elfcore::board::flash::{FlashDevice, FlashSlots, FlashTiming};
use mrc_elfcore::board::host_dma::MappedBuffer;
use mrc_elfcore::{AdminPort, BootRom, CoreConfig, ElfCore, NicMap, Stop};
use mrc_fw_update::crc32::crc32;
use mrc_fw_update::pack::{flatten_elf, pack_image, ImageMeta};
use mrc_fw_update::reason::Reason;
use mrc_fw_update::slots::{Slot, SlotState};
use mrc_fw_update::test_key;
use mrc_fw_update::update::{SlotStorage, UpdatePolicy};

const V1: u32 = 0x0100_0000;
const V2: u32 = 0x0200_0000;
const V3: u32 = 0x0300_0000;
/// Where the host keeps the image it sends.
const IMAGE_IOVA: u64 = 0x4000_0000;
/// Bytes per FW_CHUNK (as `mrcctl fw update` sends them).
const CHUNK: usize = 16 * 1024;
/// A fast part: commands still keep BUSY long enough that the image polls for them.
const TIMING: FlashTiming = FlashTiming {
    erase_sector_ns: 200_000,
    program_page_ns: 20_000,
};
const ROM: BootRom = BootRom {
    policy: UpdatePolicy {
        abi_major: 1,
        public_key: test_key::PUBLIC_KEY,
    },
    factory_version: V1,
    max_trial_boots: 2,
};

/// `elf` as `mrc-fw-pack` packs it, version `version`, ABI `abi`.
fn slot_image(elf: &[u8], version: u32, abi: u16) -> Vec<u8> {
    let (load, entry, body) = flatten_elf(elf).unwrap();
    let mut meta = ImageMeta::new(version, abi);
    meta.load_addr = load;
    meta.entry = entry;
    pack_image(&body, &meta, &test_key::SEED)
}

/// A NIC: the core booted by its ROM from a flash whose slot A holds the factory image.
struct Nic {
    core: ElfCore,
    port: AdminPort,
    now_ns: u64,
}

impl Nic {
    fn power_on(elf: &[u8]) -> Nic {
        let map = NicMap::nic().unwrap();
        let mut flash = FlashDevice::new(TIMING);
        FlashSlots::new(&mut flash, &map)
            .write(Slot::A, 0, &slot_image(elf, V1, 1))
            .unwrap();
        let core = ElfCore::power_on(flash, ROM, CoreConfig::DEFAULT).unwrap();
        Nic {
            core,
            port: AdminPort::default(),
            now_ns: 0,
        }
    }

    /// One main-loop iteration, 1 µs after the last.
    fn step(&mut self) -> Stop {
        self.now_ns += 1_000;
        self.core.step(self.now_ns, &mut self.port).unwrap().stop
    }

    /// Send `c` and run the loop until its reply.
    fn cmd(&mut self, c: AdminCommand) -> AdminReply {
        self.port
            .execute(&mut self.core, &mut self.now_ns, &c, 8)
            .unwrap_or_else(|e| panic!("{c:?}: {e}"))
    }

    /// FW_STATUS: (running slot, running version, update state, staged version).
    fn status(&mut self) -> (u64, u64, u64, u64) {
        let r = self.cmd(AdminCommand::FwStatus);
        assert_eq!(r.status, AdminStatus::Ok);
        (
            r.result[0] >> 32,
            r.result[1],
            r.result[0] & 0xff,
            r.result[2],
        )
    }

    /// Stream `img` from host memory and commit it: the first refusal, or the commit's reply.
    fn update(&mut self, img: &[u8]) -> AdminReply {
        self.core.device_mut().host_dma.host = Some(Box::new(MappedBuffer {
            iova: IMAGE_IOVA,
            bytes: img.to_vec(),
        }));
        let crc = crc32(img);
        let r = self.cmd(AdminCommand::FwBegin(FwBegin {
            magic: FW_IMAGE_MAGIC.into(),
            version: 0.into(),
            size: (img.len() as u32).into(),
            crc32: crc.into(),
            sha256: [0; 32],
        }));
        if r.status != AdminStatus::Ok {
            return r;
        }
        for (i, c) in img.chunks(CHUNK).enumerate() {
            let r = self.cmd(AdminCommand::FwChunk(FwChunk {
                offset: ((i * CHUNK) as u32).into(),
                len: (c.len() as u32).into(),
                iova: (IMAGE_IOVA + (i * CHUNK) as u64).into(),
            }));
            if r.status != AdminStatus::Ok {
                return r;
            }
        }
        self.cmd(AdminCommand::FwCommit(ObjectId { id: crc.into() }))
    }

    /// The host resets the device.
    fn reset(&mut self) {
        self.now_ns += 1_000;
        assert!(self.core.reset_now(self.now_ns).unwrap() > 0);
    }

    fn rom(&self) -> (Slot, bool, u32) {
        let b = self.core.rom_boot().unwrap();
        (b.slot, b.trial, b.version)
    }
}

const IDLE: u64 = FwUpdateState::Idle as u64;
const FACTORY: (u64, u64, u64, u64) = (0, V1 as u64, IDLE, 0);

fn refusal(r: &AdminReply) -> Option<Reason> {
    (r.status == AdminStatus::FwImageInvalid)
        .then(|| Reason::from_syndrome(r.syndrome))
        .flatten()
}

#[test]
fn a_good_update_boots_on_trial_and_stays_once_confirmed() {
    let Some(elf) = build::nic_image("a_good_update_boots_on_trial") else {
        return;
    };
    let mut nic = Nic::power_on(&elf);
    assert_eq!(nic.rom(), (Slot::A, false, V1));
    assert_eq!(nic.status(), FACTORY);
    let q = nic.cmd(AdminCommand::QueryDevice);
    assert_eq!((q.status, q.result[0]), (AdminStatus::Ok, u64::from(V1)));

    let r = nic.update(&slot_image(&elf, V2, 1));
    assert_eq!(
        (r.status, r.result[0]),
        (AdminStatus::Ok, u64::from(V2)),
        "{r:?}"
    );
    let committed = FwUpdateState::Committed as u64;
    assert_eq!(nic.status(), (0, V1 as u64, committed, V2 as u64));
    let c = nic.core.device().host_dma.counters();
    assert!(c.bytes > 0 && c.refused == 0, "{c:?}");

    // The device reset: the ROM boots slot B on trial; the image says so.
    nic.reset();
    assert_eq!(nic.rom(), (Slot::B, true, V2));
    let pending = FwUpdateState::PendingConfirm as u64;
    assert_eq!(nic.status(), (1, V2 as u64, pending, 0));
    let q = nic.cmd(AdminCommand::QueryDevice);
    assert_eq!(q.result[0], u64::from(V2));
    // No new update before the trial image is confirmed.
    let r = nic.cmd(AdminCommand::FwBegin(FwBegin {
        magic: FW_IMAGE_MAGIC.into(),
        version: 0.into(),
        size: 1000.into(),
        crc32: 0.into(),
        sha256: [0; 32],
    }));
    assert_eq!(r.status, AdminStatus::BadState);
    assert_eq!(nic.cmd(AdminCommand::FwConfirm).status, AdminStatus::Ok);
    assert_eq!(nic.status(), (1, V2 as u64, IDLE, 0));
    for _ in 0..3 {
        nic.reset();
        assert_eq!(nic.rom(), (Slot::B, false, V2));
        assert_eq!(nic.status(), (1, V2 as u64, IDLE, 0));
    }
    let record = nic.core.rom_boot().unwrap().record;
    assert_eq!(record.slot(Slot::B).state, SlotState::Confirmed);
    assert_eq!(record.slot(Slot::A).state, SlotState::Confirmed);
}

#[test]
fn bad_images_are_refused_with_their_reason_and_the_running_image_stays() {
    let Some(elf) = build::nic_image("bad_images_are_refused") else {
        return;
    };
    let mut nic = Nic::power_on(&elf);
    let good = slot_image(&elf, V2, 1);
    let mut bad_sig = good.clone();
    bad_sig[100] ^= 1;
    let mut corrupt = good.clone();
    corrupt[5_000] ^= 0x10;
    let mut bad_magic = good.clone();
    bad_magic[0] = b'X';
    let cases = [
        (bad_sig, Reason::BadSignature),
        (corrupt, Reason::BadCrc),
        (slot_image(&elf, V2, 2), Reason::WrongAbi),
        (good[..good.len() - 4].to_vec(), Reason::Truncated),
        (bad_magic, Reason::Header),
    ];
    for (img, want) in cases {
        let r = nic.update(&img);
        assert_eq!(refusal(&r), Some(want), "{r:?}");
        assert_eq!(nic.status(), FACTORY, "{want:?}");
        nic.reset();
        assert_eq!(nic.rom(), (Slot::A, false, V1), "{want:?} after reset");
        assert_eq!(nic.status(), FACTORY, "{want:?} after reset");
    }
    // A chunk the host memory does not map: refused naming the IOVA field; nothing staged.
    nic.core.device_mut().host_dma.host = Some(Box::new(MappedBuffer {
        iova: IMAGE_IOVA,
        bytes: good.clone(),
    }));
    let crc = crc32(&good);
    let begin = nic.cmd(AdminCommand::FwBegin(FwBegin {
        magic: FW_IMAGE_MAGIC.into(),
        version: 0.into(),
        size: (good.len() as u32).into(),
        crc32: crc.into(),
        sha256: [0; 32],
    }));
    assert_eq!(begin.status, AdminStatus::Ok);
    let r = nic.cmd(AdminCommand::FwChunk(FwChunk {
        offset: 0.into(),
        len: 4096.into(),
        iova: 0x9000_0000u64.into(),
    }));
    assert_eq!(
        (r.status, r.syndrome),
        (
            AdminStatus::BadAttribute,
            mrc_fw_update::service::CHUNK_IOVA_SYNDROME
        )
    );
    // Committing what was not sent is a transfer-size refusal.
    let r = nic.cmd(AdminCommand::FwCommit(ObjectId { id: crc.into() }));
    assert_eq!(refusal(&r), Some(Reason::TransferSize));
    nic.reset();
    assert_eq!(nic.status(), FACTORY);
}

#[test]
fn a_hanging_update_is_rolled_back_by_the_watchdog_and_the_boot_record() {
    let Some(elf) = build::nic_image("a_hanging_update_is_rolled_back") else {
        return;
    };
    let Some(hang) = build::hang_image("a_hanging_update_is_rolled_back") else {
        return;
    };
    let mut nic = Nic::power_on(&elf);
    let r = nic.update(&slot_image(&hang, V3, 1));
    assert_eq!(r.status, AdminStatus::Ok, "{r:?}");
    nic.reset();
    assert_eq!(nic.rom(), (Slot::B, true, V3));
    // The hanging image never runs an iteration: the watchdog resets the core, and the ROM
    // boots it again while it has trial boots left, then rolls back to slot A.
    let mut bites = 0;
    while nic.rom().0 == Slot::B {
        assert_eq!(nic.step(), Stop::Watchdog);
        bites += 1;
        assert!(bites <= 2, "rolled back after its trial boots");
    }
    assert_eq!(bites, 2);
    assert_eq!(nic.rom(), (Slot::A, false, V1));
    let record = nic.core.rom_boot().unwrap().record;
    assert_eq!(record.slot(Slot::B).state, SlotState::Invalid);
    assert_eq!(record.rollbacks(), 1);
    assert_eq!(
        nic.core.device().reset_cause,
        mrc_elfcore::device::RESET_CAUSE_WATCHDOG
    );
    // The factory image runs its loop again and answers.
    assert_eq!(nic.status(), FACTORY);
    assert_eq!(
        nic.cmd(AdminCommand::FwConfirm).status,
        AdminStatus::FwNoUpdate
    );
}
