//! The request-target (RFC 9112 3.2): which of the four forms it is, where its
//! path and query lie, and percent-decoding of the path.
//!
//! One rule for every worker class: the native server's HTTP/1.1 and HTTP/2
//! go through the `http` crate's `Uri`, which refuses some bytes RFC 3986
//! never allows in a target (`<`, `>` and a backtick in the path; `"`, `<`,
//! `>` in the query; a host with two colons or a `%`). Refusing the same
//! here means a request gets the same 400 whichever class serves it; browsers
//! percent-encode all of them, so no real client sends one raw.

use std::borrow::Cow;
use std::net::Ipv6Addr;
use std::ops::Range;

use super::chars::is_host_char;
use super::error::{ParseError, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetForm {
    /// `/path?query`
    Origin,
    /// `http://host/path?query` (proxies send it; servers MUST accept it)
    Absolute,
    /// `host:port`, CONNECT only
    Authority,
    /// `*`, OPTIONS only
    Asterisk,
}

/// Offsets into the target bytes. The path is empty for authority-form and for
/// an absolute-form target without a path (read it as "/").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub form: TargetForm,
    pub path: Range<usize>,
    pub query: Range<usize>,
    /// host[:port] of absolute- and authority-form targets (userinfo removed).
    pub authority: Option<Range<usize>>,
}

const BAD_TARGET: ParseError = ParseError::bad("Invalid request target");

/// The longest scheme the `http` crate's `Uri` takes.
const MAX_SCHEME_LEN: usize = 64;

/// Bytes a path may not hold raw (the rest of what RFC 3986 leaves out is
/// already refused by httparse: CTLs, SP, DEL).
fn bad_in_path(b: u8) -> bool {
    matches!(b, b'<' | b'>' | b'`')
}

fn bad_in_query(b: u8) -> bool {
    matches!(b, b'"' | b'<' | b'>')
}

/// Splits `path?query#fragment` starting at `start`; the fragment is dropped
/// (and, as a client never sends one, not checked).
fn split_path_query(t: &[u8], start: usize) -> Result<(Range<usize>, Range<usize>)> {
    let end = t[start..]
        .iter()
        .position(|&b| b == b'#')
        .map_or(t.len(), |i| start + i);
    let (path, query) = match t[start..end].iter().position(|&b| b == b'?') {
        Some(q) => (start..start + q, start + q + 1..end),
        None => (start..end, end..end),
    };
    if t[path.clone()].iter().any(|&b| bad_in_path(b))
        || t[query.clone()].iter().any(|&b| bad_in_query(b))
    {
        return Err(BAD_TARGET);
    }
    Ok((path, query))
}

/// `host [":" port]` where host is a reg-name or a bracketed IPv6 literal.
pub fn valid_authority(a: &[u8], need_port: bool) -> bool {
    if a.is_empty() {
        return false;
    }
    let (host, port) = if a[0] == b'[' {
        let Some(close) = a.iter().position(|&b| b == b']') else {
            return false;
        };
        let rest = &a[close + 1..];
        match rest {
            [] => (&a[..=close], None),
            [b':', port @ ..] => (&a[..=close], Some(port)),
            _ => return false,
        }
    } else {
        match a.iter().position(|&b| b == b':') {
            Some(c) => (&a[..c], Some(&a[c + 1..])),
            None => (a, None),
        }
    };
    let host_ok = match host {
        [b'[', inner @ .., b']'] => std::str::from_utf8(inner)
            .ok()
            .is_some_and(|v6| v6.parse::<Ipv6Addr>().is_ok()),
        // A reg-name's pct-encoding is legal (RFC 3986 3.2.2) but read by
        // nobody; `Uri` refuses it, and so do we.
        _ => !host.is_empty() && host.iter().all(|&b| is_reg_name_char(b)),
    };
    if !host_ok {
        return false;
    }
    match port {
        // port = *DIGIT: "host:" is a valid authority, but CONNECT needs one.
        Some(p) => {
            (!p.is_empty() || !need_port) && p.len() <= 5 && p.iter().all(u8::is_ascii_digit)
        }
        None => !need_port,
    }
}

