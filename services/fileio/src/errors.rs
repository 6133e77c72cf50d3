//! Mapping of OS errors to the gRPC codes of the fileio contract.

use kubedav_api::path::VolumePath;
use rustix::io::Errno;
use tonic::Status;

/// What was being done when an error happened; it decides the meaning of some errnos.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Looking a path up.
    Resolve,
    /// Creating something in a parent collection.
    Create,
    /// Writing file data.
    Write,
    /// Any other step.
    Other,
}

/// The contract's status for an OS error on `path`.
pub fn io_status(errno: Errno, op: Op, path: &VolumePath) -> Status {
    match errno {
        Errno::NOENT => Status::not_found(format!("{path} does not exist")),
        Errno::NOTDIR if op == Op::Resolve => {
            Status::not_found(format!("{path} does not exist (a parent is not a collection)"))
        }
        Errno::NOTDIR => Status::failed_precondition(format!("a parent of {path} is not a collection")),
        Errno::XDEV | Errno::LOOP => {
            Status::permission_denied(format!("{path} resolves outside the served root"))
        }
        Errno::ROFS => Status::permission_denied("the volume is read-only"),
        Errno::ACCESS | Errno::PERM => Status::permission_denied(format!("the server may not access {path}")),
        Errno::NOSPC | Errno::DQUOT => Status::resource_exhausted("the volume is full"),
        Errno::EXIST => Status::already_exists(format!("{path} already exists")),
        Errno::ISDIR => Status::failed_precondition(format!("{path} is a collection")),
        Errno::NOTEMPTY => Status::failed_precondition(format!("{path} is not empty")),
        Errno::NAMETOOLONG => Status::invalid_argument(format!("{path} is too long for the volume")),
        Errno::FBIG => Status::resource_exhausted("the file is larger than the volume allows"),
        other => Status::internal(format!("{path}: {other} (during {op:?})")),
    }
}

/// Status for a failed `spawn_blocking` join (a panic or shutdown).
pub fn join_status(e: tokio::task::JoinError) -> Status {
    if e.is_cancelled() {
        Status::unavailable("fileio is shutting down")
    } else {
        Status::internal("a fileio worker panicked; see the fileio log")
    }
}

/// Runs blocking filesystem work on tokio's blocking pool.
pub async fn blocking<T, F>(work: F) -> Result<T, Status>
where
    F: FnOnce() -> Result<T, Status> + Send + 'static,
    T: Send + 'static,
{
    tokio::task::spawn_blocking(work).await.map_err(join_status)?
}
