//! The evaluation and resolution rules of spec §2.2, §3 and §4, one mini monorepo per
//! group of rules under `fixtures/rules/`, plus TerraCi's own documented examples under
//! `fixtures/terraci-examples/`. Each test snapshots the edges (with their sources) and
//! the diagnostics of `terraci graph --format json`, one line each, and asserts the edges
//! that the rule is about. Where Terraform's semantics decide the answer, the fixture's
//! comments give what `terraform console` (1.11) said.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::snap;
use crate::support::{Output, Project};

/// `terraci graph --format json` on `project`, which must succeed.
fn graph(project: &Project, extra: &[&str]) -> Value {
    let mut args = vec!["graph", "--format", "json"];
    args.extend_from_slice(extra);
    let out = project.run(&args);
    assert_eq!(out.code, 0, "{}", out.stderr);
    serde_json::from_str(&out.stdout).expect("graph --format json prints JSON")
}

fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key].as_str().unwrap_or("")
}

/// The edges and diagnostics of a JSON graph, one line each: the snapshot form.
fn summary(graph: &Value) -> String {
    let mut out = String::from("edges:\n");
    for edge in graph["edges"].as_array().expect("edges") {
        out.push_str(&format!(
            "  {} -> {}\n",
            str_of(edge, "from"),
            str_of(edge, "to")
        ));
        for source in edge["sources"].as_array().expect("sources") {
            out.push_str(&format!(
                "    {} at {}:{} by {}\n",
                str_of(source, "name"),
                str_of(source, "file"),
                source["line"],
                str_of(source, "rule")
            ));
            for call in source["via"].as_array().into_iter().flatten() {
                out.push_str(&format!("      via {}\n", call.as_str().unwrap_or("")));
            }
        }
    }
    out.push_str("diagnostics:\n");
    for d in graph["diagnostics"].as_array().expect("diagnostics") {
        let at = match (d["line"].as_u64(), d["column"].as_u64()) {
            (Some(l), Some(c)) => format!("{}:{l}:{c}", str_of(d, "file")),
            _ => str_of(d, "file").to_owned(),
        };
        out.push_str(&format!(
            "  {}[{}] {at}: {}\n",
            str_of(d, "severity"),
            str_of(d, "code"),
            str_of(d, "message")
        ));
    }
    out
}

fn edges(graph: &Value) -> BTreeSet<(String, String)> {
    graph["edges"]
        .as_array()
        .expect("edges")
        .iter()
        .map(|e| (str_of(e, "from").to_owned(), str_of(e, "to").to_owned()))
        .collect()
}

/// The dependencies of `from`.
fn deps_of(graph: &Value, from: &str) -> Vec<String> {
    edges(graph)
        .into_iter()
        .filter(|(f, _)| f == from)
        .map(|(_, t)| t)
        .collect()
}

/// The block instance names behind the edge `from -> to`.
fn sources(graph: &Value, from: &str, to: &str) -> Vec<String> {
    graph["edges"]
        .as_array()
        .expect("edges")
        .iter()
        .filter(|e| str_of(e, "from") == from && str_of(e, "to") == to)
        .flat_map(|e| e["sources"].as_array().cloned().unwrap_or_default())
        .map(|s| str_of(&s, "name").to_owned())
        .collect()
}

/// `(code, message)` of every diagnostic whose message mentions `needle`.
fn diagnostics_about(graph: &Value, needle: &str) -> Vec<(String, String)> {
    graph["diagnostics"]
        .as_array()
        .expect("diagnostics")
        .iter()
        .filter(|d| str_of(d, "message").contains(needle))
        .map(|d| {
            (
                str_of(d, "code").to_owned(),
                str_of(d, "message").to_owned(),
            )
        })
        .collect()
}

fn codes(graph: &Value) -> Vec<String> {
    graph["diagnostics"]
        .as_array()
        .expect("diagnostics")
        .iter()
        .map(|d| str_of(d, "code").to_owned())
        .collect()
}

