//! Precompressed siblings (`app.js.br`, `.zst`, `.gz`, made at build time
//! as nginx's `gzip_static` and WhiteNoise expect them), chosen by the
//! request's `Accept-Encoding` (RFC 9110 12.5.3).

/// The codings a sibling may have, in the order they are preferred: the
/// smallest first.
pub const CODINGS: [(&str, &str); 3] = [("br", ".br"), ("zstd", ".zst"), ("gzip", ".gz")];

/// Whether `header` accepts `coding` (a q of 0 refuses it; `*` stands for
/// any coding not named).
pub fn accepts(header: Option<&[u8]>, coding: &str) -> bool {
    let Some(text) = header.and_then(|h| std::str::from_utf8(h).ok()) else {
        return false;
    };
    let mut star = None;
    for item in text.split(',') {
        let mut parts = item.split(';');
        let name = parts.next().unwrap_or("").trim();
        let q = parts
            .filter_map(|p| p.trim().strip_prefix("q=").or(p.trim().strip_prefix("Q=")))
            .next()
            .map_or(1.0, |q| q.trim().parse::<f32>().unwrap_or(0.0));
        if name.eq_ignore_ascii_case(coding)
            || (coding == "gzip" && name.eq_ignore_ascii_case("x-gzip"))
        {
            return q > 0.0;
        }
        if name == "*" {
            star = Some(q > 0.0);
        }
    }
    star.unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::accepts;

    fn a(h: &str, c: &str) -> bool {
        accepts(Some(h.as_bytes()), c)
    }

    #[test]
    fn q_values() {
        assert!(a("gzip, deflate, br", "br"));
        assert!(a("gzip, deflate, br", "gzip"));
        assert!(!a("gzip, deflate, br", "zstd"));
        assert!(!a("br;q=0, gzip", "br"));
        assert!(a("br;q=0.5", "br"));
        assert!(a("*", "zstd"));
        assert!(!a("*;q=0", "gzip"));
        assert!(!a("gzip;q=0, *", "gzip"));
        assert!(a("x-gzip", "gzip"));
        assert!(!a("identity", "gzip"));
        assert!(!accepts(None, "gzip"));
    }
}
