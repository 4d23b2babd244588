//! Why a request head is refused: each reason maps to one status, and the
//! connection closes after it because the framing of what follows is unknown.

/// Why a request head was refused; each maps to one status, after which the
/// connection must be closed.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{} ({})", self.reason(), self.status())]
pub enum RequestError {
    /// More than `MAX_LEADING_EMPTY_LINES` empty lines before the request line.
    TooManyEmptyLines,
    /// A line ends in bare LF, or a CR is not followed by LF.
    BadLineEnding,
    /// Method, spacing or target syntax of the request line is wrong.
    InvalidRequestLine,
    /// Target has a form the method does not allow, or bad bytes.
    InvalidTarget,
    /// Version is not `HTTP/<digit>.<digit>`.
    InvalidVersion,
    /// Well-formed version other than 1.0 and 1.1 (505).
    VersionNotSupported,
    /// Field name is empty, has a non-token byte, is followed by whitespace
    /// before the colon, or the line is an obs-fold continuation.
    InvalidHeaderName,
    /// Field value has a control character other than HTAB.
    InvalidHeaderValue,
    /// HTTP/1.1 request without Host.
    MissingHost,
    /// More than one Host line.
    DuplicateHost,
    /// Host (or target authority) is not `host[:port]`, or carries userinfo.
    InvalidHost,
    /// Content-Length is not a single decimal number that fits in u64.
    InvalidContentLength,
    /// Content-Length appears on more than one line.
    DuplicateContentLength,
    /// Both Content-Length and Transfer-Encoding: the classic smuggling vector.
    ContentLengthWithTransferEncoding,
    /// Transfer-Encoding in an HTTP/1.0 request, which cannot carry it.
    TransferEncodingInHttp10,
    /// Transfer-Encoding that is empty, malformed, does not end in `chunked`,
    /// or applies `chunked` twice: the body length cannot be known.
    BadTransferEncoding,
    /// Transfer-Encoding ending in `chunked` but with other codings we do not decode (501).
    UnsupportedTransferCoding,
    /// Head larger than `Limits::max_head_bytes` (431).
    HeadTooLarge,
    /// More header lines than `Limits::max_headers` (431).
    TooManyHeaders,
    /// Request target longer than `Limits::max_uri_bytes` (414).
    UriTooLong,
}

impl RequestError {
    /// Status code to answer with before closing.
    pub fn status(&self) -> u16 {
        match self {
            RequestError::VersionNotSupported => 505,
            RequestError::UnsupportedTransferCoding => 501,
            RequestError::HeadTooLarge | RequestError::TooManyHeaders => 431,
            RequestError::UriTooLong => 414,
            _ => 400,
        }
    }

    /// Short cause for logs (the status line's reason phrase comes from
    /// `reason_phrase`).
    pub fn reason(&self) -> &'static str {
        match self {
            RequestError::TooManyEmptyLines => "too many empty lines before request line",
            RequestError::BadLineEnding => "line not terminated by CRLF",
            RequestError::InvalidRequestLine => "malformed request line",
            RequestError::InvalidTarget => "invalid request target",
            RequestError::InvalidVersion => "malformed HTTP version",
            RequestError::VersionNotSupported => "HTTP version not supported",
            RequestError::InvalidHeaderName => "invalid header field name or obs-fold",
            RequestError::InvalidHeaderValue => "invalid byte in header field value",
            RequestError::MissingHost => "HTTP/1.1 request without Host",
            RequestError::DuplicateHost => "more than one Host",
            RequestError::InvalidHost => "invalid Host",
            RequestError::InvalidContentLength => "invalid Content-Length",
            RequestError::DuplicateContentLength => "more than one Content-Length",
            RequestError::ContentLengthWithTransferEncoding => {
                "both Content-Length and Transfer-Encoding"
            }
            RequestError::TransferEncodingInHttp10 => "Transfer-Encoding in HTTP/1.0 request",
            RequestError::BadTransferEncoding => "Transfer-Encoding not ending in single chunked",
            RequestError::UnsupportedTransferCoding => "unsupported transfer coding",
            RequestError::HeadTooLarge => "request head too large",
            RequestError::TooManyHeaders => "too many header fields",
            RequestError::UriTooLong => "request target too long",
        }
    }
}
