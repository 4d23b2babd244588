//! Command-line flags. Flags override the configuration file where both speak.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::config::Overrides;
use crate::logging::StderrLogFormat;

/// `pier`: edge server, reverse proxy, TLS terminator and load generator.
#[derive(Debug, Parser)]
#[command(name = "pier", version, about)]
pub struct Cli {
    /// What to run.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve HTTP (and HTTPS) from a config file, or the current directory by default.
    Serve(ServeArgs),
    /// Validate a configuration file without starting.
    Check(CheckArgs),
    /// Echo server (plain or TLS): writes back what it reads; the server side of
    /// the TLS stream benchmark.
    Echo(EchoArgs),
    /// Load generator: HTTP load, TLS stream bandwidth, sweeps with charts.
    Bench(crate::bench::BenchArgs),
    /// Terminate TLS (or forward plain TCP) to one upstream, like hitch.
    Tunnel(TunnelArgs),
    /// Replace a running Pier with the binary at its path, without refusing a
    /// connection: sends it SIGUSR2.
    Upgrade(BinaryUpgradeArgs),
}

/// Flags of `pier serve`.
#[derive(Debug, Args, Default, Clone)]
pub struct ServeArgs {
    /// TOML configuration file; without it Pier serves `--root` on `--listen`.
    #[arg(short, long)]
    pub config: Option<PathBuf>,
    /// Plain HTTP listen address (repeatable); replaces the config's plain listeners.
    #[arg(long)]
    pub listen: Vec<SocketAddr>,
    /// HTTPS listen address of the embedded default (default 127.0.0.1:8443); it
    /// serves `--tls-cert`, or a generated certificate.
    #[arg(long)]
    pub tls_listen: Option<SocketAddr>,
    /// The embedded HTTPS listener's certificate instead of a generated one.
    #[command(flatten)]
    pub cert: CertKeyArgs,
    /// Turn off the embedded HTTPS listener.
    #[arg(long)]
    pub no_tls: bool,
    /// Document root for static routes (default: the current directory).
    #[arg(long)]
    pub root: Option<PathBuf>,
    /// Workers, stderr log format, PID file.
    #[command(flatten)]
    pub process: ProcessArgs,
    /// Reverse-proxy every request to this server (`http://host:port` or
    /// `https://host:port`) instead of serving files.
    #[arg(long, value_name = "URL")]
    pub proxy: Option<String>,
    /// Serve `/metrics` and `/status` on this address (loopback unless the config
    /// sets `admin.allow_remote`).
    #[arg(long, value_name = "ADDR")]
    pub admin: Option<SocketAddr>,
    /// Log every answered request to this file (appended), or to standard output
    /// with `-`; replaces the config's `[access_log] path`.
    #[arg(long, value_name = "PATH|-")]
    pub access_log: Option<String>,
    /// Access log line format (default `combined`); replaces `[access_log] format`.
    #[arg(
        long,
        value_enum,
        value_name = "combined|json",
        requires = "access_log"
    )]
    pub access_log_format: Option<AccessLogFormat>,
}

/// Access log line format on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AccessLogFormat {
    /// Apache/nginx combined, with TLS, upstream and timing fields appended.
    Combined,
    /// One JSON object per line.
    Json,
}

impl AccessLogFormat {
    /// The `[access_log] format` value this flag stands for.
    pub fn as_config(self) -> &'static str {
        match self {
            AccessLogFormat::Combined => "combined",
            AccessLogFormat::Json => "json",
        }
    }
}

impl ServeArgs {
    /// What these flags say about the configuration, for `config::build::load`.
    pub fn overrides(&self) -> Overrides {
        Overrides {
            listen: self.listen.clone(),
            tls_listen: self.tls_listen,
            tls_cert: self.cert.tls_cert.clone(),
            tls_key: self.cert.tls_key.clone(),
            no_tls: self.no_tls,
            root: self.root.clone(),
            workers: self.process.workers,
            pin_cpus: self.process.pin_cpus,
            proxy: self.proxy.clone(),
            admin: self.admin,
            access_log: self.access_log.clone(),
            access_log_format: self.access_log_format.map(|f| f.as_config().to_string()),
        }
    }
}

/// How a serving process runs: the same flags for `serve` and `tunnel`.
#[derive(Debug, Args, Default, Clone)]
pub struct ProcessArgs {
    /// Worker threads, each with its own event loop (default: available cores).
    #[arg(long)]
    pub workers: Option<usize>,
    /// Pin worker N to CPU N.
    #[arg(long)]
    pub pin_cpus: bool,
    /// Log format on stderr.
    #[arg(long, value_enum, default_value_t)]
    pub log_format: StderrLogFormat,
    /// Write the process ID here once serving (for `pier upgrade --pid-file`);
    /// a binary upgrade rewrites it with the new process's ID.
    #[arg(long, value_name = "FILE")]
    pub pid_file: Option<PathBuf>,
}

