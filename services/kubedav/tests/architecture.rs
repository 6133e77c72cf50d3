//! The crate table of docs/architecture.md ("Crates") is the rule for which kubedav crate
//! may depend on which: this reads it, and `cargo metadata`, and fails on any edge
//! between kubedav crates that the table does not declare (and on a declared one that is
//! gone, so the table stays true to the code).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

/// Each crate's kubedav dependencies: its name (`kubedav-…`) to theirs.
type Edges = BTreeMap<String, BTreeSet<String>>;

/// What a crate may depend on, as the table says it.
#[derive(Debug)]
enum Allowed {
    /// Any kubedav crate (the binary).
    All,
    /// These kubedav crates.
    Only(BTreeSet<String>),
}

fn workspace_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .parent()
        .unwrap()
}

/// The table's rows: crate to what it may depend on.
fn declared(architecture: &str) -> BTreeMap<String, Allowed> {
    let section = architecture
        .split("\n## Crates\n")
        .nth(1)
        .expect("docs/architecture.md has a \"## Crates\" section");
    let mut table = BTreeMap::new();
    for row in section.lines().take_while(|l| !l.starts_with("## ")) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        // | `crate` | `path` | what it holds | depends on |
        let Some(name) = cells.get(1).and_then(|c| c.strip_prefix('`')?.strip_suffix('`')) else {
            continue;
        };
        if !name.starts_with("kubedav") {
            continue;
        }
        let depends = cells.get(4).copied().unwrap_or_default();
        let allowed = match depends {
            "all" => Allowed::All,
            "none" => Allowed::Only(BTreeSet::new()),
            list => Allowed::Only(
                list.split(',')
                    // "kit (Redis)": what is in parentheses says why.
                    .map(|d| d.split('(').next().unwrap().trim())
                    .map(|d| format!("kubedav-{d}"))
                    .collect(),
            ),
        };
        table.insert(name.to_owned(), allowed);
    }
    table
}

/// The workspace's edges between kubedav crates, from `cargo metadata` (normal
/// dependencies only: tests and build scripts may use more).
fn actual() -> Edges {
    let output = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        .current_dir(workspace_root())
        .output()
        .expect("cargo metadata runs");
    assert!(
        output.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let mut edges = Edges::new();
    for package in metadata["packages"].as_array().unwrap() {
        let name = package["name"].as_str().unwrap().to_owned();
        let deps = package["dependencies"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["kind"].is_null())
            .filter_map(|d| d["name"].as_str())
            .filter(|d| d.starts_with("kubedav"))
            .map(str::to_owned)
            .collect();
        edges.insert(name, deps);
    }
    edges
}

/// Every way `edges` and the table disagree, one line each.
fn disagreements(table: &BTreeMap<String, Allowed>, edges: &Edges) -> Vec<String> {
    let mut wrong = Vec::new();
    for (name, deps) in edges {
        let Some(allowed) = table.get(name) else {
            wrong.push(format!("{name} is not in the crate table"));
            continue;
        };
        let Allowed::Only(allowed) = allowed else { continue };
        for dep in deps.difference(allowed) {
            wrong.push(format!(
                "{name} depends on {dep}, which the crate table does not allow: declare the edge \
                 in docs/architecture.md (and say why), or remove it"
            ));
        }
        for gone in allowed.difference(deps) {
            wrong.push(format!(
                "the crate table lets {name} depend on {gone}, but it does not: take it out of the table"
            ));
        }
    }
    for name in table.keys().filter(|n| !edges.contains_key(*n)) {
        wrong.push(format!(
            "the crate table lists {name}, which is no workspace crate"
        ));
    }
    wrong
}

#[test]
fn crates_depend_only_on_what_the_architecture_table_declares() {
    let architecture = std::fs::read_to_string(workspace_root().join("docs/architecture.md")).unwrap();
    let table = declared(&architecture);
    assert!(table.len() >= 10, "the crate table was not found: {table:?}");
    let wrong = disagreements(&table, &actual());
    assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));
}

#[test]
fn an_undeclared_edge_fails_the_check() {
    let table = declared(
        "\n## Crates\n\n| crate | path | what | depends on |\n|---|---|---|---|\n\
         | `kubedav-api` | `services/api` | the contract | none |\n\
         | `kubedav-kit` | `services/kit` | plumbing | metrics |\n\
         | `kubedav-metrics` | `services/metrics` | metrics | none |\n",
    );
    let edge = |from: &str, to: &[&str]| (from.to_owned(), to.iter().map(|t| t.to_string()).collect());
    let declared_only: Edges = [
        edge("kubedav-api", &[]),
        edge("kubedav-kit", &["kubedav-metrics"]),
        edge("kubedav-metrics", &[]),
    ]
    .into();
    assert_eq!(disagreements(&table, &declared_only), Vec::<String>::new());
    let mut undeclared = declared_only.clone();
    undeclared.insert("kubedav-api".into(), ["kubedav-metrics".to_owned()].into());
    let wrong = disagreements(&table, &undeclared);
    assert_eq!(wrong.len(), 1, "{wrong:?}");
    assert!(
        wrong[0].starts_with("kubedav-api depends on kubedav-metrics"),
        "{wrong:?}"
    );
}

/// The contract crate holds no runtime: nothing in its dependency tree (as it is built
/// alone) starts threads, reads the system or counts metrics.
#[test]
fn the_contract_crate_pulls_in_no_runtime() {
    let output = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args([
            "tree",
            "-p",
            "kubedav-api",
            "-e",
            "normal,features",
            "--prefix",
            "none",
            "--offline",
        ])
        .current_dir(workspace_root())
        .output()
        .expect("cargo tree runs");
    assert!(
        output.status.success(),
        "cargo tree: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let tree = String::from_utf8(output.stdout).unwrap();
    for runtime in [
        "tokio feature \"rt",
        "tokio feature \"net",
        "tokio feature \"fs",
        "rustix v",
        "libc v",
        "prometheus-client v",
        "kubedav-",
    ] {
        let found: Vec<&str> = tree
            .lines()
            .filter(|l| l.starts_with(runtime) && !l.starts_with("kubedav-api"))
            .collect();
        assert!(found.is_empty(), "kubedav-api depends on {found:?}");
    }
}
