//! How much freed memory glibc's malloc keeps in a worker. Python objects
//! over 512 bytes (request and response bodies) come from malloc. With the
//! defaults, a loop that starts a batch of requests holds their bodies at
//! once, frees them together, and the heap's top passes the 128 KiB trim
//! threshold: `free()` gives the pages back with `brk`, the next batch
//! faults them in again. Measured on the native ASGI server, POST echo
//! 10 KiB at c=128 spent 7% of its time in those page faults and trims.

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
