//! Finding and parsing the config file.

use camino::{Utf8Path, Utf8PathBuf};

use super::{Config, Pattern};
use crate::system::System;

/// Looked up in the project directory in this order.
pub const CONFIG_FILE_NAMES: [&str; 4] = [
    ".terraci.yaml",
    ".terraci.yml",
    "terraci.yaml",
    "terraci.yml",
];

#[derive(Debug, Clone)]
pub struct LoadedConfig {
    pub config: Config,
    pub pattern: Pattern,
    /// The file it came from; `None` for built-in defaults.
    pub path: Option<Utf8PathBuf>,
    pub warnings: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: Utf8PathBuf,
        source: std::io::Error,
    },
    #[error("{0}")]
    Invalid(String),
}

/// The config file of `project_dir`, if any: `explicit` (from `-c`) wins.
pub fn find_config_file(
    system: &dyn System,
    project_dir: &Utf8Path,
    explicit: Option<&Utf8Path>,
) -> Option<Utf8PathBuf> {
    if let Some(path) = explicit {
        return Some(path.to_owned());
    }
    CONFIG_FILE_NAMES
        .iter()
        .map(|name| project_dir.join(name))
        .find(|p| system.is_file(p))
}

/// The config file that governs `start` (absolute), found as git finds its repository:
/// `start` itself, then each parent in turn, stopping after the repository's top (a
/// directory holding `.git`) or the filesystem root. `None` when none has one.
pub fn find_config_upward(system: &dyn System, start: &Utf8Path) -> Option<Utf8PathBuf> {
    let mut dir = Some(start);
    while let Some(here) = dir {
        if let Some(found) = find_config_file(system, here, None) {
            return Some(found);
        }
        if system.is_dir(&here.join(".git")) || system.is_file(&here.join(".git")) {
            return None;
        }
        dir = here.parent();
    }
    None
}

/// The config file's bytes, read as a Terraform file is but confined to the directory it
/// is in: a committed `.terraci.yaml` that links to /proc/self/environ or /dev/zero, or a
/// FIFO, is refused without being opened (a parse error would quote what it read).
pub fn read_config_bytes(
    system: &dyn System,
    path: &Utf8Path,
) -> Result<(Vec<u8>, Option<crate::system::Stamp>), crate::system::ReadError> {
    let abs = system.absolute(path)?;
    let dir = abs.parent().unwrap_or(&abs);
    let policy = crate::system::ReadPolicy::new(system, dir, crate::system::DEFAULT_MAX_FILE_SIZE);
    system.read_confined(&abs, &policy, false)
}

impl crate::exit::Coded for ConfigError {
    fn exit_code(&self) -> u8 {
        crate::exit::ERROR
    }
}

/// Reads and validates the config; `None` means built-in defaults.
pub fn load_config(
    system: &dyn System,
    path: Option<&Utf8Path>,
) -> Result<LoadedConfig, ConfigError> {
    let Some(path) = path else {
        return finish(Config::default(), None, Vec::new());
    };
    let (bytes, _) = read_config_bytes(system, path).map_err(|err| ConfigError::Read {
        path: path.to_owned(),
        source: match err {
            crate::system::ReadError::Io(e) => e,
            other => std::io::Error::other(other.to_string()),
        },
    })?;
    let text = String::from_utf8(bytes)
        .map_err(|_| ConfigError::Invalid(format!("{path}: the file is not valid UTF-8")))?;
    let display = path.file_name().unwrap_or(path.as_str());
    let (config, warnings) = parse_config_with_warnings(&text, display)?;
    finish(config, Some(path.to_owned()), warnings)
}

/// Loads a config from its text, as [`load_config`] loads a file: what `init` checks
/// before writing (`display` names it in errors).
pub fn load_config_text(text: &str, display: &str) -> Result<LoadedConfig, ConfigError> {
    let (config, warnings) = parse_config_with_warnings(text, display)?;
    finish(config, None, warnings)
}

