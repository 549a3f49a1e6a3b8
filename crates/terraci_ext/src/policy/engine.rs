//! Rego evaluation in process (regorus), with OPA/Conftest rule conventions.
//!
//! Input: the `.rego` files of the policy sources (path shown in messages, text) and a
//! module's plan JSON. Output: the findings of the decision rules of the configured
//! namespaces, or a [`PolicyError`] naming the file and line of a bad policy.
//!
//! Decision rules are the rules of a package named `deny`, `violation` or `warn`, or with
//! one of those names and a `_suffix` (`deny_public_bucket`), as Conftest reads them;
//! `deny` and `violation` results are deny decisions. A rule's value is a set (or array)
//! of strings or of objects with `msg` (or `message`); a single string or object counts
//! as one result. Every rule evaluation is bounded in wall-clock time (regorus checks its
//! timer while it works), so a rule that loops ends as a `policy-limit` error.
//!
//! The timer is checked between steps, not inside one builtin call, so the builtins that
//! allocate in proportion to an argument are bounded before they start: extensions of the
//! same name shadow them (regorus looks extensions up before builtins), check the
//! arguments and then run regorus's own builtin. A call over a bound is a `policy-limit`
//! error naming the builtin:
//! - `numbers.range(a, b)` and `numbers.range_step(a, b, step)`: at most
//!   [`MAX_BUILTIN_ITEMS`] numbers (a step must be a positive integer);
//! - `sprintf(format, values)`: a width or precision at most [`MAX_FORMAT_WIDTH`], all of
//!   them together at most [`MAX_BUILTIN_ITEMS`] characters.

use std::collections::BTreeMap;
use std::time::Duration;
use terraci_db::config::PolicyInput;
use terraci_db::diagnostic::Code;

use regorus::unstable::{Rule, RuleHead};
use regorus::Value;

/// Deny (`deny`, `violation`) or warn (`warn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Kind {
    Deny,
    Warn,
}

/// One result of a decision rule.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct Finding {
    /// The package (`terraform`).
    pub(crate) namespace: String,
    /// The rule that produced it (`deny`, `warn_tags`).
    pub(crate) rule: String,
    #[serde(skip)]
    pub kind: Kind,
    #[serde(rename = "msg")]
    pub(crate) message: String,
    /// The result object's other fields.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) metadata: BTreeMap<String, serde_json::Value>,
}

/// A policy that cannot be loaded or evaluated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyError {
    /// `policy-syntax`, `policy-runtime` or `policy-limit`.
    pub code: terraci_db::diagnostic::Code,
    pub file: Option<String>,
    pub line: Option<u32>,
    pub message: String,
}

impl std::fmt::Display for PolicyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.file, self.line) {
            (Some(file), Some(line)) => write!(f, "{file}:{line}: {}", self.message),
            (Some(file), None) => write!(f, "{file}: {}", self.message),
            _ => f.write_str(&self.message),
        }
    }
}

/// A decision rule: where it is declared, for messages.
#[derive(Debug, Clone)]
struct DecisionRule {
    name: String,
    kind: Kind,
}

/// Policies parsed once, evaluated for many plans.
#[derive(Clone)]
pub struct Policies {
    engine: regorus::Engine,
    /// Package path -> its decision rules (sorted, each once).
    rules: BTreeMap<String, Vec<DecisionRule>>,
    limit: Duration,
}

/// The kind of a decision rule name, `None` for other rules.
pub(crate) fn decision_kind(name: &str) -> Option<Kind> {
    for (prefix, kind) in [
        ("deny", Kind::Deny),
        ("violation", Kind::Deny),
        ("warn", Kind::Warn),
    ] {
        if let Some(rest) = name.strip_prefix(prefix) {
            if rest.is_empty() || (rest.starts_with('_') && rest.len() > 1) {
                return Some(kind);
            }
        }
    }
    None
}

/// The most items (numbers of a range, characters of padding) one builtin call may make.
pub const MAX_BUILTIN_ITEMS: u64 = 1_000_000;
/// The largest width or precision of one `sprintf` verb.
pub const MAX_FORMAT_WIDTH: u64 = 10_000;

