//! Serving a kubedav gRPC service: the service itself, the standard gRPC health service
//! (`grpc.health.v1.Health`, for Kubernetes gRPC probes and grpcurl) and server
//! reflection, with every call observed ([`crate::observe`]: a span continuing the
//! caller's trace context, and the server call metrics).

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use tokio::net::TcpListener;
use tonic::server::NamedService;
use tonic::service::Routes;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::server::TcpIncoming;

/// The shared token every call to a kubedav service must carry, as
/// `authorization: Bearer <token>`, when one is configured (`--grpc-token`). The health
/// service stays open, so Kubernetes gRPC probes need no secret.
#[derive(Clone, Default)]
pub struct RequireToken(Option<Arc<[u8]>>);

impl RequireToken {
    /// Calls must carry `token`; `None` or an empty token lets every call through.
    pub fn new(token: Option<&str>) -> Self {
        Self(
            token
                .filter(|t| !t.is_empty())
                .map(|t| Arc::from(format!("Bearer {t}").as_bytes())),
        )
    }
}

impl tonic::service::Interceptor for RequireToken {
    fn call(&mut self, request: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        let Some(wanted) = &self.0 else {
            return Ok(request);
        };
        let given = request
            .metadata()
            .get("authorization")
            .map(|v| v.as_bytes())
            .unwrap_or_default();
        if bool::from(subtle::ConstantTimeEq::ct_eq(given, &wanted[..])) {
            Ok(request)
        } else {
            Err(tonic::Status::unauthenticated(
                "this kubedav service needs the shared token: give the caller the same \
                 --grpc-token (KUBEDAV_GRPC_TOKEN) as the service",
            ))
        }
    }
}

/// Serves `service`, the routes of the kubedav service `name`, plus health and
/// reflection, on `listener` until `shutdown` resolves; calls to reflection must pass
/// `token` (`service` checks it itself).
async fn serve(
    listener: TcpListener,
    name: &str,
    service: Routes,
    token: RequireToken,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), String> {
    crate::observe::register_server_metrics();
    let (health_reporter, health_service) = tonic_health::server::health_reporter();
    health_reporter
        .set_service_status(name, tonic_health::ServingStatus::Serving)
        .await;
    health_reporter
        .set_service_status("", tonic_health::ServingStatus::Serving)
        .await;
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(kubedav_api::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()
        .map_err(|e| format!("cannot build gRPC reflection: {e}"))?;
    let routes = service
        .add_service(health_service)
        .add_service(InterceptedService::new(reflection, token));
    let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
    tonic::transport::Server::builder()
        // Bulk streams on a local network: windows that let an upload's data flow
        // without waiting for WINDOW_UPDATEs every 64 KiB (bounded per connection at
        // 16 MiB), and frames that carry a whole 256 KiB chunk.
        .initial_stream_window_size(Some(4 << 20))
        .initial_connection_window_size(Some(16 << 20))
        .max_frame_size(Some(MAX_FRAME_BYTES))
        .layer(crate::observe::ServerLayer)
        .add_routes(routes)
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await
        .map_err(|e| format!("gRPC server failed: {e}"))
}

/// The largest HTTP/2 frame a kubedav process accepts: a 256 KiB chunk with its gRPC and
/// protobuf framing fits in one.
pub const MAX_FRAME_BYTES: u32 = 1 << 20;

/// A request as tonic's server hands it to a service.
type GrpcRequest = http::Request<tonic::body::Body>;

/// Answers every gRPC request: a status is an answer, so the service never fails.
pub trait AnswersGrpc:
    tower_service::Service<GrpcRequest, Response = http::Response<tonic::body::Body>, Error = Infallible>
{
}

impl<S> AnswersGrpc for S where
    S: tower_service::Service<GrpcRequest, Response = http::Response<tonic::body::Body>, Error = Infallible>
{
}

/// A gRPC service a target serves: what tonic's server takes, answering every request.
/// (Rust has no trait aliases yet: a blanket impl makes this one.)
pub trait GrpcService:
    AnswersGrpc<Future: Send + 'static> + NamedService + Clone + Send + Sync + 'static
{
}

impl<S> GrpcService for S where
    S: AnswersGrpc<Future: Send + 'static> + NamedService + Clone + Send + Sync + 'static
{
}

/// Where a service target listens, and the token its callers must carry.
pub struct Listen<'a> {
    /// The target's name, in the announcements (`"<name> gRPC listening on ..."`).
    pub name: &'a str,
    /// The gRPC address.
    pub grpc: &'a str,
    /// The admin address.
    pub admin: &'a str,
    /// The shared token calls must carry.
    pub token: RequireToken,
    /// Told the gRPC address once it is bound (a replica registers it).
    pub on_bound: Option<Box<dyn FnOnce(std::net::SocketAddr) + Send>>,
    /// How long the gRPC port keeps accepting calls after shutdown is requested, while
    /// `/readyz` already says "draining": callers that still list this pod (a headless
    /// Service's DNS answer, a registry view) reach it instead of a closed port.
    pub drain_delay: std::time::Duration,
}

