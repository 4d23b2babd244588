//! Decoding header blocks (RFC 7541 §6): one pass over the block, fields
//! handed out as borrowed slices, the dynamic table updated whatever the
//! caller does with them. A block that left the table as it was is
//! remembered, so a caller that kept its fields can tell when the next block
//! is the same one again (clients send the same block for every request of
//! the same head): the same bytes over the same table are the same fields.

use super::table::{DynamicTable, STATIC_LEN, STATIC_TABLE};
use super::DecodeError;
use crate::http::field_coding::{self, ReadError};
use crate::http::huffman;

/// The table size both sides assume before any SETTINGS (RFC 9113 §6.5.2).
const DEFAULT_TABLE_SIZE: usize = 4096;

/// The longest block remembered for [`Decoder::decode_unless_repeated`]: a
/// repeated head of indices is a few dozen octets; a longer block is
/// decoded every time rather than kept.
const MAX_REMEMBERED_BLOCK: usize = 512;

/// The decoding side of a connection: its dynamic table persists from one
/// header block to the next.
#[derive(Debug)]
pub struct Decoder {
    table: DynamicTable,
    /// The largest size update we accept: our SETTINGS_HEADER_TABLE_SIZE
    /// once the peer acknowledged it, the larger of it and the default
    /// before.
    max_table_size: usize,
    /// Our SETTINGS_HEADER_TABLE_SIZE, sent and not yet acknowledged.
    announced: Option<usize>,
    /// The peer acknowledged a size below its table's: the next block must
    /// open with a size update (RFC 7541 §4.2).
    update_owed: bool,
    /// Huffman-decoded names and names copied out of the dynamic table
    /// before an insertion may evict them; kept between blocks so decoding
    /// allocates only while the buffers grow.
    name_buf: Vec<u8>,
    /// Huffman-decoded values.
    value_buf: Vec<u8>,
    /// The last block, when it was decoded by
    /// [`Self::decode_unless_repeated`] and left the table untouched (no
    /// insertion, no size update): the same bytes decode to the same fields
    /// until the next block. Empty otherwise.
    last_block: Vec<u8>,
}

impl Decoder {
    /// A decoder whose peer may grow its dynamic table up to `max_table_size`
    /// (our SETTINGS_HEADER_TABLE_SIZE). The table starts at that size, as
    /// the peer's encoder assumes until it sends a size update.
    pub fn new(max_table_size: u32) -> Self {
        let max = max_table_size as usize;
        Decoder {
            table: DynamicTable::new(max),
            max_table_size: max,
            announced: None,
            update_owed: false,
            name_buf: Vec::new(),
            value_buf: Vec::new(),
            last_block: Vec::new(),
        }
    }

    /// A connection's decoder that has just announced `max_table_size` in
    /// SETTINGS: until the peer acknowledges them it may still encode with
    /// the default 4,096-octet table (RFC 9113 §6.5.3), so the table starts
    /// at the default and updates up to the larger of the two are taken;
    /// [`Self::settings_acknowledged`] applies the announced size.
    pub fn announcing(max_table_size: u32) -> Self {
        let announced = max_table_size as usize;
        let mut d = Decoder::new(DEFAULT_TABLE_SIZE as u32);
        d.max_table_size = announced.max(DEFAULT_TABLE_SIZE);
        d.announced = Some(announced);
        d
    }

    /// The peer acknowledged our SETTINGS: size updates above the announced
    /// size are refused from now on, and when the peer's table is larger,
    /// its next block must open with an update that fits (RFC 7541 §4.2).
    pub fn settings_acknowledged(&mut self) {
        if let Some(announced) = self.announced.take() {
            self.max_table_size = announced;
            self.update_owed = self.table.max_size() > announced;
        }
        self.last_block.clear();
    }

    /// Forgets the remembered block: its fields were not taken.
    pub fn forget_last(&mut self) {
        self.last_block.clear();
    }

    /// Frees the remembered block (the connection is idle; its caller
    /// frees the fields it kept).
    pub fn release_idle(&mut self) {
        self.last_block = Vec::new();
    }

