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
    let config = parse_config(&text, display)?;
    finish(config, Some(path.to_owned()), Vec::new())
}

fn finish(
    config: Config,
    path: Option<Utf8PathBuf>,
    mut warnings: Vec<String>,
) -> Result<LoadedConfig, ConfigError> {
    let pattern = Pattern::parse(&config.structure.pattern).map_err(|reason| {
        ConfigError::Invalid(format!(
            "structure.pattern `{}` is invalid: {reason}",
            config.structure.pattern
        ))
    })?;
    if let Some(name) = config.execution.env.keys().find(|k| !super::is_env_name(k)) {
        return Err(ConfigError::Invalid(format!(
            "execution.env: {}",
            super::env_name_error(name)
        )));
    }
    for name in config.extensions.ignored_sections() {
        warnings.push(format!(
            "extensions.{name} is a TerraCi plugin that terraci does not implement; the section is ignored"
        ));
    }
    Ok(LoadedConfig {
        config,
        pattern,
        path,
        warnings,
    })
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

fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != cb);
            cur.push((prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn a_huge_integer_in_an_ignored_plugin_section_is_no_error() {
        let text = "extensions:\n  cost:\n    budget: 123456789012345678901234567890\n    list: [1, -99999999999999999999999]\n";
        let c = parse_config(text, ".terraci.yaml").expect("an ignored section loads");
        assert_eq!(c.extensions.ignored_sections(), ["cost"]);
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
