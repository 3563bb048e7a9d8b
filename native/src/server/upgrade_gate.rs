//! Whether a request that asked to upgrade (an `Upgrade` field, or CONNECT)
//! was upgraded: the service knows once the app answered, precheck_io.rs needs
//! it to know what the bytes after that request are. Upgraded (101, or a 2xx
//! to CONNECT), they belong to the new protocol and pass unchecked; not
//! upgraded, they are the next HTTP/1.1 request and `http1_codec` checks them like any
//! other. Until the answer is known precheck_io holds those bytes back, so no
//! request after an upgrade that did not happen escapes the checks.

use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use futures_util::task::AtomicWaker;

#[derive(Debug, Default)]
pub struct UpgradeGate {
    /// 0: nothing settled; otherwise the request's number (from 1) shifted
    /// left once, with the low bit set when it was upgraded.
    settled: AtomicU64,
    waker: AtomicWaker,
}

impl UpgradeGate {
    /// The service's answer to request number `index` (HTTP/1.1 requests are
    /// answered one at a time, so the last one settled is the one asked about).
    pub fn settle(&self, index: u64, upgraded: bool) {
        self.settled
            .store(index << 1 | u64::from(upgraded), Ordering::Release);
        self.waker.wake();
    }

    /// Whether request number `index` was upgraded, once it is known.
    pub fn poll_outcome(&self, index: u64, cx: &mut Context<'_>) -> Poll<bool> {
        self.waker.register(cx.waker());
        let settled = self.settled.load(Ordering::Acquire);
        if settled >> 1 == index {
            Poll::Ready(settled & 1 == 1)
        } else {
            Poll::Pending
        }
    }
}
