//! Load through Pier for tests of changes under traffic: keep-alive clients
//! sending requests in a loop until stopped (bounded in count too), every
//! answer that is not 200, and every connection that fails, counted.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use super::{connect, Reader};

/// Keep-alive clients sending requests through Pier until stopped, counting
/// answers that are not 200 (and connections that failed) as failures.
pub struct Load {
    stop: Arc<AtomicBool>,
    ok: Arc<AtomicUsize>,
    failed: Arc<AtomicUsize>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Load {
    pub fn start(addr: SocketAddr, clients: usize) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let ok = Arc::new(AtomicUsize::new(0));
        let failed = Arc::new(AtomicUsize::new(0));
        let threads = (0..clients)
            .map(|_| {
                let (stop, ok, failed) = (stop.clone(), ok.clone(), failed.clone());
                std::thread::spawn(move || {
                    // Bounded in count as well as by the stop flag.
                    let mut left = 200_000;
                    while !stop.load(Ordering::Relaxed) && left > 0 {
                        let mut r = Reader::new(connect(addr));
                        while !stop.load(Ordering::Relaxed) && left > 0 {
                            left -= 1;
                            r.send(b"GET / HTTP/1.1\r\nHost: app.test\r\n\r\n");
                            match r.response(false) {
                                Some(resp) if resp.status == 200 => {
                                    ok.fetch_add(1, Ordering::Relaxed);
                                }
                                _ => {
                                    failed.fetch_add(1, Ordering::Relaxed);
                                    break;
                                }
                            }
                        }
                    }
                })
            })
            .collect();
        Load {
            stop,
            ok,
            failed,
            threads,
        }
    }

    /// Stops the clients: (answered 200, failed).
    pub fn finish(self) -> (usize, usize) {
        self.stop.store(true, Ordering::Relaxed);
        let mut panicked = 0;
        for t in self.threads {
            panicked += usize::from(t.join().is_err());
        }
        (
            self.ok.load(Ordering::Relaxed),
            self.failed.load(Ordering::Relaxed) + panicked,
        )
    }
}
