use std::net::{IpAddr, SocketAddr};

use super::{parse, Allow, Family, Header, Outcome, V2_SIGNATURE};

fn parsed(buf: &[u8]) -> Header {
    match parse(buf) {
        Outcome::Parsed(h) => h,
        other => panic!("{:?}: {other:?}", String::from_utf8_lossy(buf)),
    }
}

fn invalid(buf: &[u8]) -> &'static str {
    match parse(buf) {
        Outcome::Invalid(why) => why,
        other => panic!("{:?}: {other:?}", String::from_utf8_lossy(buf)),
    }
}

fn addr(s: &str) -> Option<SocketAddr> {
    Some(s.parse().unwrap())
}

/// Every proper prefix of a valid header is Incomplete: no early verdict,
/// no matter how the bytes were split.
fn every_prefix_incomplete(header: &[u8]) {
    for n in 0..header.len() {
        assert_eq!(
            parse(&header[..n]),
            Outcome::Incomplete,
            "prefix of {n} bytes"
        );
    }
}

#[test]
fn v1_tcp4() {
    let h = parsed(b"PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\r\nGET / HTTP/1.1\r\n");
    assert_eq!(h.version, 1);
    assert_eq!(h.family, Family::Tcp4);
    assert_eq!(h.consumed, 45);
    assert_eq!(h.source, addr("192.0.2.1:56324"));
    assert_eq!(h.destination, addr("198.51.100.2:443"));
    assert!(!h.local);
}

#[test]
fn v1_tcp6() {
    let h = parsed(b"PROXY TCP6 2001:db8::1 ::1 65535 0\r\n");
    assert_eq!(h.family, Family::Tcp6);
    assert_eq!(h.source, addr("[2001:db8::1]:65535"));
    assert_eq!(h.destination, addr("[::1]:0"));
}

#[test]
fn v1_unknown_ignores_the_rest_of_the_line() {
    for line in [
        &b"PROXY UNKNOWN\r\n"[..],
        b"PROXY UNKNOWN ffff::1 ::1 1 2\r\n",
    ] {
        let h = parsed(line);
        assert_eq!(h.family, Family::Unknown);
        assert_eq!(h.source, None);
        assert_eq!(h.consumed, line.len());
    }
    invalid(b"PROXY UNKNOWNX\r\n");
}

#[test]
fn v1_the_longest_header_is_107_bytes() {
    let longest = b"PROXY TCP6 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n";
    assert_eq!(longest.len(), 104);
    parsed(longest);
    let mut unknown = b"PROXY UNKNOWN ".to_vec();
    unknown.resize(105, b'x');
    unknown.extend_from_slice(b"\r\n");
    assert_eq!(parsed(&unknown).consumed, 107);
    let mut over = b"PROXY UNKNOWN ".to_vec();
    over.resize(106, b'x');
    assert_eq!(parse(&over), Outcome::Incomplete);
    over.push(b'x');
    invalid(&over);
    over.truncate(106);
    over.extend_from_slice(b"\r\n");
    invalid(&over);
}

#[test]
fn v1_rejections() {
    for bad in [
        &b"PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\n"[..], // LF alone
        b"PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\rX",     // CR alone
        b"PROXY TCP4  192.0.2.1 198.51.100.2 56324 443\r\n",   // two spaces
        b"PROXY TCP4 192.0.2.1 198.51.100.2 56324 443 \r\n",   // trailing space
        b"PROXY TCP4 192.0.2.1 198.51.100.2 56324\r\n",        // a field short
        b"PROXY TCP5 192.0.2.1 198.51.100.2 56324 443\r\n",    // protocol
        b"PROXY tcp4 192.0.2.1 198.51.100.2 56324 443\r\n",    // case
        b"PROXY TCP4 ::1 198.51.100.2 56324 443\r\n",          // v6 in TCP4
        b"PROXY TCP6 192.0.2.1 ::1 56324 443\r\n",             // v4 in TCP6
        b"PROXY TCP4 192.0.2.256 198.51.100.2 56324 443\r\n",  // octet
        b"PROXY TCP4 192.0.2.01 198.51.100.2 56324 443\r\n",   // leading zero
        b"PROXY TCP6 fe80::1%eth0 ::1 56324 443\r\n",          // zone
        b"PROXY TCP6 [::2] ::1 56324 443\r\n",                 // brackets
        b"PROXY TCP4 192.0.2.1 198.51.100.2 65536 443\r\n",    // port range
        b"PROXY TCP4 192.0.2.1 198.51.100.2 056324 443\r\n",   // leading zero
        b"PROXY TCP4 192.0.2.1 198.51.100.2 +5 443\r\n",       // sign
        b"PROXY TCP4 192.0.2.1 198.51.100.2  443\r\n",         // empty port
        b"PROXY \r\n",
    ] {
        invalid(bad);
    }
}

