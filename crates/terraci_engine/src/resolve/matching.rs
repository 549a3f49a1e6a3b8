//! Matching (spec §4.3, as revised by the real-monorepo rules): which module owns the
//! state a reference reads. The rules, in order; the first that finds any candidate
//! decides (one candidate is an edge, two or more are `ambiguous-remote-state`):
//!
//! 1. **State identity**: a module of the same backend type whose backend places a
//!    state exactly where the reference reads, in the reference's workspace (s3
//!    `<workspace_key_prefix>/<ws>/<key>`, azurerm `<key>env:<ws>`, remote/cloud
//!    `workspaces.prefix`), with every identity field known on both sides equal.
//!    Modules whose identity is complete on both sides are tried first; then
//!    **partial identity**: the location known on both sides, each other field missing
//!    or unknown on at least one side (a backend completed at `terraform init`).
//! 2. **Path**: the normalised state path is a module id, or its longest `/`-suffix is.
//! 3. **Context**: a 1- or 2-segment path next to the reading module.
//! 4. **Tail**: the known trailing segments of the state path (all of a literal key, or
//!    what follows the unknown part of a template) equal the trailing segments of
//!    module ids. Leading segments may be dropped only when no module id holds them.
//! 5. **Flat suffix**: a state name without `/` (`${var.project}-${var.env}-base.tfstate`,
//!    or its known end `-base.tfstate`) that ends in `-`, `_` or `.` and the name of a
//!    module next to the reader (`base`, in the reader's directory or context), when that
//!    module's backend is of the reader's type and leaves its state path unstated (an
//!    empty `backend "s3" {}` completed at `terraform init`). The longest such name
//!    decides (`lab-results` before `results`).
//!
//! Every rule after the first skips a module whose backend is known to keep its state
//! elsewhere: the same type with an identity field known on both sides and different.

use super::references::StateTarget;
use terraci_db::owners::{IdentityIndex, Owner};

/// Which rule matched an edge: shown by `--explain` and in the graph's JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Rule {
    Identity,
    PartialIdentity,
    Path,
    Context,
    Tail,
    /// The end of a flat state name is a neighbour's directory name (rule 5).
    FlatSuffix,
    /// `dependencies.add` / `external_state` in `.terraci.yaml`.
    Declared,
}

