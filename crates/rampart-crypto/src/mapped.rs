//! Reading a file's page cache in place: a shared, read-only mapping whose
//! bytes are lent to a function (the XTS engine decrypting straight into a
//! reply buffer) instead of being copied into a buffer first.
//!
//! A mapping turns what `pread` reports as an error (an I/O error on the
//! disk, the file truncated by someone else) into SIGBUS. This module owns
//! that signal: while a thread reads through [`MappedFile::lend`], a fault
//! inside the range it reads replaces the faulting page with a page of
//! zeros (so the faulting load completes), and the read reports that it
//! could not lend the bytes; the caller then reads them with `pread`, which
//! reports the error the usual way. A fault anywhere else is handed back to
//! the previous disposition (a crash, as without this module).
//!
//! Every thread that might have read a replaced page learns of it through
//! the mapping's generation counter (a seqlock): a read that saw the
//! counter move, or started while a page of the mapping was replaced, is
//! not trusted.
#![allow(unsafe_code)]

use std::cell::Cell;
use std::ffi::c_void;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{compiler_fence, AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;

/// What SIGBUS did before this module's handler was installed.
static PREVIOUS: OnceLock<libc::sigaction> = OnceLock::new();

thread_local! {
    /// The address range this thread is reading through a mapping, if any,
    /// and the address of that mapping's [`Faults`]. Const-initialised and
    /// without a destructor, so the signal handler can read it without
    /// running any initialisation.
    static GUARDED: Cell<(usize, usize, usize)> = const { Cell::new((0, 0, 0)) };
    /// Pages this thread's handler replaced during the current read.
    static REPLACED: Cell<usize> = const { Cell::new(0) };
}

/// What the signal handler records about a mapping's faults.
#[derive(Debug, Default)]
struct Faults {
    /// Pages currently replaced by zeros after a fault.
    poisoned: AtomicUsize,
    /// Moves whenever a page is replaced or restored.
    generation: AtomicU64,
}

/// A shared, read-only mapping of the first `len` bytes of a file (or
/// block device).
#[derive(Debug)]
pub struct MappedFile {
    base: usize,
    len: usize,
    /// Kept to map pages again after a fault replaced them.
    file: File,
    /// Bytes lent since the mapping's pages were last dropped.
    lent: AtomicU64,
    /// Lent bytes after which the mapping's pages are dropped (see `lend`).
    window: u64,
    faults: Faults,
}

/// Stored bytes hold no secret: a mapping of them is never locked in
/// memory, also in a process that locks all its future mappings
/// (`mlockall` with `MCL_FUTURE`, as a server with a one-time key does),
/// where it would pin the page cache of a whole volume and its pages could
/// not be dropped.
fn unlocked(base: usize, len: usize) {
    // SAFETY: munlock only changes the lock flag of pages of this mapping.
    let _ = unsafe { libc::munlock(base as *const c_void, len) };
}

impl MappedFile {
    /// Maps `len` bytes of `file` from offset 0. Fails where the file
    /// cannot be mapped (a pipe, a character device) or `len` is 0.
    pub fn map(file: &File, len: u64) -> io::Result<Self> {
        let len = usize::try_from(len)
            .ok()
            .filter(|&l| l > 0 && l <= isize::MAX as usize)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "cannot map this length"))?;
        install_handler()?;
        let file = file.try_clone()?;
        // SAFETY: a fresh mapping chosen by the kernel; it aliases no Rust
        // object. PROT_READ: nothing is ever written through it.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        unlocked(base as usize, len);
        Ok(Self {
            base: base as usize,
            len,
            file,
            lent: AtomicU64::new(0),
            window: window(),
            faults: Faults::default(),
        })
    }

    #[must_use]
    pub fn len(&self) -> usize {
        self.len
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Runs `f` over the `len` stored bytes at `offset`, read in place from
    /// the page cache. Returns `None` when they could not be lent reliably
    /// (out of range, a page was lost to an I/O error or a truncation, or
    /// another thread's was while `f` ran): whatever `f` computed must then
    /// be discarded, and the bytes read with `pread`, which reports the
    /// error if there is one.
    ///
    /// The bytes are the page cache's: a write to the same range running at
    /// the same time may change them under `f` (as it would change what a
    /// concurrent `pread` returns), so `f` must treat them as opaque input
    /// read once, as a cipher does. `f` must not call `lend` itself.
    pub fn lend<T>(&self, offset: u64, len: usize, f: impl FnOnce(&[u8]) -> T) -> Option<T> {
        let start = usize::try_from(offset).ok()?;
        let end = start.checked_add(len)?;
        if end > self.len || len == 0 {
            return None;
        }
        if self.faults.poisoned.load(Ordering::SeqCst) > 0 || !self.in_page_cache(start, end) {
            return None;
        }
        self.bound_resident(len);
        let generation = self.faults.generation.load(Ordering::SeqCst);
        let address = self.base + start;
        let guard = Guard::enter(address, address + len, &self.faults);
        compiler_fence(Ordering::SeqCst);
        // SAFETY: [address, address + len) lies inside the mapping, which
        // lives as long as `self` and is readable (PROT_READ). A load that
        // faults (I/O error, truncation) is completed with zeros by the
        // handler and reported through REPLACED below, so `f` never sees
        // an unmapped address. See the method's documentation for bytes
        // changing underneath.
        let bytes = unsafe { std::slice::from_raw_parts(address as *const u8, len) };
        let out = f(bytes);
        compiler_fence(Ordering::SeqCst);
        let replaced = guard.leave();
        if replaced > 0 {
            // Put the file's pages back; until that works, every read of
            // this mapping goes to pread (`poisoned` stays above zero).
            if self.restore(start, end).is_ok() {
                self.faults.poisoned.fetch_sub(replaced, Ordering::SeqCst);
            }
            self.faults.generation.fetch_add(1, Ordering::SeqCst);
            return None;
        }
        if self.faults.generation.load(Ordering::SeqCst) != generation {
            return None;
        }
        Some(out)
    }

    /// Whether every page of `[start, end)` is in the page cache. Data that
    /// is not should be read with `pread`: a fault on a mapping reads it
    /// synchronously, a little at a time, where `pread` starts the kernel's
    /// readahead, so data not yet cached reads far faster through `pread`.
    /// A page evicted between this
    /// check and the read is still read correctly, only slowly.
    fn in_page_cache(&self, start: usize, end: usize) -> bool {
        const BATCH: usize = 256;
        let page = page_size();
        let mut first = start / page * page;
        let last = end.div_ceil(page) * page;
        let mut resident = [0u8; BATCH];
        while first < last {
            let pages = ((last - first) / page).min(BATCH);
            // SAFETY: the range lies inside the mapping (page-aligned start,
            // whole pages up to its rounded-up end) and `resident` holds one
            // byte per page.
            let ok = unsafe {
                libc::mincore(
                    (self.base + first) as *mut c_void,
                    pages * page,
                    resident.as_mut_ptr(),
                )
            };
            if ok != 0 || resident[..pages].iter().any(|&r| r & 1 == 0) {
                return false;
            }
            first += pages * page;
        }
        true
    }

    /// Maps the file's pages over `[start, end)` again.
    fn restore(&self, start: usize, end: usize) -> io::Result<()> {
        let page = page_size();
        let first = start / page * page;
        let last = end.div_ceil(page) * page;
        let last = last.min(self.len.div_ceil(page) * page);
        // SAFETY: MAP_FIXED over pages of this mapping only (inside
        // [base, base + len rounded to pages)), with the same protection and
        // file offset they had: the mapping stays what it was.
        let mapped = unsafe {
            libc::mmap(
                (self.base + first) as *mut c_void,
                last - first,
                libc::PROT_READ,
                libc::MAP_SHARED | libc::MAP_FIXED,
                self.file.as_raw_fd(),
                first as libc::off_t,
            )
        };
        if mapped == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        unlocked(self.base + first, last - first);
        Ok(())
    }

    /// Mapped page-cache pages count in the process's resident size and
    /// stay mapped until dropped. After lending `window` bytes (a quarter
    /// of the machine's memory) the mapping's pages are dropped, so the
    /// resident size a mapping adds is bounded; the page cache itself is
    /// untouched and the next reads map its pages again.
    fn bound_resident(&self, len: usize) {
        let lent = self.lent.fetch_add(len as u64, Ordering::Relaxed) + len as u64;
        if lent < self.window {
            return;
        }
        self.lent.store(0, Ordering::Relaxed);
        // SAFETY: MADV_DONTNEED on a shared file mapping only unmaps its
        // pages; their contents stay in the file's page cache and are
        // mapped again on the next access (by this thread or one reading
        // concurrently).
        unsafe { libc::madvise(self.base as *mut c_void, self.len, libc::MADV_DONTNEED) };
    }
}

