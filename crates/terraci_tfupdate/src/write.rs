//! `--write`: the new constraints into the `.tf` files and the lock files synced.
//!
//! Input: the [`UpdateResult`] of [`crate::plan::plan`], the scans, the registry. Output:
//! the files rewritten through `System`, each edit only the bytes of a version string
//! (located by hcl-edit's spans, so comments, spacing and order stay as they were), and
//! each module's `.terraform.lock.hcl` with the new versions, their constraints and
//! hashes: `zh:` for every package SHA256SUMS lists, `h1:` for every platform asked for,
//! the hashes already recorded for a version that did not change kept. The rows written
//! are marked applied; a row whose files could not be written is marked an error.

use std::collections::{BTreeMap, BTreeSet};

use terraci_db::system::{ReadPolicy, System};

use crate::archive::h1_hash;
use crate::lockfile::{constraints_text, LockFile, LockedProvider};
use crate::plan::{bumped_constraint, Settings, Status, UpdateResult};
use crate::registry::Registry;
use crate::scan::ModuleScan;
use crate::version::{Constraints, Version};

/// One replacement: the byte range of a version string, what it must hold, and the new text.
struct Edit {
    range: std::ops::Range<usize>,
    old: String,
    new: String,
}

/// Applies the result's updates; `platforms` are the lock platforms asked for (empty:
/// every platform the registry lists for the version).
pub fn apply(
    system: &dyn System,
    policy: &ReadPolicy,
    scans: &[ModuleScan],
    result: &mut UpdateResult,
    registry: &dyn Registry,
    settings: &Settings,
    platforms: &[String],
) {
    let root = &policy.root;
    // The lock files first: they need the packages, and a module whose packages cannot
    // be had keeps its `.tf` files as they are (a constraint the lock does not follow
    // would fail the next `terraform init`).
    let mut failed: BTreeMap<String, String> = BTreeMap::new();
    let mut locks: BTreeMap<String, LockFile> = BTreeMap::new();
    for scan in scans {
        match synced_lock(scan, result, registry, platforms) {
            Ok(Some(lock)) => {
                locks.insert(scan.id.clone(), lock);
            }
            Ok(None) => {}
            Err(why) => {
                // Said on the rows that move, or else on its own.
                let moving = result.providers.iter().any(|r| {
                    r.dependency.module_path == scan.id
                        && r.outcome.status == Status::UpdateAvailable
                });
                if !moving {
                    result
                        .problems
                        .push(format!("{}: the lock file was not synced: {why}", scan.id));
                }
                failed.insert(scan.id.clone(), why);
            }
        }
    }
    let mut edits: BTreeMap<String, Vec<(String, Edit)>> = BTreeMap::new();
    for row in &result.providers {
        if row.outcome.status != Status::UpdateAvailable
            || failed.contains_key(&row.dependency.module_path)
        {
            continue;
        }
        let scan = scans.iter().find(|s| s.id == row.dependency.module_path);
        let original = scan.and_then(|s| s.providers.get(&row.address));
        for (new, old) in row
            .constraints
            .iter()
            .zip(original.map(|o| o.constraints.as_slice()).unwrap_or(&[]))
        {
            if new.own && new.text != old.text {
                edits.entry(old.site.file.clone()).or_default().push((
                    row.dependency.module_path.clone(),
                    Edit {
                        range: old.site.range.clone(),
                        old: old.text.clone(),
                        new: new.text.clone(),
                    },
                ));
            }
        }
    }
    for row in &result.modules {
        if row.outcome.status != Status::UpdateAvailable
            || failed.contains_key(&row.dependency.module_path)
        {
            continue;
        }
        let Some(call) = scans
            .iter()
            .find(|s| s.id == row.dependency.module_path)
            .and_then(|s| {
                s.modules
                    .iter()
                    .find(|c| c.name == row.dependency.call_name)
            })
        else {
            continue;
        };
        let (Some((old, constraint)), Some(site), Some(to)) = (
            &call.constraint,
            &call.site,
            Version::parse(&row.outcome.bumped_version),
        ) else {
            continue;
        };
        if let Some(new) = bumped_constraint(constraint, &to, settings.pin) {
            edits.entry(site.file.clone()).or_default().push((
                row.dependency.module_path.clone(),
                Edit {
                    range: site.range.clone(),
                    old: old.clone(),
                    new,
                },
            ));
        }
    }
    for (file, list) in edits {
        let modules: BTreeSet<String> = list.iter().map(|(m, _)| m.clone()).collect();
        let mut list: Vec<Edit> = list.into_iter().map(|(_, e)| e).collect();
        if let Err(why) = edit_file(system, policy, &file, &mut list) {
            for module in modules {
                failed.insert(module, why.clone());
            }
        }
    }
    for (id, lock) in locks {
        if failed.contains_key(&id) {
            continue;
        }
        let shown = if id.is_empty() {
            String::new()
        } else {
            format!("{id}/")
        };
        let path = root.join(&id).join(".terraform.lock.hcl");
        if let Err(e) = system.replace_beneath(root, &path, &[lock.render().as_bytes()]) {
            failed.insert(id, format!("cannot write {shown}.terraform.lock.hcl: {e}"));
        }
    }
    let outcome = |module: &str, status: &mut Status, issue: &mut String| {
        if *status != Status::UpdateAvailable {
            return;
        }
        match failed.get(module) {
            Some(why) => {
                *status = Status::Error;
                *issue = why.clone();
            }
            None => *status = Status::Applied,
        }
    };
    for row in &mut result.providers {
        outcome(
            &row.dependency.module_path,
            &mut row.outcome.status,
            &mut row.outcome.issue,
        );
    }
    for row in &mut result.modules {
        outcome(
            &row.dependency.module_path,
            &mut row.outcome.status,
            &mut row.outcome.issue,
        );
    }
    result.summarize();
}

