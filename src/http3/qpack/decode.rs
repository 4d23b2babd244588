//! The decoding side of QPACK (RFC 9204 §2.2): the peer encoder's
//! instructions applied to our dynamic table within the capacity we
//! advertised, field sections decoded into the caller's callback, sections
//! that refer to inserts not yet received held as blocked (at most as many
//! streams as we advertised), and the decoder-stream instructions owed to
//! the peer (Section Acknowledgment, Stream Cancellation, Insert Count
//! Increment).
//!
//! Everything held is bounded: the table by our capacity, a partial
//! encoder instruction by the longest entry that capacity admits, blocked
//! sections by their count times the largest HEADERS frame the stream
//! parser holds, and a section's decoded size by our
//! SETTINGS_MAX_FIELD_SECTION_SIZE, checked field by field.

use super::instructions::{
    read_encoder_instruction, write_decoder_instruction, DecoderInstruction, EncoderInstruction,
};
use super::section_prefix::{max_entries, read_prefix, PrefixError};
use super::static_table;
use super::table::{entry_size, DynamicTable};
use crate::http::field_coding::{read_int, read_string, ReadError};
use crate::http3::{Error, ErrorCode};

/// The limits this side advertised for its decoder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecoderLimits {
    /// SETTINGS_QPACK_MAX_TABLE_CAPACITY: the most the peer may set.
    pub max_table_capacity: u64,
    /// SETTINGS_QPACK_BLOCKED_STREAMS: how many streams may wait on inserts.
    pub max_blocked_streams: usize,
    /// SETTINGS_MAX_FIELD_SECTION_SIZE: the largest decoded field section,
    /// counted as RFC 9114 §4.2.2 says (name, value and 32 per field).
    pub max_field_section_size: u64,
}

impl Default for DecoderLimits {
    fn default() -> Self {
        DecoderLimits {
            max_table_capacity: 4096,
            max_blocked_streams: 16,
            max_field_section_size: 64 * 1024,
        }
    }
}

/// What became of a field section.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SectionOutcome {
    /// Every field was handed to the callback.
    Decoded,
    /// The section needs inserts not yet received: it is held, and comes
    /// back from [`Decoder::take_unblocked`] once they arrive. No field was
    /// handed out.
    Blocked,
    /// The decoded fields passed the field section size limit: decoding
    /// stopped there (the fields handed out so far are to be dropped), and
    /// the request is answered 431.
    TooLarge,
}

/// Where decoded fields go: `(name, value, never_index)`.
pub type FieldSink<'f> = dyn FnMut(&[u8], &[u8], bool) + 'f;

/// A section waiting for inserts.
#[derive(Debug)]
struct BlockedSection {
    stream_id: u64,
    required: u64,
    bytes: Vec<u8>,
}

/// The decoder of one connection.
#[derive(Debug)]
pub struct Decoder {
    limits: DecoderLimits,
    table: DynamicTable,
    /// Bytes of an encoder instruction not yet whole.
    pending: Vec<u8>,
    /// How many bytes `pending` must reach before it is worth reading
    /// again.
    pending_need: usize,
    blocked: Vec<BlockedSection>,
    /// Sections unblocked and not yet taken.
    ready: Vec<BlockedSection>,
    /// The insert count the peer's encoder knows we have received, from
    /// our acknowledgments and increments.
    acknowledged: u64,
    /// Decoder-stream bytes owed to the peer.
    out: Vec<u8>,
    name_buf: Vec<u8>,
    value_buf: Vec<u8>,
    /// An entry copied out of the table before an insert may evict it.
    entry_copy: Vec<u8>,
}

impl Decoder {
    /// A decoder enforcing what this side advertised.
    pub fn new(limits: DecoderLimits) -> Self {
        Decoder {
            limits,
            table: DynamicTable::default(),
            pending: Vec::new(),
            pending_need: 0,
            blocked: Vec::new(),
            ready: Vec::new(),
            acknowledged: 0,
            out: Vec::new(),
            name_buf: Vec::new(),
            value_buf: Vec::new(),
            entry_copy: Vec::new(),
        }
    }

    /// The longest string an encoder instruction may carry: a Huffman code
    /// is at most 30 bits a byte, and the decoded entry must fit the
    /// capacity, so a longer one can only be an error.
    fn max_instruction_string(&self) -> usize {
        usize::try_from(self.limits.max_table_capacity.saturating_mul(4)).unwrap_or(usize::MAX)
    }

