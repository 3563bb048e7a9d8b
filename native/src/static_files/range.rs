//! `Range: bytes=...` (RFC 9110 14.2): one range is served as 206; a
//! header this module does not take (another unit, several ranges, a bad
//! form) means the whole file, as the RFC lets a server ignore Range; a range
//! that starts past the end is 416.

/// What the Range header asks of a file of `size` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wanted {
    /// The whole file: no Range, or one this server ignores.
    Whole,
    /// Bytes `start..end` (end exclusive, never past the size).
    Part { start: u64, end: u64 },
    /// 416: no byte of the file is in the range.
    Unsatisfiable,
}

pub fn wanted(header: Option<&[u8]>, size: u64) -> Wanted {
    let Some(spec) = header.and_then(|h| std::str::from_utf8(h).ok()) else {
        return Wanted::Whole;
    };
    let Some(set) = spec.trim().strip_prefix("bytes=") else {
        return Wanted::Whole;
    };
    if set.contains(',') {
        // Several ranges would need multipart/byteranges; the whole file
        // answers them correctly and costs a client nothing it would not
        // have fetched otherwise.
        return Wanted::Whole;
    }
    let Some((first, last)) = set.trim().split_once('-') else {
        return Wanted::Whole;
    };
    let (first, last) = (first.trim(), last.trim());
    let number = |s: &str| -> Option<u64> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        s.parse().ok()
    };
    if first.is_empty() {
        // bytes=-N: the last N bytes.
        return match number(last) {
            None => Wanted::Whole,
            Some(0) => Wanted::Unsatisfiable,
            Some(_) if size == 0 => Wanted::Unsatisfiable,
            Some(n) => Wanted::Part {
                start: size.saturating_sub(n),
                end: size,
            },
        };
    }
    let Some(start) = number(first) else {
        return Wanted::Whole;
    };
    let end = if last.is_empty() {
        size
    } else {
        match number(last) {
            Some(l) if l >= start => l.saturating_add(1).min(size),
            _ => return Wanted::Whole,
        }
    };
    if start >= size {
        return Wanted::Unsatisfiable;
    }
    Wanted::Part { start, end }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(h: &str, size: u64) -> Wanted {
        wanted(Some(h.as_bytes()), size)
    }

    #[test]
    fn forms() {
        assert_eq!(w("bytes=0-9", 100), Wanted::Part { start: 0, end: 10 });
        assert_eq!(
            w("bytes=90-", 100),
            Wanted::Part {
                start: 90,
                end: 100
            }
        );
        assert_eq!(
            w("bytes=-10", 100),
            Wanted::Part {
                start: 90,
                end: 100
            }
        );
        assert_eq!(w("bytes=-1000", 100), Wanted::Part { start: 0, end: 100 });
        assert_eq!(
            w("bytes=50-1000", 100),
            Wanted::Part {
                start: 50,
                end: 100
            }
        );
        assert_eq!(w("bytes=100-", 100), Wanted::Unsatisfiable);
        assert_eq!(w("bytes=-0", 100), Wanted::Unsatisfiable);
        assert_eq!(w("bytes=0-", 0), Wanted::Unsatisfiable);
    }

    #[test]
    fn ignored() {
        assert_eq!(wanted(None, 10), Wanted::Whole);
        assert_eq!(w("bytes=0-1,3-4", 10), Wanted::Whole);
        assert_eq!(w("items=0-1", 10), Wanted::Whole);
        assert_eq!(w("bytes=5-2", 10), Wanted::Whole);
        assert_eq!(w("bytes=a-2", 10), Wanted::Whole);
        assert_eq!(w("bytes=-", 10), Wanted::Whole);
        assert_eq!(w("bytes=+1-2", 10), Wanted::Whole);
    }
}
