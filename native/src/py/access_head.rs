//! The WSGI environ keys an access line reads, taken from a parsed request
//! head instead of a dict: what `environ::fill` would have put under that key
//! for a base environ that holds REMOTE_ADDR alone (the asgi worker's).
//!
//! A server that parsed the head natively can then log a request without
//! building its environ dict (a string and a dict slot per field). Where the
//! head alone does not say (another key from a server's base environ, a
//! remote address that is not ASCII), the answer is `Unknown` and the
//! formatter builds the dict after all, so the line never differs.

use std::borrow::Cow;

use super::environ::HeadView;

/// The value under an environ key, in its latin-1 bytes.
#[derive(Debug, PartialEq, Eq)]
pub enum Lookup<'a> {
    Absent,
    Found(Cow<'a, [u8]>),
    Unknown,
}

/// The environ value of `key` for `head` on a connection from `remote`.
pub fn environ_value<'a>(head: &'a impl HeadView, remote: &'a str, key: &str) -> Lookup<'a> {
    let found = |bytes: &'a [u8]| Lookup::Found(Cow::Borrowed(bytes));
    match key {
        "REMOTE_ADDR" if remote.is_ascii() => found(remote.as_bytes()),
        "REMOTE_ADDR" => Lookup::Unknown,
        "REQUEST_METHOD" => found(head.method()),
        "PATH_INFO" => found(head.path()),
        "QUERY_STRING" => found(head.query()),
        "RAW_URI" | "REQUEST_URI" => found(head.target()),
        "SERVER_PROTOCOL" => found(head.protocol().as_bytes()),
        // Each line of these replaces the one before, as `fill` puts them.
        "CONTENT_TYPE" => last_field(head, b"content-type"),
        "CONTENT_LENGTH" => last_field(head, b"content-length"),
        "HTTP_HOST" => match head.host_override() {
            Some(host) => found(host),
            None => joined_fields(head, b"host"),
        },
        _ => match key.strip_prefix("HTTP_") {
            Some(rest) => http_field(head, rest),
            None => Lookup::Unknown,
        },
    }
}

/// `HTTP_<rest>`: the field whose name `fill` turns into that key (upper
/// case, "-" as "_"); names with "_" and the two CONTENT_ fields have none.
fn http_field<'a>(head: &'a impl HeadView, rest: &str) -> Lookup<'a> {
    if rest.bytes().any(|b| b.is_ascii_lowercase() || b == b'-') {
        return Lookup::Absent;
    }
    let name: Vec<u8> = rest
        .bytes()
        .map(|b| match b {
            b'_' => b'-',
            _ => b.to_ascii_lowercase(),
        })
        .collect();
    match name.as_slice() {
        b"content-type" | b"content-length" => Lookup::Absent,
        _ => joined_fields(head, &name),
    }
}

fn last_field<'a>(head: &'a impl HeadView, name: &[u8]) -> Lookup<'a> {
    (0..head.field_count())
        .rev()
        .map(|i| head.field(i))
        .find(|(n, _)| *n == name)
        .map_or(Lookup::Absent, |(_, v)| Lookup::Found(Cow::Borrowed(v)))
}

/// Every line of the field, joined with "," in the order received.
fn joined_fields<'a>(head: &'a impl HeadView, name: &[u8]) -> Lookup<'a> {
    let mut joined: Option<Cow<'a, [u8]>> = None;
    for i in 0..head.field_count() {
        let (n, value) = head.field(i);
        if n != name {
            continue;
        }
        match &mut joined {
            None => joined = Some(Cow::Borrowed(value)),
            Some(buf) => {
                let buf = buf.to_mut();
                buf.push(b',');
                buf.extend_from_slice(value);
            }
        }
    }
    joined.map_or(Lookup::Absent, Lookup::Found)
}
