//! Gunicorn's access-log atoms, in plain Rust: which value a placeholder's
//! key names (`atom`) and how request data is escaped into a line
//! (`escape_into`). `py/access_format.rs` reads the values from the Python
//! objects; `supervise/logs.py` holds the same rules as Python getters, which
//! the native formatter calls for every atom and value it does not handle
//! itself, so that both always write the same line.

/// What one `%(key)s` placeholder prints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Atom {
    /// A WSGI environ string, escaped; `default` when absent or empty.
    Environ { key: String, default: &'static str },
    /// `l`: always "-".
    Dash,
    /// `r`: "METHOD URI PROTOCOL", escaped as a whole.
    RequestLine,
    /// `s`: the status code.
    Status,
    /// `B`: bytes sent, 0 when unknown.
    SentOrZero,
    /// `b`: bytes sent, "-" when unknown.
    SentOrDash,
    /// `T`, `M`, `D`: the request time truncated to seconds, milliseconds
    /// or microseconds.
    Duration { per_second: u32 },
    /// `p`: `<pid>`.
    Pid,
    /// `{name}o`: the last response header of that (lower-case) name.
    ResponseHeader { name: String },
    /// `t`: the local time, to the second.
    Time,
    /// `u`: the Basic auth user.
    User,
    /// `L`, `{name}e`, unknown keys and names that are not ASCII: the Python
    /// getter alone.
    Python,
}

/// The atom a placeholder's key names; Python's `logs._atom` is the
/// reference (keys are case-sensitive, `{name}i/o/e` is not).
pub fn atom(key: &str) -> Atom {
    let environ = |key: &str, default| Atom::Environ {
        key: key.to_owned(),
        default,
    };
    match key {
        "h" => environ("REMOTE_ADDR", "-"),
        "l" => Atom::Dash,
        "u" => Atom::User,
        "t" => Atom::Time,
        "r" => Atom::RequestLine,
        "m" => environ("REQUEST_METHOD", "-"),
        "U" => environ("PATH_INFO", "-"),
        "q" => environ("QUERY_STRING", ""),
        "H" => environ("SERVER_PROTOCOL", "-"),
        "s" => Atom::Status,
        "B" => Atom::SentOrZero,
        "b" => Atom::SentOrDash,
        "f" => environ("HTTP_REFERER", "-"),
        "a" => environ("HTTP_USER_AGENT", "-"),
        "T" => Atom::Duration { per_second: 1 },
        "M" => Atom::Duration { per_second: 1_000 },
        "D" => Atom::Duration {
            per_second: 1_000_000,
        },
        "p" => Atom::Pid,
        _ => named_atom(key).unwrap_or(Atom::Python),
    }
}

/// `{name}i` and `{name}o`; `None` for anything Python decides (`{name}e`,
/// unknown keys, and names whose Unicode case mapping is not ASCII's).
fn named_atom(key: &str) -> Option<Atom> {
    let inner = key.strip_prefix('{')?;
    let kind = inner.chars().next_back()?;
    let name = inner[..inner.len() - kind.len_utf8()].strip_suffix('}')?;
    if name.contains('}') || !name.is_ascii() {
        return None;
    }
    match kind {
        'i' | 'I' => {
            let key = name.to_ascii_uppercase().replace('-', "_");
            let key = match key.as_str() {
                "CONTENT_TYPE" | "CONTENT_LENGTH" => key,
                _ => format!("HTTP_{key}"),
            };
            Some(Atom::Environ { key, default: "-" })
        }
        'o' | 'O' => Some(Atom::ResponseHeader {
            name: name.to_ascii_lowercase(),
        }),
        _ => None,
    }
}

/// Whether `c` would let request data forge or break a line.
fn unsafe_char(c: u8) -> bool {
    c == b'"' || c == b'\\' || c < 0x20 || c == 0x7f
}

