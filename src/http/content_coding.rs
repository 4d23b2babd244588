//! Content codings (RFC 9110 §8.4) and the choice among them by a request's
//! `Accept-Encoding` (§12.5.3): shared by the compression filter, which
//! encodes on the fly, and the static handler, which serves precompressed
//! siblings (`file.br`, `file.zst`, `file.gz`).

/// A content coding Pier can produce, in the order preferred when a client
/// weighs several equally: zstd decodes fastest and packs about as well as
/// brotli at the levels used on the fly, brotli packs text better than gzip.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Coding {
    /// `zstd` (RFC 8878).
    Zstd,
    /// `br` (RFC 7932).
    Br,
    /// `gzip` (RFC 1952).
    Gzip,
}

impl Coding {
    /// Every coding, most preferred first.
    pub const ALL: [Coding; 3] = [Coding::Zstd, Coding::Br, Coding::Gzip];

    /// The token in `Accept-Encoding` and `Content-Encoding`.
    pub fn token(self) -> &'static str {
        match self {
            Coding::Zstd => "zstd",
            Coding::Br => "br",
            Coding::Gzip => "gzip",
        }
    }

    /// The file name suffix of a file precompressed with this coding.
    pub fn file_suffix(self) -> &'static str {
        match self {
            Coding::Zstd => ".zst",
            Coding::Br => ".br",
            Coding::Gzip => ".gz",
        }
    }

    /// The coding a configuration names (`"br"`, `"zstd"`, `"gzip"`).
    pub fn from_name(name: &str) -> Option<Coding> {
        Coding::ALL
            .into_iter()
            .find(|c| c.token().eq_ignore_ascii_case(name))
    }
}

/// What a client accepts among the codings on offer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Negotiated {
    /// The coding to send, or `None` for the content as it is.
    pub coding: Option<Coding>,
    /// The client refused the content as it is (`identity;q=0`, or `*;q=0`
    /// without an `identity` entry): worth encoding even when small.
    pub identity_refused: bool,
}

/// Chooses among `offered` (ties broken by its order) by an
/// `Accept-Encoding` value; `None` (no field) accepts only the content as it
/// is, as RFC 9110 allows a server to assume. A coding with `q=0` is never
/// chosen; `*` stands for every coding not named; `x-gzip` is `gzip`. When the
/// client weighs `identity` above every coding on offer, nothing is encoded.
pub fn negotiate(accept: Option<&[u8]>, offered: &[Coding]) -> Negotiated {
    let none = Negotiated {
        coding: None,
        identity_refused: false,
    };
    let Some(accept) = accept else {
        return none;
    };
    // Weights in thousandths; `None` when the coding is not named.
    let mut weights: [Option<u16>; 3] = [None; 3];
    let mut star: Option<u16> = None;
    let mut identity: Option<u16> = None;
    for (name, q) in entries(accept) {
        let slot = match name {
            n if n.eq_ignore_ascii_case(b"identity") => &mut identity,
            b"*" => &mut star,
            n if n.eq_ignore_ascii_case(b"x-gzip") => &mut weights[index(Coding::Gzip)],
            n => match Coding::ALL
                .into_iter()
                .find(|c| n.eq_ignore_ascii_case(c.token().as_bytes()))
            {
                Some(c) => &mut weights[index(c)],
                None => continue,
            },
        };
        // Named twice: the higher weight counts.
        *slot = Some(slot.map_or(q, |old| old.max(q)));
    }
    let mut best: Option<(Coding, u16)> = None;
    for &c in offered {
        let q = weights[index(c)].or(star).unwrap_or(0);
        if q > 0 && best.is_none_or(|(_, b)| q > b) {
            best = Some((c, q));
        }
    }
    let identity_refused = match identity {
        Some(q) => q == 0,
        None => star == Some(0),
    };
    match best {
        Some((_, q)) if identity.is_some_and(|i| i > q) => none,
        Some((c, _)) => Negotiated {
            coding: Some(c),
            identity_refused,
        },
        None => Negotiated {
            coding: None,
            identity_refused,
        },
    }
}

fn index(c: Coding) -> usize {
    match c {
        Coding::Zstd => 0,
        Coding::Br => 1,
        Coding::Gzip => 2,
    }
}

/// The `coding;q=w` elements of an `Accept-Encoding` value, weights in
/// thousandths (an unreadable weight counts as 0: the coding is not taken).
fn entries(value: &[u8]) -> impl Iterator<Item = (&[u8], u16)> {
    value.split(|&b| b == b',').filter_map(|element| {
        let mut parts = element.split(|&b| b == b';');
        let name = trim(parts.next()?);
        if name.is_empty() {
            return None;
        }
        let mut q = 1000;
        for param in parts {
            let param = trim(param);
            if param.len() >= 2 && param[..2].eq_ignore_ascii_case(b"q=") {
                q = parse_qvalue(trim(&param[2..])).unwrap_or(0);
            }
        }
        Some((name, q))
    })
}

