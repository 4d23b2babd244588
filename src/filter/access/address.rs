//! `allow` / `deny`: which client addresses a route answers, as nginx's
//! `allow` and `deny` do it: the rules are tried in the order written and the
//! first that matches decides (403 for a deny). The client address is the one
//! the access log shows (after the PROXY protocol on listeners that take it),
//! or the one a trusted proxy forwarded
//! (see [`crate::http::client_address`]).

use std::net::IpAddr;

use ipnet::IpNet;

use super::Refusal;
use crate::filter::{RouteFilter, Verdict};
use crate::http::Session;

/// One rule: a network (a single address is a /32 or /128) and what a match means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddressRule {
    /// Addresses the rule covers; `None` is `all`.
    pub net: Option<IpNet>,
    /// Whether a match lets the request through.
    pub allow: bool,
}

/// A rule as it is tried: the network as a masked 128-bit number (an IPv4
/// address in the low 32 bits), so a match is one AND and two compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct CompiledRule {
    /// The family the network is of; `None` for `all`.
    v4: Option<bool>,
    /// The prefix bits, the rest zero.
    network: u128,
    /// Ones over the prefix.
    mask: u128,
    /// Whether a match lets the request through.
    allow: bool,
}

impl CompiledRule {
    fn new(rule: &AddressRule) -> Self {
        let (v4, network, prefix_len, width) = match rule.net {
            None => (None, 0, 0, 128),
            Some(IpNet::V4(n)) => (
                Some(true),
                u128::from(n.network().to_bits()),
                n.prefix_len(),
                32,
            ),
            Some(IpNet::V6(n)) => (Some(false), n.network().to_bits(), n.prefix_len(), 128),
        };
        let ones = u32::from(prefix_len);
        let mask = match ones {
            0 => 0,
            n => (u128::MAX << (128 - n)) >> (128 - width),
        };
        CompiledRule {
            v4,
            network,
            mask,
            allow: rule.allow,
        }
    }

    fn matches(&self, v4: bool, bits: u128) -> bool {
        self.v4.is_none_or(|f| f == v4) && bits & self.mask == self.network
    }
}

/// A route's rules in order, and what happens when none matches.
#[derive(Debug)]
pub struct AddressRules {
    rules: Box<[CompiledRule]>,
    /// Taken when no rule matches: a route with an `allow` list refuses the
    /// rest (nginx's `allow ...; deny all;` written once); a route with only
    /// `deny` lets the rest through.
    otherwise_allow: bool,
}

impl AddressRules {
    /// Rules in the order they are tried, against the request's client address.
    pub fn new(rules: Vec<AddressRule>) -> Self {
        let otherwise_allow = !rules.iter().any(|r| r.allow);
        AddressRules {
            rules: rules.iter().map(CompiledRule::new).collect(),
            otherwise_allow,
        }
    }

    /// Whether `addr` may be answered. An IPv4 client on an IPv6 socket
    /// (`::ffff:192.0.2.1`) is matched as the IPv4 address it is.
    pub fn allows(&self, addr: IpAddr) -> bool {
        let (v4, bits) = match addr.to_canonical() {
            IpAddr::V4(a) => (true, u128::from(a.to_bits())),
            IpAddr::V6(a) => (false, a.to_bits()),
        };
        self.rules
            .iter()
            .find(|r| r.matches(v4, bits))
            .map_or(self.otherwise_allow, |r| r.allow)
    }
}

impl RouteFilter for AddressRules {
    fn decides_at_once(&self) -> bool {
        true
    }

    fn request_filter<'s, 'h: 's>(&'h self, session: &'s mut dyn Session<'h>) -> Verdict<'s> {
        if self.allows(session.request().client()) {
            Verdict::Continue
        } else {
            Refusal::status(403).answer(session);
            Verdict::Answered
        }
    }
}

