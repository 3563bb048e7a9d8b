//! `supervise._native`: the parts of the server that run for every request.
//! `http1_codec` is plain Rust; `py` exposes it to the Python workers.

mod access_log;
mod asgi;
mod bridge;
mod coarse_clock;
mod heap;
pub mod http1_codec;
mod native_server;
pub mod proxy;
pub(crate) mod py;
mod relay;
mod rsgi;
pub mod server;
pub mod static_files;
mod wsgi;
mod x509_name;

/// Rust's allocations only (Python objects keep pymalloc): see Cargo.toml.
/// Not under the fuzzer, whose sanitizer must see every allocation.
#[cfg(not(feature = "fuzzing"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_arena_eager_commit` (4 in mimalloc 2 and 3; the sys crate
/// names not every option). Its default commits whole arenas up front on
/// Linux: +5 MiB in every process that loads us (the arbiter too), +20 MiB
/// in a worker after a load; committed as used, the RSS stays glibc's and
/// the throughput mimalloc's.
const ARENA_EAGER_COMMIT: libmimalloc_sys::mi_option_t = 4;

use pyo3::prelude::*;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // SAFETY: sets an option value; before the server allocates its first arena.
    unsafe { libmimalloc_sys::mi_option_set(ARENA_EAGER_COMMIT, 0) };
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(heap::keep_freed_heap, m)?)?;
    m.add_function(wrap_pyfunction!(heap::give_back_freed_heap, m)?)?;
    py::register(m)?;
    bridge::register(m)?;
    rsgi::register(m)?;
    native_server::register(m)?;
    asgi::register(m)?;
    wsgi::register(m)
}
