//! Byte classes from RFC 9110 / RFC 3986, as lookup tables so that every
//! check on the hot path is one load instead of a chain of comparisons.

macro_rules! table {
    ($f:ident) => {{
        let mut t = [false; 256];
        let mut i = 0;
        while i < 256 {
            t[i] = $f(i as u8);
            i += 1;
        }
        t
    }};
}

const fn tchar(b: u8) -> bool {
    matches!(b,
        b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9'
        | b'!' | b'#' | b'$' | b'%' | b'&' | b'\'' | b'*' | b'+'
        | b'-' | b'.' | b'^' | b'_' | b'`' | b'|' | b'~')
}

/// Field values: HTAB, SP, VCHAR and obs-text; every other CTL (NUL, CR, LF,
/// DEL...) is refused, because a proxy and the app may split on them differently.
const fn field_vchar(b: u8) -> bool {
    b == b'\t' || (b >= 0x20 && b != 0x7f)
}

/// Characters of a Host value (reg-name / IP-literal / port): anything else is
/// a 400, since a Host the router and the app read differently is an attack.
const fn host_char(b: u8) -> bool {
    matches!(b,
        b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9'
        | b'-' | b'.' | b'_' | b'~' | b'!' | b'$' | b'&' | b'\'' | b'(' | b')'
        | b'*' | b'+' | b',' | b';' | b'=' | b'%' | b':' | b'[' | b']')
}

/// qdtext of a quoted-string (RFC 9110 5.6.4).
const fn qdtext(b: u8) -> bool {
    b == b'\t' || b == b' ' || b == 0x21 || (b >= 0x23 && b <= 0x5b) || (b >= 0x5d && b != 0x7f)
}

static TCHAR: [bool; 256] = table!(tchar);
static FIELD_VCHAR: [bool; 256] = table!(field_vchar);
static HOST_CHAR: [bool; 256] = table!(host_char);
static QDTEXT: [bool; 256] = table!(qdtext);

#[inline]
pub fn is_tchar(b: u8) -> bool {
    TCHAR[b as usize]
}

#[inline]
pub fn is_field_vchar(b: u8) -> bool {
    FIELD_VCHAR[b as usize]
}

#[inline]
pub fn is_host_char(b: u8) -> bool {
    HOST_CHAR[b as usize]
}

#[inline]
pub fn is_qdtext(b: u8) -> bool {
    QDTEXT[b as usize]
}

/// Text allowed after a backslash in a quoted-string.
#[inline]
pub fn is_quoted_pair_char(b: u8) -> bool {
    b == b'\t' || (b >= 0x20 && b != 0x7f)
}

#[inline]
pub fn is_token(s: &[u8]) -> bool {
    !s.is_empty() && s.iter().all(|&b| is_tchar(b))
}

#[inline]
pub fn is_ows(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

/// Strips SP/HTAB on both sides (OWS around list elements and field values).
pub fn trim_ows(mut s: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = s {
        if is_ows(*first) {
            s = rest;
        } else {
            break;
        }
    }
    while let [rest @ .., last] = s {
        if is_ows(*last) {
            s = rest;
        } else {
            break;
        }
    }
    s
}

/// Parses `1*DIGIT` into a u64 no larger than `max`; `None` for anything else
/// (sign, spaces, hex, empty, overflow).
pub fn parse_decimal(s: &[u8], max: u64) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    let mut n: u64 = 0;
    for &b in s {
        if !b.is_ascii_digit() {
            return None;
        }
        n = n.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
        if n > max {
            return None;
        }
    }
    Some(n)
}

/// Iterates the elements of a comma-separated list, OWS trimmed, empty ones
/// included (callers decide whether an empty element is an error).
pub fn list_items(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value.split(|&b| b == b',').map(trim_ows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal() {
        assert_eq!(parse_decimal(b"0", u64::MAX), Some(0));
        assert_eq!(parse_decimal(b"007", u64::MAX), Some(7));
        assert_eq!(parse_decimal(b"", u64::MAX), None);
        assert_eq!(parse_decimal(b"+1", u64::MAX), None);
        assert_eq!(parse_decimal(b"-0", u64::MAX), None);
        assert_eq!(parse_decimal(b"1 2", u64::MAX), None);
        assert_eq!(parse_decimal(b"0x10", u64::MAX), None);
        assert_eq!(parse_decimal(b"99999999999999999999999", u64::MAX), None);
        assert_eq!(parse_decimal(b"11", 10), None);
    }

    #[test]
    fn ows_and_lists() {
        assert_eq!(trim_ows(b" \t a b \t"), b"a b");
        assert_eq!(trim_ows(b"   "), b"");
        let items: Vec<&[u8]> = list_items(b"gzip , chunked,").collect();
        assert_eq!(items, vec![&b"gzip"[..], b"chunked", b""]);
    }

    #[test]
    fn classes() {
        assert!(is_token(b"X-Custom|Pipe"));
        assert!(!is_token(b"a b"));
        assert!(!is_token(b""));
        assert!(!is_field_vchar(0));
        assert!(!is_field_vchar(0x7f));
        assert!(!is_field_vchar(b'\r'));
        assert!(is_field_vchar(b'\t'));
        assert!(is_field_vchar(0xe9));
        assert!(!is_qdtext(b'"'));
        assert!(!is_qdtext(b'\\'));
        assert!(is_host_char(b'['));
        assert!(!is_host_char(b'/'));
    }
}
