//! A TerraCi user switches by changing the binary: the checks TerraCi's own CLI tests make
//! (graph, global flags, generate, validate, errors, filters, version, help, init,
//! completion, schema, and the pipeline shape of its end-to-end tests), replayed in our
//! words on `fixtures/drop-in`, a project with the same layout as TerraCi's test project.
//! The few checks that do not hold, on purpose, are listed with the reason in
//! `docs/migrating-from-terraci.md`.

use crate::support::{commit_all, Project};

const PROD: &str = "platform/prod/eu-central-1";
const STAGE: &str = "platform/stage/eu-central-1";

fn project() -> Project {
    Project::fixture("drop-in")
}

/// The job names of a GitLab pipeline (top-level keys that are not GitLab keywords).
fn jobs(pipeline: &str) -> Vec<String> {
    let doc: serde_yaml::Value = serde_yaml::from_str(pipeline).expect("pipeline is YAML");
    // The summary job (on by default) reads every plan; these checks are about the
    // modules' jobs, and the summary job has tests of its own.
    let keywords = [
        "stages",
        "variables",
        "default",
        "workflow",
        "include",
        "terraci-summary",
    ];
    doc.as_mapping()
        .expect("a mapping")
        .keys()
        .filter_map(|k| k.as_str())
        // `.name`: a hidden job (terraci's templates), which GitLab never runs.
        .filter(|k| !keywords.contains(k) && !k.starts_with('.'))
        .map(str::to_owned)
        .collect()
}

/// The `needs` of job `name` (job names, `optional`/`artifacts` dropped).
fn needs(pipeline: &str, name: &str) -> Vec<String> {
    let doc: serde_yaml::Value = serde_yaml::from_str(pipeline).expect("pipeline is YAML");
    doc[name]["needs"]
        .as_sequence()
        .map(|s| {
            s.iter()
                .map(|n| {
                    n.as_str()
                        .or_else(|| n["job"].as_str())
                        .expect("a need names a job")
                        .to_owned()
                })
                .collect()
        })
        .unwrap_or_default()
}

fn stage_index(pipeline: &str, job: &str) -> usize {
    let doc: serde_yaml::Value = serde_yaml::from_str(pipeline).expect("pipeline is YAML");
    let stage = doc[job]["stage"].as_str().expect("job has a stage");
    doc["stages"]
        .as_sequence()
        .expect("stages")
        .iter()
        .position(|s| s.as_str() == Some(stage))
        .expect("stage is listed")
}

fn id(env_prefix: &str, module: &str) -> String {
    format!("{env_prefix}/{module}").replace('/', "-")
}

// --- graph -------------------------------------------------------------------------

