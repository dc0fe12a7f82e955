//! The real VFIO path, for real: a Linux guest under QEMU (TCG, q35, `intel-iommu`, the `edu`
//! device) runs `examples/vfio_edu.rs` against vfio-pci and an IOMMU-mapped DMA round trip.
//!
//! The host picks a seeded nonce (`MRC_VFIO_SEED` reproduces a run), passes it on the kernel
//! command line and expects the guest to print `NONCE=<nonce> HASH=<hash>` on the serial
//! console, where the hash is that of the nonce-derived pattern after it went RAM -> edu ->
//! RAM (see `guest/edu_pattern.rs`). The guest then DMAs to an IOVA it has just freed; the
//! console must show the kernel's DMAR fault report for exactly that address (the IOMMU is
//! enforcing, and freeing a region unmaps it). QEMU's exit code says nothing, so the console
//! is the verdict.
//!
//! What it builds, all cached under `target/tmp/vfio-guest/` so reruns are quick:
//! - the kernel and vfio modules, unpacked from Debian's `linux-image-*-amd64` package
//!   (`apt-get download` of what `linux-image-amd64` depends on, or the `.deb` named by
//!   `MRC_VFIO_KERNEL_DEB`); only `vmlinuz` and the vfio/irqbypass modules are extracted;
//! - `vfio_edu`, statically linked (`+crt-static`, glibc), as the binary of a generated
//!   one-file package (no dev-dependencies to compile) in its own cargo target directory;
//! - an uncompressed newc initramfs written here: busybox (static), `guest/init.sh` as `/init`,
//!   `/dev/console`, the modules in dependency order, the test binary.
//!
//! Where QEMU, busybox (static), apt/dpkg-deb or the kernel package is missing, the test prints
//! `SKIPPED: <why>` and passes, unless `CI` is set: then it fails.

#[path = "../guest/edu_pattern.rs"]
mod edu_pattern;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use edu_pattern::{fnv1a64, pattern, result_line, splitmix64};

/// Bound on the whole guest run (boot, test, power-off); QEMU is killed after it.
const GUEST_TIMEOUT: Duration = Duration::from_secs(120);
/// The modules the guest needs; their dependencies are added from `depends=`.
const ROOT_MODULES: [&str; 2] = ["vfio_iommu_type1", "vfio_pci"];
/// Triple of the guest binary.
const GUEST_TARGET: &str = "x86_64-unknown-linux-gnu";

type Res<T> = Result<T, String>;

/// Outcome of preparing something the test needs: ready, or a reason to skip.
enum Need<T> {
    Ready(T),
    Missing(String),
}

macro_rules! need {
    ($e:expr) => {
        match $e {
            Need::Ready(v) => v,
            Need::Missing(why) => return skip(&why),
        }
    };
}

fn skip(why: &str) {
    if std::env::var_os("CI").is_some_and(|v| !v.is_empty()) {
        panic!("CI is set, so the VFIO guest test may not be skipped: {why}");
    }
    println!("SKIPPED: {why}");
}

