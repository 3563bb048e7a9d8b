//! The chunked decoder: no panic, and the same result whatever the split of
//! the input (the socket may cut a body anywhere): the same payload, the same
//! verdict, the same trailers and leftover bytes.
#![no_main]

use _native::http1_codec::ChunkedDecoder;
use libfuzzer_sys::fuzz_target;

const LIMIT: u64 = 4096;

fuzz_target!(|data: &[u8]| {
    let Some((&split_seed, body)) = data.split_first() else {
        return;
    };
    let whole = decode(body, &[body.len().max(1)]);
    let pieces = [
        1 + (split_seed as usize % 7),
        1 + (split_seed as usize / 7 % 13),
    ];
    let split = decode(body, &pieces);
    assert_eq!(whole, split, "split {pieces:?} changed the result");
    let one_by_one = decode(body, &[1]);
    assert_eq!(whole, one_by_one, "byte-at-a-time changed the result");
});

#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    payload: Vec<u8>,
    error: Option<u16>,
    done: bool,
    total: u64,
    trailers: Vec<(Vec<u8>, Vec<u8>)>,
    leftover: Vec<u8>,
}

/// Feeds `body` in pieces of the given sizes, cycling, until done or an error.
fn decode(body: &[u8], pieces: &[usize]) -> Outcome {
    let mut decoder = ChunkedDecoder::new(LIMIT);
    let mut payload = Vec::new();
    let mut error = None;
    let mut at = 0;
    let mut i = 0;
    while at < body.len() && !decoder.done() {
        let end = (at + pieces[i % pieces.len()]).min(body.len());
        i += 1;
        if let Err(e) = decoder.feed(&body[at..end], &mut payload) {
            error = Some(e.status);
            break;
        }
        at = end;
    }
    if error.is_none() {
        assert!(decoder.total() <= LIMIT, "the body limit was passed");
    }
    assert!(payload.len() as u64 <= decoder.total());
    if decoder.done() {
        assert_eq!(payload.len() as u64, decoder.total());
    }
    let mut leftover = decoder.leftover().to_vec();
    if error.is_none() && decoder.done() {
        // What the decoder kept after the body, then what it was not fed.
        leftover.extend_from_slice(&body[at..]);
    }
    Outcome {
        payload,
        error,
        done: decoder.done(),
        total: decoder.total(),
        trailers: decoder.trailers().to_vec(),
        leftover,
    }
}
