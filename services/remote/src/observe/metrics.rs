//! The gRPC call metrics of both ends, in the style of go-grpc-prometheus (see
//! [the module above](super)).

use kubedav_metrics::{Counter, CounterFamily, TracedHistogram, TracedHistogramFamily};
use std::collections::{HashMap, HashSet};
use std::sync::{LazyLock, OnceLock};

const BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// The call metrics of one end of a hop.
pub(super) struct EndMetrics {
    started: CounterFamily,
    handled: CounterFamily,
    handling: TracedHistogramFamily,
    /// The children of every known method and of `other`, looked up by label once: a
    /// call then costs no label hashing and no allocation.
    methods: OnceLock<HashMap<&'static str, MethodMetrics>>,
}

/// One method's metric children on one end.
pub(super) struct MethodMetrics {
    service: &'static str,
    method: &'static str,
    pub(super) started: Counter,
    pub(super) handling: TracedHistogram,
    /// By `tonic::Code` value; made when a code first happens.
    handled: [OnceLock<Counter>; 17],
}

/// The path under which calls to unknown methods are counted.
const OTHER_PATH: &str = "/other/other";

impl EndMetrics {
    fn register(end: &str) -> Self {
        let started = CounterFamily::new(
            &format!("kubedav_grpc_{end}_started_total"),
            &format!("gRPC calls started on the {end} side, by service and method."),
            &["grpc_service", "grpc_method"],
        );
        let handled = CounterFamily::new(
            &format!("kubedav_grpc_{end}_handled_total"),
            &format!("gRPC calls completed on the {end} side, by service, method and status code."),
            &["grpc_service", "grpc_method", "grpc_code"],
        );
        let handling = TracedHistogramFamily::new(
            &format!("kubedav_grpc_{end}_handling_seconds"),
            &format!("Time from a gRPC call's start to its status on the {end} side."),
            &["grpc_service", "grpc_method"],
            BUCKETS,
        );
        Self {
            started,
            handled,
            handling,
            methods: OnceLock::new(),
        }
    }

    /// The children of the method at `path` (`other` for an unknown one).
    pub(super) fn of(&self, path: &str) -> &MethodMetrics {
        let methods = self.methods.get_or_init(|| {
            KNOWN
                .iter()
                .map(String::as_str)
                .chain([OTHER_PATH])
                .map(|path| {
                    let (service, method) = labels(path);
                    let metrics = MethodMetrics {
                        service,
                        method,
                        started: self.started.with_label_values(&[service, method]),
                        handling: self.handling.with_label_values(&[service, method]),
                        handled: [const { OnceLock::new() }; 17],
                    };
                    (path, metrics)
                })
                .collect()
        });
        methods.get(path).unwrap_or_else(|| &methods[OTHER_PATH])
    }
}

impl MethodMetrics {
    pub(super) fn handled(&self, metrics: &EndMetrics, code: tonic::Code) -> &Counter {
        self.handled[(code as usize).min(16)].get_or_init(|| {
            metrics
                .handled
                .with_label_values(&[self.service, self.method, code_name(code)])
        })
    }
}

pub(super) static CLIENT: LazyLock<EndMetrics> = LazyLock::new(|| EndMetrics::register("client"));
pub(super) static SERVER: LazyLock<EndMetrics> = LazyLock::new(|| EndMetrics::register("server"));

/// Every method kubedav serves or calls, as `/package.Service/Method`.
static KNOWN: LazyLock<HashSet<String>> = LazyLock::new(|| {
    use prost::Message;
    let mut known: HashSet<String> = [
        "/grpc.health.v1.Health/Check",
        "/grpc.health.v1.Health/Watch",
        "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    if let Ok(files) = prost_types::FileDescriptorSet::decode(kubedav_api::FILE_DESCRIPTOR_SET) {
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
    known
});

/// The bounded `(service, method)` labels of a call path.
fn labels(path: &str) -> (&'static str, &'static str) {
    if let Some(known) = KNOWN.get(path)
        && let Some((service, method)) = known.trim_start_matches('/').split_once('/')
    {
        return (service, method);
    }
    ("other", "other")
}

/// Starts the series of every known method at zero on the `end` side, so that rates and
/// alerts answer before the first call.
fn register_known(metrics: &'static EndMetrics) {
    for path in KNOWN.iter() {
        metrics.of(path).handled(metrics, tonic::Code::Ok);
    }
}

/// Registers the client metrics with their known series at zero (the gateway calls it).
pub fn register_client_metrics() {
    register_known(&CLIENT);
}

/// Registers the server metrics with their known series at zero (each service calls it).
pub fn register_server_metrics() {
    register_known(&SERVER);
}

/// The name a gRPC code has in metrics (as go-grpc-prometheus spells it).
fn code_name(code: tonic::Code) -> &'static str {
    use tonic::Code::*;
    match code {
        Ok => "OK",
        Cancelled => "Canceled",
        Unknown => "Unknown",
        InvalidArgument => "InvalidArgument",
        DeadlineExceeded => "DeadlineExceeded",
        NotFound => "NotFound",
        AlreadyExists => "AlreadyExists",
        PermissionDenied => "PermissionDenied",
        ResourceExhausted => "ResourceExhausted",
        FailedPrecondition => "FailedPrecondition",
        Aborted => "Aborted",
        OutOfRange => "OutOfRange",
        Unimplemented => "Unimplemented",
        Internal => "Internal",
        Unavailable => "Unavailable",
        DataLoss => "DataLoss",
        Unauthenticated => "Unauthenticated",
    }
}

/// The gRPC status in a header or trailer map, if it has one.
pub(super) fn status_in(headers: &http::HeaderMap) -> Option<tonic::Code> {
    headers
        .get("grpc-status")
        .map(|value| tonic::Code::from_bytes(value.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_methods_are_labelled_and_others_pooled() {
        assert_eq!(
            labels("/kubedav.fileio.v1.FileIo/List"),
            ("kubedav.fileio.v1.FileIo", "List")
        );
        assert_eq!(labels("/grpc.health.v1.Health/Check").1, "Check");
        assert_eq!(
            labels("/kubedav.fileio.v1.FileIo/NoSuchMethod-1"),
            ("other", "other")
        );
        assert_eq!(labels("/x/y/z"), ("other", "other"));
    }

    #[test]
    fn the_status_comes_from_headers_or_trailers() {
        let mut headers = http::HeaderMap::new();
        assert_eq!(status_in(&headers), None);
        headers.insert("grpc-status", http::HeaderValue::from_static("14"));
        assert_eq!(status_in(&headers), Some(tonic::Code::Unavailable));
        assert_eq!(code_name(tonic::Code::Unavailable), "Unavailable");
        assert_eq!(code_name(tonic::Code::Ok), "OK");
    }
}
