//! What each module asks for: its `required_providers`, its registry `module` calls with
//! their `version`, its `.terraform.lock.hcl`, and the provider constraints that reach it
//! through local module calls (`source = "./..."`), followed to any depth.
//!
//! Input: the project root and the module ids (project-relative directories), read
//! through `System`. Output: a [`ModuleScan`] per module, each requirement with the file,
//! line and byte range of its version string (for the report and for `--write`).

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

use camino::{Utf8Path, Utf8PathBuf};
use hcl_edit::expr::Expression;
use hcl_edit::structure::{Block, Body};
use hcl_edit::Span as _;

use terraci_db::system::{ReadPolicy, System};

use crate::lockfile::LockFile;
use crate::version::Constraints;

/// The registry host of sources that name none.
pub const DEFAULT_HOST: &str = "registry.terraform.io";

/// Where a version string is: project-relative file, 1-based line, the byte range of the
/// string's contents (without the quotes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Site {
    pub file: String,
    pub line: usize,
    pub range: Range<usize>,
}

impl std::fmt::Display for Site {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// One `version` constraint on a provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderConstraint {
    pub text: String,
    pub constraints: Constraints,
    pub site: Site,
    /// In the module's own files (bumped by `--write`), not in a local module it calls.
    pub own: bool,
}

/// A provider a module needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderNeed {
    /// `registry.terraform.io/hashicorp/aws`.
    pub address: String,
    /// `hashicorp/aws` (without the default host).
    pub source: String,
    pub constraints: Vec<ProviderConstraint>,
}

/// A registry module call with a `version`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleCall {
    pub name: String,
    /// `terraform-aws-modules/vpc/aws` or `host/ns/name/system`.
    pub source: String,
    pub host: String,
    /// `ns/name/system`.
    pub path: String,
    pub constraint: Option<(String, Constraints)>,
    pub site: Option<Site>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModuleScan {
    pub id: String,
    /// By address.
    pub providers: BTreeMap<String, ProviderNeed>,
    pub modules: Vec<ModuleCall>,
    pub lock: Option<LockFile>,
    /// What could not be read, each naming the file (and line).
    pub problems: Vec<String>,
}

/// The address and short source of a provider `source` (`hashicorp/aws`,
/// `registry.example.com/ns/type`); `None` for text that is not one.
///
/// The parts follow terraform's rules (checked with `terraform init` 1.11.4): namespace
/// and type are letters, digits and dashes, neither starting nor ending with a dash; the
/// host is DNS labels of the same kind, with an optional trailing dot and `:port`.
/// Anything else terraform refuses, so it is not a provider here either: in particular
/// no part is `.` or `..`, and the address can name the per-user package cache
/// directory `tfupdate/providers/<address>/` without leaving it.
pub fn provider_address(source: &str) -> Option<(String, String)> {
    let source = source.to_ascii_lowercase();
    let parts: Vec<&str> = source.split('/').collect();
    let label = |p: &str| {
        !p.is_empty()
            && !p.starts_with('-')
            && !p.ends_with('-')
            && p.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    };
    let host = |h: &str| {
        let (name, port) = match h.rsplit_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (h, None),
        };
        let name = name.strip_suffix('.').unwrap_or(name);
        port.is_none_or(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
            && name.split('.').all(label)
    };
    match parts.as_slice() {
        [ty] if label(ty) => Some((
            format!("{DEFAULT_HOST}/hashicorp/{ty}"),
            format!("hashicorp/{ty}"),
        )),
        [ns, ty] if label(ns) && label(ty) => {
            Some((format!("{DEFAULT_HOST}/{ns}/{ty}"), format!("{ns}/{ty}")))
        }
        [h, ns, ty] if *h == DEFAULT_HOST && label(ns) && label(ty) => {
            Some((format!("{h}/{ns}/{ty}"), format!("{ns}/{ty}")))
        }
        [h, ns, ty] if host(h) && label(ns) && label(ty) => {
            Some((format!("{h}/{ns}/{ty}"), format!("{h}/{ns}/{ty}")))
        }
        _ => None,
    }
}

/// The registry host and `ns/name/system` of a module source, or `None` for a local,
/// git, URL or archive source.
pub fn registry_module(source: &str) -> Option<(String, String)> {
    if source.starts_with("./") || source.starts_with("../") || source.contains("::") {
        return None;
    }
    let base = source.split("//").next().unwrap_or(source);
    let parts: Vec<&str> = base.split('/').collect();
    let word = |p: &&str| {
        !p.is_empty()
            && p.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b))
    };
    match parts.as_slice() {
        [ns, name, system] if [ns, name, system].iter().all(|p| word(p)) => {
            Some((DEFAULT_HOST.to_owned(), format!("{ns}/{name}/{system}")))
        }
        [host, ns, name, system]
            if host.contains('.') && [ns, name, system].iter().all(|p| word(p)) =>
        {
            Some(((*host).to_owned(), format!("{ns}/{name}/{system}")))
        }
        _ => None,
    }
}

