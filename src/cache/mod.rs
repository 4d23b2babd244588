//! A shared HTTP cache for proxy routes (RFC 9111), in named zones that
//! routes share by naming them (`cache = "NAME"`).
//!
//! A zone ([`zone`]) is one index for every worker, read without a lock;
//! [`policy`] holds the RFC 9111 decisions as pure functions over
//! [`control`]'s directives; the proxy calls the cache through a tap
//! ([`tap`], [`store`]) on its phases, so a route without a cache pays one
//! branch. Concurrent misses of a key collapse into one upstream request
//! ([`fill`], [`follow`]); hits are answered by [`answer`]; memory stays
//! within the zone's budget under S3-FIFO eviction ([`evict`]). A zone may
//! add a disk tier ([`disk`], files in [`disk_file`]'s format, answered by
//! [`disk_hit`]): responses are written through to it and found again after
//! a restart.

pub mod admin;
pub mod answer;
pub mod configure;
pub mod control;
pub mod disk;
pub mod disk_file;
pub mod disk_hit;
pub mod entry;
pub mod evict;
pub mod fill;
pub mod follow;
pub mod key;
pub mod policy;
pub mod store;
pub mod tap;
pub mod zone;