/// What the message of a builtin call refused by a bound starts with (how [`is_limit`]
/// tells it from other errors: regorus keeps only the text of an extension's error).
const BUILTIN_LIMIT: &str = "builtin call over terraci's bound:";

fn builtin_limit(message: String) -> anyhow::Error {
    anyhow::anyhow!("{BUILTIN_LIMIT} {message}")
}

/// Runs regorus's own builtin `name` on `args` (strict, as the engine runs builtins), from
/// an extension that shadows it. Its error is given without the span of the call made
/// here (regorus puts the policy's own span around it).
fn run_builtin(name: &str, args: Vec<Value>) -> anyhow::Result<Value> {
    let (builtin, _) = regorus::unstable::BUILTINS
        .get(name)
        .ok_or_else(|| anyhow::anyhow!("{name} is not a builtin"))?;
    let params: Vec<String> = (0..args.len()).map(|i| format!("a{i}")).collect();
    let source = regorus::Source::from_contents(
        format!("<{name}>"),
        format!("{name}({})", params.join(", ")),
    )?;
    let mut parser = regorus::unstable::Parser::new(&source)?;
    let expr = parser.parse_expr()?;
    let regorus::unstable::Expr::Call { span, params, .. } = &expr else {
        anyhow::bail!("cannot call {name}");
    };
    builtin(span, params, &args, true).map_err(|e| {
        let text = format!("{e:#}");
        let last = text
            .lines()
            .rev()
            .find_map(|l| l.trim().strip_prefix("error: "))
            .unwrap_or(text.trim())
            .to_owned();
        anyhow::anyhow!("{last}")
    })
}

/// How many numbers `numbers.range_step(a, b, step)` makes (`None`: not integers, which the
/// builtin itself refuses); a difference past `i64` counts as too many.
fn range_items(a: &Value, b: &Value, step: u64) -> Option<u64> {
    let (Value::Number(a), Value::Number(b)) = (a, b) else {
        return None;
    };
    if !a.is_integer() || !b.is_integer() {
        return None;
    }
    let items = match b.sub(a).ok().and_then(|d| d.as_i64()) {
        Some(d) => d.unsigned_abs() / step + 1,
        None => u64::MAX,
    };
    Some(items)
}

fn refuse_range(name: &str, items: Option<u64>) -> anyhow::Result<()> {
    match items {
        Some(n) if n > MAX_BUILTIN_ITEMS => Err(builtin_limit(format!(
            "{name} would make {n} numbers, over the {MAX_BUILTIN_ITEMS} one call may make"
        ))),
        _ => Ok(()),
    }
}

/// Refuses a `sprintf` format whose widths or precisions (`%08d`, `%.3s`, `%20v`) would pad
/// past the bounds, and a width regorus cannot read (a non-ASCII digit).
fn check_format(format: &str) -> anyhow::Result<()> {
    let mut chars = format.chars().peekable();
    let mut total: u64 = 0;
    while let Some(c) = chars.next() {
        if c != '%' {
            continue;
        }
        if chars.peek() == Some(&'%') {
            chars.next();
            continue;
        }
        if chars.peek() == Some(&'.') {
            chars.next();
        }
        let mut width: u64 = 0;
        while let Some(&d) = chars.peek().filter(|d| d.is_numeric()) {
            let digit = d.to_digit(10).ok_or_else(|| {
                anyhow::anyhow!("sprintf: `{d}` in a width is not an ASCII digit")
            })?;
            width = width.saturating_mul(10).saturating_add(u64::from(digit));
            chars.next();
        }
        if width > MAX_FORMAT_WIDTH {
            return Err(builtin_limit(format!(
                "sprintf width or precision {width} is over the {MAX_FORMAT_WIDTH} terraci allows"
            )));
        }
        total = total.saturating_add(width);
        if total > MAX_BUILTIN_ITEMS {
            return Err(builtin_limit(format!(
                "sprintf widths add up to over the {MAX_BUILTIN_ITEMS} characters one call may make"
            )));
        }
    }
    Ok(())
}

