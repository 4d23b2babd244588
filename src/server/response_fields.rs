//! The fields of a response head as HTTP/2 and HTTP/3 carry them: names in
//! lowercase, no connection-specific fields, a length in decimal.

/// Fields that describe a connection, not a message: never sent over HTTP/2
/// or HTTP/3 (RFC 9113 §8.2.2, RFC 9114 §4.2), whatever a handler or an
/// upstream put in a head.
const CONNECTION_FIELDS: [&str; 6] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
    "te",
];

/// Whether HTTP/2 and HTTP/3 carry a field of this name (connection-specific fields
/// are left out).
pub(crate) fn carried(name: &str) -> bool {
    !CONNECTION_FIELDS
        .iter()
        .any(|c| c.eq_ignore_ascii_case(name))
}

/// `fields` as HTTP/2 and HTTP/3 take them, names lowercase, connection-specific ones
/// left out.
pub(crate) fn lowercase_fields<'f>(
    fields: impl Iterator<Item = (&'f str, &'f [u8])>,
) -> Vec<(Vec<u8>, &'f [u8])> {
    fields
        .filter(|(n, _)| carried(n))
        .map(|(n, v)| (n.as_bytes().to_ascii_lowercase(), v))
        .collect()
}

/// Bytes of lowered names a head keeps on the stack ([`LoweredFields`]).
const LOWERED_BYTES: usize = 512;
/// Fields a head keeps on the stack ([`LoweredFields`]).
const LOWERED_FIELDS: usize = 16;

/// `fields` as HTTP/2 and HTTP/3 take them (names lowercase, connection-specific
/// ones left out), lowered into a buffer on the stack: a head with a name in
/// capitals (a proxied one, usually) costs no allocation. A head whose names
/// do not fit goes to a vector, as [`lowercase_fields`] makes.
pub(crate) struct LoweredFields<'f> {
    names: [u8; LOWERED_BYTES],
    /// Where each field's name is in `names`, and its value.
    fields: [(u16, u16, &'f [u8]); LOWERED_FIELDS],
    len: usize,
    spilled: Vec<(Vec<u8>, &'f [u8])>,
}

impl<'f> LoweredFields<'f> {
    /// Lowers the names of `fields`.
    pub(crate) fn of(fields: impl Iterator<Item = (&'f str, &'f [u8])>) -> Self {
        let mut lowered = LoweredFields {
            names: [0; LOWERED_BYTES],
            fields: [(0, 0, &[]); LOWERED_FIELDS],
            len: 0,
            spilled: Vec::new(),
        };
        let mut at = 0;
        for (name, value) in fields.filter(|(n, _)| carried(n)) {
            if lowered.spilled.is_empty() {
                let end = at + name.len();
                if let (Some(dst), Some(slot)) = (
                    lowered.names.get_mut(at..end),
                    lowered.fields.get_mut(lowered.len),
                ) {
                    dst.copy_from_slice(name.as_bytes());
                    dst.make_ascii_lowercase();
                    *slot = (at as u16, end as u16, value);
                    lowered.len += 1;
                    at = end;
                    continue;
                }
                // Out of room: what was lowered moves to the vector, in order.
                let kept: Vec<_> = lowered.iter().map(|(n, v)| (n.to_vec(), v)).collect();
                lowered.spilled = kept;
                lowered.len = 0;
            }
            lowered
                .spilled
                .push((name.as_bytes().to_ascii_lowercase(), value));
        }
        lowered
    }

    /// The fields in order, names lowercase.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&[u8], &'f [u8])> {
        self.fields
            .get(..self.len)
            .unwrap_or_default()
            .iter()
            .map(|&(start, end, value)| {
                let name = self.names.get(start as usize..end as usize);
                (name.unwrap_or_default(), value)
            })
            .chain(self.spilled.iter().map(|(n, v)| (n.as_slice(), *v)))
    }
}

/// Writes `n` in decimal into `out`, returning the digits.
pub(crate) fn decimal(n: u64, out: &mut [u8; 20]) -> &[u8] {
    let mut i = out.len();
    let mut n = n;
    loop {
        i -= 1;
        out[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    &out[i..]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lowered<'f>(fields: &[(&'f str, &'f [u8])]) -> Vec<(Vec<u8>, &'f [u8])> {
        let l = LoweredFields::of(fields.iter().copied());
        l.iter().map(|(n, v)| (n.to_vec(), v)).collect()
    }

    #[test]
    fn names_are_lowered_on_the_stack_or_in_a_vector_alike() {
        let few: [(&str, &[u8]); 3] = [
            ("Content-Type", b"text/plain"),
            ("Connection", b"close"),
            ("X-Up", b"1"),
        ];
        assert_eq!(lowered(&few), lowercase_fields(few.iter().copied()));
        assert_eq!(
            lowered(&few),
            [
                (b"content-type".to_vec(), &b"text/plain"[..]),
                (b"x-up".to_vec(), &b"1"[..])
            ]
        );
        // More fields than the stack holds, and names longer than it holds.
        let names: Vec<String> = (0..40).map(|i| format!("X-Field-{i}")).collect();
        let many: Vec<(&str, &[u8])> = names.iter().map(|n| (n.as_str(), &b"v"[..])).collect();
        assert_eq!(lowered(&many), lowercase_fields(many.iter().copied()));
        let long = "X-".repeat(300);
        let wide: [(&str, &[u8]); 3] = [("A", b"1"), (&long, b"2"), ("B", b"3")];
        assert_eq!(lowered(&wide), lowercase_fields(wide.iter().copied()));
        assert_eq!(lowered(&wide).len(), 3);
    }
}