fn string_value(expr: &Expression) -> Option<String> {
    match expr {
        Expression::String(s) => Some(s.value().to_string()),
        _ => None,
    }
}

/// The site of a string expression: its contents' byte range (the quotes left out).
fn site_of(expr: &Expression, file: &str, text: &str) -> Option<Site> {
    let span = expr.span()?;
    let Expression::String(_) = expr else {
        return None;
    };
    let range = span.start + 1..span.end.saturating_sub(1);
    Some(Site {
        file: file.to_owned(),
        line: text[..span.start.min(text.len())].matches('\n').count() + 1,
        range,
    })
}

/// A project file as text, read only when it is a regular file inside the project (no
/// symlink leading out) and not over the size bound; `Err` names the file.
pub(crate) fn read_text(
    system: &dyn System,
    policy: &ReadPolicy,
    path: &Utf8Path,
) -> Result<String, String> {
    let shown = path.strip_prefix(&policy.root).unwrap_or(path);
    let (bytes, _) = system
        .read_confined(path, policy, false)
        .map_err(|e| format!("{shown}: {e}"))?;
    String::from_utf8(bytes).map_err(|_| format!("{shown}: not UTF-8 text"))
}

/// The `.tf` files of a directory, by name.
fn tf_files(system: &dyn System, dir: &Utf8Path) -> Vec<Utf8PathBuf> {
    let Ok(entries) = system.read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<Utf8PathBuf> = entries
        .into_iter()
        .filter(|e| e.name.ends_with(".tf") && system.is_file(&dir.join(&e.name)))
        .map(|e| dir.join(&e.name))
        .collect();
    files.sort();
    files
}

/// What one directory's files say.
#[derive(Default)]
struct DirFacts {
    providers: Vec<(String, String, Option<ProviderConstraint>)>,
    modules: Vec<ModuleCall>,
    local_calls: Vec<String>,
}

fn read_dir_facts(
    system: &dyn System,
    policy: &ReadPolicy,
    dir: &Utf8Path,
    own: bool,
    problems: &mut Vec<String>,
) -> DirFacts {
    let mut facts = DirFacts::default();
    for path in tf_files(system, dir) {
        let shown = path.strip_prefix(&policy.root).unwrap_or(&path).to_string();
        let text = match read_text(system, policy, &path) {
            Ok(text) => text,
            Err(why) => {
                problems.push(why);
                continue;
            }
        };
        let body: Body = match hcl_edit::parser::parse_body(&text) {
            Ok(body) => body,
            Err(e) => {
                problems.push(format!("{shown}:{}: {}", e.location().line(), e.message()));
                continue;
            }
        };
        for block in body.get_blocks("terraform") {
            for rp in block.body.get_blocks("required_providers") {
                read_required_providers(rp, &shown, &text, own, &mut facts, problems);
            }
        }
        for block in body.get_blocks("module") {
            read_module_call(block, &shown, &text, &mut facts);
        }
    }
    facts
}

fn read_required_providers(
    block: &Block,
    file: &str,
    text: &str,
    own: bool,
    facts: &mut DirFacts,
    problems: &mut Vec<String>,
) {
    for attr in block.body.attributes() {
        let local = attr.key.as_str();
        let (source, version) = match &attr.value {
            // The old form: `aws = "~> 5.0"`.
            Expression::String(_) => (local.to_owned(), Some(&attr.value)),
            Expression::Object(object) => {
                let mut source = local.to_owned();
                let mut version = None;
                for (key, value) in object.iter() {
                    let key = match key {
                        hcl_edit::expr::ObjectKey::Ident(i) => i.as_str().to_owned(),
                        hcl_edit::expr::ObjectKey::Expression(e) => {
                            string_value(e).unwrap_or_default()
                        }
                    };
                    match key.as_str() {
                        "source" => source = string_value(value.expr()).unwrap_or(source),
                        "version" => version = Some(value.expr()),
                        _ => {}
                    }
                }
                (source, version)
            }
            _ => continue,
        };
        let Some((address, short)) = provider_address(&source) else {
            let line = attr.span().map_or(1, |span| {
                text[..span.start.min(text.len())].matches('\n').count() + 1
            });
            problems.push(format!(
                "{file}:{line}: `{source}` is not a provider source terraform accepts \
                 ([HOST/]NAMESPACE/TYPE, each part letters, digits and dashes)"
            ));
            continue;
        };
        let constraint = version.and_then(|expr| {
            let site = site_of(expr, file, text)?;
            let text = string_value(expr)?;
            match Constraints::parse(&text) {
                Ok(constraints) => Some(ProviderConstraint {
                    text,
                    constraints,
                    site,
                    own,
                }),
                Err(e) => {
                    problems.push(format!("{site}: {e}"));
                    None
                }
            }
        });
        facts.providers.push((address, short, constraint));
    }
}