/// Registers the bounded builtins (see the module doc) on `engine`, before any policy.
fn bound_builtins(engine: &mut regorus::Engine) -> anyhow::Result<()> {
    engine.add_extension(
        "numbers.range".into(),
        2,
        Box::new(|args: Vec<Value>| {
            refuse_range("numbers.range", range_items(&args[0], &args[1], 1))?;
            run_builtin("numbers.range", args)
        }),
    )?;
    engine.add_extension(
        "numbers.range_step".into(),
        3,
        Box::new(|args: Vec<Value>| {
            let step = match &args[2] {
                Value::Number(n) if n.is_integer() => n.as_i64().filter(|s| *s > 0),
                _ => None,
            };
            let Some(step) = step else {
                anyhow::bail!("numbers.range_step: step must be a positive integer");
            };
            refuse_range(
                "numbers.range_step",
                range_items(&args[0], &args[1], step.unsigned_abs()),
            )?;
            run_builtin("numbers.range_step", args)
        }),
    )?;
    engine.add_extension(
        "sprintf".into(),
        2,
        Box::new(|args: Vec<Value>| {
            if let Value::String(format) = &args[0] {
                check_format(format)?;
            }
            run_builtin("sprintf", args)
        }),
    )?;
    Ok(())
}

impl Policies {
    /// Parses `files` (display path, text), Rego v1 as OPA 1.x reads it. `limit` bounds
    /// each rule evaluation.
    pub fn load(files: &[(String, String)], limit: Duration) -> Result<Policies, PolicyError> {
        let mut engine = regorus::Engine::new();
        engine.set_rego_v0(false);
        bound_builtins(&mut engine).map_err(|e| PolicyError {
            code: Code::PolicyRuntime,
            file: None,
            line: None,
            message: format!("cannot bound the builtins: {e}"),
        })?;
        for (path, text) in files {
            engine
                .add_policy(path.clone(), text.clone())
                .map_err(|e| located(Code::PolicySyntax, &e, Some(path)))?;
        }
        let mut rules: BTreeMap<String, Vec<DecisionRule>> = BTreeMap::new();
        for module in engine.get_modules() {
            let package = module.package.refr.span().text().trim().to_owned();
            let entry = rules.entry(package).or_default();
            for rule in &module.policy {
                let refr = match rule.as_ref() {
                    Rule::Spec {
                        head: RuleHead::Compr { refr, .. } | RuleHead::Set { refr, .. },
                        ..
                    } => refr,
                    Rule::Default { refr, .. } => refr,
                    Rule::Spec {
                        head: RuleHead::Func { .. },
                        ..
                    } => continue,
                };
                // `deny contains msg`, `deny[msg]`: the name is the head's first part.
                let text = refr.span().text();
                let name: String = text
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if let Some(kind) = decision_kind(&name) {
                    if !entry.iter().any(|r| r.name == name) {
                        entry.push(DecisionRule { name, kind });
                    }
                }
            }
            entry.sort_by(|a, b| a.name.cmp(&b.name));
        }
        Ok(Policies {
            engine,
            rules,
            limit,
        })
    }

    /// The packages the policies declare.
    pub fn packages(&self) -> impl Iterator<Item = &str> {
        self.rules.keys().map(String::as_str)
    }

    /// Whether package `namespace` has a decision rule (`deny`, `violation`, `warn`, or
    /// one of them with a `_suffix`): without one, the namespace passes every plan.
    pub fn has_rules(&self, namespace: &str) -> bool {
        self.rules.get(namespace).is_some_and(|r| !r.is_empty())
    }