/// Reads one entry of an `allow` or `deny` list: `all`, an address, or a
/// network in CIDR form whose host bits are zero.
pub fn parse_address_entry(entry: &str) -> Result<Option<IpNet>, String> {
    let entry = entry.trim();
    if entry == "all" {
        return Ok(None);
    }
    if let Ok(addr) = entry.parse::<IpAddr>() {
        return Ok(Some(IpNet::from(addr.to_canonical())));
    }
    let net: IpNet = entry.parse().map_err(|_| {
        format!("{entry:?} is not an address, a network such as \"10.0.0.0/8\" or \"2001:db8::/32\", or \"all\"")
    })?;
    if net.addr() != net.network() {
        return Err(format!(
            "{entry:?} has bits set past its prefix length; the network is \"{}\"",
            net.trunc()
        ));
    }
    Ok(Some(net))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(list: &[(&str, bool)]) -> AddressRules {
        AddressRules::new(
            list.iter()
                .map(|(e, allow)| AddressRule {
                    net: parse_address_entry(e).unwrap(),
                    allow: *allow,
                })
                .collect(),
        )
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn first_match_wins_in_the_order_written() {
        // nginx's example: deny one host of a network allowed after it.
        let r = rules(&[("192.168.1.1", false), ("192.168.1.0/24", true)]);
        assert!(!r.allows(ip("192.168.1.1")));
        assert!(r.allows(ip("192.168.1.2")));
        // An allow list refuses what it does not name.
        assert!(!r.allows(ip("10.0.0.1")));
        let swapped = rules(&[("192.168.1.0/24", true), ("192.168.1.1", false)]);
        assert!(swapped.allows(ip("192.168.1.1")));
    }

    #[test]
    fn a_deny_list_alone_lets_the_rest_through() {
        let r = rules(&[("10.0.0.0/8", false), ("2001:db8::/32", false)]);
        assert!(!r.allows(ip("10.9.8.7")));
        assert!(!r.allows(ip("2001:db8::1")));
        assert!(r.allows(ip("11.0.0.1")));
        assert!(r.allows(ip("2001:db9::1")));
        let closed = rules(&[("127.0.0.1", true), ("all", false)]);
        assert!(!closed.allows(ip("::1")));
    }

    #[test]
    fn mapped_ipv4_matches_ipv4_rules() {
        let r = rules(&[("127.0.0.0/8", true)]);
        assert!(r.allows(ip("::ffff:127.0.0.1")));
        assert!(!r.allows(ip("::1")));
    }

    #[test]
    fn compiled_rules_match_as_the_networks_contain() {
        // Every prefix length of both families, at its edges, as ipnet says.
        let probes: Vec<IpAddr> = [
            "0.0.0.0",
            "10.0.0.0",
            "10.0.0.1",
            "10.255.255.255",
            "11.0.0.0",
            "255.255.255.255",
            "::",
            "::1",
            "::ffff:10.0.0.1",
            "2001:db8::",
            "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff",
            "2001:db9::",
            "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
        ]
        .iter()
        .map(|s| ip(s))
        .collect();
        let mut nets: Vec<IpNet> = (0..=32u8)
            .map(|p| IpNet::new(ip("10.0.0.1"), p).unwrap().trunc())
            .collect();
        nets.extend((0..=128u8).map(|p| IpNet::new(ip("2001:db8::1"), p).unwrap().trunc()));
        nets.push("::ffff:10.0.0.0/104".parse().unwrap());
        for net in nets {
            let r = CompiledRule::new(&AddressRule {
                net: Some(net),
                allow: true,
            });
            for &addr in &probes {
                let canonical = addr.to_canonical();
                let (v4, bits) = match canonical {
                    IpAddr::V4(a) => (true, u128::from(a.to_bits())),
                    IpAddr::V6(a) => (false, a.to_bits()),
                };
                assert_eq!(
                    r.matches(v4, bits),
                    net.contains(&canonical),
                    "{net} {addr}"
                );
            }
        }
    }

    #[test]
    fn entries_are_checked() {
        assert_eq!(parse_address_entry("all"), Ok(None));
        assert!(parse_address_entry("10.0.0.1/8")
            .unwrap_err()
            .contains("\"10.0.0.0/8\""));
        assert!(parse_address_entry("10.0.0.0/33").is_err());
        assert!(parse_address_entry("example.com").is_err());
        assert_eq!(
            parse_address_entry("::1").unwrap(),
            Some("::1/128".parse().unwrap())
        );
    }
}
