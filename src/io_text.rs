//! IO errors as sentences: Rust's `Display` of an OS error ends in
//! `(os error 111)`, which says nothing to an operator that "connection
//! refused" does not. Every message that carries an IO error's text to a log
//! line, a status page or a configuration error goes through here.

/// `text` without its ` (os error N)` parts, with a lower-case first letter
/// when it starts with a word (`Connection refused (os error 111)` ->
/// `connection refused`).
pub fn without_os_error(text: &str) -> String {
    let out = strip_os_error_numbers(text);
    let mut chars = out.chars();
    match (chars.next(), chars.next()) {
        (Some(first), Some(second))
            if first.is_ascii_uppercase() && second.is_ascii_lowercase() =>
        {
            first.to_ascii_lowercase().to_string() + &out[1..]
        }
        _ => out,
    }
}

/// `text` without its ` (os error N)` parts, nothing else changed: what the
/// diagnostic log applies to every line (src/logging.rs).
pub fn strip_os_error_numbers(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(" (os error ") {
        out.push_str(&rest[..at]);
        let after = &rest[at + " (os error ".len()..];
        match after.find(')') {
            Some(close) if after[..close].bytes().all(|b| b.is_ascii_digit()) => {
                rest = &after[close + 1..];
            }
            _ => {
                out.push_str(" (os error ");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// An IO error as a sentence: its kind's words without the OS error number.
pub fn io_error_text(e: &std::io::Error) -> String {
    without_os_error(&e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn os_error_numbers_are_dropped() {
        assert_eq!(
            without_os_error("Connection refused (os error 111)"),
            "connection refused"
        );
        assert_eq!(
            without_os_error("connect: Connection refused (os error 111); retried"),
            "connect: Connection refused; retried"
        );
        assert_eq!(
            without_os_error("\"/srv\": No such file or directory (os error 2)"),
            "\"/srv\": No such file or directory"
        );
        assert_eq!(
            without_os_error("TLS handshake failed"),
            "TLS handshake failed"
        );
        let e = std::io::Error::from_raw_os_error(111);
        assert!(
            !io_error_text(&e).contains("os error"),
            "{}",
            io_error_text(&e)
        );
    }
}
