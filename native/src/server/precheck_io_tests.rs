use super::*;

fn conn() -> Arc<ConnInfo> {
    Arc::new(ConnInfo::new(String::new(), String::new(), "http"))
}
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Everything hyper would read from `input`, and what is written at shutdown.
async fn through(input: &[u8]) -> (Vec<u8>, Vec<u8>) {
    through_on(conn(), input).await
}

async fn through_on(conn: Arc<ConnInfo>, input: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let (client, server) = tokio::io::duplex(64 * 1024);
    let (mut client_read, mut client_write) = tokio::io::split(client);
    client_write.write_all(input).await.unwrap();
    client_write.shutdown().await.unwrap();
    let mut io = PrecheckIo::new(server, conn, Limits::default(), None, true);
    let mut seen = Vec::new();
    io.read_to_end(&mut seen).await.unwrap();
    io.shutdown().await.unwrap();
    drop(io);
    let mut answer = Vec::new();
    client_read.read_to_end(&mut answer).await.unwrap();
    (seen, answer)
}

#[tokio::test]
async fn good_requests_pass_whole() {
    let input = b"GET / HTTP/1.1\r\nHost: a\r\n\r\nPOST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhelloGET /y HTTP/1.1\r\nHost: a\r\n\r\n";
    let (seen, answer) = through(input).await;
    assert_eq!(seen, input);
    assert!(answer.is_empty());
}

#[tokio::test]
async fn chunked_body_is_followed_to_the_next_head() {
    let input = b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\nGET /next HTTP/1.1\r\nHost: a\r\n\r\n";
    let (seen, _) = through(input).await;
    assert_eq!(seen, input);
}

#[tokio::test]
async fn a_refused_head_stops_the_stream_and_is_answered_at_shutdown() {
    let good = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n";
    let mut input = good.to_vec();
    input.extend_from_slice(b"GET /bad HTTP/1.1\nHost: a\n\n");
    let (seen, answer) = through(&input).await;
    assert_eq!(seen, good);
    assert!(
        answer.starts_with(b"HTTP/1.1 400 Bad Request\r\n"),
        "{answer:?}"
    );
    assert!(answer.windows(17).any(|w| w == b"Connection: close"));
}

#[tokio::test]
async fn content_length_next_to_chunked_is_refused() {
    let input = b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
    let (seen, answer) = through(input).await;
    assert!(seen.is_empty());
    assert!(answer.starts_with(b"HTTP/1.1 400 "), "{answer:?}");
}

#[tokio::test]
async fn a_bad_chunk_cuts_the_body_and_nothing_after_it_is_read() {
    let head = b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
    let mut input = head.to_vec();
    input.extend_from_slice(b"5 \r\nhello\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: a\r\n\r\n");
    let (seen, answer) = through(&input).await;
    assert_eq!(seen, head);
    assert!(answer.is_empty());
}

#[tokio::test]
async fn an_endless_request_line_is_414_before_its_end() {
    let mut input = b"GET /".to_vec();
    input.extend(std::iter::repeat_n(b'a', 10_000));
    let (seen, answer) = through(&input).await;
    assert!(seen.is_empty());
    assert!(answer.starts_with(b"HTTP/1.1 414 "), "{answer:?}");
}

#[tokio::test]
async fn what_follows_an_upgrade_passes_unchecked() {
    let upgrade = b"GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n\x81\x85frame";
    let conn = conn();
    conn.upgrade.settle(1, true);
    assert_eq!(through_on(conn, upgrade).await.0, upgrade);
}

#[tokio::test]
async fn what_follows_a_declined_upgrade_is_checked() {
    let head = b"GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n";
    let mut input = head.to_vec();
    input.extend_from_slice(b"\x81\x85frame");
    let conn = conn();
    conn.upgrade.settle(1, false);
    let (seen, answer) = through_on(conn, &input).await;
    assert_eq!(seen, head);
    assert!(answer.starts_with(b"HTTP/1.1 400 "), "{answer:?}");
}

#[tokio::test]
async fn what_follows_an_upgrade_request_waits_for_the_answer() {
    let head = b"GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n";
    let (client, server) = tokio::io::duplex(1024);
    let (_client_read, mut client_write) = tokio::io::split(client);
    client_write.write_all(head).await.unwrap();
    client_write.write_all(b"more").await.unwrap();
    let conn = conn();
    let mut io = PrecheckIo::new(server, conn.clone(), Limits::default(), None, true);
    let mut seen = vec![0; head.len()];
    io.read_exact(&mut seen).await.unwrap();
    let mut next = [0u8; 4];
    let waiting = tokio::time::timeout(Duration::from_millis(50), io.read(&mut next)).await;
    assert!(
        waiting.is_err(),
        "bytes passed before the outcome was known"
    );
    conn.upgrade.settle(1, true);
    io.read_exact(&mut next).await.unwrap();
    assert_eq!(&next, b"more");
}

#[tokio::test]
async fn an_unfinished_head_at_the_end_is_dropped() {
    let input = b"GET / HTTP/1.1\r\nHost: a\r\n\r\nGET /half HTTP/1.1\r\nHo";
    let (seen, answer) = through(input).await;
    assert_eq!(seen, b"GET / HTTP/1.1\r\nHost: a\r\n\r\n");
    assert!(answer.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_head_not_done_in_time_is_408() {
    let (client, server) = tokio::io::duplex(1024);
    let (mut client_read, mut client_write) = tokio::io::split(client);
    client_write
        .write_all(b"GET / HTTP/1.1\r\nHo")
        .await
        .unwrap();
    let mut io = PrecheckIo::new(
        server,
        conn(),
        Limits::default(),
        Some(Duration::from_secs(5)),
        true,
    );
    let mut seen = Vec::new();
    io.read_to_end(&mut seen).await.unwrap();
    io.shutdown().await.unwrap();
    drop(io);
    let mut answer = Vec::new();
    client_read.read_to_end(&mut answer).await.unwrap();
    assert!(seen.is_empty());
    assert!(answer.starts_with(b"HTTP/1.1 408 "), "{answer:?}");
    drop(client_write);
}
