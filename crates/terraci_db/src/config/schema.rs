//! The JSON Schema of `.terraci.yaml` (draft 2020-12), derived from the same types that
//! parse the file, so the schema cannot drift from the parser.
//!
//! Input: the [`Config`] type. Output: the schema as pretty-printed JSON text.

use super::Config;

/// The schema of `.terraci.yaml`: every `deny_unknown_fields` type is a closed object
/// (`additionalProperties: false`) and doc comments are descriptions.
pub fn config_schema() -> String {
    let generator = schemars::generate::SchemaSettings::draft2020_12().into_generator();
    let mut schema = generator.into_root_schema_for::<Config>();
    schema.insert(
        "title".into(),
        "terraci configuration (.terraci.yaml)".into(),
    );
    let mut text = serde_json::to_string_pretty(&schema).expect("a schema is always JSON");
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    //! The schema is checked against the example configs of this repo with a focused
    //! validator below, not a general one: the keywords schemars emits for these types
    //! (`$ref`, `type`, `properties`, `additionalProperties`, `required`, `items`, `enum`,
    //! `const`, `anyOf`, `oneOf`, `allOf`, `minimum`) are all it needs, and a full
    //! validator crate would pull in a URL/IDNA/ICU stack for one test.
    #![allow(clippy::disallowed_methods)]

    use serde_json::{Map, Value};

    use super::*;

    fn schema() -> Value {
        serde_json::from_str(&config_schema()).expect("the schema is valid JSON")
    }

    /// Violations of `schema` by `value`, each as `path: reason`.
    fn violations(root: &Value, schema: &Value, value: &Value, path: &str, out: &mut Vec<String>) {
        let obj = match schema {
            Value::Bool(true) => return,
            Value::Bool(false) => return out.push(format!("{path}: not allowed")),
            Value::Object(obj) => obj,
            other => panic!("unexpected schema {other}"),
        };
        if let Some(Value::String(reference)) = obj.get("$ref") {
            let name = reference
                .strip_prefix("#/$defs/")
                .unwrap_or_else(|| panic!("unsupported $ref {reference}"));
            violations(root, &root["$defs"][name], value, path, out);
        }
        if let Some(types) = obj.get("type") {
            let allowed: Vec<&str> = match types {
                Value::String(t) => vec![t.as_str()],
                Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
                other => panic!("unexpected type {other}"),
            };
            if !allowed.iter().any(|t| has_type(value, t)) {
                return out.push(format!("{path}: expected {allowed:?}, got {value}"));
            }
        }
        if let Some(Value::Array(options)) = obj.get("enum") {
            if !options.contains(value) {
                out.push(format!("{path}: {value} is not one of {options:?}"));
            }
        }
        if let Some(expected) = obj.get("const") {
            if expected != value {
                out.push(format!("{path}: expected {expected}, got {value}"));
            }
        }
        if let Some(Value::Number(min)) = obj.get("minimum") {
            if let (Some(min), Some(n)) = (min.as_f64(), value.as_f64()) {
                if n < min {
                    out.push(format!("{path}: {n} is below {min}"));
                }
            }
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(branches)) = obj.get(key) {
                let matching = branches
                    .iter()
                    .filter(|b| {
                        let mut errs = Vec::new();
                        violations(root, b, value, path, &mut errs);
                        errs.is_empty()
                    })
                    .count();
                let ok = if key == "oneOf" {
                    matching == 1
                } else {
                    matching > 0
                };
                if !ok {
                    out.push(format!(
                        "{path}: {matching} branches of {key} match {value}"
                    ));
                }
            }
        }
        if let Some(Value::Array(all)) = obj.get("allOf") {
            for branch in all {
                violations(root, branch, value, path, out);
            }
        }
        if let Value::Object(map) = value {
            object_violations(root, obj, map, path, out);
        }
        if let (Value::Array(items), Some(item_schema)) = (value, obj.get("items")) {
            for (i, item) in items.iter().enumerate() {
                violations(root, item_schema, item, &format!("{path}[{i}]"), out);
            }
        }
    }

    fn object_violations(
        root: &Value,
        schema: &Map<String, Value>,
        map: &Map<String, Value>,
        path: &str,
        out: &mut Vec<String>,
    ) {
        let empty = Map::new();
        let properties = schema
            .get("properties")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        for (key, item) in map {
            let child = format!("{path}.{key}");
            match (properties.get(key), schema.get("additionalProperties")) {
                (Some(s), _) | (None, Some(s)) => violations(root, s, item, &child, out),
                (None, None) => {}
            }
        }
        if let Some(Value::Array(required)) = schema.get("required") {
            for key in required.iter().filter_map(Value::as_str) {
                if !map.contains_key(key) {
                    out.push(format!("{path}: missing `{key}`"));
                }
            }
        }
    }

    fn has_type(value: &Value, ty: &str) -> bool {
        match ty {
            "null" => value.is_null(),
            "boolean" => value.is_boolean(),
            "string" => value.is_string(),
            "number" => value.is_number(),
            "integer" => value.is_i64() || value.is_u64(),
            "array" => value.is_array(),
            "object" => value.is_object(),
            other => panic!("unknown type {other}"),
        }
    }

    /// A config file as the loader sees it: merge keys applied, empty means `{}`.
    fn config_json(text: &str) -> Value {
        let mut yaml: serde_yaml::Value = serde_yaml::from_str(text).expect("YAML");
        yaml.apply_merge().expect("merge keys");
        match serde_json::to_value(yaml).expect("YAML with string keys is JSON") {
            Value::Null => Value::Object(Map::new()),
            json => json,
        }
    }

    fn check(text: &str) -> Vec<String> {
        let schema = schema();
        let mut out = Vec::new();
        violations(&schema, &schema, &config_json(text), "$", &mut out);
        out
    }

    #[test]
    fn schema_is_draft_2020_12_and_lists_every_top_level_key() {
        let schema = schema();
        assert_eq!(
            schema["$schema"],
            "https://json-schema.org/draft/2020-12/schema"
        );
        assert_eq!(schema["additionalProperties"], false);
        let properties = schema["properties"].as_object().expect("properties");
        let defaults = serde_json::to_value(Config::default()).expect("config serialises");
        for key in defaults.as_object().expect("config is a map").keys() {
            assert!(properties.contains_key(key), "`{key}` is not in the schema");
        }
        for key in [
            "structure",
            "exclude",
            "include",
            "library_modules",
            "execution",
            "extensions",
        ] {
            assert!(properties.contains_key(key), "`{key}` is not in the schema");
        }
        // Doc comments become descriptions.
        assert!(
            schema["$defs"]["Structure"]["properties"]["pattern"]["description"]
                .as_str()
                .is_some_and(|d| d.contains("{service}"))
        );
    }

    #[test]
    fn example_configs_validate() {
        let root =
            camino::Utf8Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join("fixtures");
        let mut files = Vec::new();
        for dir in std::fs::read_dir(&root).expect("fixtures") {
            let dir = dir.expect("entry").path();
            files.push(dir.join(".terraci.yaml"));
        }
        for file in std::fs::read_dir(root.join("render")).expect("fixtures/render") {
            files.push(file.expect("entry").path());
        }
        files.retain(|f| f.is_file() && f.extension().is_some_and(|e| e == "yaml"));
        files.sort();
        assert!(files.len() > 10, "fixtures found: {files:?}");
        for file in files {
            let text = std::fs::read_to_string(&file).expect("read");
            let errors = check(&text);
            assert!(errors.is_empty(), "{}: {errors:#?}", file.display());
        }
    }

    #[test]
    fn the_validator_rejects_what_the_parser_rejects() {
        for bad in [
            "structur: {pattern: \"{a}/{b}\"}",
            "execution: {binary: terraforn}",
            "execution: {parallelism: -1}",
            "extensions: {gitlab: {rules: [{iff: x}]}}",
            "extensions: {gitlab: {overwrites: [{when: manual}]}}",
            "extensions: {github: {job_defaults: {steps_before: [{uses: 1.5, bogus: 1}]}}}",
        ] {
            assert!(
                super::super::parse_config(bad, "t.yaml").is_err(),
                "parser accepts {bad}"
            );
            assert!(!check(bad).is_empty(), "schema accepts {bad}");
        }
        assert!(check("extensions: {update: {anything: [1, 2]}}").is_empty());
        assert!(check("execution: {env: {TF_INPUT: false, N: 20}}").is_empty());
    }
}
