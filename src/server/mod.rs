//! Downstream drivers: the code that owns a client connection's bytes. Each
//! driver turns requests into [`crate::http::Session`]s for the handlers and
//! their answers back into bytes; handlers never import a driver.

pub mod download_pacing;
mod file_region;
pub mod h1;
pub mod h2;
pub(crate) mod prior_knowledge;
#[cfg(test)]
mod test_harness;
pub mod transport;
