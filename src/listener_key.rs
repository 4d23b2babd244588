//! Which listener a socket belongs to, across reloads and binary upgrades.

use std::net::SocketAddr;

use crate::config::Config;

/// Identifies a listener across reloads and upgrades: its configured (not bound)
/// address, and which of the listeners configured with that address it is, as
/// several may listen on port 0, each on the port it was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListenerKey {
    /// The configured `listen` address.
    pub addr: SocketAddr,
    /// 0 for the first listener with this address, 1 for the second, ...
    pub nth: usize,
}

impl ListenerKey {
    /// The keys of `config.listeners`, in the same order.
    pub fn of(config: &Config) -> Vec<ListenerKey> {
        let mut keys: Vec<ListenerKey> = Vec::with_capacity(config.listeners.len());
        for l in &config.listeners {
            let nth = keys.iter().filter(|k| k.addr == l.addr).count();
            keys.push(ListenerKey { addr: l.addr, nth });
        }
        keys
    }
}

impl std::fmt::Display for ListenerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.nth {
            0 => write!(f, "{}", self.addr),
            n => write!(f, "{}#{n}", self.addr),
        }
    }
}

impl std::str::FromStr for ListenerKey {
    type Err = std::net::AddrParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (addr, nth) = match s.rsplit_once('#') {
            Some((a, n)) => (a, n.parse().unwrap_or(usize::MAX)),
            None => (s, 0),
        };
        Ok(ListenerKey {
            addr: addr.parse()?,
            nth,
        })
    }
}

/// A worker's listening sockets, each with the listener it belongs to.
pub type WorkerListeners = Vec<(ListenerKey, std::net::TcpListener)>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listener_keys_tell_port_0_listeners_apart_and_survive_the_environment() {
        for text in ["127.0.0.1:0", "127.0.0.1:0#2", "[::1]:443", "[::1]:443#1"] {
            let key: ListenerKey = text.parse().unwrap();
            assert_eq!(key.to_string(), text);
        }
        let key: ListenerKey = "127.0.0.1:0#1".parse().unwrap();
        assert_eq!((key.addr.port(), key.nth), (0, 1));
        assert!("nonsense".parse::<ListenerKey>().is_err());
    }
}