fn edit_file(
    system: &dyn System,
    policy: &ReadPolicy,
    file: &str,
    list: &mut [Edit],
) -> Result<(), String> {
    let root = &policy.root;
    let path = root.join(file);
    let mut text = crate::scan::read_text(system, policy, &path)?;
    // From the end, so the earlier ranges stay where they were.
    list.sort_by_key(|e| std::cmp::Reverse(e.range.start));
    for edit in list.iter() {
        if text.get(edit.range.clone()) != Some(edit.old.as_str()) {
            return Err(format!("{file} changed while tfupdate ran"));
        }
        text.replace_range(edit.range.clone(), &edit.new);
    }
    system
        .replace_beneath(root, &path, &[text.as_bytes()])
        .map_err(|e| format!("cannot write {file}: {e}"))
}

/// The `h1:` hash of each of `platforms` (none given: every platform the registry lists
/// for the version) and the `zh:` hashes of every package of `address` `version`.
fn package_hashes(
    registry: &dyn Registry,
    address: &str,
    version: &Version,
    platforms: &[String],
) -> Result<BTreeSet<String>, String> {
    let wanted: Vec<String> = if platforms.is_empty() {
        registry
            .provider_versions(address)
            .map_err(|e| e.to_string())?
            .into_iter()
            .find(|r| r.version == *version)
            .map(|r| r.platforms)
            .unwrap_or_default()
    } else {
        platforms.to_vec()
    };
    let mut hashes = BTreeSet::new();
    for platform in &wanted {
        let package = registry
            .provider_package(address, version, platform)
            .map_err(|e| e.to_string())?;
        hashes.insert(
            h1_hash(&package.zip).map_err(|e| format!("{address} {version} {platform}: {e}"))?,
        );
        hashes.extend(package.all_zip_hashes);
    }
    Ok(hashes)
}

/// The module's lock file with the new provider versions, and, when lock platforms are
/// given, the providers that keep their version completed with the hashes of those
/// platforms (the hashes they had are kept); `None` when it has no lock file or nothing
/// in it changes.
fn synced_lock(
    scan: &ModuleScan,
    result: &UpdateResult,
    registry: &dyn Registry,
    platforms: &[String],
) -> Result<Option<LockFile>, String> {
    let Some(old) = &scan.lock else {
        return Ok(None);
    };
    let mut lock = old.clone();
    let rows = result
        .providers
        .iter()
        .filter(|r| r.dependency.module_path == scan.id);
    for row in rows {
        let moved = row.outcome.status == Status::UpdateAvailable;
        let version = if moved {
            Version::parse(&row.outcome.bumped_version)
        } else if !platforms.is_empty() {
            old.providers
                .get(&row.address)
                .and_then(|p| Version::parse(&p.version))
        } else {
            None
        };
        let Some(version) = version else {
            continue;
        };
        let mut hashes = package_hashes(registry, &row.address, &version, platforms)?;
        if let Some(previous) = old.providers.get(&row.address) {
            if previous.version == version.to_string() {
                hashes.extend(previous.hashes.iter().cloned());
            }
        }
        let all: Vec<Constraints> = row
            .constraints
            .iter()
            .map(|c| c.constraints.clone())
            .collect();
        lock.providers.insert(
            row.address.clone(),
            LockedProvider {
                version: version.to_string(),
                constraints: constraints_text(&all),
                hashes,
            },
        );
    }
    Ok((lock != *old).then_some(lock))
}
