//! `Content-Type` from a file's extension. A table of our own, as nginx's
//! `mime.types`: the types a web app serves are few, and the text types carry
//! `charset=utf-8` here (a browser guessing the charset of a script is how
//! mojibake and some XSS start).

/// The type for `name` (the file name, not the path); unknown extensions and
/// names without one are `application/octet-stream`, which browsers download
/// instead of rendering.
pub fn content_type(name: &str) -> &'static str {
    let Some((_, ext)) = name.rsplit_once('.') else {
        return OCTET_STREAM;
    };
    let ext = ext.to_ascii_lowercase();
    TYPES
        .iter()
        .find(|(e, _)| *e == ext)
        .map_or(OCTET_STREAM, |(_, t)| t)
}

const OCTET_STREAM: &str = "application/octet-stream";

const TYPES: &[(&str, &str)] = &[
    ("html", "text/html; charset=utf-8"),
    ("htm", "text/html; charset=utf-8"),
    ("css", "text/css; charset=utf-8"),
    ("js", "text/javascript; charset=utf-8"),
    ("mjs", "text/javascript; charset=utf-8"),
    ("json", "application/json"),
    ("map", "application/json"),
    ("webmanifest", "application/manifest+json"),
    ("txt", "text/plain; charset=utf-8"),
    ("md", "text/markdown; charset=utf-8"),
    ("csv", "text/csv; charset=utf-8"),
    ("xml", "application/xml"),
    ("svg", "image/svg+xml; charset=utf-8"),
    ("png", "image/png"),
    ("jpg", "image/jpeg"),
    ("jpeg", "image/jpeg"),
    ("gif", "image/gif"),
    ("webp", "image/webp"),
    ("avif", "image/avif"),
    ("ico", "image/vnd.microsoft.icon"),
    ("bmp", "image/bmp"),
    ("woff", "font/woff"),
    ("woff2", "font/woff2"),
    ("ttf", "font/ttf"),
    ("otf", "font/otf"),
    ("eot", "application/vnd.ms-fontobject"),
    ("wasm", "application/wasm"),
    ("pdf", "application/pdf"),
    ("zip", "application/zip"),
    ("gz", "application/gzip"),
    ("tar", "application/x-tar"),
    ("mp4", "video/mp4"),
    ("webm", "video/webm"),
    ("ogv", "video/ogg"),
    ("mp3", "audio/mpeg"),
    ("ogg", "audio/ogg"),
    ("oga", "audio/ogg"),
    ("wav", "audio/wav"),
    ("flac", "audio/flac"),
    ("m4a", "audio/mp4"),
    ("vtt", "text/vtt; charset=utf-8"),
    ("ics", "text/calendar; charset=utf-8"),
];

#[cfg(test)]
mod tests {
    use super::content_type;

    #[test]
    fn by_extension() {
        assert_eq!(content_type("a.css"), "text/css; charset=utf-8");
        assert_eq!(content_type("A.PNG"), "image/png");
        assert_eq!(
            content_type("app.3f2a9c1b.js"),
            "text/javascript; charset=utf-8"
        );
        assert_eq!(content_type("font.woff2"), "font/woff2");
        assert_eq!(content_type("README"), "application/octet-stream");
        assert_eq!(content_type("x.unknown"), "application/octet-stream");
    }
}