#[test]
fn vfio_edu_dma_round_trip_in_a_qemu_guest() {
    if !cfg!(all(target_os = "linux", target_arch = "x86_64")) {
        return skip("the VFIO guest test runs on x86_64 Linux hosts only");
    }
    let start = Instant::now();
    let work = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("vfio-guest");
    std::fs::create_dir_all(&work).unwrap();

    let qemu = need!(find_tool("qemu-system-x86_64", &[]));
    let busybox = need!(find_busybox());
    let kernel = need!(prepare_kernel(&work.join("kernel")));
    println!(
        "vfio_qemu: kernel {} ready at {:?}",
        kernel.version,
        start.elapsed()
    );
    let guest_bin = build_guest_binary(&work).unwrap_or_else(|e| panic!("{e}"));
    println!("vfio_qemu: guest binary ready at {:?}", start.elapsed());

    let initrd = work.join("initramfs.cpio");
    write_initramfs(&initrd, &busybox, &guest_bin, &kernel).unwrap_or_else(|e| panic!("{e}"));

    let seed = seed();
    let mut state = seed;
    let nonce = splitmix64(&mut state);
    println!("vfio_qemu: seed {seed} (MRC_VFIO_SEED={seed} reproduces), nonce {nonce:016x}");

    let boot = Instant::now();
    let console = run_guest(
        &qemu,
        &kernel.boot_image,
        &initrd,
        nonce,
        &work.join("console.log"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    println!(
        "vfio_qemu: guest ran in {:?} (total {:?})",
        boot.elapsed(),
        start.elapsed()
    );

    let lines: Vec<&str> = console.lines().map(|l| l.trim_end_matches('\r')).collect();
    let tail = lines[lines.len().saturating_sub(40)..].join("\n");
    if let Some(fail) = lines.iter().find(|l| l.contains("FAIL: ")) {
        panic!("the guest reported a failure: {fail}\n--- console tail ---\n{tail}");
    }
    let want = result_line(nonce, fnv1a64(&pattern(nonce)));
    let echoed = format!("NONCE={nonce:016x} ");
    match lines.iter().find(|l| l.starts_with(&echoed)) {
        Some(line) => assert_eq!(
            *line, want,
            "the guest echoed the nonce but the DMA'd data hashes differently"
        ),
        None => panic!("the guest never echoed nonce {nonce:016x}\n--- console tail ---\n{tail}"),
    }
    assert!(
        lines.contains(&"MRC_GUEST_DONE"),
        "the guest did not finish cleanly\n{tail}"
    );
    // The guest DMA'd to an IOVA it had just unmapped: the IOMMU must have refused it.
    let stale = lines
        .iter()
        .find_map(|l| l.strip_prefix("UNMAPPED_DMA_IOVA="))
        .unwrap_or_else(|| panic!("the guest named no unmapped IOVA\n{tail}"));
    let fault = format!("fault addr {stale}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("DMAR") && l.contains(&fault)),
        "no IOMMU (DMAR) fault for the DMA to unmapped {stale}: was it really unmapped?\n{tail}"
    );
    println!("vfio_qemu: verified {want}; the DMA to unmapped iova {stale} faulted in the IOMMU");
}

/// The seed from `MRC_VFIO_SEED`, else from the clock (printed, so any run can be repeated).
fn seed() -> u64 {
    match std::env::var("MRC_VFIO_SEED") {
        Ok(s) => s
            .parse()
            .unwrap_or_else(|_| panic!("MRC_VFIO_SEED={s:?} is not a decimal u64")),
        Err(_) => SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0),
    }
}

/// `name` on `PATH` (or one of `extra` absolute paths).
fn find_tool(name: &str, extra: &[&str]) -> Need<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .chain(extra.iter().map(PathBuf::from))
        .find(|p| p.is_file())
        .map_or_else(
            || Need::Missing(format!("{name} is not installed")),
            Need::Ready,
        )
}

fn find_busybox() -> Need<PathBuf> {
    let bb = match find_tool("busybox", &["/bin/busybox", "/usr/bin/busybox"]) {
        Need::Ready(p) => p,
        Need::Missing(_) => {
            return Need::Missing(
                "busybox is not installed (apt-get install busybox-static)".into(),
            )
        }
    };
    match elf_is_static(&bb) {
        Ok(true) => Need::Ready(bb),
        Ok(false) => Need::Missing(format!(
            "{} is dynamically linked; the guest needs busybox-static",
            bb.display()
        )),
        Err(e) => Need::Missing(e),
    }
}

