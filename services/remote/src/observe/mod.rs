//! Observing gRPC calls on both ends of a hop.
//!
//! * **Client** ([`ObservedChannel`]): every call gets a client span named
//!   `package.Service/Method` with the OpenTelemetry RPC attributes (`rpc.system`,
//!   `rpc.service`, `rpc.method`, `server.address`, `server.port`, and
//!   `rpc.grpc.status_code` once it ends). The span's W3C trace context and the request's
//!   id ([`REQUEST_ID`]) travel in the call's metadata.
//! * **Server** ([`ServerLayer`]): every incoming call gets a server span that continues
//!   the caller's trace context and records the caller's request id, with the same
//!   attributes (`server.address` is the `:authority` the caller addressed); the call
//!   runs with that id as its [`REQUEST_ID`].
//! * Both spans are made only when something reads them ([`span_wanted`]) or debug lines
//!   are enabled here; the request id and the metrics do not depend on them.
//! * **Metrics** on both ends, in the style of go-grpc-prometheus:
//!   `kubedav_grpc_{client,server}_started_total`, `..._handled_total` (with the gRPC
//!   status `grpc_code`) and `..._handling_seconds`, labelled `grpc_service` and
//!   `grpc_method` (not `service`, which Kubernetes scrapes add). A call is handled when its last response
//!   message and status have arrived, so a streaming call is timed to its end. Labels are
//!   bounded: methods outside kubedav's, health's and reflection's protos count as
//!   `other`. The handling histograms keep the trace id of a sampled call as their
//!   buckets' exemplars ([`sampled_trace_id`]).

//!
//! The modules: [`metrics`] (the call counters and histograms), [`body`] (recording a
//! call's end when its status arrives), [`client`] ([`ObservedChannel`]), [`server`]
//! ([`ServerLayer`]); trace context and request id in metadata are
//! `kubedav_kit::telemetry::propagation`'s, which the gateway reads from its requests too.

/// The span of one gRPC call named by `path` (`/package.Service/Method`): `$name`, of
/// OpenTelemetry kind `$kind`, with the RPC attributes both ends share, and any further
/// fields after them. The status fields are recorded when the call ends ([`body`]).
macro_rules! rpc_span {
    ($name:literal, $kind:literal, $path:expr, $address:expr, $port:expr $(, $($extra:tt)+)?) => {{
        let path: &str = $path;
        let (service, method) = $crate::observe::service_and_method(path);
        tracing::info_span!(
            $name,
            otel.name = %path.trim_start_matches('/'),
            otel.kind = $kind,
            otel.status_code = tracing::field::Empty,
            rpc.system = "grpc",
            rpc.service = %service,
            rpc.method = %method,
            server.address = %$address,
            server.port = $port,
            rpc.grpc.status_code = tracing::field::Empty,
            $($($extra)+)?
        )
    }};
}

mod body;
mod client;
pub mod metrics;
mod server;

pub use body::ObservedBody;
pub use client::ObservedChannel;
pub use kubedav_kit::telemetry::propagation::{
    REQUEST_ID, REQUEST_ID_HEADER, extract_context, sampled_trace_id,
};
pub use metrics::{register_client_metrics, register_server_metrics};
pub use server::{ObservedServer, ServerLayer};

/// Whether a request's span is read beyond text log lines (re-exported from
/// `kubedav_kit::telemetry`, for the gateway's request span).
pub use kubedav_kit::telemetry::span_wanted;

/// A call's service and method from its path, `/package.Service/Method`; a path of
/// another shape is all service.
fn service_and_method(path: &str) -> (&str, &str) {
    let path = path.trim_start_matches('/');
    path.split_once('/').unwrap_or((path, ""))
}
