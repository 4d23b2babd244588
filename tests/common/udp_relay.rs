//! A UDP relay that plays a NAT rebinding: a client sends to the relay's
//! front address, and the relay forwards each of its datagrams to the
//! server from one of several back sockets, moving to the next one every
//! few datagrams, so the server sees the client's source port change again
//! and again mid-connection. Answers from the server, to whichever back
//! socket, go back to the client from the front address, so the client
//! itself sees nothing change.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// A running relay; stopped when dropped.
pub struct UdpRelay {
    /// Where the client sends.
    pub front: SocketAddr,
    /// How many times the source port the server sees changed.
    pub moves: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl UdpRelay {
    /// Relays to `server` from `ports` back sockets, moving to the next
    /// after every `every` datagrams from the client.
    pub fn start(server: SocketAddr, ports: usize, every: usize) -> UdpRelay {
        let front = UdpSocket::bind("127.0.0.1:0").unwrap();
        let backs: Vec<UdpSocket> = (0..ports.max(1))
            .map(|_| UdpSocket::bind("127.0.0.1:0").unwrap())
            .collect();
        let tick = Some(Duration::from_millis(50));
        front.set_read_timeout(tick).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let moves = Arc::new(AtomicUsize::new(0));
        let client: Arc<Mutex<Option<SocketAddr>>> = Arc::default();
        let mut threads = Vec::new();
        for back in &backs {
            back.set_read_timeout(tick).unwrap();
            let back = back.try_clone().unwrap();
            let front = front.try_clone().unwrap();
            let (stop, client) = (stop.clone(), client.clone());
            threads.push(std::thread::spawn(move || {
                let mut buf = vec![0u8; 65536];
                while !stop.load(Ordering::Relaxed) {
                    if let Ok((n, _)) = back.recv_from(&mut buf) {
                        if let Some(c) = *client.lock().unwrap() {
                            let _ = front.send_to(&buf[..n], c);
                        }
                    }
                }
            }));
        }
        let addr = front.local_addr().unwrap();
        {
            let (stop, moves) = (stop.clone(), moves.clone());
            threads.push(std::thread::spawn(move || {
                let mut buf = vec![0u8; 65536];
                let mut sent = 0usize;
                while !stop.load(Ordering::Relaxed) {
                    let Ok((n, from)) = front.recv_from(&mut buf) else {
                        continue;
                    };
                    *client.lock().unwrap() = Some(from);
                    let at = (sent / every.max(1)) % backs.len();
                    if sent > 0 && sent % every.max(1) == 0 {
                        moves.fetch_add(1, Ordering::Relaxed);
                    }
                    let _ = backs[at].send_to(&buf[..n], server);
                    sent += 1;
                }
            }));
        }
        UdpRelay {
            front: addr,
            moves,
            stop,
            threads,
        }
    }
}

impl Drop for UdpRelay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