/// An x86-64 ELF executable with no `PT_INTERP` program header (needs no dynamic loader).
fn elf_is_static(path: &Path) -> Res<bool> {
    let data = std::fs::read(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    let u16_at = |o: usize| data.get(o..o + 2).map(|b| u16::from_le_bytes([b[0], b[1]]));
    let u32_at = |o: usize| {
        data.get(o..o + 4)
            .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
    };
    let u64_at = |o: usize| {
        data.get(o..o + 8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap()))
    };
    let bad = || format!("{} is not a 64-bit little-endian ELF file", path.display());
    if data.get(..6) != Some(b"\x7fELF\x02\x01") {
        return Err(bad());
    }
    let phoff = u64_at(0x20).ok_or_else(bad)? as usize;
    let phentsize = u16_at(0x36).ok_or_else(bad)? as usize;
    let phnum = u16_at(0x38).ok_or_else(bad)? as usize;
    const PT_INTERP: u32 = 3;
    for i in 0..phnum {
        let p_type = u32_at(phoff + i * phentsize).ok_or_else(bad)?;
        if p_type == PT_INTERP {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The unpacked kernel: `vmlinuz` and the modules to load, in load order.
struct Kernel {
    version: String,
    vmlinuz: PathBuf,
    /// What QEMU boots: the uncompressed `vmlinux` (PVH entry) when it could be extracted,
    /// else `vmlinuz`. Under TCG, decompressing the kernel in the guest costs ~8 s.
    boot_image: PathBuf,
    /// (file name in the guest, path on the host)
    modules: Vec<(String, PathBuf)>,
}

fn run(cmd: &mut Command) -> Res<Vec<u8>> {
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(out.stdout)
}

/// Unpacks (once) the kernel package into `dir` and resolves the module load order.
fn prepare_kernel(dir: &Path) -> Need<Kernel> {
    let root = dir.join("root");
    let ready = dir.join("ready");
    if !ready.exists() {
        let deb = match kernel_deb(dir) {
            Ok(deb) => deb,
            Err(e) => return Need::Missing(e),
        };
        let _ = std::fs::remove_file(dir.join("vmlinux"));
        if let Err(e) = unpack(&deb, &root) {
            return Need::Missing(e);
        }
        std::fs::write(&ready, deb.display().to_string()).unwrap();
        // A downloaded package is not needed once unpacked (70 MB); one named by the user stays.
        if deb.starts_with(dir) {
            let _ = std::fs::remove_file(&deb);
        }
    }
    match find_kernel(&root) {
        Ok(mut k) => {
            let vmlinux = dir.join("vmlinux");
            if !vmlinux.exists() {
                if let Err(e) = extract_vmlinux(&k.vmlinuz, &vmlinux) {
                    println!("vfio_qemu: booting the compressed kernel (slower): {e}");
                }
            }
            if vmlinux.exists() {
                k.boot_image = vmlinux;
            }
            Need::Ready(k)
        }
        // A broken cache is re-made on the next run.
        Err(e) => {
            let _ = std::fs::remove_file(&ready);
            panic!("unpacked kernel package in {}: {e}", root.display())
        }
    }
}

/// The `.deb` from `MRC_VFIO_KERNEL_DEB`, or downloaded: the package `linux-image-amd64`
/// depends on (the distribution's current kernel).
fn kernel_deb(dir: &Path) -> Res<PathBuf> {
    if let Some(deb) = std::env::var_os("MRC_VFIO_KERNEL_DEB") {
        return Ok(PathBuf::from(deb));
    }
    let debs = dir.join("deb");
    std::fs::create_dir_all(&debs).unwrap();
    let depends = run(Command::new("apt-cache").args(["depends", "linux-image-amd64"]))?;
    let depends = String::from_utf8_lossy(&depends);
    let package = depends
        .lines()
        .filter_map(|l| l.trim().strip_prefix("Depends: "))
        .find(|p| p.starts_with("linux-image-") && !p.starts_with('<'))
        .ok_or_else(|| format!("apt-cache names no kernel for linux-image-amd64:\n{depends}"))?
        .to_owned();
    run(Command::new("apt-get")
        .args(["download", "-q", &package])
        .current_dir(&debs))
    .map_err(|e| format!("downloading {package}: {e}"))?;
    std::fs::read_dir(&debs)
        .map_err(|e| e.to_string())?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&format!("{package}_")) && n.ends_with(".deb"))
        })
        .ok_or_else(|| {
            format!(
                "apt-get download {package} left no .deb in {}",
                debs.display()
            )
        })
}

