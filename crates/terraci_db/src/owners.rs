//! State identities and the owners index: which backend state a root module writes,
//! and who could own a state a reference names.
//!
//! Plain values, computed by `terraci_engine::resolve` (spec §4.2) and kept as the project's
//! owners input ([`crate::files::Project::owners`]), so the inputs and the database name
//! the type without importing resolution.

use std::collections::{BTreeMap, BTreeSet};

/// A state location: backend type plus the identity fields of spec §4.2.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StateIdentity {
    pub backend: String,
    /// The identity fields that are known.
    pub fields: Fields,
    /// Some identity field is missing or unknown (e.g. supplied by `-backend-config`).
    pub partial: bool,
    /// Where the backend places non-default workspaces: s3 `workspace_key_prefix`
    /// (default `env:`; workspace W lives at `<prefix>/W/<key>`), remote/cloud
    /// `workspaces.prefix` (workspace W is `<prefix>W`), local `workspace_dir`
    /// (project-relative, default `<root dir>/terraform.tfstate.d`; workspace W lives at
    /// `<workspace_dir>/W/terraform.tfstate`, whatever `path` is).
    pub workspace_prefix: Option<String>,
}

impl StateIdentity {
    /// Whether the two cannot be the same state: the same backend type with an identity
    /// field known on both sides and different.
    pub fn conflicts(&self, other: &StateIdentity) -> bool {
        self.backend == other.backend
            && self
                .fields
                .iter()
                .any(|(k, v)| other.fields.get(k).is_some_and(|o| o != v))
    }

    /// The field that locates the state within its store (s3 `key`, gcs `prefix`,
    /// local `path`, remote `workspace`...), if the backend has one.
    pub fn location_field(&self) -> Option<&'static str> {
        location_field(&self.backend)
    }

    /// The known location (the default workspace's state).
    pub fn location(&self) -> Option<&str> {
        self.fields.get(self.location_field()?).map(String::as_str)
    }
}

/// Known identity fields by name (names from [`terraci_engine::resolve::identity_fields`]), in
/// name order. Every module's identity and every reference's are kept for the whole
/// run, in several places: as `BTreeMap`s they were 30 MB at 10,000 modules.
pub type Fields = crate::sorted::SortedMap<&'static str, String>;

/// The field that locates a state within its store (s3 `key`, gcs `prefix`, local
/// `path`, remote `workspace`...), if the backend has one.
pub fn location_field(backend: &str) -> Option<&'static str> {
    match backend {
        "s3" | "azurerm" | "oss" | "cos" => Some("key"),
        "gcs" => Some("prefix"),
        "local" | "consul" => Some("path"),
        "remote" | "cloud" => Some("workspace"),
        _ => None,
    }
}

/// A module that may own a state, as the index keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Owner {
    pub id: String,
    /// Every identity field is known (the fields are in [`IdentityIndex::identities`]).
    pub complete: bool,
}

/// Who could own a state: root modules by the location their backend gives, and the
/// ids of every root module.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct IdentityIndex {
    /// (backend, location of the default workspace's state) -> owners. For backends
    /// without a location field (http, pg, kubernetes) the location is empty and the
    /// fields say everything.
    pub by_location: BTreeMap<(String, String), Vec<Owner>>,
    /// (backend, workspace prefix, location) -> owners whose other workspaces live
    /// under the prefix (s3 `<prefix>/<ws>/<key>`, remote `<prefix><ws>`, local
    /// `<prefix>/<ws>/terraform.tfstate`, kept with an empty location: it is not used).
    pub by_workspace_prefix: BTreeMap<(String, String, String), Vec<Owner>>,
    pub ids: BTreeSet<String>,
    /// The identities of modules whose backend gives any identity field or leaves one
    /// to `terraform init` (an empty `backend "s3" {}`): what the path-based rules check
    /// a candidate against (see [`StateIdentity::conflicts`]), and the flat-suffix rule
    /// reads the backend type of.
    pub identities: BTreeMap<String, StateIdentity>,
    /// A module's last directory, `_` read as `-` -> the ids ending in it: where a
    /// `terraform_remote_state` block's name hints at the module it means.
    pub by_name: BTreeMap<String, Vec<String>>,
    /// Every segment of every id: a state path segment that no id holds names no
    /// directory (the tail rule may skip it).
    pub segments: BTreeSet<String>,
}

impl IdentityIndex {
    /// The known identity fields of module `id` (none when its backend gives none).
    pub fn fields_of(&self, id: &str) -> Option<&Fields> {
        self.identities.get(id).map(|i| &i.fields)
    }