/// A certificate chain and its private key, from PEM files, given together.
#[derive(Debug, Args, Default, Clone)]
pub struct CertKeyArgs {
    /// Certificate chain (PEM) that TLS is terminated with; needs `--tls-key`.
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// Private key (PEM) matching `--tls-cert`.
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
}

impl CertKeyArgs {
    /// The certificate and key files, when both were given.
    pub fn pair(&self) -> Option<(&Path, &Path)> {
        Some((self.tls_cert.as_deref()?, self.tls_key.as_deref()?))
    }
}

/// Flags of `pier check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// TOML configuration file to validate.
    #[arg(short, long)]
    pub config: PathBuf,
    /// Also print, per listener and host, the routes a request meets in the
    /// order they are tried.
    #[arg(long)]
    pub routes: bool,
}

/// Flags of `pier echo`.
#[derive(Debug, Args, Clone)]
pub struct EchoArgs {
    /// Address to listen on (every worker binds it with SO_REUSEPORT).
    #[arg(long)]
    pub listen: SocketAddr,
    /// Terminate TLS, with a generated certificate unless `--tls-cert` is given
    /// (which implies this flag).
    #[arg(long)]
    pub tls: bool,
    /// A certificate instead of a generated one (implies `--tls`).
    #[command(flatten)]
    pub cert: CertKeyArgs,
    /// Worker threads, each with its own event loop (default: available cores).
    #[arg(long)]
    pub workers: Option<usize>,
}

/// Flags of `pier tunnel`.
#[derive(Debug, Args, Clone)]
pub struct TunnelArgs {
    /// Address to accept on.
    #[arg(long)]
    pub listen: SocketAddr,
    /// Upstream `host:port` every stream is forwarded to.
    #[arg(long, value_name = "HOST:PORT")]
    pub to: String,
    /// With a certificate, TLS is terminated here; without, streams are plain TCP.
    #[command(flatten)]
    pub cert: CertKeyArgs,
    /// Send a PROXY protocol header (`v1` or `v2`) to the upstream first.
    #[arg(long, value_name = "v1|v2")]
    pub proxy_protocol: Option<String>,
    /// Close a stream idle this long in both directions (e.g. `5m`).
    #[arg(long, value_name = "DURATION")]
    pub idle_timeout: Option<String>,
    /// Workers, stderr log format, PID file.
    #[command(flatten)]
    pub process: ProcessArgs,
}

impl TunnelArgs {
    /// The configuration these flags describe, as TOML: one `tcp` listener (TLS
    /// when a certificate is given) forwarding to one upstream. It goes through the
    /// same validation as a file, so errors name the flag's key.
    pub fn config_text(&self) -> String {
        let q = |s: &str| toml::Value::String(s.to_string()).to_string();
        let mut text = String::from("[server]\n");
        if let Some(w) = self.process.workers {
            text.push_str(&format!("workers = {w}\n"));
        }
        if self.process.pin_cpus {
            text.push_str("pin_cpus = true\n");
        }
        text.push_str(&format!(
            "[[listener]]\nlisten = {}\nkind = \"tcp\"\nupstream = \"tunnel\"\n",
            q(&self.listen.to_string())
        ));
        if let Some((c, k)) = self.cert.pair() {
            text.push_str(&format!(
                "tls = {{ cert = {}, key = {} }}\n",
                q(&c.display().to_string()),
                q(&k.display().to_string())
            ));
        }
        if let Some(v) = &self.proxy_protocol {
            text.push_str(&format!("proxy_protocol = {}\n", q(v)));
        }
        if let Some(d) = &self.idle_timeout {
            text.push_str(&format!("idle_timeout = {}\n", q(d)));
        }
        text.push_str(&format!(
            "[[upstream]]\nname = \"tunnel\"\nservers = [{{ address = {} }}]\n",
            q(&self.to)
        ));
        text
    }
}

/// Flags of `pier upgrade`: which running Pier to replace.
#[derive(Debug, Args, Clone)]
#[command(group(clap::ArgGroup::new("target").required(true).args(["pid", "pid_file"])))]
pub struct BinaryUpgradeArgs {
    /// Process ID of the running Pier.
    #[arg(long)]
    pub pid: Option<u32>,
    /// The file the running Pier was given as `--pid-file`.
    #[arg(long, value_name = "FILE")]
    pub pid_file: Option<PathBuf>,
}
