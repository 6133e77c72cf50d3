//! The client adapters: each implements a port over gRPC, every call within a deadline
//! ([`crate::deadline`]).

mod auth;
mod fileio;
mod locks;
mod markdown;

pub use auth::RemoteAuth;
pub use fileio::RemoteFileIo;
pub use locks::RemoteLocks;
pub use markdown::RemoteMarkdown;

use crate::deadline;
use std::future::Future;
use std::time::Duration;
use tonic::Status;

/// How long a call may take, relative to `--rpc-timeout-seconds`.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Budget {
    /// One answer about one resource.
    Call,
    /// A call that walks a tree (DELETE, COPY, MOVE): [`deadline::TREE_FACTOR`] times as
    /// long.
    Tree,
}

impl Budget {
    fn timeout(self) -> Duration {
        match self {
            Budget::Call => deadline::call_timeout(),
            Budget::Tree => deadline::call_timeout() * deadline::TREE_FACTOR,
        }
    }
}

/// A generated tonic client and the name of the service it calls: the one place a
/// unary call is made.
#[derive(Clone, Debug)]
pub(crate) struct Caller<C> {
    client: C,
    callee: &'static str,
}

impl<C: Clone> Caller<C> {
    pub(crate) fn new(client: C, callee: &'static str) -> Self {
        Self { client, callee }
    }

    /// A fresh handle on the client, for a streaming call (tonic's calls take `&mut`).
    pub(crate) fn client(&self) -> C {
        self.client.clone()
    }

    /// Makes the unary call `method` (for example `|mut c, r| async move { c.stat(r).await }`)
    /// with `request`, within `budget`: the deadline is sent along as `grpc-timeout`, and
    /// a service that does not answer in time fails the call with DEADLINE_EXCEEDED.
    pub(crate) async fn unary<Req, Resp, Call>(
        &self,
        budget: Budget,
        request: Req,
        method: impl FnOnce(C, tonic::Request<Req>) -> Call,
    ) -> Result<Resp, Status>
    where
        Call: Future<Output = Result<tonic::Response<Resp>, Status>>,
    {
        let timeout = budget.timeout();
        let call = method(self.client.clone(), deadline::request(request, timeout));
        deadline::within(self.callee, timeout, async { Ok(call.await?.into_inner()) }).await
    }
}
