//! From a request path to a file under a mount, refusing every way out of
//! the folder: `..` (raw or percent-encoded, `%2e%2e`, `..%2f`), backslashes,
//! NUL, dotfiles and dot-folders, and (unless allowed) symlinks whose target
//! lies outside. The path is percent-decoded once, then split on `/`; the
//! file is opened in the call that checks its path (`Folder::file`), so what
//! is checked is what is opened.

use std::ffi::{CString, OsStr};
use std::fs::{File, Metadata};
use std::io;
use std::os::fd::{FromRawFd, RawFd};
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

/// The path under the folder that `rest` names (decoded, empty segments
/// dropped, joined by `/`), or `None` for a path that must be refused.
pub fn relative(rest: &[u8]) -> Option<Vec<u8>> {
    let decoded = decode(rest)?;
    let mut out = Vec::with_capacity(decoded.len());
    for segment in decoded.split(|&b| b == b'/') {
        if segment.is_empty() {
            continue;
        }
        if segment[0] == b'.' || segment.iter().any(|&b| b == b'\\' || b == 0) {
            return None;
        }
        if !out.is_empty() {
            out.push(b'/');
        }
        out.extend_from_slice(segment);
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

/// A mount's folder, as one request looks files up in it. Nothing is kept
/// open between requests: a folder replaced on disk (a deploy's `mv`) is
/// served as it is now, as the files are.
pub struct Folder<'a> {
    /// Canonical: no symlink in it (`StaticFiles::new`).
    root: &'a Path,
    follow_symlinks: bool,
}

impl<'a> Folder<'a> {
    pub fn new(root: &'a Path, follow_symlinks: bool) -> Folder<'a> {
        Folder {
            root,
            follow_symlinks,
        }
    }

    /// Where `relative` leads.
    pub fn locate(&self, relative: &[u8]) -> Located {
        if relative.is_empty() {
            return Located::Missing;
        }
        match self.file(relative) {
            Ok(Some(found)) => Located::Found(Box::new(found)),
            Ok(None) => Located::Refused,
            Err(_) => Located::Missing,
        }
    }

    /// Opens `relative` (no `.` or `..` segment: `relative()` refused them)
    /// if it is a regular file inside the folder, or anywhere when symlinks
    /// may lead out; `Ok(None)`: it leads out.
    ///
    /// The root is canonical and `relative` has no `..`, so a path with no
    /// symlink in it cannot leave the folder: openat2's RESOLVE_NO_SYMLINKS
    /// opens it in one system call, where resolving the canonical path first
    /// cost one per path component. A path through a symlink (refused by
    /// that flag), or a kernel without openat2 (before 5.6, or a seccomp
    /// filter), takes the canonical path's check.
    pub fn file(&self, relative: &[u8]) -> io::Result<Option<Found>> {
        let name = self.full_name(relative)?;
        let resolve = if self.follow_symlinks {
            0
        } else {
            libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS
        };
        match open_resolved(&name, resolve) {
            Ok(file) => regular(file).map(Some),
            Err(e) if gone(&e) => Err(e),
            Err(_) => self.file_by_canonical_path(relative),
        }
    }

    /// Whether `relative` names a regular file (a sibling's presence).
    pub fn has_file(&self, relative: &[u8]) -> bool {
        std::fs::metadata(self.root.join(OsStr::from_bytes(relative))).is_ok_and(|m| m.is_file())
    }

    fn full_name(&self, relative: &[u8]) -> io::Result<CString> {
        let root = self.root.as_os_str().as_bytes();
        let mut name = Vec::with_capacity(root.len() + 1 + relative.len() + 1);
        name.extend_from_slice(root);
        name.push(b'/');
        name.extend_from_slice(relative);
        Ok(CString::new(name)?)
    }

    fn file_by_canonical_path(&self, relative: &[u8]) -> io::Result<Option<Found>> {
        let canonical = std::fs::canonicalize(self.root.join(OsStr::from_bytes(relative)))?;
        if !self.follow_symlinks && !canonical.starts_with(self.root) {
            return Ok(None);
        }
        regular(File::open(&canonical)?).map(Some)
    }
}

fn open_resolved(name: &CString, resolve: u64) -> io::Result<File> {
    // SAFETY: a plain struct of integers, all zero is valid.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NOCTTY) as u64;
    how.resolve = resolve;
    // SAFETY: openat2 reads `how` (its size given) and the NUL-terminated
    // name; the returned descriptor is owned below.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            libc::AT_FDCWD,
            name.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: just opened, owned by nothing else.
    Ok(unsafe { File::from_raw_fd(fd as RawFd) })
}

/// The file, if it is a regular one: its own metadata, so what is sent is
/// what was checked.
fn regular(file: File) -> io::Result<Found> {
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(io::ErrorKind::NotFound.into());
    }
    Ok(Found { file, meta })
}

/// Not there: no fallback can find it either.
fn gone(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ENOTDIR))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(p: &str) -> Option<Vec<String>> {
        relative(p.as_bytes()).map(|v| {
            String::from_utf8(v)
                .unwrap()
                .split('/')
                .map(str::to_owned)
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
