//! Where a missing variable's value is: when a remote state location stays unresolved
//! because `var.X` has no value, and a tfvars file of the repository that terraform does
//! not load by itself (`envs/prod.tfvars`, `etc/global.tfvars`: only `terraform.tfvars`
//! and `*.auto.tfvars` in the root module are loaded) sets `X`, the diagnostic names the
//! file and line and the `variables:` entry that would load it.
//!
//! Read only when such a diagnostic exists: a walk of the project for `*.tfvars`, each
//! read through [`System::read_confined`], assignments found at the top level of the
//! file (a hint: the value is not evaluated here, the entry loads it).

use std::collections::BTreeMap;

use camino::Utf8Path;
use terraci_db::diagnostic::{Code, Diagnostic};
use terraci_db::system::{ReadPolicy, System};

/// How deep the walk for tfvars files goes, and how many files it reads at most.
const MAX_DEPTH: usize = 12;
const MAX_FILES: usize = 2_000;

/// The variable a diagnostic says has no value: "`var.X` has no default, no tfvars value".
fn missing_variable(d: &Diagnostic) -> Option<&str> {
    if d.code != Code::UnresolvedRemoteState {
        return None;
    }
    let (_, rest) = d.message.split_once("`var.")?;
    let (name, after) = rest.split_once('`')?;
    after
        .starts_with(" has no default, no tfvars value")
        .then_some(name)
}

pub(super) fn add_hints(
    system: &dyn System,
    root: &Utf8Path,
    policy: &ReadPolicy,
    diagnostics: &mut [Diagnostic],
) {
    if !diagnostics.iter().any(|d| missing_variable(d).is_some()) {
        return;
    }
    let files = super::files_below(system, root, MAX_DEPTH, &[], &unloaded_tfvars);
    let mut set: BTreeMap<String, Vec<(String, usize)>> = BTreeMap::new();
    for rel in files.iter().take(MAX_FILES) {
        let Ok((bytes, _)) = system.read_confined(&root.join(rel), policy, true) else {
            continue;
        };
        for (name, line) in assignments(&String::from_utf8_lossy(&bytes)) {
            set.entry(name).or_default().push((rel.clone(), line));
        }
    }
    for d in diagnostics.iter_mut() {
        let Some(name) = missing_variable(d) else {
            continue;
        };
        let Some(places) = set.get(name) else {
            continue;
        };
        let module = d.module.clone().unwrap_or_default();
        let shown: Vec<String> = places
            .iter()
            .take(3)
            .map(|(f, l)| format!("{f}:{l}"))
            .collect();
        let more = match places.len().saturating_sub(3) {
            0 => String::new(),
            n => format!(" and {n} more"),
        };
        let (file, _) = &places[0];
        let entry = format!(
            "variables: [{{modules: [\"{module}\"], files: [\"{}\"]}}]",
            relative(&module, file)
        );
        let which = if places.len() > 1 {
            "; one per environment? pick one"
        } else {
            ""
        };
        d.message.push_str(&format!(
            " (`{name}` is set in {}{more}, which terraform does not load by itself{which}: {entry} in .terraci.yaml, or --var-file {file})",
            shown.join(", ")
        ));
    }
}

/// `*.tfvars` / `*.tfvars.json` but those terraform loads itself in a module directory
/// (`terraform.tfvars`, `*.auto.tfvars`), which terraci reads already.
fn unloaded_tfvars(rel: &str) -> bool {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    let vars = name.ends_with(".tfvars") || name.ends_with(".tfvars.json");
    let loaded = name.starts_with("terraform.tfvars")
        || name.ends_with(".auto.tfvars")
        || name.ends_with(".auto.tfvars.json");
    vars && !loaded
}

/// The names assigned at the top level of a tfvars text, with their 1-based lines
/// (`name = ...` outside any brace or bracket; JSON files: `"name":` at depth 1).
fn assignments(text: &str) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    let mut depth: i64 = 0;
    let json = text.trim_start().starts_with('{');
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let at_top = if json { depth == 1 } else { depth == 0 };
        if at_top && !trimmed.starts_with('#') && !trimmed.starts_with("//") {
            let key = if json {
                trimmed
                    .strip_prefix('"')
                    .and_then(|r| r.split_once('"'))
                    .filter(|(_, rest)| rest.trim_start().starts_with(':'))
                    .map(|(k, _)| k)
            } else {
                trimmed.split_once('=').map(|(k, _)| k.trim()).filter(|k| {
                    !k.is_empty()
                        && k.chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
                })
            };
            if let Some(k) = key {
                out.push((k.to_owned(), i + 1));
            }
        }
        for c in line.chars() {
            match c {
                '{' | '[' => depth += 1,
                '}' | ']' => depth -= 1,
                _ => {}
            }
        }
    }
    out
}

/// `file` relative to the directory `module` (both project-relative).
fn relative(module: &str, file: &str) -> String {
    let from: Vec<&str> = module.split('/').filter(|s| !s.is_empty()).collect();
    let to: Vec<&str> = file.split('/').collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<&str> = vec![".."; from.len() - common];
    parts.extend(&to[common..]);
    parts.join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_level_assignments_and_relative_paths() {
        let text = "region = \"eu\"\ntags = {\n  team = \"x\"\n}\n# stack = \"c\"\nstack_name = \"blue\"\n";
        assert_eq!(
            assignments(text),
            [
                ("region".to_owned(), 1),
                ("tags".to_owned(), 2),
                ("stack_name".to_owned(), 6)
            ]
        );
        assert_eq!(
            assignments("{\n  \"stack\": \"blue\",\n  \"m\": {\"a\": 1}\n}\n"),
            [("stack".to_owned(), 2), ("m".to_owned(), 3)]
        );
        assert_eq!(
            relative("stacks/dns", "stacks/dns/prod.tfvars"),
            "prod.tfvars"
        );
        assert_eq!(
            relative("stacks/dns", "envs/prod.tfvars"),
            "../../envs/prod.tfvars"
        );
    }
}
