//! Which reads of files fill [`super::CachedFileIo`]'s copies: a file is kept from its
//! second ask ([`AskedOnce`]), and read whole for that by one request at a time
//! ([`Filling`]).

use quick_cache::sync::Cache;
use std::collections::HashSet;
use std::sync::Mutex;

/// The files being read whole to be kept: one request per file at a time does it, so a
/// burst of misses (each kept copy is fetched again after the freshness bound) holds one
/// file's bytes, not one per request.
#[derive(Default)]
pub(super) struct Filling(Mutex<HashSet<String>>);

impl Filling {
    /// Claims `path`, unless another request is reading it whole; released when the
    /// claim is dropped.
    pub(super) fn claim(&self, path: &str) -> Option<FillClaim<'_>> {
        let mut paths = self.0.lock().unwrap_or_else(|e| e.into_inner());
        paths.insert(path.to_owned()).then(|| FillClaim {
            filling: self,
            path: path.to_owned(),
        })
    }
}

/// The paths of files sent without being kept at their first ask
/// (`CachedFileIo::read_or_keep`): the next ask of one keeps it. Bounded: the least
/// recently remembered are forgotten first, and a path is forgotten once asked again.
pub(super) struct AskedOnce(Cache<String, ()>);

/// How many paths [`AskedOnce`] remembers.
const ASKED_ONCE_PATHS: usize = 4096;

impl Default for AskedOnce {
    fn default() -> Self {
        Self(Cache::new(ASKED_ONCE_PATHS))
    }
}

impl AskedOnce {
    /// Remembers that `path` was asked for once.
    pub(super) fn remember(&self, path: String) {
        self.0.insert(path, ());
    }

    /// Whether `path` was asked for before (then it is forgotten: the ask keeps it).
    pub(super) fn seen(&self, path: &str) -> bool {
        self.0.remove(path).is_some()
    }
}

/// A claim of [`Filling`] on one path.
pub(super) struct FillClaim<'a> {
    filling: &'a Filling,
    path: String,
}

impl Drop for FillClaim<'_> {
    fn drop(&mut self) {
        self.filling
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.path);
    }
}
