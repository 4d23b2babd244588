//! The file a disk-tier object lives in: a magic, a header with what a hit
//! and freshness need (key, status, field lines, `Vary` selection, lifetime,
//! age and when it was stored), then the body as it is sent, so a hit sends
//! a region of the file by `sendfile`. The header is read back at start to
//! rebuild the index; a file whose length does not match what its header
//! promises (a crash mid-write, a truncation) is not believed.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::control::ResponseDirectives;
use super::entry::{kept_date, StoredResponse, VarySelection};
use crate::http::response::split_field_lines;

/// First bytes of every object file; the last byte is the format version:
/// 2 added the kept `Date`, 3 the directives the cache acts on (they may come
/// from a targeted field, RFC 9213). Files of earlier versions are still read.
const MAGIC: &[u8; 8] = b"PIERC\0\0\x03";

/// The format version of the files of earlier releases still read.
const OLDEST_VERSION: u8 = 1;

/// Largest header believed: a head is bounded far below this by the proxy.
const MAX_HEADER: usize = 1 << 20;

/// What the header of an object file says, and where its body starts.
pub struct ObjectHead {
    /// The response as the index keeps it: its body is not in memory
    /// (`body` is empty, `body_len` the length on disk).
    pub meta: StoredResponse,
    /// Offset of the body in the file.
    pub body_offset: u64,
    /// When it was stored, by the wall clock (survives a restart).
    pub stored_wall: SystemTime,
}

/// The bytes before the body of `entry`'s file.
pub fn encode_head(entry: &StoredResponse, now: Instant, wall: SystemTime) -> Vec<u8> {
    let stored_wall = wall
        .checked_sub(now.saturating_duration_since(entry.stored_at))
        .unwrap_or(wall);
    let mut h = Vec::with_capacity(64 + entry.key.len() + entry.fields.len());
    put_u64(&mut h, entry.body_len);
    put_u64(
        &mut h,
        millis(stored_wall.duration_since(UNIX_EPOCH).unwrap_or_default()),
    );
    put_u64(&mut h, millis(entry.lifetime));
    put_u64(&mut h, millis(entry.initial_age));
    h.extend_from_slice(&entry.status.to_le_bytes());
    put_bytes(&mut h, &entry.key);
    put_bytes(&mut h, &entry.fields);
    put_u64(&mut h, entry.vary.len() as u64);
    for (name, value) in entry.vary.iter() {
        put_bytes(&mut h, name.as_bytes());
        match value {
            Some(v) => {
                h.push(1);
                put_bytes(&mut h, v);
            }
            None => h.push(0),
        }
    }
    put_bytes(&mut h, entry.date.as_ref().map_or(&[][..], |d| &d[..]));
    put_directives(&mut h, &entry.directives);
    let mut out = Vec::with_capacity(12 + h.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(h.len() as u32).to_le_bytes());
    out.extend_from_slice(&h);
    out
}

/// Reads the header of `file` (`len` bytes long); `Ok(None)` when it is not
/// a whole object file of this format. `key_hash` names the key for the
/// eviction queues.
pub fn read_head(
    file: &File,
    len: u64,
    key_hash: impl Fn(&[u8]) -> u64,
    now: Instant,
    wall: SystemTime,
) -> io::Result<Option<ObjectHead>> {
    let mut start = [0u8; 12];
    if len < 12 || !read_exact_at(file, &mut start, 0)? || start[..7] != MAGIC[..7] {
        return Ok(None);
    }
    let version = start[7];
    if !(OLDEST_VERSION..=MAGIC[7]).contains(&version) {
        return Ok(None);
    }
    let header_len = u32::from_le_bytes([start[8], start[9], start[10], start[11]]) as usize;
    if header_len > MAX_HEADER || 12 + header_len as u64 > len {
        return Ok(None);
    }
    let mut header = vec![0u8; header_len];
    if !read_exact_at(file, &mut header, 12)? {
        return Ok(None);
    }
    let body_offset = 12 + header_len as u64;
    Ok(decode_head(
        version,
        &header,
        body_offset,
        len,
        key_hash,
        now,
        wall,
    ))
}

