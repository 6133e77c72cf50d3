//! `{base}/.kubedav/app-passwords`: a signed-in user's app passwords.
//!
//! * `POST` with JSON `{"name", "expires_at"?, "permission"?: "read"|"write", "path"?}`:
//!   201 with `{"id", "username", "password", ...}`; the password is in this answer only.
//! * `GET`: the user's app passwords (name, created, last used, expiry, scope), never a
//!   secret.
//! * `DELETE {id}`: 204; it stops working on every replica within a second.
//!
//! An app password cannot manage app passwords: sign in with a password, the identity
//! provider or a bearer token.

use super::{error, json};
use crate::Gateway;
use crate::request::Principal;
use axum::extract::Request;
use axum::response::Response;
use http::{Method, StatusCode};
use kubedav_api::auth::{
    AppPassword, CreateAppPasswordRequest, ListAppPasswordsRequest, RevokeAppPasswordRequest,
};
use serde_json::Value;

/// What a `POST` may carry.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Create {
    name: String,
    #[serde(default)]
    expires_at: Option<String>,
    #[serde(default)]
    permission: Option<String>,
    #[serde(default)]
    path: Option<String>,
}

/// Answers a call to `app-passwords/{rest}`.
pub async fn answer(gateway: &Gateway, request: Request, principal: Principal, rest: &str) -> Response {
    let auth = match managing(gateway, &principal) {
        Ok(auth) => auth,
        Err(refused) => return *refused,
    };
    let user = principal.name().to_owned();
    let outcome = match (request.method().clone(), rest) {
        (Method::GET, "") => auth
            .list_app_passwords(ListAppPasswordsRequest { user })
            .await
            .map(|list| {
                let shown: Vec<Value> = list.app_passwords.iter().map(shown).collect();
                json(StatusCode::OK, &Value::Array(shown))
            }),
        (Method::POST, "") => {
            let create = match body(request).await {
                Ok(create) => create,
                Err(refused) => return refused,
            };
            let request = CreateAppPasswordRequest {
                owner: principal.verified_parts(),
                name: create.name,
                expires_at: create.expires_at.unwrap_or_default(),
                permission: create.permission.unwrap_or_default(),
                path: create.path.unwrap_or_default(),
            };
            auth.create_app_password(request).await.map(|created| {
                let mut answer = created.app_password.as_ref().map(shown).unwrap_or_default();
                answer["password"] = Value::String(created.password);
                json(StatusCode::CREATED, &answer)
            })
        }
        (Method::DELETE, id) if !id.is_empty() && !id.contains('/') => auth
            .revoke_app_password(RevokeAppPasswordRequest {
                user: user.clone(),
                id: id.to_owned(),
            })
            .await
            .map(|_| {
                gateway.verdicts.forget_app_password(&user, id);
                json(StatusCode::NO_CONTENT, &Value::Null)
            }),
        (Method::GET | Method::POST | Method::DELETE, _) => {
            return error(
                StatusCode::NOT_FOUND,
                "no such app password API: GET or POST app-passwords, DELETE app-passwords/{id}",
            );
        }
        _ => {
            return error(
                StatusCode::METHOD_NOT_ALLOWED,
                "use GET or POST app-passwords, or DELETE app-passwords/{id}",
            );
        }
    };
    outcome.unwrap_or_else(|status| {
        let code = crate::http::errors::http_status(status.code());
        error(code, status.message())
    })
}

/// The account page (`{base}/.kubedav/account`) of `principal`.
pub async fn page(gateway: &Gateway, principal: Principal) -> Response {
    let auth = match managing(gateway, &principal) {
        Ok(auth) => auth,
        Err(refused) => return *refused,
    };
    let user = principal.name().to_owned();
    match auth.list_app_passwords(ListAppPasswordsRequest { user }).await {
        Ok(list) => {
            super::account::render(gateway.config.base_path.as_str(), &principal, &list.app_passwords)
        }
        Err(status) => error(crate::http::errors::http_status(status.code()), status.message()),
    }
}

/// The auth service that keeps `principal`'s app passwords, or why it may not manage
/// them: no authentication here, or it signed in with an app password.
fn managing<'g>(
    gateway: &'g Gateway,
    principal: &Principal,
) -> Result<&'g dyn kubedav_api::auth::Auth, Box<Response>> {
    let Some(auth) = &gateway.auth else {
        return Err(Box::new(error(
            StatusCode::NOT_FOUND,
            "this server has no authentication, so no app passwords",
        )));
    };
    if principal.kind() == "app-password" {
        return Err(Box::new(error(
            StatusCode::FORBIDDEN,
            "an app password cannot manage app passwords: sign in with your password, the identity provider or a bearer token",
        )));
    }
    Ok(&**auth)
}

/// The JSON body of a `POST`, or the 4xx that says what is wrong with it.
async fn body(request: Request) -> Result<Create, Response> {
    super::json_body(
        request,
        "{\"name\": ..., \"expires_at\": RFC 3339 time or absent, \"permission\": \"read\" | \"write\", \"path\": \"/a/path\" or absent}",
    )
    .await
}

/// An app password as the API shows it.
fn shown(app_password: &AppPassword) -> Value {
    let or_null = |text: &str| {
        if text.is_empty() {
            Value::Null
        } else {
            Value::String(text.to_owned())
        }
    };
    serde_json::json!({
        "id": app_password.id,
        "username": app_password.username,
        "name": app_password.name,
        "created": app_password.created,
        "last_used": or_null(&app_password.last_used),
        "expires_at": or_null(&app_password.expires_at),
        "permission": app_password.permission,
        "path": format!("/{}", app_password.path),
    })
}
