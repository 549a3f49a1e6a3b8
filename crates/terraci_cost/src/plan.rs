//! What an estimate reads of a module's `plan.json` (`terraform show -json`).
//!
//! Input: the plan's bytes. Output: [`CostPlan`]: each managed resource change with its
//! actions and its values before and after, and the region of the default `aws`
//! provider (a constant, or a root variable's value). Keys the estimate does not use are
//! ignored; a missing or mistyped key it needs is an error with its line and column.

use serde::Deserialize;
use serde_json::Value;

#[derive(Debug, Deserialize)]
struct PlanJson {
    format_version: String,
    #[serde(default)]
    resource_changes: Vec<ResourceChangeJson>,
    #[serde(default)]
    variables: serde_json::Map<String, Value>,
    #[serde(default)]
    configuration: Option<Configuration>,
}

#[derive(Debug, Deserialize)]
struct ResourceChangeJson {
    address: String,
    mode: String,
    #[serde(rename = "type")]
    resource_type: String,
    change: ChangeJson,
}

#[derive(Debug, Deserialize)]
struct ChangeJson {
    actions: Vec<String>,
    #[serde(default)]
    before: Option<Value>,
    #[serde(default)]
    after: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct Configuration {
    #[serde(default)]
    provider_config: serde_json::Map<String, Value>,
}

/// One managed resource of the plan.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub address: String,
    pub resource_type: String,
    /// Terraform's actions (`["create"]`, `["delete", "create"]`...).
    pub actions: Vec<String>,
    /// The resource's values before the plan; `None` when it does not exist yet.
    pub before: Option<Value>,
    /// Its values after the plan; `None` when it is destroyed.
    pub after: Option<Value>,
}

impl Change {
    /// The action as one word.
    pub fn action(&self) -> &'static str {
        let a: Vec<&str> = self.actions.iter().map(String::as_str).collect();
        match a.as_slice() {
            ["create"] => "create",
            ["update"] => "update",
            ["delete"] => "delete",
            ["delete", "create"] | ["create", "delete"] => "replace",
            ["no-op"] | [] => "no-op",
            ["read"] => "read",
            ["forget"] => "forget",
            _ => "other",
        }
    }
}

/// A plan as the estimate reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct CostPlan {
    /// Sorted by address.
    pub changes: Vec<Change>,
    /// The `aws` provider's region, when the plan says it.
    pub region: Option<String>,
}

/// Parses `plan.json`; the error says what is wrong, with the line and column.
pub fn parse_plan(bytes: &[u8]) -> Result<CostPlan, String> {
    let json: PlanJson = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    if json.format_version.split('.').next() != Some("1") {
        return Err(format!(
            "format_version {:?} is not one terraci reads (1.x)",
            json.format_version
        ));
    }
    let region = json
        .configuration
        .as_ref()
        .and_then(|c| c.provider_config.get("aws"))
        .and_then(|aws| provider_region(aws, &json.variables));
    let mut changes: Vec<Change> = json
        .resource_changes
        .into_iter()
        .filter(|r| r.mode == "managed")
        .map(|r| Change {
            address: r.address,
            resource_type: r.resource_type,
            actions: r.change.actions,
            before: r.change.before.filter(|v| !v.is_null()),
            after: r.change.after.filter(|v| !v.is_null()),
        })
        .collect();
    changes.sort_by(|a, b| a.address.cmp(&b.address));
    Ok(CostPlan { changes, region })
}

/// `region = "eu-central-1"` or `region = var.region` (the root variable's value).
fn provider_region(aws: &Value, variables: &serde_json::Map<String, Value>) -> Option<String> {
    let region = aws.pointer("/expressions/region")?;
    if let Some(constant) = region.get("constant_value").and_then(Value::as_str) {
        return Some(constant.to_owned());
    }
    let references = region.get("references")?.as_array()?;
    references.iter().filter_map(Value::as_str).find_map(|r| {
        let name = r.strip_prefix("var.")?;
        variables
            .get(name)?
            .get("value")?
            .as_str()
            .map(str::to_owned)
    })
}

/// A region named by a segment of the module's path (`platform/prod/eu-central-1/vpc`):
/// what TerraCi uses, and terraci when the plan does not say.
pub fn region_in_path(module: &str) -> Option<String> {
    module
        .split('/')
        .find(|segment| looks_like_region(segment))
        .map(str::to_owned)
}

/// `us-east-1`, `eu-central-2`, `us-gov-west-1`, `ap-southeast-4`...
pub(crate) fn looks_like_region(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    let (first, last) = match (parts.first(), parts.last()) {
        (Some(f), Some(l)) => (f, l),
        _ => return false,
    };
    (3..=4).contains(&parts.len())
        && first.len() == 2
        && first.bytes().all(|b| b.is_ascii_lowercase())
        && !last.is_empty()
        && last.bytes().all(|b| b.is_ascii_digit())
        && parts[1..parts.len() - 1]
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_lowercase()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_region_is_the_constant_or_the_variable_it_references() {
        let constant = br#"{"format_version":"1.2","configuration":{"provider_config":{"aws":{"name":"aws","expressions":{"region":{"constant_value":"eu-west-1"}}}}}}"#;
        assert_eq!(
            parse_plan(constant).unwrap().region.as_deref(),
            Some("eu-west-1")
        );
        let variable = br#"{"format_version":"1.2","variables":{"region":{"value":"us-west-2"}},"configuration":{"provider_config":{"aws":{"expressions":{"region":{"references":["var.region"]}}}}}}"#;
        assert_eq!(
            parse_plan(variable).unwrap().region.as_deref(),
            Some("us-west-2")
        );
        assert_eq!(
            parse_plan(br#"{"format_version":"1.2"}"#).unwrap().region,
            None
        );
    }

    #[test]
    fn a_region_in_the_module_path() {
        assert_eq!(
            region_in_path("platform/prod/eu-central-1/vpc").as_deref(),
            Some("eu-central-1")
        );
        assert_eq!(
            region_in_path("gov/us-gov-west-1/app").as_deref(),
            Some("us-gov-west-1")
        );
        assert_eq!(region_in_path("platform/prod/vpc-2/x"), None);
    }

    #[test]
    fn a_wrong_document_says_where() {
        let err = parse_plan(br#"{"format_version":"1.2","resource_changes":[{"address":"a"}]}"#)
            .unwrap_err();
        assert!(
            err.contains("missing field") && err.contains("line 1"),
            "{err}"
        );
        let err = parse_plan(br#"{"format_version":"2.0"}"#).unwrap_err();
        assert!(err.contains("2.0"), "{err}");
    }
}
