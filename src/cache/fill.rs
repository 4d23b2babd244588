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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;
    use std::time::Duration;

    const WORKERS: usize = 4;
    const PER_WORKER: usize = 125;
    const FOLLOWERS: usize = WORKERS * PER_WORKER;

    /// Counts of what the followers saw.
    #[derive(Default)]
    struct Seen {
        parked: AtomicUsize,
        wakes: AtomicUsize,
        heads: AtomicUsize,
        completes: AtomicUsize,
    }

    /// Followers on four single-threaded runtimes (as Pier's workers are),
    /// each parked on the fill before anything is published: one head
    /// arrival must release every one of them with a single wake-up each,
    /// and the body and the end must reach them all, with nothing published
    /// twice. A lost or withheld wake-up leaves a follower waiting, which in
    /// the server means a second origin request once the lock times out.
    #[test]
    fn one_head_arrival_releases_every_follower_on_every_worker() {
        let fill = Arc::new(Fill::new());
        let seen = Arc::new(Seen::default());
        let (done_tx, done_rx) = mpsc::channel();
        for _ in 0..WORKERS {
            let (fill, seen, done) = (fill.clone(), seen.clone(), done_tx.clone());
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                let local = tokio::task::LocalSet::new();
                local.block_on(&rt, async {
                    let followers: Vec<_> = (0..PER_WORKER)
                        .map(|_| {
                            let (mut rx, seen) = (fill.follow(), seen.clone());
                            tokio::task::spawn_local(async move {
                                let mut head_seen = false;
                                loop {
                                    let (head, chunks, end) = {
                                        let p = rx.borrow_and_update();
                                        (p.head.is_some(), p.chunks.len(), p.end)
                                    };
                                    if head && !head_seen {
                                        head_seen = true;
                                        seen.heads.fetch_add(1, Ordering::SeqCst);
                                    }
                                    if end == FillEnd::Complete && chunks == 1 {
                                        seen.completes.fetch_add(1, Ordering::SeqCst);
                                        return;
                                    }
                                    if !head {
                                        seen.parked.fetch_add(1, Ordering::SeqCst);
                                    }
                                    if rx.changed().await.is_err() {
                                        return;
                                    }
                                    if !head {
                                        seen.wakes.fetch_add(1, Ordering::SeqCst);
                                    }
                                }
                            })
                        })
                        .collect();
                    for f in followers {
                        f.await.unwrap();
                    }
                });
                done.send(()).unwrap();
            });
        }
        let wait_for = |what: &str, counter: &AtomicUsize| {
            for _ in 0..2000 {
                if counter.load(Ordering::SeqCst) == FOLLOWERS {
                    return;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            panic!(
                "{what}: {} of {FOLLOWERS} followers",
                counter.load(Ordering::SeqCst)
            );
        };
        wait_for("parked before the head", &seen.parked);
        fill.publish_head(FillHead {
            status: 200,
            fields: Box::new(*b"Cache-Control: max-age=60\r\n"),
            body_len: Some(4),
        });
        wait_for("released by the one head", &seen.heads);
        assert_eq!(
            seen.wakes.load(Ordering::SeqCst),
            FOLLOWERS,
            "each follower woke once for the head"
        );
        fill.publish_chunk(Arc::from(&b"body"[..]));
        fill.end(FillEnd::Complete);
        for _ in 0..WORKERS {
            done_rx
                .recv_timeout(Duration::from_secs(10))
                .unwrap_or_else(|_| {
                    panic!(
                        "{} of {FOLLOWERS} followers saw the end",
                        seen.completes.load(Ordering::SeqCst)
                    )
                });
        }
        assert_eq!(seen.completes.load(Ordering::SeqCst), FOLLOWERS);
        assert_eq!(seen.parked.load(Ordering::SeqCst), FOLLOWERS);
    }
}
