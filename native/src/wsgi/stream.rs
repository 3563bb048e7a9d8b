//! Bodies that are not a list: a `wsgi.file_wrapper` over a regular file is
//! read from Rust; any other iterable is iterated by a task on the
//! connection's runtime, one block per GIL hold, each handed to hyper
//! through a small channel, so a slow client holds back the iteration
//! (backpressure) and a client that left ends it.

use std::io::Seek;
use std::os::fd::BorrowedFd;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyIterator;
use tokio::sync::mpsc;

use super::dispatch::{close, no_start_response, Call, Engine};
use super::start::as_bytes;
use crate::server::Tracker;

/// Blocks queued ahead of the client.
const AHEAD: usize = 4;

pub(super) struct Pump {
    iter: Py<PyIterator>,
    result: Py<PyAny>,
}

impl Pump {
    pub fn new(iter: Py<PyIterator>, result: Py<PyAny>) -> Self {
        Pump { iter, result }
    }

    /// What the app wrote and the next non-empty block it yields, together;
    /// None once the iterable is done and nothing is left.
    pub fn step(&mut self, py: Python<'_>, call: &Call) -> PyResult<Option<Bytes>> {
        let mut iter = self.iter.bind(py).clone();
        loop {
            let item = iter.next().transpose()?;
            let mut blocks = std::mem::take(&mut call.start.borrow_mut(py).written);
            let end = item.is_none();
            if let Some(item) = item {
                let block = as_bytes(&item)?;
                if !block.is_empty() {
                    blocks.push(block);
                }
            }
            if !blocks.is_empty() {
                return Ok(Some(join(blocks)));
            }
            if end {
                return Ok(None);
            }
        }
    }

    pub fn close(&self, py: Python<'_>) {
        close(py, self.result.bind(py));
    }
}

/// The blocks as one (no copy for one block).
pub(super) fn join(mut blocks: Vec<Bytes>) -> Bytes {
    if blocks.len() <= 1 {
        return blocks.pop().unwrap_or_default();
    }
    let mut buf = BytesMut::with_capacity(blocks.iter().map(Bytes::len).sum());
    for b in &blocks {
        buf.extend_from_slice(b);
    }
    buf.freeze()
}

/// At most what is `left` of an announced Content-Length.
pub(super) fn capped(mut block: Bytes, left: &mut Option<u64>) -> Bytes {
    if let Some(n) = left {
        block.truncate((*n).min(block.len() as u64) as usize);
        *n -= block.len() as u64;
    }
    block
}

/// hyper's body for an iterable whose first block is out: a task on the
/// runtime iterates the rest into a small channel.
pub(super) fn spawn(
    py: Python<'_>,
    engine: Arc<Engine>,
    call: Call,
    mut pump: Pump,
    first: Bytes,
    tracker: Arc<Tracker>,
) -> mpsc::Receiver<Bytes> {
    let start = call.start.borrow(py);
    let status = start.code;
    let mut left = start.length;
    drop(start);
    let (tx, rx) = mpsc::channel(AHEAD);
    let first = capped(first, &mut left);
    let mut sent = first.len() as u64;
    let _ = tx.try_send(first);
    tokio::spawn(async move {
        while left != Some(0) {
            let step = {
                let _busy = engine.clock.enter();
                Python::attach(|py| pump.step(py, &call))
            };
            match step {
                Ok(Some(block)) => {
                    let block = capped(block, &mut left);
                    sent += block.len() as u64;
                    if tx.send(block).await.is_err() {
                        break; // the client left: stop iterating
                    }
                }
                Ok(None) => break,
                Err(err) => {
                    Python::attach(|py| {
                        engine.report(py, call.environ.bind(py), err, "response cut off")
                    });
                    // Cut, so the client cannot take it for a whole body.
                    tracker.abort();
                    break;
                }
            }
        }
        Python::attach(|py| {
            pump.close(py);
            engine.done(py, &call, status, sent);
            drop(pump);
            drop(call);
        });
    });
    rx
}

/// A file_wrapper's file object, when it is a regular file: sent from
/// Rust; None when it is not one (a pipe, a BytesIO): the caller iterates
/// the wrapper instead.
pub(super) fn file(
    py: Python<'_>,
    call: &Call,
    filelike: &Bound<'_, PyAny>,
) -> PyResult<Option<(std::fs::File, u64)>> {
    let Ok(fd) = filelike
        .call_method0(intern!(py, "fileno"))
        .and_then(|f| f.extract::<i32>())
    else {
        return Ok(None);
    };
    // SAFETY: `fd` is open (the file object just gave it) while we dup it.
    let Ok(owned) = unsafe { BorrowedFd::borrow_raw(fd) }.try_clone_to_owned() else {
        return Ok(None);
    };
    let mut file = std::fs::File::from(owned);
    let Ok(meta) = file.metadata() else {
        return Ok(None);
    };
    if !meta.is_file() {
        return Ok(None);
    }
    // Where a reader of the file object would start (the dup shares it).
    let Ok(offset) = file.stream_position() else {
        return Ok(None);
    };
    let mut start = call.start.borrow_mut(py);
    if start.status_code().is_none() {
        return Err(no_start_response());
    }
    let size = meta.len().saturating_sub(offset);
    let len = start.length.map_or(size, |n| n.min(size));
    start.committed = true;
    Ok(Some((file, len)))
}