impl Drop for MappedFile {
    fn drop(&mut self) {
        // SAFETY: the mapping was created in `map` and nothing borrows it
        // past `lend`, which borrows `self`.
        unsafe { libc::munmap(self.base as *mut c_void, self.len) };
    }
}

/// Marks this thread as reading `[start, end)` until `leave` (or a panic
/// in the lent function) ends it.
struct Guard;

impl Guard {
    fn enter(start: usize, end: usize, faults: &Faults) -> Self {
        REPLACED.with(|r| r.set(0));
        GUARDED.with(|g| g.set((start, end, std::ptr::from_ref(faults) as usize)));
        Guard
    }

    /// Ends the guarded read; returns how many pages were replaced.
    fn leave(self) -> usize {
        drop(self);
        REPLACED.with(|r| r.replace(0))
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        GUARDED.with(|g| g.set((0, 0, 0)));
    }
}

fn install_handler() -> io::Result<()> {
    static INSTALLED: OnceLock<Result<(), i32>> = OnceLock::new();
    let result = INSTALLED.get_or_init(|| {
        // SAFETY: plain-data structs filled by the kernel or zeroed;
        // `on_sigbus` only does async-signal-safe work (thread-local reads
        // of const-initialised cells, atomics, mmap, sigaction).
        unsafe {
            let mut previous: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut previous) != 0 {
                return Err(io::Error::last_os_error().raw_os_error().unwrap_or(libc::EINVAL));
            }
            let _ = PREVIOUS.set(previous);
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_sigbus as *const () as usize;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut action.sa_mask);
            if libc::sigaction(libc::SIGBUS, &action, std::ptr::null_mut()) != 0 {
                return Err(io::Error::last_os_error().raw_os_error().unwrap_or(libc::EINVAL));
            }
        }
        Ok(())
    });
    (*result).map_err(io::Error::from_raw_os_error)
}

