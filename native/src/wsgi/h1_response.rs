//! The response side of the WSGI engine's HTTP/1.1 loop (`h1.rs`): the head
//! from `start_response` (`h1::ResponseHeadBuilder`, the Python workers'
//! framing), and the writers for a streamed iterable and a file.

use std::io;
use std::sync::Arc;

use bytes::Bytes;
use pyo3::prelude::*;

use super::dispatch::Engine;
use super::stream::{capped, Pump};
use crate::h1::ResponseHeadBuilder;
use crate::server::h1_wire::Wire;

const FILE_CHUNK: usize = 256 * 1024;

/// What the response head says, and how its body must be framed.
pub(super) struct Framed {
    pub head: Vec<u8>,
    /// Body bytes to send; -1: chunked or delimited by the close.
    pub length: i64,
    pub chunked: bool,
    pub keep_alive: bool,
}

/// How much of a whole body goes out: none where no body is allowed, never
/// more than the app's Content-Length.
pub(super) fn sent_of(framed: &Framed, len: usize) -> usize {
    if framed.length < 0 {
        len
    } else {
        len.min(framed.length as usize)
    }
}

/// What the request says about its response's framing.
pub(super) struct Target {
    pub http11: bool,
    pub keep_alive: bool,
    pub is_head: bool,
}

/// The response head from start_response's status and fields; `known` is
/// the body's size when the engine holds it (a list, a file).
pub(super) fn frame(
    py: Python<'_>,
    engine: &Engine,
    call: &super::dispatch::Call,
    t: Target,
    known: Option<u64>,
    file: bool,
) -> Option<Framed> {
    let start = call.start.borrow(py);
    let built = ResponseHeadBuilder::new(&start.status_line, t.http11, t.keep_alive, t.is_head)
        .and_then(|mut b| {
            for (name, value, _) in &start.fields {
                b.header(name, value)?;
            }
            if let (true, true, None, Some(n)) = (t.is_head, file, start.length, known) {
                // The size a GET would get: HEAD must announce it too.
                b.header(b"Content-Length", n.to_string().as_bytes())?;
            }
            Ok(b.finish_with_length(known))
        });
    drop(start);
    match built {
        Ok(head) => Some(Framed {
            head: head.bytes,
            length: head.content_length,
            chunked: head.chunked,
            keep_alive: head.keep_alive,
        }),
        Err(e) => {
            let err = pyo3::exceptions::PyValueError::new_err(e);
            engine.report(py, call.environ.bind(py), err, "");
            None
        }
    }
}

pub(super) async fn write_block(c: &mut Wire, framed: &Framed, block: &[u8]) -> io::Result<()> {
    if block.is_empty() || framed.length == 0 {
        return Ok(());
    }
    if framed.chunked {
        let size = format!("{:x}\r\n", block.len());
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
    framed: &Framed,
    call: super::dispatch::Call,
    mut pump: Pump,
    first: Bytes,
) -> bool {
    let mut left = (framed.length >= 0).then_some(framed.length as u64);
    let mut sent = 0u64;
    let mut ok = c.write([&framed.head]).await.is_ok();
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
    if complete && framed.chunked {
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

/// A regular file, read on this thread (body.rs says why) after the head.
pub(super) async fn send_file(
    c: &mut Wire,
    framed: &Framed,
    mut file: std::fs::File,
    len: u64,
) -> io::Result<u64> {
    use std::io::Read;
    let mut left = if framed.length >= 0 {
        len.min(framed.length as u64)
    } else {
        len
    };
    let mut buf = vec![0u8; (left as usize).clamp(1, FILE_CHUNK)];
    let first = (left as usize).min(buf.len());
    let n = file.read(&mut buf[..first])?;
    c.write([&framed.head, &buf[..n]]).await?;
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