    pub fn add(&mut self, id: &str, identity: &StateIdentity) {
        self.ids.insert(id.to_owned());
        let name = hint_name(id.rsplit('/').next().unwrap_or(id));
        self.by_name.entry(name).or_default().push(id.to_owned());
        for seg in id.split('/') {
            if !self.segments.contains(seg) {
                self.segments.insert(seg.to_owned());
            }
        }
        if !identity.fields.is_empty() || identity.partial {
            self.identities.insert(id.to_owned(), identity.clone());
        }
        if identity.backend == "local" {
            // Its other workspaces do not depend on `path`, known or not.
            if let Some(prefix) = &identity.workspace_prefix {
                self.by_workspace_prefix
                    .entry(("local".to_owned(), prefix.clone(), String::new()))
                    .or_default()
                    .push(Owner {
                        id: id.to_owned(),
                        complete: !identity.partial,
                    });
            }
        }
        let location_field = identity.location_field();
        let location = match location_field {
            Some(f) => match identity.fields.get(f) {
                Some(l) => l.clone(),
                // remote/cloud `workspaces { prefix = "app-" }`: every `app-*` workspace.
                None if identity.backend == "remote" && identity.workspace_prefix.is_some() => {
                    String::new()
                }
                // Nothing locates the state: no match by identity can find it.
                None => return,
            },
            None if identity.partial => return,
            None => String::new(),
        };
        let owner = Owner {
            id: id.to_owned(),
            complete: !identity.partial,
        };
        if let Some(prefix) = identity
            .workspace_prefix
            .as_ref()
            .filter(|_| identity.backend != "local")
        {
            self.by_workspace_prefix
                .entry((identity.backend.clone(), prefix.clone(), location.clone()))
                .or_default()
                .push(owner.clone());
        }
        if location.is_empty() && location_field.is_some() {
            return;
        }
        self.by_location
            .entry((identity.backend.clone(), location))
            .or_default()
            .push(owner);
    }
}

impl IdentityIndex {
    /// This index and `later`'s, as one index that [`IdentityIndex::add`]ed this one's
    /// modules and then `later`'s would be: owners stay in module order.
    pub fn merged(mut self, mut later: IdentityIndex) -> IdentityIndex {
        fn concat<K: Ord, V>(into: &mut BTreeMap<K, Vec<V>>, from: BTreeMap<K, Vec<V>>) {
            for (key, values) in from {
                into.entry(key).or_default().extend(values);
            }
        }
        // Every module added is in `ids`: an empty index (each of rayon's reductions
        // starts from one) gives way without moving `later`'s entries one by one.
        if self.ids.is_empty() {
            return later;
        }
        concat(&mut self.by_location, later.by_location);
        concat(&mut self.by_workspace_prefix, later.by_workspace_prefix);
        concat(&mut self.by_name, later.by_name);
        self.ids.append(&mut later.ids);
        self.identities.append(&mut later.identities);
        self.segments.append(&mut later.segments);
        self
    }
}

/// How a block name and a directory name are compared for a hint:
/// `infra_google_monitoring` and `infra-google-monitoring` are the same.
pub fn hint_name(name: &str) -> String {
    name.to_ascii_lowercase().replace('_', "-")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity(
        backend: &str,
        fields: &[(&'static str, &str)],
        prefix: Option<&str>,
    ) -> StateIdentity {
        StateIdentity {
            backend: backend.to_owned(),
            fields: Fields::from_sorted(fields.iter().map(|(k, v)| (*k, (*v).to_owned()))),
            partial: fields.is_empty(),
            workspace_prefix: prefix.map(str::to_owned),
        }
    }

    #[test]
    fn partial_indexes_merged_in_order_are_the_index_of_all_modules() {
        // Two modules share a state (both own it, in module order), two share a last
        // directory name, one has no location, one only a workspace prefix.
        let modules = [
            (
                "a/vpc",
                identity("s3", &[("bucket", "b"), ("key", "vpc.tfstate")], None),
            ),
            (
                "b/vpc",
                identity(
                    "s3",
                    &[("bucket", "b"), ("key", "vpc.tfstate")],
                    Some("env:"),
                ),
            ),
            (
                "b/eks",
                identity("gcs", &[("bucket", "g"), ("prefix", "eks")], None),
            ),
            ("c/app_x", identity("s3", &[], None)),
            (
                "c/vpc",
                identity("remote", &[("organization", "o")], Some("app-")),
            ),
            ("d/pg", identity("pg", &[("conn_str", "x")], None)),
        ];
        let mut whole = IdentityIndex::default();
        for (id, identity) in &modules {
            whole.add(id, identity);
        }
        assert_eq!(
            whole.by_location[&("s3".to_owned(), "vpc.tfstate".to_owned())]
                .iter()
                .map(|o| o.id.as_str())
                .collect::<Vec<_>>(),
            ["a/vpc", "b/vpc"]
        );
        for split in 0..=modules.len() {
            let mut parts = [IdentityIndex::default(), IdentityIndex::default()];
            for (i, (id, identity)) in modules.iter().enumerate() {
                parts[usize::from(i >= split)].add(id, identity);
            }
            let [first, later] = parts;
            assert_eq!(first.merged(later), whole, "split before module {split}");
        }
    }

    #[test]
    fn local_workspaces_are_kept_by_workspace_dir_whatever_the_path() {
        let mut index = IdentityIndex::default();
        let net = identity(
            "local",
            &[("path", "ws/net/state/net.tfstate")],
            Some("ws/net/terraform.tfstate.d"),
        );
        let no_path = identity("local", &[], Some("ws/other/wsd"));
        index.add("ws/net", &net);
        index.add("ws/other", &no_path);
        let owners = |prefix: &str| -> Vec<&str> {
            index.by_workspace_prefix[&("local".to_owned(), prefix.to_owned(), String::new())]
                .iter()
                .map(|o| o.id.as_str())
                .collect()
        };
        assert_eq!(owners("ws/net/terraform.tfstate.d"), ["ws/net"]);
        assert_eq!(owners("ws/other/wsd"), ["ws/other"]);
        assert_eq!(index.by_workspace_prefix.len(), 2);
        assert_eq!(
            index.by_location.keys().collect::<Vec<_>>(),
            [&("local".to_owned(), "ws/net/state/net.tfstate".to_owned())]
        );
    }
}
