//! HPACK (RFC 7541): the decoder for request header blocks and the encoder
//! for response header blocks of one connection.
//!
//! API CONTRACT (the connection in `conn.rs` is written against it).

/// Why a header block could not be decoded; every one is a connection
/// error of type COMPRESSION_ERROR (RFC 9113 §4.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// Placeholder until the decoder lands.
    Invalid,
}

/// The decoding side of a connection: its dynamic table persists from one
/// header block to the next.
pub struct Decoder {}

impl Decoder {
    /// A decoder whose peer may grow its dynamic table up to `max_table_size`
    /// (our SETTINGS_HEADER_TABLE_SIZE).
    pub fn new(max_table_size: u32) -> Self {
        let _ = max_table_size;
        Decoder {}
    }

    /// Decodes one whole header block (HEADERS plus any CONTINUATION
    /// payloads, joined), calling `field(name, value)` for each field in
    /// order. The slices are valid for the call only. The dynamic table is
    /// updated whatever `field` does with the fields.
    pub fn decode(
        &mut self,
        block: &[u8],
        field: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<(), DecodeError> {
        let _ = (block, field);
        Err(DecodeError::Invalid)
    }
}

/// The encoding side of a connection.
pub struct Encoder {}

impl Default for Encoder {
    fn default() -> Self {
        Encoder {}
    }
}

impl Encoder {
    /// The peer's SETTINGS_HEADER_TABLE_SIZE: the most our dynamic table may
    /// hold from now on (a size update is sent at the next block's start).
    pub fn set_peer_table_size(&mut self, size: u32) {
        let _ = size;
    }

    /// Appends the `:status` field.
    pub fn encode_status(&mut self, status: u16, out: &mut Vec<u8>) {
        let _ = (status, out);
    }

    /// Appends one field; `name` is lowercase.
    pub fn encode_field(&mut self, name: &[u8], value: &[u8], out: &mut Vec<u8>) {
        let _ = (name, value, out);
    }
}
