//! How much freed memory glibc's malloc keeps in a worker. Python objects
//! over 512 bytes (request and response bodies) come from malloc. With the
//! defaults, a loop that starts a batch of requests holds their bodies at
//! once, frees them together, and the heap's top passes the 128 KiB trim
//! threshold: `free()` gives the pages back with `brk`, the next batch
//! faults them in again. Measured on the native ASGI server, POST echo
//! 10 KiB at c=128 spent 7% of its time in those page faults and trims.
//!
//! What that keeps is bounded by the trim threshold at the top of each heap,
//! not in its middle: after a burst of large bodies (a hundred clients that
//! do not read an 8 MiB response), the freed chunks sit between live ones,
//! and no `free()` returns them; a worker kept 830 MiB that way, on every
//! runtime thread's arena. So once a second the worker asks how much the
//! heaps hold free (`give_back_freed_heap`), and past `KEEP_FREE` has
//! `malloc_trim` hand the free pages back; a steady load holds far less
//! free than that, so it never pays for the trim.

/// Freed memory at the heap's top kept for reuse; glibc's own dynamic
/// threshold can grow to 64 MiB, so this is within what it does anyway.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const TRIM_THRESHOLD: libc::c_int = 32 << 20;
/// Setting the trim threshold freezes glibc's dynamic mmap threshold at
/// 128 KiB, which would map and unmap every larger body; half the trim
/// threshold is where glibc's own adjustment keeps it.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MMAP_THRESHOLD: libc::c_int = 16 << 20;

/// The glibc environment that already chose these numbers: the user's
/// choice wins.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn user_tuned() -> bool {
    [
        "MALLOC_TRIM_THRESHOLD_",
        "MALLOC_TOP_PAD_",
        "MALLOC_MMAP_THRESHOLD_",
    ]
    .iter()
    .any(|name| std::env::var_os(name).is_some())
        || std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains("glibc.malloc."))
}

/// Keeps freed heap memory for reuse (see the module doc); a no-op off
/// glibc and where the user tuned malloc. Returns whether it applied.
#[pyo3::pyfunction]
pub fn keep_freed_heap() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        if user_tuned() {
            return false;
        }
        // SAFETY: mallopt only changes malloc's parameters; it is thread-safe.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
                && libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    false
}

/// Free heap bytes kept for reuse before the rest is handed back.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const KEEP_FREE: usize = 64 << 20;

/// glibc's `mallinfo2` (2.33 and later), looked up at run time: a wheel
/// built against an older glibc cannot link it.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn free_heap_bytes() -> Option<usize> {
    use std::sync::OnceLock;
    type MallInfo2 = unsafe extern "C" fn() -> libc::mallinfo2;
    static FOUND: OnceLock<Option<MallInfo2>> = OnceLock::new();
    let found = FOUND.get_or_init(|| {
        // SAFETY: dlsym with a NUL-terminated name; a non-null result is
        // glibc's mallinfo2, whose signature is the one above.
        unsafe {
            let sym = libc::dlsym(libc::RTLD_DEFAULT, c"mallinfo2".as_ptr());
            (!sym.is_null()).then(|| std::mem::transmute::<*mut libc::c_void, MallInfo2>(sym))
        }
    });
    // SAFETY: mallinfo2 only reads malloc's statistics, under its locks.
    found.map(|f| unsafe { f() }.fordblks)
}

/// Hands the heap's free pages back to the system when it holds more than
/// `KEEP_FREE` of them (see the module doc). Called once a second; returns
/// whether it trimmed.
#[pyo3::pyfunction]
pub fn give_back_freed_heap() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        if free_heap_bytes().is_some_and(|free| free > KEEP_FREE) {
            // SAFETY: malloc_trim only releases free memory; it is thread-safe.
            return unsafe { libc::malloc_trim(0) } == 1;
        }
    }
    false
}
