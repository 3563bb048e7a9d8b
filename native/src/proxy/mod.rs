//! The PROXY protocol, versions 1 (text) and 2 (binary), as haproxy's
//! `proxy-protocol.txt` specifies it: what a proxy in front of us (haproxy
//! `send-proxy`, nginx `proxy_protocol on` in its stream module) writes at
//! the very start of a connection to say who the client is.
//!
//! Sans-IO: `parse` looks at the bytes received so far and says whether they
//! hold a whole header (and how many bytes it took), need more, or can never
//! become one. The caller owns the socket and the buffer, so the same code
//! serves the Python workers (through `crate::py`) and the Rust server. It
//! never consumes past the header: what follows belongs to TLS or HTTP.
//!
//! Strict: exactly the syntax of the specification, nothing a lenient proxy
//! might also write, because the header comes from a peer we trust to say
//! who the client is and a mistake there is a spoofed address.

mod allow;
mod v1;
mod v2;

#[cfg(test)]
mod tests;

use std::net::SocketAddr;

pub use allow::Allow;

/// The longest version 1 header, CRLF included.
pub const V1_MAX: usize = 107;
/// The first 12 bytes of every version 2 header.
pub const V2_SIGNATURE: &[u8; 12] = b"\r\n\r\n\0\r\nQUIT\n";
/// The longest version 2 header: the fixed 16 bytes and a 16-bit length.
pub const V2_MAX: usize = 16 + 0xffff;

const V1_PREFIX: &[u8] = b"PROXY ";

/// What the header says the proxied connection was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    Tcp4,
    Tcp6,
    /// A unix socket on the proxy's side (version 2 only): no address to give.
    Unix,
    /// Version 1 `UNKNOWN`, version 2 `LOCAL` (the proxy's own connection,
    /// a health check) or `UNSPEC`.
    Unknown,
}

impl Family {
    pub fn name(self) -> &'static str {
        match self {
            Family::Tcp4 => "TCP4",
            Family::Tcp6 => "TCP6",
            Family::Unix => "UNIX",
            Family::Unknown => "UNKNOWN",
        }
    }
}

/// A complete, valid header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// 1 or 2.
    pub version: u8,
    /// Its length: the bytes after it are the client's.
    pub consumed: usize,
    pub family: Family,
    /// The client; `None` when the connection keeps its own peer (every
    /// family but TCP4 and TCP6).
    pub source: Option<SocketAddr>,
    /// The address the client connected to, on the proxy's side.
    pub destination: Option<SocketAddr>,
    /// Version 2 `LOCAL`: the proxy speaking for itself.
    pub local: bool,
}

impl Header {
    fn unknown(version: u8, consumed: usize, local: bool) -> Header {
        Header {
            version,
            consumed,
            family: Family::Unknown,
            source: None,
            destination: None,
            local,
        }
    }
}

/// What the bytes so far amount to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A beginning of a header: read more (the caller bounds how long).
    Incomplete,
    Parsed(Header),
    /// Not a header, and no more bytes can make it one: close the connection.
    Invalid(&'static str),
}

/// Reads the header at the start of `buf`, which holds every byte the
/// connection received so far (the state of the machine is that buffer).
///
/// On `Incomplete` every byte of `buf` belongs to the header, so a caller
/// that peeks may consume them all before waiting for more.
pub fn parse(buf: &[u8]) -> Outcome {
    let Some(&first) = buf.first() else {
        return Outcome::Incomplete;
    };
    if first == V2_SIGNATURE[0] {
        let n = buf.len().min(V2_SIGNATURE.len());
        if buf[..n] != V2_SIGNATURE[..n] {
            return Outcome::Invalid("no PROXY protocol header");
        }
        return v2::parse(buf);
    }
    let n = buf.len().min(V1_PREFIX.len());
    if buf[..n] != V1_PREFIX[..n] {
        return Outcome::Invalid("no PROXY protocol header");
    }
    if buf.len() < V1_PREFIX.len() {
        return Outcome::Incomplete;
    }
    v1::parse(buf)
}