/// `dpkg-deb --fsys-tarfile DEB | tar -x` of `vmlinuz` and the module directories we need.
fn unpack(deb: &Path, root: &Path) -> Res<()> {
    let _ = std::fs::remove_dir_all(root);
    std::fs::create_dir_all(root).unwrap();
    let mut dpkg = Command::new("dpkg-deb")
        .arg("--fsys-tarfile")
        .arg(deb)
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run dpkg-deb: {e}"))?;
    let tar = Command::new("tar")
        .arg("-x")
        .arg("-C")
        .arg(root)
        .args(["--wildcards", "./boot/vmlinuz-*"])
        .args([
            "./lib/modules/*/kernel/drivers/vfio/*",
            "./lib/modules/*/kernel/virt/*",
            "./lib/modules/*/kernel/drivers/iommu/*",
        ])
        .stdin(dpkg.stdout.take().unwrap())
        .stderr(Stdio::null())
        .status()
        .map_err(|e| format!("cannot run tar: {e}"))?;
    let dpkg = dpkg.wait().map_err(|e| e.to_string())?;
    if !dpkg.success() {
        return Err(format!(
            "dpkg-deb --fsys-tarfile {} failed ({dpkg})",
            deb.display()
        ));
    }
    // tar exits non-zero for a pattern with no match (older kernels have no drivers/iommu
    // modules); what must be there is checked by find_kernel.
    let _ = tar;
    Ok(())
}

fn find_kernel(root: &Path) -> Res<Kernel> {
    let boot = root.join("boot");
    let vmlinuz = std::fs::read_dir(&boot)
        .map_err(|e| format!("{}: {e}", boot.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("vmlinuz-"))
        })
        .ok_or("no boot/vmlinuz-*")?;
    let version = vmlinuz.file_name().unwrap().to_string_lossy()["vmlinuz-".len()..].to_owned();
    let mut available = BTreeMap::new();
    index_modules(&root.join("lib/modules").join(&version), &mut available)?;
    let mut order = Vec::new();
    for m in ROOT_MODULES {
        add_with_deps(m, &available, &mut order, 0)?;
    }
    let modules = order
        .into_iter()
        .map(|name| {
            let path = available[&name].clone();
            (format!("{name}.ko"), path)
        })
        .collect();
    Ok(Kernel {
        version,
        boot_image: vmlinuz.clone(),
        vmlinuz,
        modules,
    })
}

/// Extracts the uncompressed ELF kernel from a bzImage (what the kernel's
/// `scripts/extract-vmlinux` does) and keeps it only if it has the PVH entry note
/// (`XEN_ELFNOTE_PHYS32_ENTRY`, type 0x12), the one QEMU's `-kernel` needs to boot an ELF.
fn extract_vmlinux(vmlinuz: &Path, out: &Path) -> Res<()> {
    let image = read(vmlinuz)?;
    let formats: [(&[u8], &str, &[&str]); 3] = [
        (b"\xfd7zXZ\x00", "xz", &["-dc", "--single-stream"]),
        (b"\x28\xb5\x2f\xfd", "zstd", &["-dcq"]),
        (b"\x1f\x8b\x08", "gzip", &["-dcq"]),
    ];
    let (magic, tool, args) = formats
        .iter()
        .filter_map(|f| find(&image, f.0).map(|at| (at, f)))
        .min_by_key(|(at, _)| *at)
        .map(|(at, f)| (at, f.1, f.2))
        .ok_or("no xz, zstd or gzip stream in the bzImage")?;
    let mut input = std::fs::File::open(vmlinuz).map_err(|e| e.to_string())?;
    std::io::Seek::seek(&mut input, std::io::SeekFrom::Start(magic as u64))
        .map_err(|e| e.to_string())?;
    let tmp = out.with_extension("tmp");
    let output = std::fs::File::create(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
    // gzip and zstd complain about the bytes after the stream; the ELF check decides.
    let _ = Command::new(tool)
        .args(args)
        .stdin(input)
        .stdout(output)
        .stderr(Stdio::null())
        .status()
        .map_err(|e| format!("cannot run {tool}: {e}"))?;
    let elf = read(&tmp)?;
    // Elf64_Nhdr { namesz: 4, descsz, type: 0x12 } followed by "Xen\0".
    let pvh = find(&elf, b"\x12\0\0\0Xen\0").is_some();
    if !elf.starts_with(b"\x7fELF") || !pvh {
        let _ = std::fs::remove_file(&tmp);
        return Err(format!(
            "the {tool} stream of {} is not an ELF kernel with a PVH note",
            vmlinuz.display()
        ));
    }
    std::fs::rename(&tmp, out).map_err(|e| format!("{}: {e}", out.display()))
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Module name as the kernel spells it (`vfio-pci.ko` -> `vfio_pci`).
fn module_name(file: &str) -> Option<String> {
    file.strip_suffix(".ko").map(|n| n.replace('-', "_"))
}

fn index_modules(dir: &Path, out: &mut BTreeMap<String, PathBuf>) -> Res<()> {
    for entry in std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))? {
        let path = entry.map_err(|e| e.to_string())?.path();
        if path.is_dir() {
            index_modules(&path, out)?;
        } else if let Some(name) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(module_name)
        {
            out.insert(name, path);
        }
    }
    Ok(())
}