impl Rule {
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::Identity => "state identity",
            Rule::PartialIdentity => "partial state identity",
            Rule::Path => "state path",
            Rule::Context => "context",
            Rule::Tail => "tail of the state path",
            Rule::FlatSuffix => "suffix of a flat state name",
            Rule::Declared => "declared in .terraci.yaml",
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
pub(super) enum Match {
    One(String, Rule),
    Ambiguous(Rule, Vec<String>),
    /// Nothing matched: what was looked for, and (when some module's backend has the
    /// location but an identity field differs) what differed.
    None(String, Option<String>),
}

pub(super) fn match_reference(
    r: &StateTarget,
    from: &str,
    depth: usize,
    index: &IdentityIndex,
) -> Match {
    // Rule 1: identity, complete then partial.
    let mut near_miss = None;
    if let Some(found) = match_identity(r, index, &mut near_miss) {
        return found;
    }
    let Some(normalised) = normalise_state_path(r) else {
        if let Some(tail) = &r.tail {
            if let Some(found) = match_tail(tail, true, r, index) {
                return found;
            }
            if let Some(found) = match_flat(tail, r, from, depth, index, &mut near_miss) {
                return found;
            }
            return Match::None(tail.clone(), near_miss);
        }
        return Match::None(describe_identity(r), near_miss);
    };
    if normalised.is_empty() {
        // `terraform.tfstate` alone names no directory.
        return Match::None(r.path.clone().unwrap_or_default(), near_miss);
    }
    // A module whose backend is known to keep its state elsewhere is no candidate of
    // the rules below; the first one found is what `unmatched-remote-state` names.
    let mut fits = |id: &str, what: &str| match conflict(r, index, id) {
        None => true,
        Some(why) => {
            near_miss.get_or_insert_with(|| format!("`{id}` {what}, but {why}"));
            false
        }
    };
    // Rule 2: path.
    if index.ids.contains(&normalised) && fits(&normalised, "is the state path") {
        return Match::One(normalised, Rule::Path);
    }
    let parts: Vec<&str> = normalised.split('/').collect();
    for start in 1..parts.len() {
        let suffix = parts[start..].join("/");
        if index.ids.contains(&suffix) && fits(&suffix, "ends the state path") {
            return Match::One(suffix, Rule::Path);
        }
    }
    // Rule 3: context.
    if (1..=2).contains(&parts.len()) {
        let mut found: Vec<String> = contexts(from, depth)
            .iter()
            .map(|c| {
                if c.is_empty() {
                    normalised.clone()
                } else {
                    format!("{c}/{normalised}")
                }
            })
            .filter(|c| index.ids.contains(c) && fits(c, "is the state path next to this module"))
            .collect();
        found.sort();
        found.dedup();
        match found.len() {
            0 => {}
            1 => return Match::One(found.remove(0), Rule::Context),
            _ => return Match::Ambiguous(Rule::Context, found),
        }
    }
    // Rule 4: tail.
    if let Some(found) = match_tail(&format!("/{normalised}"), false, r, index) {
        return found;
    }
    // Rule 5: flat suffix.
    if let Some(found) = match_flat(&normalised, r, from, depth, index, &mut near_miss) {
        return found;
    }
    Match::None(normalised, near_miss)
}

/// Why module `id` cannot own the state `r` reads although a path rule points at it: an
/// identity field other than the state path itself (which the path rules read relative
/// to the module: `eks/terraform.tfstate` for `stage/eks`), known on both sides of the
/// same backend type and different: another bucket, storage account or organization.
fn conflict(r: &StateTarget, index: &IdentityIndex, id: &str) -> Option<String> {
    let mine = r.identity.as_ref()?;
    let theirs = index.identities.get(id)?;
    if mine.backend != theirs.backend {
        return None;
    }
    let location = mine.location_field();
    let (field, _) = mine
        .fields
        .iter()
        .find(|(k, v)| Some(**k) != location && theirs.fields.get(**k).is_some_and(|o| o != *v))?;
    let field: &str = field;
    Some(format!(
        "its backend's `{field}` is \"{}\", not \"{}\"",
        theirs.fields.get(field).map_or("", String::as_str),
        mine.fields.get(field).map_or("", String::as_str)
    ))
}

/// The directories a short state path is read relative to: the reader's parent, and
/// the context of the pattern (its first `depth - 1` segments) when the reader is deeper.
fn contexts(from: &str, depth: usize) -> Vec<String> {
    let mut contexts = Vec::new();
    if let Some((ctx, _)) = from.rsplit_once('/') {
        contexts.push(ctx.to_owned());
    } else {
        contexts.push(String::new());
    }
    let from_parts: Vec<&str> = from.split('/').collect();
    if depth > 0 && from_parts.len() > depth {
        contexts.push(from_parts[..depth - 1].join("/"));
    }
    contexts.sort();
    contexts.dedup();
    contexts
}

/// Rule 5. `name` is a flat state name (no `/`): a whole normalised path, or the known
/// end of a template (`-base.tfstate`). Its candidates are the modules directly in the
/// reader's contexts whose directory name ends it after a separator; each must have a
/// backend of the reader's type that states no location (else the identity rule would
/// have found it, or it keeps its state elsewhere) and no identity field that differs.
fn match_flat(
    name: &str,
    r: &StateTarget,
    from: &str,
    depth: usize,
    index: &IdentityIndex,
    near_miss: &mut Option<String>,
) -> Option<Match> {
    let backend = match &r.identity {
        Some(mine) => mine.backend.as_str(),
        None => r.backend.as_deref()?,
    };
    let name = name.strip_suffix(".tfstate").unwrap_or(name);
    if name.contains('/') {
        return None;
    }
    let mut best: Vec<&str> = Vec::new();
    let mut best_len = 0;
    for ctx in contexts(from, depth) {
        let prefix = if ctx.is_empty() {
            ctx
        } else {
            format!("{ctx}/")
        };
        let siblings = index
            .ids
            .range::<str, _>((
                std::ops::Bound::Included(prefix.as_str()),
                std::ops::Bound::Unbounded,
            ))
            .take_while(|id| id.starts_with(&prefix));
        for id in siblings {
            let leaf = &id[prefix.len()..];
            if leaf.contains('/') || leaf.len() < best_len || id == from {
                continue;
            }
            let Some(head) = name.strip_suffix(leaf) else {
                continue;
            };
            if !head.ends_with(['-', '_', '.']) {
                continue;
            }
            let why_not = match index.identities.get(id.as_str()) {
                None => Some(format!(
                    "`{id}` ends the name, but has no `{backend}` backend"
                )),
                Some(theirs) if theirs.backend == "local" && backend != "local" => Some(format!(
                    "`{id}` ends the name, but keeps its state locally, with no backend block"
                )),
                Some(theirs) if theirs.backend != backend => Some(format!(
                    "`{id}` ends the name, but its backend is `{}`, not `{backend}`",
                    theirs.backend
                )),
                Some(theirs) => match (theirs.location(), &r.identity) {
                    (Some(location), _) => Some(format!(
                        "`{id}` ends the name, but its backend states its own {} \"{location}\"",
                        theirs.location_field().unwrap_or("location")
                    )),
                    _ => {
                        conflict(r, index, id).map(|why| format!("`{id}` ends the name, but {why}"))
                    }
                },
            };
            if let Some(why) = why_not {
                near_miss.get_or_insert(why);
                continue;
            }
            if leaf.len() > best_len {
                best_len = leaf.len();
                best.clear();
            }
            best.push(id);
        }
    }
    best.sort_unstable();
    best.dedup();
    match best.as_slice() {
        [] => None,
        [one] => Some(Match::One((*one).to_owned(), Rule::FlatSuffix)),
        _ => Some(Match::Ambiguous(
            Rule::FlatSuffix,
            best.iter().map(|s| (*s).to_owned()).collect(),
        )),
    }
}

/// Where the reference's state sits: its location in its workspace's layout.
fn reader_location(r: &StateTarget) -> Option<String> {
    let identity = r.identity.as_ref()?;
    let default = r.workspace == "default";
    match identity.backend.as_str() {
        "remote" => match (identity.location(), &identity.workspace_prefix) {
            (Some(name), _) => Some(name.to_owned()),
            (None, Some(prefix)) => Some(format!("{prefix}{}", r.workspace)),
            (None, None) => None,
        },
        _ if identity.location_field().is_none() => (!identity.partial).then(String::new),
        "s3" if !default => Some(format!(
            "{}/{}/{}",
            identity.workspace_prefix.as_deref().unwrap_or("env:"),
            r.workspace,
            identity.location()?
        )),
        "azurerm" if !default => Some(format!("{}env:{}", identity.location()?, r.workspace)),
        "local" if !default => Some(local_workspace_state(
            identity.workspace_prefix.as_deref()?,
            &r.workspace,
        )),
        _ => identity.location().map(str::to_owned),
    }
}

/// Where the local backend keeps workspace `workspace` (not `default`): under its
/// `workspace_dir` (project-relative; `<root dir>/terraform.tfstate.d` unless set),
/// whatever its `path`, relative to the directory Terraform runs in. Terraform 1.11.4
/// did so (`fixtures/rules/local-backend`).
fn local_workspace_state(workspace_dir: &str, workspace: &str) -> String {
    if workspace_dir.is_empty() {
        format!("{workspace}/terraform.tfstate")
    } else {
        format!("{workspace_dir}/{workspace}/terraform.tfstate")
    }
}

/// The owners whose backend layout places a state at `location`.
fn owners_at<'i>(index: &'i IdentityIndex, backend: &str, location: &str) -> Vec<&'i Owner> {
    let key = |l: &str| (backend.to_owned(), l.to_owned());
    let mut out: Vec<&Owner> = index
        .by_location
        .get(&key(location))
        .into_iter()
        .flatten()
        .collect();
    // One key, refilled for each probe: a reference's look-ups allocate nothing more.
    let mut probe = (backend.to_owned(), String::new(), String::new());
    let mut prefixed = |prefix: &str, rest: &str| {
        probe.1.clear();
        probe.1.push_str(prefix);
        probe.2.clear();
        probe.2.push_str(rest);
        index.by_workspace_prefix.get(&probe).into_iter().flatten()
    };
    match backend {
        "s3" => {
            // `<prefix>/<workspace>/<key>`, the prefix and key of any length: the
            // workspace is any segment but the first and the last.
            let slashes: Vec<usize> = location.match_indices('/').map(|(i, _)| i).collect();
            for pair in slashes.windows(2) {
                out.extend(prefixed(&location[..pair[0]], &location[pair[1] + 1..]));
            }
        }
        "azurerm" => {
            if let Some(i) = location.rfind("env:") {
                if i > 0 {
                    out.extend(
                        index
                            .by_location
                            .get(&key(&location[..i]))
                            .into_iter()
                            .flatten(),
                    );
                }
            }
        }
        "remote" => {
            for (i, _) in location.char_indices().skip(1) {
                out.extend(prefixed(&location[..i], ""));
            }
        }
        "local" => {
            // `<workspace_dir>/<workspace>/terraform.tfstate`.
            if let Some(dir) = location.strip_suffix("/terraform.tfstate") {
                out.extend(prefixed(dir.rsplit_once('/').map_or("", |(d, _)| d), ""));
            }
        }
        _ => {}
    }
    out.sort_by(|a, b| a.id.cmp(&b.id));
    out.dedup_by(|a, b| a.id == b.id);
    out
}

