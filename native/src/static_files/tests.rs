use std::io::Read;
use std::os::unix::fs::symlink;

use super::*;

struct Site {
    dir: tempfile::TempDir,
}

impl Site {
    fn new() -> Site {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("static");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(root.join("a.css"), "body{}\n").unwrap();
        std::fs::write(root.join("big.txt"), "0123456789").unwrap();
        std::fs::write(root.join("app.js"), "plain").unwrap();
        std::fs::write(root.join("app.js.br"), "brotli").unwrap();
        std::fs::write(root.join("app.js.gz"), "gzipped").unwrap();
        std::fs::write(root.join("app.3f2a9c1b.js"), "x").unwrap();
        std::fs::write(root.join(".env"), "secret").unwrap();
        std::fs::write(root.join("a b.txt"), "spaced").unwrap();
        std::fs::write(dir.path().join("secret.txt"), "outside").unwrap();
        symlink(dir.path().join("secret.txt"), root.join("out.txt")).unwrap();
        symlink(root.join("a.css"), root.join("in.css")).unwrap();
        Site { dir }
    }

    fn files(&self, fallthrough: bool, follow: bool) -> StaticFiles {
        StaticFiles::new(
            &[("/static".into(), self.dir.path().join("static"))],
            Some("max-age=60".into()),
            true,
            fallthrough,
            follow,
        )
        .unwrap()
    }
}

fn get(path: &str) -> StaticRequest<'_> {
    StaticRequest {
        method: b"GET",
        raw_path: path.as_bytes(),
        ..Default::default()
    }
}

fn answer(files: &StaticFiles, req: StaticRequest<'_>) -> StaticAnswer {
    match files.decide(&req) {
        Decision::Answer(a) => a,
        Decision::App => panic!(
            "{:?} went to the app",
            String::from_utf8_lossy(req.raw_path)
        ),
    }
}

fn header<'a>(a: &'a StaticAnswer, name: &str) -> Option<&'a str> {
    a.headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

fn body(a: StaticAnswer) -> String {
    match a.body {
        StaticBody::File {
            mut file,
            offset,
            len,
        } => {
            let mut all = String::new();
            file.read_to_string(&mut all).unwrap();
            all[offset as usize..(offset + len) as usize].to_owned()
        }
        StaticBody::Text(t) => t.to_owned(),
        StaticBody::Nothing => String::new(),
    }
}

#[test]
fn a_file_with_its_validators() {
    let site = Site::new();
    let files = site.files(false, false);
    let a = answer(&files, get("/static/a.css"));
    assert_eq!(a.status, 200);
    assert_eq!(header(&a, "content-type"), Some("text/css; charset=utf-8"));
    assert_eq!(header(&a, "cache-control"), Some("max-age=60"));
    assert_eq!(header(&a, "accept-ranges"), Some("bytes"));
    assert!(header(&a, "vary").is_none());
    let etag = header(&a, "etag").unwrap().to_owned();
    let date = header(&a, "last-modified").unwrap().to_owned();
    assert_eq!(body(a), "body{}\n");
    let a = answer(
        &files,
        StaticRequest {
            if_none_match: Some(etag.as_bytes()),
            ..get("/static/a.css")
        },
    );
    assert_eq!((a.status, header(&a, "etag")), (304, Some(etag.as_str())));
    assert!(matches!(a.body, StaticBody::Nothing));
    let a = answer(
        &files,
        StaticRequest {
            if_modified_since: Some(date.as_bytes()),
            ..get("/static/a.css")
        },
    );
    assert_eq!(a.status, 304);
    assert_eq!(body(answer(&files, get("/static/a%20b.txt"))), "spaced");
    assert_eq!(body(answer(&files, get("/static/in.css"))), "body{}\n");
}

#[test]
fn ranges() {
    let site = Site::new();
    let files = site.files(false, false);
    let ranged = |r: &'static str| {
        answer(
            &files,
            StaticRequest {
                range: Some(r.as_bytes()),
                ..get("/static/big.txt")
            },
        )
    };
    let a = ranged("bytes=2-4");
    assert_eq!(
        (a.status, header(&a, "content-range")),
        (206, Some("bytes 2-4/10"))
    );
    assert_eq!(body(a), "234");
    assert_eq!(body(ranged("bytes=-3")), "789");
    let a = ranged("bytes=10-");
    assert_eq!(
        (a.status, header(&a, "content-range")),
        (416, Some("bytes */10"))
    );
    assert_eq!(ranged("bytes=0-1,4-5").status, 200);
    let a = answer(
        &files,
        StaticRequest {
            range: Some(b"bytes=2-4"),
            if_range: Some(b"\"stale\""),
            ..get("/static/big.txt")
        },
    );
    assert_eq!(a.status, 200);
}

