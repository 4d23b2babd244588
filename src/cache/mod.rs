//! A shared HTTP cache for proxy routes (RFC 9111), in named zones that
//! routes share by naming them (`cache = "NAME"`).
//!
//! A zone ([`zone`]) keeps its responses in tiers behind one storage
//! interface ([`tier`]): memory ([`memory`]), one index for every worker read
//! without a lock, and optionally disk ([`disk`], files in [`disk_file`]'s
//! format, answered by [`disk_hit`]), to which responses are written through
//! and where they are found again after a restart; each stays within its
//! budget under S3-FIFO eviction ([`evict`]). [`policy`] holds the RFC 9111
//! decisions as pure functions over [`control`]'s directives; the proxy calls
//! the cache through a tap ([`tap`], [`store`]) on its phases, whatever the
//! upstream's protocol, so a route without a cache pays one branch.
//! Concurrent misses of a key collapse into one upstream request ([`fill`],
//! [`follow`]); hits are answered by [`answer`].

pub mod admin;
pub mod answer;
pub mod configure;
pub mod control;
pub mod disk;
pub mod disk_file;
pub mod disk_hit;
pub mod disk_object;
pub mod entry;
pub mod evict;
pub mod fill;
pub mod follow;
pub mod key;
pub mod memory;
pub mod policy;
pub mod status_view;
pub mod store;
pub mod tap;
pub mod targeted;
pub mod tier;
pub mod zone;
