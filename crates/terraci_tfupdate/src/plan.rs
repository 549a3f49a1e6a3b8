//! Which version each dependency moves to, and why not further.
//!
//! Input: the [`ModuleScan`]s, a [`Registry`] and the [`Settings`]. Output: the
//! [`UpdateResult`] (one row per provider of each module and per registry module call),
//! TerraCi's report shape. A provider's candidate must satisfy every constraint that
//! reaches it from a local module the module calls (those are not rewritten: other
//! modules may call them too); when the newest candidate within the bump is ruled out,
//! the row names the constraint (`file:line`) that rules it out.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::registry::{ProviderRelease, Registry};
use crate::scan::{ModuleScan, ProviderConstraint};
use crate::version::{Constraints, Op, Version};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Bump {
    Patch,
    Minor,
    Major,
}

impl Bump {
    pub fn parse(text: &str) -> Option<Bump> {
        match text {
            "patch" => Some(Bump::Patch),
            "minor" => Some(Bump::Minor),
            "major" => Some(Bump::Major),
            _ => None,
        }
    }

    fn allows(self, current: &Version, candidate: &Version) -> bool {
        match self {
            Bump::Patch => (candidate.major, candidate.minor) == (current.major, current.minor),
            Bump::Minor => candidate.major == current.major,
            Bump::Major => true,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    All,
    Modules,
    Providers,
}

impl Target {
    pub fn parse(text: &str) -> Option<Target> {
        match text {
            "all" => Some(Target::All),
            "modules" => Some(Target::Modules),
            "providers" => Some(Target::Providers),
            _ => None,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Settings {
    pub target: Target,
    pub bump: Bump,
    pub pin: bool,
    /// Provider sources (`hashicorp/aws`, or the full address) and module sources.
    pub ignore: Vec<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    #[default]
    UpToDate,
    UpdateAvailable,
    Applied,
    Skipped,
    Error,
}

impl Status {
    pub fn label(self) -> &'static str {
        match self {
            Status::UpToDate => "up to date",
            Status::UpdateAvailable => "update available",
            Status::Applied => "applied",
            Status::Skipped => "skipped",
            Status::Error => "error",
        }
    }
}

/// What became of one dependency: TerraCi's fields, shared by providers and modules.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Outcome {
    pub current_version: String,
    pub latest_version: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub bumped_version: String,
    pub status: Status,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub issue: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub file: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProviderDependency {
    pub module_path: String,
    pub provider_name: String,
    pub provider_source: String,
    pub constraint: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProviderUpdate {
    pub dependency: ProviderDependency,
    #[serde(flatten)]
    pub outcome: Outcome,
    /// The full address, for the lock file.
    #[serde(skip)]
    pub address: String,
    /// Every constraint that reaches the provider (own ones as rewritten).
    #[serde(skip)]
    pub constraints: Vec<ProviderConstraint>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModuleDependency {
    pub module_path: String,
    pub call_name: String,
    pub source: String,
    pub constraint: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModuleUpdate {
    pub dependency: ModuleDependency,
    #[serde(flatten)]
    pub outcome: Outcome,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub total_checked: usize,
    pub updates_available: usize,
    pub updates_applied: usize,
    pub errors: usize,
    pub skipped: usize,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct UpdateResult {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub modules: Vec<ModuleUpdate>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub providers: Vec<ProviderUpdate>,
    pub summary: Summary,
    /// Problems not tied to one dependency (a file that does not parse).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
}

impl UpdateResult {
    pub fn summarize(&mut self) {
        let statuses = self
            .providers
            .iter()
            .map(|p| p.outcome.status)
            .chain(self.modules.iter().map(|m| m.outcome.status));
        let mut summary = Summary {
            errors: self.problems.len(),
            ..Summary::default()
        };
        for status in statuses {
            summary.total_checked += 1;
            match status {
                Status::UpdateAvailable => summary.updates_available += 1,
                Status::Applied => summary.updates_applied += 1,
                Status::Error => summary.errors += 1,
                Status::Skipped => summary.skipped += 1,
                Status::UpToDate => {}
            }
        }
        self.summary = summary;
    }
}

/// The constraint text an own constraint gets for `to`: pinned, or each clause that
/// names a lower bound (`~>`, `>=`, `=`) moved to `to` with its operator and precision.
/// `None` when the constraint cannot be moved that way and does not allow `to`.
pub fn bumped_constraint(c: &Constraints, to: &Version, pin: bool) -> Option<String> {
    if pin {
        return Some(to.to_string());
    }
    let mut moved = c.clone();
    for clause in &mut moved.clauses {
        if matches!(clause.op, Op::Pessimistic | Op::Ge | Op::Eq) {
            *clause = clause.with_version(to);
        }
    }
    moved.allows(to).then(|| moved.to_string())
}

/// Every module's rows.
pub fn plan(scans: &[ModuleScan], registry: &dyn Registry, settings: &Settings) -> UpdateResult {
    let mut result = UpdateResult::default();
    let mut provider_cache: BTreeMap<String, Result<Vec<ProviderRelease>, String>> =
        BTreeMap::new();
    let mut module_cache: BTreeMap<(String, String), Result<Vec<Version>, String>> =
        BTreeMap::new();
    let ignored = |names: &[&str]| names.iter().any(|n| settings.ignore.iter().any(|i| i == n));
    for scan in scans {
        result.problems.extend(scan.problems.iter().cloned());
        if settings.target != Target::Modules {
            for need in scan.providers.values() {
                if ignored(&[&need.source, &need.address]) {
                    continue;
                }
                let releases = provider_cache
                    .entry(need.address.clone())
                    .or_insert_with(|| {
                        registry
                            .provider_versions(&need.address)
                            .map_err(|e| e.to_string())
                    });
                let locked = scan
                    .lock
                    .as_ref()
                    .and_then(|l| l.providers.get(&need.address))
                    .and_then(|p| Version::parse(&p.version));
                result
                    .providers
                    .push(provider_row(scan, need, releases, locked, settings));
            }
        }
        if settings.target != Target::Providers {
            for call in &scan.modules {
                if ignored(&[&call.source]) {
                    continue;
                }
                let versions = module_cache
                    .entry((call.host.clone(), call.path.clone()))
                    .or_insert_with(|| {
                        registry
                            .module_versions(&call.host, &call.path)
                            .map_err(|e| e.to_string())
                    });
                result
                    .modules
                    .push(module_row(scan, call, versions, settings));
            }
        }
    }
    result.summarize();
    result
}

/// The newest release (no pre-release), as text; empty when there is none.
fn newest_stable(versions: &[Version]) -> String {
    versions
        .iter()
        .filter(|v| !v.is_prerelease())
        .max()
        .map(ToString::to_string)
        .unwrap_or_default()
}

/// The newest stable version of `versions` above `current` within the bump.
fn candidates<'v>(versions: &'v [Version], current: &Version, bump: Bump) -> Vec<&'v Version> {
    let mut out: Vec<&Version> = versions
        .iter()
        .filter(|v| !v.is_prerelease() && *v > current && bump.allows(current, v))
        .collect();
    out.sort_by(|a, b| b.cmp(a));
    out
}

fn provider_row(
    scan: &ModuleScan,
    need: &crate::scan::ProviderNeed,
    releases: &Result<Vec<ProviderRelease>, String>,
    locked: Option<Version>,
    settings: &Settings,
) -> ProviderUpdate {
    let own: Vec<&ProviderConstraint> = need.constraints.iter().filter(|c| c.own).collect();
    let mut row = ProviderUpdate {
        dependency: ProviderDependency {
            module_path: scan.id.clone(),
            provider_name: need.source.rsplit('/').next().unwrap_or("").to_owned(),
            provider_source: need.source.clone(),
            constraint: own
                .iter()
                .map(|c| c.text.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        },
        outcome: Outcome {
            file: own.first().map(|c| c.site.file.clone()).unwrap_or_default(),
            ..Outcome::default()
        },
        address: need.address.clone(),
        constraints: need.constraints.clone(),
    };
    let versions: Vec<Version> = match releases {
        Ok(r) => r.iter().map(|r| r.version.clone()).collect(),
        Err(e) => {
            row.outcome.status = Status::Error;
            row.outcome.issue = e.clone();
            return row;
        }
    };
    let all_allow = |v: &Version| need.constraints.iter().all(|c| c.constraints.allows(v));
    row.outcome.latest_version = newest_stable(&versions);
    let current = locked.or_else(|| {
        versions
            .iter()
            .filter(|v| !v.is_prerelease() && all_allow(v))
            .max()
            .cloned()
    });
    let Some(current) = current else {
        row.outcome.status = Status::Error;
        row.outcome.issue = "no version the registry lists satisfies the constraints".to_owned();
        return row;
    };
    row.outcome.current_version = current.to_string();
    let list = candidates(&versions, &current, settings.bump);
    // Why a candidate cannot be taken: a constraint of a called module, or an own one
    // that cannot be moved to it.
    let refusal = |v: &Version| -> Option<String> {
        for c in &need.constraints {
            let refuses = if c.own {
                bumped_constraint(&c.constraints, v, settings.pin).is_none()
            } else {
                !c.constraints.allows(v)
            };
            if refuses {
                return Some(format!("{v} is ruled out by {:?} ({})", c.text, c.site));
            }
        }
        None
    };
    let chosen = list.iter().find(|v| refusal(v).is_none());
    let newest_refused = list.first().and_then(|v| refusal(v));
    match chosen {
        Some(v) => {
            row.outcome.bumped_version = v.to_string();
            row.outcome.status = Status::UpdateAvailable;
            if let Some(why) = newest_refused {
                row.outcome.issue = why;
            }
            for c in row.constraints.iter_mut().filter(|c| c.own) {
                if let Some(text) = bumped_constraint(&c.constraints, v, settings.pin) {
                    if let Ok(parsed) = Constraints::parse(&text) {
                        c.text = text;
                        c.constraints = parsed;
                    }
                }
            }
        }
        None => {
            if let Some(why) = newest_refused {
                row.outcome.status = Status::Skipped;
                row.outcome.issue = why;
            }
        }
    }
    row
}

fn module_row(
    scan: &ModuleScan,
    call: &crate::scan::ModuleCall,
    versions: &Result<Vec<Version>, String>,
    settings: &Settings,
) -> ModuleUpdate {
    let mut row = ModuleUpdate {
        dependency: ModuleDependency {
            module_path: scan.id.clone(),
            call_name: call.name.clone(),
            source: call.source.clone(),
            constraint: call
                .constraint
                .as_ref()
                .map(|(t, _)| t.clone())
                .unwrap_or_default(),
        },
        outcome: Outcome {
            file: call
                .site
                .as_ref()
                .map(|s| s.file.clone())
                .unwrap_or_default(),
            ..Outcome::default()
        },
    };
    let versions = match versions {
        Ok(v) => v,
        Err(e) => {
            row.outcome.status = Status::Error;
            row.outcome.issue = e.clone();
            return row;
        }
    };
    row.outcome.latest_version = newest_stable(versions);
    let Some((_, constraint)) = &call.constraint else {
        row.outcome.status = Status::Skipped;
        row.outcome.issue = "the module call has no version".to_owned();
        return row;
    };
    let Some(current) = versions
        .iter()
        .filter(|v| !v.is_prerelease() && constraint.allows(v))
        .max()
    else {
        row.outcome.status = Status::Error;
        row.outcome.issue = "no version the registry lists satisfies the constraint".to_owned();
        return row;
    };
    row.outcome.current_version = current.to_string();
    let list = candidates(versions, current, settings.bump);
    if let Some(v) = list
        .iter()
        .find(|v| bumped_constraint(constraint, v, settings.pin).is_some())
    {
        row.outcome.bumped_version = v.to_string();
        row.outcome.status = Status::UpdateAvailable;
    } else if let (Some(v), Some(site)) = (list.first(), &call.site) {
        row.outcome.status = Status::Skipped;
        row.outcome.issue = format!(
            "{v} is ruled out by {:?} ({site})",
            call.constraint.as_ref().map_or("", |(t, _)| t.as_str())
        );
    }
    row
}

#[cfg(test)]
mod tests {
    use camino::Utf8Path;
    use terraci_db::system::{MemorySystem, ReadPolicy, DEFAULT_MAX_FILE_SIZE};

    use super::*;
    use crate::registry::{Package, RegistryError};
    use crate::scan::scan_modules;

    /// Versions from memory; no packages.
    struct Listed(&'static [&'static str]);

    impl Registry for Listed {
        fn provider_versions(&self, _: &str) -> Result<Vec<ProviderRelease>, RegistryError> {
            Ok(self
                .0
                .iter()
                .map(|v| ProviderRelease {
                    version: Version::parse(v).expect("version"),
                    platforms: vec![],
                })
                .collect())
        }
        fn module_versions(&self, _: &str, _: &str) -> Result<Vec<Version>, RegistryError> {
            Ok(self.0.iter().filter_map(|v| Version::parse(v)).collect())
        }
        fn provider_package(
            &self,
            _: &str,
            _: &Version,
            _: &str,
        ) -> Result<Package, RegistryError> {
            Err(RegistryError("no packages here".into()))
        }
    }

    const LISTED: &[&str] = &[
        "5.0.0",
        "5.0.4",
        "5.3.1",
        "5.80.0",
        "5.80.1",
        "6.0.0",
        "6.1.0-beta1",
    ];

    /// The row of a module whose only file has `version = "<constraint>"` for aws,
    /// locked at `locked`.
    fn row(constraint: &str, locked: Option<&str>, bump: Bump, pin: bool) -> ProviderUpdate {
        let system = MemorySystem::new();
        system.write_file(
            "/p/m/main.tf",
            format!("terraform {{\n  required_providers {{\n    aws = {{\n      source  = \"hashicorp/aws\"\n      version = \"{constraint}\"\n    }}\n  }}\n}}\n"),
        );
        if let Some(v) = locked {
            system.write_file(
                "/p/m/.terraform.lock.hcl",
                format!("provider \"registry.terraform.io/hashicorp/aws\" {{\n  version = \"{v}\"\n  hashes = [\n    \"h1:x\",\n  ]\n}}\n"),
            );
        }
        let policy = ReadPolicy::new(&system, Utf8Path::new("/p"), DEFAULT_MAX_FILE_SIZE);
        let scans = scan_modules(&system, &policy, &["m".to_owned()]);
        assert!(scans[0].problems.is_empty(), "{:?}", scans[0].problems);
        let settings = Settings {
            target: Target::All,
            bump,
            pin,
            ignore: vec![],
        };
        let mut result = plan(&scans, &Listed(LISTED), &settings);
        result.providers.remove(0)
    }

    fn moved(r: &ProviderUpdate) -> (String, String, Status, String) {
        (
            r.outcome.current_version.clone(),
            r.outcome.bumped_version.clone(),
            r.outcome.status,
            r.constraints[0].text.clone(),
        )
    }

    #[test]
    fn the_bump_level_bounds_the_version_and_the_operator_is_kept() {
        let s =
            |a: &str, b: &str, st: Status, c: &str| (a.to_owned(), b.to_owned(), st, c.to_owned());
        use Status::*;
        assert_eq!(
            moved(&row("~> 5.0", Some("5.0.0"), Bump::Patch, false)),
            s("5.0.0", "5.0.4", UpdateAvailable, "~> 5.0")
        );
        assert_eq!(
            moved(&row("~> 5.0", Some("5.0.0"), Bump::Minor, false)),
            s("5.0.0", "5.80.1", UpdateAvailable, "~> 5.80")
        );
        // `~> 5.0` cannot be moved to 6.x keeping its meaning: it becomes `~> 6.0`.
        assert_eq!(
            moved(&row("~> 5.0", Some("5.0.0"), Bump::Major, false)),
            s("5.0.0", "6.0.0", UpdateAvailable, "~> 6.0")
        );
        assert_eq!(
            moved(&row("~> 5.0.0", Some("5.0.0"), Bump::Minor, true)),
            s("5.0.0", "5.80.1", UpdateAvailable, "5.80.1")
        );
        // Without a lock, the newest version the constraint allows is the current one.
        assert_eq!(
            moved(&row(">= 5.3, < 5.80", None, Bump::Minor, false)),
            s("5.3.1", "", Skipped, ">= 5.3, < 5.80")
        );
        assert_eq!(
            moved(&row("5.80.1", Some("5.80.1"), Bump::Major, false)),
            s("5.80.1", "6.0.0", UpdateAvailable, "6.0.0")
        );
        assert_eq!(
            moved(&row("~> 6.0", Some("6.0.0"), Bump::Major, false)),
            s("6.0.0", "", UpToDate, "~> 6.0")
        );
    }

    #[test]
    fn an_own_upper_bound_that_rules_the_version_out_is_named() {
        let r = row(">= 5.0, < 5.80", Some("5.0.0"), Bump::Minor, false);
        assert_eq!(r.outcome.bumped_version, "5.3.1");
        assert_eq!(
            r.outcome.issue,
            "5.80.1 is ruled out by \">= 5.0, < 5.80\" (m/main.tf:5)"
        );
        assert_eq!(r.constraints[0].text, ">= 5.3, < 5.80");
    }
}
