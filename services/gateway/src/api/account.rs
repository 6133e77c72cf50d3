//! `{base}/.kubedav/account`: the signed-in user's page of app passwords, in the file
//! manager's style: who is signed in, the user name clients send, a form to make an app
//! password (shown once), and the list with a revoke button each. The list renders
//! without script; making and revoking are `account.js`'s calls to the API.

use crate::dav::xml::escape;
use crate::request::Principal;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use kubedav_api::auth::AppPassword;
use std::fmt::Write;

/// The page for `principal` with its `app_passwords`; links below `base`.
pub fn render(base: &str, principal: &Principal, app_passwords: &[AppPassword]) -> Response {
    let user = escape(principal.name());
    let display = escape(principal.display_name());
    let mut html = format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>App passwords</title>\n<link rel=\"stylesheet\" href=\"{base}/.kubedav-ui/app.css\">\n\
         <script src=\"{base}/.kubedav-ui/account.js\" defer></script>\n</head>\n\
         <body data-api=\"{base}/.kubedav/app-passwords\">\n\
         <nav class=\"crumbs\"><a href=\"{base}/\">Files</a> › App passwords</nav>\n\
         <h1>App passwords</h1>\n\
         <p>Signed in as <strong>{display}</strong>. Clients that only know user names and \
         passwords (Finder, Windows, davfs2, cadaver, rclone) sign in as <code>{user}</code> with \
         an app password: one per client, so you can revoke one without the others.</p>\n\
         <form id=\"create\">\
         <label>Name<input name=\"name\" required maxlength=\"100\" placeholder=\"Laptop, davfs2\"></label>\
         <label>Permission<select name=\"permission\"><option value=\"write\">read and write</option>\
         <option value=\"read\">read only</option></select></label>\
         <label>Only this folder<input name=\"path\" placeholder=\"/ (everything)\"></label>\
         <label>Expires<input name=\"expires\" type=\"date\"></label>\
         <button type=\"submit\">Create app password</button></form>\n\
         <div id=\"created\" hidden><p>Your new app password for <code id=\"secret-user\"></code>. \
         Copy it now: it is shown only this once.</p><p><code id=\"secret\"></code></p></div>\n\
         <p id=\"status\" role=\"status\"></p>\n\
         <table id=\"app-passwords\">\n<thead><tr><th>Name</th><th>Scope</th><th>Created</th>\
         <th>Last used</th><th>Expires</th><th>Actions</th></tr></thead>\n<tbody>\n"
    );
    for shown in app_passwords {
        let scope = if shown.path.is_empty() {
            shown.permission.clone()
        } else {
            format!("{} /{}", shown.permission, shown.path)
        };
        let or_never = |text: &str| {
            if text.is_empty() {
                "never".to_owned()
            } else {
                escape(text)
            }
        };
        let _ = writeln!(
            html,
            "<tr data-id=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td><button type=\"button\" data-action=\"revoke\">Revoke</button></td></tr>",
            escape(&shown.id),
            escape(&shown.name),
            escape(&scope),
            escape(&shown.created),
            or_never(&shown.last_used),
            or_never(&shown.expires_at),
        );
    }
    let _ = write!(
        html,
        "</tbody>\n</table>\n<p id=\"none\"{}>You have no app passwords yet.</p>\n</body>\n</html>\n",
        if app_passwords.is_empty() { "" } else { " hidden" }
    );
    let mut response = (StatusCode::OK, html).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(crate::handlers::listing::POLICY),
    );
    response
}
