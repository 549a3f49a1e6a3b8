//! `policy check`: the decisions applied to each module's findings, the report.
//!
//! Input: the policy section, the modules to check with their plan JSON text, the loaded
//! [`Policies`]. Output: a [`Summary`] (per module: status, failures, warnings, the
//! number of suppressed results), its text and JSON forms, and the report
//! `<service_dir>/policy-report.json` in the summary comment's producer format.

//!
//! A `deny`/`violation` result goes where `decisions.deny` says, a `warn` result where
//! `decisions.warn` says: `block` makes it a failure, `warn` a warning, `ignore` only
//! counts it. A module with a failure fails; one with a warning warns. A policy that
//! fails at run time for a module (a conflict, the time bound) fails that module, and so
//! does, for a module a `block` decision applies to, a namespace without decision rules
//! (rules that are not there would pass every plan: fail closed).

use serde::Serialize;

use super::engine::{Finding, Kind, Policies, PolicyError};
use super::Effective;
use terraci_db::config::{Action, PolicyInput};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pass,
    Warn,
    Fail,
}

impl Status {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Warn => "warn",
            Status::Fail => "fail",
        }
    }
}

/// One module's result.
#[derive(Debug, Clone, Serialize)]
pub struct ModuleResult {
    pub module: String,
    pub(crate) status: Status,
    pub(crate) failures: Vec<Finding>,
    pub(crate) warnings: Vec<Finding>,
    /// Results the decisions ignore.
    pub(crate) suppressed: usize,
    /// Policy checks are disabled for the module (an override).
    pub(crate) skipped: bool,
    /// The policy error that failed the module, `file:line: message`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<String>,
    #[serde(skip)]
    pub error_detail: Option<PolicyError>,
}

/// Every module's result, with the totals.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub status: Status,
    pub(crate) total_modules: usize,
    pub(crate) passed_modules: usize,
    pub(crate) warned_modules: usize,
    pub(crate) failed_modules: usize,
    pub(crate) skipped_modules: usize,
    pub(crate) total_failures: usize,
    pub(crate) total_warnings: usize,
    pub(crate) total_suppressed: usize,
    pub results: Vec<ModuleResult>,
}

/// A module to check: its id, its pattern components, its settings, its plan JSON text
/// and the shape of the policies' `input`.
pub struct Input<'a> {
    pub module: &'a str,
    /// Pattern segment -> value, in pattern order.
    pub components: &'a [(String, String)],
    pub settings: Effective,
    pub plan: &'a str,
    pub input: PolicyInput,
}

