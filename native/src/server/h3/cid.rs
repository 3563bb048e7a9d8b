//! Connection IDs that name the socket they must come back to.
//!
//! Every worker reads its own UDP socket of the arbiter's SO_REUSEPORT group;
//! the kernel picks the socket for each datagram by running the arbiter's
//! classic BPF program (supervise/quic_routing.py) on the QUIC header. Our
//! CIDs start with the worker's socket index and a fixed 56-bit mark the
//! program looks for: a packet carrying one goes to that socket, whatever
//! the client's address (migration, NAT rebinding) and whichever generation
//! of workers now takes new connections. The other 8 bytes are random, so
//! the CIDs of one connection still cannot be linked by an observer beyond
//! "the same server, the same worker slot".

use quinn::ConnectionId;
use quinn::ConnectionIdGenerator;

/// 16 bytes: u32 (index << 24 | MAGIC24), u32 MAGIC32, 8 random bytes.
pub const CID_LEN: usize = 16;
const MAGIC24: u32 = 0x5E7AC1;
const MAGIC32: u32 = 0x9D3B46E2;

pub struct RoutedCids {
    prefix: [u8; 8],
}

impl RoutedCids {
    pub fn new(index: u8) -> Self {
        let mut prefix = [0u8; 8];
        prefix[..4].copy_from_slice(&((u32::from(index) << 24) | MAGIC24).to_be_bytes());
        prefix[4..].copy_from_slice(&MAGIC32.to_be_bytes());
        RoutedCids { prefix }
    }
}

impl ConnectionIdGenerator for RoutedCids {
    fn generate_cid(&mut self) -> ConnectionId {
        let mut cid = [0u8; CID_LEN];
        cid[..8].copy_from_slice(&self.prefix);
        let random: [u8; 8] = rand_bytes();
        cid[8..].copy_from_slice(&random);
        ConnectionId::new(&cid)
    }

    fn cid_len(&self) -> usize {
        CID_LEN
    }

    fn cid_lifetime(&self) -> Option<std::time::Duration> {
        None
    }
}

/// Eight bytes from the system's CSPRNG (getrandom(2)): a CID must not be
/// guessable (RFC 9000 5.1), and ring is already linked for TLS.
fn rand_bytes() -> [u8; 8] {
    use rustls::crypto::ring::default_provider;
    let mut out = [0u8; 8];
    if default_provider().secure_random.fill(&mut out).is_err() {
        // Never seen: getrandom does not fail once the kernel has seeded it.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        out = nanos.to_ne_bytes();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_index_and_the_mark_lead_every_cid() {
        let mut cids = RoutedCids::new(7);
        let a = cids.generate_cid();
        let b = cids.generate_cid();
        assert_eq!(a.len(), CID_LEN);
        assert_eq!(&a[..8], &[0x07, 0x5E, 0x7A, 0xC1, 0x9D, 0x3B, 0x46, 0xE2]);
        assert_eq!(&a[..8], &b[..8]);
        assert_ne!(&a[8..], &b[8..]);
    }
}
