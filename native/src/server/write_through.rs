//! The read-side wrappers of a connection (`Counted`, `Prefixed`, `PrecheckIo`)
//! pass writes (and files, `SendFile`) straight to the stream they wrap:
//! these are those methods, written once. Each wrapper has a field `inner` and writes its own
//! `poll_shutdown` (`PrecheckIo` has something to say before it).

/// `poll_write`, `poll_write_vectored`, `is_write_vectored` and `poll_flush`
/// to `self.inner`, inside an `impl AsyncWrite` block.
macro_rules! write_through {
    () => {
        fn poll_write(
            self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
            buf: &[u8],
        ) -> std::task::Poll<std::io::Result<usize>> {
            std::pin::Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
        }

        fn poll_write_vectored(
            self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
            bufs: &[std::io::IoSlice<'_>],
        ) -> std::task::Poll<std::io::Result<usize>> {
            std::pin::Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
        }

        fn is_write_vectored(&self) -> bool {
            self.inner.is_write_vectored()
        }

        fn poll_flush(
            self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::pin::Pin::new(&mut self.get_mut().inner).poll_flush(cx)
        }
    };
}

/// `SendFile`'s methods to `self.inner`, inside an `impl SendFile` block.
macro_rules! send_file_through {
    () => {
        fn sends_files(&self) -> bool {
            self.inner.sends_files()
        }

        fn poll_send_file(
            self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
            file: std::os::fd::BorrowedFd<'_>,
            len: usize,
        ) -> std::task::Poll<std::io::Result<usize>> {
            std::pin::Pin::new(&mut self.get_mut().inner).poll_send_file(cx, file, len)
        }

        fn poll_send_more(
            self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
            buf: &[u8],
        ) -> std::task::Poll<std::io::Result<usize>> {
            std::pin::Pin::new(&mut self.get_mut().inner).poll_send_more(cx, buf)
        }
    };
}