/// Evaluates every module (sorted by id) and applies its decisions.
pub fn run(policies: &Policies, inputs: &[Input<'_>]) -> Summary {
    let mut results: Vec<ModuleResult> = inputs.iter().map(|i| check_one(policies, i)).collect();
    results.sort_by(|a, b| a.module.cmp(&b.module));
    summarize(results)
}

fn check_one(policies: &Policies, input: &Input<'_>) -> ModuleResult {
    let mut result = ModuleResult {
        module: input.module.to_owned(),
        status: Status::Pass,
        failures: Vec::new(),
        warnings: Vec::new(),
        suppressed: 0,
        skipped: false,
        error: None,
        error_detail: None,
    };
    if !input.settings.enabled {
        result.skipped = true;
        return result;
    }
    // A namespace without rules passes every plan: where a decision blocks, the module
    // fails closed instead (a merge request may have removed the package).
    if input.settings.can_block() {
        if let Some(ns) = input
            .settings
            .namespaces
            .iter()
            .find(|ns| !policies.has_rules(ns))
        {
            let e = PolicyError {
                code: terraci_db::diagnostic::Code::PolicyNamespace,
                file: None,
                line: None,
                message: format!(
                    "namespace `{ns}` has no rules (no policy file declares `package {ns}` with a deny, violation or warn rule): with a blocking decision terraci fails closed"
                ),
            };
            result.error = Some(e.to_string());
            result.error_detail = Some(e);
            result.status = Status::Fail;
            return result;
        }
    }
    let subject = super::engine::Subject {
        module: input.module,
        components: input.components,
        namespaces: &input.settings.namespaces,
    };
    let evaluated = super::engine::plan_input(input.plan, input.input, &subject)
        .and_then(|value| policies.evaluate(value, &input.settings.namespaces));
    match evaluated {
        Ok(findings) => {
            for f in findings {
                let action = match f.kind {
                    Kind::Deny => input.settings.deny,
                    Kind::Warn => input.settings.warn,
                };
                match action {
                    Action::Block => result.failures.push(f),
                    Action::Warn => result.warnings.push(f),
                    Action::Ignore => result.suppressed += 1,
                }
            }
        }
        Err(e) => {
            result.error = Some(e.to_string());
            result.error_detail = Some(e);
        }
    }
    result.status = if !result.failures.is_empty() || result.error.is_some() {
        Status::Fail
    } else if !result.warnings.is_empty() {
        Status::Warn
    } else {
        Status::Pass
    };
    result
}

pub(crate) fn summarize(results: Vec<ModuleResult>) -> Summary {
    let count = |s: Status| {
        results
            .iter()
            .filter(|r| r.status == s && !r.skipped)
            .count()
    };
    let status = results
        .iter()
        .map(|r| r.status)
        .max()
        .unwrap_or(Status::Pass);
    Summary {
        status,
        total_modules: results.len(),
        passed_modules: count(Status::Pass),
        warned_modules: count(Status::Warn),
        failed_modules: count(Status::Fail),
        skipped_modules: results.iter().filter(|r| r.skipped).count(),
        total_failures: results.iter().map(|r| r.failures.len()).sum(),
        total_warnings: results.iter().map(|r| r.warnings.len()).sum(),
        total_suppressed: results.iter().map(|r| r.suppressed).sum(),
        results,
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn finding_line(f: &Finding) -> String {
    format!("{}.{}: {}", f.namespace, f.rule, f.message)
}

impl ModuleResult {
    /// One line for the report and the text output.
    pub(crate) fn summary_line(&self) -> String {
        if self.skipped {
            return "skipped: policy checks are disabled for this module".into();
        }
        if let Some(e) = &self.error {
            return format!("policy error: {e}");
        }
        let mut parts = Vec::new();
        if !self.failures.is_empty() {
            parts.push(plural(self.failures.len(), "failure", "failures"));
        }
        if !self.warnings.is_empty() {
            parts.push(plural(self.warnings.len(), "warning", "warnings"));
        }
        if self.suppressed > 0 {
            parts.push(format!("{} ignored", self.suppressed));
        }
        if parts.is_empty() {
            "all policies pass".into()
        } else {
            parts.join(", ")
        }
    }

    fn details(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(e) = &self.error {
            out.push(format!("error: {e}"));
        }
        out.extend(
            self.failures
                .iter()
                .map(|f| format!("failure: {}", finding_line(f))),
        );
        out.extend(
            self.warnings
                .iter()
                .map(|f| format!("warning: {}", finding_line(f))),
        );
        out
    }
}

impl Summary {
    pub(crate) fn summary_line(&self) -> String {
        let mut line = format!(
            "{} checked: {} passed, {} warned, {} failed",
            plural(
                self.total_modules - self.skipped_modules,
                "module",
                "modules"
            ),
            self.passed_modules,
            self.warned_modules,
            self.failed_modules
        );
        if self.skipped_modules > 0 {
            line.push_str(&format!(", {} skipped", self.skipped_modules));
        }
        line
    }

    /// The text output: each module with a result, then the totals.
    pub fn text(&self) -> String {
        use terraci_db::escape::printable;
        let mut out = String::new();
        for r in &self.results {
            let status = if r.skipped { "skip" } else { r.status.as_str() };
            out.push_str(&format!(
                "{status:<4}  {}: {}\n",
                printable(&r.module),
                printable(&r.summary_line())
            ));
            for d in r.details() {
                out.push_str(&format!("        {}\n", printable(&d)));
            }
        }
        out.push_str(&format!(
            "{} ({}, {}, {} ignored)\n",
            self.summary_line(),
            plural(self.total_failures, "failure", "failures"),
            plural(self.total_warnings, "warning", "warnings"),
            self.total_suppressed
        ));
        out
    }

    /// `--format json`.
    pub fn json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }

    /// `policy-report.json`: the summary comment's producer format, exactly its keys
    /// (the reader refuses others); the full results are in [`Summary::json`]. `commit`:
    /// the pipeline's commit the report is made for (left out when empty).
    pub fn report(&self, commit: &str) -> String {
        let modules: Vec<serde_json::Value> = self
            .results
            .iter()
            .map(|r| {
                serde_json::json!({
                    "module": r.module,
                    "status": r.status,
                    "summary": r.summary_line(),
                    "details": r.details(),
                })
            })
            .collect();
        let mut report = serde_json::json!({
            "producer": "policy",
            "title": "Policy checks",
            "status": self.status,
            "summary": self.summary_line(),
            "modules": modules,
        });
        if !commit.is_empty() {
            report["commit"] = serde_json::Value::String(commit.to_owned());
        }
        let mut text = serde_json::to_string_pretty(&report).unwrap_or_default();
        text.push('\n');
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const POLICY: &str = "package terraform\n\
        deny contains \"denied\" if { input.deny }\n\
        warn contains \"warned\" if { input.warn }\n";

    fn settings(deny: Action, warn: Action) -> Effective {
        Effective {
            enabled: true,
            namespaces: vec!["terraform".into()],
            deny,
            warn,
        }
    }

    fn summary(inputs: &[Input<'_>]) -> Summary {
        let p =
            Policies::load(&[("p.rego".into(), POLICY.into())], Duration::from_secs(5)).unwrap();
        run(&p, inputs)
    }

    #[test]
    fn decisions_decide_the_status() {
        let both = r#"{"deny": true, "warn": true}"#;
        let s = summary(&[
            Input {
                module: "c/block",
                settings: settings(Action::Block, Action::Warn),
                plan: both,
                components: &[],
                input: PolicyInput::Plan,
            },
            Input {
                module: "a/warn",
                settings: settings(Action::Warn, Action::Warn),
                plan: both,
                components: &[],
                input: PolicyInput::Plan,
            },
            Input {
                module: "b/ignore",
                settings: settings(Action::Ignore, Action::Ignore),
                plan: both,
                components: &[],
                input: PolicyInput::Plan,
            },
            Input {
                module: "d/warn-blocks",
                settings: settings(Action::Ignore, Action::Block),
                plan: both,
                components: &[],
                input: PolicyInput::Plan,
            },
            Input {
                module: "e/clean",
                settings: settings(Action::Block, Action::Block),
                plan: "{}",
                components: &[],
                input: PolicyInput::Plan,
            },
        ]);
        let got: Vec<(&str, Status, usize, usize, usize)> = s
            .results
            .iter()
            .map(|r| {
                (
                    r.module.as_str(),
                    r.status,
                    r.failures.len(),
                    r.warnings.len(),
                    r.suppressed,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("a/warn", Status::Warn, 0, 2, 0),
                ("b/ignore", Status::Pass, 0, 0, 2),
                ("c/block", Status::Fail, 1, 1, 0),
                ("d/warn-blocks", Status::Fail, 1, 0, 1),
                ("e/clean", Status::Pass, 0, 0, 0),
            ]
        );
        assert_eq!(s.status, Status::Fail);
        assert_eq!(
            s.summary_line(),
            "5 modules checked: 2 passed, 1 warned, 2 failed"
        );
        let report: serde_json::Value = serde_json::from_str(&s.report("")).unwrap();
        assert_eq!(report["producer"], "policy");
        assert_eq!(report["status"], "fail");
        assert_eq!(
            report["modules"][2]["details"][0],
            "failure: terraform.deny: denied"
        );
        assert_eq!(
            report["modules"][2]["details"][1],
            "warning: terraform.warn: warned"
        );
    }

    #[test]
    fn a_disabled_module_is_skipped_not_evaluated() {
        let mut off = settings(Action::Block, Action::Warn);
        off.enabled = false;
        let s = summary(&[Input {
            module: "legacy/db",
            settings: off,
            plan: "not json",
            components: &[],
            input: PolicyInput::Plan,
        }]);
        assert!(s.results[0].skipped);
        assert_eq!(s.status, Status::Pass);
        assert_eq!(
            s.summary_line(),
            "0 modules checked: 0 passed, 0 warned, 0 failed, 1 skipped"
        );
    }

    #[test]
    fn an_invalid_plan_fails_its_module() {
        let s = summary(&[Input {
            module: "m",
            settings: settings(Action::Block, Action::Warn),
            plan: "{",
            components: &[],
            input: PolicyInput::Plan,
        }]);
        assert_eq!(s.results[0].status, Status::Fail);
        assert!(s.results[0]
            .error
            .as_deref()
            .unwrap()
            .contains("not valid JSON"));
    }
}
