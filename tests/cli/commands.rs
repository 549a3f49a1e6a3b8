//! `schema`, `init`, `completion`, and the docs' CI recipes.

use crate::snap;
use crate::support::{actionlint, gitlab_ci_local_list, Project};

#[test]
fn schema_prints_the_config_schema() {
    let p = Project::empty();
    let out = p.run(&["schema"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let schema: serde_json::Value = serde_json::from_str(&out.stdout).expect("JSON");
    assert_eq!(
        schema["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    snap!("schema", out.snapshot());

    let to_file = p.run(&["schema", "-o", "terraci.schema.json"]);
    assert_eq!(to_file.code, 0, "{}", to_file.stderr);
    assert_eq!(to_file.stdout, "");
    assert_eq!(p.read("terraci.schema.json"), out.stdout);
}

/// A tiny unconfigured monorepo in the default layout: what a user has before `init`.
fn unconfigured_repo() -> Project {
    let p = Project::empty();
    for module in ["vpc", "eks"] {
        p.write(
            &format!("platform/prod/eu-west-1/{module}/main.tf"),
            format!(
                "terraform {{\n  backend \"s3\" {{\n    key = \"{module}.tfstate\"\n  }}\n}}\n\nresource \"null_resource\" \"this\" {{}}\n"
            ),
        );
    }
    p
}

#[test]
#[cfg_attr(
    not(feature = "clients"),
    ignore = "runs a CI client or terraform: the clients tier (bash .ci/test)"
)]
fn init_writes_a_gitlab_config_that_generates_without_edits() {
    for binary in ["terraform", "tofu"] {
        let p = unconfigured_repo();
        let out = p.run(&["init", "--ci", "--binary", binary]);
        assert_eq!(out.code, 0, "{}", out.stderr);
        let config = p.read(".terraci.yaml");
        assert!(config.contains(&format!("binary: {binary}")), "{config}");
        if binary == "terraform" {
            snap!(
                "init_gitlab",
                format!("{}--- .terraci.yaml\n{config}", out.snapshot())
            );
        }

        let generated = p.run(&["generate"]);
        assert_eq!(generated.code, 0, "{}", generated.stderr);
        // The one warning: the summary job's image, which init cannot know (the config
        // says how to set it).
        assert!(
            generated
                .stderr
                .starts_with("warning[image-without-terraci]: the `terraci-summary` job")
                && generated.stderr.lines().count() == 1,
            "{}",
            generated.stderr
        );
        assert!(
            generated.stdout.contains(&format!("{binary} apply")),
            "{}",
            generated.stdout
        );
        let jobs = gitlab_ci_local_list(&generated.stdout)
            .expect("gitlab-ci-local accepts the generated pipeline");
        assert!(jobs.contains("apply-platform-prod-eu-west-1-vpc"), "{jobs}");
    }
}

#[test]
#[cfg_attr(
    not(feature = "clients"),
    ignore = "runs a CI client or terraform: the clients tier (bash .ci/test)"
)]
fn init_writes_a_github_config_that_generates_without_edits() {
    for binary in ["terraform", "tofu"] {
        let p = unconfigured_repo();
        let out = p.run(&["init", "--provider", "github", "--binary", binary]);
        assert_eq!(out.code, 0, "{}", out.stderr);
        let config = p.read(".terraci.yaml");
        if binary == "tofu" {
            snap!(
                "init_github_tofu",
                format!("{}--- .terraci.yaml\n{config}", out.snapshot())
            );
        }

        // No --provider: the config's only provider section picks GitHub.
        let generated = p.run(&["generate"]);
        assert_eq!(generated.code, 0, "{}", generated.stderr);
        assert_eq!(generated.stderr, "", "the written config draws no warning");
        assert!(generated.stdout.contains("jobs:"), "{}", generated.stdout);
        assert_eq!(actionlint(&generated.stdout), "");
    }
}

