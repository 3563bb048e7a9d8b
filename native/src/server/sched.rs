//! Thread scheduling of the worker's threads.
//!
//! The loop thread and the runtime thread(s) hand requests to each other; on
//! one core, with the default policy, every hand-off wakes the other thread
//! and the kernel switches to it at once (wake-up preemption), so they
//! ping-pong a few requests at a time. Measured with the benchmark's 4-byte
//! GET (wrk -c128, the worker pinned to one core): 0.7 context switches per
//! request, 40k req/s. SCHED_BATCH keeps the policy fair (same nice value,
//! no privileges needed) but drops wake-up preemption: the running thread
//! goes on until it blocks, so each side works through a whole batch, and
//! the same run gives 70k req/s. The price: a woken thread may wait for the
//! running one's time slice (milliseconds) when the core is contended.

/// Puts the calling thread under SCHED_BATCH; best effort (ignored elsewhere
/// than Linux, and when the call fails).
pub fn prefer_batches() {
    #[cfg(target_os = "linux")]
    {
        #[repr(C)]
        struct SchedParam {
            sched_priority: i32,
        }
        extern "C" {
            fn sched_setscheduler(pid: i32, policy: i32, param: *const SchedParam) -> i32;
        }
        const SCHED_BATCH: i32 = 3;
        let param = SchedParam { sched_priority: 0 };
        // SAFETY: glibc's wrapper of the syscall; pid 0 is the calling thread
        // (the policy is per thread on Linux) and `param` outlives the call.
        unsafe {
            sched_setscheduler(0, SCHED_BATCH, &param);
        }
    }
}

/// Goes to the back of this thread's run queue once, where another thread
/// of a work-stealing runtime may take the task. `tokio::task::yield_now`
/// instead parks the caller in a list that is woken only when its thread
/// has nothing else to run, so a WSGI app that holds the thread meanwhile
/// holds the caller too. A task that wakes itself is requeued at the back
/// of the queue (not in the thread's LIFO slot, which nobody steals).
pub fn make_way() -> impl std::future::Future<Output = ()> {
    let mut queued = false;
    std::future::poll_fn(move |cx| {
        if queued {
            return std::task::Poll::Ready(());
        }
        queued = true;
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    })
}
