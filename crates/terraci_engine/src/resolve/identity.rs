//! State identity (spec §4.2): where a module's own backend keeps its state, and the
//! index of who owns which state.
//!
//! Input: the module's backend fact, evaluated in its scope. Output: [`StateIdentity`]
//! per module, [`IdentityIndex`] per project. Invalidated by the backend's expressions
//! and what they read.

use crate::eval::Object;
use std::sync::Arc;

use camino::Utf8Path;

use super::scope::{module_dir, module_scope, TrackedFilesystem};
use crate::chunk::{chunk_modules, chunks, ModuleChunk};
use crate::eval::{evaluate, EvalContext, Value};
use crate::facts::module_facts;
use terraci_db::db::Db;
use terraci_db::files::{Module, Project};
use terraci_db::owners::location_field;
use terraci_db::owners::{Fields, IdentityIndex, StateIdentity};
use terraci_db::system::normalize;

/// Each backend type and its identity fields.
const IDENTITY_FIELDS: &[(&str, &[&str])] = &[
    ("s3", &["bucket", "key"]),
    ("gcs", &["bucket", "prefix"]),
    (
        "azurerm",
        &["storage_account_name", "container_name", "key"],
    ),
    ("consul", &["path"]),
    ("http", &["address"]),
    ("local", &["path"]),
    ("pg", &["conn_str", "schema_name"]),
    ("kubernetes", &["secret_suffix", "namespace"]),
    ("remote", &["organization", "workspace"]),
    ("cloud", &["organization", "workspace"]),
    ("oss", &["bucket", "prefix", "key"]),
    ("cos", &["bucket", "prefix", "key"]),
];

/// The identity fields of each backend type.
pub fn identity_fields(backend: &str) -> &'static [&'static str] {
    IDENTITY_FIELDS
        .iter()
        .find(|(b, _)| *b == backend)
        .map_or(&[], |(_, fields)| fields)
}

/// The static name of an identity field spelled `name` (a summary read back from the
/// cache names its fields as strings).
pub(super) fn field_name(name: &str) -> Option<&'static str> {
    IDENTITY_FIELDS
        .iter()
        .flat_map(|(_, fields)| fields.iter())
        .copied()
        .find(|f| *f == name)
}

/// The field that holds the state path used by the path and context rules.
pub(super) fn path_field(backend: Option<&str>, config: &Object) -> Option<&'static str> {
    match backend {
        Some(backend) => location_field(backend),
        None => ["key", "prefix", "path"]
            .into_iter()
            .find(|f| config.contains_key(*f)),
    }
}

/// Flattens a backend/config object to the string fields the rules use. `remote`/`cloud`
/// keep `workspaces.name` as `workspace`.
pub(super) fn flatten_config(backend: &str, value: &Object) -> Object {
    let mut out = value.clone();
    if backend == "remote" || backend == "cloud" {
        if let Some(Value::Map(ws)) = value.get("workspaces") {
            if let Some(name) = ws.get("name") {
                out.insert("workspace".into(), name.clone());
            }
        }
    }
    if backend == "gcs" {
        if let Some(Value::String(p)) = out.get("prefix").cloned() {
            out.insert(
                "prefix".into(),
                Value::String(p.trim_end_matches('/').to_owned()),
            );
        }
    }
    out
}

/// `cloud` is the `remote` backend under another name (a `cloud {}` block is read as
/// `remote` too), so both sides of a match use one spelling.
pub(super) fn canonical_backend(backend: &str) -> &str {
    match backend {
        "cloud" => "remote",
        other => other,
    }
}

/// Fills the identity fields a backend defaults when they are omitted, so that a module
/// and a reference that both leave one out still agree (values from each backend's docs).
pub(super) fn with_defaults(backend: &str, mut config: Object) -> Object {
    let defaults: &[(&str, &str)] = match backend {
        "gcs" => &[("prefix", "")],
        "pg" => &[("schema_name", "terraform_remote_state")],
        "kubernetes" => &[("namespace", "default")],
        "local" => &[("path", "terraform.tfstate")],
        "oss" | "cos" => &[("prefix", "env:"), ("key", "terraform.tfstate")],
        _ => &[],
    };
    for (field, value) in defaults {
        if !config.contains_key(*field) {
            config.insert((*field).to_owned(), Value::String((*value).to_owned()));
        }
    }
    config
}

