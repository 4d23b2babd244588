//! X.509 distinguished names as RFC 4514 strings (`CN=client,O=Example`), the form
//! nginx logs as `$ssl_client_s_dn` and proxies forward. Sans-IO: a small DER walker
//! over the subject bytes of a certificate that webpki has already verified; any
//! malformed input gives `None`, never a panic.

/// Formats the contents of a DER `Name` (the SEQUENCE body, without its tag and
/// length, as `webpki::EndEntityCert::subject` returns it). RDNs come out most
/// specific first, as RFC 4514 prescribes.
pub fn format_name(name: &[u8]) -> Option<String> {
    let mut rdns = Vec::new();
    for set in elements(name, 0x31)? {
        let mut parts = Vec::new();
        for atv in elements(set, 0x30)? {
            let (tag, oid, after) = read_tlv(atv)?;
            if tag != 0x06 {
                return None;
            }
            let (vtag, value, _) = read_tlv(after)?;
            let vlen = atv.len() - after.len();
            let raw_value = &atv[vlen..];
            parts.push(format!(
                "{}={}",
                attribute_name(oid)?,
                attribute_value(oid, vtag, value, raw_value)
            ));
        }
        rdns.push(parts.join("+"));
    }
    rdns.reverse();
    Some(rdns.join(","))
}

/// The contents of each element of a DER SEQUENCE or SET body, all of which
/// must carry `tag` (a SET of RDNs, a SEQUENCE per attribute).
fn elements(body: &[u8], tag: u8) -> Option<Vec<&[u8]>> {
    let mut out = Vec::new();
    let mut rest = body;
    while !rest.is_empty() {
        let (t, contents, after) = read_tlv(rest)?;
        if t != tag {
            return None;
        }
        out.push(contents);
        rest = after;
    }
    Some(out)
}

/// Reads one DER tag-length-value; returns (tag, contents, remainder).
fn read_tlv(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, mut rest) = rest.split_first()?;
    let len = if first < 0x80 {
        first as usize
    } else {
        let n = (first & 0x7f) as usize;
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let mut len = 0usize;
        for &b in &rest[..n] {
            len = (len << 8) | b as usize;
        }
        rest = &rest[n..];
        len
    };
    if rest.len() < len {
        return None;
    }
    Some((tag, &rest[..len], &rest[len..]))
}

/// RFC 4514 short names, plus the ones OpenSSL prints; other types as dotted OIDs.
fn attribute_name(oid: &[u8]) -> Option<String> {
    let known = match oid {
        [0x55, 0x04, 0x03] => "CN",
        [0x55, 0x04, 0x06] => "C",
        [0x55, 0x04, 0x07] => "L",
        [0x55, 0x04, 0x08] => "ST",
        [0x55, 0x04, 0x09] => "STREET",
        [0x55, 0x04, 0x0a] => "O",
        [0x55, 0x04, 0x0b] => "OU",
        [0x55, 0x04, 0x05] => "serialNumber",
        [0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x19] => "DC",
        [0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x01] => "UID",
        [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x01] => "emailAddress",
        _ => return dotted_oid(oid),
    };
    Some(known.to_string())
}

fn dotted_oid(oid: &[u8]) -> Option<String> {
    let (&first, rest) = oid.split_first()?;
    let mut out = format!("{}.{}", first / 40, first % 40);
    let mut acc: u64 = 0;
    for &b in rest {
        if acc > (u64::MAX >> 7) {
            return None;
        }
        acc = (acc << 7) | u64::from(b & 0x7f);
        if b & 0x80 == 0 {
            out.push_str(&format!(".{acc}"));
            acc = 0;
        }
    }
    Some(out)
}

