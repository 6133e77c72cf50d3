//! kubedav's services across the wire: everything a call between two processes needs,
//! and nothing a service core needs to do its work.
//!
//! * [`client`]: the tonic clients that implement the ports of `kubedav-api`
//!   ([`client::RemoteFileIo`] and its siblings), each call within a deadline
//!   ([`deadline`]).
//! * [`server`]: the tonic services that expose any implementation of a port
//!   ([`server::FileIoGrpc`] and its siblings), and [`serve`], which runs one with the
//!   standard health and reflection services.
//! * The lease protocol's `Watch` calls, both ends (the protocol itself is
//!   `kubedav-lease`'s).
//! * [`balance`]: one channel per pod behind a headless Service, calls spread over
//!   them, each reconnecting with [`backoff`].
//! * [`observe`]: spans, trace-context propagation and call metrics on both ends.
//! * [`frames`]: the `Read` and `Write` calls framed by hand, so a file's bytes are not
//!   copied.
//! * [`stubs`]: the tonic stubs generated from the services of `proto/`.
//!
//! `docs/architecture.md` says why these live apart from `kubedav-kit` (process
//! plumbing every target shares) and from `kubedav-api` (the contract).

#![forbid(unsafe_code)]

pub mod backoff;
pub mod balance;
pub mod client;
pub mod deadline;
pub mod frames;
pub mod observe;
pub mod serve;
pub mod server;

/// The tonic client and server stubs generated from the services of `proto/`, over the
/// message types of `kubedav_api::pb`.
pub mod stubs {
    /// `kubedav.fileio.v1.FileIo`.
    #[allow(missing_docs, clippy::all)]
    pub mod fileio {
        tonic::include_proto!("kubedav.fileio.v1");
    }
    /// `kubedav.locks.v1.Locks`.
    #[allow(missing_docs, clippy::all)]
    pub mod locks {
        tonic::include_proto!("kubedav.locks.v1");
    }
    /// `kubedav.auth.v1.Auth`.
    #[allow(missing_docs, clippy::all)]
    pub mod auth {
        tonic::include_proto!("kubedav.auth.v1");
    }
    /// `kubedav.markdown.v1.Markdown`.
    #[allow(missing_docs, clippy::all)]
    pub mod markdown {
        tonic::include_proto!("kubedav.markdown.v1");
    }
    /// `kubedav.records.v1.Records`.
    #[allow(missing_docs, clippy::all)]
    pub mod records {
        tonic::include_proto!("kubedav.records.v1");
    }
    /// `kubedav.keep.v1.Keep`.
    #[allow(missing_docs, clippy::all)]
    pub mod keep {
        tonic::include_proto!("kubedav.keep.v1");
    }
    /// `kubedav.uploads.v1.Uploads`.
    #[allow(missing_docs, clippy::all)]
    pub mod uploads {
        tonic::include_proto!("kubedav.uploads.v1");
    }
}
