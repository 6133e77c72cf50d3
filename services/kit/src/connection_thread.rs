//! Whether the current thread is one of the gateway's connection threads
//! (`kubedav_gateway::edge::threads`): a thread that runs a single-threaded runtime of
//! its own for the client connections it serves. Calls to other services made there go
//! over gRPC connections opened on that same thread (`kubedav_remote::balance`), so a
//! call's I/O never wakes another thread.

use std::cell::Cell;

thread_local! {
    static MARKED: Cell<bool> = const { Cell::new(false) };
}

/// Marks the current thread as a connection thread, for the rest of its life.
pub fn mark() {
    MARKED.set(true);
}

/// Whether [`mark`] was called on the current thread.
pub fn is_marked() -> bool {
    MARKED.get()
}
