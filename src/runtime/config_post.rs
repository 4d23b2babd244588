//! `POST /api/config` on the thread that reloads: the posted text is
//! validated as `pier check` validates a file, applied as a SIGHUP reload is
//! ([`ServerProcess::apply_config`]), and with `[admin] allow_config_write`
//! written to the configuration file
//! ([`crate::config::file_replace`]).

use tracing::{error, info};

use super::{check_warnings, ServerProcess, Source};
use crate::config::{self, Config, ConfigError};
use crate::observe::config_api::{ConfigPost, FileOutcome, PostAnswer, WrittenFile};

impl Source {
    /// `text` posted in place of the file; `None` for `pier tunnel`, which
    /// builds its configuration from flags.
    fn load_posted(&self, text: &str) -> Option<Result<Config, ConfigError>> {
        match self {
            Source::Serve(args) => Some(config::build::load_posted(
                args.config.as_deref(),
                text,
                &args.overrides(),
            )),
            Source::Tunnel(_) => None,
        }
    }

    /// The configuration file, when there is one.
    fn file(&self) -> Option<&std::path::Path> {
        match self {
            Source::Serve(args) => args.config.as_deref(),
            Source::Tunnel(_) => None,
        }
    }
}

impl ServerProcess {
    /// `POST /api/config`: validates the posted text as `pier check` does,
    /// then (unless a dry run) applies it as a reload does and, with
    /// `[admin] allow_config_write`, writes it to the configuration file.
    pub(super) fn take_posted(&mut self, post: ConfigPost) {
        let answer = self.apply_posted(&post);
        let _ = post.reply.send(answer);
    }

    fn apply_posted(&mut self, post: &ConfigPost) -> PostAnswer {
        let (peer, credential) = (post.caller.peer, &post.caller.credential);
        let Some(loaded) = self.source.load_posted(&post.text) else {
            return PostAnswer::refused(
                "pier tunnel builds its configuration from flags; a configuration is posted to pier serve".into(),
            );
        };
        let mut next = match loaded {
            Ok(c) => c,
            Err(e) => return PostAnswer::invalid(vec![e]),
        };
        if !next.findings.is_empty() {
            return PostAnswer::invalid(std::mem::take(&mut next.findings));
        }
        let warnings = check_warnings(&next);
        if post.dry_run {
            return PostAnswer::validated(warnings);
        }
        let file = self.source.file().map(std::path::Path::to_path_buf);
        let write = file.is_some() && self.config.allow_config_write;
        info!(%peer, %credential, write, "admin API: applying a posted configuration");
        let outcome = self.apply_config(next);
        self.report_reload(outcome.clone());
        if let Err(why) = outcome {
            return PostAnswer::not_applied(why, warnings);
        }
        let file = match file {
            None => FileOutcome::NoFile,
            Some(_) if !write => FileOutcome::NotAllowed,
            Some(file) => match config::file_replace::replace_keeping_previous(&file, &post.text) {
                Ok(previous) => {
                    info!(%peer, %credential, file = %file.display(), previous = %previous.display(), "admin API: posted configuration written");
                    FileOutcome::Written(WrittenFile {
                        file: file.display().to_string(),
                        previous: previous.display().to_string(),
                    })
                }
                Err(e) => {
                    let why = crate::io_text::without_os_error(&e.to_string());
                    error!(file = %file.display(), error = %why, "admin API: cannot write the posted configuration; it runs until the next reload");
                    FileOutcome::Failed(why)
                }
            },
        };
        PostAnswer::applied(warnings, file)
    }
}
