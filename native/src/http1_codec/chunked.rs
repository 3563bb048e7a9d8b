//! Incremental decoder for `Transfer-Encoding: chunked` request bodies
//! (RFC 9112 7.1). Feed it whatever the socket gave, in any split, even one
//! byte at a time; it never buffers payload, only the current trailer line.

use super::chars::{is_field_vchar, is_ows, is_qdtext, is_quoted_pair_char, is_tchar, trim_ows};
use super::error::{ParseError, Result};

/// Longest chunk-size line (size + extensions) we read: extensions are
/// ignored, so a long one can only be a way to make us spin.
const MAX_SIZE_LINE: usize = 4096;
/// Bound on the whole trailer section, and on the number of trailer fields.
const MAX_TRAILER_BYTES: usize = 16 * 1024;
const MAX_TRAILER_FIELDS: usize = 100;

const BAD_SIZE: ParseError = ParseError::bad("Invalid chunk size");
const BAD_EXT: ParseError = ParseError::bad("Invalid chunk extension");
const BAD_DATA_END: ParseError = ParseError::bad("Missing CRLF after chunk data");
const BAD_TRAILER: ParseError = ParseError::bad("Invalid trailer field");
const TOO_LARGE: ParseError = ParseError::new(413, "Request body too large");

/// Fields that would change how the message is framed, routed or
/// authenticated if a later hop merged the trailers into the head.
pub const FORBIDDEN_TRAILERS: &[&[u8]] = &[
    b"content-length",
    b"transfer-encoding",
    b"host",
    b"trailer",
    b"te",
    b"connection",
    b"keep-alive",
    b"upgrade",
    b"expect",
    b"content-type",
    b"content-encoding",
    b"content-range",
    b"authorization",
    b"proxy-authorization",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Reading hex digits of the chunk size.
    Size,
    /// Whitespace after the size: only `;` may follow.
    SizeBws,
    /// After `;`, before an extension name.
    ExtNameStart,
    ExtName,
    /// Whitespace after a name: `=`, `;` or CR.
    ExtAfterName,
    ExtValueStart,
    ExtToken,
    ExtQuoted,
    ExtQuotedPair,
    ExtAfterValue,
    /// CR seen at the end of the size line.
    SizeLf,
    Data,
    DataCr,
    DataLf,
    /// Inside a trailer line (or the final empty line).
    Trailer,
    Done,
}

#[derive(Debug, Clone)]
pub struct ChunkedDecoder {
    state: State,
    limit_body: u64,
    size: u64,
    size_digits: usize,
    line_len: usize,
    remaining: u64,
    total: u64,
    trailer_line: Vec<u8>,
    trailer_bytes: usize,
    trailers: Vec<(Vec<u8>, Vec<u8>)>,
    leftover: Vec<u8>,
    error: Option<ParseError>,
}

impl ChunkedDecoder {
    /// `limit_body`: most payload bytes accepted (0 = no limit), else 413.
    pub fn new(limit_body: u64) -> Self {
        ChunkedDecoder {
            state: State::Size,
            limit_body,
            size: 0,
            size_digits: 0,
            line_len: 0,
            remaining: 0,
            total: 0,
            trailer_line: Vec::new(),
            trailer_bytes: 0,
            trailers: Vec::new(),
            leftover: Vec::new(),
            error: None,
        }
    }

    /// The last chunk and the trailer section have been read.
    pub fn done(&self) -> bool {
        self.state == State::Done
    }

    /// Bytes received after the end of the body (the next pipelined request).
    pub fn leftover(&self) -> &[u8] {
        &self.leftover
    }

