//! The auth port: [`Auth`], credential verification as the gateway sees it. The gRPC
//! adapters are `kubedav_remote::client::RemoteAuth` and `kubedav_remote::server::AuthGrpc`.

use crate::pb::auth::v1 as pb;
use tonic::Status;

pub use pb::{
    AppPassword, AppPasswordCreated, AppPasswordList, BeginSignInRequest, CreateAppPasswordRequest,
    FinishSignInRequest, ListAppPasswordsRequest, Principal, RevokeAppPasswordRequest,
    RevokeAppPasswordResponse, SignInStarted, SignOutRequest, SignedIn, SignedOut, VerifyRequest,
    VerifyResponse, verify_response,
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
    /// Start a browser's sign-in at the identity provider.
    async fn begin_sign_in(&self, request: BeginSignInRequest) -> Result<SignInStarted, Status>;
    /// Finish it: a session for the user the provider vouched for.
    async fn finish_sign_in(&self, request: FinishSignInRequest) -> Result<SignedIn, Status>;
    /// End a session everywhere.
    async fn sign_out(&self, request: SignOutRequest) -> Result<SignedOut, Status>;
}
