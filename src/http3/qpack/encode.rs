//! The encoding side of QPACK (RFC 9204 §2.1), with one safe strategy:
//! a field in the static table costs one byte; a field that repeats (not a
//! credential, not a value that changes every time) is inserted into the
//! dynamic table, within the capacity the peer advertised, and sent as a
//! literal this once; later sections refer to it only after the peer's
//! decoder has acknowledged the insert. So no section ever waits on an
//! insert (no blocked stream, whatever the peer's QPACK_BLOCKED_STREAMS),
//! and no entry a section still refers to is evicted before that section
//! is acknowledged (§2.1.1): an insert that would evict one is not made.
//!
//! Credentials and cookies are sent with the never-index bit (§4.5.4) and
//! never inserted.

use std::collections::VecDeque;

use super::instructions::{
    read_decoder_instruction, write_encoder_instruction, DecoderInstruction, EncoderInstruction,
};
use super::section_prefix::{max_entries, write_prefix};
use super::static_table::{self, StaticMatch};
use super::table::{entry_size, DynamicTable};
use crate::http::field_coding::{is_sensitive, write_int, write_string, ReadError};
use crate::http3::{Error, ErrorCode};

/// The most dynamic table we keep for a peer, whatever it allows.
const OUR_MAX_CAPACITY: u64 = 4096;

/// Values longer than this are not inserted: long values rarely repeat and
/// would evict several short ones that do.
const MAX_INDEXED_VALUE_LEN: usize = 64;

/// Sections with dynamic references awaiting acknowledgment; past this,
/// sections are encoded without them, so a peer that never acknowledges
/// costs a bounded list.
const MAX_OUTSTANDING_SECTIONS: usize = 256;

/// A sent section that refers to the dynamic table and is not yet
/// acknowledged.
#[derive(Clone, Copy, Debug)]
struct Outstanding {
    stream_id: u64,
    required: u64,
    /// The oldest entry it refers to: none older may be evicted until the
    /// section is acknowledged or its stream cancelled.
    oldest_ref: u64,
}

/// The encoder of one connection.
#[derive(Debug, Default)]
pub struct Encoder {
    table: DynamicTable,
    /// The peer decoder's SETTINGS_QPACK_MAX_TABLE_CAPACITY (0 until its
    /// SETTINGS arrive: static table and literals only).
    peer_max_capacity: u64,
    /// The Known Received Count (§2.1.4): inserts the peer has acknowledged.
    known_received: u64,
    outstanding: VecDeque<Outstanding>,
    /// Bytes of a decoder instruction not yet whole.
    pending: Vec<u8>,
    /// Encoder-stream bytes owed to the peer.
    stream_out: Vec<u8>,
    /// The field lines of the section being encoded.
    lines: Vec<u8>,
}

/// The references of the section being encoded.
#[derive(Clone, Copy, Debug)]
struct SectionRefs {
    base: u64,
    newest: Option<u64>,
    oldest: Option<u64>,
    dynamic: bool,
}

impl Encoder {
    /// An encoder that uses the static table and literals until the peer's
    /// SETTINGS arrive.
    pub fn new() -> Self {
        Encoder::default()
    }

    /// The peer's SETTINGS_QPACK_MAX_TABLE_CAPACITY. Settings come once;
    /// the dynamic table is used from now on if the capacity allows.
    pub fn set_peer_max_table_capacity(&mut self, capacity: u64) {
        self.peer_max_capacity = capacity;
    }

