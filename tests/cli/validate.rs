use crate::snap;
use crate::support::Project;

#[test]
fn validate_the_example() {
    let p = Project::fixture("example");
    let out = p.run(&["validate", "-v"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    snap!("validate_example", out.snapshot());
}

#[test]
fn validate_exits_3_on_cycles() {
    let p = Project::fixture("cycle");
    let out = p.run(&["validate"]);
    assert_eq!(out.code, 3);
    assert!(
        out.stderr.contains("circular dependency detected"),
        "{}",
        out.stderr
    );
}

#[test]
fn strict_fails_on_warnings() {
    let p = Project::fixture("example");
    p.write(
        "platform/stage/eu-central-1/extra/main.tf",
        "data \"terraform_remote_state\" \"x\" {\n  backend = \"s3\"\n  config = {\n    bucket = \"b\"\n    key = \"nowhere/terraform.tfstate\"\n  }\n}\n",
    );
    let out = p.run(&["validate"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("unmatched-remote-state"),
        "{}",
        out.stderr
    );
    assert_eq!(p.run(&["validate", "--strict"]).code, 3);
}

#[test]
fn error_diagnostics_fail_validation() {
    // Syntax errors and local cycles are errors, not warnings: validate fails without --strict.
    let p = Project::fixture("diagnostics");
    let out = p.run(&["validate"]);
    assert_eq!(out.code, 3);
    snap!("validate_diagnostics", out.snapshot());
}

#[test]
fn unknown_config_key_is_named_with_a_suggestion() {
    let p = Project::empty();
    p.write(".terraci.yaml", "structur:\n  pattern: \"{a}/{b}\"\n");
    let out = p.run(&["validate"]);
    assert_eq!(out.code, 1);
    assert_eq!(
        out.stderr,
        "error: unknown key `structur` at .terraci.yaml:1:1, did you mean `structure`?\n"
    );
}

#[test]
fn config_is_found_through_env_and_flags() {
    let p = Project::fixture("example");
    std::fs::rename(p.path().join(".terraci.yaml"), p.path().join("ci.yaml")).unwrap();
    // Without the config the default pattern still finds the modules; the library is not
    // listed, so `_modules/kafka` (depth 2) is not a module at all.
    let out = p.run(&["graph", "--format", "list"]);
    assert!(!out.stdout.contains("_modules"));
    let with_flag = p.run(&["-c", "ci.yaml", "graph", "--format", "json"]);
    let with_env = p.run_env(
        &["graph", "--format", "json"],
        &[("TERRACI_CONFIG", "ci.yaml")],
    );
    assert!(with_flag.stdout.contains("\"library\": true"));
    assert_eq!(with_flag.stdout, with_env.stdout);
}

#[test]
fn a_listed_library_nobody_uses_is_a_warning() {
    let p = Project::fixture("example");
    p.write("_modules/legacy/main.tf", "variable \"name\" {}\n");
    // Nested in a used library: part of it, not a library of its own to warn about.
    p.write(
        "_modules/kafka/examples/basic/main.tf",
        "module \"k\" {\n  source = \"../..\"\n}\n",
    );
    let out = p.run(&["validate", "-v"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    snap!("validate_unused_library", out.snapshot());
    assert_eq!(p.run(&["validate", "--strict"]).code, 3);
}

#[test]
fn a_pattern_deeper_than_the_tree_finds_no_modules_and_fails() {
    // The default pattern has 4 segments; the modules sit 2 levels deep.
    let p = Project::empty();
    p.write("stage/vpc/main.tf", "locals {}\n");
    p.write("stage/app/main.tf", "locals {}\n");
    p.write("_modules/net/main.tf", "locals {}\n");
    let expected = "error: no modules found: pattern `{service}/{environment}/{region}/{module}` needs module directories 4 levels deep; the deepest directories with Terraform files are 2 levels deep: `_modules/net`, `stage/app`, `stage/vpc`; the pattern `{environment}/{module}` fits this tree (`terraci init` writes it)\n";
    for command in [
        &["validate"][..],
        &["generate"],
        &["graph"],
        &["local-exec", "plan", "--dry-run"],
    ] {
        let out = p.run(command);
        assert_eq!(
            (out.code, out.stderr.as_str()),
            (1, expected),
            "{command:?}"
        );
        assert_eq!(out.stdout, "", "{command:?}");
    }
    let empty = Project::empty();
    let out = empty.run(&["validate"]);
    assert_eq!(
        (out.code, out.stderr.as_str()),
        (1, "error: no modules found: pattern `{service}/{environment}/{region}/{module}` needs module directories 4 levels deep, and no directory holds Terraform files (`*.tf`, `*.tf.json`, `*.tofu`, `*.tofu.json`)\n")
    );
}

#[test]
fn a_cycle_is_a_dependency_cycle_diagnostic_in_every_command() {
    let p = Project::fixture("cycle");
    let cycle = "circular dependency detected\n  stage/app -> stage/eks -> stage/vpc -> stage/app";
    let printed = format!("error[dependency-cycle]: {cycle}\n");
    // Printed once, by the diagnostic printer, and counted with the other diagnostics.
    let out = p.run(&["validate"]);
    assert_eq!(out.code, 3);
    assert_eq!(
        out.stderr.matches("circular dependency detected").count(),
        1,
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains(&printed), "{}", out.stderr);
    assert!(
        out.stdout
            .contains("diagnostics: 1 errors, 0 warnings\n  dependency-cycle: 1\n"),
        "{}",
        out.stdout
    );
    let generate = p.run(&["generate"]);
    assert_eq!(generate.code, 3);
    assert!(generate.stderr.starts_with(&printed), "{}", generate.stderr);
    assert_eq!(
        generate.stderr, out.stderr,
        "the one diagnostic, as validate prints it"
    );
    let graph = p.run(&["graph", "--format", "list"]);
    assert_eq!(graph.code, 0, "{}", graph.stderr);
    assert!(graph.stderr.contains(&printed), "{}", graph.stderr);
    // JSON outputs list it with the others: the code, and the message with the cycles.
    for args in [
        &["validate", "--format", "json"][..],
        &["graph", "--format", "json"],
    ] {
        let out = p.run(args);
        let doc: serde_json::Value = serde_json::from_str(&out.stdout).expect("JSON");
        let found: Vec<&serde_json::Value> = doc["diagnostics"]
            .as_array()
            .expect("diagnostics")
            .iter()
            .filter(|d| d["code"] == "dependency-cycle")
            .collect();
        assert_eq!(found.len(), 1, "{args:?}: {}", out.stdout);
        assert_eq!(found[0]["severity"], "error");
        let message = found[0]["message"].as_str().expect("a message");
        assert!(message.starts_with(&format!("{cycle}\n")), "{message}");
        assert!(
            message.contains(
                "\n  dependencies:\n    ignore:\n      - {from: \"stage/app\", to: \"stage/eks\", "
            ),
            "{message}"
        );
    }
}

#[test]
fn a_remote_output_the_owner_does_not_declare_is_a_warning_with_the_closest_name() {
    let p = Project::fixture("lsp");
    let out = p.run(&["validate"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    // `vpc_idd` of stage/vpc, whose outputs are `vpc_id` and `subnet_ids`; not the
    // whole map, nor `outputs[var.key]`, nor `outputs["endpoint"]` (declared), nor a
    // read of `legacy`, whose owner is unresolved.
    assert!(
        out.stderr.contains(
            "warning[unknown-remote-output]: stage/app/main.tf:42:54: \
             `data.terraform_remote_state.vpc.outputs.vpc_idd`: the module `stage/vpc`, \
             which owns that state, has no `output \"vpc_idd\"` (hint: the closest output \
             there is `vpc_id`)"
        ),
        "{}",
        out.stderr
    );
    assert_eq!(
        out.stderr.matches("unknown-remote-output").count(),
        1,
        "{}",
        out.stderr
    );
    assert!(
        out.stdout.contains("  unknown-remote-output: 1\n"),
        "{}",
        out.stdout
    );
}

#[test]
fn renaming_the_output_in_the_owner_makes_the_reader_warn() {
    let p = Project::fixture("lsp");
    let owner = p.read("stage/db/main.tf");
    p.write(
        "stage/db/main.tf",
        owner.replace("output \"endpoint\"", "output \"db_endpoint\""),
    );
    let out = p.run(&["validate"]);
    assert!(
        out.stderr.contains(
            "`data.terraform_remote_state.db.outputs.endpoint`: the module `stage/db`, which \
             owns that state, has no `output \"endpoint\"` (hint: the closest output there is \
             `db_endpoint`)"
        ),
        "{}",
        out.stderr
    );
}

#[test]
fn an_owner_with_outputs_in_json_is_not_checked() {
    let p = Project::fixture("lsp");
    // terraci does not read outputs from JSON files: none is taken for missing.
    p.write(
        "stage/vpc/outputs.tf.json",
        r#"{"output": {"vpc_idd": {"value": "vpc-1"}}}"#,
    );
    let out = p.run(&["validate"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        !out.stderr.contains("unknown-remote-output"),
        "{}",
        out.stderr
    );
}
