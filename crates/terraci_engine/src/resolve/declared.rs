//! What `.terraci.yaml` says that the code cannot: `variables` (values set in CI or kept
//! in per-stack tfvars), `backend_config` (what `terraform init -backend-config` gives),
//! `dependencies` (edges to add or ignore) and `external_state` (state owned elsewhere).
//!
//! Input: the project's config, each module's info and variables, files read through
//! the tracked filesystem. Output: variable layers for [`super::scope`], backend fields
//! for [`super::identity`], and the declared edges and checks for [`super`].

use crate::eval::Object;
use std::collections::BTreeMap;

use camino::Utf8Path;

use crate::eval::{evaluate, EvalContext, EvalHost, NoFilesystem, Value};
use terraci_db::config::Config;
use terraci_db::diagnostic::Code;
use terraci_db::files::ModuleInfo;
use terraci_db::filter::{glob_matches, match_segment};
use terraci_db::syntax::Expr;
use terraci_db::system::normalize;

/// A layer of variable assignments, and what went wrong reading it.
pub(super) struct Layer {
    pub(crate) assignments: Vec<(String, Expr)>,
    pub(crate) problems: Vec<String>,
}

/// `{environment}`, `{module_path}`, `{module_name}` and (with `vars`) `{var.NAME}` in
/// `text`; an unknown placeholder or variable is an error naming it.
pub(super) fn expand(
    text: &str,
    info: &ModuleInfo,
    vars: Option<&Object>,
) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let Some(close) = rest[open..].find('}') else {
            return Err(format!("`{text}`: `{{` without `}}`"));
        };
        let name = &rest[open + 1..open + close];
        let value = match name {
            "module_path" => info.id.clone(),
            "module_name" => info.id.rsplit('/').next().unwrap_or("").to_owned(),
            _ => match (name.strip_prefix("var."), vars) {
                (Some(var), Some(vars)) => match vars.get(var) {
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Number(n)) => n.to_string(),
                    Some(Value::Bool(b)) => b.to_string(),
                    Some(Value::Unknown(u)) => return Err(u.reason.clone()),
                    Some(_) => return Err(format!("`var.{var}` is not a string")),
                    None => return Err(format!("the module declares no `variable \"{var}\"`")),
                },
                _ => match info.components.get(name) {
                    Some(v) => v.clone(),
                    None => {
                        return Err(format!(
                            "`{{{name}}}` is not a pattern segment, `{{module_path}}`, `{{module_name}}`{}",
                            if vars.is_some() { " or `{var.NAME}`" } else { "" }
                        ))
                    }
                },
            },
        };
        out.push_str(&value);
        rest = &rest[open + close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The files a `files:` entry names for a module: its placeholders expanded, relative to
/// the module directory, a glob in the last segment listed through `host`. Missing files
/// are left out; the flag says whether any file was named that exists.
fn named_files(
    raw: &str,
    info: &ModuleInfo,
    dir: &Utf8Path,
    host: &dyn EvalHost,
) -> Result<Vec<camino::Utf8PathBuf>, String> {
    let rel = expand(raw, info, None)?;
    let path = normalize(&dir.join(&rel));
    let name = path.file_name().unwrap_or("");
    if !name.contains(['*', '?', '[']) {
        // A refused file is named: its read then says why it is not used.
        return Ok(if host.file_exists(&path).unwrap_or(true) {
            vec![path]
        } else {
            Vec::new()
        });
    }
    let parent = path.parent().unwrap_or(dir).to_owned();
    let mut found: Vec<camino::Utf8PathBuf> = host
        .list_files(&parent)
        .into_iter()
        .filter(|f| !f.contains('/') && match_segment(name, f))
        .map(|f| parent.join(f))
        .collect();
    found.sort();
    Ok(found)
}

fn applies(globs: &[String], info: &ModuleInfo) -> bool {
    globs.iter().any(|g| glob_matches(g, &info.id))
}

/// Each `files:` entry with the files it names for the module; a bad placeholder is a
/// problem of `key`.
fn entry_files<'r>(
    key: &str,
    raws: &'r [String],
    info: &ModuleInfo,
    dir: &Utf8Path,
    host: &dyn EvalHost,
    problems: &mut Vec<String>,
) -> Vec<(&'r str, Vec<camino::Utf8PathBuf>)> {
    let mut out = Vec::new();
    for raw in raws {
        match named_files(raw, info, dir, host) {
            Ok(files) => out.push((raw.as_str(), files)),
            Err(e) => problems.push(format!("`{key}` file {e}")),
        }
    }
    out
}