#[test]
fn not_a_header_is_refused_at_the_first_wrong_byte() {
    assert_eq!(invalid(b"G"), "no PROXY protocol header");
    invalid(b"GET / HTTP/1.1\r\n\r\n");
    invalid(b"PROXX");
    invalid(b"\r\n\r\n\0\r\nQUIX");
    invalid(b"\x16\x03\x01"); // a TLS ClientHello
    assert_eq!(parse(b""), Outcome::Incomplete);
    assert_eq!(parse(b"PROX"), Outcome::Incomplete);
}

#[test]
fn v1_prefixes_are_incomplete() {
    every_prefix_incomplete(b"PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\r\n");
}

fn v2(ver_cmd: u8, fam: u8, body: &[u8]) -> Vec<u8> {
    let mut out = V2_SIGNATURE.to_vec();
    out.push(ver_cmd);
    out.push(fam);
    out.extend_from_slice(&u16::try_from(body.len()).unwrap().to_be_bytes());
    out.extend_from_slice(body);
    out
}

fn tcp4_body() -> Vec<u8> {
    let mut b = vec![192, 0, 2, 1, 198, 51, 100, 2];
    b.extend_from_slice(&56324u16.to_be_bytes());
    b.extend_from_slice(&443u16.to_be_bytes());
    b
}

fn tlv(kind: u8, value: &[u8]) -> Vec<u8> {
    let mut out = vec![kind];
    out.extend_from_slice(&u16::try_from(value.len()).unwrap().to_be_bytes());
    out.extend_from_slice(value);
    out
}

#[test]
fn v2_tcp4_then_the_request() {
    let mut buf = v2(0x21, 0x11, &tcp4_body());
    let n = buf.len();
    buf.extend_from_slice(b"GET / HTTP/1.1\r\n");
    let h = parsed(&buf);
    assert_eq!((h.version, h.consumed, h.family), (2, n, Family::Tcp4));
    assert_eq!(h.source, addr("192.0.2.1:56324"));
    assert_eq!(h.destination, addr("198.51.100.2:443"));
}

#[test]
fn v2_tcp6_with_tlvs_skipped() {
    let mut body = Vec::new();
    body.extend_from_slice(
        &"2001:db8::7"
            .parse::<std::net::Ipv6Addr>()
            .unwrap()
            .octets(),
    );
    body.extend_from_slice(
        &"2001:db8::8"
            .parse::<std::net::Ipv6Addr>()
            .unwrap()
            .octets(),
    );
    body.extend_from_slice(&[0x1f, 0x90, 0x01, 0xbb]);
    body.extend(tlv(0x01, b"h2")); // ALPN
    body.extend(tlv(0x02, b"example.com")); // authority
    body.extend(tlv(0x20, &[1, 0, 0, 0, 0])); // SSL
    body.extend(tlv(0x04, &[])); // NOOP, empty
    let buf = v2(0x21, 0x21, &body);
    let h = parsed(&buf);
    assert_eq!(h.consumed, buf.len());
    assert_eq!(h.source, addr("[2001:db8::7]:8080"));
    assert_eq!(h.destination, addr("[2001:db8::8]:443"));
    every_prefix_incomplete(&buf);
}

#[test]
fn v2_local_keeps_the_peer_and_ignores_the_family() {
    for fam in [0x00, 0x11, 0xff] {
        let buf = v2(0x20, fam, &tcp4_body());
        let h = parsed(&buf);
        assert!(h.local);
        assert_eq!(
            (h.family, h.source, h.consumed),
            (Family::Unknown, None, buf.len())
        );
    }
    assert!(parsed(&v2(0x20, 0x00, &[])).local);
}

#[test]
fn v2_unspec_and_unix_keep_the_peer() {
    let h = parsed(&v2(0x21, 0x00, &[9, 9, 9]));
    assert_eq!(
        (h.family, h.source, h.local),
        (Family::Unknown, None, false)
    );
    let mut unix = vec![0u8; 216];
    unix[..5].copy_from_slice(b"/sock");
    let h = parsed(&v2(0x21, 0x31, &unix));
    assert_eq!((h.family, h.source), (Family::Unix, None));
}

#[test]
fn v2_rejections() {
    let body = tcp4_body();
    assert_eq!(invalid(&v2(0x11, 0x11, &body)), "PROXY v2 version is not 2");
    invalid(&v2(0x31, 0x11, &body));
    invalid(&v2(0x22, 0x11, &body)); // command
    invalid(&v2(0x2f, 0x11, &body));
    invalid(&v2(0x21, 0x12, &body)); // UDP4
    invalid(&v2(0x21, 0x22, &body)); // UDP6
    invalid(&v2(0x21, 0x10, &body)); // INET, UNSPEC transport
    invalid(&v2(0x21, 0x01, &body)); // UNSPEC family, STREAM
    invalid(&v2(0x21, 0x41, &body)); // family 4
    invalid(&v2(0x21, 0x13, &body)); // transport 3
    invalid(&v2(0x21, 0x11, &body[..11])); // too short for TCP4
    invalid(&v2(0x21, 0x21, &body)); // too short for TCP6
    invalid(&v2(0x21, 0x31, &[0; 215])); // too short for UNIX
    let mut tlvs = body.clone();
    tlvs.extend(tlv(0x01, b"h2"));
    tlvs.pop(); // the TLV's value runs past the end
    invalid(&v2(0x21, 0x11, &tlvs));
    let mut stub = body.clone();
    stub.extend_from_slice(&[0x01, 0x00]); // a TLV header cut short
    invalid(&v2(0x21, 0x11, &stub));
}