    /// Reads bytes of the peer's encoder stream, applying each whole
    /// instruction. Sections that the inserts unblock are then ready in
    /// [`Self::take_unblocked`].
    pub fn read_encoder_stream(&mut self, input: &[u8]) -> Result<(), Error> {
        self.pending.extend_from_slice(input);
        if self.pending.len() < self.pending_need {
            return Ok(());
        }
        let mut pending = std::mem::take(&mut self.pending);
        let mut pos = 0;
        let result = loop {
            if pos == pending.len() {
                self.pending_need = 0;
                break Ok(());
            }
            let max = self.max_instruction_string();
            let (mut name_buf, mut value_buf) = (
                std::mem::take(&mut self.name_buf),
                std::mem::take(&mut self.value_buf),
            );
            let read =
                read_encoder_instruction(&pending[pos..], max, &mut name_buf, &mut value_buf);
            let step = match read {
                Ok((instruction, len)) => self.apply(instruction).map(|()| Some(len)),
                Err(ReadError::Incomplete(need)) => {
                    self.pending_need = need;
                    Ok(None)
                }
                Err(_) => Err(encoder_stream_error(
                    "The peer's encoder stream holds an instruction that cannot be read.",
                )),
            };
            self.name_buf = name_buf;
            self.value_buf = value_buf;
            match step {
                Ok(Some(len)) => pos += len,
                Ok(None) => break Ok(()),
                Err(e) => break Err(e),
            }
        };
        pending.drain(..pos);
        self.pending = pending;
        self.unblock();
        result
    }

    /// The peer closed its encoder stream: a connection error (RFC 9204
    /// §4.2).
    pub fn encoder_stream_finished(&self) -> Error {
        Error::connection(
            ErrorCode::ClosedCriticalStream,
            "The peer closed its QPACK encoder stream.",
        )
    }

    fn apply(&mut self, instruction: EncoderInstruction<'_>) -> Result<(), Error> {
        match instruction {
            EncoderInstruction::SetCapacity(c) => {
                if c > self.limits.max_table_capacity {
                    return Err(encoder_stream_error(
                        "The peer set its QPACK table above the capacity we allow.",
                    ));
                }
                self.table.set_capacity(c as usize);
                Ok(())
            }
            EncoderInstruction::InsertWithNameRef {
                is_static: true,
                index,
                value,
            } => {
                let (name, _) = static_table::get(index).ok_or(encoder_stream_error(
                    "The peer's encoder stream names a static entry past the table.",
                ))?;
                self.insert(name, value)
            }
            EncoderInstruction::InsertWithNameRef {
                is_static: false,
                index,
                value,
            } => {
                let abs = self.relative_to_absolute(index)?;
                let mut name = std::mem::take(&mut self.entry_copy);
                name.clear();
                name.extend_from_slice(self.table.get(abs).expect("checked").0);
                let r = self.insert(&name, value);
                self.entry_copy = name;
                r
            }
            EncoderInstruction::InsertWithLiteralName { name, value } => self.insert(name, value),
            EncoderInstruction::Duplicate(index) => {
                let abs = self.relative_to_absolute(index)?;
                let (name, value) = self.table.get(abs).expect("checked");
                let mut copy = std::mem::take(&mut self.entry_copy);
                copy.clear();
                copy.extend_from_slice(name);
                copy.extend_from_slice(value);
                let split = name.len();
                let r = self.insert(&copy[..split], &copy[split..]);
                self.entry_copy = copy;
                r
            }
        }
    }

    /// An encoder-stream relative index (§3.2.5) as an absolute one, if the
    /// entry is held.
    fn relative_to_absolute(&self, relative: u64) -> Result<u64, Error> {
        self.table
            .insert_count()
            .checked_sub(relative + 1)
            .filter(|&abs| abs >= self.table.dropped())
            .ok_or(encoder_stream_error(
                "The peer's encoder stream refers to an entry the table does not hold.",
            ))
    }

    fn insert(&mut self, name: &[u8], value: &[u8]) -> Result<(), Error> {
        if self.table.insert(name, value) {
            Ok(())
        } else {
            Err(encoder_stream_error(
                "The peer inserted an entry larger than its table's capacity.",
            ))
        }
    }

    /// Moves the sections whose inserts have all arrived to `ready`.
    fn unblock(&mut self) {
        let count = self.table.insert_count();
        let mut i = 0;
        while i < self.blocked.len() {
            if self.blocked[i].required <= count {
                self.ready.push(self.blocked.swap_remove(i));
            } else {
                i += 1;
            }
        }
    }