/// [`parse_config`], except that under `extensions` a section or a section's key that
/// terraci does not know (a TerraCi plugin's, a newer TerraCi key) is left out with a
/// warning saying it has no effect, as TerraCi ignores what no plugin claims. Core keys
/// stay strict: a typo there is an error with a suggestion.
pub(super) fn parse_config_with_warnings(
    text: &str,
    file: &str,
) -> Result<(Config, Vec<String>), ConfigError> {
    let first = match parse_config(text, file) {
        Ok(config) => return Ok((config, Vec::new())),
        Err(e) => e,
    };
    let Ok(mut value) = serde_yaml::from_str::<serde_yaml::Value>(text) else {
        return Err(first);
    };
    if value.apply_merge().is_err() {
        return Err(first);
    }
    let translated = terraci_policy_syntax(&mut value);
    let warnings = strip_unknown_extension_keys(&mut value);
    if warnings.is_empty() && !translated {
        return Err(first);
    }
    match serde_yaml::from_value::<Config>(value) {
        Ok(config) => Ok((config, warnings)),
        // Something else is wrong too: the first error says where.
        Err(_) => Err(first),
    }
}

/// Removes the keys under `extensions` (and under each known section) that the
/// config's types do not have; a warning for each.
fn strip_unknown_extension_keys(value: &mut serde_yaml::Value) -> Vec<String> {
    let schema: serde_json::Value =
        serde_json::from_str(&super::config_schema()).expect("the schema is JSON");
    let defs = &schema["$defs"];
    let keys_of = |def: &serde_json::Value| -> Vec<String> {
        def["properties"]
            .as_object()
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default()
    };
    // The definition a property refers to (`$ref` directly or through `anyOf`).
    let def_of = |property: &serde_json::Value| -> Option<serde_json::Value> {
        let reference = property["$ref"].as_str().map(str::to_owned).or_else(|| {
            property["anyOf"]
                .as_array()?
                .iter()
                .find_map(|v| v["$ref"].as_str().map(str::to_owned))
        })?;
        let name = reference.strip_prefix("#/$defs/")?;
        Some(defs[name].clone())
    };
    let extensions_def = &defs["Extensions"];
    let sections = keys_of(extensions_def);
    let mut warnings = Vec::new();
    let Some(extensions) = value
        .get_mut("extensions")
        .and_then(serde_yaml::Value::as_mapping_mut)
    else {
        return warnings;
    };
    let names: Vec<serde_yaml::Value> = extensions.keys().cloned().collect();
    for name in names {
        let Some(key) = name.as_str().map(str::to_owned) else {
            continue;
        };
        if !sections.contains(&key) {
            extensions.remove(&name);
            warnings.push(format!(
                "extensions.{key} is not a section terraci knows (a TerraCi plugin's?); it has no effect"
            ));
            continue;
        }
        let Some(def) = def_of(&extensions_def["properties"][&key]) else {
            continue;
        };
        if let Some(section) = extensions.get_mut(&name) {
            strip_unknown(
                section,
                &def,
                defs,
                &format!("extensions.{key}"),
                &mut warnings,
            );
        }
    }
    warnings
}