#[test]
fn precompressed_siblings() {
    let site = Site::new();
    let files = site.files(false, false);
    let with = |ae: &'static str| {
        answer(
            &files,
            StaticRequest {
                accept_encoding: Some(ae.as_bytes()),
                ..get("/static/app.js")
            },
        )
    };
    let a = with("gzip, br");
    assert_eq!(header(&a, "content-encoding"), Some("br"));
    assert_eq!(header(&a, "vary"), Some("Accept-Encoding"));
    assert_eq!(
        header(&a, "content-type"),
        Some("text/javascript; charset=utf-8")
    );
    assert_eq!(body(a), "brotli");
    assert_eq!(body(with("gzip")), "gzipped");
    let a = with("identity");
    assert_eq!(
        (header(&a, "content-encoding"), header(&a, "vary")),
        (None, Some("Accept-Encoding"))
    );
    assert_eq!(body(a), "plain");
}

#[test]
fn what_is_never_served() {
    let site = Site::new();
    let files = site.files(false, false);
    for path in [
        "/static/../secret.txt",
        "/static/%2e%2e/secret.txt",
        "/static/..%2fsecret.txt",
        "/static/.env",
        "/static/out.txt",
        "/static/sub",
        "/static/sub/",
        "/static",
        "/static/missing.css",
        "/static/a%00.css",
        "/static/..%5csecret.txt",
    ] {
        let a = answer(&files, get(path));
        assert_eq!(a.status, 404, "{path}");
        assert_eq!(body(a), "Not Found\n", "{path}");
    }
    assert!(matches!(
        files.decide(&get("/staticx/a.css")),
        Decision::App
    ));
    assert!(matches!(files.decide(&get("/")), Decision::App));
    let a = answer(
        &files,
        StaticRequest {
            method: b"POST",
            ..get("/static/a.css")
        },
    );
    assert_eq!((a.status, header(&a, "allow")), (405, Some("GET, HEAD")));
}

#[test]
fn settings_that_widen_it() {
    let site = Site::new();
    let files = site.files(true, true);
    assert!(matches!(
        files.decide(&get("/static/missing.css")),
        Decision::App
    ));
    // A way out is refused even when missing files fall through.
    assert_eq!(answer(&files, get("/static/../secret.txt")).status, 404);
    assert_eq!(body(answer(&files, get("/static/out.txt"))), "outside");
    let a = answer(&files, get("/static/app.3f2a9c1b.js"));
    assert_eq!(header(&a, "cache-control"), Some(IMMUTABLE));
}

#[test]
fn a_rewritten_file_is_served_as_it_is_now() {
    let site = Site::new();
    let files = site.files(false, false);
    let before = answer(&files, get("/static/a.css"));
    let etag = header(&before, "etag").unwrap().to_owned();
    std::fs::write(site.dir.path().join("static/a.css"), "body{color:red}\n").unwrap();
    let after = answer(&files, get("/static/a.css"));
    assert_ne!(header(&after, "etag").unwrap(), etag);
    assert_eq!(body(after), "body{color:red}\n");
}

#[test]
fn symlinks_inside_are_served_whichever_way_they_point() {
    // Relative and absolute links, to a file and through a folder: the
    // fast open refuses every symlink, the canonical check lets these in.
    let site = Site::new();
    let root = site.dir.path().join("static");
    symlink("a.css", root.join("rel.css")).unwrap();
    symlink("sub", root.join("subdir")).unwrap();
    std::fs::write(root.join("sub/b.css"), "b{}").unwrap();
    symlink("../secret.txt", root.join("sub/up.txt")).unwrap();
    let files = site.files(false, false);
    assert_eq!(body(answer(&files, get("/static/rel.css"))), "body{}\n");
    assert_eq!(body(answer(&files, get("/static/in.css"))), "body{}\n");
    assert_eq!(body(answer(&files, get("/static/subdir/b.css"))), "b{}");
    // A relative link climbing out is refused as an absolute one is.
    assert_eq!(answer(&files, get("/static/sub/up.txt")).status, 404);
}

#[test]
fn a_folder_replaced_on_disk_is_served_as_it_is_now() {
    let site = Site::new();
    let files = site.files(false, false);
    let root = site.dir.path().join("static");
    assert_eq!(answer(&files, get("/static/a.css")).status, 200);
    std::fs::rename(&root, site.dir.path().join("old")).unwrap();
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("new.css"), "new{}").unwrap();
    assert_eq!(body(answer(&files, get("/static/new.css"))), "new{}");
    assert_eq!(answer(&files, get("/static/a.css")).status, 404);
}

#[test]
fn hashed_names() {
    assert!(carries_hash("app.3f2a9c1b.js"));
    assert!(carries_hash("app-3f2a9c1b8d0e.css"));
    assert!(!carries_hash("app.js"));
    assert!(!carries_hash("facadeab.js"));
    assert!(!carries_hash("background.png"));
}

#[test]
fn a_missing_folder_is_an_error() {
    let err = StaticFiles::new(
        &[("/s".into(), "/no/such/folder".into())],
        None,
        false,
        false,
        false,
    )
    .unwrap_err();
    assert!(err.contains("/no/such/folder"), "{err}");
}