extern "C" fn on_sigbus(_signal: libc::c_int, info: *mut libc::siginfo_t, _context: *mut c_void) {
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers.
    let address = unsafe { (*info).si_addr() } as usize;
    let (start, end, faults) = GUARDED.try_with(Cell::get).unwrap_or((0, 0, 0));
    if address >= start && address < end && faults != 0 {
        // SAFETY: set by `lend` from `&self.faults` for as long as this
        // thread reads the guarded range; the mapping outlives the read.
        let faults = unsafe { &*(faults as *const Faults) };
        faults.generation.fetch_add(1, Ordering::SeqCst);
        faults.poisoned.fetch_add(1, Ordering::SeqCst);
        let page = address & !(page_size_in_handler() - 1);
        // SAFETY: replaces one page of a mapping this thread is reading
        // through `lend` (the guarded range) with private zeros, readable
        // as before; `lend` maps the file back afterwards.
        let zeros = unsafe {
            libc::mmap(
                page as *mut c_void,
                page_size_in_handler(),
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            )
        };
        if zeros != libc::MAP_FAILED {
            let _ = REPLACED.try_with(|r| r.set(r.get() + 1));
            return;
        }
    }
    // Not a fault of a lent read: restore what SIGBUS did before and let
    // the faulting instruction run again under it.
    if let Some(previous) = PREVIOUS.get() {
        // SAFETY: reinstalls the disposition the kernel reported earlier.
        unsafe { libc::sigaction(libc::SIGBUS, previous, std::ptr::null_mut()) };
    }
}

static PAGE_SIZE: AtomicUsize = AtomicUsize::new(0);

fn page_size() -> usize {
    let known = PAGE_SIZE.load(Ordering::Relaxed);
    if known != 0 {
        return known;
    }
    // SAFETY: sysconf has no memory-safety preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let size = usize::try_from(size).ok().filter(|s| s.is_power_of_two()).unwrap_or(4096);
    PAGE_SIZE.store(size, Ordering::Relaxed);
    size
}

/// The page size as `map` recorded it (a mapping exists before any fault
/// can reach the handler), without calling into libc from the handler.
fn page_size_in_handler() -> usize {
    match PAGE_SIZE.load(Ordering::Relaxed) {
        0 => 4096,
        size => size,
    }
}

