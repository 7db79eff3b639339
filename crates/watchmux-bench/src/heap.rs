//! The bench binary's global allocator: watchmux's [`Allocator`] with a counter of live heap
//! bytes, so the roles the bench runs as children (watchmux's `serve::run`, the limit program, the
//! simulator) can report their heap beside their RSS (scenario S9). RSS − heap is then the
//! allocator's own overhead, thread stacks and code.
//!
//! Counting is off until [`enable`] (a relaxed load per allocation when off, so scenarios that
//! measure CPU are not slowed by a shared counter); a role enables it when the bench names a
//! file in [`HEAP_FILE_ENV`], and [`report_to_file`] then writes the live bytes there every
//! 100 ms. Allocations made before counting began and freed later make the figure lower by
//! their size: it is a difference between two moments that is meaningful, not the absolute
//! value. It owns no other memory policy and never fails an allocation of its own.

use std::alloc::{GlobalAlloc, Layout};

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering};
use std::time::Duration;
use watchmux::Allocator;

/// The environment variable naming the file a role writes its live heap bytes to.
pub const HEAP_FILE_ENV: &str = "WATCHMUX_BENCH_HEAP_FILE";

/// How often [`report_to_file`] writes.
const REPORT_EVERY: Duration = Duration::from_millis(100);

static ENABLED: AtomicBool = AtomicBool::new(false);
static LIVE: AtomicIsize = AtomicIsize::new(0);

/// watchmux's [`Allocator`] (jemalloc), counting the bytes of live allocations once
/// [`enable`]d. Installed in the bench binary with `#[global_allocator]`.
pub struct Counting;

fn add(bytes: usize) {
    if ENABLED.load(Ordering::Relaxed) {
        LIVE.fetch_add(bytes as isize, Ordering::Relaxed);
    }
}

fn sub(bytes: usize) {
    if ENABLED.load(Ordering::Relaxed) {
        LIVE.fetch_sub(bytes as isize, Ordering::Relaxed);
    }
}

// SAFETY: every method forwards its arguments unchanged to watchmux's `Allocator` (jemalloc),
// which upholds `GlobalAlloc`'s contract; the counting only reads sizes from the layouts and
// touches atomics (it neither allocates nor unwinds), so the caller's guarantees pass through
// untouched.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's `layout` contract is `Allocator::alloc`'s.
        let p = unsafe { Allocator.alloc(layout) };
        if !p.is_null() {
            add(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as `alloc`.
        let p = unsafe { Allocator.alloc_zeroed(layout) };
        if !p.is_null() {
            add(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by this allocator, i.e. by `Allocator`, with `layout`.
        unsafe { Allocator.dealloc(ptr, layout) };
        sub(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` and `layout` are from this allocator, i.e. `Allocator`; `new_size` meets
        // the caller's contract.
        let p = unsafe { Allocator.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if new_size >= layout.size() {
                add(new_size - layout.size());
            } else {
                sub(layout.size() - new_size);
            }
        }
        p
    }
}

/// Starts counting.
pub fn enable() {
    ENABLED.store(true, Ordering::Relaxed);
}

/// Live heap bytes counted since [`enable`] (allocated − freed).
pub fn live_bytes() -> i64 {
    LIVE.load(Ordering::Relaxed) as i64
}

/// When [`HEAP_FILE_ENV`] names a file: enables counting and writes [`live_bytes`] to it (as
/// decimal text, replaced whole) every 100 ms from a task on the current tokio runtime, until
/// the process ends. Returns the file.
pub fn report_from_env() -> Option<PathBuf> {
    let path = PathBuf::from(std::env::var_os(HEAP_FILE_ENV)?);
    enable();
    tokio::spawn(report_to_file(path.clone()));
    Some(path)
}

/// Writes [`live_bytes`] to `path` every 100 ms (through a temporary file renamed over it, so a
/// reader never sees half a number).
pub async fn report_to_file(path: PathBuf) {
    let tmp = path.with_extension("tmp");
    let mut tick = tokio::time::interval(REPORT_EVERY);
    loop {
        tick.tick().await;
        if tokio::fs::write(&tmp, live_bytes().to_string())
            .await
            .is_ok()
        {
            let _ = tokio::fs::rename(&tmp, &path).await;
        }
    }
}

/// The live heap bytes last written to `path` by [`report_to_file`].
pub fn read_file(path: &Path) -> Option<i64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(
        unsafe_code,
        reason = "calls the allocator's methods directly, as Rust does"
    )]
    fn counts_live_bytes_only_when_enabled_and_files_round_trip() {
        // The test binary's allocator is not `Counting`: the counter moves only when it is
        // called, here, and this is the only test that calls it.
        let layout = Layout::from_size_align(100, 8).unwrap();
        let before = live_bytes();
        // SAFETY: a non-zero layout; the block is freed with the same layout.
        unsafe { Counting.dealloc(Counting.alloc(layout), layout) };
        assert_eq!(live_bytes(), before, "off: nothing counted");
        enable();
        // SAFETY: as above; `realloc` gets the block's current layout, then the new size's.
        unsafe {
            let p = Counting.alloc(layout);
            assert!(!p.is_null());
            assert_eq!(live_bytes(), before + 100);
            let q = Counting.realloc(p, layout, 250);
            assert_eq!(live_bytes(), before + 250);
            let r = Counting.realloc(q, Layout::from_size_align(250, 8).unwrap(), 40);
            assert_eq!(live_bytes(), before + 40);
            let z = Counting.alloc_zeroed(layout);
            assert_eq!(live_bytes(), before + 140);
            Counting.dealloc(z, layout);
            Counting.dealloc(r, Layout::from_size_align(40, 8).unwrap());
        }
        assert_eq!(live_bytes(), before);
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("heap");
        std::fs::write(&f, "12345\n").unwrap();
        assert_eq!(read_file(&f), Some(12345));
        assert_eq!(read_file(&dir.path().join("none")), None);
    }
}
