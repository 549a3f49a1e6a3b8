//! Merge-request / pull-request labels: TerraCi's templates, and the record of which
//! labels terraci added.
//!
//! A template without placeholders is a static label. One with module placeholders
//! (each pattern segment such as `{service}`, `{environment}`, `{region}`, `{module}`,
//! and `{env}`, `{module_id}`, `{module_path}`, `{status}`) gives one label per module
//! with changes or a failed plan; one with a resource placeholder (`{resource_type}`,
//! `{resource_name}`, `{resource_address}`, `{resource_action}`) one per changed resource
//! of the modules with changes. A placeholder without a value skips that label with a
//! warning. The labels are sorted and deduplicated; the comment records them
//! ([`encode_managed`]) so a later run removes only labels it added itself.

use std::collections::BTreeSet;

use super::{ModuleResult, Status};

const MANAGED_PREFIX: &str = "<!-- terraci-labels:";
const MANAGED_SUFFIX: &str = "-->";

/// The labels of `templates` for `modules`, and a warning for each one skipped.
pub fn resolve(templates: &[String], modules: &[ModuleResult]) -> (Vec<String>, Vec<String>) {
    let mut labels = BTreeSet::new();
    let mut warnings = Vec::new();
    for template in templates {
        let names = placeholders(template);
        if names.is_empty() {
            add(&mut labels, &mut warnings, template, template, "");
            continue;
        }
        let per_resource = names.iter().any(|n| n.starts_with("resource_"));
        for m in modules {
            let mut values: Vec<(String, String)> = m
                .components
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            if let Some(env) = m.components.get("environment") {
                values.push(("env".into(), env.clone()));
            }
            values.push(("module_id".into(), m.id.clone()));
            values.push(("module_path".into(), m.id.clone()));
            let status = match m.status {
                Status::Changes => "changes",
                Status::NoChanges => "no_changes",
                Status::Failed => "failed",
                Status::Unknown => "unknown",
            };
            values.push(("status".into(), status.into()));
            if per_resource {
                if m.status != Status::Changes {
                    continue;
                }
                let Some(plan) = &m.plan else { continue };
                for r in plan.resources.iter().filter(|r| r.action.is_change()) {
                    let mut values = values.clone();
                    values.push(("resource_type".into(), r.resource_type.clone()));
                    values.push(("resource_name".into(), r.name.clone()));
                    values.push(("resource_address".into(), r.address.clone()));
                    values.push(("resource_action".into(), r.action.word().to_owned()));
                    let rendered = fill(template, &names, &values);
                    let context = format!("{}: {}", m.id, r.address);
                    apply(&mut labels, &mut warnings, template, rendered, &context);
                }
            } else if m.status != Status::NoChanges {
                let rendered = fill(template, &names, &values);
                apply(&mut labels, &mut warnings, template, rendered, &m.id);
            }
        }
    }
    (labels.into_iter().collect(), warnings)
}

fn apply(
    labels: &mut BTreeSet<String>,
    warnings: &mut Vec<String>,
    template: &str,
    rendered: Result<String, Vec<String>>,
    context: &str,
) {
    match rendered {
        Ok(label) => add(labels, warnings, template, &label, context),
        Err(missing) => warnings.push(format!(
            "the label {template:?} is skipped for {}: no value for {}",
            terraci_db::escape::printable(context),
            missing.join(", ")
        )),
    }
}

fn add(
    labels: &mut BTreeSet<String>,
    warnings: &mut Vec<String>,
    template: &str,
    label: &str,
    context: &str,
) {
    let label = label.trim();
    let problem = if label.is_empty() {
        Some("it is empty")
    } else if label.contains(',') {
        // GitLab's API takes labels as one comma-separated list.
        Some("it holds a comma")
    } else if label.chars().any(terraci_db::escape::is_unsafe_char) {
        Some("it holds a control character")
    } else {
        None
    };
    match problem {
        None => {
            labels.insert(label.to_owned());
        }
        Some(why) => {
            let for_what = if context.is_empty() {
                String::new()
            } else {
                format!(" for {}", terraci_db::escape::printable(context))
            };
            warnings.push(format!(
                "the label {template:?} is skipped{for_what}: {why}"
            ));
        }
    }
}

/// The distinct `{name}` placeholders of `template`, in order.
fn placeholders(template: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else { break };
        let name = &after[..close];
        if !name.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !out.iter().any(|n| n == name)
        {
            out.push(name.to_owned());
        }
        rest = &after[close + 1..];
    }
    out
}

/// `template` with each placeholder replaced, or the placeholders that have no value.
fn fill(
    template: &str,
    names: &[String],
    values: &[(String, String)],
) -> Result<String, Vec<String>> {
    let mut out = template.to_owned();
    let mut missing = Vec::new();
    for name in names {
        match values
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.trim())
            .filter(|v| !v.is_empty())
        {
            Some(value) => out = out.replace(&format!("{{{name}}}"), value),
            None => missing.push(format!("{{{name}}}")),
        }
    }
    if missing.is_empty() {
        Ok(out)
    } else {
        Err(missing)
    }
}

/// The hidden line that records `labels` in the comment: their JSON list, hex-encoded
/// (nothing a label holds can end the HTML comment).
pub(crate) fn encode_managed(labels: &[String]) -> String {
    let json = serde_json::to_string(labels).unwrap_or_else(|_| "[]".into());
    let hex: String = json.bytes().map(|b| format!("{b:02x}")).collect();
    format!("{MANAGED_PREFIX} {hex} {MANAGED_SUFFIX}")
}

/// The labels an earlier comment recorded (none when it has no valid record).
pub(crate) fn decode_managed(body: &str) -> Vec<String> {
    let Some(start) = body.find(MANAGED_PREFIX) else {
        return Vec::new();
    };
    let rest = &body[start + MANAGED_PREFIX.len()..];
    let Some(end) = rest.find(MANAGED_SUFFIX) else {
        return Vec::new();
    };
    let hex = rest[..end].trim();
    if hex.len() % 2 != 0 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Vec::new();
    }
    let bytes: Option<Vec<u8>> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).ok())
        .collect();
    let mut labels: Vec<String> = bytes
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    labels.sort();
    labels.dedup();
    labels
}

/// What to add (in `current`, not in `previous`) and what to remove (added before, no
/// longer wanted). A label someone else set is never in `previous`, so never removed.
pub(crate) fn diff(previous: &[String], current: &[String]) -> (Vec<String>, Vec<String>) {
    let add = current
        .iter()
        .filter(|l| !previous.contains(l))
        .cloned()
        .collect();
    let remove = previous
        .iter()
        .filter(|l| !current.contains(l))
        .cloned()
        .collect();
    (add, remove)
}
