//! Extensible Priorities (RFC 9218) against a real `pier`: a page's
//! render-blocking CSS (`priority: u=0`), asked for after ten large images
//! (`u=5, i`) on one connection whose window opens a little at a time, is
//! sent whole before the images are, and the server announces
//! SETTINGS_NO_RFC7540_PRIORITIES; a proxied stylesheet whose origin
//! answers `priority: u=0` is sent first too, its field passed on. Frames
//! written and read by hand; the assertions are on the order of frames,
//! never on time.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::h2raw::{self, RawH2};
use common::Pier;

const SITE: &str = r#"
[[listener]]
listen = "127.0.0.1:0"
http2 = true

[[route]]
path = "/"
handler = "static"
root = "{dir}"
"#;

const IMAGES: u32 = 10;
const IMAGE_BYTES: usize = 512 * 1024;
const CSS_BYTES: usize = 20 * 1024;

/// How much the client opens its connection window by each time it has
/// read as much.
const STEP: u32 = 128 * 1024;

fn request(raw: &mut RawH2, stream: u32, path: &str, priority: Option<&str>) {
    let mut fields = h2raw::get_fields(path);
    fields.extend(priority.map(|p| ("priority", p)));
    raw.send(&h2raw::frame(
        h2raw::HEADERS,
        h2raw::END_HEADERS | h2raw::END_STREAM,
        stream,
        &h2raw::block(&fields),
    ));
}

/// Writes the ten images and the CSS under `dir`.
fn write_page(dir: &Path) {
    for i in 0..IMAGES {
        std::fs::write(dir.join(format!("img{i}.bin")), vec![7u8; IMAGE_BYTES]).unwrap();
    }
    std::fs::write(dir.join("style.css"), vec![b'x'; CSS_BYTES]).unwrap();
}

/// Asks `addr` over one connection for the ten images (with
/// `image_priority` as their `priority` field, if any), then the CSS (with
/// `css_priority`), reading slowly: the connection's window opens a step
/// at a time as what was sent is read. Returns the streams in the order
/// they ended, and the CSS's stream.
fn order_of_ends(
    addr: SocketAddr,
    image_priority: Option<&str>,
    css_priority: Option<&str>,
) -> (Vec<u32>, u32) {
    let mut raw = RawH2::connect(addr);
    // Stream windows larger than any body: only the connection's window,
    // 65,535 bytes until the client opens it, holds the server back.
    raw.send(&h2raw::frame(h2raw::SETTINGS, 0, 0, &[0, 4, 0, 0x80, 0, 0]));
    let server_settings = raw
        .wait_for(Duration::from_secs(10), |f| {
            f.kind == h2raw::SETTINGS && f.flags & h2raw::ACK == 0
        })
        .expect("the server's SETTINGS");
    let announced: Vec<(u16, u32)> = server_settings
        .payload
        .chunks_exact(6)
        .map(|s| {
            (
                u16::from_be_bytes([s[0], s[1]]),
                u32::from_be_bytes([s[2], s[3], s[4], s[5]]),
            )
        })
        .collect();
    assert!(announced.contains(&(9, 1)), "{announced:?}");
    raw.send(&h2raw::frame(h2raw::SETTINGS, h2raw::ACK, 0, &[]));

    for i in 0..IMAGES {
        request(&mut raw, 2 * i + 1, &format!("/img{i}.bin"), image_priority);
    }
    let css = 2 * IMAGES + 1;
    request(&mut raw, css, "/style.css", css_priority);

    // Read what the first window allows until the CSS's head is in.
    let mut received = 0usize;
    let mut ended = Vec::new();
    let mut css_head = false;
    while !css_head {
        let f = raw
            .next_frame(Duration::from_secs(10))
            .expect("frames until the CSS's head");
        css_head |= f.kind == h2raw::HEADERS && f.stream == css;
        if f.kind == h2raw::DATA {
            received += f.payload.len();
        }
        if f.kind == h2raw::DATA && f.flags & h2raw::END_STREAM != 0 {
            ended.push(f.stream);
        }
    }
    // Then read slowly: the connection window opens a step at a time, as
    // what was sent is read.
    let total = IMAGES as usize * IMAGE_BYTES + CSS_BYTES;
    let mut opened = 65_535usize;
    while ended.len() < IMAGES as usize + 1 {
        if received >= opened.saturating_sub(STEP as usize) && opened < total {
            raw.send(&h2raw::frame(
                h2raw::WINDOW_UPDATE,
                0,
                0,
                &STEP.to_be_bytes(),
            ));
            opened += STEP as usize;
        }
        let f = raw
            .next_frame(Duration::from_secs(10))
            .unwrap_or_else(|| panic!("stalled at {received} of {total} bytes, ended {ended:?}"));
        assert_ne!(f.kind, h2raw::RST_STREAM, "{f:?}");
        assert_ne!(f.kind, h2raw::GOAWAY, "{f:?}");
        if f.kind == h2raw::DATA {
            received += f.payload.len();
            if f.flags & h2raw::END_STREAM != 0 {
                ended.push(f.stream);
            }
        }
    }
    assert_eq!(received, total);
    (ended, css)
}

#[test]
fn css_asked_for_after_large_images_is_sent_first() {
    let pier = Pier::with_config(SITE, &[]);
    write_page(pier.root());
    let (ended, css) = order_of_ends(pier.addr(), Some("u=5, i"), Some("u=0"));
    let css_at = ended.iter().position(|&s| s == css).unwrap();
    assert_eq!(css_at, 0, "no image ends before the CSS: {ended:?}");
}

/// An origin that says its stylesheet is urgent (`priority: u=0` on the
/// response), behind a proxy.
const ORIGIN: &str = r#"
[[listener]]
listen = "127.0.0.1:0"

[[route]]
path = "/style.css"
handler = "static"
root = "{dir}"
response_headers = { set = { priority = "u=0" } }

[[route]]
path = "/"
handler = "static"
root = "{dir}"
"#;

const PROXY: &str = r#"
[[listener]]
listen = "127.0.0.1:0"
http2 = true

[[upstream]]
name = "origin"
servers = [{ address = "ORIGIN" }]

[[route]]
path = "/"
handler = "proxy"
upstream = "origin"
"#;

#[test]
fn a_proxied_response_takes_the_priority_its_origin_gave_it() {
    let origin = Pier::with_config(ORIGIN, &[]);
    write_page(origin.root());
    let proxy = Pier::with_config(&PROXY.replace("ORIGIN", &origin.addr().to_string()), &[]);
    // RFC 9218 §5, §8: the response's field is passed on to the client...
    let out = Command::new("curl")
        .args([
            "-s",
            "--http2-prior-knowledge",
            "-D",
            "-",
            "-o",
            "/dev/null",
        ])
        .arg(format!("http://{}/style.css", proxy.addr()))
        .output();
    match out {
        Ok(out) => {
            let head = String::from_utf8_lossy(&out.stdout).to_ascii_lowercase();
            assert!(head.starts_with("http/2 200"), "{head}");
            assert!(head.contains("\r\npriority: u=0\r\n"), "{head}");
        }
        Err(_) => eprintln!("curl is missing: the field is not checked"),
    }
    // ...and schedules it: asked for last with no priority of its own, at
    // the images' default urgency, the CSS still ends first.
    let (ended, css) = order_of_ends(proxy.addr(), None, None);
    let css_at = ended.iter().position(|&s| s == css).unwrap();
    assert_eq!(css_at, 0, "no image ends before the CSS: {ended:?}");
}
