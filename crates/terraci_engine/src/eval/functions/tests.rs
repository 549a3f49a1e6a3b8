//! The function library held against Terraform 1.11.4 itself: its function list
//! (`fixtures/terraform/functions.json`, from `terraform metadata functions -json`) and its
//! answers to generated calls (`fixtures/terraform/calls.json`, from `terraform console`;
//! `fixtures/terraform/generate.py` made both). Neither test runs terraform.

use std::collections::BTreeSet;

use super::{FUNCTIONS, UNSUPPORTED};
use crate::eval::{evaluate, EvalContext, NoFilesystem};

const SIGNATURES: &str = include_str!("../../../../../fixtures/terraform/functions.json");
const CALLS: &str = include_str!("../../../../../fixtures/terraform/calls.json");

/// Calls where terraci knowingly answers differently from Terraform, and why.
const KNOWN_DIFFERENCES: &[(&str, &str)] = &[
    (
        "pow(2, 0.5)",
        "Terraform prints a float64 result with all 17 digits; terraci's numbers are f64 and \
         print at most 16 significant digits, so that decimal arithmetic (0.1 + 0.2 = 0.3) \
         reads as Terraform's arbitrary-precision numbers do",
    ),
    (
        "log(2.5, 3)",
        "the last bit of a logarithm differs between Go's math.Log and Rust's (the \
         platform's libm)",
    ),
    (
        "yamldecode(\"a: 1\\nb: [x, 2]\\nc: null\\nd: yes\")",
        "Terraform's YAML decoder follows YAML 1.1 (plain yes/no/on/off are booleans); \
         serde_yaml follows YAML 1.2 and does not say whether a scalar was quoted",
    ),
];

fn signatures() -> serde_json::Map<String, serde_json::Value> {
    let doc: serde_json::Value = serde_json::from_str(SIGNATURES).expect("functions.json parses");
    doc["function_signatures"]
        .as_object()
        .expect("function_signatures is an object")
        .clone()
}

