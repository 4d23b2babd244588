//! Field names that framing and relaying treat specially, recognised with
//! one switch on the length and at most two comparisons: the response parser
//! classifies each field as it checks the framing, and the proxy's rewrites
//! go by the same classes, so a relayed head is walked once.

use super::grammar::eq_lowercase;

/// A field name a parser or the proxy treats specially.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FieldName {
    /// `Connection`: hop-by-hop, and names further hop-by-hop fields.
    Connection,
    /// `Upgrade`: hop-by-hop, passed on only for an upgrade the proxy relays.
    Upgrade,
    /// `Transfer-Encoding`: framing, hop-by-hop.
    TransferEncoding,
    /// Never forwarded as received, in either direction (RFC 9110 §7.6.1):
    /// `Keep-Alive`, `Proxy-Connection`, `TE`, `Trailer`.
    HopByHop,
    /// `Content-Length`: framing the proxy writes itself.
    ContentLength,
    /// `Host`.
    Host,
    /// `Expect`.
    Expect,
    /// `Date`.
    Date,
    /// `Server`.
    Server,
    /// `X-Forwarded-For`.
    XForwardedFor,
    /// `X-Forwarded-Proto`.
    XForwardedProto,
    /// `X-Forwarded-Host`.
    XForwardedHost,
    /// Anything else: end-to-end unless a `Connection` field names it.
    #[default]
    Other,
}

impl FieldName {
    /// The class of the field named `name` (any case).
    pub fn of(name: &[u8]) -> FieldName {
        let is = |lower: &[u8]| eq_lowercase(name, lower);
        match name.len() {
            2 if is(b"te") => FieldName::HopByHop,
            4 if is(b"host") => FieldName::Host,
            4 if is(b"date") => FieldName::Date,
            6 if is(b"server") => FieldName::Server,
            6 if is(b"expect") => FieldName::Expect,
            7 if is(b"upgrade") => FieldName::Upgrade,
            7 if is(b"trailer") => FieldName::HopByHop,
            10 if is(b"connection") => FieldName::Connection,
            10 if is(b"keep-alive") => FieldName::HopByHop,
            14 if is(b"content-length") => FieldName::ContentLength,
            15 if is(b"x-forwarded-for") => FieldName::XForwardedFor,
            16 if is(b"proxy-connection") => FieldName::HopByHop,
            16 if is(b"x-forwarded-host") => FieldName::XForwardedHost,
            17 if is(b"transfer-encoding") => FieldName::TransferEncoding,
            17 if is(b"x-forwarded-proto") => FieldName::XForwardedProto,
            _ => FieldName::Other,
        }
    }

    /// Never forwarded as received, in either direction (RFC 9110 §7.6.1), plus
    /// the framing fields the proxy writes itself.
    pub fn is_hop_by_hop(self) -> bool {
        matches!(
            self,
            FieldName::Connection
                | FieldName::Upgrade
                | FieldName::TransferEncoding
                | FieldName::HopByHop
                | FieldName::ContentLength
        )
    }
}
