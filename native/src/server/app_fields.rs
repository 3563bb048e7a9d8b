//! An application's response fields in hyper's header map, for every
//! interface answering through hyper (WSGI over HTTP/2, ASGI): framing and
//! connection fields are hyper's own, except that `Connection: close` from the
//! app is honoured. The fields were checked by `h1::check_field` already; an
//! Error is what the caller raises in the app.

use hyper::header::{HeaderName, HeaderValue};
use hyper::HeaderMap;

use crate::http1_codec::AppField;

pub fn header_map<'a>(
    code: u16,
    fields: impl Iterator<Item = (&'a [u8], &'a [u8], AppField)>,
) -> Result<HeaderMap, String> {
    let mut map = HeaderMap::new();
    let mut seen_length = false;
    for (name, value, kind) in fields {
        match kind {
            AppField::ContentLength(_) => {
                if seen_length || (100..200).contains(&code) || code == 204 {
                    continue; // once; never on 1xx/204 (RFC 9110 8.6)
                }
                seen_length = true;
            }
            AppField::HopByHop => continue,
            AppField::Connection { close } => {
                if close {
                    map.append(hyper::header::CONNECTION, HeaderValue::from_static("close"));
                }
                continue;
            }
            AppField::Date | AppField::Server | AppField::Other => {}
        }
        let invalid = |e: &str| format!("{e}: {:?}", String::from_utf8_lossy(name));
        let name = HeaderName::from_bytes(name).map_err(|_| invalid("invalid header name"))?;
        let value = HeaderValue::from_bytes(value).map_err(|_| invalid("invalid header value"))?;
        map.append(name, value);
    }
    Ok(map)
}