/// Appends `value` with `"` and `\` backslash-escaped and control characters
/// as `\xNN`. Every byte escaped is ASCII, so UTF-8 sequences pass whole.
pub fn escape_into(out: &mut String, value: &str) {
    let bytes = value.as_bytes();
    let mut start = 0;
    for (i, &c) in bytes.iter().enumerate() {
        if !unsafe_char(c) {
            continue;
        }
        out.push_str(&value[start..i]);
        escape_char(out, c);
        start = i + 1;
    }
    out.push_str(&value[start..]);
}

/// `escape_into` for bytes read as latin-1, as the WSGI environ decodes a
/// request's bytes: each byte is the character of that code point.
pub fn escape_latin1_into(out: &mut String, value: &[u8]) {
    for &c in value {
        if unsafe_char(c) {
            escape_char(out, c);
        } else {
            out.push(char::from(c));
        }
    }
}

fn escape_char(out: &mut String, c: u8) {
    match c {
        b'"' => out.push_str("\\\""),
        b'\\' => out.push_str("\\\\"),
        _ => {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.push_str("\\x");
            out.push(HEX[usize::from(c >> 4)] as char);
            out.push(HEX[usize::from(c & 0xf)] as char);
        }
    }
}

/// The request time in `per_second` units, truncated toward zero as
/// Python's `int()`; `None` where Python's int would not fit an i64.
pub fn duration_units(seconds: f64, per_second: u32) -> Option<i64> {
    let units = (seconds * f64::from(per_second)).trunc();
    // -2^63 is exact as a float; 2^63 is the first value out of range.
    const LOW: f64 = i64::MIN as f64;
    (units.is_finite() && units > LOW && units < -LOW).then_some(units as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn escaped(s: &str) -> String {
        let mut out = String::new();
        escape_into(&mut out, s);
        out
    }

    #[test]
    fn escapes_quotes_backslashes_and_controls() {
        assert_eq!(escaped("plain"), "plain");
        assert_eq!(escaped(r#"a"b\c"#), r#"a\"b\\c"#);
        assert_eq!(escaped("x\ny\r\t\0\x7f"), r"x\x0ay\x0d\x09\x00\x7f");
        assert_eq!(escaped("caf\u{e9} \u{1f600}"), "caf\u{e9} \u{1f600}");
        assert_eq!(escaped(""), "");
    }

    #[test]
    fn escapes_latin1_bytes_as_their_characters() {
        let mut out = String::new();
        escape_latin1_into(&mut out, b"caf\xe9 \"\x01\x7f\xff");
        assert_eq!(out, "caf\u{e9} \\\"\\x01\\x7f\u{ff}");
    }

    #[test]
    fn names_the_atoms() {
        assert_eq!(
            atom("h"),
            Atom::Environ {
                key: "REMOTE_ADDR".into(),
                default: "-"
            }
        );
        assert_eq!(
            atom("{X-Request-Id}i"),
            Atom::Environ {
                key: "HTTP_X_REQUEST_ID".into(),
                default: "-"
            }
        );
        assert_eq!(
            atom("{content-type}I"),
            Atom::Environ {
                key: "CONTENT_TYPE".into(),
                default: "-"
            }
        );
        assert_eq!(
            atom("{Content-Length}o"),
            Atom::ResponseHeader {
                name: "content-length".into()
            }
        );
        assert_eq!(
            atom("{}i"),
            Atom::Environ {
                key: "HTTP_".into(),
                default: "-"
            }
        );
        for python in [
            "L",
            "{HOME}e",
            "x",
            "",
            "{a}b",
            "{a}}i",
            "{stra\u{df}e}i",
            "{i",
            "i",
        ] {
            assert_eq!(atom(python), Atom::Python, "{python:?}");
        }
    }

    #[test]
    fn truncates_durations_as_python_int() {
        assert_eq!(duration_units(1.9999, 1), Some(1));
        assert_eq!(duration_units(0.0015, 1_000), Some(1));
        assert_eq!(duration_units(-0.5, 1), Some(0));
        assert_eq!(duration_units(f64::NAN, 1), None);
        assert_eq!(duration_units(1e300, 1), None);
    }
}
