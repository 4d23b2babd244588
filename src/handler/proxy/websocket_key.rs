//! The WebSocket handshake's key and its answer, where the proxy changes
//! how a WebSocket opens (RFC 8441 §5): an HTTP/2 extended CONNECT relayed
//! to an HTTP/1.1 upstream as an upgrade has no `Sec-WebSocket-Key`, so the
//! proxy makes one for the upstream request and checks the upstream's
//! `Sec-WebSocket-Accept` against it (RFC 6455 §4.1, §4.2.2); an HTTP/1.1
//! upgrade carried to an HTTP/2 upstream as an extended CONNECT gets no
//! accept value back, so the proxy answers the client's key itself.

use aws_lc_rs::digest;

/// The GUID RFC 6455 §1.3 appends to a key before hashing it.
const ACCEPT_GUID: &[u8] = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// A `Sec-WebSocket-Key` value: 16 random bytes in base64.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WebSocketKey([u8; 24]);

impl WebSocketKey {
    /// A fresh key from the system's random source; `None` if it failed.
    pub(crate) fn random() -> Option<Self> {
        let mut nonce = [0u8; 16];
        aws_lc_rs::rand::fill(&mut nonce).ok()?;
        Some(Self::from_nonce(&nonce))
    }

    fn from_nonce(nonce: &[u8; 16]) -> Self {
        let mut key = [0u8; 24];
        data_encoding::BASE64.encode_mut(nonce, &mut key);
        WebSocketKey(key)
    }

    /// The key as sent.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// Whether `accept` is the server's answer to this key.
    pub(crate) fn accepts(&self, accept: &[u8]) -> bool {
        accept.trim_ascii() == accept_value(&self.0)
    }
}

/// The `Sec-WebSocket-Accept` that answers a client's `Sec-WebSocket-Key`
/// (RFC 6455 §4.2.2): an HTTP/1.1 handshake carried to an HTTP/2 upstream
/// as an extended CONNECT, whose answer has none, is answered with it.
pub(crate) fn accept_value(key: &[u8]) -> [u8; 28] {
    let mut ctx = digest::Context::new(&digest::SHA1_FOR_LEGACY_USE_ONLY);
    ctx.update(key.trim_ascii());
    ctx.update(ACCEPT_GUID);
    let mut accept = [0u8; 28];
    data_encoding::BASE64.encode_mut(ctx.finish().as_ref(), &mut accept);
    accept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rfc_6455_example_key_is_accepted_by_its_answer() {
        // RFC 6455 §1.3: "the sample nonce" and its accept value.
        let nonce = *b"the sample nonce";
        let key = WebSocketKey::from_nonce(&nonce);
        assert_eq!(key.as_bytes(), b"dGhlIHNhbXBsZSBub25jZQ==");
        assert!(key.accepts(b"s3pPLMBiTxaQ9kYGzzhZRbK+xOo="));
        assert!(!key.accepts(b"s3pPLMBiTxaQ9kYGzzhZRbK+xOp="));
        assert!(!key.accepts(b""));
        assert_eq!(
            &accept_value(b" dGhlIHNhbXBsZSBub25jZQ== "),
            b"s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
        let a = WebSocketKey::random().unwrap();
        assert_ne!(a, WebSocketKey::random().unwrap());
    }
}
