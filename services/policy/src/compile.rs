//! From the YAML document to a [`Policy`]: paths checked, rules put in the tree, who
//! reads beneath each node worked out, and the policy refused where it could not hold.

use crate::document::{Document, RuleDocument};
use crate::grantee::Grantee;
use crate::permission::Permission;
use crate::policy::{Policy, Rule, Subject};
use crate::tree::{Decider, Node, Readers};
use kubedav_api::path::VolumePath;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// Why a policy was refused. Each names the part of the file to fix.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PolicyError {
    /// The text is not YAML of the policy's shape.
    #[error("the policy is not valid: {0}")]
    Yaml(String),
    /// A path that is not one.
    #[error("{what}: {path:?} is not a usable path: {reason}")]
    Path {
        /// Which part of the file (`rule /x`, `quota.paths`, `homes`).
        what: String,
        /// As written.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Two rules for one path.
    #[error("two rules name {0}: merge their grants into one rule")]
    DuplicateRule(String),
    /// A grant key of none of the three forms.
    #[error("rule {rule}: {key:?} names nobody; write user:ID, group:NAME or *")]
    Grantee {
        /// The rule's path.
        rule: String,
        /// The key as written.
        key: String,
    },
    /// A quota that is not a size.
    #[error("quota for {path}: {written:?} is not a size; write e.g. 10GiB, 500MB or a number of bytes")]
    Size {
        /// The quota root, or `homes`.
        path: String,
        /// As written.
        written: String,
    },
    /// A name hidden from a principal who may write its collection.
    #[error(
        "{hidden} is hidden from {grantee}, who may write {writable}: a write there could create it. \
         Grant {grantee} at least read in {hidden}, or take write away in {writable}"
    )]
    HiddenFromWriters {
        /// The rule or homes that would be hidden (`rule /projects/apollo/secret`).
        hidden: String,
        /// Who it would be hidden from.
        grantee: String,
        /// The rule where they may write (`rule /projects/apollo`).
        writable: String,
    },
}

/// Reads and compiles `text`.
pub(crate) fn compile(text: &str) -> Result<Policy, PolicyError> {
    let document: Document = if text.trim().is_empty() {
        Document::default()
    } else {
        serde_saphyr::from_str_with_options(text, yaml_options())
            .map_err(|e| PolicyError::Yaml(e.to_string()))?
    };
    let mut tree = Node::default();
    let mut named = Vec::new();
    let mut rules = Vec::new();
    let mut groups_of: HashMap<String, Vec<Arc<str>>> = HashMap::new();
    for (group, members) in &document.groups {
        let group: Arc<str> = group.as_str().into();
        for member in members {
            let entry = groups_of.entry(member.clone()).or_default();
            if !entry.contains(&group) {
                entry.push(group.clone());
            }
        }
    }
    let homes_parent = match &document.homes {
        Some(template) => Some(homes_parent(template)?),
        None => None,
    };
    let homes_quota = match &document.quota.homes {
        Some(size) => Some(size.bytes().ok_or_else(|| PolicyError::Size {
            path: "homes".to_owned(),
            written: size.written(),
        })?),
        None => None,
    };
    if homes_quota.is_some() && homes_parent.is_none() {
        return Err(PolicyError::Path {
            what: "quota.homes".to_owned(),
            path: String::new(),
            reason: "there are no homes: add homes: /home/{user}, or remove it".to_owned(),
        });
    }
    if let Some(parent) = &homes_parent {
        let node = tree.make(parent.segments());
        node.any_home = Some(Box::new(Node {
            decider: Some(Decider::Home),
            quota: homes_quota,
            ..Node::default()
        }));
        named.push(parent.clone());
    }
    let mut seen = HashSet::new();
    for rule in &document.rules {
        let path = volume_path(&format!("rule {}", rule.path), &rule.path)?;
        if !seen.insert(path.clone()) {
            return Err(PolicyError::DuplicateRule(rule.path.clone()));
        }
        let node = place(&mut tree, homes_parent.as_ref(), &path, homes_quota);
        node.decider = Some(Decider::Rule(rules.len()));
        node.links = rule.links;
        rules.push(compiled(rule)?);
        named.push(path);
    }
    for (written, size) in &document.quota.paths {
        let path = volume_path("quota.paths", written)?;
        let limit = size.bytes().ok_or_else(|| PolicyError::Size {
            path: written.clone(),
            written: size.written(),
        })?;
        place(&mut tree, homes_parent.as_ref(), &path, homes_quota).quota = Some(limit);
        if !named.contains(&path) {
            named.push(path);
        }
    }
    gather_readers(&mut tree, &rules, None);
    let policy = Policy {
        tree,
        rules,
        admins: document.admins.iter().cloned().collect(),
        groups_of,
        named,
        homes_parent,
        has_quotas: homes_quota.is_some() || !document.quota.paths.is_empty(),
    };
    check_nothing_hidden_from_writers(&policy)?;
    Ok(policy)
}