/// `qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] )`, in thousandths.
fn parse_qvalue(v: &[u8]) -> Option<u16> {
    let (int, frac) = match v.iter().position(|&b| b == b'.') {
        Some(dot) => (&v[..dot], &v[dot + 1..]),
        None => (v, &[][..]),
    };
    if int.len() != 1 || frac.len() > 3 || !frac.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut thousandths = 0u16;
    for i in 0..3 {
        thousandths = thousandths * 10 + frac.get(i).map_or(0, |d| u16::from(d - b'0'));
    }
    match int[0] {
        b'0' => Some(thousandths),
        b'1' if thousandths == 0 => Some(1000),
        _ => None,
    }
}

fn trim(b: &[u8]) -> &[u8] {
    let start = b
        .iter()
        .position(|c| !c.is_ascii_whitespace())
        .unwrap_or(b.len());
    let end = b
        .iter()
        .rposition(|c| !c.is_ascii_whitespace())
        .map_or(start, |i| i + 1);
    &b[start..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pick(accept: &str) -> Option<&'static str> {
        negotiate(Some(accept.as_bytes()), &Coding::ALL)
            .coding
            .map(Coding::token)
    }

    #[test]
    fn equal_weights_prefer_zstd_then_br_then_gzip() {
        assert_eq!(pick("gzip, deflate, br, zstd"), Some("zstd"));
        assert_eq!(pick("gzip, br"), Some("br"));
        assert_eq!(pick("gzip"), Some("gzip"));
        assert_eq!(pick("x-gzip"), Some("gzip"));
        assert_eq!(pick("GZIP;Q=1.0"), Some("gzip"));
        assert_eq!(pick("deflate, compress"), None);
        assert_eq!(negotiate(None, &Coding::ALL).coding, None);
        assert_eq!(pick(""), None);
    }

    #[test]
    fn weights_decide_before_the_preference_order() {
        assert_eq!(pick("zstd;q=0.5, br;q=0.8, gzip;q=0.9"), Some("gzip"));
        assert_eq!(pick("zstd;q=0.501, br;q=0.5"), Some("zstd"));
        assert_eq!(pick("br;q=0, gzip"), Some("gzip"));
        // A zero weight refuses the coding, and so does an unreadable one
        // rather than guess.
        for refused in ["gzip;q=0", "gzip;q=0.000", "gzip;q=2", "gzip;q=0.1234"] {
            assert_eq!(pick(refused), None, "{refused}");
        }
        assert_eq!(pick("gzip;q=abc, br;q=0.1"), Some("br"));
    }

    #[test]
    fn star_stands_for_codings_not_named() {
        assert_eq!(pick("*"), Some("zstd"));
        assert_eq!(pick("zstd;q=0, *"), Some("br"));
        assert_eq!(pick("gzip, *;q=0"), Some("gzip"));
        assert_eq!(pick("*;q=0"), None);
    }

    #[test]
    fn identity_weighed_above_every_coding_keeps_the_content_as_is() {
        assert_eq!(pick("gzip;q=0.5, identity"), None);
        assert_eq!(pick("gzip, identity;q=0.5"), Some("gzip"));
        let refused = negotiate(Some(b"gzip, identity;q=0"), &Coding::ALL);
        assert_eq!(refused.coding, Some(Coding::Gzip));
        assert!(refused.identity_refused);
        assert!(negotiate(Some(b"br, *;q=0"), &Coding::ALL).identity_refused);
        assert!(!negotiate(Some(b"br, *;q=0, identity"), &Coding::ALL).identity_refused);
        assert!(!negotiate(Some(b"br"), &Coding::ALL).identity_refused);
    }

    #[test]
    fn the_offer_limits_the_choice_and_its_order_breaks_ties() {
        assert_eq!(
            negotiate(Some(b"zstd, br, gzip"), &[Coding::Gzip, Coding::Br]).coding,
            Some(Coding::Gzip)
        );
        assert_eq!(
            negotiate(Some(b"zstd"), &[Coding::Gzip, Coding::Br]).coding,
            None
        );
        assert_eq!(negotiate(Some(b"gzip"), &[]).coding, None);
    }

    #[test]
    fn configuration_names_map_to_codings() {
        assert_eq!(Coding::from_name("br"), Some(Coding::Br));
        assert_eq!(Coding::from_name("ZSTD"), Some(Coding::Zstd));
        assert_eq!(Coding::from_name("deflate"), None);
        assert_eq!(Coding::Zstd.file_suffix(), ".zst");
    }
}