/// The `depends=` entry of a module's `.modinfo`, as kernel module names.
fn module_depends(path: &Path) -> Res<Vec<String>> {
    let data = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let key = b"depends=";
    let at = data
        .windows(key.len())
        .position(|w| w == key)
        .ok_or_else(|| format!("{} has no depends= in its modinfo", path.display()))?;
    let rest = &data[at + key.len()..];
    let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
    let list = String::from_utf8_lossy(&rest[..end]);
    Ok(list
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|s| s.replace('-', "_"))
        .collect())
}

/// Depth-first: dependencies before the module, each once.
fn add_with_deps(
    name: &str,
    available: &BTreeMap<String, PathBuf>,
    order: &mut Vec<String>,
    depth: usize,
) -> Res<()> {
    if order.iter().any(|m| m == name) {
        return Ok(());
    }
    if depth > 16 {
        return Err(format!("module dependencies deeper than 16 at {name}"));
    }
    let path = available.get(name).ok_or_else(|| {
        format!("module {name} is not among those unpacked (vfio, virt, iommu directories)")
    })?;
    for dep in module_depends(path)? {
        add_with_deps(&dep, available, order, depth + 1)?;
    }
    order.push(name.to_owned());
    Ok(())
}

/// Builds `examples/vfio_edu.rs` statically linked, in its own target directory.
///
/// It is built as the binary of a one-file package generated under `work/guest-pkg`: its only
/// dependencies are `mrc-driver` (by path) and `log`, so the build compiles none of the
/// driver's dev-dependencies (proptest, bench harnesses). The workspace's `Cargo.lock` is
/// copied in, so it uses the same versions as the workspace. The target directory is separate
/// because the outer `cargo test` holds the lock on the usual one.
fn build_guest_binary(work: &Path) -> Res<PathBuf> {
    let driver = Path::new(env!("CARGO_MANIFEST_DIR"));
    let pkg = work.join("guest-pkg");
    std::fs::create_dir_all(&pkg).map_err(|e| format!("{}: {e}", pkg.display()))?;
    let manifest = format!(
        "# Generated by host-driver/tests/vfio_qemu.rs: the VFIO guest's test binary.\n\
         [package]\nname = \"mrc-vfio-guest\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\
         publish = false\n\n\
         [[bin]]\nname = \"vfio_edu\"\npath = {:?}\n\n\
         [dependencies]\nmrc-driver = {{ path = {:?} }}\nlog = \"0.4\"\n\n\
         [workspace]\n",
        driver.join("examples/vfio_edu.rs").display().to_string(),
        driver.display().to_string(),
    );
    write_if_changed(&pkg.join("Cargo.toml"), manifest.as_bytes())?;
    if let Ok(lock) = std::fs::read(driver.join("../Cargo.lock")) {
        write_if_changed(&pkg.join("Cargo.lock"), &lock)?;
    }
    let target_dir = work.join("cargo");
    run(Command::new(env!("CARGO"))
        .args(["build", "--quiet", "--target", GUEST_TARGET])
        .arg("--manifest-path")
        .arg(pkg.join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", &target_dir)
        .env("RUSTFLAGS", "-C target-feature=+crt-static -C debuginfo=0")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_BUILD_TARGET"))
    .map_err(|e| format!("building the static guest binary: {e}"))?;
    let bin = target_dir.join(GUEST_TARGET).join("debug/vfio_edu");
    match elf_is_static(&bin)? {
        true => Ok(bin),
        false => Err(format!("{} is not statically linked", bin.display())),
    }
}

/// Writes `data` unless the file already holds it (keeps cargo's fingerprints quiet).
fn write_if_changed(path: &Path, data: &[u8]) -> Res<()> {
    if std::fs::read(path).is_ok_and(|old| old == data) {
        return Ok(());
    }
    std::fs::write(path, data).map_err(|e| format!("{}: {e}", path.display()))
}

/// A newc ("070701") cpio archive, the format the kernel unpacks as an initramfs.
struct Cpio {
    out: Vec<u8>,
    ino: u32,
}

impl Cpio {
    const DIR: u32 = 0o040_755;
    const EXEC: u32 = 0o100_755;
    const FILE: u32 = 0o100_644;
    const CHAR_DEV: u32 = 0o020_600;

    fn new() -> Cpio {
        Cpio {
            out: Vec::new(),
            ino: 1,
        }
    }

    fn entry(&mut self, name: &str, mode: u32, rdev: (u32, u32), data: &[u8]) {
        let fields = [
            self.ino,
            mode,
            0, // uid
            0, // gid
            if mode & 0o170_000 == 0o040_000 { 2 } else { 1 },
            0, // mtime: fixed, so the archive is reproducible
            data.len() as u32,
            0,
            0,
            rdev.0,
            rdev.1,
            name.len() as u32 + 1,
            0, // check
        ];
        self.ino += 1;
        self.out.extend_from_slice(b"070701");
        for f in fields {
            self.out.extend_from_slice(format!("{f:08x}").as_bytes());
        }
        self.out.extend_from_slice(name.as_bytes());
        self.out.push(0);
        self.pad();
        self.out.extend_from_slice(data);
        self.pad();
    }

    fn pad(&mut self) {
        while !self.out.len().is_multiple_of(4) {
            self.out.push(0);
        }
    }

    fn finish(mut self) -> Vec<u8> {
        self.entry("TRAILER!!!", 0, (0, 0), &[]);
        self.out
    }
}

fn read(path: &Path) -> Res<Vec<u8>> {
    std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))
}

