//! Shared memory between a driver process and a device in another process (vfio-user).
//!
//! - [`memfd`]: a new anonymous file for DMA memory, sealed against shrinking (so whoever maps
//!   it can never be killed by SIGBUS on a page that vanished) and against growing.
//! - [`check_shareable`]: what a server checks before mapping a file a client sent.
//! - [`share`] / [`unshare`]: the application's own pages moved onto memfds in place (same
//!   addresses, same contents, same protection) so another process can map them, and moved
//!   back to private anonymous memory when the last registration covering them goes. The
//!   registry is process wide: two devices (or two registrations) covering the same page use
//!   the same memfd, so a remote write through either lands in the same bytes.
//!
//! The in-place move copies the pages into a memfd, maps the memfd at a temporary address with
//! each original VMA's protection, and `mremap`s it over the original range in one call (the
//! move back is the same dance with private anonymous memory). It is why
//! [`super::UserRange::new`] forbids other threads to write the pages while a registration is
//! made or dropped: a write between the copy and the `mremap` would be lost.

use std::ffi::CStr;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::sync::{Arc, Mutex, MutexGuard};

use memmap2::{MmapOptions, MmapRaw};

use super::user::{ChunkMap, UserRange};
use super::{Error, Result};

const PAGE: u64 = super::mem::PAGE_SIZE as u64;

/// A new memfd of `len` bytes named `name` (close-on-exec), sealed against shrinking, growing
/// and further sealing.
///
/// # Errors
/// `memfd_create`, `ftruncate` or `fcntl(F_ADD_SEALS)` failed.
pub(crate) fn memfd(name: &CStr, len: u64) -> io::Result<File> {
    // SAFETY: `name` is a valid NUL-terminated string and the flags are valid.
    let fd =
        unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a new descriptor owned by nothing else.
    let file = unsafe { File::from_raw_fd(fd) };
    file.set_len(len)?;
    let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;
    // SAFETY: fcntl with an integer argument on a descriptor `file` owns.
    if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_ADD_SEALS, seals) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(file)
}

/// Checks that mapping `len` bytes at `offset` of `file` (sent by another process) is safe for
/// the mapper: the file is sealed against shrinking and holds the whole range, `offset` is
/// page aligned and `len` is not zero.
///
/// # Errors
/// `InvalidInput` naming what is wrong.
pub(crate) fn check_shareable(file: &File, offset: u64, len: u64) -> io::Result<()> {
    let bad = |what: String| io::Error::new(io::ErrorKind::InvalidInput, what);
    // SAFETY: fcntl(F_GET_SEALS) on a descriptor `file` owns.
    let seals = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GET_SEALS) };
    if seals < 0 {
        let e = io::Error::last_os_error();
        return Err(bad(format!(
            "the file cannot carry seals ({e}); DMA memory must be a memfd sealed with F_SEAL_SHRINK"
        )));
    }
    if seals & libc::F_SEAL_SHRINK == 0 {
        return Err(bad(
            "the memfd is not sealed with F_SEAL_SHRINK (a shrink would kill the server with SIGBUS)"
                .into(),
        ));
    }
    if len == 0 || !offset.is_multiple_of(PAGE) {
        return Err(bad(format!(
            "offset {offset:#x} + {len:#x}: the offset must be page aligned and the size non-zero"
        )));
    }
    let size = file.metadata()?.len();
    if offset.checked_add(len).is_none_or(|end| end > size) {
        return Err(bad(format!(
            "offset {offset:#x} + {len:#x} is beyond the file's {size:#x} bytes"
        )));
    }
    Ok(())
}

/// A shared read-write mapping of `len` bytes at `offset` of `file`.
///
/// # Errors
/// `mmap` failed.
pub(crate) fn map(file: &File, offset: u64, len: usize) -> io::Result<MmapRaw> {
    MmapOptions::new().offset(offset).len(len).map_raw(file)
}