#[test]
fn init_with_a_pattern_and_a_project_dir() {
    let p = Project::empty();
    p.write("live/net/prod/vpc/main.tf", "");
    let out = p.run(&["-d", "live", "init", "--pattern", "{team}/{env}/{module}"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(p
        .read("live/.terraci.yaml")
        .contains("pattern: \"{team}/{env}/{module}\""));
    let listed = p.run(&["-d", "live", "graph", "--format", "levels"]);
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    assert_eq!(listed.stdout, "Level 0 (1 module):\n  net/prod/vpc\n\n");
}

#[test]
fn init_refuses_to_overwrite_without_force() {
    let p = Project::empty();
    p.write(".terraci.yaml", "exclude: [\"*\"]\n");
    let out = p.run(&["init", "--ci"]);
    assert_eq!(out.code, 1);
    assert_eq!(
        out.stderr,
        "error: config file already exists: .terraci.yaml (use --force to overwrite)\n"
    );
    assert_eq!(p.read(".terraci.yaml"), "exclude: [\"*\"]\n");

    let forced = p.run(&["init", "--ci", "--force"]);
    assert_eq!(forced.code, 0, "{}", forced.stderr);
    assert!(p.read(".terraci.yaml").contains("structure:"));
}

/// A configured project in a repository, with a module below the root.
fn configured_repo_in_git() -> Project {
    let p = Project::empty();
    std::fs::create_dir(p.path().join(".git")).expect("mkdir .git");
    p.write(
        ".terraci.yaml",
        "structure:\n  pattern: \"{team}/{module}\"\n",
    );
    p.write(
        "net/vpc/main.tf",
        "resource \"null_resource\" \"this\" {}\n",
    );
    p
}

#[test]
fn commands_in_a_subdirectory_use_the_config_above() {
    let p = configured_repo_in_git();
    for sub in ["net", "net/vpc"] {
        let graph = p.run_in(sub, &["graph", "--format", "levels"]);
        assert_eq!(graph.code, 0, "{}", graph.stderr);
        assert_eq!(
            graph.stdout, "Level 0 (1 module):\n  net/vpc\n\n",
            "in {sub}"
        );
        let validate = p.run_in(sub, &["validate"]);
        assert_eq!(validate.code, 0, "{}", validate.stderr);
    }
    // `-d DIR` names the project root itself: no search above it.
    let explicit = p.run_in("net", &["-d", ".", "graph", "--format", "levels"]);
    assert_eq!(explicit.code, 1, "{}", explicit.stderr);
    assert!(
        explicit.stderr.contains("no modules found"),
        "{}",
        explicit.stderr
    );
}

#[test]
fn the_config_search_stops_at_the_repository_top() {
    let p = Project::empty();
    p.write(".terraci.yaml", "exclude: [\"*\"]\n");
    std::fs::create_dir_all(p.path().join("repo/.git")).expect("mkdir .git");
    p.write(
        "repo/net/vpc/main.tf",
        "resource \"null_resource\" \"this\" {}\n",
    );
    let out = p.run_in("repo/net", &["init", "--ci", "-q"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(p.read("repo/net/.terraci.yaml").contains("structure:"));
}

#[test]
fn init_in_a_subdirectory_refuses_naming_the_config_above() {
    let p = configured_repo_in_git();
    let before = p.read(".terraci.yaml");
    let out = p.run_in("net/vpc", &["init", "--ci"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert_eq!(
        out.stderr,
        "error: config file already exists above the current directory: [PROJECT]/.terraci.yaml \
         (use --force to overwrite it, or -d . to start a separate project here)\n"
    );
    assert!(!p.path().join("net/vpc/.terraci.yaml").exists());
    assert_eq!(p.read(".terraci.yaml"), before);

    let separate = p.run_in("net/vpc", &["-d", ".", "init", "--ci", "-q"]);
    assert_eq!(separate.code, 0, "{}", separate.stderr);
    assert!(p.read("net/vpc/.terraci.yaml").contains("structure:"));
    assert_eq!(p.read(".terraci.yaml"), before);
}

#[test]
fn init_dry_run_prints_the_config_and_writes_nothing() {
    let p = Project::empty();
    p.write("live/net/prod/vpc/main.tf", "");
    let out = p.run(&[
        "init",
        "--ci",
        "--dry-run",
        "--pattern",
        "{team}/{env}/{module}",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("structure:"), "{}", out.stdout);
    assert!(
        out.stdout.contains("pattern: \"{team}/{env}/{module}\""),
        "{}",
        out.stdout
    );
    assert!(!out.stderr.contains("wrote"), "{}", out.stderr);
    assert!(!p.path().join(".terraci.yaml").exists());

    // It is what `init` writes.
    assert_eq!(
        p.run(&["init", "--ci", "-q", "--pattern", "{team}/{env}/{module}"])
            .code,
        0
    );
    assert_eq!(p.read(".terraci.yaml"), out.stdout);
}

#[test]
fn init_refuses_to_shadow_another_config_name() {
    // Writing .terraci.yaml next to terraci.yml would silently replace it for every
    // other command, so the existing file is the one that is (not) overwritten.
    let p = Project::empty();
    p.write("terraci.yml", "exclude: []\n");
    let out = p.run(&["init", "--ci"]);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("terraci.yml"), "{}", out.stderr);
    assert!(!p.path().join(".terraci.yaml").exists());
    assert_eq!(p.run(&["init", "--ci", "-f", "-q"]).code, 0);
    assert!(p.read("terraci.yml").contains("structure:"));
}

#[test]
fn init_rejects_bad_choices_as_usage_errors() {
    let p = Project::empty();
    let bad_pattern = p.run(&["init", "--pattern", "{a}/{a}"]);
    assert_eq!(bad_pattern.code, 2, "{}", bad_pattern.stderr);
    assert!(bad_pattern
        .stderr
        .starts_with("error: --pattern `{a}/{a}` is invalid"));
    let bad_provider = p.run(&["init", "--provider", "jenkins"]);
    assert_eq!(bad_provider.code, 2);
    assert!(
        bad_provider
            .stderr
            .contains("[possible values: gitlab, github]"),
        "{}",
        bad_provider.stderr
    );
    assert!(!p.path().join(".terraci.yaml").exists());
}

#[test]
fn init_defaults_to_github_in_a_repo_with_only_github_workflows() {
    let p = Project::empty();
    p.write(".github/workflows/ci.yml", "on: push\n");
    let out = p.run(&["init"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let config = p.read(".terraci.yaml");
    assert!(config.contains("  github:") && !config.contains("gitlab:"));
}

#[test]
fn completion_scripts() {
    let p = Project::empty();
    let bash = p.run(&["completion", "bash"]);
    assert_eq!(bash.code, 0, "{}", bash.stderr);
    assert!(bash.stdout.contains("generate"));
    assert!(bash.stdout.contains("--changed-only"));
    for shell in ["zsh", "fish", "powershell", "elvish"] {
        let out = p.run(&["completion", shell]);
        assert_eq!(out.code, 0, "{shell}: {}", out.stderr);
        assert!(out.stdout.contains("generate"), "{shell}");
    }
    assert_eq!(p.run(&["completion", "tcsh"]).code, 2);
}

/// The YAML block after `<!-- recipe: NAME -->` in docs/recipes.md: the test checks the
/// text users copy, so the two cannot drift.
fn recipe(name: &str) -> String {
    let doc = std::fs::read_to_string(
        std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join("docs/recipes.md"),
    )
    .expect("docs/recipes.md");
    let marker = format!("<!-- recipe: {name} -->\n```yaml\n");
    let start = doc.find(&marker).expect("recipe marker") + marker.len();
    let len = doc[start..].find("```").expect("end of the YAML block");
    doc[start..start + len].to_owned()
}

#[test]
#[cfg_attr(
    not(feature = "clients"),
    ignore = "runs a CI client or terraform: the clients tier (bash .ci/test)"
)]
fn gitlab_parent_pipeline_recipe_is_valid() {
    let recipe = recipe("gitlab-parent");
    let jobs = gitlab_ci_local_list(&recipe).expect("gitlab-ci-local accepts the recipe");
    assert!(jobs.contains("generate-pipeline"), "{jobs}");
    assert!(jobs.contains("run-pipeline"), "{jobs}");
    // The trigger must wait for the child and take the generated file as its pipeline.
    let doc: serde_yaml::Value = serde_yaml::from_str(&recipe).expect("YAML");
    let trigger = &doc["run-pipeline"]["trigger"];
    assert_eq!(trigger["strategy"], "depend");
    assert_eq!(trigger["include"][0]["job"], "generate-pipeline");
    let artifact = trigger["include"][0]["artifact"]
        .as_str()
        .expect("artifact");
    let paths = doc["generate-pipeline"]["artifacts"]["paths"]
        .as_sequence()
        .expect("paths");
    assert!(
        paths.iter().any(|p| p == artifact),
        "the generate job keeps {artifact}"
    );
    let script = doc["generate-pipeline"]["script"][1]
        .as_str()
        .expect("script");
    assert!(script.ends_with(&format!("-o {artifact}")), "{script}");
    // A pipeline over GitLab's limits is written as a parent and its children in
    // `<stem>.d/`: the generate job keeps them, and the trigger passes its pipeline's id,
    // from which the generated parent takes them.
    let stem = artifact.strip_suffix(".yml").expect("a .yml file");
    assert!(
        paths.iter().any(|p| *p == format!("{stem}.d/")),
        "the generate job keeps {stem}.d/"
    );
    assert_eq!(
        doc["run-pipeline"]["variables"]["PARENT_PIPELINE_ID"],
        "$CI_PIPELINE_ID"
    );
    // The job a split parent takes its children from by default.
    assert!(doc.get("generate-pipeline").is_some());
}

#[test]
#[cfg_attr(
    not(feature = "clients"),
    ignore = "runs a CI client or terraform: the clients tier (bash .ci/test)"
)]
fn github_check_recipe_is_valid() {
    assert_eq!(actionlint(&recipe("github-check")), "");
}

/// `generate --provider <provider>` of a one-module project, with `terraci_cache` on or
/// off for both providers, as YAML.
fn generated(provider: &str, terraci_cache: bool) -> serde_yaml::Value {
    let p = Project::empty();
    p.write(
        ".terraci.yaml",
        format!(
            "structure:\n  pattern: \"{{environment}}/{{module}}\"\nextensions:\n  gitlab:\n    \
             terraci_cache: {terraci_cache}\n  github:\n    terraci_cache: {terraci_cache}\n"
        ),
    );
    p.write("prod/vpc/main.tf", "locals {}\n");
    let out = p.run(&["generate", "--provider", provider]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    serde_yaml::from_str(&out.stdout).expect("YAML")
}

/// The steps of a GitHub job that use `action`.
fn steps_using<'a>(job: &'a serde_yaml::Value, action: &str) -> Vec<&'a serde_yaml::Value> {
    job["steps"]
        .as_sequence()
        .expect("steps")
        .iter()
        .filter(|s| s["uses"] == action)
        .collect()
}

#[test]
fn cache_recipes_use_the_cache_generate_adds() {
    // GitLab: the recipe's generate job writes the cache the generated jobs read.
    let recipe_job = serde_yaml::from_str::<serde_yaml::Value>(&recipe("gitlab-cache"))
        .expect("YAML")["generate-pipeline"]
        .clone();
    let gitlab = generated("gitlab", true);
    let read = &gitlab["terraci-summary"]["cache"];
    assert_eq!(recipe_job["cache"]["key"], read["key"]);
    assert_eq!(recipe_job["cache"]["paths"], read["paths"]);
    assert_eq!(read["paths"][0], ".terraci/cache/");
    assert_eq!(read["policy"], "pull");
    assert_eq!(recipe_job["cache"]["policy"], "$TERRACI_CACHE_POLICY");
    let policies: Vec<(&str, &str)> = recipe_job["rules"]
        .as_sequence()
        .expect("rules")
        .iter()
        .map(|r| {
            (
                r["if"].as_str().expect("if"),
                r["variables"]["TERRACI_CACHE_POLICY"]
                    .as_str()
                    .expect("policy"),
            )
        })
        .collect();
    assert_eq!(
        policies,
        [
            ("$CI_COMMIT_BRANCH == $CI_DEFAULT_BRANCH", "pull-push"),
            ("$CI_PIPELINE_SOURCE == \"merge_request_event\"", "pull"),
        ]
    );
    // Otherwise it is the generate job of the parent-pipeline recipe.
    let parent = serde_yaml::from_str::<serde_yaml::Value>(&recipe("gitlab-parent")).expect("YAML")
        ["generate-pipeline"]
        .clone();
    let mut rest = recipe_job.as_mapping().expect("a job").clone();
    rest.remove("cache");
    rest.remove("rules");
    assert_eq!(serde_yaml::Value::Mapping(rest), parent);

    // GitHub: the recipe's steps are the generated ones, restore before terraci runs and
    // save (on a push to the default branch only) after.
    let recipe_doc: serde_yaml::Value =
        serde_yaml::from_str(&recipe("github-cache")).expect("YAML");
    let recipe_job = &recipe_doc["jobs"]["affected-modules"];
    let github = generated("github", true);
    let affected = &github["jobs"]["terraci-affected"];
    for action in ["actions/cache/restore@v4", "actions/cache/save@v4"] {
        let (mine, theirs) = (
            steps_using(recipe_job, action),
            steps_using(affected, action),
        );
        assert_eq!(mine.len(), 1, "{action}");
        assert_eq!(theirs.len(), 1, "{action}");
        assert_eq!(mine[0]["with"], theirs[0]["with"], "{action}");
        assert_eq!(mine[0]["if"], theirs[0]["if"], "{action}");
    }
    let save = steps_using(affected, "actions/cache/save@v4")[0];
    assert_eq!(
        save["if"],
        "github.event_name == 'push' && github.ref_name == github.event.repository.default_branch"
    );
    let names: Vec<&str> = affected["steps"]
        .as_sequence()
        .expect("steps")
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert_eq!(
        names,
        [
            "Checkout",
            "Restore the terraci cache",
            "Affected modules",
            "Save the terraci cache"
        ]
    );
    // The summary job reads it and never saves it; plans and applies get none.
    let summary = &github["jobs"]["terraci-summary"];
    assert_eq!(steps_using(summary, "actions/cache/restore@v4").len(), 1);
    assert!(steps_using(summary, "actions/cache/save@v4").is_empty());
    for job in ["plan-prod-vpc", "apply-prod-vpc"] {
        assert!(github["jobs"][job].is_mapping(), "{job}");
        let text = serde_yaml::to_string(&github["jobs"][job]).expect("YAML");
        assert!(!text.contains("cache"), "{job}: {text}");
    }

    // Off (the default): no job of either provider names terraci's cache.
    for provider in ["gitlab", "github"] {
        let text = serde_yaml::to_string(&generated(provider, false)).expect("YAML");
        assert!(!text.contains(".terraci/cache"), "{provider}: {text}");
    }
}

#[test]
#[cfg_attr(
    not(feature = "clients"),
    ignore = "runs a CI client or terraform: the clients tier (bash .ci/test)"
)]
fn cache_recipes_are_valid() {
    assert_eq!(actionlint(&recipe("github-cache")), "");
    // The GitLab recipe's job in place of the parent-pipeline recipe's generate job.
    let mut parent: serde_yaml::Value =
        serde_yaml::from_str(&recipe("gitlab-parent")).expect("YAML");
    let cached: serde_yaml::Value = serde_yaml::from_str(&recipe("gitlab-cache")).expect("YAML");
    parent["generate-pipeline"] = cached["generate-pipeline"].clone();
    let pipeline = serde_yaml::to_string(&parent).expect("YAML");
    let jobs = gitlab_ci_local_list(&pipeline).expect("gitlab-ci-local accepts the recipe");
    assert!(jobs.contains("generate-pipeline"), "{jobs}");
}

#[test]
fn pre_commit_hooks_run_terraci() {
    let text = std::fs::read_to_string(
        std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
            .join(".pre-commit-hooks.yaml"),
    )
    .expect(".pre-commit-hooks.yaml");
    let hooks: Vec<serde_yaml::Value> = serde_yaml::from_str(&text).expect("a list of hooks");
    let ids: Vec<&str> = hooks.iter().filter_map(|h| h["id"].as_str()).collect();
    assert_eq!(ids, ["terraci-validate", "terraci-generate"]);
    for hook in &hooks {
        assert_eq!(hook["pass_filenames"], false);
        let entry = hook["entry"].as_str().expect("entry");
        let args: Vec<&str> = entry.split_whitespace().skip(1).collect();
        // The entry's arguments parse: `--help` after them is answered, not refused.
        let p = Project::empty();
        let mut with_help = args.clone();
        with_help.push("--help");
        assert_eq!(p.run(&with_help).code, 0, "{entry}");
    }
}

#[test]
fn init_proposes_the_pattern_that_fits_the_tree() {
    let p = Project::empty();
    for dir in [
        "terraform/projects/infra-vpc",
        "terraform/projects/app",
        "terraform/modules/network",
    ] {
        p.write(&format!("{dir}/main.tf"), "locals {}\n");
    }
    let out = p.run(&["init", "--ci"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.stderr,
        "pattern {environment}/{region}/{module}: the root modules here are 3 levels deep (e.g. `terraform/projects/app`)\ngraph: 3 modules, 0 edges, 0 cycles, 0 references without an edge\nwrote .terraci.yaml\nadded 7 entries to .gitignore (what terraform and terraci runs leave behind)\nnext: `terraci validate`, then `terraci generate -o .gitlab-ci.yml`\n"
    );
    assert!(p
        .read(".terraci.yaml")
        .contains("pattern: \"{environment}/{region}/{module}\""));
    let listed = p.run(&["graph", "--format", "levels"]);
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    assert_eq!(
        listed.stdout,
        "Level 0 (3 modules):\n  terraform/modules/network\n  terraform/projects/app\n  \
         terraform/projects/infra-vpc\n\n"
    );
}

/// The edges of `graph --format json`, as `from -> to`.
fn json_edges(p: &Project) -> Vec<String> {
    let out = p.run(&["graph", "--format", "json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).expect("JSON");
    let mut edges: Vec<String> = v["edges"]
        .as_array()
        .expect("edges")
        .iter()
        .map(|e| {
            format!(
                "{} -> {}",
                e["from"].as_str().unwrap(),
                e["to"].as_str().unwrap()
            )
        })
        .collect();
    edges.sort();
    edges
}

#[test]
fn init_finds_roots_at_every_depth_and_local_call_targets_as_libraries() {
    // `core` is 1 level deep, the other roots 4; `apps/modules/svc` has a backend block
    // but `apps/prod/eu/web` calls it with a local source.
    let p = Project::fixture("init/mixed-depth");
    let out = p.run(&["init", "--ci"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let config = p.read(".terraci.yaml");
    assert!(config.contains("  discovery: roots\n"), "{config}");
    assert!(
        config.contains("    - \"apps/modules/svc\"  # called by apps/prod/eu/web\n"),
        "{config}"
    );
    assert!(!config.contains("pattern:"), "{config}");
    assert_eq!(
        json_edges(&p),
        [
            // Through the library's remote_state block, read for its caller.
            "apps/prod/eu/web -> core",
            "apps/prod/eu/web -> net/hub/eu/vpc",
            "net/hub/eu/vpc -> core",
        ]
    );
    let levels = p.run(&["graph", "--format", "levels"]);
    assert_eq!(
        levels.stdout,
        "Level 0 (1 module):\n  core\n\nLevel 1 (1 module):\n  net/hub/eu/vpc  (← core)\n\n\
         Level 2 (1 module):\n  apps/prod/eu/web  (← core, vpc)\n\n"
    );
    // The selection flags: `--filter module=` names the directory.
    let filtered = p.run(&["graph", "--format", "list", "--filter", "module=vpc"]);
    assert_eq!(filtered.code, 0, "{}", filtered.stderr);
    assert_eq!(filtered.stdout, "[net/hub]\n  eu/vpc\n");
}

#[test]
fn init_reads_backend_settings_and_variables_from_the_repository() {
    let p = Project::fixture("init/ci-sources");
    let out = p.run(&["validate"]);
    assert!(
        out.stderr.contains("(`terraci init` writes it)"),
        "{}",
        out.stderr
    );
    // Every stack has an empty `backend "s3" {}`: nothing in the code says the keys
    // (`app` finds `web` by the known end of `${var.stack}/web.tfstate` alone).
    p.write(
        ".terraci.yaml",
        "structure:\n  pattern: \"{environment}/{module}\"\n",
    );
    assert_eq!(json_edges(&p), ["stacks/app -> stacks/web"]);
    p.remove(".terraci.yaml");
    let out = p.run(&["init", "--ci"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("4 backend_config and 2 variables entries written, 2 noted but not written"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("graph: 5 modules, 4 edges, 0 cycles, 0 references without an edge"),
        "{}",
        out.stderr
    );
    let config = p.read(".terraci.yaml");
    let start = config.find("# Variables the").expect("a variables section");
    let end = config
        .find("# dependencies:")
        .expect("the dependencies example");
    // Each entry names where it came from; a README's command is for the directory it
    // `cd`s to; per-environment backend files and a key built from a shell variable are
    // noted, never written.
    crate::snap!("init_ci_sources", &config[start..end]);
    assert_eq!(
        json_edges(&p),
        [
            "stacks/app -> stacks/db",
            "stacks/app -> stacks/web",
            "stacks/db -> stacks/net",
            "stacks/web -> stacks/net",
        ]
    );
}

#[test]
fn init_keeps_run_outputs_out_of_git() {
    let p = Project::fixture("init/mixed-depth");
    p.write(".gitignore", "node_modules\n*.tfplan");
    let out = p.run(&["init", "--ci"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("added 6 entries to .gitignore"),
        "{}",
        out.stderr
    );
    let ignore = p.read(".gitignore");
    assert!(
        ignore.starts_with("node_modules\n*.tfplan\n\n# What terraform"),
        "{ignore}"
    );
    for entry in [
        ".terraform/",
        "plan.json",
        "plan.result.json",
        ".terraci/logs/",
    ] {
        assert!(ignore.lines().any(|l| l == entry), "{entry}: {ignore}");
    }
    // Once is enough.
    let out = p.run(&["init", "--ci", "--force"]);
    assert!(!out.stderr.contains(".gitignore"), "{}", out.stderr);
    assert_eq!(p.read(".gitignore"), ignore);
}

#[test]
fn a_pattern_that_misses_roots_says_so() {
    let p = Project::fixture("init/mixed-depth");
    // Four levels, as most roots here are: `core` is above it, and would be lost.
    p.write(
        ".terraci.yaml",
        "structure:\n  pattern: \"{a}/{b}/{c}/{module}\"\nlibrary_modules:\n  paths: [apps/modules]\n",
    );
    let out = p.run(&["validate"]);
    assert!(
        out.stdout.contains("undiscovered-root") || out.stderr.contains("undiscovered-root"),
        "{}{}",
        out.stdout,
        out.stderr
    );
    assert!(
        (out.stdout.clone() + &out.stderr).contains("`core` has a `backend \"s3\"` block"),
        "{}{}",
        out.stdout,
        out.stderr
    );
    // Two levels: the 4-deep roots have no module at depth 2 above them.
    p.write(
        ".terraci.yaml",
        "structure:\n  pattern: \"{a}/{module}\"\nlibrary_modules:\n  paths: [apps/modules]\n",
    );
    let out = p.run(&["validate"]);
    let all = out.stdout.clone() + &out.stderr;
    assert!(all.contains("pattern-depth"), "{all}");
    assert!(
        all.contains("`{a}/{level2}/{level3}/{module}` fits them"),
        "{all}"
    );
}

#[test]
fn a_missing_terraform_is_named_as_not_on_path() {
    let p = Project::fixture("example");
    let empty = tempfile::tempdir().expect("tempdir");
    let path = empty.path().to_str().expect("utf-8").to_owned();
    let out = p.run_env(
        &["local-exec", "plan", "-f", "environment=stage"],
        &[("PATH", &path)],
    );
    assert_ne!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let all = out.stdout + &out.stderr;
    assert!(
        all.contains(
            "`terraform init` could not start: `terraform` is not on PATH (install it, or name the binary in `execution.binary`"
        ),
        "{all}"
    );
}

#[test]
fn init_proposes_the_ignores_that_break_a_cycle_commented_out() {
    let p = Project::fixture("cycle");
    let _ = std::fs::remove_file(p.path().join(".terraci.yaml"));
    let out = p.run(&["init", "--ci"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("1 cycle: the config proposes 1 dependencies.ignore entries that break them, commented out"),
        "{}",
        out.stderr
    );
    let config = p.read(".terraci.yaml");
    assert!(
        config.contains("# dependencies:\n#   ignore:\n#     - {from: "),
        "{config}"
    );
    // As written, the cycle stays: generate refuses it.
    assert_ne!(p.run(&["generate"]).code, 0);
    // Uncommented, the proposal breaks it.
    let mut inside = false;
    let uncommented: String = config
        .lines()
        .map(|l| {
            inside = l == "# dependencies:" || (inside && l.starts_with("#   "));
            match inside {
                true => l.trim_start_matches("# ").to_owned() + "\n",
                false => l.to_owned() + "\n",
            }
        })
        .collect();
    p.write(".terraci.yaml", uncommented);
    let out = p.run(&["generate"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
}

#[test]
fn local_exec_keeps_terraform_warnings_out_of_plan_json() {
    let p = Project::fixture("example");
    // A terraform that warns on stderr (as an unset CLI config file makes it do).
    p.write(
        "bin/terraform",
        "#!/bin/sh\necho 'Warning: no CLI configuration file' >&2\ncase \"$1\" in\n  plan) echo plan > plan.tfplan; exit 2 ;;\n  show) echo '{\"format_version\":\"1.2\",\"resource_changes\":[]}' ;;\nesac\nexit 0\n",
    );
    std::fs::set_permissions(
        p.path().join("bin/terraform"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod");
    let path = format!(
        "{}:{}",
        p.path().join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = p.run_env(
        &[
            "local-exec",
            "plan",
            "-m",
            "platform/stage/eu-central-1/vpc",
        ],
        &[("PATH", &path)],
    );
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let json = p.read("platform/stage/eu-central-1/vpc/plan.json");
    assert_eq!(
        json,
        "{\"format_version\":\"1.2\",\"resource_changes\":[]}\n"
    );
    // The warning is in the job's log instead.
    let log = p.read(".terraci/logs/plan-platform-stage-eu-central-1-vpc.log");
    assert!(log.contains("Warning: no CLI configuration file"), "{log}");
}
