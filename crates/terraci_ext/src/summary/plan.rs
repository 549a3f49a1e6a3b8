//! Terraform's JSON plan format (`terraform show -json plan.tfplan`) as far as the summary
//! needs it, and what a plan job leaves beside it (`plan.result.json`).
//!
//! Input: the bytes of `plan.json` / `plan.result.json`. Output: [`Plan`] with each
//! resource change classified as one [`Action`], and [`Counts`]. Unknown keys are
//! ignored (the format grows between Terraform versions); a missing or mistyped key the
//! summary relies on is an error naming it.

use serde::Deserialize;

/// The largest `plan.json` the summary (and `policy check`) reads, unless
/// `--max-plan-size` / `TERRACI_MAX_PLAN_SIZE` says otherwise: plans are often far larger
/// than source files (`--max-file-size` bounds those). A larger one is "too large", never
/// "failed". The plan is parsed into the few fields the comment needs, so memory is about
/// its bytes.
pub const DEFAULT_MAX_PLAN_SIZE: u64 = 512 << 20;

/// The top level of a JSON plan.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct PlanJson {
    pub(crate) format_version: String,
    #[serde(default)]
    pub(crate) terraform_version: Option<String>,
    #[serde(default)]
    pub(crate) resource_changes: Vec<ResourceChangeJson>,
    /// Output name -> change.
    #[serde(default)]
    pub(crate) output_changes: indexmap::IndexMap<String, ChangeJson>,
    /// The plan stopped on an error (Terraform 1.5+ can save such plans).
    #[serde(default)]
    pub(crate) errored: bool,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ResourceChangeJson {
    pub(crate) address: String,
    #[serde(default)]
    pub module_address: Option<String>,
    /// `managed` or `data`.
    pub(crate) mode: String,
    #[serde(rename = "type")]
    pub(crate) resource_type: String,
    pub(crate) name: String,
    pub(crate) change: ChangeJson,
    #[serde(default)]
    pub action_reason: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct ChangeJson {
    pub(crate) actions: Vec<String>,
}

/// What a plan does to one resource or output.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Action {
    Create,
    Update,
    /// Destroyed and created again; `create_first` for `create_before_destroy`.
    Replace {
        create_first: bool,
    },
    Delete,
    /// Read during apply (a data source whose arguments are not known yet).
    Read,
    /// Removed from the state, left in place (`removed { lifecycle { destroy = false } }`).
    Forget,
    NoOp,
    /// An action list this version of terraci does not know, as given.
    Other(String),
}

impl Action {
    pub(crate) fn from_actions(actions: &[String]) -> Action {
        let parts: Vec<&str> = actions.iter().map(String::as_str).collect();
        match parts.as_slice() {
            ["create"] => Action::Create,
            ["update"] => Action::Update,
            ["delete", "create"] => Action::Replace {
                create_first: false,
            },
            ["create", "delete"] => Action::Replace { create_first: true },
            ["delete"] => Action::Delete,
            ["read"] => Action::Read,
            ["forget"] => Action::Forget,
            ["no-op"] | [] => Action::NoOp,
            other => Action::Other(other.join(",")),
        }
    }

    /// The word shown for it.
    pub(crate) fn word(&self) -> &str {
        match self {
            Action::Create => "create",
            Action::Update => "update",
            Action::Replace {
                create_first: false,
            } => "replace",
            Action::Replace { create_first: true } => "replace (create first)",
            Action::Delete => "delete",
            Action::Read => "read",
            Action::Forget => "forget",
            Action::NoOp => "no-op",
            Action::Other(text) => text,
        }
    }

    /// Whether applying the plan changes infrastructure or state for it.
    pub(crate) fn is_change(&self) -> bool {
        !matches!(self, Action::NoOp | Action::Read)
    }
}

/// One resource change of a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResourceChange {
    pub(crate) address: String,
    pub(crate) resource_type: String,
    pub(crate) name: String,
    /// `data` for data sources.
    pub(crate) mode: String,
    pub(crate) action: Action,
}

/// Per-action counts of resources; a replacement counts once, as `replace`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    pub(crate) add: usize,
    pub(crate) change: usize,
    pub(crate) replace: usize,
    pub(crate) destroy: usize,
    pub(crate) read: usize,
    pub(crate) forget: usize,
    pub(crate) no_op: usize,
    /// Unknown action lists (counted as changes).
    pub(crate) other: usize,
}