#[test]
fn graph_dot_goes_to_stdout_or_to_the_output_file() {
    let p = project();
    let out = p.run(&["graph", "--format", "dot"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    for needle in ["digraph", "vpc", "eks", "app", "->"] {
        assert!(out.stdout.contains(needle), "{needle} in\n{}", out.stdout);
    }
    let file = p.path().join("deps.dot");
    let out = p.run(&["graph", "-F", "dot", "-o", file.to_str().expect("utf-8")]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let text = std::fs::read_to_string(&file).expect("written");
    assert!(text.starts_with("digraph") && text.contains("->"), "{text}");
    // One cluster per context, labelled by it.
    assert!(text.contains("label=\"platform/prod\""), "{text}");
    assert!(text.contains("label=\"platform/stage\""), "{text}");
}

#[test]
fn graph_levels_and_list_read_as_terracis() {
    let p = project();
    let levels = p.run(&["graph", "--format", "levels"]);
    assert_eq!(levels.code, 0, "{}", levels.stderr);
    assert!(
        levels.stdout.contains("Level 0 (3 modules):"),
        "{}",
        levels.stdout
    );
    assert!(
        levels.stdout.contains("Level 2 (1 module):"),
        "{}",
        levels.stdout
    );
    assert!(
        levels
            .stdout
            .contains(&format!("  {STAGE}/app  (← eks, rds, s3)")),
        "{}",
        levels.stdout
    );
    let list = p.run(&["graph", "--format", "list"]);
    assert_eq!(list.code, 0, "{}", list.stderr);
    assert!(
        list.stdout.starts_with("[platform/prod]\n"),
        "{}",
        list.stdout
    );
    assert!(
        list.stdout.contains("\n[platform/stage]\n"),
        "{}",
        list.stdout
    );
    assert!(
        list.stdout
            .contains("  eu-central-1/app → eu-central-1/eks, eu-central-1/rds, eu-central-1/s3"),
        "{}",
        list.stdout
    );
}

#[test]
fn graph_stats_counts_roots_leaves_and_depth() {
    let out = project().run(&["graph", "--stats"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    for line in [
        "  Total modules:     7",
        "  Total edges:       6",
        "  Root modules:      3 (no dependencies)",
        "  Leaf modules:      2 (no dependents)",
        "  Max depth:         2",
        "  Cycles:            none",
    ] {
        assert!(out.stdout.contains(line), "{line:?} in\n{}", out.stdout);
    }
}

#[test]
fn an_empty_directory_has_no_modules_for_graph_and_validate() {
    let p = Project::empty();
    for cmd in ["graph", "validate", "generate"] {
        let out = p.run(&[cmd]);
        assert_eq!(out.code, 1, "{cmd}: {}", out.stderr);
        assert!(
            out.stderr.contains("no modules found"),
            "{cmd}: {}",
            out.stderr
        );
    }
}

// --- global flags ----------------------------------------------------------------

#[test]
fn dir_and_config_flags_point_elsewhere() {
    let p = project();
    let elsewhere = Project::empty();
    let dir = p.path().to_str().expect("utf-8");
    let out = elsewhere.run(&["graph", "--format", "levels", "-d", dir]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("vpc") && out.stdout.contains("eks"));
    // A config under another name, given with -c.
    std::fs::rename(
        p.path().join(".terraci.yaml"),
        p.path().join("custom-config.yaml"),
    )
    .expect("rename");
    let out = p.run(&["validate", "-c", "custom-config.yaml"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
}

#[test]
fn log_levels_are_validated_and_take_effect() {
    let p = project();
    assert_eq!(p.run(&["validate", "-v"]).code, 0);
    assert_eq!(p.run(&["validate", "-l", "debug"]).code, 0);
    for cmd in ["validate", "generate"] {
        let out = p.run(&[cmd, "-l", "banana"]);
        assert_eq!(out.code, 2, "{cmd}");
        assert!(out.stderr.contains("invalid log level"), "{}", out.stderr);
    }
    // `error` is -q: a warning is not printed.
    p.write(".terraci.yaml", "extensions:\n  gitlab:\n    imgae: x\n");
    let chatty = p.run(&["validate"]);
    assert!(chatty.stderr.contains("warning["), "{}", chatty.stderr);
    let quiet = p.run(&["validate", "--log-level", "error"]);
    assert!(!quiet.stderr.contains("warning["), "{}", quiet.stderr);
}

#[test]
fn color_always_paints_the_label_and_never_does_not() {
    let p = project();
    p.write(".terraci.yaml", "extensions:\n  gitlab:\n    imgae: x\n");
    let always = p.run(&["validate", "--color", "always"]);
    assert!(
        always.stderr.contains("\u{1b}[1;33mwarning["),
        "{:?}",
        always.stderr
    );
    let never = p.run(&["validate", "--color", "never"]);
    assert!(!never.stderr.contains('\u{1b}'), "{:?}", never.stderr);
}

// --- generate ----------------------------------------------------------------------

#[test]
fn generate_writes_a_gitlab_pipeline_with_terracis_job_names() {
    let p = project();
    let out = p.run(&["generate", "-o", "pipeline.yml"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let text = p.read("pipeline.yml");
    assert!(text.contains("Generated by terraci"), "{text}");
    assert!(text.contains("stages:"));
    let names = jobs(&text);
    for job in [
        format!("plan-{}", id(PROD, "vpc")),
        format!("plan-{}", id(PROD, "eks")),
        format!("apply-{}", id(PROD, "vpc")),
        format!("apply-{}", id(PROD, "eks")),
    ] {
        assert!(names.contains(&job), "{job} in {names:?}");
    }
    // To stdout too, the same jobs (the header's command line differs).
    let stdout = p.run(&["generate"]);
    assert_eq!(jobs(&stdout.stdout), names);
}

#[test]
fn plan_only_has_plan_stages_and_plans_wait_for_plans() {
    let out = project().run(&["generate", "--plan-only"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let jobs = jobs(&out.stdout);
    assert!(jobs.iter().all(|j| j.starts_with("plan-")), "{jobs:?}");
    assert_eq!(jobs.len(), 7);
    let app = format!("plan-{}", id(STAGE, "app"));
    let mut got = needs(&out.stdout, &app);
    got.sort();
    let want: Vec<String> = ["eks", "rds", "s3"]
        .iter()
        .map(|m| format!("plan-{}", id(STAGE, m)))
        .collect();
    assert_eq!(got, want);
}

#[test]
fn dry_run_reports_terracis_figures() {
    let p = project();
    let text = p.run(&["generate", "--dry-run", "--format", "text"]);
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert!(text.stdout.starts_with("modules: 7\n"), "{}", text.stdout);
    let json = p.run(&["generate", "--dry-run", "--format", "json"]);
    let doc: serde_json::Value = serde_json::from_str(&json.stdout).expect("JSON");
    assert_eq!(doc["TotalModules"], 7);
    assert_eq!(doc["AffectedModules"], 7);
    assert_eq!(doc["Jobs"], 14);
    assert_eq!(doc["Stages"], 6);
    assert_eq!(
        doc["ExecutionOrder"][2],
        serde_json::json!([format!("{STAGE}/app")])
    );
    assert_eq!(doc["JobGroups"].as_array().map(Vec::len), Some(6));
    // The report's keys, in order: the graph view's, the run's, then TerraCi's figures.
    let keys: Vec<&str> = doc
        .as_object()
        .expect("an object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "modules",
            "edges",
            "levels",
            "cycles",
            "diagnostics",
            "changed_files",
            "changed_modules",
            "affected",
            "jobs",
            "TotalModules",
            "AffectedModules",
            "Stages",
            "Jobs",
            "ExecutionOrder",
            "JobGroups"
        ]
    );
    assert_eq!(
        doc["jobs"][0]["needs"],
        serde_json::json!([]),
        "{}",
        json.stdout
    );
    assert!(
        json.stdout.ends_with("]\n}\n"),
        "pretty, one line break at the end"
    );
}

#[test]
fn every_apply_needs_its_own_plan_and_dependencies_come_first() {
    let out = project().run(&["generate"]);
    let text = &out.stdout;
    for m in ["vpc", "s3", "eks", "rds", "app"] {
        let apply = format!("apply-{}", id(STAGE, m));
        assert!(
            needs(text, &apply).contains(&format!("plan-{}", id(STAGE, m))),
            "{apply}"
        );
    }
    // Diamond: app reads eks and rds, which both read vpc.
    let app = format!("plan-{}", id(STAGE, "app"));
    for dep in ["eks", "rds", "s3"] {
        assert!(needs(text, &app).contains(&format!("apply-{}", id(STAGE, dep))));
    }
    let at = |m: &str| stage_index(text, &format!("apply-{}", id(STAGE, m)));
    assert!(at("vpc") < at("eks") && at("eks") < at("app"));
    assert_eq!(at("eks"), at("rds"), "eks and rds are one level");
    assert!(needs(text, &format!("plan-{}", id(STAGE, "vpc"))).is_empty());
}

// --- errors ------------------------------------------------------------------------

#[test]
fn bad_config_and_directory_arguments_fail() {
    let p = Project::empty();
    assert_ne!(p.run(&["generate", "-c", "nonexistent.yaml"]).code, 0);
    assert_ne!(
        p.run(&["generate", "-c", "/nonexistent/config.yaml"]).code,
        0
    );
    assert_ne!(
        p.run(&["generate", "-d", "/nonexistent/path/12345"]).code,
        0
    );
    p.write(".terraci.yaml", "{{invalid yaml");
    let out = p.run(&["generate"]);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains(".terraci.yaml"), "{}", out.stderr);
}

#[test]
fn two_configured_providers_need_a_choice() {
    let p = project();
    p.write(
        ".terraci.yaml",
        "extensions:\n  gitlab:\n    stages_prefix: deploy\n  github:\n    runs_on: ubuntu-latest\n",
    );
    let out = p.run(&["generate"]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("--provider"), "{}", out.stderr);
    assert_eq!(p.run(&["generate", "--provider", "github"]).code, 0);
    let ci = p.run_env(&["generate"], &[("GITLAB_CI", "true")]);
    assert_eq!(ci.code, 0, "{}", ci.stderr);
}

// --- filters -----------------------------------------------------------------------

#[test]
fn exclude_and_segment_filters_agree_across_commands() {
    let p = project();
    let generated = p.run(&["generate", "--exclude", "**/eks"]);
    assert_eq!(generated.code, 0, "{}", generated.stderr);
    let names = jobs(&generated.stdout);
    assert!(names.iter().all(|j| !j.contains("eks")), "{names:?}");
    assert!(names.iter().any(|j| j.contains("vpc")));
    let graph = p.run(&["graph", "--format", "levels", "--exclude", "**/eks"]);
    assert!(!graph.stdout.contains("eks") && graph.stdout.contains("vpc"));
    assert_eq!(p.run(&["validate", "--exclude", "**/eks"]).code, 0);

    let prod = p.run(&["generate", "--filter", "environment=prod"]);
    let names = jobs(&prod.stdout);
    assert!(names.iter().all(|j| j.contains("-prod-")), "{names:?}");
    let graph = p.run(&[
        "graph",
        "--format",
        "levels",
        "--filter",
        "environment=prod",
    ]);
    assert!(graph.stdout.contains("prod") && !graph.stdout.contains("platform/stage"));
    assert_eq!(p.run(&["validate", "--filter", "environment=prod"]).code, 0);

    let both = p.run(&[
        "generate",
        "--filter",
        "environment=prod",
        "--filter",
        "environment=stage",
    ]);
    assert_eq!(jobs(&both.stdout).len(), 14);
    let combined = p.run(&[
        "generate",
        "--exclude",
        "**/eks",
        "--filter",
        "environment=prod",
    ]);
    assert_eq!(
        jobs(&combined.stdout),
        [
            format!("plan-{}", id(PROD, "vpc")),
            format!("apply-{}", id(PROD, "vpc"))
        ]
    );
}

#[test]
fn filters_that_select_nothing_are_an_error() {
    let p = project();
    for cmd in ["generate", "validate", "graph"] {
        let out = p.run(&[cmd, "--include", "nothing/**"]);
        assert_eq!(out.code, 1, "{cmd}: {}", out.stderr);
        assert!(
            out.stderr.contains(
                "no module matches the filters (include `nothing/**`): none of the 7 modules"
            ),
            "{cmd}: {}",
            out.stderr
        );
    }
}

#[test]
fn changed_only_is_scoped_to_the_changed_modules_and_their_readers() {
    let p = project();
    commit_all(p.path());
    // eks and app change: vpc, s3 and rds get no jobs, and their edges are dropped.
    for m in ["eks", "app"] {
        let file = format!("{STAGE}/{m}/main.tf");
        let old = p.read(&file);
        p.write(&file, format!("{old}\n# changed\n"));
    }
    let out = p.run(&["generate", "--changed-only", "--base-ref", "main"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let mut names = jobs(&out.stdout);
    names.sort();
    assert_eq!(
        names,
        [
            format!("apply-{}", id(STAGE, "app")),
            format!("apply-{}", id(STAGE, "eks")),
            format!("plan-{}", id(STAGE, "app")),
            format!("plan-{}", id(STAGE, "eks")),
        ]
    );
    assert_eq!(
        needs(&out.stdout, &format!("plan-{}", id(STAGE, "app"))),
        [format!("apply-{}", id(STAGE, "eks"))]
    );
    assert!(needs(&out.stdout, &format!("plan-{}", id(STAGE, "eks"))).is_empty());
    // TerraCi's affected set adds what the changed modules read: the config key asks for it.
    let old = p.read(".terraci.yaml");
    p.write(
        ".terraci.yaml",
        format!("{old}changed_only:\n  include_dependencies: true\n"),
    );
    let out = p.run(&["generate", "--changed-only", "--base-ref", "main"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(jobs(&out.stdout).len(), 10, "{:?}", jobs(&out.stdout));
}

// --- version, help, completion, schema -------------------------------------------

#[test]
fn version_shows_the_commit_the_date_and_the_plugins() {
    let out = project().run(&["version"]);
    assert_eq!(out.code, 0);
    assert!(out.stdout.starts_with("terraci "), "{}", out.stdout);
    assert!(out.stdout.contains("\n  commit: "));
    assert!(out.stdout.contains("\n  built:  "));
    for plugin in [
        "cost", "git", "github", "gitlab", "policy", "summary", "tfupdate",
    ] {
        assert!(
            out.stdout.contains(&format!("    - {plugin}: ")),
            "{plugin}: {}",
            out.stdout
        );
    }
}

#[test]
fn help_lists_the_commands_and_the_flags_ci_scripts_use() {
    let p = project();
    let root = p.run(&["--help"]);
    for cmd in [
        "generate",
        "graph",
        "validate",
        "init",
        "version",
        "schema",
        "local-exec",
        "tfupdate",
    ] {
        assert!(root.stdout.contains(cmd), "{cmd}");
    }
    let generate = p.run(&["generate", "--help"]);
    for flag in [
        "--output",
        "--changed-only",
        "--base-ref",
        "--dry-run",
        "--plan-only",
        "--format",
    ] {
        assert!(generate.stdout.contains(flag), "{flag}");
    }
    // The command's own options first, the ten global ones under their own heading.
    let (own, global) = generate
        .stdout
        .split_once("Global options:")
        .expect("a Global options heading");
    assert!(
        own.contains("--changed-only") && !own.contains("--max-file-size"),
        "{own}"
    );
    assert!(global.contains("--max-file-size") && !global.contains("--changed-only"));
    let init = p.run(&["init", "--help"]);
    for flag in ["--ci", "--provider", "--binary", "--pattern", "--force"] {
        assert!(init.stdout.contains(flag), "{flag}");
    }
    assert!(!init.stdout.contains("--image"));
    assert_ne!(p.run(&["this-command-does-not-exist"]).code, 0);
}

#[test]
fn completion_scripts_for_each_shell() {
    let p = Project::empty();
    for (shell, needle) in [
        ("bash", "complete"),
        ("zsh", "compdef"),
        ("fish", "complete -c terraci"),
        ("powershell", "Register-ArgumentCompleter"),
    ] {
        let out = p.run(&["completion", shell]);
        assert_eq!(out.code, 0, "{shell}");
        assert!(out.stdout.contains(needle), "{shell}");
    }
    assert_ne!(p.run(&["completion"]).code, 0);
    assert_ne!(p.run(&["completion", "perl"]).code, 0);
}

#[test]
fn schema_is_json_with_structure_and_extensions() {
    let p = project();
    let out = p.run(&["schema", "-o", "schema.json"]);
    assert_eq!(out.code, 0);
    let doc: serde_json::Value = serde_json::from_str(&p.read("schema.json")).expect("JSON");
    assert!(doc["properties"]["extensions"].is_object());
    assert!(doc["properties"]["structure"].is_object());
    let stdout = p.run(&["schema"]);
    serde_json::from_str::<serde_json::Value>(&stdout.stdout).expect("JSON on stdout");
}

// --- init ----------------------------------------------------------------------------

#[test]
fn init_writes_the_provider_section_and_respects_force() {
    let p = Project::empty();
    let out = p.run(&["init", "--ci", "--provider", "gitlab"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let text = p.read(".terraci.yaml");
    assert!(text.contains("pattern:") && text.contains("gitlab:") && text.contains("binary:"));
    // An existing config is kept without --force, replaced with it.
    p.write(
        ".terraci.yaml",
        "structure:\n  pattern: \"{old}/{pattern}\"\n",
    );
    assert_ne!(p.run(&["init", "--ci", "--provider", "gitlab"]).code, 0);
    assert!(p.read(".terraci.yaml").contains("{old}"));
    assert_eq!(
        p.run(&["init", "--ci", "--provider", "github", "--force"])
            .code,
        0
    );
    let text = p.read(".terraci.yaml");
    assert!(
        !text.contains("{old}") && text.contains("github:"),
        "{text}"
    );
    let custom = Project::empty();
    let out = custom.run(&[
        "init",
        "--ci",
        "--provider",
        "gitlab",
        "--pattern",
        "{env}/{region}/{module}",
        "--binary",
        "tofu",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let text = custom.read(".terraci.yaml");
    assert!(
        text.contains("{env}/{region}/{module}") && text.contains("tofu"),
        "{text}"
    );
}

// --- service_dir ---------------------------------------------------------------------

#[test]
fn service_dir_must_stay_inside_the_project() {
    let p = project();
    for dir in ["/tmp/elsewhere", "../up", ""] {
        p.write(".terraci.yaml", format!("service_dir: \"{dir}\"\n"));
        let out = p.run(&["validate"]);
        assert_eq!(out.code, 1, "{dir}");
        assert!(out.stderr.contains("service_dir"), "{}", out.stderr);
    }
}

// --- configs TerraCi loads -------------------------------------------------------

/// The configs of TerraCi's test projects and examples, described in our own words: each
/// loads and generates, and what terraci does not do is a warning that says so.
#[test]
fn terracis_test_project_configs_load_and_generate() {
    let head =
        "structure:\n  pattern: \"{service}/{environment}/{region}/{module}\"\nextensions:\n";
    let cases: &[(&str, &str, &[&str])] = &[
        // Its basic, cyclic and single-module projects: the binary under the provider.
        (
            "gitlab binary",
            "  gitlab:\n    terraform_binary: tofu\n    image:\n      name: ghcr.io/opentofu/opentofu:1.9\n",
            &[],
        ),
        // github-basic: the same under github.
        (
            "github binary",
            "  github:\n    terraform_binary: terraform\n    runs_on: ubuntu-24.04\n",
            &[],
        ),
        // with-cost: every key takes effect (the cost job, a 12 h price cache).
        (
            "cost",
            "  gitlab:\n    image: hashicorp/terraform:1.11\n  cost:\n    providers:\n      aws:\n        enabled: true\n    cache_ttl: \"12h\"\n",
            &[],
        ),
        // with-reports: the summary section, empty.
        ("summary", "  gitlab:\n    image: hashicorp/terraform:1.11\n  summary: {}\n", &[]),
        // The github-actions example: a key of an older TerraCi.
        (
            "github auto_approve",
            "  github:\n    auto_approve: true\n    runs_on: ubuntu-latest\n",
            &["extensions.github.auto_approve is not a key terraci knows; it has no effect"],
        ),
        // Other plugins' sections.
        (
            "other plugins",
            "  gitlab: {}\n  diskblob:\n    path: /var/cache/terraci\n  inmemcache: {}\n  tfupdate:\n    policy: latest\n",
            &[
                "extensions.diskblob is not a section terraci knows",
                "extensions.inmemcache is not a section terraci knows",
            ],
        ),
    ];
    for (name, extensions, warnings) in cases {
        let p = project();
        p.write(".terraci.yaml", format!("{head}{extensions}"));
        let out = p.run(&["generate"]);
        assert_eq!(out.code, 0, "{name}: {}", out.stderr);
        for w in *warnings {
            assert!(out.stderr.contains(w), "{name}: {w} in\n{}", out.stderr);
        }
        if warnings.is_empty() {
            // Every warning but the summary job's image (TerraCi's configs name none).
            let other = out
                .stderr
                .lines()
                .any(|l| l.starts_with("warning[") && !l.contains("image-without-terraci"));
            assert!(!other, "{name}: {}", out.stderr);
        }
    }
    // The binary under the provider is the binary.
    let p = project();
    p.write(
        ".terraci.yaml",
        format!("{head}  gitlab:\n    terraform_binary: tofu\n"),
    );
    let out = p.run(&["generate"]);
    assert!(
        out.stdout.contains("TERRAFORM_BINARY: tofu"),
        "{}",
        out.stdout
    );
}
