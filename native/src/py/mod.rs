//! The Python face of `http1_codec`, `access_log`, `proxy`, `relay`, `static_files` and `x509_name`: thin conversions, nothing decided here.

pub(crate) mod access_format;
mod access_head;
mod access_view;
pub(crate) mod asgi_scope;
pub(crate) mod awaitable;
pub(crate) mod body_bytes;
pub(crate) mod chunked;
pub(crate) mod environ;
mod errors;
pub(crate) mod file_wrapper;
pub(crate) mod message_keys;
mod proxy;
mod relay;
pub(crate) mod repeats;
pub(crate) mod request;
pub(crate) mod request_counts;
pub(crate) mod response;
mod static_files;
pub(crate) mod text;
mod wsgi_response;

use pyo3::prelude::*;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let parse_error = py.get_type::<errors::ParseError>();
    // Defaults for instances built from Python (tests, worker code).
    parse_error.setattr("status", 400)?;
    parse_error.setattr("reason", "Bad Request")?;
    m.add("ParseError", parse_error)?;
    m.add_class::<request::RequestParser>()?;
    m.add_class::<request::Request>()?;
    m.add_class::<repeats::EnvironRepeats>()?;
    m.add_class::<chunked::ChunkedDecoder>()?;
    m.add_function(wrap_pyfunction!(response::asgi_response_head, m)?)?;
    m.add_function(wrap_pyfunction!(response::set_date_header, m)?)?;
    m.add_function(wrap_pyfunction!(response::set_server_header, m)?)?;
    m.add_class::<wsgi_response::WsgiResponse>()?;
    m.add_class::<file_wrapper::FileWrapper>()?;
    m.add_class::<request_counts::RequestCounts>()?;
    m.add_class::<access_format::AccessFormat>()?;
    m.add_class::<access_format::AccessLog>()?;
    m.add("ProxyHeaderError", py.get_type::<proxy::ProxyHeaderError>())?;
    m.add_class::<proxy::ProxyHeader>()?;
    m.add_function(wrap_pyfunction!(proxy::parse_proxy_header, m)?)?;
    m.add_class::<relay::Relay>()?;
    m.add_class::<static_files::StaticFiles>()?;
    m.add_function(wrap_pyfunction!(certificate_subject, m)?)?;
    Ok(())
}

/// A DER certificate's subject as RFC 4514 text (ASGI's `client_cert_name`
/// in the asgi worker); `None` when it cannot be read.
#[pyfunction]
fn certificate_subject(der: &[u8]) -> Option<String> {
    crate::x509_name::subject_text(der)
}