impl Counts {
    /// Resources that applying the plan changes.
    pub(crate) fn changed(&self) -> usize {
        self.add + self.change + self.replace + self.destroy + self.forget + self.other
    }

    /// Terraform's own line: a replacement is one to add and one to destroy.
    pub(crate) fn terraform_line(&self) -> String {
        let mut line = format!(
            "{} to add, {} to change, {} to destroy",
            self.add + self.replace,
            self.change,
            self.destroy + self.replace
        );
        if self.forget > 0 {
            line.push_str(&format!(", {} to forget", self.forget));
        }
        line
    }
}

/// A parsed plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    pub(crate) terraform_version: Option<String>,
    /// Sorted by address.
    pub(crate) resources: Vec<ResourceChange>,
    /// Output name and its action, sorted by name; no-op outputs left out.
    pub(crate) outputs: Vec<(String, Action)>,
    pub(crate) counts: Counts,
    pub(crate) errored: bool,
}

impl Plan {
    /// Whether applying the plan would change anything (resources, state or outputs).
    pub(crate) fn has_changes(&self) -> bool {
        self.counts.changed() > 0 || !self.outputs.is_empty()
    }
}

/// Why a `plan.json` cannot be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PlanError {
    /// Not JSON, or not a plan: the message has the line and column.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    #[error("format_version {0:?} is not one terraci reads (1.x)")]
    FormatVersion(String),
}

/// Parses `plan.json`. The error says what is wrong, with the line and column.
pub(crate) fn parse_plan(bytes: &[u8]) -> Result<Plan, PlanError> {
    let json: PlanJson = serde_json::from_slice(bytes)?;
    let major = json.format_version.split('.').next().unwrap_or("");
    if major != "1" {
        return Err(PlanError::FormatVersion(json.format_version));
    }
    let mut counts = Counts::default();
    let mut resources: Vec<ResourceChange> = json
        .resource_changes
        .into_iter()
        .map(|r| {
            let action = Action::from_actions(&r.change.actions);
            match action {
                Action::Create => counts.add += 1,
                Action::Update => counts.change += 1,
                Action::Replace { .. } => counts.replace += 1,
                Action::Delete => counts.destroy += 1,
                Action::Read => counts.read += 1,
                Action::Forget => counts.forget += 1,
                Action::NoOp => counts.no_op += 1,
                Action::Other(_) => counts.other += 1,
            }
            ResourceChange {
                address: r.address,
                resource_type: r.resource_type,
                name: r.name,
                mode: r.mode,
                action,
            }
        })
        .collect();
    resources.sort_by(|a, b| a.address.cmp(&b.address));
    let mut outputs: Vec<(String, Action)> = json
        .output_changes
        .into_iter()
        .map(|(name, change)| (name, Action::from_actions(&change.actions)))
        .filter(|(_, action)| *action != Action::NoOp)
        .collect();
    outputs.sort();
    Ok(Plan {
        terraform_version: json.terraform_version,
        resources,
        outputs,
        counts,
        errored: json.errored,
    })
}

/// `plan.result.json`, written by the plan job.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub(crate) struct PlanResult {
    /// `terraform plan -detailed-exitcode`: 0 no changes, 2 changes, else failed.
    pub(crate) exit_code: i64,
    /// The commit the plan was made for; empty when unknown.
    #[serde(default)]
    pub(crate) commit: String,
}

pub(crate) fn parse_result(bytes: &[u8]) -> Result<PlanResult, serde_json::Error> {
    serde_json::from_slice(bytes)
}

#[cfg(test)]
mod tests {
    //! On plans terraform 1.11.4 made (`fixtures/summary/plans/regen.sh`).
    #![allow(clippy::disallowed_methods)]

    use super::*;

