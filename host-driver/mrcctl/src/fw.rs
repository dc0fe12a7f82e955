//! `mrcctl fw status|update|confirm|rollback`: drive a NIC's firmware update over the admin
//! queue (`FW_BEGIN`, `FW_CHUNK` by DMA, `FW_COMMIT`, `FW_CONFIRM`, `FW_ROLLBACK`).
//!
//! The tool sends the image as it is; the **device** verifies it (header, ABI major, length,
//! CRC-32, Ed25519 signature) and refuses it with a reason code in the response syndrome
//! (`mrc_fw_update::reason`). A refusal is reported as one line naming the device, the reason
//! and the running image (read back after the refusal, to show it is unchanged), exit code 2.
//! The image header is parsed locally only to add detail to that line (versions, lengths).

use std::sync::Arc;

use mrc_abi::device::admin::body::{FwBegin, FwChunk};
use mrc_abi::device::admin::{AdminStatus, FwUpdateState, Opcode, FW_IMAGE_MAGIC};
use mrc_driver::device::{Device, FwStatus};
use mrc_fw_update::crc32::crc32;
use mrc_fw_update::header::ImageHeader;
use mrc_fw_update::reason::Reason;
use serde_json::{json, Value};

use crate::Fail;

/// Bytes per `FW_CHUNK` (the ABI allows up to 64 KiB).
pub const CHUNK_BYTES: usize = 16 * 1024;

/// `major.minor.patch` of an image version word (major 31:24, minor 23:16, patch 15:0).
pub fn version(v: u32) -> String {
    format!("{}.{}.{}", v >> 24, (v >> 16) & 0xff, v & 0xffff)
}

fn slot_name(s: u32) -> &'static str {
    match s {
        0 => "A",
        1 => "B",
        _ => "?",
    }
}

/// FW_STATUS as JSON.
pub fn status_json(dev: &Device, s: &FwStatus) -> Value {
    let staged = (s.update_state == FwUpdateState::Committed).then(|| version(s.staged_version));
    json!({
        "bdf": dev.bdf().to_string(),
        "running_slot": slot_name(s.running_slot),
        "running_version": version(s.running_version),
        "update_state": format!("{:?}", s.update_state),
        "staged_version": staged,
    })
}

/// `fw status`.
///
/// # Errors
/// The admin command failed.
pub fn status(dev: &Device) -> Result<Value, Fail> {
    let s = dev
        .fw_status()
        .map_err(|e| Fail(format!("{}: firmware status: {e}", dev.bdf())))?;
    Ok(status_json(dev, &s))
}

fn running_line(s: &FwStatus) -> String {
    format!(
        "slot {}, version {}, state {:?}",
        slot_name(s.running_slot),
        version(s.running_version),
        s.update_state
    )
}

/// Detail the host can add to a device's refusal from the image header.
fn detail(reason: Reason, syndrome: u32, image: &[u8]) -> String {
    let h = ImageHeader::parse(image).ok();
    match (reason, h) {
        (Reason::WrongAbi, _) => format!(
            ": image ABI {}, device ABI {}",
            syndrome >> 8,
            mrc_abi::device::version::ABI_VERSION.major
        ),
        (Reason::Truncated, Some(h)) => {
            format!(
                ": header calls for {} bytes, file has {}",
                h.image_len(),
                image.len()
            )
        }
        (Reason::TrailingBytes, Some(h)) => {
            format!(
                ": header calls for {} bytes, file has {}",
                h.image_len(),
                image.len()
            )
        }
        _ => String::new(),
    }
}

/// Turn a failed firmware admin command into the refusal line (with the running image re-read).
fn refusal(dev: &Device, e: mrc_driver::Error, image: &[u8]) -> Fail {
    let now = dev
        .fw_status()
        .map(|s| format!("; the running image is unchanged: {}", running_line(&s)))
        .unwrap_or_default();
    let why = match &e {
        mrc_driver::Error::Admin {
            status: AdminStatus::FwImageInvalid,
            syndrome,
            ..
        } => match Reason::from_syndrome(*syndrome) {
            Some(r) => format!("{}{}", r.describe(), detail(r, *syndrome, image)),
            None => format!("refused with unknown reason code {syndrome:#x}"),
        },
        mrc_driver::Error::Admin {
            status: AdminStatus::Busy,
            ..
        } => "another update is in progress".into(),
        mrc_driver::Error::Admin {
            status: AdminStatus::BadState,
            opcode: Opcode::FwBegin,
            ..
        } => "the running image waits for `mrcctl fw confirm` (or rollback) first".into(),
        mrc_driver::Error::Admin {
            status: AdminStatus::Permission,
            ..
        } => "the device does not support firmware update".into(),
        other => other.to_string(),
    };
    Fail(format!(
        "{}: firmware update refused: {why}{now}",
        dev.bdf()
    ))
}