fn ids(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn json_syntax_modules() {
    let p = Project::fixture("rules/json");
    let g = graph(&p, &[]);
    // Backend in JSON (array form), `"${...}"` templates, data as an array, a whole-string
    // interpolation that keeps a map for `for_each`, a `%{if}` directive, JSON tfvars
    // strings taken literally, a module mixing .tf and .tf.json.
    assert_eq!(deps_of(&g, "stage/eks"), ids(&["stage/vpc"]));
    assert_eq!(deps_of(&g, "stage/db"), ids(&["stage/eks"]));
    assert_eq!(
        sources(&g, "stage/db", "stage/eks"),
        ids(&["deps[\"eks\"]"])
    );
    assert_eq!(deps_of(&g, "stage/app"), ids(&["stage/db", "stage/vpc"]));
    assert_eq!(deps_of(&g, "stage/mixed"), ids(&["stage/app"]));
    assert_eq!(
        diagnostics_about(&g, "${var.env}/vpc").len(),
        1,
        "a tfvars.json string is not a template"
    );
    snap!("rules_json", summary(&g));
}

#[test]
fn tofu_files_shadow_tf_files() {
    let p = Project::fixture("rules/tofu");
    let g = graph(&p, &[]);
    // backend.tofu replaces backend.tf: the vpc lives at the .tofu key.
    assert_eq!(sources(&g, "stage/eks", "stage/vpc"), ids(&["vpc"]));
    assert!(!diagnostics_about(&g, "terraform-only/vpc").is_empty());
    // locals.tofu replaces locals.tf (env = "stage", not "prod").
    assert_eq!(sources(&g, "stage/eks", "stage/app"), ids(&["by_env"]));
    // remote.tofu.json replaces remote.tf.json.
    assert_eq!(deps_of(&g, "stage/app"), ids(&["stage/vpc"]));
    snap!("rules_tofu", summary(&g));
}

#[test]
fn override_files_merge_over_the_others() {
    let p = Project::fixture("rules/override");
    let g = graph(&p, &[]);
    let from = "stage/app";
    // override.tf replaces local.env (and wins over a_override.tf, which sorts first).
    assert_eq!(sources(&g, from, "stage/vpc"), ids(&["net"]));
    // cluster_override.tf replaces the block's `config`, keeping its `backend`.
    assert_eq!(sources(&g, from, "stage/eks"), ids(&["cluster"]));
    // backend_override.tf replaces stage/db's backend.
    assert_eq!(sources(&g, from, "stage/db"), ids(&["db"]));
    // override.tf replaces a variable's default.
    assert_eq!(sources(&g, from, "stage/cache"), ids(&["cache"]));
    assert_eq!(codes(&g), ids(&["unmatched-remote-state"]));
    snap!("rules_override", summary(&g));
}

#[test]
fn variable_layers_without_flags() {
    let p = Project::fixture("rules/tfvars");
    let g = graph(&p, &[]);
    let from = "stage/app";
    assert_eq!(sources(&g, from, "stage/from-tfvars"), ids(&["a"]));
    assert_eq!(sources(&g, from, "stage/from-tfvars-json"), ids(&["b"]));
    // a.auto.tfvars < b.auto.tfvars.json < c.auto.tfvars, the last one wins.
    assert_eq!(sources(&g, from, "stage/from-auto-c"), ids(&["c"]));
    assert_eq!(sources(&g, from, "stage/from-auto-a"), ids(&["d", "e"]));
    assert_eq!(sources(&g, from, "stage/from-list"), ids(&["list"]));
    assert_eq!(
        sources(&g, from, "stage/from-set-a"),
        ids(&["names[\"from-set-a\"]"])
    );
    assert_eq!(sources(&g, from, "stage/from-map"), ids(&["deps[\"one\"]"]));
    assert_eq!(sources(&g, from, "stage/from-null"), ids(&["nothing"]));
    let missing = diagnostics_about(&g, "`var.missing` has no default");
    assert_eq!(missing.len(), 1);
    assert_eq!(missing[0].0, "unresolved-remote-state");
    snap!("rules_tfvars", summary(&g));
}

#[test]
fn var_file_and_var_flags() {
    let p = Project::fixture("rules/tfvars");
    let g = graph(
        &p,
        &[
            "--var-file",
            "vars.tfvars",
            "--var",
            "e=from-var",
            "--var",
            "missing=from-default",
        ],
    );
    let from = "stage/app";
    assert_eq!(sources(&g, from, "stage/from-var-file"), ids(&["d"]));
    assert_eq!(sources(&g, from, "stage/from-var"), ids(&["e"]));
    assert_eq!(sources(&g, from, "stage/from-default"), ids(&["missing"]));
    // --var reaches every module that declares the variable.
    assert_eq!(deps_of(&g, "stage/other"), ids(&["stage/from-var"]));
    assert!(codes(&g).is_empty(), "{}", summary(&g));
    snap!("rules_tfvars_flags", summary(&g));

    // A JSON variables file is read as JSON, as Terraform does for `*.json`.
    let json = graph(&p, &["--var-file", "vars.json"]);
    assert_eq!(
        sources(&json, from, "stage/from-var-file"),
        ids(&["d", "e"])
    );

    let bad = p.run(&["graph", "--var-file", "stage/app/main.tf"]);
    assert_eq!(bad.code, 0, "a .tf file is valid HCL: {}", bad.stderr);
    p.write("broken.tfvars", "d = \n");
    let bad = p.run(&["graph", "--var-file", "broken.tfvars"]);
    assert_eq!(bad.code, 1);
    assert!(
        bad.stderr
            .starts_with("error: --var-file broken.tfvars:1:5:"),
        "{}",
        bad.stderr
    );
}

#[test]
fn for_each_and_count() {
    let p = Project::fixture("rules/foreach");
    let g = graph(&p, &[]);
    assert_eq!(
        sources(&g, "stage/sets", "stage/vpc"),
        ids(&["net[\"vpc\"]"])
    );
    assert_eq!(deps_of(&g, "stage/maps"), ids(&["stage/eks", "stage/vpc"]));
    assert_eq!(
        deps_of(&g, "stage/objects"),
        ids(&["stage/dns", "stage/rds"])
    );
    assert_eq!(
        sources(&g, "stage/forexpr", "stage/iam"),
        ids(&["dep[\"IAM\"]"])
    );
    assert_eq!(
        sources(&g, "stage/listobj", "stage/vpc"),
        ids(&["dep[\"network\"]"])
    );
    assert_eq!(sources(&g, "stage/counted", "stage/rds"), ids(&["dep[0]"]));
    assert_eq!(sources(&g, "stage/counted", "stage/eks"), ids(&["dep[1]"]));
    assert_eq!(
        sources(&g, "stage/counted", "stage/iam"),
        ids(&["string_count[0]"])
    );
    // Every bad block is one `unresolved-remote-state`; the good instance still counts.
    assert_eq!(
        sources(&g, "stage/bad", "stage/vpc"),
        ids(&["partly_unknown[\"good\"]"])
    );
    assert_eq!(codes(&g), vec!["unresolved-remote-state".to_owned(); 10]);
    // Empty collections and count = 0: nothing at all.
    assert!(deps_of(&g, "stage/empty").is_empty());
    assert!(diagnostics_about(&g, "empty").is_empty());
    snap!("rules_foreach", summary(&g));
}

#[test]
fn config_forms_and_workspace() {
    let p = Project::fixture("rules/config");
    let g = graph(&p, &[]);
    let from = "stage/app";
    assert_eq!(sources(&g, from, "stage/vpc"), ids(&["attribute"]));
    assert_eq!(sources(&g, from, "stage/eks"), ids(&["block"]));
    assert_eq!(sources(&g, from, "stage/rds"), ids(&["merged"]));
    assert_eq!(sources(&g, from, "stage/iam"), ids(&["from_local"]));
    assert_eq!(sources(&g, from, "stage/dns"), ids(&["workspaced"]));
    assert_eq!(
        deps_of(&g, "stage/nobackend"),
        ids(&["stage/eks", "stage/vpc"])
    );
    assert_eq!(codes(&g), vec!["unresolved-remote-state".to_owned(); 6]);
    snap!("rules_config", summary(&g));
}

#[test]
fn state_identity_of_every_backend() {
    let p = Project::fixture("rules/backends");
    let g = graph(&p, &[]);
    // Rule 1 for every backend type: no key here looks like a module id.
    let expected: Vec<String> = [
        "azurerm",
        "cloud",
        "consul",
        "cos",
        "gcs",
        "http",
        "implicit",
        "kubernetes",
        "local",
        "oss",
        "pg",
        "pgdefault",
        "remote",
        "s3",
    ]
    .iter()
    .map(|m| format!("stage/{m}"))
    .collect();
    assert_eq!(deps_of(&g, "stage/consumer"), expected);
    // Rule 2 after stripping env:/<ws>/, <prefix>/<ws>/, a trailing `/`, default.tfstate,
    // azurerm's env:<ws> and .tfstate.
    assert_eq!(
        sources(&g, "stage/paths", "stage/pathmod"),
        ids(&[
            "azurerm_env",
            "env_prefix",
            "gcs_default_state",
            "gcs_slash",
            "key_prefix",
            "plain_tfstate"
        ])
    );
    assert_eq!(
        sources(&g, "stage/paths", "stage/partial"),
        ids(&["partial"])
    );
    assert_eq!(codes(&g), ids(&["unmatched-remote-state"]));
    snap!("rules_backends", summary(&g));
}

#[test]
fn matching_rules() {
    let p = Project::fixture("rules/matching");
    let g = graph(&p, &[]);
    let app = "platform/stage/eu/app";
    assert_eq!(sources(&g, app, "platform/stage/eu/vpc"), ids(&["exact"]));
    assert_eq!(
        sources(&g, app, "legacy/platform/stage/eu/vpc"),
        ids(&["suffix"])
    );
    // An excluded module is still a dependency.
    assert_eq!(
        sources(&g, app, "platform/stage/eu/rds"),
        ids(&["context1"])
    );
    assert_eq!(
        sources(&g, app, "platform/stage/eu/eks/addons"),
        ids(&["context2"])
    );
    assert_eq!(
        deps_of(&g, "platform/stage/eu/eks/addons"),
        ids(&["platform/stage/eu/rds"])
    );
    let ambiguous = diagnostics_about(&g, "matches 2 modules");
    assert_eq!(ambiguous.len(), 2);
    assert!(ambiguous[0]
        .1
        .contains("by state identity: platform/stage/eu/shared-a, platform/stage/eu/shared-b"));
    assert!(ambiguous[1]
        .1
        .contains("by context: platform/stage/eu/eks/vpc, platform/stage/eu/vpc"));
    for library in ["\"library\"", "\"_modules/net\"", "\"shared/net\""] {
        assert_eq!(
            diagnostics_about(&g, library)[0].0,
            "unmatched-remote-state",
            "{library}"
        );
    }
    assert_eq!(diagnostics_about(&g, "own state").len(), 2);
    let elsewhere = diagnostics_about(&g, "no module for state path \"rds\"");
    assert!(
        elsewhere[0]
            .1
            .contains("its backend's `bucket` is \"state\", not \"another-team\""),
        "{elsewhere:?}"
    );
    snap!("rules_matching", summary(&g));
}

#[test]
fn evaluation_errors_are_diagnostics() {
    let p = Project::fixture("rules/evaluation");
    let g = graph(&p, &[]);
    assert!(edges(&g).is_empty());
    let c = codes(&g);
    for code in [
        "local-cycle",
        "evaluation-limit",
        "unknown-function",
        "unresolved-remote-state",
    ] {
        assert!(c.iter().any(|x| x == code), "no {code}: {c:?}");
    }
    let guessed = diagnostics_about(&g, "TerraCi would have guessed");
    assert_eq!(guessed.len(), 1);
    assert!(
        guessed[0].1.contains("environment = \"stage\""),
        "{guessed:?}"
    );
    assert_eq!(diagnostics_about(&g, "only known after apply").len(), 4);
    // A location that fails to evaluate: unresolved, with the evaluation error as reason.
    let looked_up = diagnostics_about(&g, "data.terraform_remote_state.looked_up");
    assert_eq!(looked_up.len(), 1, "{looked_up:?}");
    assert_eq!(looked_up[0].0, "unresolved-remote-state");
    assert!(
        looked_up[0].1.contains("has no attribute \"missing\""),
        "{looked_up:?}"
    );
    snap!("rules_evaluation", summary(&g));
}

#[test]
fn filesystem_functions_read_relative_to_the_module() {
    let p = Project::fixture("rules/filesystem");
    let g = graph(&p, &[]);
    let from = "stage/app";
    assert_eq!(sources(&g, from, "stage/vpc"), ids(&["optional", "vpc"]));
    assert_eq!(sources(&g, from, "stage/eks"), ids(&["eks"]));
    assert_eq!(
        deps_of(&g, from),
        ids(&["stage/dns", "stage/eks", "stage/rds", "stage/vpc"])
    );
    assert_eq!(
        diagnostics_about(&g, "missing.txt")[0].1,
        "cannot resolve the state location of `data.terraform_remote_state.missing`: no file `stage/app/missing.txt`; no dependency edge is created"
    );
    snap!("rules_filesystem", summary(&g));
}

// TerraCi's documented examples (github.com/edelwud/terraci, `examples/`), rebuilt as
// fixtures; the edges asserted here are the ones its READMEs document.

#[test]
fn terraci_example_basic() {
    let p = Project::fixture("terraci-examples/basic");
    let g = graph(&p, &[]);
    let d = "platform/stage/eu-central-1";
    assert_eq!(
        edges(&g),
        BTreeSet::from([
            (format!("{d}/app"), format!("{d}/eks")),
            (format!("{d}/eks"), format!("{d}/vpc")),
        ])
    );
    assert!(codes(&g).is_empty());
    snap!("terraci_example_basic", summary(&g));
}

#[test]
fn terraci_example_cross_env_with_guessed_locals() {
    // TerraCi's first version of this example never declared its locals; TerraCi filled
    // them from the path. Terraform rejects it, so terraci names the guess, no edge.
    let p = Project::fixture("terraci-examples/cross-env-guessed");
    let g = graph(&p, &[]);
    assert!(edges(&g).is_empty());
    let guessed = diagnostics_about(&g, "TerraCi would have guessed");
    assert_eq!(guessed.len(), 2);
    for (code, message) in &guessed {
        assert_eq!(code, "unresolved-remote-state");
        assert!(message.contains("service = \"platform\""), "{message}");
    }
    assert!(guessed[0].1.contains("environment = \"stage\""));
    assert!(guessed[0].1.contains("region = \"eu-central-1\""));
    snap!("terraci_example_cross_env_guessed", summary(&g));
}

#[test]
fn terraci_example_cross_env_with_declared_locals() {
    let p = Project::fixture("terraci-examples/cross-env-declared");
    let g = graph(&p, &[]);
    let from = "platform/stage/eu-central-1/ec2/db-migrate";
    assert_eq!(
        deps_of(&g, from),
        ids(&[
            "platform/stage/eu-central-1/vpc",
            "platform/vpn/eu-north-1/vpc"
        ])
    );
    assert_eq!(edges(&g).len(), 2);
    assert!(codes(&g).is_empty());
    snap!("terraci_example_cross_env_declared", summary(&g));
}

#[test]
fn terraci_example_library_modules() {
    let p = Project::fixture("terraci-examples/library-modules");
    let g = graph(&p, &[]);
    assert_eq!(
        edges(&g),
        BTreeSet::from([(
            "platform/prod/eu-north-1/msk".to_owned(),
            "platform/prod/eu-north-1/vpc".to_owned()
        )])
    );
    assert_eq!(
        g["levels"],
        serde_json::json!([
            [
                "platform/prod/eu-north-1/vpc",
                "platform/prod/eu-west-1/msk"
            ],
            ["platform/prod/eu-north-1/msk"]
        ])
    );
    assert!(codes(&g).is_empty());
    let out = p.run(&["graph", "--format", "levels"]);
    snap!(
        "terraci_example_library_modules",
        format!(
            "{}$ terraci graph --format levels\n{}",
            summary(&g),
            out.stdout
        )
    );
}

/// A synthetic monorepo (literal keys, `for_each` over locals, keys built from locals):
/// every edge found, no diagnostic.
#[test]
fn a_synthetic_monorepo_resolves_completely() {
    let (p, expected) = crate::support::synthetic_monorepo(150);
    let g = graph(&p, &[]);
    assert_eq!(g["modules"].as_array().map(Vec::len), Some(150));
    assert_eq!(edges(&g).len(), expected, "{}", summary(&g));
    assert!(codes(&g).is_empty(), "{}", summary(&g));
    let stats: Output = p.run(&["graph", "--stats"]);
    assert_eq!(stats.code, 0, "{}", stats.stderr);
}

#[test]
fn remote_state_in_local_module_calls_counts_for_the_caller() {
    let p = Project::fixture("rules/calls");
    let g = graph(&p, &[]);
    // Default target (vpc), a for_each instance (kms), a nested call (dns); `count = 0`
    // reads nothing; the library's own block makes no edge of its own.
    assert_eq!(
        edges(&g),
        [
            ("stage/app", "stage/dns"),
            ("stage/app", "stage/kms"),
            ("stage/app", "stage/vpc"),
        ]
        .iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect()
    );
    // The required variable the call does not set: unresolved, on the calling root,
    // naming the child's variable and the call site.
    let broken = diagnostics_about(&g, "stage/broken/main.tf:3");
    assert_eq!(broken.len(), 1, "{broken:?}");
    assert_eq!(broken[0].0, "unresolved-remote-state");
    assert!(broken[0]
        .1
        .contains("`var.env` of modules/reader has no default"));
    let module_of = |needle: &str| -> Vec<String> {
        g["diagnostics"]
            .as_array()
            .expect("diagnostics")
            .iter()
            .filter(|d| str_of(d, "message").contains(needle))
            .map(|d| str_of(d, "module").to_owned())
            .collect()
    };
    assert_eq!(module_of("stage/broken/main.tf:3"), ["stage/broken"]);
    assert_eq!(
        diagnostics_about(&g, "modules/loop -> modules/loop2 -> modules/loop")[0].0,
        "module-call-cycle"
    );
    assert_eq!(
        diagnostics_about(&g, "modules/deleted")[0].0,
        "missing-module-source"
    );
    // The unused local that would fail is never evaluated; registry sources are a note
    // shown with -v only.
    assert!(diagnostics_about(&g, "missing")
        .iter()
        .all(|(c, _)| c != "evaluation-error"));
    assert!(!codes(&g).iter().any(|c| c == "remote-module-source"));
    let verbose = graph(&p, &["-v"]);
    assert_eq!(
        diagnostics_about(&verbose, "terraform-aws-modules/vpc/aws")[0].0,
        "remote-module-source"
    );
    snap!("rules_calls", summary(&g));
}

#[test]
fn partial_identity_workspaces_and_tails() {
    let p = Project::fixture("rules/identity");
    let g = graph(&p, &[]);
    let rule_of = |to: &str, name: &str| -> String {
        g["edges"]
            .as_array()
            .expect("edges")
            .iter()
            .filter(|e| str_of(e, "from") == "infra/app" && str_of(e, "to") == to)
            .flat_map(|e| e["sources"].as_array().cloned().unwrap_or_default())
            .find(|s| str_of(s, "name") == name)
            .map(|s| str_of(&s, "rule").to_owned())
            .unwrap_or_default()
    };
    assert_eq!(rule_of("infra/net", "net"), "partial state identity");
    assert_eq!(rule_of("infra/cluster", "live_cluster"), "state identity");
    assert_eq!(rule_of("infra/cluster", "this_cluster"), "state identity");
    assert_eq!(rule_of("infra/db", "prod_db"), "state identity");
    assert_eq!(
        rule_of("projects/infra-vpc", "vpc"),
        "tail of the state path"
    );
    assert_eq!(
        rule_of("projects/infra-vpc", "blue_vpc"),
        "tail of the state path"
    );
    assert_eq!(edges(&g).len(), 4, "{:?}", edges(&g));
    // Both buckets known and different: no edge, and the message says which field.
    let other = diagnostics_about(&g, "other/state");
    assert_eq!(other[0].0, "unmatched-remote-state");
    assert!(
        other[0]
            .1
            .contains("`bucket` is \"bucket-one\", not \"bucket-two\""),
        "{other:?}"
    );
    assert!(
        diagnostics_about(&g, "by partial state identity: infra/twin-a, infra/twin-b")[0].0
            == "ambiguous-remote-state"
    );
    // An unknown head whose known tail fits two modules: the unknown is the reason.
    assert_eq!(
        diagnostics_about(
            &g,
            "fits 2 modules by tail of the state path: legacy/dup, projects/dup"
        )[0]
        .0,
        "unresolved-remote-state"
    );
    // `terraform.tfstate` alone is no directory: not a self-reference of infra/terraform.
    assert!(!codes(&g).iter().any(|c| c == "self-reference"));
    assert_eq!(
        diagnostics_about(&g, "state path \"terraform.tfstate\"")[0].0,
        "unmatched-remote-state"
    );
    snap!("rules_identity", summary(&g));
}

#[test]
fn the_config_says_what_the_code_cannot() {
    let p = Project::fixture("rules/declared");
    let g = graph(&p, &[]);
    let pairs = |list: &[(&str, &str)]| -> BTreeSet<(String, String)> {
        list.iter()
            .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
            .collect()
    };
    // base: `variables` values + files with a placeholder, `backend_config` values with
    // `{var.NAME}`; dns: `dependencies.add`; db: found, then `dependencies.ignore`d.
    assert_eq!(
        edges(&g),
        pairs(&[
            ("aws/app", "aws/base"),
            ("aws/app", "aws/dns"),
            ("aws/app", "aws/net")
        ])
    );
    assert_eq!(
        sources(&g, "aws/app", "aws/dns"),
        ["the app's records live in the dns zone"]
    );
    // TF_VAR_ in execution.env is a variable value.
    assert_eq!(
        diagnostics_about(&g, "nia-eu-west-2-net")[0].0,
        "unmatched-remote-state"
    );
    // Other repositories' state: listed, no warning.
    assert_eq!(
        g["external_state"][0]["state"],
        "s3://other-team/shared.tfstate"
    );
    assert!(diagnostics_about(&g, "shared").is_empty());
    // Typos and missing files are warnings.
    assert_eq!(
        diagnostics_about(&g, "`gcp/*` names no module")[0].0,
        "config-variables"
    );
    assert_eq!(
        diagnostics_about(&g, "nowhere.tfvars")[0].0,
        "config-variables"
    );
    assert_eq!(
        diagnostics_about(&g, "`from: aws/nothing` names no module")[0].0,
        "unused-dependency-rule"
    );
    assert_eq!(
        diagnostics_about(&g, "(aws/dns -> aws/base): no edge it names was found")[0].0,
        "unused-dependency-rule"
    );
    // The ignored edge is said with -v.
    assert!(diagnostics_about(&g, "is ignored").is_empty());
    let verbose = graph(&p, &["-v"]);
    assert_eq!(
        diagnostics_about(&verbose, "aws/app -> aws/db is ignored")[0].0,
        "ignored-dependency"
    );
    // --var beats TF_VAR_ from execution.env (and `variables:` entries): every module
    // that declares `environment` follows it, so the base edge stays.
    let flags = graph(
        &p,
        &["--var", "region=eu-west-1", "--var", "environment=dev"],
    );
    assert_eq!(
        diagnostics_about(&flags, "nia-eu-west-1-net")[0].0,
        "unmatched-remote-state"
    );
    assert!(edges(&flags).contains(&("aws/app".to_owned(), "aws/base".to_owned())));
    snap!("rules_declared", summary(&g));
}

#[test]
fn one_diagnostic_per_root_cause_with_hints_and_a_summary() {
    let p = Project::fixture("rules/causes");
    let out = p.run(&["validate"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    // The same variable behind two modules' references: one warning naming both and
    // the fix.
    assert_eq!(
        out.stderr.matches("`var.stack`").count(),
        1,
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("in 2 modules (stage/a, stage/b)"),
        "{}",
        out.stderr
    );
    assert!(out
        .stderr
        .contains("set it in `variables:` of .terraci.yaml"));
    // A block named like a module.
    assert!(out
        .stderr
        .contains("(hint: the block is named like the module `stage/infra-google-monitoring`)"));
    // The summary by code.
    assert!(
        out.stdout.contains("  unresolved-remote-state: 2\n"),
        "{}",
        out.stdout
    );
    let json = p.run(&["validate", "--format", "json"]);
    assert_eq!(json.code, 0);
    assert!(json.stderr.is_empty(), "{}", json.stderr);
    let doc: Value = serde_json::from_str(&json.stdout).expect("validate --format json");
    assert_eq!(doc["by_code"]["unresolved-remote-state"], 2);
    assert_eq!(doc["valid"], true);
    assert_eq!(doc["diagnostics"].as_array().map(Vec::len), Some(2));
    let strict = p.run(&["validate", "--strict", "--format", "json"]);
    assert_eq!(strict.code, 3);
    let doc: Value = serde_json::from_str(&strict.stdout).expect("validate --format json");
    assert_eq!(doc["valid"], false);
}

#[test]
fn flat_state_names_end_in_a_neighbours_name() {
    let p = Project::fixture("rules/flat-names");
    let g = graph(&p, &[]);
    // Empty `backend "s3" {}` blocks everywhere: only the end of each flat name tells.
    assert_eq!(deps_of(&g, "components/base"), ids(&["components/account"]));
    // `-app-api` is `app-api`, not `api`.
    assert_eq!(
        deps_of(&g, "components/app"),
        ids(&["components/app-api", "components/base"])
    );
    // Every part known (`demo-dev-account`): the same rule.
    assert_eq!(
        deps_of(&g, "components/reader"),
        ids(&["components/account"])
    );
    // A component that states its key, one with local state, no such component, and a
    // name that only ends inside a word: no edge, and a diagnostic that says why.
    let keyed = diagnostics_about(&g, "demo-dev-keyed");
    assert!(
        keyed[0]
            .1
            .contains("its backend states its own key \"keyed/terraform.tfstate\""),
        "{keyed:?}"
    );
    let plain = diagnostics_about(&g, "demo-dev-plain");
    assert!(plain[0].1.contains("keeps its state locally"), "{plain:?}");
    assert_eq!(diagnostics_about(&g, "demo-dev-missing").len(), 1);
    assert_eq!(diagnostics_about(&g, "demo-dev-database").len(), 1);
    snap!("rules_flat_names", summary(&g));
}

#[test]
fn the_local_backend_as_terraform_reads_it() {
    // Each answer is what terraform 1.11.4 did (the fixture's comments).
    let p = Project::fixture("rules/local-backend");
    let g = graph(&p, &[]);
    // Another workspace is under `workspace_dir`, whatever `path` says; with `path`
    // only, it is under the reading root's own terraform.tfstate.d.
    assert_eq!(
        sources(&g, "ws/app", "ws/net"),
        ids(&["net_default", "net_staging"])
    );
    assert_eq!(sources(&g, "ws/app", "ws/net2"), ids(&["net2_staging"]));
    assert_eq!(
        diagnostics_about(&g, "own_staging"),
        [(
            "self-reference".to_owned(),
            "`data.terraform_remote_state.own_staging` reads this module's own state; no edge"
                .to_owned()
        )]
    );
    assert!(deps_of(&g, "ws/elsewhere").is_empty());
    assert_eq!(
        diagnostics_about(
            &g,
            "ws/elsewhere/terraform.tfstate.d/staging/terraform.tfstate"
        )[0]
        .0,
        "unmatched-remote-state"
    );
    // A relative `path` in a called module is read from the root being planned;
    // `path.module` still names the module's directory.
    assert_eq!(sources(&g, "live/svc", "live/net"), ids(&["relative"]));
    assert_eq!(sources(&g, "live/svc", "shared/net"), ids(&["path_module"]));
    // One local file kept by two modules: ambiguous, naming both.
    assert!(deps_of(&g, "stage/reader").is_empty());
    assert_eq!(
        diagnostics_about(&g, "stage/shared-a, stage/shared-b")[0].0,
        "ambiguous-remote-state"
    );
    assert_eq!(edges(&g).len(), 4, "{:?}", edges(&g));
    snap!("rules_local_backend", summary(&g));
}

#[test]
fn an_unset_variable_names_the_tfvars_file_that_sets_it() {
    let p = Project::empty();
    p.write(
        ".terraci.yaml",
        "structure:\n  pattern: \"{group}/{module}\"\n",
    );
    p.write(
        "stacks/net/main.tf",
        "terraform {\n  backend \"s3\" {\n    bucket = \"b\"\n    key    = \"net/terraform.tfstate\"\n  }\n}\n",
    );
    p.write(
        "stacks/dns/main.tf",
        "variable \"net_stack\" {}\n\ndata \"terraform_remote_state\" \"net\" {\n  backend = \"s3\"\n  config = {\n    bucket = \"b\"\n    key    = \"${var.net_stack}/terraform.tfstate\"\n  }\n}\n",
    );
    // Terraform loads neither by itself.
    p.write("envs/prod.tfvars", "# production\nnet_stack = \"net\"\n");
    p.write("stacks/dns/staging.tfvars", "other = 1\n");
    let g = graph(&p, &[]);
    assert!(edges(&g).is_empty());
    let unresolved = diagnostics_about(&g, "`var.net_stack` has no default");
    assert!(
        unresolved[0].1.contains(
            "(`net_stack` is set in envs/prod.tfvars:2, which terraform does not load by itself: variables: [{modules: [\"stacks/dns\"], files: [\"../../envs/prod.tfvars\"]}] in .terraci.yaml, or --var-file envs/prod.tfvars)"
        ),
        "{unresolved:?}"
    );
    // The entry it names gives the edge.
    p.write(
        ".terraci.yaml",
        "structure:\n  pattern: \"{group}/{module}\"\nvariables:\n  - modules: [\"stacks/dns\"]\n    files: [\"../../envs/prod.tfvars\"]\n",
    );
    let g = graph(&p, &[]);
    assert_eq!(deps_of(&g, "stacks/dns"), ids(&["stacks/net"]));
}
