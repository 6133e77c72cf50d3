//! The auth port: [`Auth`], credential verification as the gateway sees it. The gRPC
//! adapters are `kubedav_remote::client::RemoteAuth` and `kubedav_remote::server::AuthGrpc`.

use crate::pb::auth::v1 as pb;
use tonic::Status;

pub use pb::{Principal, VerifyRequest, VerifyResponse, verify_response};

/// Credential verification, as the gateway sees it. See
/// `proto/kubedav/auth/v1/auth.proto` for the outcomes and error codes.
#[async_trait::async_trait]
pub trait Auth: Send + Sync + 'static {
    /// Verify one user/password pair.
    async fn verify(&self, request: VerifyRequest) -> Result<VerifyResponse, Status>;
}