/// Stream `image` to the device and commit it: the result (before/after status) or the refusal.
///
/// # Errors
/// A refusal (see the module docs), or the image is empty or larger than 4 GiB.
pub fn update(dev: &Device, image: &[u8]) -> Result<Value, Fail> {
    let bdf = dev.bdf();
    let size = u32::try_from(image.len())
        .ok()
        .filter(|s| *s > 0)
        .ok_or_else(|| Fail(format!("{bdf}: the image is empty or larger than 4 GiB")))?;
    let before = dev
        .fw_status()
        .map_err(|e| Fail(format!("{bdf}: firmware status: {e}")))?;
    let crc = crc32(image);
    let announced_version = ImageHeader::parse(image).map_or(0, |h| h.image_version);
    let begin = FwBegin {
        magic: FW_IMAGE_MAGIC.into(),
        version: announced_version.into(),
        size: size.into(),
        crc32: crc.into(),
        // Not computed: the device checks the CRC-32 above and the image's Ed25519 signature.
        sha256: [0; 32],
    };
    dev.fw_begin(begin).map_err(|e| refusal(dev, e, image))?;
    let buf = dev
        .alloc_dma(CHUNK_BYTES)
        .map_err(|e| Fail(format!("{bdf}: DMA buffer: {e}")))?;
    for (i, chunk) in image.chunks(CHUNK_BYTES).enumerate() {
        buf.write_slice(0, chunk)
            .map_err(|e| Fail(format!("{bdf}: DMA buffer: {e}")))?;
        let body = FwChunk {
            offset: ((i * CHUNK_BYTES) as u32).into(),
            len: (chunk.len() as u32).into(),
            iova: buf.iova().0.into(),
        };
        dev.fw_chunk(body).map_err(|e| refusal(dev, e, image))?;
    }
    dev.fw_commit(crc).map_err(|e| refusal(dev, e, image))?;
    let after = dev
        .fw_status()
        .map_err(|e| Fail(format!("{bdf}: firmware status: {e}")))?;
    Ok(json!({
        "bdf": bdf.to_string(),
        "image": {"bytes": image.len(), "crc32": format!("{crc:08x}"), "version": version(announced_version)},
        "result": "committed: boots on trial at the next device reset, then needs `fw confirm`",
        "before": status_json(dev, &before),
        "after": status_json(dev, &after),
    }))
}

/// `fw confirm`.
///
/// # Errors
/// No trial image is running, or the command failed.
pub fn confirm(dev: &Device) -> Result<Value, Fail> {
    dev.fw_confirm().map_err(|e| match e {
        mrc_driver::Error::Admin {
            status: AdminStatus::FwNoUpdate,
            ..
        } => Fail(format!(
            "{}: nothing to confirm: the running image is not on trial",
            dev.bdf()
        )),
        e => Fail(format!("{}: firmware confirm: {e}", dev.bdf())),
    })?;
    status(dev)
}

/// `fw rollback`.
///
/// # Errors
/// No committed or trial image, or the command failed.
pub fn rollback(dev: &Device) -> Result<Value, Fail> {
    dev.fw_rollback().map_err(|e| match e {
        mrc_driver::Error::Admin {
            status: AdminStatus::FwNoUpdate,
            ..
        } => Fail(format!(
            "{}: nothing to roll back: no committed or trial image",
            dev.bdf()
        )),
        e => Fail(format!("{}: firmware rollback: {e}", dev.bdf())),
    })?;
    status(dev)
}

/// Reset the simulated NIC (its cores reboot and pick the slot) and reopen it.
///
/// # Errors
/// The reopen failed.
pub fn reboot_sim(
    nic: &mrc_sim::nic_host::SimNic,
    cfg: &mrc_driver::device::DeviceConfig,
) -> Result<Arc<Device>, Fail> {
    Device::open(nic.backend(), cfg).map_err(|e| Fail(format!("{}: reset: {e}", nic.bdf())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use mrc_driver::device::DeviceConfig;
    use mrc_fw_update::pack::{pack_image, ImageMeta};
    use mrc_sim::nic_host::SimHost;

    #[test]
    fn update_reboot_rollback_reboot_runs_the_old_image_again() {
        let host = SimHost::clos_pair().unwrap();
        let nic = host.nic(0).unwrap();
        let cfg = DeviceConfig::default();
        let body = vec![0x5a; 70_000];
        let img = pack_image(
            &body,
            &ImageMeta::new(0x0203_0004, 1),
            &mrc_fw_update::test_key::SEED,
        );
        let dev = reboot_sim(nic, &cfg).unwrap();
        let v = update(&dev, &img).unwrap();
        assert_eq!(v["image"]["version"], "2.3.4");
        assert_eq!(v["after"]["staged_version"], "2.3.4");
        let dev = reboot_sim(nic, &cfg).unwrap();
        assert_eq!(status(&dev).unwrap()["update_state"], "PendingConfirm");
        let v = rollback(&dev).unwrap();
        assert_eq!(
            v["running_version"], "2.3.4",
            "still running until the reset"
        );
        let dev = reboot_sim(nic, &cfg).unwrap();
        let v = status(&dev).unwrap();
        assert_eq!(
            (
                &v["running_slot"],
                &v["running_version"],
                &v["update_state"]
            ),
            (&json!("A"), &json!("1.0.0"), &json!("Idle"))
        );
        let e = confirm(&dev).unwrap_err();
        assert!(e.0.contains("nothing to confirm"), "{}", e.0);
    }
}
