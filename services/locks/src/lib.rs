//! kubedav's locks service core: the WebDAV lock manager (RFC 4918 sections 6, 7, 10.4).
//!
//! [`MemoryLocks`] keeps the locks of one process in memory (the default, and the
//! all-in-one store; Redis arrives for many replicas). Locks are indexed by their root
//! path in an ordered map, so the locks that apply to a path are found by looking up its
//! ancestors, and the locks below a collection by one range scan, whatever the number
//! of locks elsewhere. Expired locks are dropped whenever they are looked at.

mod store;

pub use store::MemoryLocks;