fn match_identity(
    r: &StateTarget,
    index: &IdentityIndex,
    near_miss: &mut Option<String>,
) -> Option<Match> {
    let identity = r.identity.as_ref()?;
    let location = reader_location(r)?;
    let location_field = identity.location_field();
    let mut complete = Vec::new();
    let mut partial = Vec::new();
    for owner in owners_at(index, &identity.backend, &location) {
        let conflict = index
            .fields_of(&owner.id)
            .into_iter()
            .flat_map(terraci_db::owners::Fields::iter)
            .find_map(|(k, theirs)| {
                let mine = identity.fields.get(k)?;
                (Some(*k) != location_field && mine != theirs).then_some((k, theirs, mine))
            });
        if let Some((field, theirs, mine)) = conflict {
            // Backends without a location field have nothing "almost" matching.
            if location_field.is_none() {
                continue;
            }
            near_miss.get_or_insert_with(|| {
                format!(
                    "{}'s backend has this {}, but its `{field}` is \"{theirs}\", not \"{mine}\"",
                    owner.id,
                    location_field.unwrap_or("state")
                )
            });
            continue;
        }
        if owner.complete && !identity.partial {
            complete.push(owner.id.clone());
        } else {
            partial.push(owner.id.clone());
        }
    }
    for (rule, found) in [(Rule::Identity, complete), (Rule::PartialIdentity, partial)] {
        match found.len() {
            0 => {}
            1 => return Some(Match::One(found[0].clone(), rule)),
            _ => return Some(Match::Ambiguous(rule, found)),
        }
    }
    None
}

