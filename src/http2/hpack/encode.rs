//! Encoding header blocks (RFC 7541 §6), response heads on a server and
//! request heads on a client, with one policy: fields that repeat from one
//! head to the next (a status, an authority, a user agent) go into the
//! dynamic table and cost one octet afterwards; fields that change every
//! time are sent without indexing so they do not push the repeating ones
//! out; credentials and cookies are never indexed (§7.1.3).

use super::table::{entry_size, static_find, DynamicTable, STATIC_LEN};
use crate::http::field_coding::{self, is_sensitive};

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
    /// Where recent fields went in the dynamic table, by insertion number
    /// ([`NO_ENTRY`] for none), in a slot chosen by [`memo_slot`]: a field
    /// each response repeats is found with one comparison instead of a
    /// scan. An entry is checked against the field before its index is
    /// sent, so a slot shared by two fields, or naming an evicted entry,
    /// only costs the scan.
    memo: [u64; MEMO_SLOTS],
}

/// Slots of [`Encoder::memo`]: more than the fields an answer repeats.
const MEMO_SLOTS: usize = 16;

/// A memo slot naming no entry.
const NO_ENTRY: u64 = u64::MAX;

/// The memo slot of a field: fields an answer repeats differ in the
/// length of their name or value, or in the name's first octet.
fn memo_slot(name: &[u8], value: &[u8]) -> usize {
    let first = name.first().copied().unwrap_or(0) as usize;
    (name.len() + 3 * value.len() + first) % MEMO_SLOTS
}