/// Removes the keys of `value` that `def` (a schema object definition) does not have,
/// at every depth: nested objects and the objects of sequences are walked with their own
/// definitions. A definition without `properties` (a free map such as `variables`) keeps
/// every key. Each removal is a warning naming the dotted path.
fn strip_unknown(
    value: &mut serde_yaml::Value,
    def: &serde_json::Value,
    defs: &serde_json::Value,
    path: &str,
    warnings: &mut Vec<String>,
) {
    // The object definition behind `$ref`, `anyOf` (an `Option`) or `items` (a list).
    fn resolve(def: &serde_json::Value, defs: &serde_json::Value) -> Option<serde_json::Value> {
        if let Some(name) = def["$ref"]
            .as_str()
            .and_then(|r| r.strip_prefix("#/$defs/"))
        {
            return resolve(&defs[name], defs);
        }
        if let Some(options) = def["anyOf"].as_array().or_else(|| def["oneOf"].as_array()) {
            return options.iter().find_map(|o| resolve(o, defs));
        }
        def["properties"].is_object().then(|| def.clone())
    }
    match value {
        serde_yaml::Value::Sequence(items) => {
            // Resolved per item (a tagged enum's variant depends on the item).
            let Some(item_def) = def
                .get("items")
                .filter(|i| resolve(i, defs).is_some())
                .cloned()
            else {
                return;
            };
            for (i, item) in items.iter_mut().enumerate() {
                strip_unknown(item, &item_def, defs, &format!("{path}[{i}]"), warnings);
            }
        }
        serde_yaml::Value::Mapping(map) => {
            // A tagged enum (`oneOf` of objects with a constant `type`): the variant the
            // value's `type` names; an unknown or missing `type` is left to the parser.
            let variant = tagged_variant(def, defs, map);
            let Some(def) = variant.or_else(|| resolve(def, defs)) else {
                return;
            };
            let Some(properties) = def["properties"].as_object() else {
                return;
            };
            let fields: Vec<String> = properties.keys().cloned().collect();
            let keys: Vec<serde_yaml::Value> = map.keys().cloned().collect();
            for field in keys {
                let Some(f) = field.as_str().map(str::to_owned) else {
                    continue;
                };
                match properties.get(&f) {
                    Some(property) => {
                        if let Some(inner) = map.get_mut(&field) {
                            let list = property
                                .get("items")
                                .is_some()
                                .then(|| property.clone())
                                .or_else(|| {
                                    property["anyOf"].as_array().and_then(|o| {
                                        o.iter().find(|v| v.get("items").is_some()).cloned()
                                    })
                                });
                            let inner_def = list.unwrap_or_else(|| property.clone());
                            strip_unknown(
                                inner,
                                &inner_def,
                                defs,
                                &format!("{path}.{f}"),
                                warnings,
                            );
                        }
                    }
                    None => {
                        let hint = renamed(path, &f)
                            .map(|new| format!(" (TerraCi renamed it: use `{new}`)"))
                            .or_else(|| {
                                closest(&f, &fields)
                                    .map(|best| format!(" (did you mean `{best}`?)"))
                            })
                            .unwrap_or_default();
                        warnings.push(format!(
                            "{path}.{f} is not a key terraci knows; it has no effect{hint}"
                        ));
                        map.remove(&field);
                    }
                }
            }
        }
        _ => {}
    }
}

/// The variant of a tagged enum definition (`oneOf` objects whose `type` property is a
/// constant) that `map`'s `type` names.
fn tagged_variant(
    def: &serde_json::Value,
    defs: &serde_json::Value,
    map: &serde_yaml::Mapping,
) -> Option<serde_json::Value> {
    let def = match def["$ref"]
        .as_str()
        .and_then(|r| r.strip_prefix("#/$defs/"))
    {
        Some(name) => &defs[name],
        None => def,
    };
    let tag = map.get("type")?.as_str()?;
    def["oneOf"]
        .as_array()?
        .iter()
        .find(|v| v["properties"]["type"]["const"].as_str() == Some(tag))
        .cloned()
}

