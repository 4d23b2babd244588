//! `parse_request` never panics, spans stay inside the head, and feeding the
//! input in pieces to one reused head agrees with a one-shot parse.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pier::http1::{
    parse_request, BodyDecoder, HeaderLines, Limits, Parsed, RequestError, RequestHead,
};

fuzz_target!(|data: &[u8]| {
    let Some((&cfg, input)) = data.split_first() else {
        return;
    };
    // Small limits half the time, so the 414/431 paths get exercised too.
    let limits = if cfg & 1 == 0 {
        Limits::default()
    } else {
        Limits {
            max_head_bytes: 300,
            max_headers: 4,
            max_uri_bytes: 40,
        }
    };

    let mut head = RequestHead::new();
    let whole = parse_request(input, &limits, &mut head);
    if whole == Ok(Parsed::Complete) {
        check_complete(&head, input);
    }

    // Trickle the same bytes in steps of 1..=128 through one reused head.
    let step = usize::from(cfg >> 1) + 1;
    let mut inc = RequestHead::new();
    let mut end = 0;
    let got = loop {
        end = (end + step).min(input.len());
        let got = parse_request(&input[..end], &limits, &mut inc);
        if got != Ok(Parsed::Partial) || end == input.len() {
            break got;
        }
    };
    let mut fresh = RequestHead::new();
    let oneshot = parse_request(&input[..end], &limits, &mut fresh);
    match got {
        Ok(Parsed::Complete) => {
            assert_eq!(oneshot, Ok(Parsed::Complete));
            assert_eq!(inc.head_len, fresh.head_len);
            assert_eq!(inc.body, fresh.body);
            assert_eq!(inc.target(input), fresh.target(input));
            assert_eq!(inc.host(input), fresh.host(input));
            check_complete(&inc, input);
        }
        // The head was not complete in these bytes, or was refused later than
        // a one-shot parse would refuse it; it must never have been complete.
        Ok(Parsed::Partial) => assert_ne!(oneshot, Ok(Parsed::Complete)),
        // While trickling, bytes are tokenized only once they could end the
        // head, so a size limit may be hit before a syntax error is seen; the
        // one-shot parse must still refuse, possibly for that syntax error.
        Err(e @ (RequestError::UriTooLong | RequestError::HeadTooLarge)) => {
            assert!(oneshot.is_err(), "{e:?} but one-shot {oneshot:?}")
        }
        Err(e) => assert_eq!(oneshot, Err(e)),
    }
});

fn check_complete(head: &RequestHead, input: &[u8]) {
    assert!(head.head_len <= input.len());
    let in_head = |part: &[u8]| {
        let start = (part.as_ptr() as usize).wrapping_sub(input.as_ptr() as usize);
        part.is_empty() || start + part.len() <= head.head_len
    };
    assert!(in_head(head.method_token(input)));
    assert!(in_head(head.target(input)));
    assert!(!head.target(input).is_empty());
    let path = head.path(input);
    assert!(path == b"/" || in_head(path));
    if let Some(q) = head.query(input) {
        assert!(in_head(q));
    }
    if let Some(h) = head.host(input) {
        assert!(in_head(h));
        let name = head.host_name(input).unwrap_or_default();
        assert!(h.starts_with(name));
    }
    for (name, value) in head.headers(input) {
        assert!(!name.is_empty() && in_head(name) && in_head(value));
        assert!(!value.contains(&b'\r') && !value.contains(&b'\n'));
    }
    assert!(input[..head.head_len].ends_with(b"\r\n\r\n"));
    let mut body = BodyDecoder::new(head.body);
    let _ = body.decode(&input[head.head_len..]);
}
