//! Stamps the binary with the commit it was built from, for `kubedav_build_info` and
//! `kubedav --version`: `KUBEDAV_COMMIT` when the build sets it (the Dockerfile passes it
//! as a build argument, since the image's build context has no .git), else `git
//! rev-parse`, else "unknown".

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=KUBEDAV_COMMIT");
    let commit = std::env::var("KUBEDAV_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .or_else(|| {
            let output = Command::new("git")
                .args(["rev-parse", "--short=12", "HEAD"])
                .output()
                .ok()?;
            output
                .status
                .success()
                .then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".to_owned());
    // Rebuilt (only this crate) when HEAD moves: .git/HEAD for a branch switch, the
    // branch's ref for a commit.
    if let Ok(head) = std::fs::read_to_string("../../.git/HEAD") {
        println!("cargo:rerun-if-changed=../../.git/HEAD");
        let reference = head
            .strip_prefix("ref: ")
            .map(|r| format!("../../.git/{}", r.trim()));
        // A missing path would rerun this on every build: a packed ref lives in packed-refs.
        for path in reference.into_iter().chain(["../../.git/packed-refs".to_owned()]) {
            if std::path::Path::new(&path).exists() {
                println!("cargo:rerun-if-changed={path}");
            }
        }
    }
    println!("cargo:rustc-env=KUBEDAV_COMMIT={commit}");
}
