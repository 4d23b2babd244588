//! The configuration the cache tests share: one worker count, a proxy route
//! to an origin with the zone `main` in front of it.

use std::net::SocketAddr;

/// `workers` workers, a listener on 127.0.0.1:0, the group `app` of
/// `origin`, the zone `[cache.main]` of 4 MiB with `zone_extra` added, and
/// a proxy route for every path through it.
pub fn cached_proxy_config(origin: SocketAddr, workers: usize, zone_extra: &str) -> String {
    format!(
        r#"
[server]
workers = {workers}
[[listener]]
listen = "127.0.0.1:0"
[[upstream]]
name = "app"
servers = [{{ address = "{origin}" }}]
[cache.main]
memory = "4MiB"
{zone_extra}
[[route]]
path = "/"
handler = "proxy"
upstream = "app"
cache = "main"
"#
    )
}
