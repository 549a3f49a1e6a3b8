//! Fixture sweep: every `fixtures/render/*.yaml` config rendered for both providers over a
//! small module set, snapshotted under `snapshots/render/`.
//!
//! A fixture may start with `# plan: empty|plan-only|parallel-plans` to change the job
//! plan; `extensions.<provider>.plan_only` in the config is honoured as the driver does.

use camino::{Utf8Path, Utf8PathBuf};
use indexmap::IndexMap;

use super::*;
use crate::PipelineText;
use terraci_db::config::{load_config, Config};
use terraci_db::system::{MemorySystem, OsSystem, System};
use terraci_engine::ir::{build_job_plan, JobPlan, PlanOptions, Target};

pub(crate) fn crate_dir() -> Utf8PathBuf {
    Utf8PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

pub(crate) fn header() -> Header {
    Header {
        version: "0.0.0-test".into(),
        command_line: "terraci generate".into(),
    }
}

/// One config fixture.
pub(crate) struct Case {
    pub(crate) name: String,
    pub config: Config,
    pub(crate) segments: Vec<String>,
    pub(crate) mode: String,
}

pub(crate) fn cases() -> Vec<Case> {
    let dir = crate_dir().join("fixtures/render");
    let mut entries = OsSystem.read_dir(&dir).expect("fixtures/render exists");
    entries.retain(|e| e.name.ends_with(".yaml"));
    entries
        .iter()
        .map(|entry| {
            let path = dir.join(&entry.name);
            let loaded = load_config(&OsSystem, Some(&path))
                .unwrap_or_else(|e| panic!("{}: {e}", entry.name));
            let text = String::from_utf8(OsSystem.read(&path).expect("readable")).expect("utf-8");
            let mode = text
                .lines()
                .next()
                .and_then(|l| l.strip_prefix("# plan: "))
                .unwrap_or("default")
                .trim()
                .to_owned();
            Case {
                name: entry.name.trim_end_matches(".yaml").to_owned(),
                segments: loaded.pattern.segments().to_vec(),
                config: loaded.config,
                mode,
            }
        })
        .collect()
}

/// The module set of every fixture: two environments, a chain vpc <- eks <- app, with ids
/// cut to the pattern's depth.
const MODULES: [(&str, &[&str]); 5] = [
    ("platform/prod/eu-central-1/vpc", &[]),
    ("platform/stage/eu-central-1/vpc", &[]),
    (
        "platform/stage/eu-central-1/eks",
        &["platform/stage/eu-central-1/vpc"],
    ),
    (
        "platform/stage/eu-central-1/app",
        &[
            "platform/stage/eu-central-1/eks",
            "platform/stage/eu-central-1/vpc",
        ],
    ),
    ("platform/stage/eu-central-1/app/worker", &[]),
];

fn cut(id: &str, depth: usize, submodule: bool) -> String {
    let parts: Vec<&str> = id.split('/').collect();
    let keep = if submodule { depth + 1 } else { depth };
    parts[parts.len().saturating_sub(keep)..].join("/")
}

pub(crate) fn targets(segments: &[String]) -> Vec<Target> {
    let depth = segments.len();
    MODULES
        .iter()
        .map(|(id, deps)| {
            let submodule = id.split('/').count() > 4;
            let short = cut(id, depth, submodule);
            let parts: Vec<&str> = short.split('/').collect();
            let mut components: IndexMap<String, String> = segments
                .iter()
                .zip(&parts)
                .map(|(s, p)| (s.clone(), (*p).to_owned()))
                .collect();
            if submodule {
                components.insert("submodule".into(), parts[depth..].join("/"));
            }
            Target {
                id: short,
                components,
                dependencies: deps.iter().map(|d| cut(d, depth, false)).collect(),
            }
        })
        .collect()
}

pub(crate) fn job_plan(case: &Case, provider: Provider) -> JobPlan {
    let mut options = PlanOptions {
        plan_only: provider.config_plan_only(&case.config),
        parallel_plans: false,
        ..PlanOptions::default()
    };
    let targets = match case.mode.as_str() {
        "empty" => Vec::new(),
        "plan-only" => {
            options.plan_only = true;
            targets(&case.segments)
        }
        "parallel-plans" => {
            options.plan_only = true;
            options.parallel_plans = true;
            targets(&case.segments)
        }
        _ => targets(&case.segments),
    };
    let plan = build_job_plan(
        &targets,
        options,
        case.config.execution.binary,
        case.config.execution.init_enabled,
        case.config.execution.env.clone(),
        case.segments.clone(),
    )
    .expect("fixture job names are distinct");
    // As the driver does: the jobs the config's extensions contribute for this provider.
    let runner = match provider {
        Provider::Gitlab => terraci_engine::ir::Runner::Gitlab,
        Provider::Github => terraci_engine::ir::Runner::Github,
    };
    let set =
        terraci_engine::contrib::contributions(&case.config, runner).expect("valid contributions");
    terraci_engine::ir::contribute(
        plan,
        &set,
        &terraci_engine::contrib::service_dir(&case.config),
    )
    .expect("valid contributions")
}

pub(crate) fn render(case: &Case, provider: Provider) -> Result<Rendered, RenderError> {
    let plan = job_plan(case, provider);
    match provider {
        Provider::Gitlab => render_gitlab(&plan, &case.config, &header()),
        Provider::Github => render_github(&plan, &case.config, &header(), false),
    }
}

/// Rendered text, then the warnings as comments, as one reviewable snapshot.
fn snapshot_text(rendered: &Result<Rendered, RenderError>) -> String {
    match rendered {
        Ok(r) => {
            let mut out = r.text.clone();
            for w in &r.warnings {
                out.push_str(&format!("# {}", w.render_human(None)));
            }
            out
        }
        Err(e) => format!("ERROR: {e}\n"),
    }
}

#[test]
fn fixtures_render_to_their_snapshots() {
    let cases = cases();
    assert!(cases.len() > 5, "fixtures/render holds the config fixtures");
    for case in &cases {
        for provider in Provider::ALL {
            let rendered = render(case, provider);
            let name = format!("{}.{}", case.name, provider.as_str());
            insta::with_settings!({
                snapshot_path => "../../../snapshots/render",
                prepend_module_to_snapshot => false,
                omit_expression => true,
                description => format!("fixtures/render/{}.yaml", case.name),
            }, {
                insta::assert_snapshot!(name, snapshot_text(&rendered));
            });
        }
    }
}

#[test]
fn kept_job_texts_give_the_same_bytes_as_a_fresh_render() {
    // One store across every fixture (settings change between them) and across edits of
    // one plan (a job's needs dropped, a job removed, `execution.env` and a job's
    // components reordered): each render must equal a fresh one.
    let texts = JobTexts::default();
    let strip = |r: Result<Rendered, RenderError>| r.map(|r| (r.text, r.warnings));
    for round in 0..2 {
        for case in cases() {
            let mut plan = job_plan(&case, Provider::Gitlab);
            for edit in 0..6 {
                match edit {
                    1 => {
                        if let Some(job) = std::sync::Arc::make_mut(&mut plan.jobs)
                            .iter_mut()
                            .find(|j| !j.needs.is_empty())
                        {
                            job.needs.clear();
                        }
                    }
                    2 => {
                        std::sync::Arc::make_mut(&mut plan.jobs).pop();
                    }
                    3 => {
                        plan.env.insert("A_FIRST".into(), "1".into());
                        plan.env.insert("B_SECOND".into(), "2".into());
                    }
                    // Same entries in another order: equal maps, different YAML.
                    4 => plan.env.reverse(),
                    5 => {
                        if let Some(job) = std::sync::Arc::make_mut(&mut plan.jobs).first_mut() {
                            std::sync::Arc::make_mut(&mut job.components).reverse();
                        }
                    }
                    _ => {}
                }
                let fresh = strip(render_gitlab(&plan, &case.config, &header()));
                let kept = strip(render_gitlab_with(
                    &plan,
                    &case.config,
                    &header(),
                    Some(&texts),
                ));
                assert_eq!(kept, fresh, "{} round {round} edit {edit}", case.name);
            }
        }
    }
}

#[test]
fn output_is_deterministic() {
    for case in cases() {
        for provider in Provider::ALL {
            let a = snapshot_text(&render(&case, provider));
            let b = snapshot_text(&render(&case, provider));
            assert_eq!(a, b, "{} {provider}", case.name);
        }
    }
}

fn config_error(text: &str) -> String {
    let system = MemorySystem::new();
    let path = Utf8Path::new("/p/.terraci.yaml");
    system.write_file(path, text);
    match load_config(&system, Some(path)) {
        Ok(_) => panic!("expected an error for:\n{text}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn config_mistakes_name_the_key_and_line() {
    let text = "extensions:\n  gitlab:\n    overwrites:\n      - type: plan\n        tags: [a]\n      - type: ''\n";
    insta::assert_snapshot!(config_error(text), @"extensions.gitlab.overwrites[1].type: expected plan, apply or the name of a contributed job, got an empty string (at .terraci.yaml:6:15)");
    let text = "extensions:\n  gitlab:\n    cache:\n      policy: pull-pull\n";
    insta::assert_snapshot!(config_error(text), @"extensions.gitlab.cache.policy: unknown variant `pull-pull`, expected one of `pull`, `push`, `pull-push` (at .terraci.yaml:4:15)");
    let text =
        "extensions:\n  gitlab:\n    overwrites:\n      - type: apply\n        when: later\n";
    insta::assert_snapshot!(config_error(text), @"extensions.gitlab.overwrites[0].when: unknown variant `later`, expected one of `on_success`, `on_failure`, `always`, `never`, `manual`, `delayed` (at .terraci.yaml:5:15)");
}

/// Under `extensions`, a key terraci does not know is a warning at any depth (TerraCi
/// ignores it), with the closest key; the rest of the section still applies.
#[test]
fn unknown_keys_under_extensions_warn_at_any_depth() {
    let system = MemorySystem::new();
    let path = Utf8Path::new("/p/.terraci.yaml");
    system.write_file(
        path,
        "extensions:\n  gitlab:\n    job_defaults:\n      tgas: [a]\n      tags: [b]\n    mr:\n      comment:\n        enabeld: false\n  github:\n    job_defaults:\n      steps_before:\n        - name: x\n          uses: a/b@v1\n          whith: {k: v}\n",
    );
    let loaded = load_config(&system, Some(path)).expect("loads");
    assert_eq!(
        loaded.warnings,
        [
            "extensions.gitlab.job_defaults.tgas is not a key terraci knows; it has no effect (did you mean `tags`?)",
            "extensions.gitlab.mr.comment.enabeld is not a key terraci knows; it has no effect (did you mean `enabled`?)",
            "extensions.github.job_defaults.steps_before[0].whith is not a key terraci knows; it has no effect (did you mean `with`?)",
        ]
    );
    let gitlab = loaded.config.extensions.gitlab.expect("gitlab");
    assert_eq!(
        gitlab.job_defaults.and_then(|d| d.tags),
        Some(vec!["b".to_owned()])
    );
}

#[test]
fn unknown_cache_placeholder_is_an_error_naming_the_key() {
    let system = MemorySystem::new();
    let path = Utf8Path::new("/p/.terraci.yaml");
    system.write_file(
        path,
        "extensions:\n  gitlab:\n    cache:\n      key: \"tf-{enviroment}\"\n",
    );
    let config = load_config(&system, Some(path)).unwrap();
    let case = Case {
        name: "x".into(),
        segments: config.pattern.segments().to_vec(),
        config: config.config,
        mode: "default".into(),
    };
    let err = render(&case, Provider::Gitlab).unwrap_err();
    insta::assert_snapshot!(err, @r#"extensions.gitlab.cache.key: unknown placeholder {enviroment} in "tf-{enviroment}"; valid placeholders: {module_path}, {service}, {environment}, {region}, {module}"#);
}

#[test]
fn github_workflow_over_the_size_limit_needs_force() {
    let segments: Vec<String> = ["service", "environment", "region", "module"]
        .map(String::from)
        .to_vec();
    let targets: Vec<Target> = (0..1500)
        .map(|i| Target {
            id: format!("svc/env/region/module-{i:04}"),
            components: IndexMap::new(),
            dependencies: Vec::new(),
        })
        .collect();
    let plan = build_job_plan(
        &targets,
        PlanOptions::default(),
        terraci_db::config::Binary::Terraform,
        true,
        IndexMap::new(),
        segments,
    )
    .unwrap();
    let config = Config::default();
    let err = render_github(&plan, &config, &header(), false).unwrap_err();
    assert!(matches!(err, RenderError::TooLarge { .. }), "{err}");
    let forced = render_github(&plan, &config, &header(), true).unwrap();
    assert!(forced.text.len() > GITHUB_MAX_BYTES);
    assert_eq!(forced.warnings.len(), 1, "{:?}", forced.warnings);
}

#[test]
fn provider_names() {
    assert_eq!("gitlab".parse::<Provider>(), Ok(Provider::Gitlab));
    assert_eq!("GitHub".parse::<Provider>(), Ok(Provider::Github));
    insta::assert_snapshot!("jenkins".parse::<Provider>().unwrap_err(), @"unknown provider `jenkins`; valid providers: gitlab, github");
    for p in Provider::ALL {
        assert_eq!(p.as_str().parse::<Provider>(), Ok(p));
    }
}

#[test]
fn pipeline_text_pieces_compare_as_their_bytes() {
    let piece = |s: &str| crate::JobPiece::Shared(s.into());
    let a = PipelineText {
        head: "h\n".into(),
        jobs: vec![piece("\na: 1\n"), piece("\nb: 2\n")],
    };
    assert_eq!(a.len(), 2 + 6 + 6);
    assert_eq!(a.clone().into_string(), "h\n\na: 1\n\nb: 2\n");
    assert!(a.same_text(&a.clone()));
    let joined = PipelineText::from(a.clone().into_string());
    assert!(a.same_text(&joined) && joined.same_text(&a));
    let other = PipelineText {
        head: "h\n".into(),
        jobs: vec![piece("\na: 1\n"), piece("\nb: 3\n")],
    };
    assert!(!a.same_text(&other));
}
