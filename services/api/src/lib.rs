//! kubedav's service contracts: what every side of a call agrees on, and nothing that
//! makes a call.
//!
//! * [`pb`]: the message types generated from `proto/kubedav/*/v1/*.proto` (the services'
//!   tonic stubs are `kubedav-remote`'s).
//! * One Rust trait per service (the port the gateway talks to), e.g. [`fileio::FileIo`].
//!   A service core implements it; in `--target=all` the gateway calls that core directly.
//!   The adapters between a trait and gRPC live in `kubedav-remote`.
//! * The value types both sides share: [`path::VolumePath`] (the one definition of a
//!   valid volume path, checked on both sides of the wire), [`ranges`], [`properties`],
//!   and what a [`lease::Invalidation`] names.
//! * [`markdown::escape`]: how text is escaped in the Markdown kubedav writes, the one
//!   rule the markdown service and the gateway's agent listings share (pure text code).
//!
//! Errors cross the ports as [`tonic::Status`]: the gRPC status code *is* the contract
//! (see `docs/architecture.md`), so the local and the remote path fail identically.

#![forbid(unsafe_code)]

pub mod auth;
pub mod checksums;
pub mod fileio;
pub mod keep;
pub mod lease;
pub mod locks;
pub mod markdown;
pub mod path;
pub mod properties;
pub mod ranges;
pub mod records;
pub mod uploads;

/// Generated protobuf message types.
pub mod pb {
    /// `kubedav.fileio.v1`: the volume.
    pub mod fileio {
        #[allow(missing_docs, clippy::all)]
        pub mod v1 {
            tonic::include_proto!("kubedav.fileio.v1");
        }
    }
    /// `kubedav.locks.v1`: the WebDAV lock manager.
    pub mod locks {
        #[allow(missing_docs, clippy::all)]
        pub mod v1 {
            tonic::include_proto!("kubedav.locks.v1");
        }
    }
    /// `kubedav.auth.v1`: credential verification.
    pub mod auth {
        #[allow(missing_docs, clippy::all)]
        pub mod v1 {
            tonic::include_proto!("kubedav.auth.v1");
        }
    }
    /// `kubedav.lease.v1`: leases on what a client keeps of a service's answers.
    pub mod lease {
        #[allow(missing_docs, clippy::all)]
        pub mod v1 {
            tonic::include_proto!("kubedav.lease.v1");
        }
    }
    /// `kubedav.keep.v1`: the trash and the versions.
    pub mod keep {
        #[allow(missing_docs, clippy::all)]
        pub mod v1 {
            tonic::include_proto!("kubedav.keep.v1");
        }
    }
    /// `kubedav.uploads.v1`: files that arrive in many requests.
    pub mod uploads {
        #[allow(missing_docs, clippy::all)]
        pub mod v1 {
            tonic::include_proto!("kubedav.uploads.v1");
        }
    }
    /// `kubedav.records.v1`: what kubedav keeps for its users besides their files.
    pub mod records {
        #[allow(missing_docs, clippy::all)]
        pub mod v1 {
            tonic::include_proto!("kubedav.records.v1");
        }
    }
    /// `kubedav.markdown.v1`: HTML to Markdown conversion.
    pub mod markdown {
        #[allow(missing_docs, clippy::all)]
        pub mod v1 {
            tonic::include_proto!("kubedav.markdown.v1");
        }
    }
}

/// The encoded `FileDescriptorSet` of every kubedav proto, for gRPC reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/kubedav_descriptor.bin"));

/// A boxed stream of results, the shape every streaming port method uses.
pub type BoxStream<T> =
    std::pin::Pin<Box<dyn futures_core::Stream<Item = Result<T, tonic::Status>> + Send + 'static>>;

/// Largest data chunk any kubedav stream carries (file bodies, Markdown).
pub const MAX_CHUNK_BYTES: usize = 256 * 1024;