/// Rule 4. `tail` is the known end of a state path: `/a/b.tfstate` (whole segments), or
/// `-b/c.tfstate` when the unknown part ends inside a segment. `unknown_head`: an unknown
/// part comes before it (else `tail` is a whole normalised path with a leading `/`).
///
/// Unlike the path rule, the tail rule guesses more: a candidate whose backend is known
/// to keep its state elsewhere (a field known on both sides and different) is none.
fn match_tail(
    tail: &str,
    unknown_head: bool,
    r: &StateTarget,
    index: &IdentityIndex,
) -> Option<Match> {
    let conflicts = |id: &str| match (&r.identity, index.identities.get(id)) {
        (Some(mine), Some(theirs)) => mine.conflicts(theirs),
        _ => false,
    };
    let tail = strip_state_suffix(tail);
    let (partial, complete): (Option<&str>, Vec<&str>) = match tail.split_once('/') {
        Some(("", rest)) => (None, rest.split('/').collect()),
        Some((head, rest)) => (Some(head), rest.split('/').collect()),
        None => return None,
    };
    let complete: Vec<&str> = complete.into_iter().filter(|s| !s.is_empty()).collect();
    if complete.is_empty() {
        return None;
    }
    for k in (1..=complete.len()).rev() {
        let dropped = &complete[..complete.len() - k];
        // A known segment may be skipped only when it names no directory of the project:
        // `govuk/infra-vpc` for `terraform/projects/infra-vpc`, never `stage/vpc` for
        // `prod/vpc`.
        if dropped.iter().any(|s| index.segments.contains(*s)) {
            return None;
        }
        let wanted = &complete[complete.len() - k..];
        let found: Vec<String> = index
            .ids
            .iter()
            .filter(|id| {
                let segs: Vec<&str> = id.split('/').collect();
                if segs.len() < k || segs[segs.len() - k..] != *wanted {
                    return false;
                }
                let partial_ok = match partial {
                    // The unknown part ends with this text, inside the segment before.
                    Some(p) if k == complete.len() && unknown_head => {
                        segs.len() > k && segs[segs.len() - k - 1].ends_with(p)
                    }
                    _ => true,
                };
                partial_ok && !conflicts(id)
            })
            .cloned()
            .collect();
        match found.len() {
            0 => {}
            1 => return Some(Match::One(found[0].clone(), Rule::Tail)),
            _ => return Some(Match::Ambiguous(Rule::Tail, found)),
        }
    }
    None
}

