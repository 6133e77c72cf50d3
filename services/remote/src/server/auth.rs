//! [`AuthGrpc`]: any [`Auth`] as the `kubedav.auth.v1.Auth` gRPC service.

use crate::stubs::auth as stubs;
use kubedav_api::auth::*;
use std::sync::Arc;
use tonic::Status;

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
    pub fn into_service(self) -> stubs::auth_server::AuthServer<Self> {
        stubs::auth_server::AuthServer::new(self)
    }
}

#[async_trait::async_trait]
impl stubs::auth_server::Auth for AuthGrpc {
    async fn verify(
        &self,
        request: tonic::Request<VerifyRequest>,
    ) -> Result<tonic::Response<VerifyResponse>, Status> {
        Ok(tonic::Response::new(
            self.inner.verify(request.into_inner()).await?,
        ))
    }

    async fn create_app_password(
        &self,
        request: tonic::Request<CreateAppPasswordRequest>,
    ) -> Result<tonic::Response<AppPasswordCreated>, Status> {
        Ok(tonic::Response::new(
            self.inner.create_app_password(request.into_inner()).await?,
        ))
    }

    async fn list_app_passwords(
        &self,
        request: tonic::Request<ListAppPasswordsRequest>,
    ) -> Result<tonic::Response<AppPasswordList>, Status> {
        Ok(tonic::Response::new(
            self.inner.list_app_passwords(request.into_inner()).await?,
        ))
    }

    async fn revoke_app_password(
        &self,
        request: tonic::Request<RevokeAppPasswordRequest>,
    ) -> Result<tonic::Response<RevokeAppPasswordResponse>, Status> {
        Ok(tonic::Response::new(
            self.inner.revoke_app_password(request.into_inner()).await?,
        ))
    }

    async fn begin_sign_in(
        &self,
        request: tonic::Request<BeginSignInRequest>,
    ) -> Result<tonic::Response<SignInStarted>, Status> {
        Ok(tonic::Response::new(
            self.inner.begin_sign_in(request.into_inner()).await?,
        ))
    }

    async fn finish_sign_in(
        &self,
        request: tonic::Request<FinishSignInRequest>,
    ) -> Result<tonic::Response<SignedIn>, Status> {
        Ok(tonic::Response::new(
            self.inner.finish_sign_in(request.into_inner()).await?,
        ))
    }

    async fn sign_out(
        &self,
        request: tonic::Request<SignOutRequest>,
    ) -> Result<tonic::Response<SignedOut>, Status> {
        Ok(tonic::Response::new(
            self.inner.sign_out(request.into_inner()).await?,
        ))
    }
}
