//! Status codes: reason phrases and the short text body of a status page,
//! both generated from one table so they cannot disagree.

macro_rules! status_table {
    ($($code:literal $reason:literal),* $(,)?) => {
        /// Reason phrase for a status; empty for unknown codes (RFC 9112 allows it).
        pub fn reason_phrase(status: u16) -> &'static str {
            match status {
                $($code => $reason,)*
                _ => "",
            }
        }

        /// The body of a status page, `404 Not Found\n`, as a constant: error
        /// answers cost no formatting and no allocation. Unknown codes get the
        /// code alone.
        pub fn status_text(status: u16) -> &'static [u8] {
            match status {
                $($code => concat!(stringify!($code), " ", $reason, "\n").as_bytes(),)*
                _ => b"error\n",
            }
        }
    };
}

status_table! {
    100 "Continue",
    101 "Switching Protocols",
    103 "Early Hints",
    200 "OK",
    201 "Created",
    202 "Accepted",
    204 "No Content",
    206 "Partial Content",
    301 "Moved Permanently",
    302 "Found",
    303 "See Other",
    304 "Not Modified",
    307 "Temporary Redirect",
    308 "Permanent Redirect",
    400 "Bad Request",
    401 "Unauthorized",
    403 "Forbidden",
    404 "Not Found",
    405 "Method Not Allowed",
    406 "Not Acceptable",
    408 "Request Timeout",
    409 "Conflict",
    410 "Gone",
    411 "Length Required",
    412 "Precondition Failed",
    413 "Content Too Large",
    414 "URI Too Long",
    415 "Unsupported Media Type",
    416 "Range Not Satisfiable",
    417 "Expectation Failed",
    421 "Misdirected Request",
    425 "Too Early",
    426 "Upgrade Required",
    429 "Too Many Requests",
    431 "Request Header Fields Too Large",
    500 "Internal Server Error",
    501 "Not Implemented",
    502 "Bad Gateway",
    503 "Service Unavailable",
    504 "Gateway Timeout",
    505 "HTTP Version Not Supported",
}

/// Whether a status is an interim answer that another head follows (RFC 9110
/// §15.2); 101 is not, as the connection is no longer HTTP after it.
pub fn is_interim(status: u16) -> bool {
    (100..200).contains(&status) && status != 101
}

/// Whether a response with this status never carries a body (RFC 9110 §6.4.1),
/// so it gets no length header either.
pub fn has_no_body(status: u16) -> bool {
    status < 200 || status == 204 || status == 304
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_reason_agree() {
        assert_eq!(status_text(404), b"404 Not Found\n");
        assert_eq!(reason_phrase(413), "Content Too Large");
        assert_eq!(status_text(599), b"error\n");
        assert_eq!(reason_phrase(599), "");
        assert!(has_no_body(304) && has_no_body(101) && !has_no_body(200));
    }
}
