//! CPU per byte and output size of each coding at each level, the figures the
//! compression filter's default levels come from. Each input is encoded whole,
//! in 16 KiB slices as the filter feeds it, many times over; `gzip1` is gzip
//! in one libdeflate call, as the filter encodes a body of up to 128 KiB.
//!
//! `cargo bench --bench compress_levels -- FILE...` (default: README.md).

use std::io::Write;
use std::time::Instant;

fn main() {
    let mut files: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    if files.is_empty() {
        files.push("README.md".into());
    }
    let mut data = Vec::new();
    for f in &files {
        data.extend(std::fs::read(f).unwrap_or_else(|e| panic!("{f}: {e}")));
    }
    let reps = (20_000_000 / data.len().max(1)).max(3);
    println!(
        "input: {} bytes ({}), {reps} rounds",
        data.len(),
        files.join(" ")
    );
    let report = |name: &str, level: u32, f: &dyn Fn() -> usize| {
        let t = Instant::now();
        let mut out = 0;
        for _ in 0..reps {
            out = f();
        }
        let ns = t.elapsed().as_nanos() as f64 / (reps * data.len()) as f64;
        println!(
            "{name:<5} {level:>2}: size {:.3} of the input, {ns:.2} ns per input byte",
            out as f64 / data.len() as f64
        );
    };
    for level in 1..=9 {
        report("gzip", level, &|| {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(level));
            for c in data.chunks(16384) {
                e.write_all(c).unwrap();
            }
            e.finish().unwrap().len()
        });
    }
    for level in 1..=9 {
        report("gzip1", level, &|| {
            let mut c = libdeflater::Compressor::new(
                libdeflater::CompressionLvl::new(level as i32).unwrap(),
            );
            let mut out = vec![0; c.gzip_compress_bound(data.len())];
            c.gzip_compress(&data, &mut out).unwrap()
        });
    }
    for level in 0..=7 {
        report("br", level, &|| {
            let mut w = brotli::CompressorWriter::new(Vec::new(), 4096, level, 19);
            for c in data.chunks(16384) {
                w.write_all(c).unwrap();
            }
            w.into_inner().len()
        });
    }
    for level in 1..=9 {
        report("zstd", level, &|| {
            let mut e = zstd::stream::write::Encoder::new(Vec::new(), level as i32).unwrap();
            for c in data.chunks(16384) {
                e.write_all(c).unwrap();
            }
            e.finish().unwrap().len()
        });
    }
}