/// Runs a service target: binds its gRPC address and its admin address (announcing
/// `"<name> gRPC listening on ..."` and `"<name> admin listening on ..."`), then serves
/// `service` (with health and reflection) and the admin endpoints until `shutdown`. Then
/// `/readyz` says "draining" at once, the gRPC port keeps accepting calls for the
/// listen's `drain_delay`, and the server finishes the calls under way.
pub async fn serve_target<S>(
    at: Listen<'_>,
    service: S,
    ready: kubedav_kit::admin::ReadinessCheck,
    shutdown: kubedav_kit::shutdown::Shutdown,
) -> Result<(), String>
where
    S: GrpcService,
{
    let routes = Routes::new(InterceptedService::new(service, at.token.clone()));
    serve_routes(at, S::NAME, routes, ready, shutdown).await
}

/// The services a target serves beside its own (the fileio target: Records, and Keep
/// where it keeps a trash or versions), each behind the shared token.
#[derive(Default)]
pub struct Beside {
    added: Vec<AddRoute>,
}

type AddRoute = Box<dyn FnOnce(Routes, &RequireToken) -> Routes + Send>;

impl Beside {
    /// No service beside the target's own.
    pub fn new() -> Self {
        Self::default()
    }

    /// Serves `service` too.
    pub fn with<T: GrpcService>(mut self, service: T) -> Self {
        self.added
            .push(Box::new(move |routes: Routes, token: &RequireToken| {
                routes.add_service(InterceptedService::new(service, token.clone()))
            }));
        self
    }

    /// Serves `service` too, if there is one.
    pub fn with_some<T: GrpcService>(self, service: Option<T>) -> Self {
        match service {
            Some(service) => self.with(service),
            None => self,
        }
    }
}

/// [`serve_target`] for a target that serves more services `beside` its own (the fileio
/// target: FileIo, Records and Keep), all behind the shared token.
pub async fn serve_target_with<S>(
    at: Listen<'_>,
    service: S,
    beside: Beside,
    ready: kubedav_kit::admin::ReadinessCheck,
    shutdown: kubedav_kit::shutdown::Shutdown,
) -> Result<(), String>
where
    S: GrpcService,
{
    let mut routes = Routes::new(InterceptedService::new(service, at.token.clone()));
    for add in beside.added {
        routes = add(routes, &at.token);
    }
    serve_routes(at, S::NAME, routes, ready, shutdown).await
}

async fn serve_routes(
    at: Listen<'_>,
    service_name: &'static str,
    routes: Routes,
    ready: kubedav_kit::admin::ReadinessCheck,
    shutdown: kubedav_kit::shutdown::Shutdown,
) -> Result<(), String> {
    let Listen {
        name,
        grpc,
        admin,
        token,
        on_bound,
        drain_delay,
    } = at;
    let (grpc_listener, bound) = kubedav_kit::listen::bind(&format!("{name} gRPC"), grpc).await?;
    if let Some(tell) = on_bound {
        tell(bound);
    }
    let (admin_listener, _) = kubedav_kit::listen::bind(&format!("{name} admin"), admin).await?;
    let requested = shutdown.clone().requested();
    let announced = name.to_owned();
    let stop_serving = async move {
        requested.await;
        if !drain_delay.is_zero() {
            tracing::info!(
                target: "kubedav",
                "{announced} serving {} s more while callers take this process out",
                drain_delay.as_secs()
            );
            tokio::time::sleep(drain_delay).await;
        }
    };
    let main = serve(grpc_listener, service_name, routes, token, stop_serving);
    kubedav_kit::admin::serve_beside(admin_listener, ready, shutdown, main).await
}

/// A readiness check for services whose only dependency is themselves.
pub fn always_ready() -> kubedav_kit::admin::ReadinessCheck {
    std::sync::Arc::new(|| Box::pin(async { Ok(()) }))
}
