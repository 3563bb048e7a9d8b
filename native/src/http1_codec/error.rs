//! The one error type of the HTTP/1 code: the status to answer and why.

use std::fmt;

/// A request the server must refuse. `status` is what the worker answers
/// (400, 413, 414, 431, 501, 505) before closing the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParseError {
    pub status: u16,
    pub reason: &'static str,
}

impl ParseError {
    pub const fn new(status: u16, reason: &'static str) -> Self {
        ParseError { status, reason }
    }

    pub const fn bad(reason: &'static str) -> Self {
        ParseError::new(400, reason)
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.status, self.reason)
    }
}

impl std::error::Error for ParseError {}

pub type Result<T> = std::result::Result<T, ParseError>;
