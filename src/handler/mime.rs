//! Content-Type by file extension, a compiled-in table in the spirit of nginx's `mime.types`.
//!
//! Lookup is a `match` on the lowercased extension held in a stack buffer: no allocation,
//! no hashing, no global state. Textual types carry `; charset=utf-8`.

/// Sent when the extension is unknown, so browsers download rather than sniff and render.
pub const DEFAULT: &str = "application/octet-stream";

/// Longest extension in the table (`webmanifest`); longer ones cannot match.
const MAX_EXT_LEN: usize = 11;

/// Content-Type for a file name (the last path segment), from the bytes after its last `.`.
pub fn for_file_name(name: &[u8]) -> &'static str {
    match name.iter().rposition(|&b| b == b'.') {
        Some(dot) => for_extension(&name[dot + 1..]),
        None => DEFAULT,
    }
}

/// Content-Type for an extension without the dot, compared ASCII case-insensitively.
pub fn for_extension(ext: &[u8]) -> &'static str {
    let mut lower = [0u8; MAX_EXT_LEN];
    if ext.is_empty() || ext.len() > lower.len() {
        return DEFAULT;
    }
    for (dst, src) in lower.iter_mut().zip(ext) {
        *dst = src.to_ascii_lowercase();
    }
    match &lower[..ext.len()] {
        // Text and documents.
        b"html" | b"htm" | b"shtml" => "text/html; charset=utf-8",
        b"css" => "text/css; charset=utf-8",
        b"js" | b"mjs" | b"cjs" => "text/javascript; charset=utf-8",
        b"txt" | b"text" | b"log" => "text/plain; charset=utf-8",
        b"csv" => "text/csv; charset=utf-8",
        b"md" | b"markdown" => "text/markdown; charset=utf-8",
        b"ics" => "text/calendar; charset=utf-8",
        b"vtt" => "text/vtt; charset=utf-8",
        b"json" | b"map" => "application/json",
        b"jsonld" => "application/ld+json",
        b"webmanifest" => "application/manifest+json",
        b"xml" | b"xsl" => "application/xml",
        b"rss" => "application/rss+xml",
        b"atom" => "application/atom+xml",
        b"yaml" | b"yml" => "application/yaml",
        b"toml" => "application/toml",
        b"pdf" => "application/pdf",
        b"rtf" => "application/rtf",
        b"epub" => "application/epub+zip",
        b"doc" => "application/msword",
        b"docx" => "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        b"xls" => "application/vnd.ms-excel",
        b"xlsx" => "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        b"ppt" => "application/vnd.ms-powerpoint",
        b"pptx" => "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        b"odt" => "application/vnd.oasis.opendocument.text",
        b"ods" => "application/vnd.oasis.opendocument.spreadsheet",
        b"odp" => "application/vnd.oasis.opendocument.presentation",
        // Images.
        b"png" => "image/png",
        b"jpg" | b"jpeg" => "image/jpeg",
        b"gif" => "image/gif",
        b"webp" => "image/webp",
        b"avif" => "image/avif",
        b"jxl" => "image/jxl",
        b"svg" | b"svgz" => "image/svg+xml",
        b"ico" => "image/x-icon",
        b"bmp" => "image/bmp",
        b"tif" | b"tiff" => "image/tiff",
        // Fonts.
        b"woff" => "font/woff",
        b"woff2" => "font/woff2",
        b"ttf" => "font/ttf",
        b"otf" => "font/otf",
        b"eot" => "application/vnd.ms-fontobject",
        // Archives and binaries.
        b"zip" => "application/zip",
        b"gz" | b"tgz" => "application/gzip",
        b"tar" => "application/x-tar",
        b"bz2" => "application/x-bzip2",
        b"xz" => "application/x-xz",
        b"zst" => "application/zstd",
        b"7z" => "application/x-7z-compressed",
        b"rar" => "application/vnd.rar",
        b"jar" => "application/java-archive",
        b"wasm" => "application/wasm",
        // Video and streaming.
        b"mp4" | b"m4v" => "video/mp4",
        b"webm" => "video/webm",
        b"ogv" => "video/ogg",
        b"mov" => "video/quicktime",
        b"avi" => "video/x-msvideo",
        b"mkv" => "video/x-matroska",
        b"mpeg" | b"mpg" => "video/mpeg",
        b"ts" => "video/mp2t",
        b"m3u8" => "application/vnd.apple.mpegurl",
        b"mpd" => "application/dash+xml",
        // Audio.
        b"mp3" => "audio/mpeg",
        b"ogg" | b"oga" | b"opus" => "audio/ogg",
        b"wav" => "audio/wav",
        b"flac" => "audio/flac",
        b"m4a" => "audio/mp4",
        b"aac" => "audio/aac",
        b"weba" => "audio/webm",
        b"mid" | b"midi" => "audio/midi",
        _ => DEFAULT,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_types_resolve() {
        let cases: &[(&[u8], &str)] = &[
            (b"index.html", "text/html; charset=utf-8"),
            (b"a.htm", "text/html; charset=utf-8"),
            (b"site.css", "text/css; charset=utf-8"),
            (b"app.js", "text/javascript; charset=utf-8"),
            (b"mod.mjs", "text/javascript; charset=utf-8"),
            (b"data.json", "application/json"),
            (b"feed.xml", "application/xml"),
            (b"hello.txt", "text/plain; charset=utf-8"),
            (b"t.csv", "text/csv; charset=utf-8"),
            (b"README.md", "text/markdown; charset=utf-8"),
            (b"logo.svg", "image/svg+xml"),
            (b"a.png", "image/png"),
            (b"a.jpg", "image/jpeg"),
            (b"a.jpeg", "image/jpeg"),
            (b"a.gif", "image/gif"),
            (b"a.webp", "image/webp"),
            (b"a.avif", "image/avif"),
            (b"favicon.ico", "image/x-icon"),
            (b"f.woff", "font/woff"),
            (b"f.woff2", "font/woff2"),
            (b"f.ttf", "font/ttf"),
            (b"f.otf", "font/otf"),
            (b"doc.pdf", "application/pdf"),
            (b"a.zip", "application/zip"),
            (b"a.tar.gz", "application/gzip"),
            (b"a.tar", "application/x-tar"),
            (b"m.wasm", "application/wasm"),
            (b"v.mp4", "video/mp4"),
            (b"v.webm", "video/webm"),
            (b"s.mp3", "audio/mpeg"),
            (b"s.ogg", "audio/ogg"),
            (b"s.wav", "audio/wav"),
            (b"site.webmanifest", "application/manifest+json"),
        ];
        for (name, want) in cases {
            assert_eq!(
                for_file_name(name),
                *want,
                "{}",
                String::from_utf8_lossy(name)
            );
        }
    }

    #[test]
    fn extension_match_ignores_ascii_case() {
        assert_eq!(for_file_name(b"INDEX.HTML"), "text/html; charset=utf-8");
        assert_eq!(for_file_name(b"Photo.JpEg"), "image/jpeg");
    }

    #[test]
    fn unknown_missing_or_oversized_extension_is_octet_stream() {
        // No extension, or nothing after the dot.
        for name in [&b"Makefile"[..], b"trailingdot.", b""] {
            assert_eq!(for_file_name(name), DEFAULT, "{name:?}");
        }
        // An extension the table does not hold, one longer than any it holds,
        // one that is not text.
        for name in [&b"a.unknownext"[..], b"a.webmanifestx", b"a.\xff\xfe"] {
            assert_eq!(for_file_name(name), DEFAULT, "{name:?}");
        }
    }

    #[test]
    fn only_last_extension_counts() {
        assert_eq!(for_file_name(b"archive.html.gz"), "application/gzip");
        assert_eq!(for_file_name(b"evil.png.html"), "text/html; charset=utf-8");
    }
}
