//! OPTIONS: what this server offers.

use crate::dav::method;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};

/// 200 with the `DAV` compliance classes and the `Allow`ed methods.
pub(super) fn options() -> Response {
    (
        StatusCode::OK,
        [
            (
                header::HeaderName::from_static("dav"),
                HeaderValue::from_static("1, 2"),
            ),
            (header::ALLOW, method::allow()),
            (
                header::HeaderName::from_static("ms-author-via"),
                HeaderValue::from_static("DAV"),
            ),
            (header::ACCEPT_RANGES, HeaderValue::from_static("bytes")),
        ],
    )
        .into_response()
}