    /// A section that was blocked and can now be decoded: its stream and
    /// bytes, to hand back to [`Self::decode_section`].
    pub fn take_unblocked(&mut self) -> Option<(u64, Vec<u8>)> {
        self.ready.pop().map(|s| (s.stream_id, s.bytes))
    }

    /// How many streams wait on inserts.
    pub fn blocked_streams(&self) -> usize {
        self.blocked.len()
    }

    /// Decodes the field section of a HEADERS frame on `stream_id`, handing
    /// each field to `field(name, value, never_index)` in order. The
    /// never-index flag (§4.5.4) asks anyone re-encoding the field to keep
    /// it out of their tables too.
    pub fn decode_section(
        &mut self,
        stream_id: u64,
        section: &[u8],
        field: &mut FieldSink<'_>,
    ) -> Result<SectionOutcome, Error> {
        let entries = max_entries(self.limits.max_table_capacity);
        let (required, base, mut pos) = read_prefix(section, entries, self.table.insert_count())
            .map_err(|e| match e {
                PrefixError::Read(_) => {
                    failed("A field section's prefix is cut short or overflows.")
                }
                PrefixError::BadInsertCount => {
                    failed("A field section's Required Insert Count is impossible.")
                }
                PrefixError::BadBase => failed("A field section's Base is below zero."),
            })?;
        if required > self.table.insert_count() {
            return self.block(stream_id, required, section);
        }
        let max_size = self.limits.max_field_section_size;
        let mut size = 0u64;
        let mut largest_ref: Option<u64> = None;
        let max_string = section.len();
        while pos < section.len() {
            let line = self.field_line(section, &mut pos, required, base, max_string)?;
            if let Some(abs) = line.dynamic_ref {
                largest_ref = largest_ref.max(Some(abs));
            }
            size = size.saturating_add(entry_size(line.name, line.value) as u64);
            if size > max_size {
                // The inserts it needed were all received: acknowledging
                // it lets the encoder go on evicting.
                self.acknowledge(stream_id, required);
                return Ok(SectionOutcome::TooLarge);
            }
            field(line.name, line.value, line.never_index);
        }
        if required > 0 {
            if largest_ref.map(|abs| abs + 1) != Some(required) {
                return Err(failed(
                    "A field section's Required Insert Count is larger than its references need.",
                ));
            }
            self.acknowledge(stream_id, required);
        }
        Ok(SectionOutcome::Decoded)
    }

    fn block(
        &mut self,
        stream_id: u64,
        required: u64,
        section: &[u8],
    ) -> Result<SectionOutcome, Error> {
        if self.blocked.len() >= self.limits.max_blocked_streams {
            return Err(failed(
                "The peer blocked more streams on QPACK inserts than we allow.",
            ));
        }
        self.blocked.push(BlockedSection {
            stream_id,
            required,
            bytes: section.to_vec(),
        });
        Ok(SectionOutcome::Blocked)
    }

    fn acknowledge(&mut self, stream_id: u64, required: u64) {
        if required == 0 {
            return;
        }
        write_decoder_instruction(DecoderInstruction::SectionAck(stream_id), &mut self.out);
        self.acknowledged = self.acknowledged.max(required);
    }

    /// The stream was reset or its reading abandoned: its blocked section
    /// is dropped, and the encoder is told (§4.4.2) so it stops counting
    /// on an acknowledgment.
    pub fn stream_cancelled(&mut self, stream_id: u64) {
        self.blocked.retain(|s| s.stream_id != stream_id);
        self.ready.retain(|s| s.stream_id != stream_id);
        if self.limits.max_table_capacity > 0 {
            write_decoder_instruction(DecoderInstruction::StreamCancel(stream_id), &mut self.out);
        }
    }

    /// Appends the decoder-stream bytes owed to the peer: acknowledgments
    /// and cancellations, then an Insert Count Increment for inserts that
    /// no acknowledgment covered (§4.4.3). Call after each batch of input.
    pub fn write_decoder_stream(&mut self, out: &mut Vec<u8>) {
        out.append(&mut self.out);
        let count = self.table.insert_count();
        if count > self.acknowledged {
            write_decoder_instruction(
                DecoderInstruction::InsertCountIncrement(count - self.acknowledged),
                out,
            );
            self.acknowledged = count;
        }
    }

