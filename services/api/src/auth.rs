//! The auth port: [`Auth`], credential verification as the gateway sees it. The gRPC
//! adapters are `kubedav_remote::client::RemoteAuth` and `kubedav_remote::server::AuthGrpc`.

use crate::pb::auth::v1 as pb;
use tonic::Status;

pub use pb::{
    AppPassword, AppPasswordCreated, AppPasswordList, CreateAppPasswordRequest, ListAppPasswordsRequest,
    Principal, RevokeAppPasswordRequest, RevokeAppPasswordResponse, VerifyRequest, VerifyResponse,
    verify_response,
};

/// Credential verification, as the gateway sees it. See
/// `proto/kubedav/auth/v1/auth.proto` for the outcomes and error codes.
#[async_trait::async_trait]
pub trait Auth: Send + Sync + 'static {
    /// Verify one credential: a user/password pair, or a bearer token.
    async fn verify(&self, request: VerifyRequest) -> Result<VerifyResponse, Status>;
    /// Make an app password for the request's owner; its secret is in this answer only.
    async fn create_app_password(
        &self,
        request: CreateAppPasswordRequest,
    ) -> Result<AppPasswordCreated, Status>;
    /// A user's app passwords, without secrets.
    async fn list_app_passwords(&self, request: ListAppPasswordsRequest) -> Result<AppPasswordList, Status>;
    /// Revoke one of a user's app passwords: it stops working on every replica within a
    /// second.
    async fn revoke_app_password(
        &self,
        request: RevokeAppPasswordRequest,
    ) -> Result<RevokeAppPasswordResponse, Status>;
}