    /// Encodes one field section for `stream_id` (names lowercase, pseudo
    /// fields first) and appends it to `out`, ready for a HEADERS frame.
    /// Inserts it made wait in [`Self::write_encoder_stream`].
    pub fn encode_section<'f>(
        &mut self,
        stream_id: u64,
        fields: &mut dyn Iterator<Item = (&'f [u8], &'f [u8])>,
        out: &mut Vec<u8>,
    ) {
        let mut refs = SectionRefs {
            base: self.known_received,
            newest: None,
            oldest: None,
            dynamic: self.peer_max_capacity >= 32
                && self.outstanding.len() < MAX_OUTSTANDING_SECTIONS,
        };
        let mut lines = std::mem::take(&mut self.lines);
        lines.clear();
        for (name, value) in fields {
            self.encode_field(name, value, &mut refs, &mut lines);
        }
        match refs.newest {
            None => write_prefix(out, 0, 0, 1),
            Some(newest) => {
                let required = newest + 1;
                write_prefix(
                    out,
                    required,
                    refs.base,
                    max_entries(self.peer_max_capacity),
                );
                self.outstanding.push_back(Outstanding {
                    stream_id,
                    required,
                    oldest_ref: refs.oldest.unwrap_or(newest),
                });
            }
        }
        out.extend_from_slice(&lines);
        self.lines = lines;
    }

    fn encode_field(
        &mut self,
        name: &[u8],
        value: &[u8],
        refs: &mut SectionRefs,
        out: &mut Vec<u8>,
    ) {
        let static_name = match static_table::find(name, value) {
            StaticMatch::Field(index) => {
                write_int(out, 0xc0, 6, index);
                return;
            }
            StaticMatch::Name(index) => Some(index),
            StaticMatch::None => None,
        };
        let never_index = is_sensitive(name);
        if never_index || !refs.dynamic {
            write_literal(out, static_name, None, name, value, never_index);
            return;
        }
        // Only acknowledged entries are referred to: the section never waits.
        let (whole, same_name) =
            self.table
                .find(name, value, self.table.dropped(), self.known_received);
        if let Some(abs) = whole {
            refs.refer(abs);
            write_int(out, 0x80, 6, refs.base - 1 - abs);
            return;
        }
        let dynamic_name = if static_name.is_none() {
            same_name
        } else {
            None
        };
        if let Some(abs) = dynamic_name {
            // Pinned before any insert below can evict it.
            refs.refer(abs);
        }
        if value.len() <= MAX_INDEXED_VALUE_LEN && !changes_every_time(name) {
            self.insert(name, value, static_name, refs);
        }
        let relative = dynamic_name.map(|abs| refs.base - 1 - abs);
        write_literal(out, static_name, relative, name, value, false);
    }

    /// Inserts `name: value` for later sections, if it fits without
    /// evicting an entry a sent or this section refers to.
    fn insert(&mut self, name: &[u8], value: &[u8], static_name: Option<u64>, refs: &SectionRefs) {
        let capacity = self.peer_max_capacity.min(OUR_MAX_CAPACITY);
        if self.table.capacity() as u64 != capacity {
            write_encoder_instruction(
                &EncoderInstruction::SetCapacity(capacity),
                &mut self.stream_out,
            );
            self.table.set_capacity(capacity as usize);
        }
        let keep_from = self
            .outstanding
            .iter()
            .map(|s| s.oldest_ref)
            .chain(refs.oldest)
            .min()
            .unwrap_or(u64::MAX);
        if !self
            .table
            .fits_evicting_before(entry_size(name, value), keep_from)
        {
            return;
        }
        let instruction = match static_name {
            Some(index) => EncoderInstruction::InsertWithNameRef {
                is_static: true,
                index,
                value,
            },
            None => EncoderInstruction::InsertWithLiteralName { name, value },
        };
        write_encoder_instruction(&instruction, &mut self.stream_out);
        self.table.insert(name, value);
    }

    /// Appends the encoder-stream bytes owed to the peer (inserts and the
    /// capacity). Send them with or before the HEADERS that follow.
    pub fn write_encoder_stream(&mut self, out: &mut Vec<u8>) {
        out.append(&mut self.stream_out);
    }

    /// Reads bytes of the peer's decoder stream (§4.4).
    pub fn read_decoder_stream(&mut self, input: &[u8]) -> Result<(), Error> {
        self.pending.extend_from_slice(input);
        let mut pos = 0;
        let result = loop {
            match read_decoder_instruction(&self.pending[pos..]) {
                Ok((instruction, len)) => {
                    pos += len;
                    if let Err(e) = self.apply(instruction) {
                        break Err(e);
                    }
                }
                Err(ReadError::Incomplete(_)) => break Ok(()),
                Err(_) => {
                    break Err(decoder_stream_error(
                        "The peer's decoder stream holds an integer that overflows.",
                    ))
                }
            }
        };
        self.pending.drain(..pos);
        result
    }

    /// The peer closed its decoder stream: a connection error (RFC 9204
    /// §4.2).
    pub fn decoder_stream_finished(&self) -> Error {
        Error::connection(
            ErrorCode::ClosedCriticalStream,
            "The peer closed its QPACK decoder stream.",
        )
    }

    fn apply(&mut self, instruction: DecoderInstruction) -> Result<(), Error> {
        match instruction {
            DecoderInstruction::SectionAck(stream_id) => {
                let i = self
                    .outstanding
                    .iter()
                    .position(|s| s.stream_id == stream_id)
                    .ok_or(decoder_stream_error(
                        "The peer acknowledged a field section that was not outstanding.",
                    ))?;
                let section = self.outstanding.remove(i).expect("found");
                self.known_received = self.known_received.max(section.required);
            }
            DecoderInstruction::StreamCancel(stream_id) => {
                self.outstanding.retain(|s| s.stream_id != stream_id);
            }
            DecoderInstruction::InsertCountIncrement(n) => {
                let known = self.known_received.checked_add(n);
                match known {
                    Some(k) if n > 0 && k <= self.table.insert_count() => self.known_received = k,
                    _ => {
                        return Err(decoder_stream_error(
                            "The peer's Insert Count Increment is zero or beyond our inserts.",
                        ))
                    }
                }
            }
        }
        Ok(())
    }

    /// The Known Received Count, for tests.
    #[cfg(test)]
    pub(super) fn known_received(&self) -> u64 {
        self.known_received
    }

    /// The dynamic table, for tests.
    #[cfg(test)]
    pub(super) fn table(&self) -> &DynamicTable {
        &self.table
    }
}

impl SectionRefs {
    fn refer(&mut self, abs: u64) {
        self.newest = self.newest.max(Some(abs));
        self.oldest = Some(self.oldest.map_or(abs, |o| o.min(abs)));
    }
}

/// Appends a literal field line: with a static name reference, a dynamic
/// one (relative to the Base), or the name itself.
fn write_literal(
    out: &mut Vec<u8>,
    static_name: Option<u64>,
    dynamic_name: Option<u64>,
    name: &[u8],
    value: &[u8],
    never_index: bool,
) {
    match (static_name, dynamic_name) {
        (Some(index), _) => write_int(out, 0x50 | if never_index { 0x20 } else { 0 }, 4, index),
        (None, Some(relative)) => {
            write_int(out, 0x40 | if never_index { 0x20 } else { 0 }, 4, relative)
        }
        (None, None) => write_string(out, 0x20 | if never_index { 0x10 } else { 0 }, 3, name),
    }
    write_string(out, 0, 7, value);
}

/// Fields whose values differ in nearly every message: inserting them
/// would only evict entries that repeat.
fn changes_every_time(name: &[u8]) -> bool {
    matches!(
        name,
        b"age" | b"date" | b"content-length" | b"content-range" | b":path" | b"etag"
    )
}

fn decoder_stream_error(reason: &'static str) -> Error {
    Error::connection(ErrorCode::QpackDecoderStreamError, reason)
}
