//! `parse_response` never panics and its spans stay inside the head.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pier::http1::{parse_response, HeaderLines, Limits, Method, Parsed, ParsedResponseHead};

fuzz_target!(|data: &[u8]| {
    let Some((&cfg, input)) = data.split_first() else {
        return;
    };
    let method = match cfg % 3 {
        0 => Method::Get,
        1 => Method::Head,
        _ => Method::Connect,
    };
    let mut head = ParsedResponseHead::new();
    if parse_response(input, &Limits::default(), method, &mut head) == Ok(Parsed::Complete) {
        assert!(head.head_len <= input.len());
        assert!(input[..head.head_len].ends_with(b"\r\n\r\n"));
        assert!((100..=999).contains(&head.status));
        for (name, value) in head.headers(input) {
            assert!(!name.is_empty());
            assert!(!value.contains(&b'\r') && !value.contains(&b'\n'));
        }
    }
});