/// String types are escaped text; anything else is `#` and the hex of its DER, as
/// RFC 4514 section 2.4 asks for unknown types.
fn attribute_value(oid: &[u8], tag: u8, value: &[u8], der: &[u8]) -> String {
    let text = match tag {
        // UTF8String, PrintableString, IA5String, TeletexString (treated as Latin-1
        // would mangle little in practice; non-ASCII bytes are hex-escaped below).
        0x0c | 0x13 | 0x16 | 0x14 => Some(String::from_utf8_lossy(value).into_owned()),
        // BMPString: UTF-16BE.
        0x1e if value.len() % 2 == 0 => {
            let units: Vec<u16> = value
                .chunks_exact(2)
                .map(|c| u16::from_be_bytes([c[0], c[1]]))
                .collect();
            String::from_utf16(&units).ok()
        }
        _ => None,
    };
    match text {
        Some(t) if attribute_name(oid).is_some() => escape_dn_value(&t),
        _ => {
            let mut s = String::from("#");
            for b in der {
                s.push_str(&format!("{b:02x}"));
            }
            s
        }
    }
}

fn escape_dn_value(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    let last = v.chars().count().saturating_sub(1);
    for (i, c) in v.chars().enumerate() {
        match c {
            ',' | '+' | '"' | '\\' | '<' | '>' | ';' | '=' => {
                out.push('\\');
                out.push(c);
            }
            '#' | ' ' if i == 0 => {
                out.push('\\');
                out.push(c);
            }
            ' ' if i == last => out.push_str("\\ "),
            c if c.is_control() => {
                let mut b = [0u8; 4];
                for byte in c.encode_utf8(&mut b).bytes() {
                    out.push_str(&format!("\\{byte:02x}"));
                }
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tlv(tag: u8, body: &[u8]) -> Vec<u8> {
        let mut v = vec![tag];
        if body.len() < 0x80 {
            v.push(body.len() as u8);
        } else {
            v.push(0x82);
            v.extend_from_slice(&(body.len() as u16).to_be_bytes());
        }
        v.extend_from_slice(body);
        v
    }

    fn rdn(oid: &[u8], tag: u8, value: &[u8]) -> Vec<u8> {
        let mut atv = tlv(0x06, oid);
        atv.extend(tlv(tag, value));
        tlv(0x31, &tlv(0x30, &atv))
    }

    #[test]
    fn formats_most_specific_first_and_escapes() {
        let mut name = rdn(&[0x55, 4, 6], 0x13, b"DE");
        name.extend(rdn(&[0x55, 4, 10], 0x0c, b"Acme, Inc."));
        name.extend(rdn(&[0x55, 4, 3], 0x0c, b" client#1"));
        assert_eq!(
            format_name(&name).unwrap(),
            "CN=\\ client#1,O=Acme\\, Inc.,C=DE"
        );
    }

    #[test]
    fn unknown_types_are_dotted_with_hex_values() {
        let name = rdn(&[0x2b, 0x06, 0x01, 0x04, 0x01, 0x82, 0x37], 0x04, &[1, 2]);
        assert_eq!(format_name(&name).unwrap(), "1.3.6.1.4.1.311=#04020102");
    }

    #[test]
    fn long_lengths_and_bmp_strings() {
        let long = vec![b'a'; 200];
        let name = rdn(&[0x55, 4, 3], 0x0c, &long);
        assert_eq!(format_name(&name).unwrap().len(), 3 + 200);
        let bmp = rdn(&[0x55, 4, 3], 0x1e, &[0, b'h', 0, b'i']);
        assert_eq!(format_name(&bmp).unwrap(), "CN=hi");
    }

    #[test]
    fn malformed_input_is_none_not_a_panic() {
        let good = rdn(&[0x55, 4, 3], 0x0c, b"x");
        for n in 0..good.len() {
            let _ = format_name(&good[..n]);
        }
        assert!(format_name(&[0x31, 0x85, 1, 1, 1, 1, 1]).is_none());
        assert!(format_name(&[0x30, 0x00]).is_none());
        assert_eq!(format_name(&[]).unwrap(), "");
    }
}
