//! The WebSocket handshake's key and its answer, for an HTTP/2 extended
//! CONNECT relayed to an HTTP/1.1 upstream as an upgrade: the HTTP/2
//! client sends no `Sec-WebSocket-Key` (RFC 8441 §5), so the proxy makes
//! one for the upstream request and checks the upstream's
//! `Sec-WebSocket-Accept` against it (RFC 6455 §4.1, §4.2.2).

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
        let mut ctx = digest::Context::new(&digest::SHA1_FOR_LEGACY_USE_ONLY);
        ctx.update(&self.0);
        ctx.update(ACCEPT_GUID);
        let mut want = [0u8; 28];
        data_encoding::BASE64.encode_mut(ctx.finish().as_ref(), &mut want);
        accept.trim_ascii() == want
    }
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
        let a = WebSocketKey::random().unwrap();
        assert_ne!(a, WebSocketKey::random().unwrap());
    }
}
