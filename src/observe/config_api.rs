//! `GET /api/config` and `POST /api/config` on the admin listener.
//!
//! `GET` answers the text the running configuration was loaded from, with
//! the changes made since through the runtime API marked as comments
//! ([`crate::observe::runtime_changes`]). `POST` takes a whole configuration
//! (TOML, at most [`MAX_CONFIG_BYTES`]) and hands it to the thread that
//! reloads ([`ConfigPost`]): it is validated as `pier check` validates a file
//! (errors with file, line and key, in the same words), then applied as a
//! SIGHUP reload is, and written to the configuration file only with
//! `[admin] allow_config_write = true`. `?dry_run=1` validates only.

use serde::Serialize;
use tokio::sync::{mpsc, oneshot};

use crate::config::ConfigError;
use crate::http::{Session, SessionExt};
use crate::observe::admin_answer::{error_answer, json_answer, send_page};
use crate::observe::admin_auth::ApiCaller;
use crate::observe::runtime_changes::marked_config_text;
use crate::observe::status::{StatusResponse, StatusState};

/// The largest configuration a `POST` may carry (413 beyond).
pub const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

/// A posted configuration on its way to the thread that reloads, and where
/// its answer goes.
#[derive(Debug)]
pub struct ConfigPost {
    /// The TOML text.
    pub text: String,
    /// Validate only.
    pub dry_run: bool,
    /// Who posted it, for the log.
    pub caller: ApiCaller,
    /// The answer.
    pub reply: oneshot::Sender<PostAnswer>,
}

/// Where posted configurations go: the thread that reloads.
pub type ConfigPosts = mpsc::UnboundedSender<ConfigPost>;

/// A configuration error as JSON: its parts and the sentence `pier check`
/// prints after `pier: configuration error: `.
#[derive(Debug, Serialize)]
pub struct ErrorView {
    file: String,
    line: usize,
    key: String,
    message: String,
    text: String,
}

impl From<ConfigError> for ErrorView {
    fn from(e: ConfigError) -> Self {
        ErrorView {
            text: e.to_string(),
            file: e.file,
            line: e.line,
            key: e.key,
            message: e.message,
        }
    }
}

/// The file a posted configuration was written to.
#[derive(Debug, Serialize)]
pub struct WrittenFile {
    /// The configuration file, replaced whole.
    pub file: String,
    /// Where the text it held before was kept.
    pub previous: String,
}

/// What became of a posted configuration.
#[derive(Debug, Serialize)]
pub struct PostAnswer {
    #[serde(skip)]
    status: u16,
    /// Whether it validated.
    pub valid: bool,
    /// Whether only validation was asked for.
    pub dry_run: bool,
    /// Whether every worker runs it now.
    pub applied: bool,
    /// A sentence saying what happened.
    pub outcome: String,
    /// Where it was written, when it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub written: Option<WrittenFile>,
    /// What it runs with but `pier check` warns about.
    pub warnings: Vec<String>,
    /// Why it is not valid.
    pub errors: Vec<ErrorView>,
}

impl PostAnswer {
    fn new(status: u16, valid: bool, outcome: String) -> Self {
        PostAnswer {
            status,
            valid,
            dry_run: false,
            applied: false,
            outcome,
            written: None,
            warnings: Vec::new(),
            errors: Vec::new(),
        }
    }

    /// 400: it does not validate; the running configuration is kept.
    pub fn invalid(errors: Vec<ConfigError>) -> Self {
        let mut a = PostAnswer::new(
            400,
            false,
            "the configuration is not valid; the running one is kept".into(),
        );
        a.errors = errors.into_iter().map(ErrorView::from).collect();
        a
    }

    /// 409: this server cannot take a posted configuration.
    pub fn refused(why: String) -> Self {
        PostAnswer::new(409, false, why)
    }

    /// 200: it validates (a dry run).
    pub fn validated(warnings: Vec<String>) -> Self {
        let mut a = PostAnswer::new(
            200,
            true,
            "the configuration is valid; nothing was applied (dry run)".into(),
        );
        a.dry_run = true;
        a.warnings = warnings;
        a
    }

    /// 500: valid, but the reload could not apply it (a listener that
    /// cannot be bound); the running configuration is kept.
    pub fn not_applied(why: String, warnings: Vec<String>) -> Self {
        let mut a = PostAnswer::new(
            500,
            true,
            format!(
                "the configuration is valid but the reload failed: {why}; the running one is kept"
            ),
        );
        a.warnings = warnings;
        a
    }

