//! The properties kubedav's fuzz targets check, one module per target, each with a
//! `check(data)` that panics when a property fails.
//!
//! `services/fuzz` (`make fuzz`, cargo-fuzz on nightly) explores new inputs with them;
//! this crate's test checks them on every input of the committed corpora
//! (`services/fuzz/corpus/{target}/`), in the ordinary `make test`, so an input that once
//! found a bug keeps guarding against it without the nightly build.
#![forbid(unsafe_code)]

pub mod accept;
pub mod convert;
pub mod credentials;
pub mod if_header;
pub mod path_decode;
pub mod range;
pub mod xml_request;

/// One target's property check: panics when a property fails for `data`.
pub type Check = fn(data: &[u8]);

/// The fuzz targets: each names a module here and a corpus directory.
pub const TARGETS: [(&str, Check); 7] = [
    ("accept", accept::check),
    ("convert", convert::check),
    ("credentials", credentials::check),
    ("if_header", if_header::check),
    ("path_decode", path_decode::check),
    ("range", range::check),
    ("xml_request", xml_request::check),
];