/// One line of `/proc/self/maps`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Vma {
    pub start: u64,
    pub end: u64,
    /// `PROT_*` bits.
    pub prot: i32,
    /// `MAP_SHARED` (`s`) rather than private (`p`).
    pub shared: bool,
    pub inode: u64,
    pub path: String,
}

/// Parses `/proc/<pid>/maps` text; malformed lines are skipped.
pub(crate) fn parse_maps(text: &str) -> Vec<Vma> {
    text.lines()
        .filter_map(|line| {
            let mut f = line.split_whitespace();
            let (start, end) = f.next()?.split_once('-')?;
            let perms = f.next()?.as_bytes();
            let _offset = f.next()?;
            let _dev = f.next()?;
            let inode = f.next()?.parse().ok()?;
            let path = f.collect::<Vec<_>>().join(" ");
            if perms.len() < 4 {
                return None;
            }
            let flag = |i: usize, c: u8, p: i32| if perms[i] == c { p } else { 0 };
            Some(Vma {
                start: u64::from_str_radix(start, 16).ok()?,
                end: u64::from_str_radix(end, 16).ok()?,
                prot: flag(0, b'r', libc::PROT_READ)
                    | flag(1, b'w', libc::PROT_WRITE)
                    | flag(2, b'x', libc::PROT_EXEC),
                shared: perms[3] == b's',
                inode,
                path,
            })
        })
        .collect()
}

/// The VMAs of this process covering `start..end`, clipped to it, or `None` when part of the
/// range is not mapped.
fn vmas_over(start: u64, end: u64) -> io::Result<Option<Vec<Vma>>> {
    let text = std::fs::read_to_string("/proc/self/maps")?;
    Ok(cover(parse_maps(&text), start, end))
}

fn cover(vmas: Vec<Vma>, start: u64, end: u64) -> Option<Vec<Vma>> {
    let mut out = Vec::new();
    let mut at = start;
    for mut v in vmas.into_iter().filter(|v| v.end > start && v.start < end) {
        if v.start > at {
            return None;
        }
        v.start = v.start.max(start);
        v.end = v.end.min(end);
        at = v.end;
        out.push(v);
    }
    (at >= end).then_some(out)
}

