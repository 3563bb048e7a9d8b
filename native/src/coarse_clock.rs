//! Clocks read a few times per request where a millisecond does not matter
//! (the app-stuck check of `--timeout`, the Date header's second). The
//! coarse clocks return the kernel's last tick without reading the TSC:
//! a few ns, where each precise read cost ~25 ns in a VM (perf put
//! clock_gettime at 1.5% of a small request on the WSGI engine).

/// Nanoseconds on a monotonic clock (a tick, 1-4 ms, behind the precise one).
pub fn monotonic_ns() -> u64 {
    #[cfg(target_os = "linux")]
    {
        read(libc::CLOCK_MONOTONIC_COARSE)
    }
    #[cfg(not(target_os = "linux"))]
    {
        use std::sync::OnceLock;
        use std::time::Instant;
        static EPOCH: OnceLock<Instant> = OnceLock::new();
        EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }
}

/// Whole seconds since the Unix epoch.
pub fn unix_secs() -> u64 {
    #[cfg(target_os = "linux")]
    {
        read(libc::CLOCK_REALTIME_COARSE) / 1_000_000_000
    }
    #[cfg(not(target_os = "linux"))]
    {
        use std::time::{SystemTime, UNIX_EPOCH};
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    }
}

#[cfg(target_os = "linux")]
fn read(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write; both clocks exist since Linux 2.6.32.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coarse_clocks_follow_the_precise_ones() {
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        assert!(unix_secs().abs_diff(wall) <= 1);
        let before = monotonic_ns();
        std::thread::sleep(std::time::Duration::from_millis(30));
        let waited = monotonic_ns() - before;
        // The later read lags by at most a tick (10 ms at HZ=100).
        assert!(waited >= 20_000_000, "{waited}");
    }
}
