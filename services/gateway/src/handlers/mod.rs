//! The HTTP method handlers, and the dispatcher that picks one. Their XML bodies are read
//! by `body`.

pub mod agent_listing;
mod body;
mod copymove;
mod delete;
mod get;
mod guard;
mod keep;
pub mod listing;
mod lock;
mod markdown;
mod mkcol;
mod options;
pub(crate) mod propfind;
mod proppatch;
pub(crate) mod put;

use crate::Gateway;
use crate::dav::method::DavMethod;
use crate::http::errors::{HttpError, HttpResult};
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use futures_util::FutureExt;
use futures_util::future::Either;
use http::{StatusCode, header};
use std::future::Future;
use std::pin::Pin;

/// Routes a request to its method's handler; 405 with `Allow` for any other method.
///
/// The choice is made when called, and what is returned only runs the handler: an
/// `async fn` here would keep the request's place beside the handler's future for the
/// request's whole life.
pub fn dispatch<'a>(
    gateway: &'a Gateway,
    mut request: Request,
) -> impl Future<Output = Response> + Send + 'a {
    let answered = |response| Either::Left(std::future::ready(response));
    let grant = request.extensions().get::<crate::access::LinkGrant>().cloned();
    if grant.is_none()
        && let Some(dav) = crate::uploads::nextcloud::dav_path(gateway, request.uri().path())
        && !crate::http::paths::is_mounted()
    {
        // Nextcloud's paths: its view of the tree, and its chunked uploads.
        use crate::uploads::nextcloud::{DavPath, answer, files_alias};
        let handler: Pin<Box<dyn Future<Output = HttpResult> + Send + 'a>> = match dav {
            DavPath::Files { prefix, user } => {
                let (prefix, user) = (prefix.to_owned(), user.to_owned());
                Box::pin(async move { Ok(files_alias(gateway, request, &prefix, &user).await) })
            }
            DavPath::Uploads { user, rest } => {
                let (user, rest) = (user.to_owned(), rest.to_owned());
                Box::pin(async move { Ok(answer(gateway, request, &user, &rest).await) })
            }
        };
        return Either::Right(handler.map(respond as fn(HttpResult) -> Response));
    }
    if grant.is_none()
        && let Some(rest) = crate::uploads::uploads_path(gateway, request.uri().path())
    {
        // TUS uploads, decided by the targets they name.
        let rest = rest.to_owned();
        let handler: Pin<Box<dyn Future<Output = HttpResult> + Send + 'a>> =
            Box::pin(async move { Ok(crate::uploads::tus::answer(gateway, request, &rest).await) });
        return Either::Right(handler.map(respond as fn(HttpResult) -> Response));
    }
    if grant.is_none()
        && let Some(place) = keep::place(gateway, request.uri().path())
    {
        // The trash and the versions, decided by the places they stand for.
        let handler: Pin<Box<dyn Future<Output = HttpResult> + Send + 'a>> =
            Box::pin(keep::answer(gateway, request, place));
        return Either::Right(handler.map(respond as fn(HttpResult) -> Response));
    }
    if grant.is_none()
        && let Some(api) = crate::api::api_path(gateway, request.uri().path())
    {
        // kubedav's own API under {base}/.kubedav/, never a WebDAV path.
        let api = api.to_owned();
        let handler: Pin<Box<dyn Future<Output = HttpResult> + Send + 'a>> =
            Box::pin(async move { Ok(crate::api::answer(gateway, request, api).await) });
        return Either::Right(handler.map(respond as fn(HttpResult) -> Response));
    }
    let Some(method) = DavMethod::of(request.method()) else {
        let mut response = HttpError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("method {} is not supported", request.method()),
        )
        .into_response();
        response
            .headers_mut()
            .insert(header::ALLOW, crate::dav::method::allow());
        return answered(response);
    };
    if matches!(method, DavMethod::Get | DavMethod::Head)
        && let Some(asset) = get::asset(
            &gateway.base_path(),
            request.uri().path(),
            method == DavMethod::Head,
        )
    {
        return answered(asset);
    }
    if let Some(grant) = grant {
        // Through a public link: decided by the link, as its creator (links::serve
        // mounted the base path on the link's folder and checked the rest).
        if let Err(refused) = crate::access::check_link(gateway, method, &mut request, &grant) {
            return answered(refused.into_response());
        }
        if method == DavMethod::Options {
            return answered(options::options());
        }
        return Either::Right(route(gateway, method, request).map(respond as fn(HttpResult) -> Response));
    }
    if let Err(refused) = crate::access::scope::check(gateway, method, &request) {
        return answered(refused.into_response());
    }
    match crate::access::check(gateway, method, &mut request) {
        Ok(()) => {}
        Err(crate::access::Refusal::Answer(refused)) => return answered(refused.into_response()),
        Err(crate::access::Refusal::SharesUnconfirmed(refused)) => {
            // A share may allow it, but the shares were not confirmed lately (the
            // gateway has just started, or the records were slow): read them now.
            let handler: Pin<Box<dyn Future<Output = HttpResult> + Send + 'a>> = Box::pin(async move {
                let checked = match &gateway.shares {
                    Some(shares) => shares.check().await.is_ok(),
                    None => false,
                };
                match crate::access::check(gateway, method, &mut request) {
                    Ok(()) if checked => route(gateway, method, request).await,
                    Ok(()) | Err(crate::access::Refusal::SharesUnconfirmed(_)) => Err(refused),
                    Err(crate::access::Refusal::Answer(refused)) => Err(refused),
                }
            });
            return Either::Right(handler.map(respond as fn(HttpResult) -> Response));
        }
    }
    if method == DavMethod::Options {
        return answered(options::options());
    }
    Either::Right(route(gateway, method, request).map(respond as fn(HttpResult) -> Response))
}

