//! HPACK (RFC 7541): the decoder and the encoder of one connection, in
//! either role (request blocks in and response blocks out on a server, the
//! other way round on a client).
//!
//! Both sides are sans-IO and work on whole header blocks. The decoder hands
//! each field to a callback as slices into the block, its dynamic table or a
//! scratch buffer it keeps, so decoding allocates nothing per field; the
//! encoder indexes the fields that repeat from one head to the next and
//! sends the ones that change every time (dates, lengths) or must stay
//! private (cookies, credentials) without touching the table.

mod decode;
mod encode;
mod table;

#[cfg(test)]
mod tests;

pub use decode::Decoder;
pub use encode::Encoder;

/// Why a header block could not be decoded; every one is a connection
/// error of type COMPRESSION_ERROR (RFC 9113 §4.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// An integer (§5.1) does not fit in 32 bits.
    IntegerOverflow,
    /// An indexed representation names index 0, which §6.1 reserves.
    IndexZero,
    /// An index past the end of the static and dynamic tables.
    IndexOutOfRange,
    /// A Huffman-coded string contains the EOS symbol (§5.2).
    HuffmanEos,
    /// A Huffman-coded string ends in padding longer than 7 bits or not
    /// made of one bits (§5.2).
    HuffmanPadding,
    /// A dynamic table size update above our SETTINGS_HEADER_TABLE_SIZE
    /// (§6.3).
    TableSizeAboveMax,
    /// A dynamic table size update after the first field of the block
    /// (§4.2).
    TableSizeUpdateNotAtStart,
    /// The first block after the peer acknowledged a smaller
    /// SETTINGS_HEADER_TABLE_SIZE did not open with a size update (§4.2).
    TableSizeUpdateMissing,
    /// The block ends in the middle of a representation.
    Truncated,
    /// A string's declared length runs past the end of the block.
    StringPastEnd,
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DecodeError::IntegerOverflow => {
                "The header block holds an integer too large to decode."
            }
            DecodeError::IndexZero => {
                "The header block refers to table index 0, which is not allowed."
            }
            DecodeError::IndexOutOfRange => {
                "The header block refers to a table index past the end of the table."
            }
            DecodeError::HuffmanEos => "A Huffman-coded string in the header block contains EOS.",
            DecodeError::HuffmanPadding => {
                "A Huffman-coded string in the header block has invalid padding."
            }
            DecodeError::TableSizeAboveMax => {
                "The header block sets the dynamic table above the size we allow."
            }
            DecodeError::TableSizeUpdateNotAtStart => {
                "The header block changes the dynamic table size after its first field."
            }
            DecodeError::TableSizeUpdateMissing => {
                "The header block does not shrink the dynamic table to the size we announced."
            }
            DecodeError::Truncated => "The header block ends in the middle of a field.",
            DecodeError::StringPastEnd => {
                "A string in the header block is longer than the rest of the block."
            }
        })
    }
}

impl std::error::Error for DecodeError {}

impl From<crate::http::huffman::HuffmanError> for DecodeError {
    fn from(e: crate::http::huffman::HuffmanError) -> Self {
        match e {
            crate::http::huffman::HuffmanError::Eos => DecodeError::HuffmanEos,
            crate::http::huffman::HuffmanError::Padding => DecodeError::HuffmanPadding,
        }
    }
}
