//! The whole configuration load path (TOML parse, validation, frozen objects)
//! never panics on any text, and every error names the origin, a line inside
//! the text and a key.
#![no_main]

use libfuzzer_sys::fuzz_target;

const ORIGIN: &str = "fuzz.toml";

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(e) = pier::config::build::load_str(ORIGIN, text) {
        assert_eq!(e.file, ORIGIN, "{e}");
        let lines = text.split('\n').count();
        assert!(e.line >= 1 && e.line <= lines, "line {} of {lines}: {e}", e.line);
        assert!(!e.key.is_empty(), "{e}");
        assert!(!e.message.is_empty(), "{e}");
        let shown = e.to_string();
        assert!(shown.starts_with(&format!("{ORIGIN}:{}: ", e.line)), "{shown}");
    }
});
