//! gRPC server metrics: calls started, by service and method.
//!
//! Labels are bounded: only the methods declared in the served descriptor sets get
//! their own label values; any other path counts as `other`.

use prometheus::{IntCounterVec, register_int_counter_vec};
use prost::Message;
use std::collections::HashSet;
use std::sync::LazyLock;

static STARTED: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!(
        "kubedav_grpc_server_started_total",
        "gRPC calls started on this server, by service and method.",
        &["service", "method"]
    )
    .expect("metric registers once")
});

static KNOWN: LazyLock<HashSet<String>> = LazyLock::new(|| {
    let mut known = HashSet::new();
    for set in [
        kubedav_api::FILE_DESCRIPTOR_SET,
        tonic_health::pb::FILE_DESCRIPTOR_SET,
    ] {
        let Ok(files) = prost_types::FileDescriptorSet::decode(set) else {
            continue;
        };
        for file in files.file {
            for service in &file.service {
                for method in &service.method {
                    known.insert(format!(
                        "/{}.{}/{}",
                        file.package(),
                        service.name(),
                        method.name()
                    ));
                }
            }
        }
    }
    known.insert("/grpc.reflection.v1.ServerReflection/ServerReflectionInfo".into());
    known
});

/// Counts one started call to `path` (`/package.Service/Method`).
pub fn started(path: &str) {
    let (service, method) = if KNOWN.contains(path) {
        path.trim_start_matches('/')
            .split_once('/')
            .unwrap_or(("other", "other"))
    } else {
        ("other", "other")
    };
    STARTED.with_label_values(&[service, method]).inc();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_methods_are_labelled_and_others_pooled() {
        assert!(KNOWN.contains("/kubedav.fileio.v1.FileIo/List"));
        assert!(KNOWN.contains("/kubedav.locks.v1.Locks/Discover"));
        assert!(KNOWN.contains("/grpc.health.v1.Health/Check"));
        started("/kubedav.fileio.v1.FileIo/List");
        started("/kubedav.fileio.v1.FileIo/NoSuchMethod-1");
        started("/kubedav.fileio.v1.FileIo/NoSuchMethod-2");
        assert_eq!(
            STARTED
                .with_label_values(&["kubedav.fileio.v1.FileIo", "List"])
                .get(),
            1
        );
        assert_eq!(STARTED.with_label_values(&["other", "other"]).get(), 2);
    }
}