fn decode_head(
    version: u8,
    header: &[u8],
    body_offset: u64,
    file_len: u64,
    key_hash: impl Fn(&[u8]) -> u64,
    now: Instant,
    wall: SystemTime,
) -> Option<ObjectHead> {
    let mut r = Reader(header);
    let body_len = r.u64()?;
    if body_offset.checked_add(body_len)? != file_len {
        return None;
    }
    let stored_wall = UNIX_EPOCH + Duration::from_millis(r.u64()?);
    let lifetime = Duration::from_millis(r.u64()?);
    let initial_age = Duration::from_millis(r.u64()?);
    let status = u16::from_le_bytes(r.take(2)?.try_into().ok()?);
    let key: Box<[u8]> = r.bytes()?.into();
    let fields: Box<[u8]> = r.bytes()?.into();
    let n = r.u64()?;
    if n > 64 {
        return None;
    }
    let mut vary = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let name: Box<str> = std::str::from_utf8(r.bytes()?).ok()?.into();
        let value = match r.take(1)?[0] {
            0 => None,
            1 => Some(r.bytes()?.into()),
            _ => return None,
        };
        vary.push((name, value));
    }
    let date = if version >= 2 {
        match r.bytes()? {
            [] => None,
            d => Some(d.try_into().ok()?),
        }
    } else {
        // Files that kept no Date: the time the response was stored.
        Some(kept_date(None, stored_wall))
    };
    let directives = if version >= 3 {
        get_directives(&mut r)?
    } else {
        ResponseDirectives::parse(
            split_field_lines(&fields)
                .filter(|(n, _)| n.eq_ignore_ascii_case("cache-control"))
                .map(|(_, v)| v),
        )
    };
    if !r.0.is_empty() || !(100..1000).contains(&status) {
        return None;
    }
    // The time it spent on disk, this process down included, is age.
    let on_disk = wall.duration_since(stored_wall).unwrap_or_default();
    let vary: VarySelection = vary.into_boxed_slice();
    let key_hash = key_hash(&key);
    Some(ObjectHead {
        meta: StoredResponse {
            body_len,
            vary,
            directives,
            lifetime,
            initial_age: initial_age + on_disk,
            stored_at: now,
            date,
            ..StoredResponse::new(key, key_hash, status, fields)
        },
        body_offset,
        stored_wall,
    })
}

/// The directives' flags, then each delta-seconds directive as a presence
/// byte and its value.
fn put_directives(out: &mut Vec<u8>, d: &ResponseDirectives) {
    let flags = [
        d.no_store,
        d.no_cache,
        d.private,
        d.public,
        d.must_revalidate,
        d.proxy_revalidate,
    ];
    out.push(
        flags
            .iter()
            .enumerate()
            .fold(0u8, |f, (i, &on)| f | (u8::from(on) << i)),
    );
    for v in [
        d.max_age,
        d.s_maxage,
        d.stale_while_revalidate,
        d.stale_if_error,
    ] {
        out.push(u8::from(v.is_some()));
        put_u64(out, v.unwrap_or(0));
    }
}

fn get_directives(r: &mut Reader<'_>) -> Option<ResponseDirectives> {
    let flags = r.take(1)?[0];
    let on = |i: u8| flags & (1 << i) != 0;
    let mut seconds = [None; 4];
    for s in &mut seconds {
        let present = r.take(1)?[0] != 0;
        let v = r.u64()?;
        *s = present.then_some(v);
    }
    Some(ResponseDirectives {
        no_store: on(0),
        no_cache: on(1),
        private: on(2),
        public: on(3),
        must_revalidate: on(4),
        proxy_revalidate: on(5),
        max_age: seconds[0],
        s_maxage: seconds[1],
        stale_while_revalidate: seconds[2],
        stale_if_error: seconds[3],
    })
}

fn millis(d: Duration) -> u64 {
    d.as_millis().min(u64::MAX as u128) as u64
}

fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_u64(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// `false` at end of file before `buf` is full.
fn read_exact_at(file: &File, buf: &mut [u8], pos: u64) -> io::Result<bool> {
    match file.read_exact_at(buf, pos) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(false),
        Err(e) => Err(e),
    }
}

