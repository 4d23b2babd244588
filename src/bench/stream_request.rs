//! The request of a `pier bench http --h2` or `--h3` run, built once from the
//! command line: the plan holds it, and every stream of every connection sends
//! a copy. HTTP/2 and HTTP/3 carry the same fields under the same rules
//! (RFC 9113 §8.2.2, RFC 9114 §4.2), so one builder serves both clients.

use bytes::Bytes;

/// The request every stream sends: its head (cloned per request) and body.
#[derive(Debug)]
pub struct StreamRequest {
    /// Method, URI (scheme and authority become pseudo-fields) and fields.
    pub head: http::Request<()>,
    /// Sent in one DATA frame ending the stream; empty: the stream ends with
    /// the HEADERS frame.
    pub body: Bytes,
}

/// Builds the HTTP/2 or HTTP/3 request of a run: `Host` from `-H` becomes
/// the authority, field names are lower-cased, and connection-specific fields
/// are refused (RFC 9113 §8.2.2, RFC 9114 §4.2).
pub fn stream_bench_request(
    method: &str,
    scheme: &str,
    authority: &str,
    path: &str,
    headers: &[(String, String)],
    body: &[u8],
) -> Result<StreamRequest, String> {
    let authority = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("host"))
        .map_or(authority, |(_, v)| v.as_str());
    let uri = format!("{scheme}://{authority}{path}");
    let mut builder = http::Request::builder()
        .method(
            http::Method::from_bytes(method.as_bytes())
                .map_err(|_| format!("method {method:?} is not a valid token"))?,
        )
        .uri(&uri);
    for (name, value) in headers {
        let lower = name.to_ascii_lowercase();
        match lower.as_str() {
            "host" => continue,
            "connection" | "keep-alive" | "proxy-connection" | "upgrade" => {
                return Err(format!(
                    "header {name:?} is connection-specific and not allowed in HTTP/2 or HTTP/3"
                ))
            }
            "te" if !value.eq_ignore_ascii_case("trailers") => {
                return Err("HTTP/2 and HTTP/3 allow only \"TE: trailers\"".into())
            }
            _ => {}
        }
        builder = builder.header(lower, value.as_str());
    }
    if !body.is_empty() || matches!(method, "POST" | "PUT" | "PATCH") {
        builder = builder.header("content-length", body.len());
    }
    let head = builder
        .body(())
        .map_err(|e| format!("cannot build the request for {uri}: {e}"))?;
    Ok(StreamRequest {
        head,
        body: Bytes::copy_from_slice(body),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_takes_host_as_authority_and_lowercases_fields() {
        let headers = vec![
            ("Host".to_string(), "example.test".to_string()),
            ("X-Trace".to_string(), "1".to_string()),
        ];
        let r = stream_bench_request("POST", "https", "127.0.0.1:8443", "/p?q=1", &headers, b"hi")
            .unwrap();
        assert_eq!(r.head.uri().to_string(), "https://example.test/p?q=1");
        assert_eq!(r.head.headers()["x-trace"], "1");
        assert_eq!(r.head.headers()["content-length"], "2");
        assert_eq!(r.body, Bytes::from_static(b"hi"));
    }

    #[test]
    fn connection_specific_fields_are_refused() {
        for (name, value) in [("Connection", "close"), ("TE", "gzip"), ("Upgrade", "x")] {
            let headers = vec![(name.to_string(), value.to_string())];
            assert!(
                stream_bench_request("GET", "http", "a", "/", &headers, b"").is_err(),
                "{name}"
            );
        }
        let ok = vec![("TE".to_string(), "trailers".to_string())];
        assert!(stream_bench_request("GET", "http", "a", "/", &ok, b"").is_ok());
    }
}