fn write_initramfs(out: &Path, busybox: &Path, guest_bin: &Path, kernel: &Kernel) -> Res<()> {
    let mut cpio = Cpio::new();
    for dir in ["bin", "dev", "etc", "proc", "sys", "lib", "lib/modules"] {
        cpio.entry(dir, Cpio::DIR, (0, 0), &[]);
    }
    // The kernel opens /dev/console for init's stdio before any devtmpfs is mounted.
    cpio.entry("dev/console", Cpio::CHAR_DEV, (5, 1), &[]);
    let init = Path::new(env!("CARGO_MANIFEST_DIR")).join("guest/init.sh");
    cpio.entry("init", Cpio::EXEC, (0, 0), &read(&init)?);
    cpio.entry("bin/busybox", Cpio::EXEC, (0, 0), &read(busybox)?);
    cpio.entry("vfio_edu", Cpio::EXEC, (0, 0), &read(guest_bin)?);
    let mut list = String::new();
    for (name, path) in &kernel.modules {
        cpio.entry(
            &format!("lib/modules/{name}"),
            Cpio::FILE,
            (0, 0),
            &read(path)?,
        );
        list.push_str(name);
        list.push('\n');
    }
    cpio.entry("etc/modules", Cpio::FILE, (0, 0), list.as_bytes());
    std::fs::write(out, cpio.finish()).map_err(|e| format!("{}: {e}", out.display()))
}

