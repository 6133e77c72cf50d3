//! Generates the message types of `proto/` with protox (a protobuf compiler in Rust), so
//! a fresh machine needs no system `protoc`. Also writes the descriptor set used by gRPC
//! reflection. The services' tonic stubs are `kubedav-remote`'s (its own build.rs).
use prost::Message;
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../proto");
    let files = [
        "kubedav/fileio/v1/fileio.proto",
        "kubedav/locks/v1/locks.proto",
        "kubedav/auth/v1/auth.proto",
        "kubedav/markdown/v1/markdown.proto",
        "kubedav/lease/v1/lease.proto",
        "kubedav/records/v1/records.proto",
        "kubedav/keep/v1/keep.proto",
        "kubedav/uploads/v1/uploads.proto",
    ];
    for file in &files {
        println!("cargo:rerun-if-changed={}", root.join(file).display());
    }
    let fds = protox::compile(files, [&root])?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out.join("kubedav_descriptor.bin"), fds.encode_to_vec())?;
    tonic_prost_build::configure()
        .build_client(false)
        .build_server(false)
        .bytes(".")
        .compile_fds(fds)?;
    Ok(())
}
