//! The auth port: [`Auth`], its gRPC client adapter [`RemoteAuth`] and its gRPC server
//! adapter [`AuthGrpc`].

use crate::deadline;
use crate::pb::auth::v1 as pb;
use crate::rpc::ObservedChannel;
use std::sync::Arc;
use tonic::Status;

pub use pb::{VerifyRequest, VerifyResponse, verify_response};

/// The service's name in deadline errors.
const CALLEE: &str = "auth";

/// Credential verification, as the gateway sees it. See
/// `proto/kubedav/auth/v1/auth.proto` for the outcomes and error codes.
#[async_trait::async_trait]
pub trait Auth: Send + Sync + 'static {
    /// Verify one user/password pair.
    async fn verify(&self, request: VerifyRequest) -> Result<VerifyResponse, Status>;
}

type Client = pb::auth_client::AuthClient<ObservedChannel>;

/// [`Auth`] over gRPC: what a gateway uses in microservices mode.
#[derive(Clone)]
pub struct RemoteAuth {
    client: Client,
}

impl RemoteAuth {
    /// A client on `channel`: one connection, or a balanced set of them
    /// (`kubedav_kit::balance::channel`), observed ([`ObservedChannel`]).
    pub fn new(channel: ObservedChannel) -> Self {
        Self {
            client: pb::auth_client::AuthClient::new(channel),
        }
    }
}

#[async_trait::async_trait]
impl Auth for RemoteAuth {
    async fn verify(&self, request: VerifyRequest) -> Result<VerifyResponse, Status> {
        let t = deadline::call_timeout();
        deadline::within(CALLEE, t, async {
            Ok(self
                .client
                .clone()
                .verify(deadline::request(request, t))
                .await?
                .into_inner())
        })
        .await
    }
}

/// Exposes any [`Auth`] implementation as the `kubedav.auth.v1.Auth` gRPC service.
pub struct AuthGrpc {
    inner: Arc<dyn Auth>,
}

impl AuthGrpc {
    /// Wraps an auth core.
    pub fn new(inner: Arc<dyn Auth>) -> Self {
        Self { inner }
    }

    /// The tonic service, ready to be added to a server.
    pub fn into_service(self) -> pb::auth_server::AuthServer<Self> {
        pb::auth_server::AuthServer::new(self)
    }
}

#[async_trait::async_trait]
impl pb::auth_server::Auth for AuthGrpc {
    async fn verify(
        &self,
        request: tonic::Request<VerifyRequest>,
    ) -> Result<tonic::Response<VerifyResponse>, Status> {
        Ok(tonic::Response::new(
            self.inner.verify(request.into_inner()).await?,
        ))
    }
}
