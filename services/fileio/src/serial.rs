//! Per-path serialization of the writes that check a resource's state and then change
//! it: a conditional PUT compares the etag and renames its upload into place, a DELETE
//! compares the etag and unlinks. Without it, another writer could slip in between the
//! check and the change (two `If-Match` PUTs with the same etag would both win). Each
//! such step holds the lock of its path's stripe, so within one fileio process they
//! happen one at a time per path; the steps are short (a statx and a rename or unlink),
//! never a body's transfer or a tree's removal. Several fileio processes on one shared
//! volume do not share these locks.

use kubedav_api::path::VolumePath;
use std::hash::{BuildHasher, RandomState};
use std::sync::{LazyLock, Mutex, MutexGuard};

/// How many locks the paths are spread over: enough that unrelated paths rarely wait
/// for each other.
const STRIPES: usize = 64;

static LOCKS: [Mutex<()>; STRIPES] = [const { Mutex::new(()) }; STRIPES];
static HASHER: LazyLock<RandomState> = LazyLock::new(RandomState::new);

/// Holds `path`'s stripe until the guard drops.
pub fn lock(path: &VolumePath) -> MutexGuard<'static, ()> {
    let stripe = HASHER.hash_one(path.as_str()) as usize % STRIPES;
    LOCKS[stripe]
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_holds_its_stripe() {
        let path = VolumePath::parse("a/b.txt").unwrap();
        let stripe = HASHER.hash_one(path.as_str()) as usize % STRIPES;
        let held = lock(&path);
        let taken = std::thread::spawn(move || LOCKS[stripe].try_lock().is_err());
        assert!(taken.join().unwrap(), "another thread must wait for the path");
        drop(held);
    }
}