/// The `variables:` layers of a module, in config order (files, then values, per entry).
pub(super) fn variable_layers(
    config: &Config,
    info: &ModuleInfo,
    dir: &Utf8Path,
    host: &dyn EvalHost,
) -> Layer {
    let mut layer = Layer {
        assignments: Vec::new(),
        problems: Vec::new(),
    };
    for entry in &config.variables {
        if !applies(&entry.modules, info) {
            continue;
        }
        for (raw, files) in entry_files(
            "variables",
            &entry.files,
            info,
            dir,
            host,
            &mut layer.problems,
        ) {
            if files.is_empty() {
                layer.problems.push(format!(
                    "`variables` file `{raw}` names no file for this module"
                ));
            }
            for file in files {
                let text = match host.read_file(&file) {
                    Ok(text) => text,
                    Err(e) => {
                        layer.problems.push(e);
                        continue;
                    }
                };
                match super::scope::var_file_assignments(file.as_str(), &text) {
                    Ok(assignments) => layer.assignments.extend(assignments),
                    Err(e) => layer.problems.push(format!(
                        "`{}`:{e}",
                        file.file_name().unwrap_or(file.as_str())
                    )),
                }
            }
        }
        for (name, value) in &entry.values {
            match serde_json::to_value(value) {
                Ok(json) => layer
                    .assignments
                    .push((name.clone(), crate::facts::json_literal(&json))),
                Err(e) => layer
                    .problems
                    .push(format!("`variables` value `{name}`: {e}")),
            }
        }
    }
    layer
}

/// `execution.env` entries named `TF_VAR_<name>`: the jobs see them, so evaluation does
/// (a value is read as Terraform reads `TF_VAR_`: HCL for lists and maps, else a string).
pub(super) fn env_variables(config: &Config) -> Vec<(String, Expr)> {
    config
        .execution
        .env
        .iter()
        .filter_map(|(k, v)| Some((k.strip_prefix("TF_VAR_")?.to_owned(), v)))
        .map(|(name, raw)| (name, super::scope::cli_value(raw)))
        .collect()
}

/// The `backend_config:` fields of a module, in config order (files, then values, per
/// entry), with what went wrong.
pub(super) fn backend_fields(
    config: &Config,
    info: &ModuleInfo,
    dir: &Utf8Path,
    vars: &Object,
    host: &dyn EvalHost,
) -> (Object, Vec<String>) {
    let mut fields = Object::new();
    let mut problems = Vec::new();
    let empty = Object::new();
    let literals = EvalContext {
        scope: &empty,
        extra: &[],
        module_dir: dir.to_owned(),
        host: &NoFilesystem,
    };
    for entry in &config.backend_config {
        if !applies(&entry.modules, info) {
            continue;
        }
        // A missing file is fine: not every module has one.
        for (_, files) in entry_files(
            "backend_config",
            &entry.files,
            info,
            dir,
            host,
            &mut problems,
        ) {
            for file in files {
                let Ok(text) = host.read_file(&file) else {
                    continue;
                };
                match super::scope::var_file_assignments("backend.hcl", &text) {
                    Ok(assignments) => {
                        for (k, e) in assignments {
                            let v = evaluate(&e, &literals)
                                .unwrap_or_else(|err| Value::unknown(err.message));
                            fields.insert(k, v);
                        }
                    }
                    Err(e) => problems.push(format!(
                        "`{}`:{e}",
                        file.file_name().unwrap_or(file.as_str())
                    )),
                }
            }
        }
        for (k, raw) in &entry.values {
            let v = match expand(raw, info, Some(vars)) {
                Ok(s) => Value::String(s),
                Err(reason) => {
                    Value::unknown(format!("`backend_config` value `{k}: {raw}`: {reason}"))
                }
            };
            fields.insert(k.clone(), v);
        }
    }
    (fields, problems)
}

/// The reference's state as a URL for `external_state` globs: `<backend>://<identity
/// fields in order>`, e.g. `s3://other-team/net/vpc.tfstate`. `None` unless every field
/// is known.
pub(super) fn state_url(identity: &super::StateIdentity) -> Option<String> {
    let fields = super::identity_fields(&identity.backend);
    let mut parts = Vec::with_capacity(fields.len());
    for f in fields {
        parts.push(identity.fields.get(f)?.as_str());
    }
    Some(format!("{}://{}", identity.backend, parts.join("/")))
}

