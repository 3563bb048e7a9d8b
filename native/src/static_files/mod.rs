//! Static files (`--static-map PREFIX=DIR`), answered by the server before
//! the app, for every worker class: the native server calls `decide` on its
//! runtime threads, the Python workers through `supervise._native`
//! (`py/static_files.rs`). One set of rules, so a file is served the same
//! whichever class serves it.
//!
//! Theory of operation: `decide` takes a request's method, path and the few
//! fields that matter (conditional, Range, Accept-Encoding) and returns
//! either `Decision::App` (not a static path, or a missing file with
//! `--static-fallthrough`) or the whole answer: status, fields, and a body
//! that is an open file and a byte range of it (the caller sends it with
//! sendfile where it can) or a short text. It never touches a socket. Every
//! request stats the file again: a file changed on disk is served as it is
//! now, with its new ETag (no cache to go stale).
//!
//! Layers: a leaf, like `http1_codec`: no Python type, no server type.

mod conditional;
mod encoding;
mod mime;
mod path;
mod range;

use std::fs::File;
use std::path::PathBuf;

use path::{Folder, Found, Located, Mount};
use range::Wanted;

/// What `--static-cache-control` is for hashed names under `--static-immutable`.
const IMMUTABLE: &str = "public, max-age=31536000, immutable";

/// The static-file settings, with each folder's canonical path.
#[derive(Debug, Clone, Default)]
pub struct StaticFiles {
    mounts: Vec<Mount>,
    cache_control: Option<String>,
    immutable: bool,
    fallthrough: bool,
    follow_symlinks: bool,
}

/// What `decide` reads of a request.
#[derive(Debug, Default, Clone, Copy)]
pub struct StaticRequest<'a> {
    pub method: &'a [u8],
    /// Undecoded, without the query.
    pub raw_path: &'a [u8],
    pub if_none_match: Option<&'a [u8]>,
    pub if_modified_since: Option<&'a [u8]>,
    pub range: Option<&'a [u8]>,
    pub if_range: Option<&'a [u8]>,
    pub accept_encoding: Option<&'a [u8]>,
}

impl<'a> StaticRequest<'a> {
    /// From a request's method, undecoded path and a field reader (given
    /// the field's lower-case name), as each server reads its requests.
    pub fn of(
        method: &'a [u8],
        raw_path: &'a [u8],
        field: impl Fn(&[u8]) -> Option<&'a [u8]>,
    ) -> StaticRequest<'a> {
        StaticRequest {
            method,
            raw_path,
            if_none_match: field(b"if-none-match"),
            if_modified_since: field(b"if-modified-since"),
            range: field(b"range"),
            if_range: field(b"if-range"),
            accept_encoding: field(b"accept-encoding"),
        }
    }
}

pub enum Decision {
    /// The app's request.
    App,
    Answer(StaticAnswer),
}

pub struct StaticAnswer {
    pub status: u16,
    /// Without Content-Length: the caller sends the body and knows its size.
    pub headers: Vec<(&'static str, String)>,
    pub body: StaticBody,
}

pub enum StaticBody {
    /// 304: nothing, not even a Content-Length.
    Nothing,
    Text(&'static str),
    /// `len` bytes of `file` from `offset`.
    File {
        file: File,
        offset: u64,
        len: u64,
    },
}

impl StaticFiles {
    /// `maps`: (prefix, folder) pairs as the settings give them; a folder
    /// that is not there is an error (said at start, not at the first request).
    pub fn new(
        maps: &[(String, PathBuf)],
        cache_control: Option<String>,
        immutable: bool,
        fallthrough: bool,
        follow_symlinks: bool,
    ) -> Result<StaticFiles, String> {
        let mut mounts = Vec::with_capacity(maps.len());
        for (prefix, dir) in maps {
            let root = std::fs::canonicalize(dir)
                .map_err(|e| format!("static folder {}: {e}", dir.display()))?;
            if !root.is_dir() {
                return Err(format!("static folder {} is not a folder", dir.display()));
            }
            mounts.push(Mount {
                prefix: prefix.trim_end_matches('/').to_owned(),
                root,
            });
        }
        // The longest prefix first: /static/admin before /static.
        mounts.sort_by_key(|m| std::cmp::Reverse(m.prefix.len()));
        Ok(StaticFiles {
            mounts,
            cache_control,
            immutable,
            fallthrough,
            follow_symlinks,
        })
    }

    pub fn is_empty(&self) -> bool {
        self.mounts.is_empty()
    }

    /// Whether `raw_path` is under a mount: a cheap test before reading the
    /// rest of the request for `decide`.
    pub fn claims(&self, raw_path: &[u8]) -> bool {
        path::under(&self.mounts, raw_path).is_some()
    }

    pub fn decide(&self, req: &StaticRequest<'_>) -> Decision {
        let Some((mount, rest)) = path::under(&self.mounts, req.raw_path) else {
            return Decision::App;
        };
        let Some(relative) = path::relative(rest) else {
            return not_found();
        };
        let folder = Folder::new(&mount.root, self.follow_symlinks);
        let found = match folder.locate(&relative) {
            Located::Refused => return not_found(),
            Located::Missing if self.fallthrough => return Decision::App,
            Located::Missing => return not_found(),
            Located::Found(found) => *found,
        };
        if req.method != b"GET" && req.method != b"HEAD" {
            return Decision::Answer(StaticAnswer {
                status: 405,
                headers: vec![
                    ("Allow", "GET, HEAD".into()),
                    ("Content-Type", "text/plain; charset=utf-8".into()),
                ],
                body: StaticBody::Text("Method Not Allowed\n"),
            });
        }
        Decision::Answer(self.answer(req, &folder, &relative, found))
    }

