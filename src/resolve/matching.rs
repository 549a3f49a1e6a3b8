//! Matching (spec §4.3): which module owns the state a reference reads. Rules in order,
//! the first that gives exactly one module wins.

use super::identity::IdentityIndex;
use super::references::StateReference;

#[derive(Debug, PartialEq, Eq)]
pub(super) enum Match {
    One(String),
    Ambiguous(&'static str, Vec<String>),
    None(String),
}

pub(super) fn match_reference(
    r: &StateReference,
    from: &str,
    depth: usize,
    index: &IdentityIndex,
) -> Match {
    // Rule 1: identity.
    if let Some(identity) = &r.identity {
        if !identity.partial {
            if let Some(owners) = index.by_identity.get(identity) {
                match owners.as_slice() {
                    [one] => return Match::One(one.clone()),
                    [] => {}
                    many => return Match::Ambiguous("state identity", many.to_vec()),
                }
            }
        }
    }
    // Rule 2: path.
    let Some(normalised) = normalise_state_path(r) else {
        return Match::None(describe_identity(r));
    };
    if index.ids.contains(&normalised) {
        return Match::One(normalised);
    }
    let parts: Vec<&str> = normalised.split('/').collect();
    for start in 1..parts.len() {
        let suffix = parts[start..].join("/");
        if index.ids.contains(&suffix) {
            return Match::One(suffix);
        }
    }
    // Rule 3: context.
    if (1..=2).contains(&parts.len()) && !normalised.is_empty() {
        let mut contexts = Vec::new();
        if let Some((ctx, _)) = from.rsplit_once('/') {
            contexts.push(ctx.to_owned());
        }
        let from_parts: Vec<&str> = from.split('/').collect();
        if from_parts.len() > depth {
            contexts.push(from_parts[..depth - 1].join("/"));
        }
        let mut found: Vec<String> = contexts
            .iter()
            .map(|c| {
                if c.is_empty() {
                    normalised.clone()
                } else {
                    format!("{c}/{normalised}")
                }
            })
            .filter(|c| index.ids.contains(c))
            .collect();
        found.sort();
        found.dedup();
        match found.len() {
            0 => {}
            1 => return Match::One(found.remove(0)),
            _ => return Match::Ambiguous("context", found),
        }
    }
    Match::None(normalised)
}

/// How an identity-only reference is named in `unmatched-remote-state`.
fn describe_identity(r: &StateReference) -> String {
    match &r.identity {
        Some(identity) => {
            let fields: Vec<String> = identity
                .fields
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            format!("{} {}", identity.backend, fields.join(" "))
        }
        None => String::new(),
    }
}

/// Spec §4.3 rule 2: strip workspace prefixes and state file suffixes. `None` for a
/// reference without a state path.
pub fn normalise_state_path(r: &StateReference) -> Option<String> {
    let mut p = r
        .path
        .as_deref()?
        .trim()
        .trim_start_matches("./")
        .trim_start_matches('/')
        .to_owned();
    if let Some(rest) = p.strip_prefix("env:/") {
        p = rest
            .split_once('/')
            .map(|(_, r)| r.to_owned())
            .unwrap_or_default();
    } else if let Some(prefix) = &r.workspace_key_prefix {
        if let Some(rest) = p.strip_prefix(&format!("{prefix}/")) {
            p = rest
                .split_once('/')
                .map(|(_, r)| r.to_owned())
                .unwrap_or_default();
        }
    }
    if let Some(i) = p.rfind("env:") {
        if r.backend.as_deref() == Some("azurerm") && !p[i..].contains('/') {
            p.truncate(i);
        }
    }
    for suffix in ["/terraform.tfstate", "/default.tfstate", ".tfstate"] {
        if let Some(stripped) = p.strip_suffix(suffix) {
            p = stripped.to_owned();
            break;
        }
    }
    Some(p.trim_end_matches('/').to_owned())
}