fn is_reg_name_char(b: u8) -> bool {
    is_host_char(b) && !matches!(b, b'[' | b']' | b':' | b'%')
}

fn is_userinfo_char(b: u8) -> bool {
    is_host_char(b) && !matches!(b, b'[' | b']')
}

fn parse_absolute(t: &[u8]) -> Result<Target> {
    // scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ), then "://"
    let colon = t.iter().position(|&b| b == b':').ok_or(BAD_TARGET)?;
    let scheme = &t[..colon];
    let scheme_ok = scheme.first().is_some_and(u8::is_ascii_alphabetic)
        && scheme.len() <= MAX_SCHEME_LEN
        && scheme
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'));
    if !scheme_ok || !t[colon..].starts_with(b"://") {
        return Err(BAD_TARGET);
    }
    let auth_start = colon + 3;
    let auth_end = t[auth_start..]
        .iter()
        .position(|&b| matches!(b, b'/' | b'?' | b'#'))
        .map_or(t.len(), |i| auth_start + i);
    let authority = &t[auth_start..auth_end];
    // userinfo@ is allowed by the URI grammar but never used for routing.
    let host_start = authority
        .iter()
        .rposition(|&b| b == b'@')
        .map_or(auth_start, |i| auth_start + i + 1);
    if !t[auth_start..host_start]
        .iter()
        .all(|&b| is_userinfo_char(b) || b == b'@')
        || !valid_authority(&t[host_start..auth_end], false)
    {
        return Err(BAD_TARGET);
    }
    let (path, query) = split_path_query(t, auth_end)?;
    Ok(Target {
        form: TargetForm::Absolute,
        path,
        query,
        authority: Some(host_start..auth_end),
    })
}

/// Classifies `t` for `method`. httparse has already refused CTLs, SP and DEL.
pub fn parse_target(method: &[u8], t: &[u8]) -> Result<Target> {
    if method == b"CONNECT" {
        if !valid_authority(t, true) {
            return Err(ParseError::bad("CONNECT needs an authority-form target"));
        }
        return Ok(Target {
            form: TargetForm::Authority,
            path: 0..0,
            query: t.len()..t.len(),
            authority: Some(0..t.len()),
        });
    }
    match t.first() {
        Some(b'/') => {
            let (path, query) = split_path_query(t, 0)?;
            Ok(Target {
                form: TargetForm::Origin,
                path,
                query,
                authority: None,
            })
        }
        Some(b'*') if t.len() == 1 => {
            if method == b"OPTIONS" {
                Ok(Target {
                    form: TargetForm::Asterisk,
                    path: 0..1,
                    query: 1..1,
                    authority: None,
                })
            } else {
                Err(ParseError::bad("Asterisk-form target is for OPTIONS only"))
            }
        }
        Some(_) => parse_absolute(t),
        None => Err(BAD_TARGET),
    }
}

