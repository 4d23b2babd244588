//! Encoding response header blocks (RFC 7541 §6) with a policy for what a
//! server sends: fields that repeat from one response to the next go into
//! the dynamic table and cost one octet afterwards; fields that change every
//! response are sent without indexing so they do not push the repeating ones
//! out; credentials and cookies are never indexed (§7.1.3).

use super::huffman;
use super::table::{entry_size, static_find, DynamicTable, STATIC_LEN};

/// The most dynamic table we keep for a peer, whatever it allows: the
/// RFC's default, enough for the fields a server repeats.
const OUR_MAX_TABLE_SIZE: u32 = 4096;

/// Values longer than this are sent without indexing: long values rarely
/// repeat and would evict several short ones that do.
const MAX_INDEXED_VALUE_LEN: usize = 64;

/// The encoding side of a connection: its dynamic table mirrors the peer's
/// decoder's.
#[derive(Debug)]
pub struct Encoder {
    table: DynamicTable,
    /// min(ours, the peer's SETTINGS_HEADER_TABLE_SIZE), applied at the next
    /// block.
    target_size: usize,
    /// The smallest target since the last block: §4.2 wants it signalled
    /// when the size went down and up again in between.
    smallest_size: usize,
}

impl Default for Encoder {
    fn default() -> Self {
        let size = OUR_MAX_TABLE_SIZE as usize;
        Encoder {
            table: DynamicTable::new(size),
            target_size: size,
            smallest_size: size,
        }
    }
}

impl Encoder {
    /// The peer's SETTINGS_HEADER_TABLE_SIZE: the most our dynamic table may
    /// hold from now on (a size update is sent at the next block's start).
    pub fn set_peer_table_size(&mut self, size: u32) {
        let size = size.min(OUR_MAX_TABLE_SIZE) as usize;
        self.target_size = size;
        self.smallest_size = self.smallest_size.min(size);
    }

    /// Starts a header block: emits the dynamic table size updates owed
    /// since the last block (§4.2, §6.3). The connection calls it before the
    /// first field of every block; a peer that shrank its table expects the
    /// update there.
    pub fn begin_block(&mut self, out: &mut Vec<u8>) {
        let current = self.table.max_size();
        if self.smallest_size < current.min(self.target_size) {
            encode_int(out, 0x20, 5, self.smallest_size);
            self.table.set_max_size(self.smallest_size);
        }
        if self.target_size != self.table.max_size() {
            encode_int(out, 0x20, 5, self.target_size);
            self.table.set_max_size(self.target_size);
        }
        self.smallest_size = self.target_size;
    }

    /// Appends the `:status` field: one octet for the seven statuses in the
    /// static table, the static name and the digits otherwise.
    pub fn encode_status(&mut self, status: u16, out: &mut Vec<u8>) {
        let index = match status {
            200 => 8,
            204 => 9,
            206 => 10,
            304 => 11,
            400 => 12,
            404 => 13,
            500 => 14,
            _ => {
                let mut digits = [0u8; 5];
                let mut n = status;
                let mut start = digits.len();
                loop {
                    start -= 1;
                    digits[start] = b'0' + (n % 10) as u8;
                    n /= 10;
                    if n == 0 {
                        break;
                    }
                }
                self.encode_field(b":status", &digits[start..], out);
                return;
            }
        };
        encode_int(out, 0x80, 7, index);
    }

    /// Appends one field; `name` is lowercase.
    pub fn encode_field(&mut self, name: &[u8], value: &[u8], out: &mut Vec<u8>) {
        let static_name = match static_find(name, value) {
            Ok(index) => {
                encode_int(out, 0x80, 7, index);
                return;
            }
            Err(name_index) => name_index,
        };
        if is_sensitive(name) {
            encode_literal(out, 0x10, 4, static_name, name, value);
            return;
        }
        let dynamic_name = match self.table.find(name, value) {
            Ok(index) => {
                encode_int(out, 0x80, 7, STATIC_LEN + 1 + index);
                return;
            }
            Err(name_index) => name_index.map(|i| STATIC_LEN + 1 + i),
        };
        let name_index = static_name.or(dynamic_name);
        if value.len() <= MAX_INDEXED_VALUE_LEN
            && !changes_every_response(name)
            && entry_size(name, value) <= self.table.max_size()
        {
            // The name index is taken before the insertion, as the decoder
            // resolves it (§4.4).
            encode_literal(out, 0x40, 6, name_index, name, value);
            self.table.insert(name, value);
        } else {
            encode_literal(out, 0x00, 4, name_index, name, value);
        }
    }

    /// The dynamic table, for tests that check it against the peer's bound.
    #[cfg(test)]
    pub(super) fn table(&self) -> &DynamicTable {
        &self.table
    }
}

/// Fields whose values must not be stored by any intermediary's compressor
/// (§7.1.3): they are sent "never indexed".
fn is_sensitive(name: &[u8]) -> bool {
    matches!(name, b"set-cookie" | b"cookie" | b"authorization" | b"proxy-authorization")
}

/// Fields whose values differ in nearly every response: indexing them would
/// only evict entries that repeat.
fn changes_every_response(name: &[u8]) -> bool {
    matches!(
        name,
        b"content-length" | b"date" | b"etag" | b"last-modified" | b"age" | b"expires"
    )
}

/// Appends a literal field (§6.2) whose first octet carries `pattern` and a
/// `prefix_bits` name index, 0 meaning the name follows as a string.
fn encode_literal(
    out: &mut Vec<u8>,
    pattern: u8,
    prefix_bits: u8,
    name_index: Option<usize>,
    name: &[u8],
    value: &[u8],
) {
    match name_index {
        Some(index) => encode_int(out, pattern, prefix_bits, index),
        None => {
            out.push(pattern);
            encode_string(out, name);
        }
    }
    encode_string(out, value);
}

/// Appends an integer with an N-bit prefix (§5.1) to a first octet that
/// carries `pattern` in its high bits.
pub(super) fn encode_int(out: &mut Vec<u8>, pattern: u8, prefix_bits: u8, value: usize) {
    let max = (1usize << prefix_bits) - 1;
    if value < max {
        out.push(pattern | value as u8);
        return;
    }
    out.push(pattern | max as u8);
    let mut rest = value - max;
    while rest >= 0x80 {
        out.push(0x80 | (rest & 0x7f) as u8);
        rest >>= 7;
    }
    out.push(rest as u8);
}

/// Appends a string literal (§5.2), Huffman-coded when that is shorter.
fn encode_string(out: &mut Vec<u8>, s: &[u8]) {
    let coded_len = huffman::encoded_len(s);
    if coded_len < s.len() {
        encode_int(out, 0x80, 7, coded_len);
        huffman::encode(s, out);
    } else {
        encode_int(out, 0x00, 7, s.len());
        out.extend_from_slice(s);
    }
}
