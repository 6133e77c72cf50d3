//! Generates the tonic client and server stubs of the services in `proto/`, over the
//! message types `kubedav-api` generates from the same files (extern paths), with protox,
//! so a fresh machine needs no system `protoc`.
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../proto");
    let packages = [
        "fileio", "locks", "auth", "markdown", "lease", "records", "keep", "uploads",
    ];
    let files: Vec<String> = packages
        .iter()
        .map(|package| format!("kubedav/{package}/v1/{package}.proto"))
        .collect();
    for file in &files {
        println!("cargo:rerun-if-changed={}", root.join(file).display());
    }
    let fds = protox::compile(&files, [&root])?;
    let mut config = tonic_prost_build::configure().bytes(".");
    for package in packages {
        config = config.extern_path(
            format!(".kubedav.{package}.v1"),
            format!("::kubedav_api::pb::{package}::v1"),
        );
    }
    config.compile_fds(fds)?;
    Ok(())
}