    /// 200: every worker runs it; `file` says what became of the
    /// configuration file (500 when it could not be written).
    pub fn applied(warnings: Vec<String>, file: FileOutcome) -> Self {
        const UNTIL_RELOAD: &str = "so this lasts until the next reload or restart";
        let (status, outcome, written) = match file {
            FileOutcome::NotAllowed => (
                200,
                format!("applied on every worker; the configuration file is unchanged ([admin] allow_config_write is off), {UNTIL_RELOAD}"),
                None,
            ),
            FileOutcome::NoFile => (
                200,
                format!("applied on every worker; the server runs without a configuration file (no --config), {UNTIL_RELOAD}"),
                None,
            ),
            FileOutcome::Written(w) => (
                200,
                format!(
                    "applied on every worker and written to {}; the text it held before is in {}",
                    w.file, w.previous
                ),
                Some(w),
            ),
            FileOutcome::Failed(why) => (
                500,
                format!("applied on every worker, but the configuration file could not be written ({why}), {UNTIL_RELOAD}"),
                None,
            ),
        };
        let mut a = PostAnswer::new(status, true, outcome);
        a.applied = true;
        a.written = written;
        a.warnings = warnings;
        a
    }
}

/// What became of the configuration file when a posted configuration was applied.
#[derive(Debug)]
pub enum FileOutcome {
    /// `[admin] allow_config_write` is off: untouched.
    NotAllowed,
    /// The server runs without a file (the embedded default).
    NoFile,
    /// Replaced, the old text kept.
    Written(WrittenFile),
    /// Writing failed, for this reason.
    Failed(String),
}

/// `GET /api/config`.
pub fn config_page(status: &StatusState) -> StatusResponse {
    let mut r = json_answer(200, &());
    r.content_type = "application/toml; charset=utf-8";
    r.body = marked_config_text(&status.current_config());
    r
}

/// Whether the query asks for a dry run (`dry_run=1` or `dry_run=true`).
fn dry_run(query: Option<&[u8]>) -> bool {
    query
        .and_then(|q| std::str::from_utf8(q).ok())
        .is_some_and(|q| {
            q.split('&')
                .any(|kv| matches!(kv, "dry_run" | "dry_run=1" | "dry_run=true"))
        })
}

/// `POST /api/config`: reads the body, hands it to the thread that reloads
/// and answers what became of it.
pub async fn post_config(session: &mut dyn Session<'_>, posts: ConfigPosts, caller: ApiCaller) {
    let dry_run = dry_run(session.request().query());
    // The driver answers a body too large, malformed or too slow.
    let Ok(text) = session.read_body_to_end().await else {
        return;
    };
    let answer = match String::from_utf8(text) {
        Err(_) => error_answer(400, "a configuration is UTF-8 text (TOML)"),
        Ok(text) => {
            let (reply, answered) = oneshot::channel();
            let post = ConfigPost {
                text,
                dry_run,
                caller,
                reply,
            };
            match posts.send(post).map(|()| answered) {
                Err(_) => error_answer(503, "the server is stopping; nothing was applied"),
                Ok(answered) => match answered.await {
                    Ok(a) => json_answer(a.status, &a),
                    Err(_) => error_answer(503, "the server is stopping; nothing was applied"),
                },
            }
        }
    };
    send_page(session, answer);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dry_run_is_asked_by_name() {
        assert!(dry_run(Some(b"dry_run=1")));
        assert!(dry_run(Some(b"x=2&dry_run=true")));
        assert!(dry_run(Some(b"dry_run")));
        assert!(!dry_run(Some(b"dry_run=0")));
        assert!(!dry_run(Some(b"not_dry_run=1")));
        assert!(!dry_run(None));
    }

    #[test]
    fn an_invalid_configuration_answers_pier_checks_words() {
        let e = crate::config::check_text("[server]\nworkers = \"x\"\n").unwrap_err();
        let words = e.to_string();
        let a = PostAnswer::invalid(vec![e]);
        assert_eq!(a.status, 400);
        let json = serde_json::to_value(&a).unwrap();
        assert_eq!(json["errors"][0]["text"], words.as_str());
        assert_eq!(json["errors"][0]["line"], 2);
        assert_eq!(json["errors"][0]["key"], "server.workers");
        assert_eq!(json["applied"], false);
    }
}