/// `a/b/terraform.tfstate` -> `a/b`, `a/b.tfstate` -> `a/b`, `a/default.tfstate` -> `a`.
fn strip_state_suffix(p: &str) -> &str {
    for suffix in ["/terraform.tfstate", "/default.tfstate", ".tfstate"] {
        if let Some(stripped) = p.strip_suffix(suffix) {
            return stripped.trim_end_matches('/');
        }
    }
    p.trim_end_matches('/')
}

/// How an identity-only reference is named in `unmatched-remote-state`.
fn describe_identity(r: &StateTarget) -> String {
    match &r.identity {
        Some(identity) => {
            // A local workspace other than `default` is not at `path`.
            let workspace_file = (identity.backend == "local" && r.workspace != "default")
                .then(|| reader_location(r))
                .flatten();
            let fields: Vec<String> = identity
                .fields
                .iter()
                .map(|(k, v)| match (&workspace_file, *k) {
                    (Some(file), "path") => format!("{k}={file}"),
                    _ => format!("{k}={v}"),
                })
                .collect();
            format!("{} {}", identity.backend, fields.join(" "))
        }
        None => String::new(),
    }
}

/// Spec §4.3 rule 2: strip workspace prefixes and state file suffixes. `None` for a
/// reference without a known state path. A path that is only a state file name
/// (`terraform.tfstate`) normalises to the empty string.
pub(crate) fn normalise_state_path(r: &StateTarget) -> Option<String> {
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
    if matches!(p.as_str(), "terraform.tfstate" | "default.tfstate") {
        return Some(String::new());
    }
    Some(strip_state_suffix(&p).to_owned())
}