/// TerraCi's documented policy syntax, read as terraci's: a top-level `policy:` section
/// (TerraCi's docs) is `extensions.policy`; a source without `type` is typed by its key
/// (`- path: dir`, `- git: url` with `ref`, `- oci: url`); `on_failure`/`on_warning` are
/// `decisions.deny`/`decisions.warn`, `overwrites` are `overrides` (their `on_failure`
/// too), `cache_dir` is `source_cache_dir`. A key of both spellings keeps terraci's.
/// Whether anything was translated.
fn terraci_policy_syntax(value: &mut serde_yaml::Value) -> bool {
    use serde_yaml::{Mapping, Value};
    let key = |k: &str| Value::String(k.to_owned());
    let Some(root) = value.as_mapping_mut() else {
        return false;
    };
    let mut changed = false;
    if let Some(policy) = root.remove(key("policy")) {
        let extensions = root
            .entry(key("extensions"))
            .or_insert_with(|| Value::Mapping(Mapping::new()));
        if let Some(extensions) = extensions.as_mapping_mut() {
            if !extensions.contains_key(key("policy")) {
                extensions.insert(key("policy"), policy);
                changed = true;
            }
        }
    }
    let Some(policy) = root
        .get_mut(key("extensions"))
        .and_then(|e| e.get_mut("policy"))
        .and_then(Value::as_mapping_mut)
    else {
        return changed;
    };
    // `on_failure` -> `decisions.deny` in a section (the policy or an override).
    let decisions = |section: &mut Mapping| -> bool {
        let mut moved = false;
        for (old, new) in [
            ("on_failure", "deny"),
            ("failure_action", "deny"),
            ("on_warning", "warn"),
            ("warning_action", "warn"),
        ] {
            let Some(v) = section.remove(key(old)) else {
                continue;
            };
            let d = section
                .entry(key("decisions"))
                .or_insert_with(|| Value::Mapping(Mapping::new()));
            if let Some(d) = d.as_mapping_mut() {
                if !d.contains_key(key(new)) {
                    d.insert(key(new), v);
                }
            }
            moved = true;
        }
        moved
    };
    changed |= decisions(policy);
    for (old, new) in [
        ("overwrites", "overrides"),
        ("cache_dir", "source_cache_dir"),
    ] {
        if let Some(v) = policy.remove(key(old)) {
            if !policy.contains_key(key(new)) {
                policy.insert(key(new), v);
            }
            changed = true;
        }
    }
    if let Some(overrides) = policy.get_mut("overrides").and_then(Value::as_sequence_mut) {
        for o in overrides.iter_mut().filter_map(Value::as_mapping_mut) {
            changed |= decisions(o);
        }
    }
    if let Some(sources) = policy.get_mut("sources").and_then(Value::as_sequence_mut) {
        for source in sources.iter_mut().filter_map(Value::as_mapping_mut) {
            if source.contains_key(key("type")) {
                continue;
            }
            let typed = ["path", "git", "oci"]
                .into_iter()
                .find(|k| source.contains_key(key(k)));
            match typed {
                Some("path") => {}
                Some(kind) => {
                    let url = source.remove(key(kind)).expect("found above");
                    source.insert(key("url"), url);
                }
                _ => continue,
            }
            source.insert(key("type"), key(typed.expect("matched")));
            changed = true;
        }
    }
    changed
}

/// Keys of TerraCi's older policy syntax and the keys that replaced them.
fn renamed(path: &str, key: &str) -> Option<&'static str> {
    if path != "extensions.policy" {
        return None;
    }
    Some(match key {
        "on_failure" | "failure_action" => "decisions.deny",
        "on_warning" | "warning_action" => "decisions.warn",
        "overwrites" => "overrides",
        "cache_dir" => "source_cache_dir",
        _ => return None,
    })
}