    /// Reads one field line (§4.5.2 to §4.5.6) at `*pos`.
    fn field_line<'a>(
        &'a mut self,
        section: &'a [u8],
        pos: &mut usize,
        required: u64,
        base: u64,
        max_string: usize,
    ) -> Result<FieldLine<'a>, Error> {
        let first = section[*pos];
        let read = |r: Result<u64, ReadError>| r.map_err(|_| truncated());
        if first & 0x80 != 0 {
            // Indexed field line: static (T=1) or dynamic, relative to Base.
            let index = read(read_int(section, pos, 6))?;
            if first & 0x40 != 0 {
                let (name, value) = static_entry(index)?;
                return Ok(FieldLine::new(name, value, false, None));
            }
            let abs = base.checked_sub(index + 1).ok_or(bad_reference())?;
            let (name, value) = table_entry(&self.table, abs, required)?;
            return Ok(FieldLine::new(name, value, false, Some(abs)));
        }
        if first & 0xf0 == 0x10 {
            // Indexed field line with post-base index.
            let index = read(read_int(section, pos, 4))?;
            let abs = base.checked_add(index).ok_or(bad_reference())?;
            let (name, value) = table_entry(&self.table, abs, required)?;
            return Ok(FieldLine::new(name, value, false, Some(abs)));
        }
        if first & 0xc0 == 0x40 {
            // Literal with name reference: N=0x20, T=0x10.
            let index = read(read_int(section, pos, 4))?;
            let (name, abs) = if first & 0x10 != 0 {
                (static_entry(index)?.0, None)
            } else {
                let abs = base.checked_sub(index + 1).ok_or(bad_reference())?;
                (table_entry(&self.table, abs, required)?.0, Some(abs))
            };
            let value = read_string(section, pos, 7, max_string, &mut self.value_buf)
                .map_err(string_error)?;
            return Ok(FieldLine::new(name, value, first & 0x20 != 0, abs));
        }
        if first & 0xe0 == 0x20 {
            // Literal with literal name: N=0x10, then the name's H bit.
            let name = read_string(section, pos, 3, max_string, &mut self.name_buf)
                .map_err(string_error)?;
            let value = read_string(section, pos, 7, max_string, &mut self.value_buf)
                .map_err(string_error)?;
            return Ok(FieldLine::new(name, value, first & 0x10 != 0, None));
        }
        // Literal with post-base name reference: N=0x08.
        let index = read(read_int(section, pos, 3))?;
        let abs = base.checked_add(index).ok_or(bad_reference())?;
        let name = table_entry(&self.table, abs, required)?.0;
        let value =
            read_string(section, pos, 7, max_string, &mut self.value_buf).map_err(string_error)?;
        Ok(FieldLine::new(name, value, first & 0x08 != 0, Some(abs)))
    }

    /// The dynamic table, for tests that check its contents.
    #[cfg(test)]
    pub(super) fn table(&self) -> &DynamicTable {
        &self.table
    }
}

/// One decoded field line.
struct FieldLine<'a> {
    name: &'a [u8],
    value: &'a [u8],
    never_index: bool,
    /// The absolute index of the dynamic entry it used, if any.
    dynamic_ref: Option<u64>,
}

impl<'a> FieldLine<'a> {
    fn new(name: &'a [u8], value: &'a [u8], never_index: bool, dynamic_ref: Option<u64>) -> Self {
        FieldLine {
            name,
            value,
            never_index,
            dynamic_ref,
        }
    }
}

/// The entry at `abs`, which must be below the section's Required Insert
/// Count and not evicted (§2.2.3).
fn table_entry(table: &DynamicTable, abs: u64, required: u64) -> Result<(&[u8], &[u8]), Error> {
    if abs >= required {
        return Err(bad_reference());
    }
    table.get(abs).ok_or(failed(
        "A field section refers to a dynamic entry already evicted.",
    ))
}

fn static_entry(index: u64) -> Result<(&'static [u8], &'static [u8]), Error> {
    static_table::get(index).ok_or(failed(
        "A field section refers to a static entry past the table.",
    ))
}

fn failed(reason: &'static str) -> Error {
    Error::connection(ErrorCode::QpackDecompressionFailed, reason)
}

fn truncated() -> Error {
    failed("A field section ends inside a field line, or an integer in it overflows.")
}

fn bad_reference() -> Error {
    failed("A field section refers to a dynamic entry outside its Required Insert Count.")
}

fn string_error(e: ReadError) -> Error {
    match e {
        ReadError::Huffman(_) => failed("A Huffman-coded string in a field section is invalid."),
        _ => truncated(),
    }
}

fn encoder_stream_error(reason: &'static str) -> Error {
    Error::connection(ErrorCode::QpackEncoderStreamError, reason)
}