    /// Evaluates the decision rules of `namespaces` with `input` (see [`plan_input`]). The
    /// findings are sorted by namespace, rule and message.
    pub(crate) fn evaluate(
        &self,
        input: regorus::Value,
        namespaces: &[String],
    ) -> Result<Vec<Finding>, PolicyError> {
        let mut engine = self.engine.clone();
        engine.set_input(input);
        engine.set_execution_timer_config(regorus::utils::limits::ExecutionTimerConfig {
            limit: self.limit,
            check_interval: std::num::NonZeroU32::MIN,
        });
        let mut out = Vec::new();
        for namespace in namespaces {
            let Some(rules) = self.rules.get(namespace) else {
                continue;
            };
            for rule in rules {
                let path = format!("data.{namespace}.{}", rule.name);
                let value = engine.eval_rule(path.clone()).map_err(|e| {
                    let code = if is_limit(&e) {
                        Code::PolicyLimit
                    } else {
                        Code::PolicyRuntime
                    };
                    let mut err = located(code, &e, None);
                    if let Some(at) = err.message.find(BUILTIN_LIMIT) {
                        err.message = format!(
                            "{path}: {}",
                            err.message[at + BUILTIN_LIMIT.len()..].trim()
                        );
                    } else if code == Code::PolicyLimit {
                        err.message = format!(
                            "{path} did not finish within {} s (a rule that loops or does too much work): {}",
                            self.limit.as_secs_f64(),
                            err.message
                        );
                    }
                    err
                })?;
                collect(&value, namespace, &rule.name, rule.kind, &mut out);
            }
        }
        out.sort_by(|a, b| {
            (&a.namespace, &a.rule, &a.message).cmp(&(&b.namespace, &b.rule, &b.message))
        });
        Ok(out)
    }
}

fn is_limit(e: &anyhow::Error) -> bool {
    let text = format!("{e:#}");
    e.chain()
        .any(|c| c.downcast_ref::<regorus::LimitError>().is_some())
        || text.contains("execution exceeded time limit")
        || text.contains(BUILTIN_LIMIT)
}

/// The results of one rule's value.
fn collect(value: &Value, namespace: &str, rule: &str, kind: Kind, out: &mut Vec<Finding>) {
    let finding = |message: String, metadata| Finding {
        namespace: namespace.to_owned(),
        rule: rule.to_owned(),
        kind,
        message,
        metadata,
    };
    match value {
        Value::Set(items) => {
            for item in items.iter() {
                if let Some((m, meta)) = result_of(item) {
                    out.push(finding(m, meta));
                }
            }
        }
        Value::Array(items) => {
            for item in items.iter() {
                if let Some((m, meta)) = result_of(item) {
                    out.push(finding(m, meta));
                }
            }
        }
        Value::String(_) | Value::Object(_) => {
            if let Some((m, meta)) = result_of(value) {
                out.push(finding(m, meta));
            }
        }
        Value::Bool(true) => out.push(finding(
            format!("data.{namespace}.{rule} is true"),
            BTreeMap::new(),
        )),
        _ => {}
    }
}

type Result1 = (String, BTreeMap<String, serde_json::Value>);

/// A result's message and metadata: a string is the message; an object's `msg` (or
/// `message`) is, its other fields the metadata (without either, the object as JSON).
fn result_of(item: &Value) -> Option<Result1> {
    match item {
        Value::String(s) => Some((s.to_string(), BTreeMap::new())),
        Value::Object(_) => {
            let json = serde_json::to_value(item).ok()?;
            let map = json.as_object()?;
            let message = ["msg", "message"]
                .iter()
                .find_map(|k| map.get(*k).and_then(|v| v.as_str()).map(str::to_owned));
            let metadata = map
                .iter()
                .filter(|(k, _)| *k != "msg" && *k != "message")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            Some((message.unwrap_or_else(|| json.to_string()), metadata))
        }
        _ => None,
    }
}

/// A regorus error as a [`PolicyError`]. Its text has the place on a `--> file:line:col`
/// line (then the source line and a caret) and the reason on an `error: ...` line.
fn located(
    code: terraci_db::diagnostic::Code,
    e: &anyhow::Error,
    fallback_file: Option<&String>,
) -> PolicyError {
    let text = format!("{e:#}");
    let mut file = None;
    let mut line = None;
    let mut message = None;
    for l in text.lines() {
        let l = l.trim();
        if let Some(place) = l.strip_prefix("--> ") {
            if file.is_none() {
                let mut parts = place.rsplitn(3, ':');
                let _col = parts.next();
                let ln = parts.next().and_then(|n| n.parse::<u32>().ok());
                if let (Some(ln), Some(f)) = (ln, parts.next()) {
                    file = Some(f.to_owned());
                    line = Some(ln);
                }
            }
        } else if let Some(m) = l.strip_prefix("error: ") {
            message.get_or_insert_with(|| m.to_owned());
        }
    }
    let message = message.unwrap_or_else(|| {
        text.lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("evaluation failed")
            .to_owned()
    });
    PolicyError {
        code,
        file: file.or_else(|| fallback_file.cloned()),
        line,
        message,
    }
}