/// A cursor over a header; every read is checked against its end.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.0.len() {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = usize::try_from(self.u64()?).ok()?;
        self.take(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::Arc;

    fn entry(body: &[u8]) -> StoredResponse {
        let fields = *b"Cache-Control: max-age=60\r\nETag: \"v1\"\r\n";
        StoredResponse {
            body: Arc::new([body.into()]),
            body_len: body.len() as u64,
            vary: vec![
                ("accept-encoding".into(), Some((*b"gzip").into())),
                ("x-none".into(), None),
            ]
            .into_boxed_slice(),
            lifetime: Duration::from_secs(60),
            initial_age: Duration::from_secs(3),
            directives: ResponseDirectives::parse(std::iter::once(&b"max-age=60"[..])),
            date: Some(*b"Mon, 01 Jan 2024 00:00:00 GMT"),
            ..StoredResponse::new((*b"http://a.test/x").into(), 1, 200, fields.into())
        }
    }

    fn written(head: &[u8], body: &[u8]) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(head).unwrap();
        f.write_all(body).unwrap();
        f
    }

    #[test]
    fn a_written_head_reads_back_with_the_time_on_disk_as_age() {
        let e = entry(b"hello");
        let wall = SystemTime::now();
        let head = encode_head(&e, Instant::now(), wall);
        let f = written(&head, b"hello");
        let later = wall + Duration::from_secs(10);
        let len = f.as_file().metadata().unwrap().len();
        let back = read_head(f.as_file(), len, |_| 7, Instant::now(), later)
            .unwrap()
            .expect("a whole object file");
        assert_eq!(&*back.meta.key, &*e.key);
        assert_eq!(back.meta.status, 200);
        assert_eq!(&*back.meta.fields, &*e.fields);
        assert_eq!(back.meta.vary, e.vary);
        assert_eq!(back.meta.body_len, 5);
        assert_eq!(back.meta.key_hash, 7);
        assert_eq!(back.meta.lifetime, Duration::from_secs(60));
        let age = back.meta.initial_age.as_secs();
        assert!(
            (12..=14).contains(&age),
            "3 s old when stored, 10 s on disk: {age}"
        );
        assert_eq!(back.meta.directives.max_age, Some(60));
        assert_eq!(back.meta.etag.as_deref(), Some(&b"\"v1\""[..]));
        assert_eq!(back.meta.date, e.date, "the origin's Date is kept");
        assert_eq!(back.body_offset, head.len() as u64);
    }

    /// Bytes [`put_directives`] writes.
    const DIRECTIVES_LEN: usize = 1 + 4 * 9;

    #[test]
    fn the_directives_read_back_as_they_were_decided() {
        // Directives a targeted field gave, not the Cache-Control line.
        let e = StoredResponse {
            directives: ResponseDirectives {
                no_cache: true,
                proxy_revalidate: true,
                s_maxage: Some(7),
                stale_if_error: Some(0),
                ..ResponseDirectives::default()
            },
            ..entry(b"x")
        };
        let mut out = Vec::new();
        put_directives(&mut out, &e.directives);
        assert_eq!(out.len(), DIRECTIVES_LEN);
        let head = encode_head(&e, Instant::now(), SystemTime::now());
        let f = written(&head, b"x");
        let len = f.as_file().metadata().unwrap().len();
        let back = read_head(f.as_file(), len, |_| 0, Instant::now(), SystemTime::now())
            .unwrap()
            .expect("a whole object file");
        assert_eq!(back.meta.directives, e.directives);
    }

    #[test]
    fn a_file_of_the_first_version_reads_with_its_store_time_as_date() {
        let e = StoredResponse {
            date: None,
            ..entry(b"old")
        };
        let wall = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let mut head = encode_head(&e, e.stored_at, wall);
        // Version 1: no Date and no directives at the end of the header.
        head[7] = 1;
        head.truncate(head.len() - 8 - DIRECTIVES_LEN);
        let header_len = (head.len() - 12) as u32;
        head[8..12].copy_from_slice(&header_len.to_le_bytes());
        let f = written(&head, b"old");
        let len = f.as_file().metadata().unwrap().len();
        let back = read_head(f.as_file(), len, |_| 0, Instant::now(), wall)
            .unwrap()
            .expect("a version 1 file is still read");
        assert_eq!(
            back.meta.date.as_ref().map(|d| &d[..]),
            Some(&b"Tue, 14 Nov 2023 22:13:20 GMT"[..])
        );
        head[7] = 9;
        let f = written(&head, b"old");
        let unknown = read_head(f.as_file(), len, |_| 0, Instant::now(), wall).unwrap();
        assert!(unknown.is_none(), "a version this build does not know");
    }

    #[test]
    fn a_truncated_or_foreign_file_is_not_believed() {
        let e = entry(b"hello world");
        let head = encode_head(&e, Instant::now(), SystemTime::now());
        let read = |bytes: &[u8]| {
            let f = written(bytes, b"");
            read_head(
                f.as_file(),
                bytes.len() as u64,
                |_| 0,
                Instant::now(),
                SystemTime::now(),
            )
            .unwrap()
        };
        let mut whole = head.clone();
        whole.extend_from_slice(b"hello world");
        assert!(read(&whole).is_some());
        assert!(read(&whole[..whole.len() - 1]).is_none(), "body cut short");
        assert!(read(&head[..head.len() - 3]).is_none(), "header cut short");
        assert!(read(&head[..5]).is_none());
        assert!(read(b"").is_none());
        let mut longer = whole.clone();
        longer.push(b'!');
        assert!(read(&longer).is_none(), "more than the header promised");
        let mut foreign = whole.clone();
        foreign[0] = b'X';
        assert!(read(&foreign).is_none());
    }
}
