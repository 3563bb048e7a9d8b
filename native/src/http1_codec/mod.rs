//! Strict HTTP/1.1 message parsing and response heads, in plain Rust (no
//! Python types) so that the Python workers (through `crate::py`) and the
//! native server share one implementation of the rules.

pub mod chars;
pub mod chunked;
pub mod date;
pub mod error;
mod fields;
pub mod head;
mod limits;
pub mod response;
pub mod target;

pub use chunked::ChunkedDecoder;
pub use error::ParseError;
pub use head::{parse_request, RequestHead, Version};
pub use limits::Limits;
pub use response::{
    check_field, check_visible_field, field_kind, parse_status, reason_phrase, set_alt_svc,
    set_date_header, set_server_header, AppField, BodyFraming, ChunkSize, ResponseHead,
    ResponseHeadBuilder, INVISIBLE_VALUE,
};
pub use target::TargetForm;