    fn fixture(name: &str, file: &str) -> Vec<u8> {
        let path = format!(
            "{}/fixtures/summary/plans/{name}/{file}",
            concat!(env!("CARGO_MANIFEST_DIR"), "/../..")
        );
        std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    fn plan(name: &str) -> Plan {
        parse_plan(&fixture(name, "plan.json")).expect("terraform's plan parses")
    }

    fn actions(plan: &Plan) -> Vec<(&str, &str)> {
        plan.resources
            .iter()
            .map(|r| (r.address.as_str(), r.action.word()))
            .collect()
    }

    #[test]
    fn creates_with_a_deferred_read_and_a_new_output() {
        let p = plan("create");
        assert_eq!(p.terraform_version.as_deref(), Some("1.11.4"));
        assert_eq!(
            actions(&p),
            [
                ("data.terraform_remote_state.shared", "read"),
                ("terraform_data.network", "create"),
                ("terraform_data.subnet[0]", "create"),
                ("terraform_data.subnet[1]", "create"),
            ]
        );
        assert_eq!((p.counts.add, p.counts.read, p.counts.changed()), (3, 1, 3));
        assert_eq!(p.outputs, [("network".to_owned(), Action::Create)]);
        assert_eq!(
            p.counts.terraform_line(),
            "3 to add, 0 to change, 0 to destroy"
        );
        assert!(p.has_changes() && !p.errored);
    }

    #[test]
    fn an_input_change_is_an_update() {
        let p = plan("update");
        assert_eq!(actions(&p), [("terraform_data.cluster", "update")]);
        assert_eq!(
            p.counts.terraform_line(),
            "0 to add, 1 to change, 0 to destroy"
        );
    }

    #[test]
    fn both_replacement_orders_count_as_replace_and_as_terraform_counts_them() {
        let p = plan("replace");
        assert_eq!(
            actions(&p),
            [
                ("terraform_data.bucket", "replace"),
                ("terraform_data.certificate", "replace (create first)"),
                ("terraform_data.policy", "update"),
            ]
        );
        assert_eq!((p.counts.replace, p.counts.change), (2, 1));
        // The line terraform printed for the same plan.
        let text = String::from_utf8(fixture("replace", "plan.txt")).expect("utf-8");
        assert!(
            text.contains(&format!("Plan: {}.", p.counts.terraform_line())),
            "{text}"
        );
    }

    #[test]
    fn a_removed_resource_is_a_delete_and_its_output_goes() {
        let p = plan("delete");
        assert_eq!(
            actions(&p),
            [
                ("terraform_data.keep", "no-op"),
                ("terraform_data.old_queue", "delete"),
            ]
        );
        assert_eq!((p.counts.destroy, p.counts.no_op), (1, 1));
        assert_eq!(p.outputs, [("queue".to_owned(), Action::Delete)]);
    }

    #[test]
    fn an_unchanged_configuration_has_no_changes() {
        let p = plan("nochange");
        assert!(!p.has_changes());
        assert_eq!(p.counts.no_op, 1);
        let result = parse_result(&fixture("nochange", "plan.result.json")).expect("result");
        assert_eq!(result.exit_code, 0);
    }

    #[test]
    fn a_failed_plan_leaves_a_result_and_its_output_but_no_plan() {
        let result = parse_result(&fixture("failed", "plan.result.json")).expect("result");
        assert_eq!(result.exit_code, 1);
        let text = String::from_utf8(fixture("failed", "plan.txt")).expect("utf-8");
        assert!(text.contains("Resource precondition failed"), "{text}");
        let dir = format!(
            "{}/fixtures/summary/plans/failed",
            concat!(env!("CARGO_MANIFEST_DIR"), "/../..")
        );
        assert!(!std::path::Path::new(&dir).join("plan.json").exists());
    }

    #[test]
    fn unknown_actions_are_kept_and_counted_as_changes() {
        let p = parse_plan(
            br#"{"format_version":"1.2","resource_changes":[{"address":"a.b","mode":"managed","type":"a","name":"b","change":{"actions":["create","forget"]}}]}"#,
        )
        .expect("parses");
        assert_eq!(p.resources[0].action, Action::Other("create,forget".into()));
        assert_eq!(p.counts.changed(), 1);
    }

    #[test]
    fn a_wrong_document_is_an_error_saying_what_is_missing() {
        let err = parse_plan(br#"{"resource_changes":[]}"#).expect_err("no format_version");
        assert!(err.to_string().contains("format_version"), "{err}");
        let err = parse_plan(br#"{"format_version":"2.0"}"#).expect_err("newer major");
        assert!(err.to_string().contains("2.0"), "{err}");
        let err = parse_result(br#"{"commit":"abc"}"#).expect_err("no exit code");
        assert!(err.to_string().contains("exit_code"), "{err}");
    }
}
