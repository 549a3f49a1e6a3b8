use crate::snap;
use crate::support::Project;

#[test]
fn json_graph_of_the_example() {
    let p = Project::fixture("example");
    let out = p.run(&["graph", "--format", "json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).expect("valid JSON");
    for key in ["modules", "edges", "levels", "cycles", "diagnostics"] {
        assert!(v.get(key).is_some(), "missing {key}");
    }
    snap!("graph_example_json", out.snapshot());
}

#[test]
fn text_formats_of_the_example() {
    let p = Project::fixture("example");
    let mut all = String::new();
    for args in [
        &["graph", "--format", "dot"][..],
        &["graph", "--format", "list"],
        &["graph", "--format", "levels"],
        &["graph", "--stats"],
        &[
            "graph",
            "--format",
            "list",
            "-m",
            "platform/stage/eu-central-1/app",
        ],
        &[
            "graph",
            "--format",
            "list",
            "-m",
            "platform/stage/eu-central-1/vpc",
            "--dependents",
        ],
    ] {
        let out = p.run(args);
        assert_eq!(out.code, 0, "{}", out.stderr);
        all.push_str(&format!("$ terraci {}\n{}", args.join(" "), out.stdout));
    }
    snap!("graph_example_text", all);
}

#[test]
fn diagnostics_cases() {
    let p = Project::fixture("diagnostics");
    let out = p.run(&["graph", "--format", "json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    snap!("graph_diagnostics_json", out.stdout.clone());
    let out = p.run(&["graph", "--format", "list"]);
    snap!("graph_diagnostics_human", out.stderr);
}

#[test]
fn cycles_are_printed_as_paths() {
    let p = Project::fixture("cycle");
    let out = p.run(&["graph", "--format", "levels"]);
    assert_eq!(out.code, 0);
    snap!("graph_cycle_levels", out.snapshot());
}

#[test]
fn graph_takes_the_selection_flags_and_short_format() {
    let p = crate::support::Project::fixture("example");
    // TerraCi's `graph -f levels`: `-f` is the format here (and `-F` still is).
    let terraci = p.run(&["graph", "-f", "levels"]);
    assert_eq!(terraci.code, 0, "{}", terraci.stderr);
    assert!(terraci.stdout.starts_with("Level 0"), "{}", terraci.stdout);
    let out = p.run(&[
        "graph",
        "-F",
        "levels",
        "--filter",
        "environment=stage",
        "-x",
        "**/rds",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!out.stdout.contains("platform/prod/"), "{}", out.stdout);
    assert!(!out.stdout.contains("/rds"), "{}", out.stdout);
    assert!(
        out.stdout.contains("platform/stage/eu-central-1/app"),
        "{}",
        out.stdout
    );
    let all = p.run(&["graph", "--format", "levels"]);
    assert!(
        all.stdout.contains("platform/prod/eu-central-1/rds"),
        "{}",
        all.stdout
    );
    // A filter key that is no pattern segment is an error, as for generate.
    let bad = p.run(&["graph", "--filter", "nope=x"]);
    assert_eq!(bad.code, 2, "{}", bad.stderr);
}