/// Boots the guest, returns its console output (also written to `log`). Kills QEMU after
/// [`GUEST_TIMEOUT`].
fn run_guest(qemu: &Path, vmlinuz: &Path, initrd: &Path, nonce: u64, log: &Path) -> Res<String> {
    let append = format!("console=ttyS0 intel_iommu=on panic=-1 quiet mrc_nonce={nonce:016x}");
    let mut child = Command::new(qemu)
        .args([
            "-accel", "tcg", "-machine", "q35", "-m", "512M", "-smp", "1",
        ])
        .args([
            "-nodefaults",
            "-display",
            "none",
            "-no-reboot",
            "-serial",
            "stdio",
        ])
        // intel-iommu first: it must exist before the devices behind it.
        .args(["-device", "intel-iommu", "-device", "edu"])
        .arg("-kernel")
        .arg(vmlinuz)
        .arg("-initrd")
        .arg(initrd)
        .args(["-append", &append])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", qemu.display()))?;

    let console = Arc::new(Mutex::new(String::new()));
    let mut log_file = std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
    let stdout = child.stdout.take().unwrap();
    let sink = console.clone();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).split(b'\n').map_while(Result::ok) {
            let line = String::from_utf8_lossy(&line).into_owned();
            let _ = writeln!(log_file, "{line}");
            let mut c = sink.lock().unwrap();
            c.push_str(&line);
            c.push('\n');
        }
    });
    let stderr = child.stderr.take().unwrap();
    let errs = std::thread::spawn(move || {
        let mut s = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            s.push_str(&line);
            s.push('\n');
        }
        s
    });

    let deadline = Instant::now() + GUEST_TIMEOUT;
    let status = loop {
        match child.try_wait().map_err(|e| e.to_string())? {
            Some(status) => break Some(status),
            None if Instant::now() > deadline => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            None => std::thread::sleep(Duration::from_millis(50)),
        }
    };
    let _ = reader.join();
    let qemu_err = errs.join().unwrap_or_default();
    let out = console.lock().unwrap().clone();
    if status.is_none() {
        let tail: Vec<&str> = out.lines().rev().take(40).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        return Err(format!(
            "the guest did not power off within {GUEST_TIMEOUT:?}; QEMU killed\n{}\n{qemu_err}",
            tail.join("\n")
        ));
    }
    if out.is_empty() {
        return Err(format!(
            "QEMU printed nothing on the console ({status:?}): {qemu_err}"
        ));
    }
    Ok(out)
}

/// The helpers the guest test stands on, checked without QEMU.
mod helpers {
    use super::*;

    fn field(entry: &[u8], i: usize) -> u32 {
        let at = 6 + 8 * i;
        u32::from_str_radix(std::str::from_utf8(&entry[at..at + 8]).unwrap(), 16).unwrap()
    }

    #[test]
    fn cpio_entries_are_newc_and_4_byte_aligned() {
        let mut cpio = Cpio::new();
        cpio.entry("dev/console", Cpio::CHAR_DEV, (5, 1), &[]);
        let first_len = cpio.out.len();
        cpio.entry("init", Cpio::EXEC, (0, 0), b"#!/bin/sh\n");
        let out = cpio.finish();
        assert!(out.starts_with(b"070701"));
        // 110-byte header + "dev/console\0" (12) = 122, padded to 124; no data.
        assert_eq!(first_len, 124);
        assert_eq!(field(&out, 1), 0o020_600);
        assert_eq!((field(&out, 9), field(&out, 10)), (5, 1));
        assert_eq!(field(&out, 11), 12);
        let second = &out[first_len..];
        assert!(second.starts_with(b"070701"));
        assert_eq!(field(second, 6), 10, "file size");
        assert_eq!(&second[110..115], b"init\0");
        // header + "init\0" = 115 -> 116, then 10 bytes of data -> 12.
        assert_eq!(&second[116..126], b"#!/bin/sh\n");
        let trailer = &second[128..];
        assert_eq!(&trailer[110..121], b"TRAILER!!!\0");
        assert_eq!(out.len() % 4, 0);
    }

    #[test]
    fn elf_linkage_is_read_from_the_program_headers() {
        // This test binary is dynamically linked: it has a PT_INTERP.
        let me = std::env::current_exe().unwrap();
        assert_eq!(elf_is_static(&me), Ok(false));
        let not_elf = Path::new(env!("CARGO_MANIFEST_DIR")).join("guest/init.sh");
        assert!(elf_is_static(&not_elf)
            .unwrap_err()
            .contains("not a 64-bit"));
    }

    #[test]
    fn module_names_follow_the_kernel_spelling() {
        assert_eq!(module_name("vfio-pci.ko").as_deref(), Some("vfio_pci"));
        assert_eq!(
            module_name("vfio_iommu_type1.ko").as_deref(),
            Some("vfio_iommu_type1")
        );
        assert_eq!(module_name("modules.order"), None);
    }

    #[test]
    fn the_pattern_depends_on_the_nonce() {
        let a = pattern(1);
        assert_eq!(a.len(), edu_pattern::EDU_DMA_BYTES);
        assert_eq!(a, pattern(1));
        assert_ne!(fnv1a64(&a), fnv1a64(&pattern(2)));
        // FNV-1a 64 reference values.
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(
            result_line(0xab, 0xcd),
            "NONCE=00000000000000ab HASH=00000000000000cd"
        );
    }
}
