//! Dead property selections: which of a resource's dead properties a listing returns.
//! One definition for fileio, which reads them, and the gateway's cache, which answers
//! every selection from one kept copy of all of them.

use crate::pb::fileio::v1::{DeadProperty, PropertySelection, property_selection};

/// The properties a listing returns for this selection.
pub fn select(props: Vec<DeadProperty>, selection: &PropertySelection) -> Vec<DeadProperty> {
    match selection.mode() {
        property_selection::Mode::None => Vec::new(),
        property_selection::Mode::All => props,
        property_selection::Mode::Names => props
            .into_iter()
            .map(|p| DeadProperty {
                value: bytes::Bytes::new(),
                ..p
            })
            .collect(),
        property_selection::Mode::Selected => props
            .into_iter()
            .filter(|p| {
                selection
                    .names
                    .iter()
                    .any(|n| n.namespace == p.namespace && n.name == p.name)
            })
            .collect(),
    }
}
