//! A certificate's subject as RFC 4514 text: ASGI's `client_cert_name`, for
//! both the asgi worker and the engine (one reading, so both give the same
//! string). The certificate was verified by the TLS stack already; this
//! reads only the DER path to the subject, and gives `None` for anything it
//! does not expect rather than a guess.
//!
//! RFC 4514: the RDNs last first, `,` between them and `+` inside one; the
//! types it names (CN, O, ...) by name with their value as text, escaped;
//! any other type as its dotted OID with `#` and the value's DER in hex.

use std::fmt::Write;

const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;
const OID: u8 = 0x06;
/// `[0] EXPLICIT Version` at the start of `tbsCertificate`.
const VERSION: u8 = 0xA0;

/// One DER element: its tag, its content, and its whole encoding.
struct Element<'a> {
    tag: u8,
    content: &'a [u8],
    encoded: &'a [u8],
}

/// The first element of `input` and what follows it.
fn element(input: &[u8]) -> Option<(Element<'_>, &[u8])> {
    let (&tag, rest) = input.split_first()?;
    if tag & 0x1F == 0x1F {
        return None; // a multi-byte tag: nothing on the path to a subject has one
    }
    let (&first, mut rest) = rest.split_first()?;
    let length = if first < 0x80 {
        first as usize
    } else {
        let count = (first & 0x7F) as usize;
        if count == 0 || count > 4 || rest.len() < count {
            return None;
        }
        let length = rest[..count]
            .iter()
            .fold(0usize, |n, &b| (n << 8) | b as usize);
        rest = &rest[count..];
        length
    };
    if rest.len() < length {
        return None;
    }
    let header = input.len() - rest.len();
    let element = Element {
        tag,
        content: &rest[..length],
        encoded: &input[..header + length],
    };
    Some((element, &rest[length..]))
}

/// The elements of a constructed element's content, in order.
fn elements(mut input: &[u8]) -> impl Iterator<Item = Option<Element<'_>>> {
    std::iter::from_fn(move || {
        if input.is_empty() {
            return None;
        }
        match element(input) {
            Some((e, rest)) => {
                input = rest;
                Some(Some(e))
            }
            None => {
                input = &[];
                Some(None)
            }
        }
    })
}

/// The subject `Name` of a DER certificate: Certificate → tbsCertificate →
/// (version), serialNumber, signature, issuer, validity, subject.
fn subject(der: &[u8]) -> Option<&[u8]> {
    let (certificate, _) = element(der)?;
    let (tbs, _) = element(certificate.content)?;
    if certificate.tag != SEQUENCE || tbs.tag != SEQUENCE {
        return None;
    }
    let mut fields = elements(tbs.content);
    let mut next = fields.next()??;
    if next.tag == VERSION {
        next = fields.next()??;
    }
    let _serial = next;
    let _signature = fields.next()??;
    let _issuer = fields.next()??;
    let _validity = fields.next()??;
    let subject = fields.next()??;
    (subject.tag == SEQUENCE).then_some(subject.content)
}

/// `der`'s subject as RFC 4514 text; `None` when it cannot be read.
pub fn subject_text(der: &[u8]) -> Option<String> {
    let mut rdns = Vec::new();
    for rdn in elements(subject(der)?) {
        let rdn = rdn?;
        if rdn.tag != SET {
            return None;
        }
        let mut parts = Vec::new();
        for pair in elements(rdn.content) {
            let pair = pair?;
            let (kind, rest) = element(pair.content)?;
            let (value, _) = element(rest)?;
            if pair.tag != SEQUENCE || kind.tag != OID {
                return None;
            }
            parts.push(attribute(kind.content, &value)?);
        }
        rdns.push(parts.join("+"));
    }
    rdns.reverse();
    Some(rdns.join(","))
}

/// RFC 4514's names for the types it lists (section 3), by their DER OID.
const NAMES: [(&[u8], &str); 9] = [
    (&[0x55, 0x04, 0x03], "CN"),
    (&[0x55, 0x04, 0x07], "L"),
    (&[0x55, 0x04, 0x08], "ST"),
    (&[0x55, 0x04, 0x0A], "O"),
    (&[0x55, 0x04, 0x0B], "OU"),
    (&[0x55, 0x04, 0x06], "C"),
    (&[0x55, 0x04, 0x09], "STREET"),
    (
        &[0x09, 0x92, 0x26, 0x89, 0x93, 0xF2, 0x2C, 0x64, 0x01, 0x19],
        "DC",
    ),
    (
        &[0x09, 0x92, 0x26, 0x89, 0x93, 0xF2, 0x2C, 0x64, 0x01, 0x01],
        "UID",
    ),
];

fn attribute(oid: &[u8], value: &Element<'_>) -> Option<String> {
    let name = NAMES
        .iter()
        .find(|(known, _)| *known == oid)
        .map(|(_, n)| *n);
    match (name, string(value)) {
        (Some(name), Some(text)) => {
            let mut out = format!("{name}=");
            escape(&text, &mut out);
            Some(out)
        }
        // Unnamed, or a value with no text form: the OID and the DER in hex.
        _ => {
            let mut out = format!("{}=#", dotted(oid)?);
            for byte in value.encoded {
                let _ = write!(out, "{byte:02x}");
            }
            Some(out)
        }
    }
}