/// The identity of the state `backend` with `config` keeps. `working_dir` is where
/// Terraform runs, the root module's directory, which relative local paths are read
/// against, even when the block is in a called module (Terraform 1.11.4, see
/// `fixtures/rules/local-backend`).
pub(super) fn identity_of(
    backend: &str,
    config: &Object,
    working_dir: &Utf8Path,
    root: &Utf8Path,
) -> StateIdentity {
    let config = flatten_config(backend, config);
    let mut fields = Fields::default();
    let mut partial = false;
    for &f in identity_fields(backend) {
        match config.get(f) {
            Some(Value::String(s)) => {
                let v = if backend == "local" && f == "path" {
                    relative_to_root(&normalize(&working_dir.join(s)), root)
                } else {
                    s.clone()
                };
                fields.insert(f, v);
            }
            Some(Value::Number(n)) => {
                fields.insert(f, n.to_string());
            }
            _ => partial = true,
        }
    }
    if identity_fields(backend).is_empty() {
        partial = true;
    }
    let string = |v: Option<&Value>| match v {
        Some(Value::String(s)) => Some(s.clone()),
        _ => None,
    };
    let workspace_prefix = match backend {
        "s3" => {
            Some(string(config.get("workspace_key_prefix")).unwrap_or_else(|| "env:".to_owned()))
        }
        "remote" => match config.get("workspaces") {
            Some(Value::Map(ws)) => string(ws.get("prefix")),
            _ => None,
        },
        // Workspace W other than `default` is `<workspace_dir>/W/terraform.tfstate`,
        // whatever `path` says (see `local_workspace_state`).
        "local" => match config.get("workspace_dir") {
            None => Some("terraform.tfstate.d"),
            Some(Value::String(d)) => Some(d.as_str()),
            Some(_) => None,
        }
        .map(|d| relative_to_root(&normalize(&working_dir.join(d)), root)),
        _ => None,
    };
    // Kept for the whole run, in several places: no growth slack.
    fields.shrink_to_fit();
    StateIdentity {
        backend: backend.to_owned(),
        fields,
        partial,
        workspace_prefix,
    }
}

fn relative_to_root(path: &Utf8Path, root: &Utf8Path) -> String {
    match path.strip_prefix(root) {
        Ok(rel) => rel.as_str().to_owned(),
        Err(_) => path.as_str().to_owned(),
    }
}

/// The state identity of a module's own backend (spec §4.2). Not memoized: it is kept
/// in the module's summary ([`super::module_summary`]), which everything reads.
pub fn state_identity(db: &dyn Db, project: Project, module: Module) -> StateIdentity {
    let facts = module_facts(db, module);
    let dir = module_dir(db, project, module);
    let root = project.root(db);
    let Some(backend) = &facts.backend else {
        return identity_of(
            "local",
            &Object::from([("path".to_owned(), Value::String("terraform.tfstate".into()))]),
            &dir,
            root,
        );
    };
    let scope = module_scope(db, project, module);
    let ctx = EvalContext {
        scope: &scope.scope,
        extra: &[],
        module_dir: dir.clone(),
        host: &TrackedFilesystem {
            db,
            root: project.root(db),
        },
    };
    let mut config = match evaluate(&backend.config.expr, &ctx) {
        Ok(Value::Map(m)) => m,
        _ => Object::new(),
    };
    // `-backend-config` values are merged over the block, as `terraform init` does.
    config.extend(scope.backend_config.clone());
    let kind = canonical_backend(&backend.kind);
    identity_of(
        kind,
        &with_defaults(kind, flatten_config(kind, &config)),
        &dir,
        root,
    )
}

/// Shared ([`Arc`]) so that [`sync_owners`] can tell an index it has already copied
/// into the owners input by its address.
#[salsa::tracked(returns(ref))]
pub fn identity_index(db: &dyn Db, project: Project) -> Arc<IdentityIndex> {
    use rayon::prelude::*;
    // By chunks (see `crate::chunk`): an edit that keeps every identity checks one chunk.
    let identities: Vec<&[(String, StateIdentity)]> = chunks(db, project)
        .into_iter()
        .map(|chunk| chunk_identities(db, chunk).as_slice())
        .collect();
    // Built on every core from plain values (no database access there): runs of chunks
    // into partial indexes, merged in module order.
    let index = identities
        .par_iter()
        .with_min_len(8)
        .fold(IdentityIndex::default, |mut index, chunk| {
            for (id, identity) in *chunk {
                index.add(id, identity);
            }
            index
        })
        .reduce(IdentityIndex::default, IdentityIndex::merged);
    Arc::new(index)
}