fn finish(
    mut config: Config,
    path: Option<Utf8PathBuf>,
    mut warnings: Vec<String>,
) -> Result<LoadedConfig, ConfigError> {
    let pattern = Pattern::parse(&config.structure.pattern).map_err(|reason| {
        ConfigError::Invalid(format!(
            "structure.pattern `{}` is invalid: {reason}",
            config.structure.pattern
        ))
    })?;
    let pattern = match config.structure.discovery {
        super::Discovery::Pattern => pattern,
        super::Discovery::Roots => {
            if config.structure.pattern != super::Structure::default().pattern {
                warnings.push(
                    "`structure.pattern` is not used with `structure.discovery: roots`: every \
                     directory with Terraform files that is not a library is a root, and its \
                     one component is `module`"
                        .to_owned(),
                );
            }
            Pattern::roots()
        }
    };
    if let Some(name) = config.execution.env.keys().find(|k| !super::is_env_name(k)) {
        return Err(ConfigError::Invalid(format!(
            "execution.env: {}",
            super::env_name_error(name)
        )));
    }
    // TerraCi's older per-provider spellings of the execution keys: the file that has
    // them meant them.
    if let Some(binary) = config
        .extensions
        .github
        .as_ref()
        .and_then(|github| github.terraform_binary)
    {
        config.execution.binary = binary;
    }
    if let Some(gitlab) = &config.extensions.gitlab {
        if let Some(binary) = gitlab.terraform_binary {
            config.execution.binary = binary;
        }
        if let Some(init) = gitlab.init_enabled {
            config.execution.init_enabled = init;
        }
    }
    if let Some(dir) = &config.service_dir {
        let path = camino::Utf8Path::new(dir);
        let escapes = path.is_absolute()
            || dir.is_empty()
            || path
                .components()
                .any(|c| matches!(c, camino::Utf8Component::ParentDir));
        if escapes {
            return Err(ConfigError::Invalid(format!(
                "service_dir `{}` must be a relative path inside the project (terraci writes \
                 its logs and reports there)",
                crate::escape::printable(dir)
            )));
        }
    }
    if let Some(policy) = &config.extensions.policy {
        if policy
            .source_cache_dir
            .as_deref()
            .is_some_and(|d| !d.is_empty())
        {
            warnings.push(
                "extensions.policy.source_cache_dir is ignored: pulled policies are kept in the \
                 per-user cache (TERRACI_CACHE_HOME), never in the checkout"
                    .to_owned(),
            );
        }
    }
    if let Some(cost) = &config.extensions.cost {
        warnings.extend(cost_warnings(cost));
    }
    for name in config.extensions.ignored_sections() {
        warnings.push(format!(
            "extensions.{name} is a TerraCi plugin that terraci does not implement; the section is ignored"
        ));
    }
    if let Some(Err(why)) = config.extensions.tfupdate.as_ref().map(|s| s.settings()) {
        warnings.push(format!(
            "{why}; `terraci tfupdate` refuses the section until it is fixed"
        ));
    }
    Ok(LoadedConfig {
        config,
        pattern,
        path,
        warnings,
    })
}

/// The `extensions.cost` keys that have no effect.
fn cost_warnings(cost: &super::Cost) -> Vec<String> {
    let mut out = Vec::new();
    if cost.cache_dir.as_deref().is_some_and(|d| !d.is_empty()) {
        out.push(
            "extensions.cost.cache_dir is ignored: prices are cached in the per-user cache \
             (TERRACI_CACHE_HOME), never in the checkout"
                .to_owned(),
        );
    }
    if let Some(backend) = cost
        .blob_cache
        .as_ref()
        .and_then(|b| b.backend.as_deref())
        .filter(|b| !b.is_empty() && *b != "diskblob")
    {
        out.push(format!(
            "extensions.cost.blob_cache.backend `{}` is ignored: terraci caches prices on disk, in the per-user cache (TERRACI_CACHE_HOME)",
            crate::escape::printable(backend)
        ));
    }
    for (name, provider) in &cost.providers {
        if name != "aws" && provider.enabled {
            out.push(format!(
                "extensions.cost.providers.{} has no effect: terraci prices AWS only",
                crate::escape::printable(name)
            ));
        }
    }
    out
}

/// Parses config text. `file` names the file in messages.
pub fn parse_config(text: &str, file: &str) -> Result<Config, ConfigError> {
    if text.trim().is_empty() {
        return Ok(Config::default());
    }
    // Merge keys (`<<: *x`) need a pass through `Value`; that loses positions, so the
    // direct path is tried first and keeps line numbers for ordinary files.
    let uses_merge = text.contains("<<");
    let result: Result<Config, serde_yaml::Error> = if uses_merge {
        serde_yaml::from_str::<serde_yaml::Value>(text).and_then(|mut value| {
            value.apply_merge()?;
            serde_yaml::from_value(value)
        })
    } else {
        serde_yaml::from_str(text)
    };
    result.map_err(|e| ConfigError::Invalid(describe_yaml_error(&e, text, file)))
}