/// Where a module's plan is, for the policies' `input` (see [`plan_input`]).
pub(crate) struct Subject<'a> {
    /// The module id (`input.terraci.module.path`).
    pub(crate) module: &'a str,
    /// Pattern segment -> value (`input.terraci.module.components`, left out when empty).
    pub(crate) components: &'a [(String, String)],
    /// The namespaces evaluated (`input.terraci.policy.namespaces`).
    pub(crate) namespaces: &'a [String],
}

/// The Rego `input` for a module's plan JSON text: the plan itself
/// ([`PolicyInput::Plan`]), or TerraCi's envelope ([`PolicyInput::Envelope`]):
/// `{"plan": <plan>, "terraci": {"module": {"path", "components"}, "policy":
/// {"namespaces"}, "plan": {"path": "<module>/plan.json"}}}`. The envelope is built as a
/// value around the parsed plan, never by joining texts, so nothing in plan.json can add
/// or replace a `terraci` key.
pub(crate) fn plan_input(
    plan: &str,
    kind: PolicyInput,
    subject: &Subject<'_>,
) -> Result<regorus::Value, PolicyError> {
    let plan = regorus::Value::from_json_str(plan).map_err(|e| PolicyError {
        code: Code::PolicyInput,
        file: None,
        line: None,
        message: format!("the plan is not valid JSON: {e}"),
    })?;
    if kind == PolicyInput::Plan {
        return Ok(plan);
    }
    let mut module = serde_json::Map::new();
    module.insert("path".into(), subject.module.into());
    if !subject.components.is_empty() {
        let components: serde_json::Map<String, serde_json::Value> = subject
            .components
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().into()))
            .collect();
        module.insert("components".into(), components.into());
    }
    let terraci = serde_json::json!({
        "module": module,
        "policy": {"namespaces": subject.namespaces},
        "plan": {"path": format!("{}/plan.json", subject.module)},
    });
    let mut envelope = regorus::Value::new_object();
    let object = envelope.as_object_mut().map_err(|e| PolicyError {
        code: Code::PolicyInput,
        file: None,
        line: None,
        message: format!("cannot build the input: {e}"),
    })?;
    object.insert(regorus::Value::from("plan"), plan);
    object.insert(
        regorus::Value::from("terraci"),
        regorus::Value::from(terraci),
    );
    Ok(envelope)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policies(files: &[(&str, &str)]) -> Result<Policies, PolicyError> {
        let files: Vec<(String, String)> = files
            .iter()
            .map(|(p, t)| (p.to_string(), t.to_string()))
            .collect();
        Policies::load(&files, Duration::from_secs(2))
    }

    #[test]
    fn decision_rule_names_follow_conftest() {
        assert_eq!(decision_kind("deny"), Some(Kind::Deny));
        assert_eq!(decision_kind("violation_tags"), Some(Kind::Deny));
        assert_eq!(decision_kind("warn_x"), Some(Kind::Warn));
        assert_eq!(decision_kind("denylist"), None);
        assert_eq!(decision_kind("deny_"), None);
        assert_eq!(decision_kind("allow"), None);
    }

    #[test]
    fn strings_and_objects_are_findings_of_their_rule() {
        let p = policies(&[(
            "p/main.rego",
            "package terraform\n\
             deny contains msg if { some r in input.rs; msg := sprintf(\"bad %s\", [r]) }\n\
             warn_tags contains {\"msg\": \"no tags\", \"severity\": \"low\"} if { input.tags == null }\n\
             helper := 1\n",
        )])
        .unwrap();
        let out = p
            .evaluate(
                Value::from_json_str(r#"{"rs": ["b", "a"], "tags": null}"#).unwrap(),
                &["terraform".into()],
            )
            .unwrap();
        let got: Vec<(&str, &str, Kind)> = out
            .iter()
            .map(|f| (f.rule.as_str(), f.message.as_str(), f.kind))
            .collect();
        assert_eq!(
            got,
            [
                ("deny", "bad a", Kind::Deny),
                ("deny", "bad b", Kind::Deny),
                ("warn_tags", "no tags", Kind::Warn)
            ]
        );
        assert_eq!(out[2].metadata["severity"], "low");
        // Another namespace: nothing.
        assert!(p
            .evaluate(Value::from_json_str("{}").unwrap(), &["compliance".into()])
            .unwrap()
            .is_empty());
    }

    #[test]
    fn a_syntax_error_names_file_and_line() {
        let err = policies(&[(
            "pol/bad.rego",
            "package terraform\n\ndeny contains msg if {\n  msg := \n}\n",
        )])
        .err()
        .unwrap();
        assert_eq!(err.code, Code::PolicySyntax);
        assert_eq!(err.file.as_deref(), Some("pol/bad.rego"));
        assert!(err.line.is_some_and(|l| (3..=5).contains(&l)), "{err:?}");
    }

    /// The envelope is a value around the parsed plan: a plan.json that holds its own
    /// `terraci` key (or text meant to close the object) changes nothing of
    /// `input.terraci`, and is itself under `input.plan`.
    #[test]
    fn the_envelope_holds_the_plan_and_cannot_be_forged_from_it() {
        let p = policies(&[(
            "p.rego",
            "package terraform\n\nimport rego.v1\n\n\
             deny contains sprintf(\"%s %s %s %s\", [input.terraci.module.path, input.terraci.module.components.env, input.terraci.plan.path, input.plan.terraci.module.path]) if { true }\n\
             warn contains r.address if { some r in input.plan.resource_changes }\n\
             warn contains \"no\" if { input.resource_changes }\n",
        )])
        .unwrap();
        let plan = r#"{"terraci": {"module": {"path": "evil"}}, "resource_changes": [{"address": "a.b"}], "x": "\"}, \"terraci\": {\"module\": {\"path\": \"evil2\"}}"}"#;
        let components = [("env".to_owned(), "prod".to_owned())];
        let namespaces = ["terraform".to_owned()];
        let subject = Subject {
            module: "prod/vpc",
            components: &components,
            namespaces: &namespaces,
        };
        let input = plan_input(plan, PolicyInput::Envelope, &subject).unwrap();
        let got: Vec<String> = p
            .evaluate(input, &namespaces)
            .unwrap()
            .into_iter()
            .map(|f| format!("{}: {}", f.rule, f.message))
            .collect();
        assert_eq!(
            got,
            ["deny: prod/vpc prod prod/vpc/plan.json evil", "warn: a.b"]
        );
        // `plan`: the plan is the whole input, as conftest gives it.
        let input = plan_input(plan, PolicyInput::Plan, &subject).unwrap();
        let got: Vec<String> = p
            .evaluate(input, &namespaces)
            .unwrap()
            .into_iter()
            .map(|f| f.message)
            .collect();
        assert_eq!(got, ["no"]);
    }

    #[test]
    fn a_runtime_error_names_file_and_line() {
        // Two values for one complete rule: an error in OPA too.
        let p = policies(&[(
            "pol/conflict.rego",
            "package terraform\n\nname := \"a\" if { input.x }\nname := \"b\" if { input.x }\n\ndeny contains name if { name }\n",
        )])
        .unwrap();
        let err = p
            .evaluate(
                Value::from_json_str(r#"{"x": true}"#).unwrap(),
                &["terraform".into()],
            )
            .unwrap_err();
        assert_eq!(err.code, Code::PolicyRuntime, "{err:?}");
        assert_eq!(err.file.as_deref(), Some("pol/conflict.rego"), "{err:?}");
        assert!(err.line.is_some(), "{err:?}");
    }

    fn deny_messages(rego: &str) -> Result<Vec<String>, PolicyError> {
        let p = policies(&[("pol/b.rego", rego)])?;
        Ok(
            p.evaluate(Value::from_json_str("{}").unwrap(), &["terraform".into()])?
                .into_iter()
                .map(|f| f.message)
                .collect(),
        )
    }

    /// The shadowing extensions give what regorus's builtins give, within the bounds.
    #[test]
    fn bounded_builtins_work_within_their_bounds() {
        let got = deny_messages(
            "package terraform\n\n\
             deny contains sprintf(\"%d %d %v %05d %s %%\", [count(numbers.range(1, 1000)), count(numbers.range(5, -4)), numbers.range_step(1, 10, 4), 42, \"a\"]) if { true }\n",
        )
        .unwrap();
        assert_eq!(got, ["1000 10 [1, 5, 9] 00042 a %"]);
    }

    /// One builtin call that would allocate without bound is refused before it starts, as
    /// `policy-limit` naming the builtin; the other errors of the builtins stay runtime errors.
    #[test]
    fn a_huge_builtin_call_is_a_policy_limit() {
        for (call, named) in [
            ("count(numbers.range(1, 1000000000))", "numbers.range would make 1000000000 numbers"),
            ("count(numbers.range(1, 1000001))", "numbers.range would make 1000001 numbers"),
            ("count(numbers.range(-100000000000000000000, 100000000000000000000))", "numbers.range would make"),
            ("count(numbers.range_step(0, 100000000000, 7))", "numbers.range_step would make"),
            ("sprintf(\"%0999999999d\", [1])", "sprintf width or precision 999999999"),
            ("sprintf(\"%.99999s\", [\"a\"])", "sprintf width or precision 99999"),
            ("sprintf(concat(\"\", [\"%9999d\" | some _ in numbers.range(1, 200)]), [1 | some _ in numbers.range(1, 200)])", "sprintf widths add up"),
        ] {
            let started = std::time::Instant::now();
            let err = deny_messages(&format!(
                "package terraform\n\ndeny contains sprintf(\"%v\", [x]) if {{ x := {call} }}\n"
            ))
            .unwrap_err();
            assert_eq!(err.code, Code::PolicyLimit, "{call}: {err:?}");
            assert!(err.message.contains(named), "{call}: {err:?}");
            assert!(err.message.starts_with("data.terraform.deny: "), "{call}: {err:?}");
            assert_eq!(err.file.as_deref(), Some("pol/b.rego"), "{call}: {err:?}");
            assert!(started.elapsed() < Duration::from_secs(5), "{call}");
        }
        for (call, why) in [
            (
                "numbers.range_step(1, 10, 0)",
                "step must be a positive integer",
            ),
            ("numbers.range(1.5, 3)", "must be integer"),
            ("sprintf(\"%\u{b2}d\", [1])", "not an ASCII digit"),
        ] {
            let err = deny_messages(&format!(
                "package terraform\n\ndeny contains sprintf(\"%v\", [x]) if {{ x := {call} }}\n"
            ))
            .unwrap_err();
            assert_eq!(err.code, Code::PolicyRuntime, "{call}: {err:?}");
            assert!(err.message.contains(why), "{call}: {err:?}");
        }
    }

    #[test]
    fn a_rule_that_loops_is_stopped_by_the_time_bound() {
        let files = vec![(
            "pol/loop.rego".to_string(),
            "package terraform\n\ndeny contains msg if {\n  n := count([1 | some a in numbers.range(1, 20000); some b in numbers.range(1, 20000); a * b == -1])\n  msg := sprintf(\"%d\", [n])\n}\n"
                .to_string(),
        )];
        let p = Policies::load(&files, Duration::from_millis(300)).unwrap();
        let started = std::time::Instant::now();
        let err = p
            .evaluate(Value::from_json_str("{}").unwrap(), &["terraform".into()])
            .unwrap_err();
        assert_eq!(err.code, Code::PolicyLimit, "{err:?}");
        assert!(err.message.contains("data.terraform.deny"), "{err:?}");
        assert!(started.elapsed() < Duration::from_secs(10));
    }
}