/// The root modules of a chunk: (id, state identity), in module order.
#[salsa::tracked(returns(ref))]
pub fn chunk_identities<'db>(
    db: &'db dyn Db,
    chunk: ModuleChunk<'db>,
) -> Vec<(String, StateIdentity)> {
    if let Some(heads) = super::summary::held_heads(db, chunk) {
        return heads
            .iter()
            .filter_map(|(m, head)| Some((m.info(db).id.clone(), head.root.as_ref()?.0.clone())))
            .collect();
    }
    let project = chunk.project(db);
    chunk_modules(db, chunk)
        .iter()
        .filter(|m| m.info(db).is_root())
        .map(|&m| {
            let identity = &super::module_summary(db, project, m)
                .root
                .as_ref()
                .expect("a root module has a root summary")
                .identity;
            (m.info(db).id.clone(), identity.clone())
        })
        .collect()
}

/// Copies [`identity_index`] into the project's owners input when it differs; whether
/// it did. Called after every change of inputs, before anything reads a resolution.
///
/// The input is a firewall: [`identity_index`] reads every module's state identity, so
/// it is as volatile as the most recently edited file. A query reading it directly would
/// be as volatile too, and salsa would verify all of them, one per module, after any
/// edit. The input is set (at medium durability) only when the index really changed.
pub fn sync_owners(db: &mut terraci_db::db::Database, project: Project) -> bool {
    use salsa::Setter;
    let index = identity_index(db, project);
    let owners = project.owners(db).as_ref();
    // An index that salsa recomputed but found equal (backdated) is a new allocation with
    // the old contents: compared once, then known by its address.
    let checked = db.owners_checked.as_ref();
    if owners.is_some_and(|o| Arc::ptr_eq(o, index))
        || checked.is_some_and(|c| Arc::ptr_eq(c, index))
    {
        return false;
    }
    let index = index.clone();
    if owners.is_some_and(|o| *o == index) {
        db.owners_checked = Some(index);
        return false;
    }
    project
        .set_owners(db)
        .with_durability(salsa::Durability::MEDIUM)
        .to(Some(index));
    true
}

/// The owners index that matching reads: the project's owners input, or the query
/// itself while the input was never set (a load whose every resolution came from the
/// summary cache does not build the index; see [`terraci::parallel::warm_up`]).
pub fn owners_index(db: &dyn Db, project: Project) -> &IdentityIndex {
    match project.owners(db) {
        Some(index) => index,
        None => identity_index(db, project),
    }
}

/// A hash of a chunk's root modules' ids and state identities, in module order: what
/// the owners index is made of ([`super::summary`] keys resolutions on it).
#[salsa::tracked]
pub fn chunk_identities_hash<'db>(db: &'db dyn Db, chunk: ModuleChunk<'db>) -> u64 {
    use std::hash::{Hash as _, Hasher as _};
    let mut h = terraci_db::files::hasher();
    chunk_identities(db, chunk).hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local(working_dir: &str, pairs: &[(&str, Value)]) -> StateIdentity {
        let config: Object = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect();
        identity_of(
            "local",
            &with_defaults("local", config),
            Utf8Path::new(working_dir),
            Utf8Path::new("/repo"),
        )
    }

    fn s(v: &str) -> Value {
        Value::String(v.to_owned())
    }

    #[test]
    fn a_local_state_is_placed_from_the_directory_terraform_runs_in() {
        // `path` and `workspace_dir` are relative to the root module's directory
        // (terraform 1.11.4; `fixtures/rules/local-backend`).
        let i = local("/repo/live/svc", &[("path", s("../net/terraform.tfstate"))]);
        assert_eq!(i.location(), Some("live/net/terraform.tfstate"));
        assert!(!i.partial);
        assert_eq!(
            i.workspace_prefix.as_deref(),
            Some("live/svc/terraform.tfstate.d")
        );
        let i = local("/repo/ws/app", &[("workspace_dir", s("../net2/wsd"))]);
        assert_eq!(i.location(), Some("ws/app/terraform.tfstate"));
        assert_eq!(i.workspace_prefix.as_deref(), Some("ws/net2/wsd"));
        // A root at the project's top, and a workspace_dir that is not known.
        let i = local("/repo", &[]);
        assert_eq!(i.workspace_prefix.as_deref(), Some("terraform.tfstate.d"));
        let i = local("/repo/a", &[("workspace_dir", Value::unknown("`var.d`"))]);
        assert_eq!(i.workspace_prefix, None);
    }
}
