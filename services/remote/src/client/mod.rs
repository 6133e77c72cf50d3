//! The client adapters: each implements a port over gRPC, every call within a deadline
//! ([`crate::deadline`]).

/// Implements [`kubedav_lease::Watch`] for a client whose `calls` is a [`Caller`] of a
/// generated stub with a `Watch` method, and `watch_following` for a holder that follows
/// a registry: the lease stream opens on the stub. It lives as
/// long as the lease, so it has no deadline; the lease itself notices a silent service.
macro_rules! watch_on_the_stub {
    ($client:ty) => {
        impl kubedav_lease::Watch for $client {
            fn watch(
                &self,
                requests: kubedav_lease::Requests,
            ) -> futures_util::future::BoxFuture<
                'static,
                Result<kubedav_api::BoxStream<kubedav_api::lease::WatchEvent>, tonic::Status>,
            > {
                self.open_watch(tonic::Request::new(requests))
            }
        }

        impl $client {
            /// Opens a `Watch` stream as [`kubedav_lease::Watch::watch`] does, saying that
            /// the holder follows the registry whose key is `registry`
            /// ([`kubedav_lease::FOLLOWED_REGISTRY`]): a registered replica gives leases
            /// to no other holder.
            pub fn watch_following(
                &self,
                registry: &str,
                requests: kubedav_lease::Requests,
            ) -> futures_util::future::BoxFuture<
                'static,
                Result<kubedav_api::BoxStream<kubedav_api::lease::WatchEvent>, tonic::Status>,
            > {
                let Ok(registry) = tonic::metadata::AsciiMetadataValue::try_from(registry) else {
                    let refused = tonic::Status::invalid_argument(format!(
                        "the registry key {registry:?} is not visible ASCII: choose another --redis-prefix"
                    ));
                    return Box::pin(async move { Err(refused) });
                };
                let mut request = tonic::Request::new(requests);
                request
                    .metadata_mut()
                    .insert(kubedav_lease::FOLLOWED_REGISTRY, registry);
                self.open_watch(request)
            }

            /// Opens the `Watch` stream on the stub with `request`, its metadata as given.
            fn open_watch(
                &self,
                request: tonic::Request<kubedav_lease::Requests>,
            ) -> futures_util::future::BoxFuture<
                'static,
                Result<kubedav_api::BoxStream<kubedav_api::lease::WatchEvent>, tonic::Status>,
            > {
                use futures_util::StreamExt;
                let mut client = self.calls.client();
                Box::pin(async move { Ok(client.watch(request).await?.into_inner().boxed()) })
            }
        }
    };
}

mod auth;
mod fileio;
mod keep;
mod locks;
mod markdown;
mod records;
mod uploads;

pub use auth::RemoteAuth;
pub use fileio::RemoteFileIo;
pub use keep::RemoteKeep;
pub use locks::RemoteLocks;
pub use markdown::RemoteMarkdown;
pub use records::RemoteRecords;
pub use uploads::RemoteUploads;

use crate::deadline;
use std::future::Future;
use std::time::Duration;
use tonic::Status;

/// How long a call may take, relative to the client's call timeout
/// (`--rpc-timeout-seconds`).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Budget {
    /// One answer about one resource.
    Call,
    /// A call that walks a tree (DELETE, COPY, MOVE): [`deadline::TREE_FACTOR`] times as
    /// long.
    Tree,
}

impl Budget {
    fn timeout(self, call: Duration) -> Duration {
        match self {
            Budget::Call => call,
            Budget::Tree => call * deadline::TREE_FACTOR,
        }
    }
}

/// A generated tonic client, the name of the service it calls and the deadline of its
/// calls: the one place a unary call is made.
#[derive(Clone, Debug)]
pub(crate) struct Caller<C> {
    client: C,
    callee: &'static str,
    /// The deadline of a call ([`Budget::Call`]); streams must deliver each next message
    /// within it.
    timeout: Duration,
}

impl<C: Clone> Caller<C> {
    /// A caller with the default deadline, [`deadline::DEFAULT_CALL_TIMEOUT`].
    pub(crate) fn new(client: C, callee: &'static str) -> Self {
        Self {
            client,
            callee,
            timeout: deadline::DEFAULT_CALL_TIMEOUT,
        }
    }

    /// Sets the deadline of a call (at least [`deadline::MIN_CALL_TIMEOUT`]).
    pub(crate) fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout.max(deadline::MIN_CALL_TIMEOUT);
    }

    /// The deadline of a call.
    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
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
        let timeout = budget.timeout(self.timeout);
        let call = method(self.client.clone(), deadline::request(request, timeout));
        deadline::within(self.callee, timeout, async { Ok(call.await?.into_inner()) }).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A unary call that never answers, to `caller`'s deadline: how long it took.
    async fn stalled(caller: &Caller<()>, budget: Budget) -> Duration {
        let started = tokio::time::Instant::now();
        let status = caller
            .unary(budget, (), |_, _| {
                std::future::pending::<Result<tonic::Response<()>, Status>>()
            })
            .await
            .unwrap_err();
        assert_eq!(status.code(), tonic::Code::DeadlineExceeded);
        started.elapsed()
    }

    /// Each client holds its own deadline: two with different ones in one process each
    /// keep theirs (the setting is no longer process-wide).
    #[tokio::test(start_paused = true)]
    async fn each_caller_keeps_its_own_deadline() {
        let default = Caller::new((), "fileio");
        let mut short = Caller::new((), "fileio");
        short.set_timeout(Duration::from_secs(2));
        let mut tiny = Caller::new((), "locks");
        tiny.set_timeout(Duration::ZERO);
        assert_eq!(stalled(&short, Budget::Call).await, Duration::from_secs(2));
        assert_eq!(stalled(&short, Budget::Tree).await, Duration::from_secs(20));
        assert_eq!(
            stalled(&default, Budget::Call).await,
            deadline::DEFAULT_CALL_TIMEOUT
        );
        assert_eq!(stalled(&tiny, Budget::Call).await, deadline::MIN_CALL_TIMEOUT);
        assert_eq!(short.timeout(), Duration::from_secs(2));
    }
}