#[test]
fn v2_refuses_a_bad_fixed_byte_without_waiting() {
    let mut head = V2_SIGNATURE.to_vec();
    head.push(0x31);
    invalid(&head);
    head[12] = 0x21;
    head.push(0x12);
    invalid(&head);
}

#[test]
fn v2_longest_header() {
    let mut body = tcp4_body();
    body.extend(tlv(0xe0, &vec![7u8; 0xffff - 12 - 3]));
    let buf = v2(0x21, 0x11, &body);
    assert_eq!(buf.len(), super::V2_MAX);
    assert_eq!(parsed(&buf).consumed, super::V2_MAX);
    assert_eq!(parse(&buf[..buf.len() - 1]), Outcome::Incomplete);
}

#[test]
fn v2_prefixes_are_incomplete() {
    every_prefix_incomplete(&v2(0x21, 0x11, &tcp4_body()));
    every_prefix_incomplete(&v2(0x20, 0x00, &[]));
}

#[test]
fn allow_matches_addresses_networks_and_mapped_v4() {
    let allow = Allow::parse(&["127.0.0.1", "10.0.0.0/8", "2001:db8::/32"]).unwrap();
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    assert!(allow.trusts(ip("127.0.0.1")));
    assert!(allow.trusts(ip("::ffff:127.0.0.1")));
    assert!(allow.trusts(ip("10.200.3.4")));
    assert!(allow.trusts(ip("2001:db8:1::5")));
    assert!(!allow.trusts(ip("127.0.0.2")));
    assert!(!allow.trusts(ip("11.0.0.1")));
    assert!(!allow.trusts(ip("2001:db9::1")));
    assert!(!allow.trusts(ip("::1")));
    let odd = Allow::parse(&["172.16.0.0/12"]).unwrap();
    assert!(odd.trusts(ip("172.31.255.255")));
    assert!(!odd.trusts(ip("172.32.0.0")));
    let mapped = Allow::parse(&["::ffff:10.0.0.0/104"]).unwrap();
    assert!(mapped.trusts(ip("10.1.2.3")) && mapped.trusts(ip("::ffff:10.1.2.3")));
    assert!(!mapped.trusts(ip("11.1.2.3")));
    assert!(Allow::parse(&["*"]).unwrap().trusts(ip("203.0.113.9")));
    assert!(!Allow::parse::<&str>(&[]).unwrap().trusts(ip("127.0.0.1")));
    assert!(Allow::parse(&["10.0.0.0/33"]).is_err());
    assert!(Allow::parse(&["nonsense"]).is_err());
}

/// A cheap fuzz: mutated valid headers never panic, and the verdicts agree
/// with each other the way a caller relies on: a parsed header's proper
/// prefixes are all Incomplete (no early verdict on a split header), and an
/// Invalid buffer stays Invalid whatever follows (no waiting on garbage).
#[test]
fn mutations_keep_the_verdicts_consistent() {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut tlvs = tcp4_body();
    tlvs.extend(tlv(0x01, b"h2"));
    let seeds: Vec<Vec<u8>> = vec![
        b"PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\r\nGET /".to_vec(),
        b"PROXY TCP6 2001:db8::1 ::1 65535 0\r\n".to_vec(),
        b"PROXY UNKNOWN\r\n".to_vec(),
        v2(0x21, 0x11, &tlvs),
        v2(0x20, 0x00, &[]),
    ];
    for round in 0..100_000 {
        let mut buf = seeds[round % seeds.len()].clone();
        for _ in 0..(next() % 4) {
            let at = (next() as usize) % (buf.len() + 1);
            match next() % 3 {
                0 if at < buf.len() => buf[at] = next() as u8,
                1 => buf.insert(at, next() as u8),
                _ if at < buf.len() => {
                    buf.remove(at);
                }
                _ => {}
            }
        }
        match parse(&buf) {
            Outcome::Parsed(h) => {
                assert!(h.consumed <= buf.len());
                assert_eq!(parse(&buf[..h.consumed]), Outcome::Parsed(h.clone()));
                let cut = (next() as usize) % h.consumed;
                assert_eq!(parse(&buf[..cut]), Outcome::Incomplete, "{buf:?}");
            }
            Outcome::Invalid(_) => {
                buf.extend_from_slice(b"\r\n\r\nmore");
                assert!(matches!(parse(&buf), Outcome::Invalid(_)), "{buf:?}");
            }
            Outcome::Incomplete => {}
        }
    }
}