/// Whether `url` is state the config says another repository owns. Globs are matched
/// per `/` segment after the scheme (`s3://other-team/*` covers one more segment,
/// `s3://other-team/**` any).
pub(super) fn is_external(config: &Config, url: &str) -> bool {
    config
        .external_state
        .iter()
        .any(|g| match (g.split_once("://"), url.split_once("://")) {
            (Some((gs, gp)), Some((us, up))) => gs == us && glob_matches(gp, up),
            _ => false,
        })
}

/// Config entries that name no module (`variables`, `backend_config`), and
/// `dependencies` rules that name no module or never applied: a typo must not pass
/// silently.
pub fn config_rule_diagnostics(
    db: &dyn terraci_db::db::Db,
    project: terraci_db::files::Project,
) -> Vec<terraci_db::diagnostic::Diagnostic> {
    let config = project.config(db);
    let deps = &config.dependencies;
    let roots = crate::chunk::roots(db, project);
    let mut out = Vec::new();
    // Entries whose globs name no module.
    let entries = config
        .variables
        .iter()
        .map(|e| ("variables", Code::ConfigVariables, &e.modules))
        .chain(
            config
                .backend_config
                .iter()
                .map(|e| ("backend_config", Code::ConfigBackend, &e.modules)),
        );
    let mut counters: BTreeMap<&str, usize> = BTreeMap::new();
    for (key, code, globs) in entries {
        let i = counters.entry(key).or_default();
        for glob in globs {
            if !roots.ids.iter().any(|id| glob_matches(glob, id)) {
                out.push(
                    terraci_db::diagnostic::Diagnostic::warning(
                        code,
                        format!("`{key}[{i}].modules`: `{glob}` names no module"),
                    )
                    .with_file(".terraci.yaml"),
                );
            }
        }
        *i += 1;
    }
    if deps.add.is_empty() && deps.ignore.is_empty() {
        return out;
    }
    let mut used = std::collections::BTreeSet::new();
    for &m in &roots.modules {
        used.extend(
            super::resolved_dependencies(db, project, m)
                .rules_used
                .iter()
                .copied(),
        );
    }
    let lists = [(true, "add", &deps.add), (false, "ignore", &deps.ignore)];
    for (add, key, rules) in lists {
        for (i, rule) in rules.iter().enumerate() {
            if used.contains(&(add, i)) {
                continue;
            }
            let names = |glob: &str| roots.ids.iter().any(|id| glob_matches(glob, id));
            let why = match (names(&rule.from), names(&rule.to)) {
                (false, _) => format!("`from: {}` names no module", rule.from),
                (_, false) => format!("`to: {}` names no module", rule.to),
                _ if add => "it adds no edge (each module it names is the same module)".into(),
                _ => "no edge it names was found".into(),
            };
            out.push(
                terraci_db::diagnostic::Diagnostic::warning(
                    Code::UnusedDependencyRule,
                    format!(
                        "`dependencies.{key}[{i}]` ({} -> {}): {why}",
                        rule.from, rule.to
                    ),
                )
                .with_file(".terraci.yaml"),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(id: &str) -> ModuleInfo {
        ModuleInfo {
            id: id.into(),
            components: [("stack", "aws"), ("component", "base")]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
            submodule: None,
            parent: None,
            role: terraci_db::files::Role::Root,
        }
    }

    #[test]
    fn placeholders() {
        let vars = Object::from([
            ("project".to_owned(), Value::String("nia".into())),
            ("env".to_owned(), Value::unknown("`var.env` has no value")),
        ]);
        let i = info("components/aws/base");
        let cases: &[(&str, Result<&str, &str>)] = &[
            ("{var.project}-{stack}-{module_name}.tfstate", Ok("nia-aws-base.tfstate")),
            ("{module_path}/x", Ok("components/aws/base/x")),
            ("{var.env}", Err("`var.env` has no value")),
            ("{var.nope}", Err("the module declares no `variable \"nope\"`")),
            ("{region}", Err("`{region}` is not a pattern segment, `{module_path}`, `{module_name}` or `{var.NAME}`")),
            ("a{b", Err("`a{b`: `{` without `}`")),
        ];
        for (text, want) in cases {
            let got = expand(text, &i, Some(&vars));
            assert_eq!(got.as_deref().map_err(String::as_str), *want, "{text}");
        }
    }

    #[test]
    fn external_state_globs() {
        let config = Config {
            external_state: vec!["s3://other-team/*".into(), "gcs://shared/**".into()],
            ..Config::default()
        };
        assert!(is_external(&config, "s3://other-team/vpc.tfstate"));
        assert!(!is_external(&config, "s3://other-team/net/vpc.tfstate"));
        assert!(!is_external(&config, "gcs://other-team/vpc"));
        assert!(is_external(&config, "gcs://shared/a/b/c"));
    }
}
