//! `respond`: a fixed status, header block and body from the config — health
//! checks and benchmarks. Everything but `Date` is encoded once at start.

/// A pre-encoded fixed response.
#[derive(Debug)]
pub struct Respond {
    status: u16,
    body: Box<[u8]>,
    /// `Name: value\r\n` lines, ready to copy.
    header_block: Box<[u8]>,
}

impl Respond {
    /// Encodes the header fields once; names and values were validated by the config.
    pub fn new(status: u16, body: Vec<u8>, headers: &[(String, String)]) -> Self {
        let mut block = Vec::new();
        for (name, value) in headers {
            block.extend_from_slice(name.as_bytes());
            block.extend_from_slice(b": ");
            block.extend_from_slice(value.as_bytes());
            block.extend_from_slice(b"\r\n");
        }
        Respond {
            status,
            body: body.into_boxed_slice(),
            header_block: block.into_boxed_slice(),
        }
    }

    /// Status code.
    pub fn status(&self) -> u16 {
        self.status
    }

    /// Body bytes.
    pub fn body(&self) -> &[u8] {
        &self.body
    }

    /// Encoded extra header lines.
    pub fn header_block(&self) -> &[u8] {
        &self.header_block
    }
}