/// Turns serde_yaml's message into ours: names the key path, file position and, for an
/// unknown key, the closest valid key.
fn describe_yaml_error(err: &serde_yaml::Error, text: &str, file: &str) -> String {
    let raw = err.to_string();
    // serde_yaml: "<path>: unknown field `x`, expected one of `a`, `b` at line L column C"
    let (path, rest) = match raw.split_once(": ") {
        Some((p, r)) if !p.contains(' ') => (Some(p.to_owned()), r.to_owned()),
        _ => (None, raw.clone()),
    };
    let location = err
        .location()
        .map(|l| (l.line(), l.column()))
        .or_else(|| unknown_field_name(&rest).and_then(|k| find_key_position(text, &k)));
    let at = match location {
        Some((line, col)) => format!("{file}:{line}:{col}"),
        None => file.to_owned(),
    };
    if let Some(key) = unknown_field_name(&rest) {
        let expected = expected_fields(&rest);
        let full = match &path {
            Some(p) => format!("{p}.{key}"),
            None => key.clone(),
        };
        let mut msg = format!("unknown key `{full}` at {at}");
        if let Some(best) = closest(&key, &expected) {
            msg.push_str(&format!(", did you mean `{best}`?"));
        } else if !expected.is_empty() {
            msg.push_str(&format!(
                "; valid keys here: {}",
                expected
                    .iter()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        return msg;
    }
    let rest = strip_location(&rest);
    match path {
        Some(p) => format!("{p}: {rest} (at {at})"),
        None => format!("{rest} (at {at})"),
    }
}

fn strip_location(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_owned(),
        None => msg.to_owned(),
    }
}

fn unknown_field_name(msg: &str) -> Option<String> {
    let rest = msg.strip_prefix("unknown field `")?;
    let end = rest.find('`')?;
    Some(rest[..end].to_owned())
}

fn expected_fields(msg: &str) -> Vec<String> {
    let Some(i) = msg.find("expected ") else {
        return Vec::new();
    };
    msg[i..]
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

fn find_key_position(text: &str, key: &str) -> Option<(usize, usize)> {
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let trimmed = trimmed.strip_prefix("- ").unwrap_or(trimmed);
        if let Some(rest) = trimmed.strip_prefix(key) {
            if rest.trim_start().starts_with(':') {
                return Some((i + 1, line.len() - trimmed.len() + 1));
            }
        }
    }
    None
}

/// The candidate closest to `word` by edit distance, if close enough to be a typo.
pub fn closest<'a>(word: &str, candidates: &'a [String]) -> Option<&'a str> {
    candidates
        .iter()
        .map(|c| (edit_distance(word, c), c))
        .filter(|(d, c)| *d <= 3.max(c.len() / 3) && *d < c.len().max(word.len()))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c.as_str())
}

