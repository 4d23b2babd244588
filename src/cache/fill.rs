//! Collapsed forwarding: the first miss for a key fetches it (the leader) and
//! publishes the response as it arrives; later misses for the key, on any
//! worker, follow: they wait for the head, then stream the body chunk by chunk
//! as it is stored. Progress is a `tokio::sync::watch` value, which wakes
//! tasks of any runtime, so followers on other workers need no channel of
//! their own.

use std::sync::Arc;

use tokio::sync::watch;

/// The head of a response being stored, as followers send it.
#[derive(Debug)]
pub struct FillHead {
    /// Final status.
    pub status: u16,
    /// End-to-end fields as `Name: value\r\n` lines.
    pub fields: Box<[u8]>,
    /// The body length when the origin gave one.
    pub body_len: Option<u64>,
}

/// How a fill ended, or that it has not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FillEnd {
    /// Still receiving.
    Open,
    /// Stored whole.
    Complete,
    /// The response is not storable: followers fetch on their own.
    Uncacheable,
    /// The origin failed, the body went over the size limit, or the leader
    /// gave up: followers that have not answered yet fetch on their own; a
    /// follower mid-body ends its answer unfinished.
    Abandoned,
}

/// What followers see of a fill.
#[derive(Debug)]
pub struct FillProgress {
    /// Set once the head arrived and the response is being stored.
    pub head: Option<Arc<FillHead>>,
    /// Body chunks so far.
    pub chunks: Vec<Arc<[u8]>>,
    /// How it ended.
    pub end: FillEnd,
}

/// One key being fetched by a leader.
pub struct Fill {
    progress: watch::Sender<FillProgress>,
}

impl Fill {
    /// A fill with nothing received yet.
    pub fn new() -> Self {
        Fill {
            progress: watch::Sender::new(FillProgress {
                head: None,
                chunks: Vec::new(),
                end: FillEnd::Open,
            }),
        }
    }

    /// A follower's view.
    pub fn follow(&self) -> watch::Receiver<FillProgress> {
        self.progress.subscribe()
    }

    /// The response is being stored: followers answer with this head.
    pub fn publish_head(&self, head: FillHead) {
        self.progress.send_modify(|p| p.head = Some(Arc::new(head)));
    }

    /// The next body chunk.
    pub fn publish_chunk(&self, chunk: Arc<[u8]>) {
        self.progress.send_modify(|p| p.chunks.push(chunk));
    }

    /// Ends the fill; the first end counts.
    pub fn end(&self, end: FillEnd) {
        self.progress.send_if_modified(|p| {
            if p.end == FillEnd::Open {
                p.end = end;
                // Nothing more is stored: the memory goes at once.
                if end != FillEnd::Complete {
                    p.chunks = Vec::new();
                }
                true
            } else {
                false
            }
        });
    }

    /// How it ended so far.
    pub fn ended(&self) -> FillEnd {
        self.progress.borrow().end
    }
}

impl Default for Fill {
    fn default() -> Self {
        Fill::new()
    }
}
