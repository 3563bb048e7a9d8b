//! Validators and conditional requests (RFC 9110 8.8, 13): the ETag and
//! Last-Modified of a file, and what If-None-Match, If-Modified-Since and
//! If-Range ask of them. Evaluated in the RFC's order (13.2.2): If-None-Match
//! first, If-Modified-Since only without it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A strong validator from what a stat gives: the modification time in
/// nanoseconds and the size, as nginx's (seconds there). It changes when the
/// file is rewritten, however fast, and no content is read to make it.
pub fn etag(mtime: SystemTime, size: u64) -> String {
    let ns = mtime
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_nanos();
    format!("\"{ns:x}-{size:x}\"")
}

pub fn http_date(t: SystemTime) -> String {
    httpdate::fmt_http_date(t)
}

fn parse_date(value: &[u8]) -> Option<SystemTime> {
    httpdate::parse_http_date(std::str::from_utf8(value).ok()?.trim()).ok()
}

/// Whether `header` (If-None-Match) names `etag`: weak comparison, as the RFC
/// asks for this header (a `W/` prefix does not matter), or `*`.
pub fn none_match(header: &[u8], etag: &str) -> bool {
    let Ok(text) = std::str::from_utf8(header) else {
        return false;
    };
    let text = text.trim();
    if text == "*" {
        return true;
    }
    let bare = |t: &str| t.trim().trim_start_matches("W/").to_owned();
    let mine = bare(etag);
    text.split(',').any(|t| bare(t) == mine)
}

/// Whether the file changed after the date `header` (If-Modified-Since)
/// gives; an unreadable date counts as changed (the RFC: ignore it).
fn modified_since(header: &[u8], mtime: SystemTime) -> bool {
    let Some(since) = parse_date(header) else {
        return true;
    };
    // HTTP dates have whole seconds.
    let secs = |t: SystemTime| t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    secs(mtime) > secs(since)
}

/// Whether the request is answered 304: what it holds is still current.
pub fn not_modified(
    if_none_match: Option<&[u8]>,
    if_modified_since: Option<&[u8]>,
    etag: &str,
    mtime: SystemTime,
) -> bool {
    match (if_none_match, if_modified_since) {
        (Some(inm), _) => none_match(inm, etag),
        (None, Some(ims)) => !modified_since(ims, mtime),
        (None, None) => false,
    }
}

/// Whether a Range may be served, given If-Range: it must name the current
/// representation exactly (a strong ETag, or the Last-Modified date itself).
pub fn range_applies(if_range: Option<&[u8]>, etag: &str, last_modified: &str) -> bool {
    let Some(value) = if_range.and_then(|v| std::str::from_utf8(v).ok()) else {
        return true;
    };
    let value = value.trim();
    if value.starts_with('"') {
        value == etag
    } else {
        value == last_modified
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etags() {
        let t = UNIX_EPOCH + Duration::new(1_700_000_000, 5);
        let e = etag(t, 10);
        assert!(e.starts_with('"') && e.ends_with("-a\""), "{e}");
        assert_ne!(e, etag(t + Duration::from_nanos(1), 10));
        assert!(none_match(e.as_bytes(), &e));
        assert!(none_match(format!("W/{e}").as_bytes(), &e));
        assert!(none_match(format!("\"x\", {e}").as_bytes(), &e));
        assert!(none_match(b"*", &e));
        assert!(!none_match(b"\"x\"", &e));
    }

    #[test]
    fn dates() {
        let t = UNIX_EPOCH + Duration::new(1_700_000_000, 500);
        let date = http_date(t);
        assert!(not_modified(None, Some(date.as_bytes()), "\"e\"", t));
        let later = http_date(t + Duration::from_secs(1));
        assert!(not_modified(None, Some(later.as_bytes()), "\"e\"", t));
        let earlier = http_date(t - Duration::from_secs(1));
        assert!(!not_modified(None, Some(earlier.as_bytes()), "\"e\"", t));
        assert!(!not_modified(None, Some(b"yesterday"), "\"e\"", t));
        // If-None-Match wins over the date.
        assert!(!not_modified(
            Some(b"\"x\""),
            Some(date.as_bytes()),
            "\"e\"",
            t
        ));
    }

    #[test]
    fn if_range() {
        assert!(range_applies(None, "\"e\"", "d"));
        assert!(range_applies(Some(b"\"e\""), "\"e\"", "d"));
        assert!(!range_applies(Some(b"W/\"e\""), "\"e\"", "d"));
        assert!(!range_applies(Some(b"\"f\""), "\"e\"", "d"));
        assert!(range_applies(Some(b"d"), "\"e\"", "d"));
        assert!(!range_applies(
            Some(b"Sat, 01 Jan 2000 00:00:00 GMT"),
            "\"e\"",
            "d"
        ));
    }
}
