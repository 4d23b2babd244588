//! Command-line overrides of the configuration file. The command line fills an
//! [`Overrides`]; this module applies it to the raw configuration without knowing
//! the command line's own types, so `config` sits below `cli`.

use std::net::SocketAddr;
use std::path::PathBuf;

use toml::Spanned;

use super::error::{ConfigError, FLAG_SPAN};
use super::raw::{
    RawAccessLog, RawAdmin, RawConfig, RawListener, RawRoute, RawTls, RawUpstream,
    RawUpstreamServer, RawUpstreamTls,
};
use crate::handler::proxy::configure::RawProxy;
use crate::handler::static_configure::RawStatic;

/// What `pier serve`'s flags say about the configuration; each field left at its
/// default changes nothing.
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    /// Plain listen addresses replacing the file's plain listeners.
    pub listen: Vec<SocketAddr>,
    /// Address of the embedded default's TLS listener.
    pub tls_listen: Option<SocketAddr>,
    /// Certificate chain for the embedded default's TLS listener.
    pub tls_cert: Option<PathBuf>,
    /// Private key matching `tls_cert`.
    pub tls_key: Option<PathBuf>,
    /// Drop the embedded default's TLS listener.
    pub no_tls: bool,
    /// Document root of every static route.
    pub root: Option<PathBuf>,
    /// Worker threads.
    pub workers: Option<usize>,
    /// Pin worker N to CPU N.
    pub pin_cpus: bool,
    /// Send every request to this `http://` or `https://` server.
    pub proxy: Option<String>,
    /// Admin listener address.
    pub admin: Option<SocketAddr>,
    /// Access log file, or `-` for standard output.
    pub access_log: Option<String>,
    /// Access log format (`combined` or `json`), with `access_log`.
    pub access_log_format: Option<String>,
}

fn flag<T>(value: T) -> Spanned<T> {
    Spanned::new(FLAG_SPAN, value)
}

/// Applies command-line overrides to the raw configuration; `embedded` says it is
/// the embedded default, which some flags (`--tls-*`, `--no-tls`) shape.
pub fn apply(raw: &mut RawConfig, flags: &Overrides, embedded: bool) -> Result<(), ConfigError> {
    if !flags.listen.is_empty() {
        raw.listener.retain(|l| l.get_ref().tls.is_some());
        let plain = flags.listen.iter().map(|a| {
            flag(RawListener {
                listen: flag(a.to_string()),
                ..RawListener::default()
            })
        });
        let tls: Vec<_> = std::mem::take(&mut raw.listener);
        raw.listener = plain.chain(tls).collect();
    }
    if embedded {
        if flags.no_tls {
            raw.listener.retain(|l| l.get_ref().tls.is_none());
        }
        for l in raw.listener.iter_mut() {
            let l = l.get_mut();
            if let Some(tls) = l.tls.as_mut() {
                if let Some(addr) = flags.tls_listen {
                    l.listen = flag(addr.to_string());
                }
                if let (Some(c), Some(k)) = (&flags.tls_cert, &flags.tls_key) {
                    *tls = flag(RawTls {
                        cert: Some(flag(c.display().to_string())),
                        key: Some(flag(k.display().to_string())),
                        ..Default::default()
                    });
                }
            }
        }
    }
    if let Some(root) = &flags.root {
        for r in raw.routes_mut() {
            let keys = r.get_mut().handler.get_mut().as_any_mut();
            if let Some(s) = keys.downcast_mut::<RawStatic>() {
                s.root = Some(flag(root.display().to_string()));
            }
        }
    }
    if let Some(w) = flags.workers {
        raw.server.workers = Some(flag(w as i64));
    }
    if flags.pin_cpus {
        raw.server.pin_cpus = Some(true);
    }
    if let Some(url) = &flags.proxy {
        apply_proxy_flag(raw, url)?;
    }
    if let Some(path) = &flags.access_log {
        let kept = raw.access_log.take().map(|a| a.into_inner());
        raw.access_log = Some(flag(RawAccessLog {
            path: flag(path.clone()),
            format: flags
                .access_log_format
                .clone()
                .map(flag)
                .or_else(|| kept.as_ref().and_then(|k| k.format.clone())),
            buffer: kept.as_ref().and_then(|k| k.buffer.clone()),
            flush_interval: kept.and_then(|k| k.flush_interval),
        }));
    }
    if let Some(addr) = flags.admin {
        let allow_remote = raw.admin.as_ref().and_then(|a| a.get_ref().allow_remote);
        let allow_config_write = raw
            .admin
            .as_ref()
            .and_then(|a| a.get_ref().allow_config_write);
        let token_file = raw
            .admin
            .as_mut()
            .and_then(|a| a.get_mut().token_file.take());
        raw.admin = Some(flag(RawAdmin {
            listen: flag(addr.to_string()),
            allow_remote,
            token_file,
            allow_config_write,
        }));
    }
    Ok(())
}

/// `--proxy http://host:port` (or `https://`): every request goes to that server.
fn apply_proxy_flag(raw: &mut RawConfig, url: &str) -> Result<(), ConfigError> {
    let bad = |m: &str| ConfigError {
        file: "command line".into(),
        line: 0,
        key: "--proxy".into(),
        message: m.to_string(),
    };
    // The URL's path is not the upstream's business: each request sends its own.
    let end = url.find("://").map_or(url.len(), |s| {
        url[s + 3..].find('/').map_or(url.len(), |p| s + 3 + p)
    });
    let parsed =
        super::upstream_server::parse_upstream_address(&url[..end]).map_err(|m| bad(&m))?;
    let Some(tls) = parsed.tls else {
        return Err(bad(&format!(
            "{url:?} is not a URL: expected http://host:port or https://host:port"
        )));
    };
    let address = parsed.authority;
    let name = "proxy".to_string();
    raw.upstream.retain(|u| u.get_ref().name.get_ref() != &name);
    raw.upstream.push(flag(RawUpstream {
        name: flag(name.clone()),
        servers: flag(vec![flag(RawUpstreamServer {
            address: flag(address),
            weight: None,
        })]),
        tls: tls.then(|| flag(RawUpstreamTls::default())),
        ..RawUpstream::default()
    }));
    raw.route = vec![flag(RawRoute {
        host: None,
        path: None,
        conditions: Default::default(),
        handler: flag(Box::new(RawProxy {
            upstream: Some(flag(name)),
            ..RawProxy::default()
        })),
        filters: Default::default(),
    })];
    Ok(())
}
