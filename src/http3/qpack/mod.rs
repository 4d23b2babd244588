//! QPACK (RFC 9204): field compression for HTTP/3. Unlike HPACK, the
//! dynamic table is changed only by instructions on a unidirectional
//! encoder stream, and the decoder reports what it has seen on a decoder
//! stream, so field sections on request streams may arrive in any order
//! and refer only to inserts the other side knows about.
//!
//! - `static_table`: the 99 fixed entries (Appendix A).
//! - `table`: the dynamic table, by absolute index, both sides.
//! - `instructions`: the two instruction streams' formats.
//! - `section_prefix`: Required Insert Count and Base (§4.5.1).
//! - `decode`: our decoder, within the limits we advertised.
//! - `encode`: our encoder, within the limits the peer advertised.
//!
//! The integer and string primitives and the Huffman code are HPACK's
//! (`crate::http::field_coding`, `crate::http::huffman`): one
//! implementation for both protocols.

mod decode;
mod encode;
mod instructions;
mod section_prefix;
mod static_table;
mod table;

#[cfg(test)]
mod tests;

pub use decode::{Decoder, DecoderLimits, FieldSink, SectionOutcome};
pub use encode::Encoder;
