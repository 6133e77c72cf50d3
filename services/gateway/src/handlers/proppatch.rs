//! PROPPATCH (RFC 4918 9.2): set and remove dead properties, all or nothing.

use super::body::xml_body;
use super::guard::{Asking, Change, guard_write};
use crate::Gateway;
use crate::dav::multistatus::{
    self, MULTISTATUS_CLOSE, Prefixes, close_response, open_response, write_propstat,
};
use crate::dav::properties::{DAV, Name};
use crate::dav::sync;
use crate::http::errors::{HttpError, HttpResult, http_status};
use crate::http::paths::request_path;
use axum::extract::Request;
use http::StatusCode;
use kubedav_api::checksums::is_reserved;
use kubedav_api::fileio::PatchPropertiesRequest;
use kubedav_api::pb::fileio::v1::{DeadProperty, PropertyName, PropertyOperation, property_operation};

/// 207 with every property's outcome: all 200, or (nothing applied) 403
/// `DAV:cannot-modify-protected-property` for live properties and 424 for the rest.
/// Setting `DAV:lastmodified`, `DAV:getlastmodified` or `Win32LastModifiedTime` sets the
/// resource's modification time in the same step ([`sync`]).
pub(super) async fn proppatch(gateway: &Gateway, request: Request) -> HttpResult {
    let target = request_path(&gateway.base_path(), &request)?;
    let targets = vec![crate::dav::locking::target(&target.path, false)];
    let change = Change::of(targets);
    guard_write(gateway, Asking::of(&request), &target.path, change).await?;
    let body = xml_body(request)
        .await?
        .ok_or_else(|| HttpError::bad_request("PROPPATCH needs a DAV:propertyupdate body"))?;
    if !body.is(DAV, "propertyupdate") {
        return Err(HttpError::bad_request(
            "the root element must be DAV:propertyupdate",
        ));
    }
    let mut names = Vec::new();
    let mut protected = Vec::new();
    let mut operations = Vec::new();
    let mut modified = None;
    for instruction in body.elements() {
        let set = match (&*instruction.namespace, instruction.name.as_str()) {
            (DAV, "set") => true,
            (DAV, "remove") => false,
            _ => {
                return Err(HttpError::bad_request(
                    "DAV:propertyupdate may hold only DAV:set and DAV:remove",
                ));
            }
        };
        let prop = instruction
            .child(DAV, "prop")
            .ok_or_else(|| HttpError::bad_request("DAV:set and DAV:remove must hold a DAV:prop"))?;
        for property in prop.elements() {
            names.push(Name::of(property));
            let (namespace, local) = (&*property.namespace, property.name.as_str());
            if sync::is_modification_time(namespace, local) {
                // Sets the file's time (sync clients, Windows); not kept as a property.
                protected.push(!set);
                if set {
                    modified = Some(sync::modification_time(&property.text())?);
                }
                continue;
            }
            if sync::is_owncloud_checksums(namespace, local) {
                // Computed from the content; rclone sends it back with the time. Nothing
                // to store: the checksums kubedav keeps are those of the bytes it has.
                protected.push(false);
                continue;
            }
            protected.push(Name::of(property).is_live() || is_reserved(namespace));
            operations.push(PropertyOperation {
                op: Some(if set {
                    property_operation::Op::Set(DeadProperty {
                        namespace: property.namespace.to_string(),
                        name: property.name.clone(),
                        value: property.content_xml().into(),
                    })
                } else {
                    property_operation::Op::Remove(PropertyName {
                        namespace: property.namespace.to_string(),
                        name: property.name.clone(),
                    })
                }),
            });
        }
    }
    let outcome = if protected.contains(&true) {
        None
    } else {
        let patch = PatchPropertiesRequest {
            path: target.path.as_str().to_owned(),
            operations,
            modified_unix_ns: modified,
        };
        match gateway.fileio.patch_properties(patch).await {
            Ok(_) => Some(StatusCode::OK),
            Err(status) => match status.code() {
                tonic::Code::NotFound | tonic::Code::PermissionDenied | tonic::Code::InvalidArgument => {
                    return Err(status.into());
                }
                code => Some(http_status(code)),
            },
        }
    };
    // Every name is echoed: their namespaces are declared once, not once per name.
    let prefixes = Prefixes::of(&names);
    let mut out = String::new();
    prefixes.open_multistatus(&mut out);
    open_response(
        &mut out,
        &gateway.base_path().href(&target.path, target.trailing_slash),
    );
    let group = |wanted: Option<bool>| {
        let mut props = String::new();
        for (name, _) in names
            .iter()
            .zip(&protected)
            .filter(|(_, p)| wanted.is_none_or(|w| w == **p))
        {
            prefixes.write_property(&mut props, name, |_| {});
        }
        props
    };
    match outcome {
        Some(status) => write_propstat(&mut out, &group(None), status, None),
        None => {
            write_propstat(
                &mut out,
                &group(Some(true)),
                StatusCode::FORBIDDEN,
                Some("cannot-modify-protected-property"),
            );
            let others = group(Some(false));
            if !others.is_empty() {
                write_propstat(&mut out, &others, StatusCode::FAILED_DEPENDENCY, None);
            }
        }
    }
    close_response(&mut out);
    out.push_str(MULTISTATUS_CLOSE);
    Ok(multistatus::answer(out))
}