/// How the YAML is read: duplicate keys refused (serde-saphyr's default), and a budget
/// for a policy of up to about a million rules. The parser's default (250,000 nodes)
/// stops at about 40,000; the file is the operator's, not a client's, so the budget only
/// keeps a mistake (a generated file run away) from taking the process's memory.
fn yaml_options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_nodes: 8_000_000,
            max_events: 16_000_000,
            max_total_scalar_bytes: 256 << 20,
        },
    }
}

/// The parent of the homes in a template such as `/home/{user}`.
fn homes_parent(template: &str) -> Result<VolumePath, PolicyError> {
    let refuse = |reason: &str| PolicyError::Path {
        what: "homes".to_owned(),
        path: template.to_owned(),
        reason: reason.to_owned(),
    };
    let parent = template
        .strip_suffix("/{user}")
        .ok_or_else(|| refuse("it must end in /{user}, e.g. /home/{user}"))?;
    if parent.contains('{') || parent.contains('}') {
        return Err(refuse("{user} may stand only as its last segment"));
    }
    if !parent.is_empty() && !parent.starts_with('/') {
        return Err(refuse("it must start with /"));
    }
    volume_path("homes", if parent.is_empty() { "/" } else { parent })
}

/// A path as a policy writes it (`/projects/apollo`, a trailing slash allowed).
fn volume_path(what: &str, written: &str) -> Result<VolumePath, PolicyError> {
    let refuse = |reason: String| PolicyError::Path {
        what: what.to_owned(),
        path: written.to_owned(),
        reason,
    };
    let Some(inner) = written.strip_prefix('/') else {
        return Err(refuse("it must start with /".to_owned()));
    };
    if inner.contains('{') || inner.contains('}') {
        return Err(refuse("only homes: may hold {user}".to_owned()));
    }
    VolumePath::parse(inner.trim_end_matches('/')).map_err(|e| refuse(e.to_string()))
}

/// The node of `path`, made if missing. A literal node beneath the homes' parent is a
/// home, as the home template would have made it, with the homes' quota.
fn place<'t>(
    tree: &'t mut Node,
    homes_parent: Option<&VolumePath>,
    path: &VolumePath,
    homes_quota: Option<u64>,
) -> &'t mut Node {
    let Some(parent) = homes_parent.filter(|parent| path.starts_with(parent) && path != *parent) else {
        return tree.make(path.segments());
    };
    let depth = parent.segments().count();
    let owner = path.segments().nth(depth).unwrap_or_default();
    let parent_node = tree.make(parent.segments());
    let home = parent_node.children.entry(owner.into()).or_insert_with(|| Node {
        decider: Some(Decider::Home),
        quota: homes_quota,
        ..Node::default()
    });
    home.make(path.segments().skip(depth + 1))
}

/// A rule's grants, each key read.
fn compiled(rule: &RuleDocument) -> Result<Rule, PolicyError> {
    let grants = rule
        .grant
        .iter()
        .map(|(key, permission)| {
            Grantee::parse(key)
                .map(|grantee| (grantee, *permission))
                .ok_or_else(|| PolicyError::Grantee {
                    rule: rule.path.clone(),
                    key: key.clone(),
                })
        })
        .collect::<Result<_, _>>()?;
    Ok(Rule {
        path: rule.path.clone(),
        grants,
    })
}