#[inline]
fn hex_val(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Decodes `%XX` escapes; a `%` not followed by two hex digits stays as it is
/// (as the other WSGI servers do), so a sloppy client still gets its page.
pub fn percent_decode(raw: &[u8]) -> Cow<'_, [u8]> {
    let Some(first) = raw.iter().position(|&b| b == b'%') else {
        return Cow::Borrowed(raw);
    };
    let mut out = Vec::with_capacity(raw.len());
    out.extend_from_slice(&raw[..first]);
    let mut i = first;
    while i < raw.len() {
        let b = raw[i];
        if b == b'%' && i + 2 < raw.len() {
            if let (Some(h), Some(l)) = (hex_val(raw[i + 1]), hex_val(raw[i + 2])) {
                out.push(h << 4 | l);
                i += 3;
                continue;
            }
        }
        out.push(b);
        i += 1;
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(method: &str, t: &str) -> (TargetForm, String, String, Option<String>) {
        let tb = t.as_bytes();
        let r = parse_target(method.as_bytes(), tb).unwrap();
        let s = |r: Range<usize>| String::from_utf8(tb[r].to_vec()).unwrap();
        (r.form, s(r.path), s(r.query), r.authority.map(s))
    }

    #[test]
    fn forms() {
        assert_eq!(
            parts("GET", "/a/b?x=1#frag"),
            (TargetForm::Origin, "/a/b".into(), "x=1".into(), None)
        );
        assert_eq!(
            parts("GET", "/a?b?c"),
            (TargetForm::Origin, "/a".into(), "b?c".into(), None)
        );
        assert_eq!(
            parts("GET", "http://user:pw@example.com:8080/foo?q=1"),
            (
                TargetForm::Absolute,
                "/foo".into(),
                "q=1".into(),
                Some("example.com:8080".into())
            )
        );
        assert_eq!(
            parts("GET", "http://h?x"),
            (
                TargetForm::Absolute,
                "".into(),
                "x".into(),
                Some("h".into())
            )
        );
        assert_eq!(
            parts("GET", "http://[::1]:8080/p"),
            (
                TargetForm::Absolute,
                "/p".into(),
                "".into(),
                Some("[::1]:8080".into())
            )
        );
        assert_eq!(parts("OPTIONS", "*").0, TargetForm::Asterisk);
        assert_eq!(
            parts("CONNECT", "example.com:443"),
            (
                TargetForm::Authority,
                "".into(),
                "".into(),
                Some("example.com:443".into())
            )
        );
        assert_eq!(parts("CONNECT", "[::1]:443").0, TargetForm::Authority);
    }

    #[test]
    fn refused() {
        for (m, t) in [
            ("GET", "*"),
            ("GET", "example.com:443"),
            ("GET", "foo/bar"),
            ("GET", "http:/x"),
            ("GET", "http:///x"),
            ("GET", "1http://x/"),
            ("CONNECT", "/"),
            ("CONNECT", "example.com"),
            ("CONNECT", "example.com:"),
            ("CONNECT", "a/b:443"),
            ("PUT", "s://]ufd/:"),
            // What the `http` crate's `Uri` refuses (the differential fuzz
            // target found each): one rule on every class.
            ("GET", "/<"),
            ("GET", "/a>b"),
            ("GET", "/`"),
            ("GET", "/?\""),
            ("GET", "/?<"),
            ("GET", "/?a>"),
            ("CONNECT", "a:b:1"),
            ("GET", "http://a:b:1/"),
            ("GET", "http://a%41/"),
            ("GET", "http://[@a/"),
            ("GET", "http://[:::::::::]/"),
            ("GET", "http://[::g]/"),
        ] {
            assert!(parse_target(m.as_bytes(), t.as_bytes()).is_err(), "{m} {t}");
        }
    }

    #[test]
    fn accepted_as_uri_accepts_them() {
        let long_scheme = format!("{}://h/", "a".repeat(MAX_SCHEME_LEN));
        for (m, t) in [
            ("GET", "/{\"a\":1}|^\\"),
            ("GET", "/?`{}|^"),
            ("GET", "/p#<\"frag>"),
            ("GET", "http://u:p%20w@h:1/"),
            ("GET", "http://[::ffff:1.2.3.4]:80/"),
            ("GET", long_scheme.as_str()),
        ] {
            assert!(parse_target(m.as_bytes(), t.as_bytes()).is_ok(), "{m} {t}");
        }
        let too_long = format!("{}://h/", "a".repeat(MAX_SCHEME_LEN + 1));
        assert!(parse_target(b"GET", too_long.as_bytes()).is_err());
    }

    #[test]
    fn decoding() {
        assert_eq!(&*percent_decode(b"/a%20b"), b"/a b");
        assert_eq!(&*percent_decode(b"/%e9%C3"), b"/\xe9\xc3");
        assert_eq!(&*percent_decode(b"/100%"), b"/100%");
        assert_eq!(&*percent_decode(b"/%zz%4"), b"/%zz%4");
        assert!(matches!(percent_decode(b"/plain"), Cow::Borrowed(_)));
    }
}