/// The handler of `method` for a request that passed the access checks, after making
/// its principal's home when it is the first request of the principal.
fn route<'a>(
    gateway: &'a Gateway,
    method: DavMethod,
    request: Request,
) -> Pin<Box<dyn Future<Output = HttpResult> + Send + 'a>> {
    let home_to_make = crate::access::homes::home_to_make(gateway, &request);
    // Each handler's future is boxed: inline, the largest of them (LOCK's, 2 KiB) would
    // size every request's future, and the layers around it copy that as each starts
    // (`memmove` was a tenth of a PROPFIND Depth 0's user time; docs/benchmarks.md).
    let handler: Pin<Box<dyn Future<Output = HttpResult> + Send + 'a>> = match method {
        DavMethod::Get => Box::pin(get::get(gateway, request, false)),
        DavMethod::Head => Box::pin(get::get(gateway, request, true)),
        DavMethod::Put => Box::pin(put::put(gateway, request)),
        DavMethod::Delete => Box::pin(delete::delete(gateway, request)),
        DavMethod::Mkcol => Box::pin(mkcol::mkcol(gateway, request)),
        DavMethod::Options => Box::pin(std::future::ready(Ok(options::options()))),
        DavMethod::Propfind => Box::pin(propfind::propfind(gateway, request)),
        DavMethod::Proppatch => Box::pin(proppatch::proppatch(gateway, request)),
        DavMethod::Copy => Box::pin(copymove::copy_or_move(gateway, request, false)),
        DavMethod::Move => Box::pin(copymove::copy_or_move(gateway, request, true)),
        DavMethod::Lock => Box::pin(lock::lock(gateway, request)),
        DavMethod::Unlock => Box::pin(lock::unlock(gateway, request)),
    };
    match home_to_make {
        None => handler,
        Some(home) => Box::pin(async move {
            home.make(gateway).await;
            handler.await
        }),
    }
}

/// The answer to OPTIONS: the methods and DAV classes served.
pub fn options_response() -> Response {
    options::options()
}

/// The file manager's script or style sheet when `path` names one below `prefix` (a
/// link's URL prefix: its pages load them through the link).
pub fn get_asset(prefix: &str, path: &str, head: bool) -> Option<Response> {
    let base = crate::http::paths::BasePath::mounted(prefix, kubedav_api::path::VolumePath::root());
    get::asset(&base, path, head)
}

/// A handler's result as the answer: its response, or its error's.
fn respond(result: HttpResult) -> Response {
    result.unwrap_or_else(IntoResponse::into_response)
}