fn read_module_call(block: &Block, file: &str, text: &str, facts: &mut DirFacts) {
    let name = block
        .labels
        .first()
        .map(|l| l.as_str().to_owned())
        .unwrap_or_default();
    let mut source = None;
    let mut version = None;
    for attr in block.body.attributes() {
        match attr.key.as_str() {
            "source" => source = string_value(&attr.value),
            "version" => version = Some(&attr.value),
            _ => {}
        }
    }
    let Some(source) = source else { return };
    if source.starts_with("./") || source.starts_with("../") {
        facts.local_calls.push(source);
        return;
    }
    let Some((host, path)) = registry_module(&source) else {
        return;
    };
    let constraint = version
        .and_then(string_value)
        .and_then(|t| Constraints::parse(&t).ok().map(|c| (t, c)));
    facts.modules.push(ModuleCall {
        name,
        source,
        host,
        path,
        constraint,
        site: version.and_then(|v| site_of(v, file, text)),
    });
}

/// Joins `rel` (`../shared/net`) onto `dir`, within the project; `None` above it.
fn join_local(dir: &Utf8Path, rel: &str) -> Option<Utf8PathBuf> {
    let mut out: Vec<&str> = dir.as_str().split('/').filter(|s| !s.is_empty()).collect();
    for part in rel.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                out.pop()?;
            }
            p => out.push(p),
        }
    }
    Some(Utf8PathBuf::from(out.join("/")))
}

/// Scans each module of `ids` (project-relative directories) under the policy's root.
pub fn scan_modules(system: &dyn System, policy: &ReadPolicy, ids: &[String]) -> Vec<ModuleScan> {
    ids.iter()
        .map(|id| scan_module(system, policy, id))
        .collect()
}

fn scan_module(system: &dyn System, policy: &ReadPolicy, id: &str) -> ModuleScan {
    let root = &policy.root;
    let mut scan = ModuleScan {
        id: id.to_owned(),
        ..ModuleScan::default()
    };
    let mut problems = Vec::new();
    // The module, then every local module it reaches, each once.
    let mut queue = vec![(Utf8PathBuf::from(id), true)];
    let mut seen = BTreeSet::new();
    while let Some((dir, own)) = queue.pop() {
        if !seen.insert(dir.clone()) {
            continue;
        }
        let facts = read_dir_facts(system, policy, &root.join(&dir), own, &mut problems);
        for (address, source, constraint) in facts.providers {
            let need = scan
                .providers
                .entry(address.clone())
                .or_insert_with(|| ProviderNeed {
                    address,
                    source,
                    constraints: Vec::new(),
                });
            need.constraints.extend(constraint);
        }
        if own {
            scan.modules.extend(facts.modules);
        }
        for call in facts.local_calls {
            match join_local(&dir, call.split("//").next().unwrap_or(&call)) {
                Some(child) => queue.push((child, false)),
                None => problems.push(format!(
                    "{dir}: the module source {call:?} is outside the project"
                )),
            }
        }
    }
    let lock_path = root.join(id).join(".terraform.lock.hcl");
    if system.is_file(&lock_path) {
        match read_text(system, policy, &lock_path) {
            Ok(text) => match LockFile::parse(&text) {
                Ok(lock) => scan.lock = Some(lock),
                Err(e) => problems.push(format!("{id}/.terraform.lock.hcl: {e}")),
            },
            Err(why) => problems.push(why),
        }
    }
    for need in scan.providers.values_mut() {
        need.constraints.sort_by(|a, b| {
            (a.site.file.as_str(), a.site.line).cmp(&(b.site.file.as_str(), b.site.line))
        });
    }
    scan.problems = problems;
    scan
}

#[cfg(test)]
mod tests {
    use terraci_db::system::{MemorySystem, DEFAULT_MAX_FILE_SIZE};

    use super::*;

