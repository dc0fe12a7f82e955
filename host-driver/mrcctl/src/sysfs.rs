//! `list`, `bind` and `unbind` through sysfs, with the checks that tell an operator what to do.

use std::fs;
use std::path::{Path, PathBuf};

use mrc_driver::sys::Bdf;
use serde_json::{json, Value};

use crate::Fail;

const PCI: &str = "/sys/bus/pci/devices";

fn dev_dir(bdf: Bdf) -> Result<PathBuf, Fail> {
    let p = Path::new(PCI).join(bdf.to_string());
    if !p.exists() {
        return Err(Fail(format!(
            "no PCI device at {bdf} ({} does not exist; see `mrcctl list`)",
            p.display()
        )));
    }
    Ok(p)
}

fn read(p: &Path) -> Option<String> {
    fs::read_to_string(p).ok().map(|s| s.trim().to_owned())
}

fn driver(dir: &Path) -> Option<String> {
    fs::read_link(dir.join("driver"))
        .ok()
        .and_then(|l| l.file_name().map(|n| n.to_string_lossy().into_owned()))
}

/// PCI devices with vendor:device and driver.
pub fn list() -> Result<Vec<Value>, Fail> {
    let mut out = Vec::new();
    let Ok(entries) = fs::read_dir(PCI) else {
        return Ok(out);
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect();
    names.sort();
    for n in names {
        let d = Path::new(PCI).join(&n);
        let vendor = read(&d.join("vendor")).unwrap_or_default();
        let device = read(&d.join("device")).unwrap_or_default();
        out.push(json!({
            "bdf": n,
            "id": format!("{}:{}", vendor.trim_start_matches("0x"), device.trim_start_matches("0x")),
            "driver": driver(&d),
            "iommu_group": fs::read_link(d.join("iommu_group")).ok()
                .and_then(|l| l.file_name().map(|x| x.to_string_lossy().into_owned())),
        }));
    }
    Ok(out)
}

fn write(p: &Path, v: &str, bdf: Bdf) -> Result<(), Fail> {
    fs::write(p, v).map_err(|e| {
        let hint = if e.kind() == std::io::ErrorKind::PermissionDenied {
            " (run as root, or give this user write access to the PCI sysfs files)"
        } else {
            ""
        };
        Fail(format!(
            "{bdf}: writing {v:?} to {} failed: {e}{hint}",
            p.display()
        ))
    })
}

/// Binds `bdf` to vfio-pci (driver_override + drivers_probe) after checking the IOMMU group,
/// the vfio-pci driver, permissions and hugepages.
pub fn bind(bdf: Bdf) -> Result<Value, Fail> {
    let dir = dev_dir(bdf)?;
    let group = fs::read_link(dir.join("iommu_group")).map_err(|_| {
        Fail(format!(
            "{bdf} has no IOMMU group: enable the IOMMU (intel_iommu=on or amd_iommu=on on the kernel command line) and reboot"
        ))
    })?;
    let group = group
        .file_name()
        .map(|g| g.to_string_lossy().into_owned())
        .unwrap_or_default();
    if !Path::new("/sys/bus/pci/drivers/vfio-pci").exists() {
        return Err(Fail(format!(
            "cannot bind {bdf}: the vfio-pci driver is not loaded (run `modprobe vfio-pci`)"
        )));
    }
    let mut warnings = Vec::new();
    let huge = fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("HugePages_Total:"))
                .and_then(|l| {
                    l.split_whitespace()
                        .nth(1)
                        .and_then(|v| v.parse::<u64>().ok())
                })
        })
        .unwrap_or(0);
    if huge == 0 {
        warnings.push(
            "no hugepages reserved: DMA memory falls back to 4 KiB pages (echo 512 > /proc/sys/vm/nr_hugepages)"
                .to_owned(),
        );
    }
    let members: Vec<String> = fs::read_dir(format!("/sys/kernel/iommu_groups/{group}/devices"))
        .map(|r| {
            r.filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
                .collect()
        })
        .unwrap_or_default();
    let others: Vec<&String> = members.iter().filter(|m| **m != bdf.to_string()).collect();
    if !others.is_empty() {
        warnings.push(format!(
            "IOMMU group {group} also holds {others:?}: bind them to vfio-pci too before opening {bdf}"
        ));
    }
    let before = driver(&dir);
    if before.as_deref() != Some("vfio-pci") {
        write(&dir.join("driver_override"), "vfio-pci", bdf)?;
        if before.is_some() {
            write(&dir.join("driver/unbind"), &bdf.to_string(), bdf)?;
        }
        write(
            Path::new("/sys/bus/pci/drivers_probe"),
            &bdf.to_string(),
            bdf,
        )?;
    }
    let after = driver(&dir);
    if after.as_deref() != Some("vfio-pci") {
        return Err(Fail(format!(
            "{bdf}: still bound to {after:?} after the override; check `dmesg`"
        )));
    }
    Ok(
        json!({"bdf": bdf.to_string(), "driver": "vfio-pci", "previous_driver": before,
              "iommu_group": group, "warnings": warnings}),
    )
}

/// Unbinds `bdf` from vfio-pci and clears the override (the kernel may reprobe its driver).
pub fn unbind(bdf: Bdf) -> Result<Value, Fail> {
    let dir = dev_dir(bdf)?;
    let before = driver(&dir);
    write(&dir.join("driver_override"), "\n", bdf)?;
    if before.is_some() {
        write(&dir.join("driver/unbind"), &bdf.to_string(), bdf)?;
    }
    let _ = fs::write("/sys/bus/pci/drivers_probe", bdf.to_string());
    Ok(json!({"bdf": bdf.to_string(), "previous_driver": before, "driver": driver(&dir)}))
}

/// Checks that `bdf` exists and VFIO is available before opening it.
pub fn precheck(bdf: Bdf) -> Result<(), Fail> {
    let dir = dev_dir(bdf)?;
    if !Path::new("/dev/vfio/vfio").exists() {
        return Err(Fail(format!(
            "cannot open {bdf}: this machine has no VFIO (/dev/vfio/vfio missing; load vfio-pci and enable the IOMMU)"
        )));
    }
    if driver(&dir).as_deref() != Some("vfio-pci") {
        return Err(Fail(format!(
            "cannot open {bdf}: it is bound to {:?}, not vfio-pci (run `mrcctl bind {bdf}`)",
            driver(&dir)
        )));
    }
    Ok(())
}