/// A quarter of physical memory (at least 256 MiB).
fn window() -> u64 {
    let page = page_size() as u64;
    // SAFETY: sysconf has no memory-safety preconditions.
    let pages = unsafe { libc::sysconf(libc::_SC_PHYS_PAGES) };
    let total = u64::try_from(pages).unwrap_or(0).saturating_mul(page);
    (total / 4).max(256 << 20)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn temp_file(bytes: &[u8]) -> (std::path::PathBuf, File) {
        let path = std::env::temp_dir().join(format!(
            "rampart-mapped-{}-{}",
            std::process::id(),
            bytes.len() as u64 ^ rand_tag()
        ));
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .unwrap();
        file.write_all(bytes).unwrap();
        (path, file)
    }

    fn rand_tag() -> u64 {
        let mut tag = [0u8; 8];
        crate::fill_random(&mut tag).unwrap();
        u64::from_le_bytes(tag)
    }

    #[test]
    fn lends_the_file_contents() {
        let data: Vec<u8> = (0..256 * 1024).map(|i| (i * 7 % 251) as u8).collect();
        let (path, file) = temp_file(&data);
        let map = MappedFile::map(&file, data.len() as u64).unwrap();
        let got = map.lend(4096, 65536, <[u8]>::to_vec).unwrap();
        assert_eq!(got, data[4096..4096 + 65536]);
        assert!(map.lend(data.len() as u64 - 10, 11, |_| ()).is_none(), "past the end");
        assert!(map.lend(0, 0, |_| ()).is_none(), "empty");
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn sees_writes_made_through_the_file() {
        use std::os::unix::fs::FileExt;
        let (path, file) = temp_file(&[0u8; 8192]);
        let map = MappedFile::map(&file, 8192).unwrap();
        assert_eq!(map.lend(100, 3, <[u8]>::to_vec).unwrap(), [0, 0, 0]);
        file.write_all_at(b"abc", 100).unwrap();
        assert_eq!(map.lend(100, 3, <[u8]>::to_vec).unwrap(), b"abc");
        std::fs::remove_file(path).unwrap();
    }

    /// A truncated file makes the mapped pages past its end raise SIGBUS
    /// (here it is cut while the lent function runs, after the residency
    /// check): the read is refused, the process lives, and once the file
    /// has its size back the mapping lends its bytes again.
    #[test]
    fn a_truncation_under_a_read_is_refused_not_fatal() {
        let data = vec![0x5au8; 64 * 1024];
        let (path, file) = temp_file(&data);
        let map = MappedFile::map(&file, data.len() as u64).unwrap();
        assert!(map.lend(0, data.len(), |b| b.iter().all(|&x| x == 0x5a)).unwrap());
        let mut seen = Vec::new();
        let lent = map.lend(0, data.len(), |b| {
            file.set_len(4096).unwrap();
            seen.extend_from_slice(b);
        });
        assert!(lent.is_none());
        assert_eq!(seen.len(), data.len(), "the lent function ran to its end");
        assert_eq!(&seen[..4096], &data[..4096]);
        assert!(seen[4096..].iter().all(|&b| b == 0), "lost pages read as zeros");
        assert_eq!(map.faults.poisoned.load(Ordering::SeqCst), 0, "the pages were mapped back");
        // Past the end, the kernel either has no page (refused before
        // reading), raises SIGBUS (refused), or still maps the zeroed tail
        // of a large folio that straddled the old end (lent, zeros).
        if let Some(tail) = map.lend(0, data.len(), |b| b[4096..].to_vec()) {
            assert!(tail.iter().all(|&b| b == 0));
        }
        file.set_len(data.len() as u64).unwrap();
        use std::os::unix::fs::FileExt;
        file.write_all_at(&data[4096..], 4096).unwrap();
        assert_eq!(map.lend(0, data.len(), <[u8]>::to_vec).unwrap(), data);
        std::fs::remove_file(path).unwrap();
    }

    /// Readers on several threads while another cuts and regrows the file:
    /// no crash, and every read that is trusted saw the file's bytes.
    #[test]
    fn concurrent_readers_survive_truncations() {
        use std::os::unix::fs::FileExt;
        let data = vec![0xc3u8; 256 * 1024];
        let (path, file) = temp_file(&data);
        let map = MappedFile::map(&file, data.len() as u64).unwrap();
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|scope| {
            for _ in 0..3 {
                scope.spawn(|| {
                    let mut trusted = 0u32;
                    while !stop.load(Ordering::Relaxed) {
                        // The first 8 KiB are never cut; the rest is the
                        // data or, while regrown, a hole (zeros).
                        let check = |b: &[u8]| {
                            b[..8192].iter().all(|&x| x == 0xc3)
                                && b[8192..].iter().all(|&x| x == 0xc3 || x == 0)
                        };
                        if let Some(ok) = map.lend(0, data.len(), check) {
                            assert!(ok, "a trusted read saw bytes the file never held");
                            trusted += 1;
                        }
                    }
                    trusted
                });
            }
            for _ in 0..200 {
                file.set_len(8192).unwrap();
                file.set_len(data.len() as u64).unwrap();
                file.write_all_at(&data[8192..], 8192).unwrap();
            }
            stop.store(true, Ordering::Relaxed);
        });
        assert_eq!(map.faults.poisoned.load(Ordering::SeqCst), 0);
        std::fs::remove_file(path).unwrap();
    }
}
