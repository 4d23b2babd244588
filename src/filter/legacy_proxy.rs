//! Response filters for the proxy while it still writes its response head
//! itself on the HTTP/1 connection instead of through the session. The
//! request head is copied when the proxy takes the connection, since the
//! proxy consumes the read buffer before the upstream answers; the filters
//! then edit the upstream's head as they edit any other. This goes away once
//! the proxy answers through [`crate::http::Session::send_response`].

use std::net::SocketAddr;

use super::{BoxedFilter, HeadEdit};
use crate::http::{RequestId, RequestView, TlsFacts};
use crate::http1::parse::RequestHead;

/// A filtered route's response filters and a copy of its request head.
pub struct ProxiedRequest<'h> {
    filters: &'h [BoxedFilter],
    head: RequestHead,
    bytes: Box<[u8]>,
    peer: SocketAddr,
    secure: bool,
}

impl<'h> ProxiedRequest<'h> {
    /// Copies the request head out of `req` for `filters`.
    pub fn new(filters: &'h [BoxedFilter], req: &RequestView<'_>) -> Self {
        let (head, buf) = req.http1_head();
        ProxiedRequest {
            filters,
            head: head.clone(),
            bytes: buf[..head.head_len.min(buf.len())].into(),
            peer: req.peer(),
            secure: req.is_secure(),
        }
    }

    /// Runs the response filters over the proxy's own answer with `status`
    /// and `fields` (a 502, a 503 with `Retry-After`): the fields to send.
    pub fn own_answer<'a>(
        &'a self,
        id: &RequestId,
        status: u16,
        fields: &'a [(&'a str, &'a [u8])],
    ) -> HeadEdit<'a> {
        let mut edit = HeadEdit::from_head(&crate::http::ResponseHead::new(status, fields));
        self.filter(id, &mut edit);
        edit
    }

    /// Runs the response filters over `edit`.
    pub fn filter<'a>(&'a self, id: &RequestId, edit: &mut HeadEdit<'a>) {
        let tls = self.secure.then(TlsFacts::default);
        let req = RequestView::http1(&self.head, &self.bytes, self.peer, tls);
        for f in self.filters {
            f.response_filter(&req, id, edit);
        }
    }
}