/// The value of a string type as text.
fn string(value: &Element<'_>) -> Option<String> {
    let bytes = value.content;
    match value.tag {
        // UTF8String, PrintableString, IA5String, NumericString, VisibleString
        0x0C | 0x13 | 0x16 | 0x12 | 0x1A => String::from_utf8(bytes.to_vec()).ok(),
        // TeletexString: taken as Latin-1, as most software does
        0x14 => Some(bytes.iter().map(|&b| b as char).collect()),
        // BMPString: UTF-16BE
        0x1E if bytes.len().is_multiple_of(2) => {
            let units = bytes.chunks(2).map(|p| u16::from_be_bytes([p[0], p[1]]));
            char::decode_utf16(units).collect::<Result<_, _>>().ok()
        }
        // UniversalString: UTF-32BE
        0x1C if bytes.len().is_multiple_of(4) => bytes
            .chunks(4)
            .map(|q| char::from_u32(u32::from_be_bytes([q[0], q[1], q[2], q[3]])))
            .collect(),
        _ => None,
    }
}

/// RFC 4514 2.4: the special characters behind a backslash, a leading `#`
/// or space and a trailing space too, NUL as `\00`.
fn escape(text: &str, out: &mut String) {
    let last = text.chars().count().saturating_sub(1);
    for (i, c) in text.chars().enumerate() {
        match c {
            '"' | '+' | ',' | ';' | '<' | '>' | '\\' => out.push('\\'),
            '#' if i == 0 => out.push('\\'),
            ' ' if i == 0 || i == last => out.push('\\'),
            '\0' => {
                out.push_str("\\00");
                continue;
            }
            _ => {}
        }
        out.push(c);
    }
}

/// A DER OID's content as dotted decimal.
fn dotted(oid: &[u8]) -> Option<String> {
    let mut arcs = Vec::new();
    let mut arc: u64 = 0;
    for (i, &byte) in oid.iter().enumerate() {
        if arc > u64::MAX >> 7 {
            return None;
        }
        arc = (arc << 7) | u64::from(byte & 0x7F);
        if byte & 0x80 == 0 {
            if arcs.is_empty() {
                let first = (arc / 40).min(2);
                arcs.push(first);
                arcs.push(arc - first * 40);
            } else {
                arcs.push(arc);
            }
            arc = 0;
        } else if i == oid.len() - 1 {
            return None; // cut inside an arc
        }
    }
    if arcs.is_empty() {
        return None;
    }
    Some(
        arcs.iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join("."),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn der(tag: u8, content: &[u8]) -> Vec<u8> {
        let mut out = vec![tag];
        if content.len() < 0x80 {
            out.push(content.len() as u8);
        } else {
            out.extend([0x82, (content.len() >> 8) as u8, content.len() as u8]);
        }
        out.extend_from_slice(content);
        out
    }

    fn pair(oid: &[u8], tag: u8, value: &[u8]) -> Vec<u8> {
        der(SEQUENCE, &[der(OID, oid), der(tag, value)].concat())
    }

    /// A certificate whose only readable part is its subject, from RDNs.
    fn certificate(rdns: &[Vec<u8>]) -> Vec<u8> {
        let name = der(SEQUENCE, &rdns.concat());
        let tbs = [
            der(VERSION, &der(0x02, &[2])),
            der(0x02, &[1]),
            der(SEQUENCE, &[]),
            der(SEQUENCE, &[]),
            der(SEQUENCE, &[]),
            name,
            der(SEQUENCE, &[0; 200]), // a long key, for a two-byte length
        ]
        .concat();
        der(
            SEQUENCE,
            &[der(SEQUENCE, &tbs), der(SEQUENCE, &[])].concat(),
        )
    }

    const CN: &[u8] = &[0x55, 0x04, 0x03];
    const O: &[u8] = &[0x55, 0x04, 0x0A];
    const C: &[u8] = &[0x55, 0x04, 0x06];
    const EMAIL: &[u8] = &[0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x09, 0x01];

    #[test]
    fn the_last_rdn_comes_first_and_specials_are_escaped() {
        let cert = certificate(&[
            der(SET, &pair(C, 0x13, b"FR")),
            der(SET, &pair(O, 0x0C, b"Acme, Inc. <x>")),
            der(SET, &pair(CN, 0x0C, " #client+1 ".as_bytes())),
        ]);
        assert_eq!(
            subject_text(&cert).unwrap(),
            r"CN=\ #client\+1\ ,O=Acme\, Inc. \<x\>,C=FR"
        );
    }

    #[test]
    fn a_leading_hash_is_escaped() {
        let cert = certificate(&[der(SET, &pair(CN, 0x0C, b"#1"))]);
        assert_eq!(subject_text(&cert).unwrap(), r"CN=\#1");
    }

    #[test]
    fn a_multi_valued_rdn_and_an_unnamed_type() {
        let cert = certificate(&[der(
            SET,
            &[
                pair(CN, 0x1E, &[0, b'h', 0x00, 0xE9]),
                pair(EMAIL, 0x16, b"a@b"),
            ]
            .concat(),
        )]);
        assert_eq!(
            subject_text(&cert).unwrap(),
            "CN=h\u{e9}+1.2.840.113549.1.9.1=#1603614062"
        );
    }

    #[test]
    fn an_empty_subject_and_broken_input() {
        assert_eq!(subject_text(&certificate(&[])).unwrap(), "");
        let cert = certificate(&[der(SET, &pair(CN, 0x0C, b"x"))]);
        for cut in 0..cert.len() {
            assert_eq!(subject_text(&cert[..cut]), None, "cut at {cut}");
        }
        assert_eq!(subject_text(&[0x1F, 0x00]), None);
    }
}
