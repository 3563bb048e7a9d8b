//! Version 1: one line of text, `PROXY TCP4 src dst sport dport\r\n`,
//! at most 107 bytes, fields separated by exactly one space.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use super::{Family, Header, Outcome, V1_MAX, V1_PREFIX};

/// `buf` starts with `PROXY `.
pub(super) fn parse(buf: &[u8]) -> Outcome {
    let window = &buf[..buf.len().min(V1_MAX)];
    let Some(end) = window.iter().position(|&b| b == b'\r' || b == b'\n') else {
        return if buf.len() >= V1_MAX {
            Outcome::Invalid("PROXY v1 header longer than 107 bytes")
        } else {
            Outcome::Incomplete
        };
    };
    if window[end] == b'\n' {
        return Outcome::Invalid("PROXY v1 header ends with LF, not CRLF");
    }
    if end + 2 > V1_MAX {
        return Outcome::Invalid("PROXY v1 header longer than 107 bytes");
    }
    match buf.get(end + 1) {
        None => return Outcome::Incomplete,
        Some(b'\n') => {}
        Some(_) => return Outcome::Invalid("PROXY v1 header has a CR without LF"),
    }
    let consumed = end + 2;
    let line = &buf[V1_PREFIX.len()..end];
    // UNKNOWN: whatever follows it up to the CRLF is ignored (the spec lets a
    // proxy put the addresses it could not classify there).
    if line == b"UNKNOWN" || line.starts_with(b"UNKNOWN ") {
        return Outcome::Parsed(Header::unknown(1, consumed, false));
    }
    let fields: Vec<&[u8]> = line.split(|&b| b == b' ').collect();
    let family = match fields[0] {
        b"TCP4" => Family::Tcp4,
        b"TCP6" => Family::Tcp6,
        _ => return Outcome::Invalid("PROXY v1 protocol is not TCP4, TCP6 or UNKNOWN"),
    };
    if fields.len() != 5 {
        return Outcome::Invalid("PROXY v1 header needs exactly 5 fields after PROXY");
    }
    let (Some(src), Some(dst)) = (address(family, fields[1]), address(family, fields[2])) else {
        return Outcome::Invalid("PROXY v1 address invalid for its protocol");
    };
    let (Some(sport), Some(dport)) = (port(fields[3]), port(fields[4])) else {
        return Outcome::Invalid("PROXY v1 port invalid (0-65535, no leading zero)");
    };
    Outcome::Parsed(Header {
        version: 1,
        consumed,
        family,
        source: Some(SocketAddr::new(src, sport)),
        destination: Some(SocketAddr::new(dst, dport)),
        local: false,
    })
}

fn address(family: Family, text: &[u8]) -> Option<IpAddr> {
    let text = std::str::from_utf8(text).ok()?;
    match family {
        // std's parsers take exactly the textual forms: dotted quad without
        // leading zeros; RFC 4291 text (no zone, no brackets).
        Family::Tcp4 => text.parse::<Ipv4Addr>().ok().map(IpAddr::V4),
        Family::Tcp6 => text.parse::<Ipv6Addr>().ok().map(IpAddr::V6),
        _ => None,
    }
}

fn port(text: &[u8]) -> Option<u16> {
    let ok = !text.is_empty()
        && text.len() <= 5
        && text.iter().all(u8::is_ascii_digit)
        && (text[0] != b'0' || text.len() == 1);
    if !ok {
        return None;
    }
    let value: u32 = text
        .iter()
        .fold(0, |acc, &d| acc * 10 + u32::from(d - b'0'));
    u16::try_from(value).ok()
}
