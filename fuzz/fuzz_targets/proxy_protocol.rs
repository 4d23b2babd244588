//! `proxy_protocol::parse_proxy_header` never panics, consumes no more than it was given,
//! and whatever it accepts re-encodes to a header that parses the same way.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pier::proxy_protocol::{encode_v1, encode_v2, parse_proxy_header, ProxyParsed, V2_MAX};

fuzz_target!(|data: &[u8]| {
    if let Ok(ProxyParsed::Complete(h, n)) = parse_proxy_header(data) {
        assert!(n <= data.len() && n <= V2_MAX);
        if let (Some(src), Some(dst)) = (h.source, h.destination) {
            let mut out = Vec::new();
            encode_v2(&mut out, src, dst, h.alpn.as_deref(), h.authority.as_deref());
            match parse_proxy_header(&out) {
                Ok(ProxyParsed::Complete(again, m)) => {
                    assert_eq!(m, out.len());
                    assert_eq!(again.source.map(|a| a.port()), Some(src.port()));
                }
                other => panic!("re-encoded v2 does not parse: {other:?}"),
            }
            out.clear();
            encode_v1(&mut out, src, dst);
            assert!(matches!(parse_proxy_header(&out), Ok(ProxyParsed::Complete(_, _))));
        }
    }
});
