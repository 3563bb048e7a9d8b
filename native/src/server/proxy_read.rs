//! `--proxy-protocol`: the PROXY header a trusted peer opens with, read
//! before TLS and before the HTTP sniff (the parser is `crate::proxy`).
//!
//! Reads are ordinary reads, so they may bring bytes past the header (the
//! request, or a TLS ClientHello): those are handed back to be read first
//! (`sniff::Prefixed`), so TLS and HTTP see the connection as the client
//! sent it.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::proxy::{self, Header, Outcome};

/// The header and the bytes read after it; `None` when the peer closed, sent
/// something that is not a valid header, or took longer than `limit`.
pub async fn read_header<T>(stream: &mut T, limit: Option<Duration>) -> Option<(Header, Bytes)>
where
    T: AsyncRead + Unpin,
{
    let work = async {
        let mut buf = BytesMut::with_capacity(512);
        loop {
            match proxy::parse(&buf) {
                Outcome::Parsed(header) => {
                    let rest = buf.split_off(header.consumed).freeze();
                    return Some((header, rest));
                }
                Outcome::Invalid(_) => return None,
                // Bounded: the parser decides within V2_MAX bytes.
                Outcome::Incomplete => {}
            }
            match stream.read_buf(&mut buf).await {
                Ok(0) | Err(_) => return None,
                Ok(_) => {}
            }
        }
    };
    match limit {
        Some(limit) => tokio::time::timeout(limit, work).await.ok().flatten(),
        None => work.await,
    }
}

#[cfg(test)]
mod tests {
    use super::read_header;
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn hands_back_what_came_after_the_header() {
        let (mut client, mut server) = tokio::io::duplex(64);
        let send = tokio::spawn(async move {
            for byte in b"PROXY TCP4 192.0.2.1 192.0.2.2 1000 80\r\nGET / HTTP/1.1\r\n" {
                client.write_all(&[*byte]).await.unwrap();
            }
            client
        });
        let (header, rest) = read_header(&mut server, None).await.unwrap();
        assert_eq!(header.source, Some("192.0.2.1:1000".parse().unwrap()));
        let _client = send.await.unwrap();
        let mut more = vec![0u8; 16 - rest.len()];
        server.read_exact(&mut more).await.unwrap();
        assert_eq!([&rest[..], &more[..]].concat(), b"GET / HTTP/1.1\r\n");
    }

    #[tokio::test]
    async fn refuses_no_header_and_a_closed_peer() {
        let (mut client, mut server) = tokio::io::duplex(64);
        client.write_all(b"GET / HTTP/1.1\r\n").await.unwrap();
        assert!(read_header(&mut server, None).await.is_none());
        let (mut client, mut server) = tokio::io::duplex(64);
        client.write_all(b"PROXY TCP4").await.unwrap();
        drop(client);
        assert!(read_header(&mut server, None).await.is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_peer_runs_out_of_time() {
        let (_client, mut server) = tokio::io::duplex(64);
        assert!(read_header(&mut server, Some(Duration::from_secs(10)))
            .await
            .is_none());
    }
}
