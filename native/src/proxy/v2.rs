//! Version 2: the 12-byte signature, a version/command byte, a
//! family/transport byte, a 16-bit length, then the addresses and TLVs.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use super::{Family, Header, Outcome};

const FIXED: usize = 16;
const CMD_LOCAL: u8 = 0;
const CMD_PROXY: u8 = 1;

/// `buf` starts with (a beginning of) the signature, and has all of it
/// when at least 12 bytes long.
pub(super) fn parse(buf: &[u8]) -> Outcome {
    // Each fixed byte is judged as soon as it is there: a peer that sends a
    // wrong one is refused without waiting for the rest.
    let Some(&ver_cmd) = buf.get(12) else {
        return Outcome::Incomplete;
    };
    if ver_cmd >> 4 != 2 {
        return Outcome::Invalid("PROXY v2 version is not 2");
    }
    let command = ver_cmd & 0x0f;
    if command != CMD_LOCAL && command != CMD_PROXY {
        return Outcome::Invalid("PROXY v2 command is neither LOCAL nor PROXY");
    }
    let Some(&fam) = buf.get(13) else {
        return Outcome::Incomplete;
    };
    let local = command == CMD_LOCAL;
    // LOCAL: the family is ignored, as the spec says, the length still counts.
    let shape = if local { None } else { Some(shape(fam)) };
    if let Some(Err(why)) = shape {
        return Outcome::Invalid(why);
    }
    if buf.len() < FIXED {
        return Outcome::Incomplete;
    }
    let len = usize::from(u16::from_be_bytes([buf[14], buf[15]]));
    let consumed = FIXED + len;
    if let Some(Ok((_, need))) = shape {
        if len < need {
            return Outcome::Invalid("PROXY v2 length too short for its address family");
        }
    }
    if buf.len() < consumed {
        return Outcome::Incomplete;
    }
    let body = &buf[FIXED..consumed];
    let Some(Ok((family, need))) = shape else {
        return Outcome::Parsed(Header::unknown(2, consumed, true));
    };
    // UNSPEC: everything after the fixed part is to be ignored, TLVs or not.
    if family != Family::Unknown && !tlvs_fit(&body[need..]) {
        return Outcome::Invalid("PROXY v2 TLV runs past the header");
    }
    let (source, destination) = match family {
        Family::Tcp4 => (
            Some(SocketAddr::new(v4(&body[0..4]), be16(&body[8..]))),
            Some(SocketAddr::new(v4(&body[4..8]), be16(&body[10..]))),
        ),
        Family::Tcp6 => (
            Some(SocketAddr::new(v6(&body[0..16]), be16(&body[32..]))),
            Some(SocketAddr::new(v6(&body[16..32]), be16(&body[34..]))),
        ),
        Family::Unix | Family::Unknown => (None, None),
    };
    Outcome::Parsed(Header {
        version: 2,
        consumed,
        family,
        source,
        destination,
        local: false,
    })
}

/// The family a PROXY command's family byte names, and the bytes its
/// addresses take. Only the combinations the spec lists are valid, and of
/// those only stream ones make sense for a connection that carries HTTP.
fn shape(fam: u8) -> Result<(Family, usize), &'static str> {
    match fam {
        0x00 => Ok((Family::Unknown, 0)),
        0x11 => Ok((Family::Tcp4, 12)),
        0x21 => Ok((Family::Tcp6, 36)),
        0x31 => Ok((Family::Unix, 216)),
        0x12 | 0x22 | 0x32 => Err("PROXY v2 datagram transport on a stream connection"),
        _ => Err("PROXY v2 address family or transport invalid"),
    }
}

fn v4(b: &[u8]) -> IpAddr {
    let mut octets = [0u8; 4];
    octets.copy_from_slice(b);
    IpAddr::V4(Ipv4Addr::from(octets))
}

fn v6(b: &[u8]) -> IpAddr {
    let mut octets = [0u8; 16];
    octets.copy_from_slice(b);
    IpAddr::V6(Ipv6Addr::from(octets))
}

fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

/// TLVs (type, 16-bit length, value) fill the rest exactly. They are skipped:
/// none changes who the client is.
fn tlvs_fit(mut rest: &[u8]) -> bool {
    while !rest.is_empty() {
        if rest.len() < 3 {
            return false;
        }
        let len = usize::from(be16(&rest[1..]));
        if rest.len() < 3 + len {
            return false;
        }
        rest = &rest[3 + len..];
    }
    true
}
