//! What the fields say about the message: framing (Content-Length /
//! Transfer-Encoding), Host, Connection, Expect, Upgrade. Every ambiguity a
//! proxy and this server could read differently is a 4xx here.

use super::chars::{is_token, list_items, parse_decimal};
use super::error::{ParseError, Result};
use super::head::{Field, Span, Version};
use super::target::valid_authority;

/// The fields' verdict, as offsets into the head for the values kept.
pub(super) struct Semantics {
    pub content_length: Option<u64>,
    pub chunked: bool,
    pub host: Option<Span>,
    pub keep_alive: bool,
    pub expect_continue: bool,
    /// Upgrade value, only when Connection lists "upgrade".
    pub upgrade: Option<Span>,
}

/// Codings we can let through ahead of the final chunked: the app sees them in
/// HTTP_TRANSFER_ENCODING and gets the payload de-chunked but not decoded.
fn known_coding(c: &[u8]) -> bool {
    [
        &b"identity"[..],
        b"gzip",
        b"x-gzip",
        b"deflate",
        b"compress",
        b"x-compress",
    ]
    .iter()
    .any(|k| c.eq_ignore_ascii_case(k))
}

/// Reads the fields of `head` (names already lower-cased).
pub(super) fn read_fields(head: &[u8], fields: &[Field], version: Version) -> Result<Semantics> {
    let mut content_length = None;
    let mut te_seen = false;
    let mut chunked_seen = false;
    let mut last_chunked = false;
    let mut unknown_coding = false;
    let mut host = None;
    let mut content_type_seen = false;
    let (mut close, mut keep, mut conn_upgrade) = (false, false, false);
    let mut expect_continue = false;
    let mut upgrade = None;
    for f in fields {
        let value = &head[f.value.range()];
        match &head[f.name.range()] {
            b"content-length" => {
                // Even an identical repeat is refused: two framing fields mean
                // two parsers may disagree somewhere on the path.
                if content_length.is_some() {
                    return Err(ParseError::bad("Duplicate Content-Length"));
                }
                content_length = Some(
                    parse_decimal(value, i64::MAX as u64)
                        .ok_or(ParseError::bad("Invalid Content-Length"))?,
                );
            }
            b"transfer-encoding" => {
                te_seen = true;
                for coding in list_items(value) {
                    if !is_token(coding) {
                        return Err(ParseError::bad("Invalid Transfer-Encoding"));
                    }
                    if coding.eq_ignore_ascii_case(b"chunked") {
                        if chunked_seen {
                            return Err(ParseError::bad("chunked applied twice"));
                        }
                        chunked_seen = true;
                        last_chunked = true;
                    } else {
                        last_chunked = false;
                        unknown_coding |= !known_coding(coding);
                    }
                }
            }
            b"host" => {
                if host.is_some() {
                    return Err(ParseError::bad("Duplicate Host header"));
                }
                if !value.is_empty() && !valid_authority(value, false) {
                    return Err(ParseError::bad("Invalid Host header"));
                }
                host = Some(f.value);
            }
            b"content-type" => {
                if content_type_seen {
                    return Err(ParseError::bad("Duplicate Content-Type"));
                }
                content_type_seen = true;
            }
            b"connection" => {
                for opt in list_items(value) {
                    close |= opt.eq_ignore_ascii_case(b"close");
                    keep |= opt.eq_ignore_ascii_case(b"keep-alive");
                    conn_upgrade |= opt.eq_ignore_ascii_case(b"upgrade");
                }
            }
            b"expect" => expect_continue |= value.eq_ignore_ascii_case(b"100-continue"),
            b"upgrade" if upgrade.is_none() => upgrade = Some(f.value),
            _ => {}
        }
    }
    if te_seen {
        if version == Version::Http10 {
            return Err(ParseError::bad("Transfer-Encoding on HTTP/1.0"));
        }
        if content_length.is_some() {
            return Err(ParseError::bad("Content-Length with Transfer-Encoding"));
        }
        if !last_chunked {
            return Err(ParseError::bad("Transfer-Encoding must end in chunked"));
        }
        if unknown_coding {
            return Err(ParseError::new(501, "Unsupported Transfer-Encoding"));
        }
    }
    if version == Version::Http11 && host.is_none() {
        return Err(ParseError::bad("Missing Host header"));
    }

    Ok(Semantics {
        content_length,
        chunked: te_seen,
        host,
        keep_alive: match version {
            Version::Http11 => !close,
            Version::Http10 => keep && !close,
        },
        expect_continue: expect_continue && version == Version::Http11,
        upgrade: if conn_upgrade { upgrade } else { None },
    })
}