impl Default for Encoder {
    fn default() -> Self {
        let size = OUR_MAX_TABLE_SIZE as usize;
        Encoder {
            table: DynamicTable::new(size),
            target_size: size,
            smallest_size: size,
            memo: [NO_ENTRY; MEMO_SLOTS],
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

    /// The block encoded since the last [`Self::begin_block`] was never
    /// sent: the peer's table did not take its insertions (nor its size
    /// updates), so the next block empties both tables with a size update
    /// of 0 before the target size (§4.2 allows the two), and they agree
    /// again.
    pub fn discard_block(&mut self) {
        self.smallest_size = 0;
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
        // The dynamic table first: a field a connection repeats (`server`,
        // `date`, `content-length`) is found there and costs no static
        // lookup. The two tables never hold the same field (a field the
        // static table holds whole is never inserted), nor a sensitive one
        // (never inserted either), so the octets are those of the static
        // lookup first.
        let slot = memo_slot(name, value);
        if let Some(index) = self.table.index_of_insertion(self.memo[slot]) {
            if self.table.holds(index, name, value) {
                encode_int(out, 0x80, 7, STATIC_LEN + 1 + index);
                return;
            }
        }
        let dynamic_name = match self.table.find(name, value) {
            Ok(index) => {
                self.memo[slot] = self.table.insertion_of_index(index);
                encode_int(out, 0x80, 7, STATIC_LEN + 1 + index);
                return;
            }
            Err(name_index) => name_index.map(|i| STATIC_LEN + 1 + i),
        };
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
        let name_index = static_name.or(dynamic_name);
        if value.len() <= MAX_INDEXED_VALUE_LEN
            && !changes_every_response(name)
            && entry_size(name, value) <= self.table.max_size()
        {
            // The name index is taken before the insertion, as the decoder
            // resolves it (§4.4).
            encode_literal(out, 0x40, 6, name_index, name, value);
            self.table.insert(name, value);
            self.memo[slot] = self.table.insertion_of_index(0);
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

/// Fields whose values differ in nearly every response: indexing them would
/// only evict entries that repeat. `date` changes once a second and
/// `content-length`, `etag` and `last-modified` repeat with the file or the
/// answer, so they are indexed: a busy connection then sends each in one
/// octet, as nghttp2's and h2's encoders do.
fn changes_every_response(name: &[u8]) -> bool {
    matches!(name, b"age")
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
    // Most indices fit the prefix: one octet, pushed here without the call.
    if value < (1 << prefix_bits) - 1 {
        out.push(pattern | value as u8);
        return;
    }
    field_coding::write_int(out, pattern, prefix_bits, value as u64);
}

/// Appends a string literal (§5.2), Huffman-coded when that is shorter.
fn encode_string(out: &mut Vec<u8>, s: &[u8]) {
    field_coding::write_string(out, 0, 7, s);
}

#[cfg(test)]
mod tests {
    use super::super::{Decoder, Encoder};

    type Fields = Vec<(Vec<u8>, Vec<u8>)>;
    type Response<'a> = (u16, Vec<(&'a [u8], &'a [u8])>);

    fn decode(d: &mut Decoder, block: &[u8]) -> Fields {
        let mut out = Vec::new();
        d.decode(block, &mut |n, v| out.push((n.to_vec(), v.to_vec())))
            .expect("the encoder's block decodes");
        out
    }

    /// Encodes a response (status, fields) as one block.
    fn block(e: &mut Encoder, status: u16, list: &[(&[u8], &[u8])]) -> Vec<u8> {
        let mut out = Vec::new();
        e.begin_block(&mut out);
        e.encode_status(status, &mut out);
        for (n, v) in list {
            e.encode_field(n, v, &mut out);
        }
        out
    }

    fn expected(status: u16, list: &[(&[u8], &[u8])]) -> Fields {
        let mut f = vec![(b":status".to_vec(), status.to_string().into_bytes())];
        f.extend(list.iter().map(|(n, v)| (n.to_vec(), v.to_vec())));
        f
    }

    #[test]
    fn static_statuses_take_one_octet_and_others_are_indexed_once_seen() {
        let mut e = Encoder::default();
        let mut d = Decoder::new(4096);
        for (status, index) in [
            (200, 8),
            (204, 9),
            (206, 10),
            (304, 11),
            (400, 12),
            (404, 13),
            (500, 14),
        ] {
            let b = block(&mut e, status, &[]);
            assert_eq!(b, [0x80 | index]);
            assert_eq!(decode(&mut d, &b), expected(status, &[]));
        }
        // 302: static name 8, with incremental indexing, then indexed.
        let b = block(&mut e, 302, &[]);
        assert_eq!(b[0], 0x48);
        assert_eq!(decode(&mut d, &b), expected(302, &[]));
        assert_eq!(block(&mut e, 302, &[]), [0xbe]);
        for status in [100, 101, 999, 1000, 65535] {
            let b = block(&mut e, status, &[]);
            assert_eq!(decode(&mut d, &b), expected(status, &[]));
        }
    }

    #[test]
    fn field_representations_follow_the_policy() {
        let mut e = Encoder::default();
        let mut d = Decoder::new(4096);
        let mut out = Vec::new();
        let mut first = |name: &[u8], value: &[u8]| {
            out.clear();
            e.encode_field(name, value, &mut out);
            assert_eq!(decode(&mut d, &out), [(name.to_vec(), value.to_vec())]);
            out[0]
        };
        // Exact static match: indexed.
        assert_eq!(first(b"accept-encoding", b"gzip, deflate"), 0x80 | 16);
        assert_eq!(first(b"accept-ranges", b""), 0x80 | 18);
        // Repeating field: incremental indexing with the static name.
        assert_eq!(first(b"content-type", b"text/html"), 0x40 | 31);
        // Then indexed from the dynamic table.
        assert_eq!(first(b"content-type", b"text/html"), 0x80 | 62);
        // Unknown name: incremental indexing with a literal name.
        assert_eq!(first(b"x-served-by", b"pier"), 0x40);
        assert_eq!(first(b"x-served-by", b"pier"), 0x80 | 62);
        // Same name, other value: the dynamic name index is used.
        assert_eq!(first(b"x-served-by", b"edge"), 0x40 | 62);
        assert_eq!(first(b"content-type", b"text/html"), 0x80 | 64);
        // Sensitive: never indexed, never in the table.
        assert_eq!(first(b"set-cookie", b"a=b"), 0x10 | 0x0f);
        assert_eq!(first(b"set-cookie", b"a=b"), 0x10 | 0x0f);
        assert_eq!(first(b"x-custom", b"1"), 0x40);
        assert_eq!(first(b"authorization", b"Basic x"), 0x10 | 0x0f);
        // Values that change every response: without indexing.
        assert_eq!(first(b"age", b"12"), 0x0f);
        // Values that repeat for a while: indexed, then one octet.
        assert_eq!(first(b"date", b"Mon, 21 Oct 2013 20:13:21 GMT"), 0x40 | 33);
        assert_eq!(
            first(b"date", b"Mon, 21 Oct 2013 20:13:21 GMT") & 0x80,
            0x80
        );
        assert_eq!(first(b"content-length", b"1234"), 0x40 | 28);
        // Long values: without indexing.
        assert_eq!(first(b"content-security-policy", &[b'x'; 65]), 0x00);
        assert_eq!(first(b"content-security-policy", &[b'x'; 64]), 0x40);
    }

    #[test]
    fn c5_responses_round_trip_within_a_256_octet_table() {
        let mut e = Encoder::default();
        e.set_peer_table_size(256);
        let mut d = Decoder::new(256);
        let cookie: &[u8] = b"foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1";
        let responses: [Response; 3] = [
            (
                302,
                vec![
                    (b"cache-control", b"private"),
                    (b"date", b"Mon, 21 Oct 2013 20:13:21 GMT"),
                    (b"location", b"https://www.example.com"),
                ],
            ),
            (
                307,
                vec![
                    (b"cache-control", b"private"),
                    (b"date", b"Mon, 21 Oct 2013 20:13:21 GMT"),
                    (b"location", b"https://www.example.com"),
                ],
            ),
            (
                200,
                vec![
                    (b"cache-control", b"private"),
                    (b"date", b"Mon, 21 Oct 2013 20:13:22 GMT"),
                    (b"location", b"https://www.example.com"),
                    (b"content-encoding", b"gzip"),
                    (b"set-cookie", cookie),
                ],
            ),
        ];
        for (i, (status, list)) in responses.iter().enumerate() {
            let b = block(&mut e, *status, list);
            if i == 0 {
                // The size update to 256 comes first.
                assert_eq!(&b[..3], [0x3f, 0xe1, 0x01]);
            }
            assert_eq!(decode(&mut d, &b), expected(*status, list));
            assert!(e.table().size() <= 256);
        }
    }

    #[test]
    fn shrinking_the_peer_table_sends_updates_at_the_next_block() {
        let mut e = Encoder::default();
        let mut d = Decoder::new(4096);
        let b = block(&mut e, 200, &[(b"x-a", b"1"), (b"x-b", b"2")]);
        decode(&mut d, &b);
        assert_eq!(e.table().len(), 2);
        // Down to 0 then up to 100 between blocks: both are signalled.
        e.set_peer_table_size(0);
        e.set_peer_table_size(100);
        let b = block(&mut e, 200, &[(b"x-a", b"1")]);
        assert_eq!(&b[..3], [0x20, 0x3f, 0x45]);
        assert_eq!(decode(&mut d, &b), expected(200, &[(b"x-a", b"1")]));
        assert_eq!(e.table().max_size(), 100);
        // The peer allowing more than ours changes nothing past 4096.
        e.set_peer_table_size(1 << 20);
        let b = block(&mut e, 204, &[]);
        assert_eq!(&b[..3], [0x3f, 0xe1, 0x1f]);
        assert_eq!(block(&mut e, 204, &[]), [0x89]);
        // A peer that allows no table at all gets only literals.
        e.set_peer_table_size(0);
        let mut d0 = Decoder::new(0);
        let b = block(&mut e, 200, &[(b"x-a", b"1")]);
        assert_eq!(&b[..2], [0x20, 0x88]);
        assert_eq!(decode(&mut d0, &b), expected(200, &[(b"x-a", b"1")]));
        assert_eq!(e.table().len(), 0);
    }

    #[test]
    fn remembered_fields_are_one_octet_and_never_stale_after_eviction() {
        // 100 octets hold two 36-octet entries, not three.
        let mut e = Encoder::default();
        e.set_peer_table_size(100);
        let mut d = Decoder::new(100);
        let mut send = |e: &mut Encoder, list: &[(&[u8], &[u8])]| {
            let b = block(e, 200, list);
            assert_eq!(decode(&mut d, &b), expected(200, list));
            assert_eq!(e.table().size(), d.table().size(), "the tables agree");
            b
        };
        let first = send(&mut e, &[(b"x-a", b"1")]);
        assert_eq!(first[3], 0x40, "inserted after the size update");
        assert_eq!(send(&mut e, &[(b"x-a", b"1")]), [0x88, 0xbe]);
        // `x-b: 2` shares the memo slot of `x-a: 1`: both still found.
        assert_eq!(send(&mut e, &[(b"x-b", b"2")])[1], 0x40);
        assert_eq!(send(&mut e, &[(b"x-a", b"1")]), [0x88, 0xbf]);
        assert_eq!(send(&mut e, &[(b"x-b", b"2")]), [0x88, 0xbe]);
        // Two more entries evict both: the memo must not name them.
        send(&mut e, &[(b"x-c", b"3"), (b"x-d", b"4")]);
        assert_eq!(e.table().len(), 2);
        let b = send(&mut e, &[(b"x-a", b"1")]);
        assert_eq!(b[1], 0x40, "sent as a literal and inserted again");
        assert_eq!(send(&mut e, &[(b"x-a", b"1")]), [0x88, 0xbe]);
        // An entry that takes the evicted one's place is checked, not
        // trusted by its position.
        send(&mut e, &[(b"x-e", b"5"), (b"x-f", b"6")]);
        let b = send(&mut e, &[(b"x-a", b"1")]);
        assert_eq!(b[1], 0x40);
    }

    #[test]
    fn remembered_fields_follow_the_peers_table_size_changes() {
        let mut e = Encoder::default();
        let mut d = Decoder::new(4096);
        let list: &[(&[u8], &[u8])] = &[(b"server", b"pier"), (b"content-length", b"13")];
        let b = block(&mut e, 200, list);
        assert_eq!(decode(&mut d, &b), expected(200, list));
        assert_eq!(block(&mut e, 200, list), [0x88, 0xbf, 0xbe]);
        // The peer allows no table: its size update empties both tables and
        // the memo's entries are gone with them.
        e.set_peer_table_size(0);
        let b = block(&mut e, 200, list);
        assert_eq!(b[0], 0x20, "the size update comes first");
        assert_eq!(decode(&mut d, &b), expected(200, list));
        assert_eq!((e.table().len(), d.table().size()), (0, 0));
        // Allowed again: inserted once more, then one octet each.
        e.set_peer_table_size(4096);
        let b = block(&mut e, 200, list);
        assert_eq!(decode(&mut d, &b), expected(200, list));
        assert_eq!(e.table().len(), 2);
        assert_eq!(block(&mut e, 200, list), [0x88, 0xbf, 0xbe]);
        // Shrunk to hold only the newer entry: the older is evicted on
        // both sides and sent as a literal again.
        e.set_peer_table_size(50);
        let b = block(&mut e, 200, list);
        assert_eq!(decode(&mut d, &b), expected(200, list));
        assert_eq!(e.table().size(), d.table().size());
        let b = block(&mut e, 200, list);
        assert_eq!(decode(&mut d, &b), expected(200, list));
        assert_eq!(e.table().size(), d.table().size());
    }

    /// A small deterministic generator (xorshift), so the test needs no
    /// dependency and fails the same way every time.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    #[test]
    fn random_responses_round_trip_through_small_tables() {
        let names: [&[u8]; 12] = [
            b"content-type",
            b"cache-control",
            b"x-a",
            b"x-longer-custom-name",
            b"set-cookie",
            b"date",
            b"server",
            b"vary",
            b"location",
            b"x-b",
            b":status",
            b"content-length",
        ];
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for peer_size in [0u32, 40, 100, 256, 4096] {
            let mut e = Encoder::default();
            e.set_peer_table_size(peer_size);
            let mut d = Decoder::new(peer_size);
            for _ in 0..500 {
                let status = [200, 302, 404, 418, 503][rng.below(5)];
                let count = rng.below(8);
                let mut owned = Vec::new();
                for _ in 0..count {
                    let name = names[rng.below(names.len())];
                    let len = [0, 1, 5, 20, 70][rng.below(5)];
                    // Few distinct values, so many repeat and hit the table.
                    let seed = rng.below(4) as u8;
                    let value: Vec<u8> = (0..len)
                        .map(|i| {
                            if seed == 3 {
                                rng.below(256) as u8
                            } else {
                                b'a' + (seed + i as u8) % 26
                            }
                        })
                        .collect();
                    owned.push((name, value));
                }
                let list: Vec<(&[u8], &[u8])> =
                    owned.iter().map(|(n, v)| (*n, v.as_slice())).collect();
                let b = block(&mut e, status, &list);
                assert_eq!(decode(&mut d, &b), expected(status, &list));
                assert!(e.table().size() <= peer_size as usize);
                assert_eq!(e.table().size(), d.table().size(), "the tables agree");
            }
        }
    }
}
