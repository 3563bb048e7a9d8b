//! From a request path to a file under a mount, refusing every way out of
//! the folder: `..` (raw or percent-encoded, `%2e%2e`, `..%2f`), backslashes,
//! NUL, dotfiles and dot-folders, and (unless allowed) symlinks whose target
//! lies outside. The path is percent-decoded once, then split on `/`; the
//! file is found by its canonical path, so what is checked is what is opened.

use std::ffi::OsStr;
use std::fs::{File, Metadata};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// A URL prefix served from a folder.
#[derive(Debug, Clone)]
pub struct Mount {
    /// `/static`: no trailing slash.
    pub prefix: String,
    /// Canonical (absolute, symlinks resolved).
    pub root: PathBuf,
}

/// Where a request path leads.
#[derive(Debug)]
pub enum Located {
    /// Under a mount, but a way out of it or a hidden file: always 404.
    Refused,
    /// Under a mount, and no such file (or a folder).
    Missing,
    Found(Box<Found>),
}

#[derive(Debug)]
pub struct Found {
    pub file: File,
    pub meta: Metadata,
    /// Canonical; its siblings are looked for next to it.
    pub path: PathBuf,
}

/// The mount `raw_path` is under, and the rest of the path after it.
pub fn under<'a, 'p>(mounts: &'a [Mount], raw_path: &'p [u8]) -> Option<(&'a Mount, &'p [u8])> {
    mounts.iter().find_map(|m| {
        let rest = raw_path.strip_prefix(m.prefix.as_bytes())?;
        match rest {
            [] => Some((m, rest)),
            [b'/', tail @ ..] => Some((m, tail)),
            _ => None,
        }
    })
}

/// The decoded segments of `rest`, or `None` for a path that must be refused.
pub fn segments(rest: &[u8]) -> Option<Vec<Vec<u8>>> {
    let decoded = decode(rest)?;
    let mut out = Vec::new();
    for segment in decoded.split(|&b| b == b'/') {
        if segment.is_empty() {
            continue;
        }
        if segment[0] == b'.' || segment.iter().any(|&b| b == b'\\' || b == 0) {
            return None;
        }
        out.push(segment.to_vec());
    }
    Some(out)
}

/// Percent-decoding, strict: a `%` without two hex digits refuses the path
/// (a file is named exactly, not guessed at).
fn decode(raw: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        if raw[i] == b'%' {
            let hex = raw.get(i + 1..i + 3)?;
            let value = u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?;
            out.push(value);
            i += 3;
        } else {
            out.push(raw[i]);
            i += 1;
        }
    }
    Some(out)
}

/// The file `segments` name under `root`.
pub fn locate(root: &Path, segments: &[Vec<u8>], follow_symlinks: bool) -> Located {
    if segments.is_empty() {
        return Located::Missing;
    }
    let mut path = root.to_path_buf();
    for segment in segments {
        path.push(OsStr::from_bytes(segment));
    }
    match open_inside(root, &path, follow_symlinks) {
        Ok(Some(found)) => Located::Found(Box::new(found)),
        Ok(None) => Located::Refused,
        Err(_) => Located::Missing,
    }
}

/// Opens `path` if it is a regular file inside `root` (or anywhere, when
/// symlinks may lead out); `Ok(None)`: it leads out.
pub fn open_inside(root: &Path, path: &Path, follow_symlinks: bool) -> io::Result<Option<Found>> {
    let canonical = std::fs::canonicalize(path)?;
    if !follow_symlinks && !canonical.starts_with(root) {
        return Ok(None);
    }
    let file = File::open(&canonical)?;
    // The opened file's own metadata: what is sent is what was checked.
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(io::ErrorKind::NotFound.into());
    }
    Ok(Some(Found {
        file,
        meta,
        path: canonical,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(p: &str) -> Option<Vec<String>> {
        segments(p.as_bytes()).map(|v| {
            v.into_iter()
                .map(|s| String::from_utf8(s).unwrap())
                .collect()
        })
    }

    #[test]
    fn decoding_and_refusals() {
        assert_eq!(seg("a/b.css"), Some(vec!["a".into(), "b.css".into()]));
        assert_eq!(seg("a%20b.txt"), Some(vec!["a b.txt".into()]));
        assert_eq!(seg("a//b"), Some(vec!["a".into(), "b".into()]));
        for bad in [
            "../x",
            "a/../x",
            "%2e%2e/x",
            "..%2fx",
            "%2E%2E%2Fx",
            ".env",
            "a/.git/config",
            "..\\x",
            "a%5cb",
            "a%00b",
            "%zz",
            "a%2",
            ".",
        ] {
            assert_eq!(seg(bad), None, "{bad}");
        }
    }

    #[test]
    fn prefixes() {
        let mounts = [Mount {
            prefix: "/static".into(),
            root: "/srv".into(),
        }];
        assert_eq!(
            under(&mounts, b"/static/a.css").map(|m| m.1),
            Some(&b"a.css"[..])
        );
        assert_eq!(under(&mounts, b"/static").map(|m| m.1), Some(&b""[..]));
        assert!(under(&mounts, b"/staticx/a.css").is_none());
        assert!(under(&mounts, b"/").is_none());
    }
}
