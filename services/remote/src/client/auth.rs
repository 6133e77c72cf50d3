//! [`RemoteAuth`]: the [`Auth`] port over gRPC.

use super::{Budget, Caller};
use crate::observe::ObservedChannel;
use crate::stubs::auth as stubs;
use kubedav_api::auth::*;
use tonic::Status;

type Client = stubs::auth_client::AuthClient<ObservedChannel>;

/// The service's name in deadline errors.
const CALLEE: &str = "auth";

/// [`Auth`] over gRPC: what a gateway uses in microservices mode.
#[derive(Clone)]
pub struct RemoteAuth {
    calls: Caller<Client>,
}

impl RemoteAuth {
    /// A client on `channel`: one connection, or a balanced set of them
    /// ([`crate::balance::channel`]), observed ([`ObservedChannel`]).
    pub fn new(channel: ObservedChannel) -> Self {
        Self {
            calls: Caller::new(stubs::auth_client::AuthClient::new(channel), CALLEE),
        }
    }

    /// Gives every call `timeout` (`--rpc-timeout-seconds`) instead of
    /// [`crate::deadline::DEFAULT_CALL_TIMEOUT`].
    pub fn with_call_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.calls.set_timeout(timeout);
        self
    }
}

#[async_trait::async_trait]
impl Auth for RemoteAuth {
    async fn verify(&self, request: VerifyRequest) -> Result<VerifyResponse, Status> {
        self.calls
            .unary(Budget::Call, request, |mut c, r| async move { c.verify(r).await })
            .await
    }

    async fn create_app_password(
        &self,
        request: CreateAppPasswordRequest,
    ) -> Result<AppPasswordCreated, Status> {
        self.calls
            .unary(Budget::Call, request, |mut c, r| async move {
                c.create_app_password(r).await
            })
            .await
    }

    async fn list_app_passwords(&self, request: ListAppPasswordsRequest) -> Result<AppPasswordList, Status> {
        self.calls
            .unary(Budget::Call, request, |mut c, r| async move {
                c.list_app_passwords(r).await
            })
            .await
    }

    async fn revoke_app_password(
        &self,
        request: RevokeAppPasswordRequest,
    ) -> Result<RevokeAppPasswordResponse, Status> {
        self.calls
            .unary(Budget::Call, request, |mut c, r| async move {
                c.revoke_app_password(r).await
            })
            .await
    }

    async fn begin_sign_in(&self, request: BeginSignInRequest) -> Result<SignInStarted, Status> {
        self.calls
            .unary(Budget::Call, request, |mut c, r| async move {
                c.begin_sign_in(r).await
            })
            .await
    }

    async fn finish_sign_in(&self, request: FinishSignInRequest) -> Result<SignedIn, Status> {
        self.calls
            .unary(Budget::Call, request, |mut c, r| async move {
                c.finish_sign_in(r).await
            })
            .await
    }

    async fn sign_out(&self, request: SignOutRequest) -> Result<SignedOut, Status> {
        self.calls
            .unary(
                Budget::Call,
                request,
                |mut c, r| async move { c.sign_out(r).await },
            )
            .await
    }
}