    /// [`Self::decode`], unless `block` is the block this method decoded
    /// last and that block left the dynamic table as it was, with no block
    /// decoded since: then the fields are those `field` took that time,
    /// `field` is not called, and `Ok(true)` is returned. The caller keeps
    /// the fields it took from the last call, and must not rely on them
    /// after a [`Self::decode`] or a [`Self::release_idle`].
    pub fn decode_unless_repeated(
        &mut self,
        block: &[u8],
        field: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<bool, DecodeError> {
        if !self.last_block.is_empty() && self.last_block == block {
            return Ok(true);
        }
        let touched = self.decode_fields(block, field)?;
        if !touched && block.len() <= MAX_REMEMBERED_BLOCK {
            self.last_block.extend_from_slice(block);
        }
        Ok(false)
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
        self.decode_fields(block, field).map(|_| ())
    }

    /// Decodes `block` as [`Self::decode`] does, forgetting the remembered
    /// block first; true when the block changed the dynamic table.
    fn decode_fields(
        &mut self,
        block: &[u8],
        field: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<bool, DecodeError> {
        self.last_block.clear();
        let mut touched = false;
        let mut pos = 0;
        let mut at_start = true;
        while let Some(&first) = block.get(pos) {
            if self.update_owed && first & 0xe0 != 0x20 {
                return Err(DecodeError::TableSizeUpdateMissing);
            }
            if first & 0x80 != 0 {
                // Indexed field (§6.1).
                let index = read_int(block, &mut pos, 7)?;
                let (name, value) = self.entry(index)?;
                field(name, value);
            } else if first & 0x40 != 0 {
                // Literal with incremental indexing (§6.2.1). A name taken
                // from the dynamic table is copied first: the insertion may
                // evict its entry (§4.4).
                let index = read_int(block, &mut pos, 6)?;
                let name: &[u8] = if index == 0 {
                    read_string(block, &mut pos, &mut self.name_buf)?
                } else if index <= STATIC_LEN {
                    STATIC_TABLE[index - 1].0
                } else {
                    let (name, _) = entry(&self.table, index)?;
                    self.name_buf.clear();
                    self.name_buf.extend_from_slice(name);
                    &self.name_buf
                };
                let value = read_string(block, &mut pos, &mut self.value_buf)?;
                self.table.insert(name, value);
                touched = true;
                field(name, value);
            } else if first & 0x20 != 0 {
                // Dynamic table size update (§6.3), only before the first
                // field (§4.2).
                if !at_start {
                    return Err(DecodeError::TableSizeUpdateNotAtStart);
                }
                let size = read_int(block, &mut pos, 5)?;
                if size > self.max_table_size {
                    return Err(DecodeError::TableSizeAboveMax);
                }
                self.table.set_max_size(size);
                self.update_owed = false;
                touched = true;
                continue;
            } else {
                // Literal without indexing (0000) or never indexed (0001),
                // §6.2.2 and §6.2.3: the table is not touched.
                let index = read_int(block, &mut pos, 4)?;
                let name: &[u8] = if index == 0 {
                    read_string(block, &mut pos, &mut self.name_buf)?
                } else {
                    entry(&self.table, index)?.0
                };
                let value = read_string(block, &mut pos, &mut self.value_buf)?;
                field(name, value);
            }
            at_start = false;
        }
        Ok(touched)
    }

    fn entry(&self, index: usize) -> Result<(&[u8], &[u8]), DecodeError> {
        entry(&self.table, index)
    }

    /// The dynamic table, for tests that check its contents.
    #[cfg(test)]
    pub(super) fn table(&self) -> &DynamicTable {
        &self.table
    }
}

/// The field at `index` of the combined address space (§2.3.3).
fn entry(table: &DynamicTable, index: usize) -> Result<(&[u8], &[u8]), DecodeError> {
    match index {
        0 => Err(DecodeError::IndexZero),
        1..=STATIC_LEN => Ok(STATIC_TABLE[index - 1]),
        _ => table
            .get(index - STATIC_LEN - 1)
            .ok_or(DecodeError::IndexOutOfRange),
    }
}

/// Reads an integer with an N-bit prefix (§5.1) whose first octet is at
/// `*pos`, which must be in the block. Values past `u32::MAX` are refused,
/// and so are encodings longer than needed to reach it.
fn read_int(block: &[u8], pos: &mut usize, prefix_bits: u8) -> Result<usize, DecodeError> {
    field_coding::read_int_up_to(block, pos, prefix_bits, u64::from(u32::MAX))
        .map(|v| v as usize)
        .map_err(|e| match e {
            ReadError::Incomplete(_) => DecodeError::Truncated,
            _ => DecodeError::IntegerOverflow,
        })
}

/// Reads a string literal (§5.2): a slice of the block when it is raw, of
/// `scratch` when it is Huffman-coded.
fn read_string<'a>(
    block: &'a [u8],
    pos: &mut usize,
    scratch: &'a mut Vec<u8>,
) -> Result<&'a [u8], DecodeError> {
    let &first = block.get(*pos).ok_or(DecodeError::Truncated)?;
    let len = read_int(block, pos, 7)?;
    let start = *pos;
    if len > block.len() - start {
        return Err(DecodeError::StringPastEnd);
    }
    *pos = start + len;
    let raw = &block[start..start + len];
    if first & 0x80 == 0 {
        return Ok(raw);
    }
    scratch.clear();
    huffman::decode(raw, scratch)?;
    Ok(scratch)
}