    #[test]
    fn sources_read_as_terraform_reads_them() {
        let addr = |s: &str| provider_address(s).map(|(a, short)| format!("{a} {short}"));
        assert_eq!(
            addr("aws").as_deref(),
            Some("registry.terraform.io/hashicorp/aws hashicorp/aws")
        );
        assert_eq!(
            addr("Hashicorp/AWS").as_deref(),
            Some("registry.terraform.io/hashicorp/aws hashicorp/aws")
        );
        assert_eq!(
            addr("registry.terraform.io/hashicorp/aws").as_deref(),
            Some("registry.terraform.io/hashicorp/aws hashicorp/aws")
        );
        assert_eq!(
            addr("tf.example.com/ns/t").as_deref(),
            Some("tf.example.com/ns/t tf.example.com/ns/t")
        );
        assert_eq!(addr("a/b/c/d"), None);
        assert_eq!(addr("a//b"), None);
        assert_eq!(
            addr("tf.example.com:8443/ns/t").as_deref(),
            Some("tf.example.com:8443/ns/t tf.example.com:8443/ns/t")
        );
        // What `terraform init` 1.11.4 refuses ("Invalid provider namespace/type/source
        // hostname"): never a provider, so never a path under the package cache.
        for refused in [
            "../..",
            "evil.example.com/../..",
            "../ns/t",
            "hashicorp/a_b",
            "ha.shi/aws",
            "-a/aws",
            "a-/aws",
            "a..b/ns/t",
            "-h.com/ns/t",
            "h_x.com/ns/t",
            "h.com:/ns/t",
        ] {
            assert_eq!(addr(refused), None, "{refused}");
        }
        let module = |s: &str| registry_module(s).map(|(h, p)| format!("{h} {p}"));
        assert_eq!(
            module("terraform-aws-modules/vpc/aws").as_deref(),
            Some("registry.terraform.io terraform-aws-modules/vpc/aws")
        );
        assert_eq!(
            module("app.terraform.io/org/net/aws//modules/sub").as_deref(),
            Some("app.terraform.io org/net/aws")
        );
        for not_registry in [
            "./local",
            "../up",
            "git::https://example.com/x.git",
            "github.com/org/repo",
            "s3::https://b/x.zip",
        ] {
            assert_eq!(module(not_registry), None, "{not_registry}");
        }
    }

    #[test]
    fn both_forms_of_required_providers_and_broken_files_are_read_without_panics() {
        let system = MemorySystem::new();
        system.write_file(
            "/p/m/versions.tf",
            "terraform {\n  required_providers {\n    null = \"~> 3.0\"\n    aws = {\n      source = \"hashicorp/aws\"\n    }\n  }\n}\n",
        );
        system.write_file(
            "/p/m/broken.tf",
            "terraform {\n  required_providers {\n    x = {\n",
        );
        system.write_file("/p/m/.terraform.lock.hcl", "provider {\n}\n");
        let policy = ReadPolicy::new(&system, Utf8Path::new("/p"), DEFAULT_MAX_FILE_SIZE);
        let scan = scan_modules(&system, &policy, &["m".to_owned()]).remove(0);
        let null = &scan.providers["registry.terraform.io/hashicorp/null"];
        assert_eq!(null.constraints[0].text, "~> 3.0");
        assert_eq!(null.constraints[0].site.to_string(), "m/versions.tf:3");
        assert!(scan.providers["registry.terraform.io/hashicorp/aws"]
            .constraints
            .is_empty());
        assert_eq!(scan.problems.len(), 2, "{:?}", scan.problems);
        assert!(
            scan.problems[0].starts_with("m/broken.tf:"),
            "{:?}",
            scan.problems
        );
        assert_eq!(
            scan.problems[1],
            "m/.terraform.lock.hcl: line 1: expected `provider \"<address>\" {`"
        );
    }

    #[test]
    fn a_provider_source_terraform_refuses_is_a_problem_naming_its_line() {
        let system = MemorySystem::new();
        system.write_file(
            "/p/m/versions.tf",
            "terraform {\n  required_providers {\n    aws = { source = \"hashicorp/aws\" }\n    x = { source = \"../..\" }\n  }\n}\n",
        );
        let policy = ReadPolicy::new(&system, Utf8Path::new("/p"), DEFAULT_MAX_FILE_SIZE);
        let scan = scan_modules(&system, &policy, &["m".to_owned()]).remove(0);
        assert_eq!(
            scan.providers.keys().collect::<Vec<_>>(),
            ["registry.terraform.io/hashicorp/aws"]
        );
        assert_eq!(scan.problems.len(), 1, "{:?}", scan.problems);
        assert!(
            scan.problems[0].starts_with("m/versions.tf:4: `../..` is not a provider source"),
            "{:?}",
            scan.problems
        );
    }
}