    fn answer(
        &self,
        req: &StaticRequest<'_>,
        folder: &Folder<'_>,
        relative: &[u8],
        found: Found,
    ) -> StaticAnswer {
        let name = file_name(req.raw_path);
        let mut headers = vec![("Content-Type", mime::content_type(&name).to_owned())];
        let (sent, coding, has_siblings) = variant(req, folder, relative, found);
        if has_siblings {
            headers.push(("Vary", "Accept-Encoding".into()));
        }
        let mtime = sent.meta.modified().unwrap_or(std::time::UNIX_EPOCH);
        let size = sent.meta.len();
        let etag = conditional::etag(mtime, size);
        let last_modified = conditional::http_date(mtime);
        if let Some(value) = self.cache_control_for(&name) {
            headers.push(("Cache-Control", value));
        }
        headers.push(("ETag", etag.clone()));
        headers.push(("Last-Modified", last_modified.clone()));
        if conditional::not_modified(req.if_none_match, req.if_modified_since, &etag, mtime) {
            return StaticAnswer {
                status: 304,
                headers,
                body: StaticBody::Nothing,
            };
        }
        if let Some(coding) = coding {
            headers.push(("Content-Encoding", coding.into()));
        }
        headers.push(("Accept-Ranges", "bytes".into()));
        let wanted = if conditional::range_applies(req.if_range, &etag, &last_modified) {
            range::wanted(req.range, size)
        } else {
            Wanted::Whole
        };
        match wanted {
            Wanted::Whole => StaticAnswer {
                status: 200,
                headers,
                body: StaticBody::File {
                    file: sent.file,
                    offset: 0,
                    len: size,
                },
            },
            Wanted::Part { start, end } => {
                headers.push(("Content-Range", format!("bytes {start}-{}/{size}", end - 1)));
                StaticAnswer {
                    status: 206,
                    headers,
                    body: StaticBody::File {
                        file: sent.file,
                        offset: start,
                        len: end - start,
                    },
                }
            }
            Wanted::Unsatisfiable => {
                headers.retain(|(name, _)| *name != "Content-Type" && *name != "Content-Encoding");
                headers.push(("Content-Range", format!("bytes */{size}")));
                headers.push(("Content-Type", "text/plain; charset=utf-8".into()));
                StaticAnswer {
                    status: 416,
                    headers,
                    body: StaticBody::Text("Range Not Satisfiable\n"),
                }
            }
        }
    }

    fn cache_control_for(&self, name: &str) -> Option<String> {
        if self.immutable && carries_hash(name) {
            return Some(IMMUTABLE.into());
        }
        self.cache_control.clone()
    }
}

/// The file to send: a precompressed sibling the client accepts, else the
/// file itself; its coding; and whether the file has siblings at all (then
/// every answer for it varies on Accept-Encoding).
fn variant(
    req: &StaticRequest<'_>,
    folder: &Folder<'_>,
    relative: &[u8],
    found: Found,
) -> (Found, Option<&'static str>, bool) {
    let mut has_siblings = false;
    let mut chosen = None;
    let mut sibling = Vec::with_capacity(relative.len() + 4);
    for (coding, suffix) in encoding::CODINGS {
        sibling.clear();
        sibling.extend_from_slice(relative);
        sibling.extend_from_slice(suffix.as_bytes());
        if !folder.has_file(&sibling) {
            continue;
        }
        has_siblings = true;
        if chosen.is_none() && encoding::accepts(req.accept_encoding, coding) {
            if let Ok(Some(opened)) = folder.file(&sibling) {
                chosen = Some((opened, coding));
            }
        }
    }
    match chosen {
        Some((opened, coding)) => (opened, Some(coding), true),
        None => (found, None, has_siblings),
    }
}

fn not_found() -> Decision {
    Decision::Answer(StaticAnswer {
        status: 404,
        headers: vec![("Content-Type", "text/plain; charset=utf-8".into())],
        body: StaticBody::Text("Not Found\n"),
    })
}

/// The last segment of the request path, decoded (for its extension).
fn file_name(raw_path: &[u8]) -> String {
    let last = raw_path.rsplit(|&b| b == b'/').next().unwrap_or(b"");
    let decoded = path::relative(last).unwrap_or_default();
    String::from_utf8_lossy(&decoded).into_owned()
}

/// A name a build tool gave a content hash (`app.3f2a9c1b.js`,
/// `app-3f2a9c1b8d0e.css`): a part of 8 or more hex digits, with a digit
/// among them, before the extension. Such a file never changes under its
/// name, so it may be cached for good.
pub fn carries_hash(name: &str) -> bool {
    let Some((stem, _ext)) = name.rsplit_once('.') else {
        return false;
    };
    stem.split(['.', '-', '_']).any(|part| {
        part.len() >= 8
            && part.bytes().all(|b| b.is_ascii_hexdigit())
            && part.bytes().any(|b| b.is_ascii_digit())
    })
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
