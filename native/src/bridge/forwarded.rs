//! Proxy headers (`forwarded_allow_ips`) for the rsgi worker: the rules are
//! the other workers' own (`supervise/http/proxy.py`, `ProxyRules`), called
//! once for a request that carries one of the headers, on the loop's thread
//! while its scope is made. A request without them (the common case when no
//! proxy is in front) costs a few header-map lookups and no Python call.

use hyper::header::HeaderName;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::server::FieldsOf;

pub struct Forwarded {
    /// Every header the rules may read, lower-case.
    names: Vec<HeaderName>,
    /// `resolve(peer, found) -> (client | None, scheme | None)`; raises
    /// ValueError (ContradictoryScheme) for headers that contradict each other.
    resolve: Py<PyAny>,
}

/// What a trusted proxy's headers changed; `None` where they said nothing.
#[derive(Debug, Default)]
pub struct Proxied {
    pub client: Option<String>,
    pub scheme: Option<String>,
}

impl Forwarded {
    pub fn new(names: Vec<String>, resolve: Py<PyAny>) -> PyResult<Self> {
        let names = names
            .iter()
            .map(|n| HeaderName::from_bytes(n.as_bytes()))
            .collect::<Result<_, _>>()
            .map_err(|_| pyo3::exceptions::PyValueError::new_err("invalid proxy header name"))?;
        Ok(Forwarded { names, resolve })
    }

    /// The client and scheme the headers give, for the peer `client`
    /// ("addr:port", "" on a unix socket). An Err is a 400 for the request.
    pub fn apply(&self, py: Python<'_>, headers: FieldsOf<'_>, client: &str) -> PyResult<Proxied> {
        let found = found(&self.names, headers);
        if found.is_empty() {
            return Ok(Proxied::default());
        }
        let dict = PyDict::new(py);
        for (name, value) in found {
            dict.set_item(name, value)?;
        }
        let (client, scheme) = self
            .resolve
            .call1(py, (client, dict))?
            .extract::<(Option<String>, Option<String>)>(py)?;
        Ok(Proxied { client, scheme })
    }
}

/// The proxy headers present, each with its fields joined by ","; latin-1,
/// as the ASGI worker decodes them. One pass over the request's fields:
/// most requests carry none of the names, and a length differs at once
/// (a lookup per name hashed each, or scanned the fields each time).
fn found<'a>(names: &'a [HeaderName], headers: FieldsOf<'_>) -> Vec<(&'a str, String)> {
    let mut out: Vec<(&'a str, String)> = Vec::new();
    for (name, value) in headers.iter() {
        let Some(wanted) = names.iter().find(|n| n.as_str().as_bytes() == name) else {
            continue;
        };
        let text = value.iter().map(|&b| b as char);
        match out.iter_mut().find(|(n, _)| *n == wanted.as_str()) {
            Some((_, joined)) => {
                joined.push(',');
                joined.extend(text);
            }
            None => out.push((wanted.as_str(), text.collect())),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;
    use hyper::HeaderMap;

    fn names() -> Vec<HeaderName> {
        ["x-forwarded-for", "x-forwarded-proto"]
            .iter()
            .map(|n| HeaderName::from_static(n))
            .collect()
    }

    #[test]
    fn none_without_the_headers() {
        let mut headers = HeaderMap::new();
        headers.insert("host", HeaderValue::from_static("a"));
        let names = names();
        assert!(found(&names, FieldsOf::Map(&headers)).is_empty());
    }

    #[test]
    fn repeated_fields_are_joined_in_order() {
        let mut headers = HeaderMap::new();
        headers.append("x-forwarded-for", HeaderValue::from_static("1.2.3.4"));
        headers.append("x-forwarded-for", HeaderValue::from_static("5.6.7.8"));
        headers.insert("x-forwarded-proto", HeaderValue::from_static("https"));
        let names = names();
        assert_eq!(
            found(&names, FieldsOf::Map(&headers)),
            vec![
                ("x-forwarded-for", "1.2.3.4,5.6.7.8".to_string()),
                ("x-forwarded-proto", "https".to_string())
            ]
        );
    }

    #[test]
    fn a_parsed_head_is_read_in_one_pass() {
        let raw = b"GET / HTTP/1.1\r\nX-Forwarded-For: 1.2.3.4\r\nHost: a\r\n\
            x-forwarded-proto: https\r\nx-forwarded-for: 5.6.7.8\r\n\r\n";
        let limits = crate::http1_codec::Limits::default();
        let (head, _) = crate::http1_codec::parse_request(raw, &limits)
            .unwrap()
            .unwrap();
        let names = names();
        assert_eq!(
            found(&names, FieldsOf::Wire(&head)),
            vec![
                ("x-forwarded-for", "1.2.3.4,5.6.7.8".to_string()),
                ("x-forwarded-proto", "https".to_string())
            ]
        );
    }
}