/// Fills in every node's [`Readers`] from those of its descendants; returns who reads
/// at or beneath `node`. `owner` is the segment of a home node.
fn gather_readers(node: &mut Node, rules: &[Rule], owner: Option<&str>) -> Readers {
    let mut below = Readers::default();
    for (segment, child) in &mut node.children {
        let owner = (child.decider == Some(Decider::Home)).then_some(&**segment);
        below.extend(&gather_readers(child, rules, owner));
    }
    if let Some(home) = &mut node.any_home {
        gather_readers(home, rules, None);
        below.homes = true;
    }
    node.readers_below = below.clone();
    let mut here = below;
    match node.decider {
        Some(Decider::Rule(index)) => {
            for (grantee, permission) in &rules[index].grants {
                if *permission < Permission::Read {
                    continue;
                }
                match grantee {
                    Grantee::User(id) => {
                        here.users.insert(id.as_str().into());
                    }
                    Grantee::Group(name) => {
                        here.groups.insert(name.as_str().into());
                    }
                    Grantee::Anyone => here.anyone = true,
                }
            }
        }
        Some(Decider::Home) => match owner {
            Some(owner) => {
                here.users.insert(owner.into());
            }
            None => here.homes = true,
        },
        None => {}
    }
    here
}

/// Refuses a policy under which a principal may write a collection in which a name is
/// hidden from it. Each decider is compared with the nearest one above it: every grantee
/// that may write there must read here. A `user:` grantee is taken with the policy's
/// groups for it (an identity provider's groups are not known at load).
fn check_nothing_hidden_from_writers(policy: &Policy) -> Result<(), PolicyError> {
    visit(policy, &policy.tree, None, "/")
}

/// What decides above a node: the decider, the owner segment of a home, and the path
/// for messages.
type Above<'p> = Option<(Decider, &'p str, String)>;

fn visit(policy: &Policy, node: &Node, above: Above<'_>, path: &str) -> Result<(), PolicyError> {
    let children = node.children.iter().map(|(segment, child)| {
        (
            &**segment,
            child,
            format!("{}/{segment}", path.trim_end_matches('/')),
        )
    });
    let homes = node
        .any_home
        .iter()
        .map(|home| ("", &**home, format!("{}/{{user}}", path.trim_end_matches('/'))));
    for (segment, child, child_path) in children.chain(homes) {
        let here = match child.decider {
            Some(decider) => {
                if let Some((above_decider, owner, above_path)) = &above {
                    check_pair(
                        policy,
                        (*above_decider, owner, above_path),
                        (decider, segment, &child_path),
                    )?;
                }
                Some((decider, segment, child_path.clone()))
            }
            None => above.clone(),
        };
        visit(policy, child, here, &child_path)?;
    }
    Ok(())
}

/// Every grantee that may write under `above` must read under `below`.
fn check_pair(
    policy: &Policy,
    above: (Decider, &str, &str),
    below: (Decider, &str, &str),
) -> Result<(), PolicyError> {
    let writers: Vec<Grantee> = match above.0 {
        Decider::Rule(index) => policy.rules[index]
            .grants
            .iter()
            .filter(|(_, permission)| *permission >= Permission::Write)
            .map(|(grantee, _)| grantee.clone())
            .collect(),
        Decider::Home => vec![Grantee::User(above.1.to_owned())],
    };
    for writer in writers {
        let subject = stand_in(policy, &writer);
        let reads = match below.0 {
            Decider::Rule(index) => policy.rules[index].permission(&subject) >= Permission::Read,
            // A named home is read by its owner alone; the template's homes by nobody
            // else but each owner, so no writer above reads them all.
            Decider::Home => !below.1.is_empty() && subject.user() == below.1,
        };
        if !reads {
            return Err(PolicyError::HiddenFromWriters {
                hidden: describe(policy, below),
                grantee: writer.to_string(),
                writable: describe(policy, above),
            });
        }
    }
    Ok(())
}

/// A subject standing for every principal a grantee names.
fn stand_in(policy: &Policy, grantee: &Grantee) -> Subject {
    match grantee {
        Grantee::User(id) => Subject::of(id, policy.groups_of.get(id).cloned().unwrap_or_default(), false),
        // A member of the group known by nothing else: no user id any rule names.
        Grantee::Group(name) => Subject::of("\u{0}group-member", vec![name.as_str().into()], false),
        Grantee::Anyone => Subject::of("\u{0}anyone", Vec::new(), false),
    }
}

fn describe(policy: &Policy, (decider, _, path): (Decider, &str, &str)) -> String {
    match decider {
        Decider::Rule(index) => format!("rule {}", policy.rules[index].path),
        Decider::Home => format!("home {path}"),
    }
}
