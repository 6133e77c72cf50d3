//! Golden files: every `tests/golden/NAME.html` converts to `NAME.md` exactly.
//! `tree-rules.html` has a case for each tree-construction rule the builder implements
//! (implied end tags, headings, lists, definitions, select, table structure and foster
//! parenting, formatting across blocks and cells, misnesting, stray end tags, foreign
//! content, empty links and items), each read by eye against what a browser shows.
//! Run with `BLESS=1` to rewrite the expectations after a deliberate change (then read
//! the diff).

use kubedav_markdown::{Options, convert};
use std::path::Path;

#[test]
fn golden_files() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let mut count = 0;
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for html in entries
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "html"))
    {
        let expected_path = html.with_extension("md");
        let got = convert(&std::fs::read(&html).unwrap(), "text/html", &Options::default())
            .unwrap_or_else(|e| panic!("{}: {e}", html.display()))
            .markdown;
        if std::env::var_os("BLESS").is_some() {
            std::fs::write(&expected_path, &got).unwrap();
        }
        let expected = std::fs::read_to_string(&expected_path).unwrap_or_default();
        assert_eq!(
            got,
            expected,
            "{} differs from {}",
            html.display(),
            expected_path.display()
        );
        count += 1;
    }
    assert!(count >= 5, "the corpus is there");
}
