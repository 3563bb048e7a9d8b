//! Static files (`--static-map`): whatever the request path, a file that is
//! served lies inside the folder, is no dotfile and no file in a dot-folder,
//! and is never the secret next to the folder or the target of the symlink
//! that leads out. The tree is made once per process: a folder with files,
//! a sub-folder, a dotfile, a dot-folder, a symlink inside and one out.
#![no_main]

use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::OnceLock;

use _native::static_files::{Decision, StaticBody, StaticFiles, StaticRequest};
use libfuzzer_sys::fuzz_target;

struct Tree {
    root: PathBuf,
    files: StaticFiles,
}

fn tree() -> &'static Tree {
    static TREE: OnceLock<Tree> = OnceLock::new();
    TREE.get_or_init(|| {
        let base = std::env::temp_dir().join(format!("static-fuzz-{}", std::process::id()));
        let root = base.join("static");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::write(root.join("a.css"), "a").unwrap();
        std::fs::write(root.join("a.css.gz"), "gz").unwrap();
        std::fs::write(root.join("sub/b.txt"), "b").unwrap();
        std::fs::write(root.join(".env"), "dot").unwrap();
        std::fs::write(root.join(".git/config"), "dot").unwrap();
        std::fs::write(base.join("secret.txt"), "secret").unwrap();
        let _ = std::os::unix::fs::symlink(base.join("secret.txt"), root.join("out.txt"));
        let _ = std::os::unix::fs::symlink(root.join("a.css"), root.join("in.css"));
        let files = StaticFiles::new(&[("/s".into(), root.clone())], None, true, false, false)
            .unwrap();
        Tree {
            root: std::fs::canonicalize(root).unwrap(),
            files,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let tree = tree();
    let mut path = b"/s/".to_vec();
    path.extend_from_slice(data);
    let split = data.iter().position(|&b| b == b'\n').unwrap_or(data.len());
    let req = StaticRequest {
        method: b"GET",
        raw_path: &path[..3 + split],
        accept_encoding: Some(b"gzip, br"),
        range: data.get(split + 1..),
        ..Default::default()
    };
    let Decision::Answer(answer) = tree.files.decide(&req) else {
        return;
    };
    if let StaticBody::File { file, offset, len } = &answer.body {
        let served = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).unwrap();
        assert!(served.starts_with(&tree.root), "served {served:?} for {req:?}");
        let inside = served.strip_prefix(&tree.root).unwrap();
        assert!(
            !inside
                .components()
                .any(|c| c.as_os_str().to_string_lossy().starts_with('.')),
            "served a dotfile {served:?}"
        );
        let size = file.metadata().unwrap().len();
        assert!(offset + len <= size, "range {offset}+{len} past {size}");
    }
});