fn param_names(sig: &serde_json::Value) -> Vec<String> {
    sig["parameters"]
        .as_array()
        .map(|ps| {
            ps.iter()
                .map(|p| p["name"].as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn every_terraform_function_is_implemented_or_listed_as_unsupported() {
    let sigs = signatures();
    let ours: BTreeSet<&str> = FUNCTIONS.iter().map(|s| s.name).collect();
    let unsupported: BTreeSet<&str> = UNSUPPORTED.iter().map(|(n, _)| *n).collect();
    let mut problems = Vec::new();
    for (name, sig) in &sigs {
        // `core::upper` is Terraform's qualified name of `upper`.
        if name.starts_with("core::") || name == "try" || name == "can" {
            continue;
        }
        match FUNCTIONS.iter().find(|s| s.name == name) {
            Some(spec) => {
                let params = param_names(sig);
                if params != spec.params {
                    problems.push(format!(
                        "{name}: parameters {:?}, Terraform has {params:?}",
                        spec.params
                    ));
                }
                let variadic = sig["variadic_parameter"]["name"].as_str();
                if variadic != spec.variadic {
                    problems.push(format!(
                        "{name}: variadic {:?}, Terraform has {variadic:?}",
                        spec.variadic
                    ));
                }
            }
            None if unsupported.contains(name.as_str()) => {}
            None => problems.push(format!(
                "{name}: neither implemented nor listed in UNSUPPORTED"
            )),
        }
    }
    for name in ours.iter().chain(&unsupported) {
        if !sigs.contains_key(*name) {
            problems.push(format!("{name}: not a Terraform 1.11 function"));
        }
    }
    for name in ours.intersection(&unsupported) {
        problems.push(format!(
            "{name}: both implemented and listed as unsupported"
        ));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// JSON equality with numbers compared as numbers (`1` is `1.0`).
fn same(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value as J;
    match (a, b) {
        (J::Number(x), J::Number(y)) => x.as_f64() == y.as_f64(),
        (J::Array(x), J::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(i, j)| same(i, j))
        }
        (J::Object(x), J::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

fn ours(expr: &str) -> Result<serde_json::Value, String> {
    let parsed = crate::parse::parse_expr_text(expr).map_err(|e| format!("parse: {e}"))?;
    let scope = Default::default();
    let ctx = EvalContext {
        scope: &scope,
        extra: &[],
        module_dir: "/repo/m".into(),
        host: &NoFilesystem,
    };
    let value = evaluate(&parsed, &ctx).map_err(|e| format!("{}: {}", e.code, e.message))?;
    if let Some(u) = value.first_unknown() {
        return Err(format!("unknown: {}", u.reason));
    }
    let text = super::encoding::json_string(&value).map_err(|e| format!("jsonencode: {e}"))?;
    serde_json::from_str(&text).map_err(|e| format!("our JSON does not parse: {e}"))
}

#[test]
fn generated_calls_answer_as_terraform_does() {
    let cases: Vec<serde_json::Value> = serde_json::from_str(CALLS).expect("calls.json parses");
    assert!(cases.len() > 500, "the fixture lost its calls");
    let mut mismatches = Vec::new();
    let mut allowed_seen = BTreeSet::new();
    for case in &cases {
        let expr = case["expr"].as_str().expect("expr is a string");
        let got = ours(expr);
        let callee = expr.split('(').next().unwrap_or_default();
        if UNSUPPORTED.iter().any(|(n, _)| *n == callee) {
            if !got
                .as_ref()
                .is_err_and(|e| e.starts_with("unknown-function"))
            {
                mismatches.push(format!("  {expr}\n    {callee} is listed as unsupported"));
            }
            continue;
        }
        let ok = match (&got, case.get("value")) {
            (Ok(v), Some(want)) => same(v, want),
            (Err(_), None) => true,
            _ => false,
        };
        if KNOWN_DIFFERENCES.iter().any(|(e, _)| *e == expr) {
            allowed_seen.insert(expr);
            if ok {
                mismatches.push(format!(
                    "  {expr}\n    now agrees: remove it from KNOWN_DIFFERENCES"
                ));
            }
            continue;
        }
        if !ok {
            let want = match case.get("value") {
                Some(v) => v.to_string(),
                None => "error".into(),
            };
            let got = match got {
                Ok(v) => v.to_string(),
                Err(e) => format!("error ({e})"),
            };
            mismatches.push(format!(
                "  {expr}\n    terraform: {want}\n    terraci:   {got}"
            ));
        }
    }
    for (expr, _) in KNOWN_DIFFERENCES {
        if !allowed_seen.contains(expr) {
            mismatches.push(format!(
                "  {expr}\n    is in KNOWN_DIFFERENCES but not in calls.json"
            ));
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} of {} calls differ from terraform:\n{}",
        mismatches.len(),
        cases.len(),
        mismatches.join("\n")
    );
}

#[test]
fn every_implemented_pure_function_is_called() {
    let cases: Vec<serde_json::Value> = serde_json::from_str(CALLS).expect("calls.json parses");
    let called: BTreeSet<String> = cases
        .iter()
        .filter_map(|c| c["expr"].as_str()?.split('(').next().map(str::to_string))
        .collect();
    // They read the machine or the clock, or their values are not printed by the console.
    let not_compared = [
        "abspath",
        "file",
        "fileexists",
        "fileset",
        "templatefile",
        "pathexpand",
        "timestamp",
        "plantimestamp",
        "uuid",
        "bcrypt",
        "sensitive",
        "nonsensitive",
    ];
    let missing: Vec<&str> = FUNCTIONS
        .iter()
        .map(|s| s.name)
        .filter(|n| !called.contains(*n) && !not_compared.contains(n))
        .collect();
    assert!(missing.is_empty(), "no call in calls.json: {missing:?}");
}

#[test]
fn unsupported_functions_say_why() {
    let Err(e) = ours("formatdate(\"YYYY\", \"2024-01-01T00:00:00Z\")") else {
        panic!("formatdate is not evaluated");
    };
    assert_eq!(
        e,
        "unknown-function: function `formatdate` is not evaluated by terraci: time functions are not evaluated"
    );
}
