//! The cost of one decision (`make bench`) with policies of 10, 1,000 and 100,000 rules:
//! a path deep inside a rule's tree, a path on the way to rules (passable), and a path
//! no rule names. The tree makes each a walk of the path's segments, so the three sizes
//! should cost about the same.

use criterion::{Criterion, criterion_group, criterion_main};
use kubedav_api::path::VolumePath;
use kubedav_policy::Policy;
use std::hint::black_box;

/// A policy of `rules` rules: project spaces for 50 groups, every tenth with a
/// narrower subfolder, and homes.
fn policy_of(rules: usize) -> Policy {
    let mut yaml = String::from("homes: /home/{user}\nadmins: [root]\ngroups:\n");
    for g in 0..50 {
        yaml.push_str(&format!("  g{g}: [u{g}, v{g}]\n"));
    }
    yaml.push_str("rules:\n");
    let mut written = 0;
    let mut project = 0;
    while written < rules {
        let group = project % 50;
        yaml.push_str(&format!(
            "  - path: /projects/p{project}\n    grant: {{\"group:g{group}\": write, \"user:w{project}\": read}}\n"
        ));
        written += 1;
        if project % 10 == 0 && written < rules {
            yaml.push_str(&format!(
                "  - path: /projects/p{project}/board\n    grant: {{\"group:g{group}\": read, \"user:x{project}\": write}}\n"
            ));
            written += 1;
        }
        project += 1;
    }
    Policy::from_yaml(&yaml).expect("a valid policy")
}

fn decisions(c: &mut Criterion) {
    let deep = VolumePath::parse("projects/p0/board/minutes/2026/november.md").unwrap();
    let passing = VolumePath::parse("projects").unwrap();
    let home = VolumePath::parse("home/u7/photos/2026/summer/beach.jpg").unwrap();
    for rules in [10, 1_000, 100_000] {
        let policy = policy_of(rules);
        let subject = policy.subject("u0", &["external"]);
        let mut group = c.benchmark_group(format!("decide/{rules} rules"));
        group.bench_function("deep in a rule's tree", |b| {
            b.iter(|| policy.access(black_box(&subject), black_box(&deep)))
        });
        group.bench_function("a collection passed through", |b| {
            b.iter(|| policy.access(black_box(&subject), black_box(&passing)))
        });
        group.bench_function("another user's home", |b| {
            b.iter(|| policy.access(black_box(&subject), black_box(&home)))
        });
        group.finish();
    }
}

criterion_group!(benches, decisions);
criterion_main!(benches);