/// Levenshtein distance (by chars): the "did you mean" of config keys, job types,
/// workspaces and remote outputs; names are short.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let next = (row[j] + 1)
                .min(row[j + 1] + 1)
                .min(prev + usize::from(ca != cb));
            prev = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terracis_documented_policy_syntax_loads_and_takes_effect() {
        let text = "policy:\n  enabled: true\n  sources:\n    - path: terraform\n    - git: ssh://h/p.git\n      ref: main\n    - oci: oci://r.example/p:v1\n  on_failure: warn\n  on_warning: ignore\n  cache_dir: .terraci/policies\n  overwrites:\n    - match: \"**/prod/**\"\n      on_failure: block\n";
        let (config, warnings) = parse_config_with_warnings(text, ".terraci.yaml").unwrap();
        assert_eq!(warnings, Vec::<String>::new());
        let policy = config.extensions.policy.expect("the policy section");
        assert!(policy.enabled);
        assert_eq!(
            policy.sources,
            [
                crate::config::PolicySource::Path {
                    path: "terraform".into()
                },
                crate::config::PolicySource::Git {
                    url: "ssh://h/p.git".into(),
                    reference: Some("main".into())
                },
                crate::config::PolicySource::Oci {
                    url: "oci://r.example/p:v1".into()
                },
            ]
        );
        assert_eq!(policy.decisions.deny, Some(crate::config::Action::Warn));
        assert_eq!(policy.decisions.warn, Some(crate::config::Action::Ignore));
        assert_eq!(
            policy.overrides[0].decisions.deny,
            Some(crate::config::Action::Block)
        );
        assert_eq!(
            policy.source_cache_dir.as_deref(),
            Some(".terraci/policies")
        );
    }

    #[test]
    fn a_policy_source_keeps_its_variant_keys_and_old_keys_take_effect() {
        let text = "extensions:\n  policy:\n    on_failure: warn\n    sources:\n      - type: git\n        url: ssh://h/p.git\n        ref: v1\n        depth: 1\n      - type: path\n        path: p\n";
        let (config, warnings) = parse_config_with_warnings(text, ".terraci.yaml").unwrap();
        assert_eq!(
            warnings,
            ["extensions.policy.sources[0].depth is not a key terraci knows; it has no effect"]
        );
        let policy = config.extensions.policy.unwrap();
        assert_eq!(policy.decisions.deny, Some(crate::config::Action::Warn));
        assert_eq!(
            policy.sources[0],
            crate::config::PolicySource::Git {
                url: "ssh://h/p.git".into(),
                reference: Some("v1".into())
            }
        );
    }

    #[test]
    fn unknown_keys_under_extensions_are_warnings_core_keys_stay_strict() {
        let text = "structure:\n  pattern: \"{env}/{module}\"\nextensions:\n  github:\n    auto_approve: true\n    runs_on: self-hosted\n  gitlab:\n    imgae: x\n  diskblob:\n    path: /tmp\n";
        let (config, warnings) = parse_config_with_warnings(text, ".terraci.yaml").expect("loads");
        assert_eq!(
            warnings,
            [
                "extensions.github.auto_approve is not a key terraci knows; it has no effect",
                "extensions.gitlab.imgae is not a key terraci knows; it has no effect (did you mean `image`?)",
                "extensions.diskblob is not a section terraci knows (a TerraCi plugin's?); it has no effect",
            ]
        );
        let github = config.extensions.github.expect("github section");
        assert_eq!(github.runs_on.as_deref(), Some("self-hosted"));
        // A typo in a core key is still an error.
        let typo = "structur:\n  pattern: x\nextensions:\n  diskblob: {}\n";
        assert!(parse_config_with_warnings(typo, ".terraci.yaml").is_err());
    }

    #[test]
    fn unknown_top_level_key_is_named_with_position_and_suggestion() {
        let err = parse_config("structur:\n  pattern: \"{a}/{b}\"\n", ".terraci.yaml").unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown key `structur` at .terraci.yaml:1:1, did you mean `structure`?"
        );
    }

    #[test]
    fn unknown_nested_key_names_its_path() {
        let text = "execution:\n  binary: tofu\n  init_enabeld: false\n";
        let err = parse_config(text, ".terraci.yaml").unwrap_err().to_string();
        assert_eq!(
            err,
            "unknown key `execution.init_enabeld` at .terraci.yaml:3:3, did you mean `init_enabled`?"
        );
    }

    #[test]
    fn merge_keys_apply() {
        let text = "x: &base\n  binary: tofu\nexecution:\n  <<: *base\n  parallelism: 2\n";
        // `x` is not a config key: anchors must live inside known keys.
        assert!(parse_config(text, "c").is_err());
        let text = "execution: &e\n  binary: tofu\n";
        let c = parse_config(text, "c").unwrap();
        assert_eq!(c.execution.binary, super::super::Binary::Tofu);
        let text = "extensions:\n  gitlab:\n    variables: &v\n      A: \"1\"\n  github:\n    env:\n      <<: *v\n      B: \"2\"\n";
        let c = parse_config(text, "c").unwrap();
        let env = &c.extensions.github.unwrap().env;
        assert_eq!(env.get("A").map(String::as_str), Some("1"));
        assert_eq!(env.get("B").map(String::as_str), Some("2"));
    }

    #[test]
    fn the_cost_keys_take_effect_and_only_those_without_effect_warn() {
        let text = "extensions:\n  cost:\n    providers:\n      aws:\n        enabled: true\n    cache_ttl: \"12h\"\n";
        let loaded = load_config_text(text, ".terraci.yaml").expect("loads");
        let cost = loaded.config.extensions.cost.as_ref().expect("cost");
        assert!(cost.is_enabled());
        assert_eq!(
            (cost.ttl(), cost.namespace()),
            (Some("12h"), "cost/pricing")
        );
        assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);

        let text = "extensions:\n  cost:\n    enabled: true\n    cache_dir: ~/.terraci/pricing\n    cache_ttl: 1h\n    blob_cache: {backend: s3blob, namespace: prices, ttl: 2h}\n    providers: {gcp: {enabled: true}}\n";
        let loaded = load_config_text(text, ".terraci.yaml").expect("loads");
        let cost = loaded.config.extensions.cost.as_ref().expect("cost");
        assert!(cost.is_enabled());
        assert_eq!((cost.ttl(), cost.namespace()), (Some("2h"), "prices"));
        assert_eq!(
            loaded.warnings,
            [
                "extensions.cost.cache_dir is ignored: prices are cached in the per-user cache (TERRACI_CACHE_HOME), never in the checkout",
                "extensions.cost.blob_cache.backend `s3blob` is ignored: terraci caches prices on disk, in the per-user cache (TERRACI_CACHE_HOME)",
                "extensions.cost.providers.gcp has no effect: terraci prices AWS only",
            ]
        );
        let off = load_config_text("extensions:\n  cost: {}\n", "c").expect("loads");
        assert!(!off.config.extensions.cost.expect("cost").is_enabled());
    }

    #[test]
    fn a_tfupdate_section_terraci_cannot_read_loads_with_a_warning() {
        for (section, said) in [
            (
                "  tfupdate:\n    policy: latest\n",
                "extensions.tfupdate.policy: invalid type: string \"latest\"",
            ),
            (
                "  tfupdate:\n    enabled: true\n    budget: 123456789012345678901234567890\n",
                "extensions.tfupdate.budget: unknown field `budget`",
            ),
        ] {
            let text = format!("extensions:\n{section}");
            let loaded = load_config_text(&text, ".terraci.yaml").expect("the config loads");
            assert!(
                loaded
                    .warnings
                    .iter()
                    .any(|w| w.starts_with(said)
                        && w.ends_with("refuses the section until it is fixed")),
                "{:?}",
                loaded.warnings
            );
        }
        let text = "extensions:\n  tfupdate:\n    enabled: true\n    policy:\n      bump: minor\n";
        let loaded = load_config_text(text, ".terraci.yaml").expect("the config loads");
        assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
        let settings = loaded
            .config
            .extensions
            .tfupdate
            .unwrap()
            .settings()
            .unwrap();
        assert_eq!(settings.policy.bump.as_deref(), Some("minor"));
    }

    #[test]
    fn a_huge_integer_in_an_ignored_plugin_section_is_no_error() {
        let text = "extensions:\n  update:\n    budget: 123456789012345678901234567890\n    list: [1, -99999999999999999999999]\n";
        let c = parse_config(text, ".terraci.yaml").expect("an ignored section loads");
        assert_eq!(c.extensions.ignored_sections(), ["update"]);
    }

    #[test]
    fn bad_value_type_names_the_key() {
        let err = parse_config("execution:\n  parallelism: many\n", ".terraci.yaml")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("execution.parallelism: invalid type"),
            "{err}"
        );
        assert!(err.contains(".terraci.yaml:2:16"), "{err}");
    }
}
