//! Background threads beside the workers (health checks, the admin listener), each
//! with its own current-thread runtime, so a slow check or scrape never runs on a
//! worker's event loop.

use tracing::warn;

/// Starts a background thread (health checks, the admin listener) with its own
/// current-thread runtime, running the future `make` builds there until it
/// ends. A runtime that cannot start is logged with `what`; the server goes on.
pub fn spawn_local_thread<F, Fut>(name: &str, what: &'static str, make: F) -> std::io::Result<()>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + 'static,
{
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    warn!(error = %e, "{what} not started");
                    return;
                }
            };
            tokio::task::LocalSet::new().block_on(&rt, make());
        })?;
    Ok(())
}
