//! Every HTML page of the Rust documentation installed with the toolchain converts
//! without an error or a limit hit. `make test` converts a sample (every 200th page);
//! `make markdown-corpus` converts all of them (KUBEDAV_DOCS_SAMPLE_EVERY=1).

use kubedav_markdown::{Options, convert};
use std::path::{Path, PathBuf};

fn html_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            html_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "html") {
            out.push(path);
        }
    }
}

#[test]
fn rust_documentation_converts() {
    let sysroot = std::process::Command::new("rustc")
        .args(["--print", "sysroot"])
        .output()
        .expect("rustc runs");
    let docs = PathBuf::from(String::from_utf8_lossy(&sysroot.stdout).trim()).join("share/doc/rust/html");
    assert!(
        docs.is_dir(),
        "{} is missing: install it with `rustup component add rust-docs`",
        docs.display()
    );
    let every: usize = std::env::var("KUBEDAV_DOCS_SAMPLE_EVERY")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let mut files = Vec::new();
    html_files(&docs, &mut files);
    files.sort();
    let (mut converted, mut bytes) = (0usize, 0usize);
    let started = std::time::Instant::now();
    for file in files.iter().step_by(every.max(1)) {
        let html = std::fs::read(file).unwrap();
        let out = convert(&html, "text/html", &Options::default())
            .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        assert!(out.markdown.ends_with('\n'));
        converted += 1;
        bytes += html.len();
    }
    let seconds = started.elapsed().as_secs_f64();
    eprintln!(
        "converted {converted} of {} Rust documentation pages ({:.1} MB) in {seconds:.1} s",
        files.len(),
        bytes as f64 / 1e6
    );
    assert!(converted > 0);
}