/// Gives each VMA's part of the `len`-byte mapping at `base` (which stands for `start..`) its
/// protection.
fn protect(base: *mut u8, start: u64, vmas: &[Vma]) -> io::Result<()> {
    for v in vmas {
        let p = base.wrapping_add((v.start - start) as usize);
        // SAFETY: `p..p + len` lies inside the mapping at `base` that the caller owns (every VMA
        // is inside the range the mapping stands for); mprotect changes no memory contents.
        let r = unsafe { libc::mprotect(p.cast(), (v.end - v.start) as usize, v.prot) };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Moves the `len`-byte mapping at `from` (which the caller owns and gives up) to `to`,
/// replacing whatever was mapped there.
///
/// # Safety
/// `to..to + len` is memory the caller may replace (a registered range of the application,
/// under [`UserRange`]'s contract).
unsafe fn move_over(from: *mut u8, to: u64, len: usize) -> io::Result<()> {
    // SAFETY: `from` is a whole mapping of `len` bytes the caller owns; the caller vouches for
    // the target range (this function's contract).
    let r = unsafe {
        libc::mremap(
            from.cast(),
            len,
            len,
            libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
            to as *mut libc::c_void,
        )
    };
    if r == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A memfd holding some of the application's pages, mapped over them.
#[derive(Debug)]
pub(crate) struct Segment {
    pub file: Arc<File>,
    inode: u64,
}

/// Application pages currently on memfds, process wide.
static SEGMENTS: Mutex<ChunkMap<Segment>> = Mutex::new(ChunkMap::new());

fn segments() -> MutexGuard<'static, ChunkMap<Segment>> {
    SEGMENTS.lock().unwrap_or_else(|p| p.into_inner())
}

/// A piece of a registration: a whole segment, `len` bytes at `start` of `file`'s offset 0.
#[derive(Clone, Debug)]
pub(crate) struct Piece {
    pub start: u64,
    pub len: u64,
    pub file: Arc<File>,
}

/// Moves the pages of `range` onto memfds (those not already on one) and returns the segments
/// that now hold them, each referenced once more.
///
/// # Errors
/// [`Error::UserMemory`]: part of the range is not mapped, is `MAP_SHARED` already or is not
/// readable, or a system call failed.
pub(crate) fn share(range: &UserRange) -> Result<Vec<Piece>> {
    let (start, end) = range.pages();
    let err = |what: String, source: Option<io::Error>| Error::UserMemory {
        addr: range.addr(),
        len: range.len(),
        what,
        source,
    };
    let mut segs = segments();
    let starts = segs
        .acquire(start, end, share_gap)
        .map_err(|((what, source), taken)| {
            for (s, len, seg) in segs.release(&taken) {
                restore(s, len, &seg);
            }
            err(what, source)
        })?;
    Ok(starts
        .into_iter()
        .filter_map(|s| {
            segs.get(s).map(|(len, seg)| Piece {
                start: s,
                len,
                file: seg.file.clone(),
            })
        })
        .collect())
}

/// Drops one reference on each segment starting at `starts`; a segment that loses its last
/// goes back to private anonymous memory with its contents.
pub(crate) fn unshare(starts: &[u64]) {
    let gone = segments().release(starts);
    for (s, len, seg) in gone {
        restore(s, len, &seg);
    }
}

type GapError = (String, Option<io::Error>);

/// Moves `len` bytes of pages at `g0` onto a new memfd.
fn share_gap(g0: u64, len: u64) -> std::result::Result<Segment, GapError> {
    let sys = |what: &str| {
        let what = what.to_owned();
        move |e: io::Error| (what, Some(e))
    };
    let vmas = vmas_over(g0, g0 + len)
        .map_err(sys("reading /proc/self/maps"))?
        .ok_or_else(|| (format!("pages {g0:#x} + {len:#x} are not all mapped"), None))?;
    if let Some(v) = vmas.iter().find(|v| v.shared) {
        return Err((
            format!(
                "pages {:#x}..{:#x} are MAP_SHARED ({}); register private memory (malloc, \
                 memalign, anonymous mmap)",
                v.start, v.end, v.path
            ),
            None,
        ));
    }
    if let Some(v) = vmas.iter().find(|v| v.prot & libc::PROT_READ == 0) {
        return Err((
            format!("pages {:#x}..{:#x} are not readable", v.start, v.end),
            None,
        ));
    }
    let file = memfd(c"mrc-user-memory", len).map_err(sys("memfd_create"))?;
    let inode = file.metadata().map_err(sys("fstat(memfd)"))?.ino();
    let mut done = 0u64;
    while done < len {
        let p = (g0 + done) as *const libc::c_void;
        // SAFETY: the kernel reads `len - done` bytes at `p` from this process's memory and
        // fails with EFAULT (no signal) if any of it is not readable; nothing is written here.
        let n = unsafe {
            libc::pwrite(
                file.as_raw_fd(),
                p,
                (len - done) as usize,
                done as libc::off_t,
            )
        };
        if n <= 0 {
            let e = io::Error::last_os_error();
            return Err(("copying the pages into the memfd".into(), Some(e)));
        }
        done += n as u64;
    }
    let tmp = map(&file, 0, len as usize).map_err(sys("mmap(memfd)"))?;
    protect(tmp.as_mut_ptr(), g0, &vmas).map_err(sys("mprotect"))?;
    // SAFETY: the target is the caller's registered range (`UserRange` contract): its pages
    // were just copied into the memfd, which now replaces them at the same addresses.
    match unsafe { move_over(tmp.as_mut_ptr(), g0, len as usize) } {
        Ok(()) => {
            // The mapping moved: `tmp`'s old address is no longer ours to unmap.
            std::mem::forget(tmp);
            Ok(Segment {
                file: Arc::new(file),
                inode,
            })
        }
        Err(e) => {
            drop(tmp);
            // A failed MREMAP_FIXED may have unmapped the target already: put the pages back.
            let seg = Segment {
                file: Arc::new(file),
                inode,
            };
            put_back(g0, len, &seg, &vmas);
            Err(("mremap onto the registered pages".into(), Some(e)))
        }
    }
}

/// Moves a segment back to private anonymous memory with its contents, if the range still
/// maps the segment's memfd (the application may have unmapped it, against the contract);
/// otherwise leaves it and logs.
fn restore(start: u64, len: u64, seg: &Segment) {
    let vmas = match vmas_over(start, start + len) {
        Ok(Some(v)) if v.iter().all(|v| v.inode == seg.inode) => v,
        Ok(_) => {
            log::warn!(
                "registered pages {start:#x} + {len:#x} were unmapped or remapped while \
                 registered; left as they are"
            );
            return;
        }
        Err(e) => {
            log::warn!("pages {start:#x} + {len:#x} stay on shared memory: /proc/self/maps: {e}");
            return;
        }
    };
    put_back(start, len, seg, &vmas);
}

/// Private anonymous pages with the segment's contents and `vmas`' protections, moved over
/// `start..start + len`.
fn put_back(start: u64, len: u64, seg: &Segment, vmas: &[Vma]) {
    let result = (|| {
        let mut tmp = MmapOptions::new().len(len as usize).map_anon()?;
        seg.file.read_exact_at(&mut tmp[..], 0)?;
        protect(tmp.as_mut_ptr(), start, vmas)?;
        // SAFETY: the range is the segment's, which this registry mapped over the
        // application's registered pages; it goes back to private memory with the same bytes.
        unsafe { move_over(tmp.as_mut_ptr(), start, len as usize) }?;
        std::mem::forget(tmp);
        Ok::<(), io::Error>(())
    })();
    if let Err(e) = result {
        log::error!("pages {start:#x} + {len:#x} could not go back to private memory: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_lines_parse() {
        let text = "\
55d0c0a00000-55d0c0a21000 rw-p 00000000 00:00 0                          [heap]
7f1c2a000000-7f1c2a001000 r--s 00000000 00:01 1234 /memfd:mrc-user-memory (deleted)
7f1c2b000000-7f1c2b002000 r-xp 00001000 08:01 42 /usr/lib/x86_64-linux-gnu/libc.so.6
garbage line
";
        let v = parse_maps(text);
        assert_eq!(v.len(), 3);
        assert_eq!(v[0].start, 0x55d0_c0a0_0000);
        assert_eq!(v[0].prot, libc::PROT_READ | libc::PROT_WRITE);
        assert!(!v[0].shared);
        assert_eq!(v[0].path, "[heap]");
        assert!(v[1].shared);
        assert_eq!(v[1].inode, 1234);
        assert_eq!(v[1].path, "/memfd:mrc-user-memory (deleted)");
        assert_eq!(v[2].prot, libc::PROT_READ | libc::PROT_EXEC);
    }

    #[test]
    fn cover_clips_and_finds_holes() {
        let vma = |s, e| Vma {
            start: s,
            end: e,
            prot: libc::PROT_READ,
            shared: false,
            inode: 0,
            path: String::new(),
        };
        let vs = vec![
            vma(0x1000, 0x3000),
            vma(0x3000, 0x5000),
            vma(0x6000, 0x7000),
        ];
        let c = cover(vs.clone(), 0x2000, 0x4000).unwrap();
        assert_eq!(
            (c[0].start, c[0].end, c[1].start, c[1].end),
            (0x2000, 0x3000, 0x3000, 0x4000)
        );
        assert!(
            cover(vs.clone(), 0x4000, 0x6800).is_none(),
            "hole at 0x5000"
        );
        assert!(cover(vs, 0x0, 0x2000).is_none(), "hole at 0");
    }

    #[test]
    fn memfd_is_sealed_and_checked() {
        let f = memfd(c"mrc-test", 8192).unwrap();
        check_shareable(&f, 0, 8192).unwrap();
        check_shareable(&f, 4096, 4096).unwrap();
        assert!(f.set_len(4096).is_err(), "sealed against shrinking");
        for (off, len) in [(0, 0), (1, 4096), (4096, 8192), (u64::MAX - 4095, 4096)] {
            assert!(
                check_shareable(&f, off, len).is_err(),
                "{off:#x} + {len:#x}"
            );
        }
        // An ordinary file cannot be sealed.
        let plain = File::open("/proc/self/maps").unwrap();
        let e = check_shareable(&plain, 0, 1).unwrap_err();
        assert!(e.to_string().contains("memfd"), "{e}");
    }

    /// Pages moved onto a memfd keep address and contents, a second mapping of the memfd sees
    /// (and makes) writes in the application's own bytes, and unsharing moves them back to
    /// private memory with the contents.
    #[test]
    fn share_moves_pages_in_place_and_back() {
        let len = 3 * 4096 + 100;
        let mut buf = MmapOptions::new().len(len + 4096).map_anon().unwrap();
        for (i, b) in buf.iter_mut().enumerate() {
            *b = i as u8;
        }
        let p = buf.as_mut_ptr().wrapping_add(50);
        // SAFETY: `buf` outlives the registration and nothing else touches it meanwhile.
        let range = unsafe { UserRange::new(p, len) }.unwrap();
        let pieces = share(&range).unwrap();
        assert_eq!(pieces.len(), 1);
        assert_eq!(pieces[0].start, buf.as_ptr() as u64);
        let other = map(&pieces[0].file, 0, pieces[0].len as usize).unwrap();
        // SAFETY: `other` maps the segment's memfd, which holds `len + 4096` bytes.
        unsafe { *other.as_mut_ptr().add(60) = 0xAB };
        // SAFETY: reading our own mapped byte through a raw pointer.
        let seen = unsafe { std::ptr::read_volatile(buf.as_ptr().add(60)) };
        assert_eq!(
            seen, 0xAB,
            "a write through the other mapping lands in our page"
        );
        // SAFETY: as above.
        let kept = unsafe { std::ptr::read_volatile(buf.as_ptr().add(4000)) };
        assert_eq!(kept, 4000u32 as u8);
        let again = share(&range).unwrap();
        assert_eq!(
            again[0].start, pieces[0].start,
            "the same segment, referenced twice"
        );
        unshare(&[pieces[0].start]);
        unshare(&[again[0].start]);
        drop(other);
        let maps = vmas_over(buf.as_ptr() as u64, buf.as_ptr() as u64 + 4096)
            .unwrap()
            .unwrap();
        assert!(!maps[0].shared, "back to private memory");
        assert_eq!(buf[60], 0xAB, "contents kept");
        assert_eq!(buf[4000], 4000u32 as u8);
    }

    #[test]
    fn share_refuses_unmapped_unreadable_and_shared_memory() {
        // Below mmap_min_addr: never mapped.
        // SAFETY: refused before anything is moved (the page is not mapped).
        let r = unsafe { UserRange::new(0x1000 as *mut u8, 100) }.unwrap();
        let e = share(&r).unwrap_err();
        assert!(e.to_string().contains("not all mapped"), "{e}");

        let m = MmapOptions::new().len(8192).map_anon().unwrap();
        // SAFETY: the first page of our own mapping; nothing reads it afterwards.
        let r = unsafe { libc::mprotect(m.as_ptr() as *mut _, 4096, libc::PROT_NONE) };
        assert_eq!(r, 0);
        // SAFETY: refused before anything is moved (the first page is not readable).
        let r = unsafe { UserRange::new(m.as_ptr() as *mut u8, 5000) }.unwrap();
        let e = share(&r).unwrap_err();
        assert!(e.to_string().contains("not readable"), "{e}");

        let f = memfd(c"mrc-test", 4096).unwrap();
        let shared = map(&f, 0, 4096).unwrap();
        // SAFETY: refused before anything is moved (the pages are MAP_SHARED).
        let r = unsafe { UserRange::new(shared.as_mut_ptr(), 100) }.unwrap();
        let e = share(&r).unwrap_err();
        assert!(e.to_string().contains("MAP_SHARED"), "{e}");
    }
}
