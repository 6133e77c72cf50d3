//! kubedav's locks service core: the WebDAV lock manager (RFC 4918 sections 6, 7, 10.4).
//!
//! Two stores implement the [`Locks`](kubedav_api::locks::Locks) port with the same
//! rules ([`rules`]): [`MemoryLocks`] keeps the locks of one process (the default, and
//! the all-in-one store) and [`RedisLocks`] keeps them in Redis, shared by every replica
//! and kept across their restarts.

#![forbid(unsafe_code)]

mod memory;
mod metrics;
mod redis_store;
pub mod rules;

pub use memory::MemoryLocks;
pub use redis_store::RedisLocks;
