//! A WSGI request body on the engine, read before the app is called: in
//! memory while small, in an unnamed temporary file past `SPOOL_AT`. The
//! engine hands the app a body in full (it runs the app on the connection's
//! I/O thread, where `wsgi.input` cannot wait on the network), so without the
//! file an upload of any size would become that much worker memory, and a
//! large enough one would take down every request the worker was serving.
//! The file lives in `TMPDIR` (as Python's tempfile) and vanishes with its
//! last handle, even when the worker is killed.

use std::fs::File;
use std::io::{self, Write};

use bytes::{Bytes, BytesMut};

/// Bodies larger than this go to a file.
pub const SPOOL_AT: usize = 1024 * 1024;

pub enum RequestBody {
    Memory(Bytes),
    File { file: File, len: u64 },
}

impl RequestBody {
    pub fn empty() -> Self {
        RequestBody::Memory(Bytes::new())
    }
}

/// A body collected as it arrives.
#[derive(Default)]
pub struct Spool {
    memory: BytesMut,
    file: Option<File>,
    len: u64,
}

impl Spool {
    pub fn push(&mut self, data: &[u8]) -> io::Result<()> {
        self.len += data.len() as u64;
        if let Some(file) = &mut self.file {
            return file.write_all(data);
        }
        if self.memory.len() + data.len() <= SPOOL_AT {
            self.memory.extend_from_slice(data);
            return Ok(());
        }
        let mut file = tempfile::tempfile()?;
        file.write_all(&self.memory)?;
        file.write_all(data)?;
        self.memory = BytesMut::new();
        self.file = Some(file);
        Ok(())
    }

    pub fn finish(self) -> RequestBody {
        match self.file {
            Some(file) => RequestBody::File {
                file,
                len: self.len,
            },
            None => RequestBody::Memory(self.memory.freeze()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;

    #[test]
    fn small_bodies_stay_in_memory() {
        let mut spool = Spool::default();
        spool.push(b"abc").unwrap();
        spool.push(b"def").unwrap();
        assert!(matches!(spool.finish(), RequestBody::Memory(b) if &b[..] == b"abcdef"));
    }

    #[test]
    fn large_bodies_move_to_a_file_in_order() {
        let mut spool = Spool::default();
        let block = vec![7u8; SPOOL_AT / 2 + 1];
        spool.push(b"head").unwrap();
        spool.push(&block).unwrap();
        spool.push(&block).unwrap();
        spool.push(b"tail").unwrap();
        let RequestBody::File { file, len } = spool.finish() else {
            panic!("expected a file");
        };
        assert_eq!(len, 8 + 2 * block.len() as u64);
        let mut start = [0u8; 5];
        file.read_exact_at(&mut start, 0).unwrap();
        assert_eq!(&start, b"head\x07");
        let mut end = [0u8; 5];
        file.read_exact_at(&mut end, len - 5).unwrap();
        assert_eq!(&end, b"\x07tail");
    }
}