/// What a match found, for the table-driven tests.
#[cfg(test)]
fn describe(m: &Match) -> String {
    match m {
        Match::One(id, rule) => format!("{id} by {}", rule.as_str()),
        Match::Ambiguous(rule, ids) => {
            format!("ambiguous by {}: {}", rule.as_str(), ids.join(", "))
        }
        Match::None(what, why) => match why {
            Some(why) => format!("none: {what} ({why})"),
            None => format!("none: {what}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resolve::StateIdentity;

    /// `backend key=value ...` (a `?` value is unknown, `ws=` a workspace prefix).
    fn identity(spec: &str) -> StateIdentity {
        let mut parts = spec.split_whitespace();
        let backend = parts.next().expect("backend").to_owned();
        let mut fields = terraci_db::owners::Fields::default();
        let mut partial = false;
        let mut workspace_prefix = (backend == "s3").then(|| "env:".to_owned());
        for p in parts {
            let (k, v) = p.split_once('=').expect("k=v");
            match (k, v) {
                ("wkp", v) => workspace_prefix = Some(v.to_owned()),
                (_, "?") => partial = true,
                _ => {
                    let name = crate::resolve::identity_fields(&backend)
                        .iter()
                        .find(|f| **f == k)
                        .expect("an identity field of the backend");
                    fields.insert(name, v.to_owned());
                }
            }
        }
        for f in crate::resolve::identity_fields(&backend) {
            if !fields.contains_key(f) {
                partial = true;
            }
        }
        StateIdentity {
            backend,
            fields,
            partial,
            workspace_prefix,
        }
    }

    fn index(modules: &[(&str, &str)]) -> IdentityIndex {
        let mut index = IdentityIndex::default();
        for (id, spec) in modules {
            index.add(id, &identity(spec));
        }
        index
    }

    fn reference(spec: &str, workspace: &str, tail: Option<&str>) -> StateTarget {
        let identity = identity(spec);
        StateTarget {
            backend: Some(identity.backend.clone()),
            path: identity.location().map(str::to_owned),
            identity: Some(identity),
            tail: tail.map(str::to_owned),
            workspace: workspace.into(),
            workspace_key_prefix: None,
        }
    }

    /// (case, modules, reference, workspace, tail, expected)
    type Case<'a> = (
        &'a str,
        &'a [(&'a str, &'a str)],
        &'a str,
        &'a str,
        Option<&'a str>,
        &'a str,
    );

    #[test]
    fn rules_in_order() {
        let cases: &[Case] = &[
            // Identity.
            ("identity hit", &[("a/vpc", "s3 bucket=b key=net/vpc.tfstate"), ("a/eks", "s3 bucket=b key=eks.tfstate")],
                "s3 bucket=b key=net/vpc.tfstate", "default", None, "a/vpc by state identity"),
            ("identity: both buckets known and different is no match", &[("a/vpc", "s3 bucket=one key=net/vpc.tfstate")],
                "s3 bucket=two key=net/vpc.tfstate", "default", None,
                "none: net/vpc (a/vpc's backend has this key, but its `bucket` is \"one\", not \"two\")"),
            ("identity ambiguous", &[("a/x", "s3 bucket=b key=k.tfstate"), ("a/y", "s3 bucket=b key=k.tfstate")],
                "s3 bucket=b key=k.tfstate", "default", None, "ambiguous by state identity: a/x, a/y"),
            // Partial identity.
            ("partial: bucket given at init", &[("a/vpc", "s3 key=net/vpc.tfstate")],
                "s3 bucket=b key=net/vpc.tfstate", "default", None, "a/vpc by partial state identity"),
            ("partial: reader bucket unknown", &[("a/vpc", "s3 bucket=b key=net/vpc.tfstate")],
                "s3 bucket=? key=net/vpc.tfstate", "default", None, "a/vpc by partial state identity"),
            ("partial miss: another key", &[("a/vpc", "s3 key=net/vpc.tfstate")],
                "s3 bucket=b key=net/eks.tfstate", "default", None, "none: net/eks"),
            ("partial ambiguous", &[("a/x", "s3 key=k.tfstate"), ("a/y", "s3 key=k.tfstate")],
                "s3 bucket=b key=k.tfstate", "default", None, "ambiguous by partial state identity: a/x, a/y"),
            ("complete wins over partial", &[("a/x", "s3 bucket=b key=k.tfstate"), ("a/y", "s3 key=k.tfstate")],
                "s3 bucket=b key=k.tfstate", "default", None, "a/x by state identity"),
            ("partial never across backend types", &[("a/x", "gcs prefix=k.tfstate")],
                "s3 bucket=b key=k.tfstate", "default", None, "none: k"),
            // Workspaces.
            ("s3 workspace prefix in the key", &[("a/vpc", "s3 bucket=b key=terraform.tfstate wkp=accounts/vpc")],
                "s3 bucket=b key=accounts/vpc/live/terraform.tfstate", "default", None, "a/vpc by state identity"),
            ("s3 workspace prefix: other module's prefix", &[("a/vpc", "s3 bucket=b key=terraform.tfstate wkp=accounts/vpc/eks")],
                "s3 bucket=b key=accounts/vpc/live/terraform.tfstate", "default", None, "none: accounts/vpc/live"),
            ("s3 reader workspace", &[("a/vpc", "s3 bucket=b key=vpc.tfstate")],
                "s3 bucket=b key=vpc.tfstate", "prod", None, "a/vpc by state identity"),
            ("s3 reader workspace, custom prefix on both sides", &[("a/vpc", "s3 bucket=b key=vpc.tfstate wkp=ws")],
                "s3 bucket=b key=vpc.tfstate wkp=ws", "prod", None, "a/vpc by state identity"),
            ("azurerm workspace suffix", &[("a/vpc", "azurerm storage_account_name=s container_name=c key=vpc.tfstate")],
                "azurerm storage_account_name=s container_name=c key=vpc.tfstateenv:prod", "default", None, "a/vpc by state identity"),
            ("remote workspace prefix", &[("a/app", "remote organization=o wkp=app-")],
                "remote organization=o workspace=app-prod", "default", None, "a/app by partial state identity"),
            // Path and context, unchanged.
            ("path rule", &[("stage/vpc", "s3 key=?")],
                "s3 bucket=b key=stage/vpc/terraform.tfstate", "default", None, "stage/vpc by state path"),
            ("bare terraform.tfstate names no directory", &[("terraform", "s3 key=?")],
                "s3 bucket=b key=terraform.tfstate", "default", None, "none: terraform.tfstate"),
            ("context rule", &[("stage/vpc", "s3 key=?"), ("prod/vpc", "s3 key=?")],
                "s3 bucket=b key=vpc/terraform.tfstate", "default", None, "stage/vpc by context"),
            ("path never takes a module in another bucket", &[("stage/vpc", "s3 bucket=a key=?")],
                "s3 bucket=b key=stage/vpc/terraform.tfstate", "default", None,
                "none: stage/vpc (`stage/vpc` is the state path, but its backend's `bucket` is \"a\", not \"b\")"),
            ("path suffix never takes a module in another bucket", &[("stage/vpc", "s3 bucket=a key=?")],
                "s3 bucket=b key=old/stage/vpc/terraform.tfstate", "default", None,
                "none: old/stage/vpc (`stage/vpc` ends the state path, but its backend's `bucket` is \"a\", not \"b\")"),
            ("context never takes a module in another storage account",
                &[("stage/vpc", "azurerm storage_account_name=tenant1 container_name=c key=?")],
                "azurerm storage_account_name=tenant2 container_name=c key=vpc/terraform.tfstate", "default", None,
                "none: vpc (`stage/vpc` is the state path next to this module, but its backend's `storage_account_name` is \"tenant1\", not \"tenant2\")"),
            ("path: an unknown field on one side is no conflict", &[("stage/vpc", "s3 bucket=? key=?")],
                "s3 bucket=b key=stage/vpc/terraform.tfstate", "default", None, "stage/vpc by state path"),
            // Tail.
            ("tail of a literal key", &[("terraform/projects/infra-vpc", "s3 key=?"), ("terraform/projects/app", "s3 key=?")],
                "s3 bucket=b key=govuk/infra-vpc.tfstate", "default", None, "terraform/projects/infra-vpc by tail of the state path"),
            ("tail never skips a segment that names a directory", &[("prod/vpc", "s3 key=?"), ("stage/eks", "s3 key=?")],
                "s3 bucket=b key=stage/vpc/terraform.tfstate", "default", None, "none: stage/vpc"),
            ("tail after an unknown part", &[("terraform/projects/infra-vpc", "s3 key=?"), ("terraform/projects/app", "s3 key=?")],
                "s3 bucket=b key=?", "default", Some("/infra-vpc.tfstate"), "terraform/projects/infra-vpc by tail of the state path"),
            ("two tail candidates", &[("stage/x/vpc", "s3 key=?"), ("prod/y/vpc", "s3 key=?")],
                "s3 bucket=b key=?", "default", Some("/vpc/terraform.tfstate"), "ambiguous by tail of the state path: prod/y/vpc, stage/x/vpc"),
            ("tail inside a segment", &[("stacks/blue-vpc/net", "s3 key=?"), ("stacks/green-eks/net", "s3 key=?")],
                "s3 bucket=b key=?", "default", Some("-vpc/net.tfstate"), "stacks/blue-vpc/net by tail of the state path"),
            ("a tail inside one segment only is no tail", &[("stacks/blue-vpc", "s3 key=?")],
                "s3 bucket=b key=?", "default", Some("-vpc.tfstate"), "none: -vpc.tfstate"),
            ("tail never picks a module whose backend keeps another key", &[("terraform/projects/infra-vpc", "s3 key=infra/vpc.tfstate")],
                "s3 bucket=b key=govuk/infra-vpc.tfstate", "default", None, "none: govuk/infra-vpc"),
            ("tail never picks a module in another bucket", &[("terraform/projects/infra-vpc", "s3 bucket=other key=?")],
                "s3 bucket=b key=?", "default", Some("/infra-vpc.tfstate"), "none: /infra-vpc.tfstate"),
            ("tail miss", &[("terraform/projects/app", "s3 key=?")],
                "s3 bucket=b key=?", "default", Some("/infra-vpc.tfstate"), "none: /infra-vpc.tfstate"),
            // Flat suffix: the reader is stage/app.
            ("flat: known end of a flat name", &[("stage/base", "s3 key=?"), ("stage/app", "s3 key=?")],
                "s3 bucket=b key=?", "default", Some("-base.tfstate"), "stage/base by suffix of a flat state name"),
            ("flat: a whole flat name", &[("stage/base", "s3 key=?"), ("stage/app", "s3 key=?")],
                "s3 bucket=b key=nia-ptl-base.tfstate", "default", None, "stage/base by suffix of a flat state name"),
            ("flat: the longest name wins", &[("stage/lab-results", "s3 key=?"), ("stage/results", "s3 key=?")],
                "s3 bucket=b key=?", "default", Some("-ptl-lab-results.tfstate"), "stage/lab-results by suffix of a flat state name"),
            ("flat: only after a separator", &[("stage/base", "s3 key=?")],
                "s3 bucket=b key=?", "default", Some("-database.tfstate"), "none: -database.tfstate"),
            ("flat: never a module that states its key", &[("stage/base", "s3 key=base/terraform.tfstate")],
                "s3 bucket=b key=?", "default", Some("-base.tfstate"),
                "none: -base.tfstate (`stage/base` ends the name, but its backend states its own key \"base/terraform.tfstate\")"),
            ("flat: never a module of another backend type", &[("stage/base", "gcs bucket=?")],
                "s3 bucket=b key=?", "default", Some("-base.tfstate"),
                "none: -base.tfstate (`stage/base` ends the name, but its backend is `gcs`, not `s3`)"),
            ("flat: never a module in another bucket", &[("stage/base", "s3 bucket=other key=?")],
                "s3 bucket=b key=?", "default", Some("-base.tfstate"),
                "none: -base.tfstate (`stage/base` ends the name, but its backend's `bucket` is \"other\", not \"b\")"),
            ("flat: never a module without a backend", &[("stage/base", "local path=terraform.tfstate")],
                "s3 bucket=b key=?", "default", Some("-base.tfstate"),
                "none: -base.tfstate (`stage/base` ends the name, but keeps its state locally, with no backend block)"),
            ("flat: only next to the reader", &[("prod/base", "s3 key=?")],
                "s3 bucket=b key=?", "default", Some("-base.tfstate"), "none: -base.tfstate"),
        ];
        for (case, modules, spec, ws, tail, want) in cases {
            let index = index(modules);
            let r = reference(spec, ws, *tail);
            let got = describe(&match_reference(&r, "stage/app", 2, &index));
            assert_eq!(got, *want, "{case}");
        }
    }
}
