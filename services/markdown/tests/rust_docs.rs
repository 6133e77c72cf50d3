//! The Rust documentation installed with the toolchain, as a corpus of real pages.
//!
//! - Every page converts in both content modes without an error or a limit hit; the
//!   figures printed are MB/s of conversion and the total tokens in `main` and `full`.
//!   `make test` converts a sample (every 200th page); `make markdown-corpus` converts
//!   all of them (KUBEDAV_DOCS_SAMPLE_EVERY=1).
//! - On the Rust book and the cargo book, `main` keeps every heading and every code
//!   block of the page's `<main>`, read by html5ever (the parser browsers agree with),
//!   and the token saving against `full` is printed.

use html5ever::tendril::TendrilSink;
use kubedav_markdown::{Content, Options, convert};
use markup5ever_rcdom::{Handle, NodeData, RcDom};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn docs() -> PathBuf {
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
    docs
}

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

fn sorted_pages(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    html_files(dir, &mut files);
    files.sort();
    files
}

fn options(content: Content) -> Options {
    Options {
        content,
        ..Options::default()
    }
}

#[test]
fn rust_documentation_converts() {
    let every: usize = std::env::var("KUBEDAV_DOCS_SAMPLE_EVERY")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let files = sorted_pages(&docs());
    let (mut converted, mut bytes) = (0usize, 0usize);
    let mut spent = Duration::ZERO;
    let mut tokens = [0u64; 2];
    for file in files.iter().step_by(every.max(1)) {
        let html = std::fs::read(file).unwrap();
        for (i, content) in [Content::Main, Content::Full].into_iter().enumerate() {
            let started = Instant::now();
            let out = convert(&html, "text/html", &options(content))
                .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            spent += started.elapsed();
            assert!(out.markdown.ends_with('\n'));
            tokens[i] += out.tokens;
        }
        converted += 1;
        bytes += html.len();
    }
    eprintln!(
        "converted {converted} of {} Rust documentation pages ({:.1} MB) in both modes: {:.1} MB/s; \
         {} tokens in main, {} in full ({:.1} % saved)",
        files.len(),
        bytes as f64 / 1e6,
        2.0 * bytes as f64 / 1e6 / spent.as_secs_f64(),
        tokens[0],
        tokens[1],
        100.0 * (1.0 - tokens[0] as f64 / tokens[1] as f64)
    );
    assert!(converted > 0);
}

/// The headings' texts and the code blocks' lines of the page's `<main>`.
fn main_landmarks(html: &[u8]) -> (Vec<String>, Vec<String>) {
    let dom = html5ever::parse_document(RcDom::default(), Default::default())
        .from_utf8()
        .one(html);
    fn find_main(node: &Handle) -> Option<Handle> {
        if let NodeData::Element { name, .. } = &node.data
            && &*name.local == "main"
        {
            return Some(node.clone());
        }
        node.children.borrow().iter().find_map(find_main)
    }
    fn text(node: &Handle, out: &mut String) {
        if let NodeData::Text { contents } = &node.data {
            out.push_str(&contents.borrow());
        }
        for child in node.children.borrow().iter() {
            text(child, out);
        }
    }
    fn walk(node: &Handle, headings: &mut Vec<String>, code: &mut Vec<String>) {
        if let NodeData::Element { name, .. } = &node.data {
            match &*name.local {
                "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => {
                    let mut t = String::new();
                    text(node, &mut t);
                    headings.push(t);
                    return;
                }
                "pre" => {
                    let mut t = String::new();
                    text(node, &mut t);
                    code.extend(t.lines().map(str::to_owned));
                    return;
                }
                _ => {}
            }
        }
        for child in node.children.borrow().iter() {
            walk(child, headings, code);
        }
    }
    let (mut headings, mut code) = (Vec::new(), Vec::new());
    if let Some(main) = find_main(&dom.document) {
        walk(&main, &mut headings, &mut code);
    }
    (headings, code)
}

/// Letters and digits only: what survives Markdown's escaping and spacing.
fn skeleton(text: &str) -> String {
    text.chars().filter(|c| c.is_alphanumeric()).collect()
}

#[test]
fn main_content_keeps_every_heading_and_code_block_of_the_books() {
    let docs = docs();
    let every: usize = std::env::var("KUBEDAV_BOOKS_SAMPLE_EVERY")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let mut checked = 0;
    let mut tokens = [0u64; 2];
    for book in ["book", "cargo"] {
        let pages = sorted_pages(&docs.join(book));
        for page in pages.iter().step_by(every.max(1)) {
            let html = std::fs::read(page).unwrap();
            let main = convert(&html, "text/html", &options(Content::Main)).unwrap();
            let full = convert(&html, "text/html", &options(Content::Full)).unwrap();
            tokens[0] += main.tokens;
            tokens[1] += full.tokens;
            let kept = skeleton(&main.markdown);
            let (headings, code) = main_landmarks(&html);
            for heading in headings.iter().map(|h| skeleton(h)).filter(|h| !h.is_empty()) {
                assert!(
                    kept.contains(&heading),
                    "{}: the heading {heading:?} is missing from the main content",
                    page.display()
                );
            }
            for line in code.iter().map(|l| skeleton(l)).filter(|l| !l.is_empty()) {
                assert!(
                    kept.contains(&line),
                    "{}: the code line {line:?} is missing from the main content",
                    page.display()
                );
            }
            checked += 1;
        }
    }
    eprintln!(
        "the Rust book and the cargo book, {checked} pages: {} tokens in main, {} in full: {:.1} % saved",
        tokens[0],
        tokens[1],
        100.0 * (1.0 - tokens[0] as f64 / tokens[1] as f64)
    );
    assert!(checked > 20, "the books are there");
}
