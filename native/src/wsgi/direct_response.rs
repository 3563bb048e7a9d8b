//! The response side of the WSGI engine's HTTP/1.1 loop (`h1.rs`): the head
//! from `start_response` (`h1::ResponseHeadBuilder`, the Python workers'
//! framing), and the writers for a streamed iterable and a file.

use std::io;
use std::sync::Arc;

use bytes::Bytes;
use pyo3::prelude::*;

use super::dispatch::Engine;
use super::stream::{capped, Pump};
use crate::http1_codec::{ChunkSize, ResponseHead, ResponseHeadBuilder};
use crate::server::direct_wire::{Target, Wire};

const FILE_CHUNK: usize = 256 * 1024;

/// The response head from start_response's status and fields; `known` is
/// the body's size when the engine holds it (a list, a file).
pub(super) fn frame(
    py: Python<'_>,
    engine: &Engine,
    call: &super::dispatch::Call,
    t: Target,
    known: Option<u64>,
    file: bool,
) -> Option<ResponseHead> {
    let start = call.start.borrow(py);
    let built =
        ResponseHeadBuilder::new(start.head.status_line(), t.http11, t.keep_alive, t.is_head)
            .and_then(|mut b| {
                for (name, value, kind) in start.head.fields() {
                    b.checked_header(name, value, kind)?;
                }
                if let (true, true, None, Some(n)) = (t.is_head, file, start.length, known) {
                    // The size a GET would get: HEAD must announce it too.
                    b.header(b"Content-Length", n.to_string().as_bytes())?;
                }
                Ok(b.finish_with_length(known))
            });
    drop(start);
    match built {
        Ok(head) => Some(head),
        Err(e) => {
            let err = pyo3::exceptions::PyValueError::new_err(e);
            engine.report(py, call.environ.bind(py), err, "");
            None
        }
    }
}

pub(super) async fn write_block(
    c: &mut Wire,
    framed: &ResponseHead,
    block: &[u8],
) -> io::Result<()> {
    if block.is_empty() || framed.framing.limit() == Some(0) {
        return Ok(());
    }
    if framed.chunked() {
        let size = ChunkSize::new(block.len());
        c.write([size.as_bytes(), block, b"\r\n"]).await
    } else {
        c.write([block]).await
    }
}

/// An iterable, one block per GIL hold, each written before the next is
/// asked for (a slow client holds the iteration back).
pub(super) async fn stream(
    engine: &Arc<Engine>,
    c: &mut Wire,
    framed: &ResponseHead,
    call: super::dispatch::Call,
    mut pump: Pump,
    first: Bytes,
) -> bool {
    let mut left = framed.framing.limit();
    let mut sent = 0u64;
    let mut ok = c.write([&framed.bytes]).await.is_ok();
    let mut block = Some(first);
    let mut complete = false;
    while ok {
        let Some(next) = block.take() else {
            complete = true;
            break;
        };
        let next = capped(next, &mut left);
        sent += next.len() as u64;
        ok = write_block(c, framed, &next).await.is_ok();
        if !ok || left == Some(0) {
            complete = ok;
            break;
        }
        let step = {
            let _busy = engine.clock.enter();
            Python::attach(|py| pump.step(py, &call))
        };
        match step {
            Ok(more) => block = more,
            Err(err) => {
                Python::attach(|py| {
                    engine.report(py, call.environ.bind(py), err, "response cut off")
                });
                ok = false;
            }
        }
    }
    if complete && framed.chunked() {
        complete = c.write([b"0\r\n\r\n"]).await.is_ok();
    }
    Python::attach(|py| {
        pump.close(py);
        let status = call.start.borrow(py).code;
        engine.done(py, &call, status, sent);
        drop(pump);
        drop(call);
    });
    complete && framed.keep_alive && left.is_none_or(|n| n == 0)
}

/// A regular file after the head: by sendfile(2) on a plain socket, else
/// read on this thread (body.rs says why) and written.
pub(super) async fn send_file(
    c: &mut Wire,
    framed: &ResponseHead,
    file: std::fs::File,
    len: u64,
    sendfile: bool,
) -> io::Result<u64> {
    let left = framed.framing.limit().map_or(len, |n| len.min(n));
    if sendfile && left > 0 && c.sends_files() {
        return c.send_file(&framed.bytes, &file, left).await;
    }
    copy_file(c, framed, file, left).await
}

async fn copy_file(
    c: &mut Wire,
    framed: &ResponseHead,
    mut file: std::fs::File,
    mut left: u64,
) -> io::Result<u64> {
    use std::io::Read;
    let mut buf = vec![0u8; (left as usize).clamp(1, FILE_CHUNK)];
    let first = (left as usize).min(buf.len());
    let n = file.read(&mut buf[..first])?;
    c.write([&framed.bytes, &buf[..n]]).await?;
    let mut sent = n as u64;
    left -= n as u64;
    while left > 0 {
        let want = (left as usize).min(buf.len());
        let n = file.read(&mut buf[..want])?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into()); // the file shrank
        }
        c.write([&buf[..n]]).await?;
        sent += n as u64;
        left -= n as u64;
    }
    Ok(sent)
}