    pub fn take_leftover(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.leftover)
    }

    /// Trailer fields, names lower-cased, in received order.
    pub fn trailers(&self) -> &[(Vec<u8>, Vec<u8>)] {
        &self.trailers
    }

    /// Payload bytes announced by the chunk sizes read so far: each size is
    /// checked against the limit when it is read, before its data arrives, so
    /// this runs ahead of the payload until the chunk is complete.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Decodes `data`, appending payload to `out`. After an error every later
    /// call returns the same error: the connection must be closed.
    pub fn feed(&mut self, data: &[u8], out: &mut Vec<u8>) -> Result<()> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let r = self.feed_inner(data, out);
        if let Err(e) = r {
            self.error = Some(e);
        }
        r
    }

    fn feed_inner(&mut self, data: &[u8], out: &mut Vec<u8>) -> Result<()> {
        let mut i = 0;
        while i < data.len() {
            match self.state {
                State::Data => {
                    let avail = (data.len() - i) as u64;
                    let take = avail.min(self.remaining) as usize;
                    out.extend_from_slice(&data[i..i + take]);
                    i += take;
                    self.remaining -= take as u64;
                    if self.remaining == 0 {
                        self.state = State::DataCr;
                    }
                }
                State::Done => {
                    self.leftover.extend_from_slice(&data[i..]);
                    return Ok(());
                }
                State::Trailer => {
                    let rest = &data[i..];
                    let (chunk, complete) = match rest.iter().position(|&b| b == b'\n') {
                        Some(p) => (&rest[..=p], true),
                        None => (rest, false),
                    };
                    self.trailer_bytes += chunk.len();
                    if self.trailer_bytes > MAX_TRAILER_BYTES {
                        return Err(ParseError::new(431, "Trailer section too large"));
                    }
                    self.trailer_line.extend_from_slice(chunk);
                    i += chunk.len();
                    if complete {
                        self.end_trailer_line()?;
                    }
                }
                _ => {
                    self.size_line_byte(data[i])?;
                    i += 1;
                }
            }
        }
        Ok(())
    }

    /// One byte of a chunk-size line or of a chunk's trailing CRLF.
    fn size_line_byte(&mut self, b: u8) -> Result<()> {
        use State::*;
        if matches!(
            self.state,
            Size | SizeBws
                | ExtNameStart
                | ExtName
                | ExtAfterName
                | ExtValueStart
                | ExtToken
                | ExtQuoted
                | ExtQuotedPair
                | ExtAfterValue
        ) {
            self.line_len += 1;
            if self.line_len > MAX_SIZE_LINE {
                return Err(BAD_EXT);
            }
        }
        self.state = match (self.state, b) {
            (Size, _) if b.is_ascii_hexdigit() => {
                // 2^60 bytes is far beyond any limit and cannot overflow.
                if self.size >> 60 != 0 {
                    return Err(ParseError::bad("Chunk size too large"));
                }
                self.size = self.size << 4 | u64::from(hex(b));
                self.size_digits += 1;
                Size
            }
            (Size, _) if self.size_digits == 0 => return Err(BAD_SIZE),
            (Size, b'\r') => SizeLf,
            (Size, b';') => ExtNameStart,
            (Size | SizeBws, b' ' | b'\t') => SizeBws,
            (SizeBws, b';') => ExtNameStart,
            (Size | SizeBws, _) => return Err(BAD_SIZE),

            (ExtNameStart, b' ' | b'\t') => ExtNameStart,
            (ExtNameStart | ExtName, _) if is_tchar(b) => ExtName,
            (ExtName | ExtAfterName, b' ' | b'\t') => ExtAfterName,
            (ExtName | ExtAfterName, b'=') => ExtValueStart,
            (ExtName | ExtAfterName | ExtToken | ExtAfterValue, b';') => ExtNameStart,
            (ExtName | ExtAfterName | ExtToken | ExtAfterValue, b'\r') => SizeLf,
            (ExtValueStart, b' ' | b'\t') => ExtValueStart,
            (ExtValueStart, b'"') => ExtQuoted,
            (ExtValueStart | ExtToken, _) if is_tchar(b) => ExtToken,
            (ExtToken | ExtAfterValue, b' ' | b'\t') => ExtAfterValue,
            (ExtQuoted, b'"') => ExtAfterValue,
            (ExtQuoted, b'\\') => ExtQuotedPair,
            (ExtQuoted, _) if is_qdtext(b) => ExtQuoted,
            (ExtQuotedPair, _) if is_quoted_pair_char(b) => ExtQuoted,
            (
                ExtNameStart | ExtName | ExtAfterName | ExtValueStart | ExtToken | ExtQuoted
                | ExtQuotedPair | ExtAfterValue,
                _,
            ) => return Err(BAD_EXT),

            (SizeLf, b'\n') => self.end_size_line()?,
            (SizeLf, _) => return Err(BAD_SIZE),
            (DataCr, b'\r') => DataLf,
            (DataLf, b'\n') => Size,
            (DataCr | DataLf, _) => return Err(BAD_DATA_END),
            (Data | Trailer | Done, _) => unreachable!("handled by feed"),
        };
        Ok(())
    }

    fn end_size_line(&mut self) -> Result<State> {
        let size = self.size;
        self.size = 0;
        self.size_digits = 0;
        self.line_len = 0;
        if size == 0 {
            return Ok(State::Trailer);
        }
        self.total = self.total.saturating_add(size);
        if self.limit_body != 0 && self.total > self.limit_body {
            return Err(TOO_LARGE);
        }
        self.remaining = size;
        Ok(State::Data)
    }

    /// `trailer_line` holds one line through its LF.
    fn end_trailer_line(&mut self) -> Result<()> {
        let line = std::mem::take(&mut self.trailer_line);
        let Some(body) = line.strip_suffix(b"\r\n") else {
            return Err(ParseError::bad("Invalid line ending"));
        };
        if body.is_empty() {
            self.state = State::Done;
            return Ok(());
        }
        if is_ows(body[0]) {
            return Err(ParseError::bad("Obsolete line folding"));
        }
        let colon = body.iter().position(|&b| b == b':').ok_or(BAD_TRAILER)?;
        let name = &body[..colon];
        let value = trim_ows(&body[colon + 1..]);
        if name.is_empty() || !name.iter().all(|&b| is_tchar(b)) {
            return Err(BAD_TRAILER);
        }
        if !value.iter().all(|&b| is_field_vchar(b)) {
            return Err(BAD_TRAILER);
        }
        let name = name.to_ascii_lowercase();
        if FORBIDDEN_TRAILERS.contains(&name.as_slice()) {
            return Err(ParseError::bad("Forbidden trailer field"));
        }
        if self.trailers.len() >= MAX_TRAILER_FIELDS {
            return Err(ParseError::new(431, "Too many trailer fields"));
        }
        self.trailers.push((name, value.to_vec()));
        self.trailer_line = line;
        self.trailer_line.clear();
        Ok(())
    }
}

fn hex(b: u8) -> u8 {
    match b {
        b'0'..=b'9' => b - b'0',
        b'a'..=b'f' => b - b'a' + 10,
        _ => b - b'A' + 10,
    }
}

#[cfg(test)]
#[path = "chunked_tests.rs"]
mod tests;
