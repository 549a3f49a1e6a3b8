//! `policy pull` and `policy check` (the engine, sources and report are in `src/policy/`).
//!
//! Input: the command line, the project (config, modules, `<module>/plan.json`), the
//! policy sources. Output: stdout (results in text or JSON), stderr (coded diagnostics),
//! `<service_dir>/policy-report.json` (and `policy-results.json`, the JSON output), the exit code (0 pass, 1 a module fails by the
//! decisions, 2 the policies or the section cannot be used).

use std::time::Duration;

use camino::Utf8Path;

use super::Io;
use crate::cli::{EvalArgs, GlobalArgs, PolicyCheckArgs, PolicyCommand, PolicyFormat};
use terraci_db::config::{Config, Policy};
use terraci_db::diagnostic::{Code, Diagnostic};
use terraci_db::exit::{self, Failure};
use terraci_ext::policy::check::{self, Input, Status};
use terraci_ext::policy::engine::Policies;
use terraci_ext::policy::{self as policy_mod, sources};

/// Exit code of `policy check` when a module fails.
pub(super) const EXIT_FAILED: u8 = 1;
/// Exit code of `policy` when the section, a source or a policy cannot be used.
pub(super) const EXIT_ERROR: u8 = 2;

pub(super) fn failure(message: impl Into<String>) -> anyhow::Error {
    Failure {
        code: EXIT_ERROR,
        message: message.into(),
    }
    .into()
}

pub(super) fn run(global: &GlobalArgs, cmd: &PolicyCommand, io: &mut Io<'_>) -> anyhow::Result<u8> {
    match cmd {
        PolicyCommand::Pull => pull(global, io),
        PolicyCommand::Check(args) => check_cmd(global, args, io),
    }
}

/// The section, validated.
fn section(config: &Config) -> anyhow::Result<&Policy> {
    let policy = config
        .extensions
        .policy
        .as_ref()
        .ok_or_else(|| exit::coded(policy_mod::SectionError::NotConfigured))?;
    policy_mod::validate(policy).map_err(exit::coded)?;
    Ok(policy)
}

fn print(io: &mut Io<'_>, d: &Diagnostic) -> std::io::Result<()> {
    write!(io.stderr, "{}", d.render_human(None))
}

fn diagnostic(e: &terraci_ext::policy::engine::PolicyError) -> Diagnostic {
    let mut d = Diagnostic::error(e.code, e.message.clone());
    d.file = e.file.clone();
    d.line = e.line;
    d
}

fn pull(global: &GlobalArgs, io: &mut Io<'_>) -> anyhow::Result<u8> {
    let root = crate::workspace::project_dir(io.system, global)?;
    let config_path =
        terraci_db::config::find_config_file(io.system, &root, global.config.as_deref());
    let loaded = terraci_db::config::load_config(io.system, config_path.as_deref())
        .map_err(|e| failure(e.to_string()))?;
    if !global.quiet {
        for d in crate::workspace::config_diagnostics(&loaded) {
            print(io, &d)?;
        }
    }
    let policy = section(&loaded.config)?;
    let home = match terraci_db::system::cache_home(io.system, &root) {
        Ok(home) => home,
        Err(e) => {
            print(io, &Diagnostic::error(Code::PolicySource, e.to_string()))?;
            return Ok(EXIT_ERROR);
        }
    };
    let service_dir = policy_mod::service_dir(&loaded.config);
    match sources::pull(io.system, &root, &home, service_dir, &policy.sources) {
        Ok(lock) => {
            if !global.quiet {
                for s in &lock.sources {
                    let pinned = s
                        .commit
                        .as_deref()
                        .or(s.digest.as_deref())
                        .map(|p| format!(" at {p}"))
                        .unwrap_or_default();
                    writeln!(
                        io.stdout,
                        "pulled {}:{}{pinned} -> {} ({} policy files)",
                        s.kind,
                        terraci_db::escape::printable(&terraci_ext::http::redact_url(&s.source)),
                        terraci_db::escape::printable(&s.dir),
                        s.files
                    )?;
                }
                writeln!(
                    io.stdout,
                    "wrote {} (a copy: {})",
                    terraci_db::escape::printable(
                        sources::lock_path(io.system, &root, &home).as_str()
                    ),
                    terraci_db::escape::printable(&sources::artifact_lock(service_dir))
                )?;
            }
            Ok(exit::OK)
        }
        Err(e) => {
            print(io, &Diagnostic::error(Code::PolicySource, e.to_string()))?;
            Ok(EXIT_ERROR)
        }
    }
}

fn check_cmd(global: &GlobalArgs, args: &PolicyCheckArgs, io: &mut Io<'_>) -> anyhow::Result<u8> {
    if !(args.timeout.is_finite() && args.timeout > 0.0 && args.timeout <= 3600.0) {
        return Err(failure(
            "--timeout must be a number of seconds in (0, 3600]",
        ));
    }
    let ws = load_plain(global, io, EXIT_ERROR)?;
    let config = &ws.config.config;
    let policy = section(config)?;
    let root = ws.root.clone();
    let result = check_loaded(global, args, io, &ws, policy, &root);
    // A check that could not run still leaves its report, saying so: the summary
    // comment must not show a `policy-report.json` committed in the checkout (or left
    // by an earlier run) as this run's.
    if !matches!(result, Ok(code) if code != EXIT_ERROR) {
        let mut report = serde_json::json!({
            "producer": "policy",
            "title": "Policy checks",
            "status": "fail",
            "summary": "the policy check could not run: see the policy job's log",
            "modules": [],
        });
        let commit = pipeline_commit(io.system);
        if !commit.is_empty() {
            report["commit"] = serde_json::Value::String(commit);
        }
        let text = format!(
            "{}\n",
            serde_json::to_string_pretty(&report).unwrap_or_default()
        );
        // Best effort: the error that stopped the check is the one to report.
        let _ = write_service_file(io, &root, config, "policy-report.json", &text);
    }
    result
}

/// The project, for a command that reads no variables (`policy check`, `cost`, `tfupdate`), with
/// the config's warnings printed; a project that cannot be loaded fails with `code`.
pub(super) fn load_plain(
    global: &GlobalArgs,
    io: &mut Io<'_>,
    code: u8,
) -> anyhow::Result<crate::workspace::Workspace> {
    let eval = EvalArgs {
        var_file: Vec::new(),
        var: Vec::new(),
        workspace: "default".into(),
    };
    let ws = crate::workspace::load_workspace(io.system, global, &eval).map_err(|e| {
        anyhow::Error::from(Failure {
            code,
            message: format!("{e:#}"),
        })
    })?;
    if !global.quiet {
        for d in crate::workspace::config_diagnostics(&ws.config) {
            print(io, &d)?;
        }
    }
    Ok(ws)
}

/// The modules whose `plan.json` a command reads: `module` (which must be a module of
/// the project with a plan), or every module with a plan.
pub(super) fn modules_with_plans(
    io: &Io<'_>,
    ws: &crate::workspace::Workspace,
    root: &Utf8Path,
    module: Option<&str>,
) -> anyhow::Result<Vec<String>> {
    let plan_of = |m: &str| root.join(m).join("plan.json");
    Ok(match module {
        Some(m) => {
            let m = m.trim_end_matches('/').to_owned();
            if !ws.modules.contains_key(&m) {
                return Err(failure(format!("`{m}` is not a module of the project")));
            }
            if !io.system.is_file(&plan_of(&m)) {
                return Err(failure(format!(
                    "{m}/plan.json does not exist: run the module's plan first (terraform show -json plan.tfplan > plan.json)"
                )));
            }
            vec![m]
        }
        None => ws
            .modules
            .keys()
            .filter(|m| io.system.is_file(&plan_of(m)))
            .cloned()
            .collect(),
    })
}

/// Writes `name` under the project's service dir, following no symlink below the project
/// (a committed `.terraci` link is an error, a linked report file is replaced).
pub(super) fn write_service_file(
    io: &Io<'_>,
    root: &Utf8Path,
    config: &Config,
    name: &str,
    text: &str,
) -> anyhow::Result<()> {
    let service = Utf8Path::new(policy_mod::service_dir(config));
    io.system
        .write_beneath(
            &terraci_db::system::write_root(root, service),
            &root.join(service.join(name)),
            &[text.as_bytes()],
        )
        .map_err(|e| failure(format!("cannot write {}: {e}", service.join(name))))?;
    Ok(())
}

/// [`check_cmd`] once the workspace and the policy section are loaded.
fn check_loaded(
    global: &GlobalArgs,
    args: &PolicyCheckArgs,
    io: &mut Io<'_>,
    ws: &crate::workspace::Workspace,
    policy: &Policy,
    root: &Utf8Path,
) -> anyhow::Result<u8> {
    let config = &ws.config.config;

    let plan_of = |m: &str| root.join(m).join("plan.json");
    let modules = modules_with_plans(io, ws, root, args.module.as_deref())?;

    // Only pulled (git, OCI) sources need the cache home.
    let pulled = policy
        .sources
        .iter()
        .any(|s| !matches!(s, terraci_db::config::PolicySource::Path { .. }));
    let home = match pulled.then(|| terraci_db::system::cache_home(io.system, root)) {
        Some(Err(e)) => {
            print(io, &Diagnostic::error(Code::PolicySource, e.to_string()))?;
            return Ok(EXIT_ERROR);
        }
        Some(Ok(home)) => Some(home),
        None => None,
    };
    let loaded = match sources::policy_files(io.system, root, home.as_deref(), &policy.sources) {
        Ok(loaded) => loaded,
        Err(e) => {
            print(io, &Diagnostic::error(Code::PolicySource, e.to_string()))?;
            return Ok(EXIT_ERROR);
        }
    };
    // A source without policies passes every plan (a merge request can delete a path
    // source's files): with a blocking decision that fails closed, otherwise it warns.
    let blocking = policy.blocks_anywhere();
    if !loaded.empty.is_empty() {
        let all = loaded.files.is_empty();
        let message = if all {
            "the policy sources hold no .rego files".to_owned()
        } else {
            format!(
                "policy source {} holds no .rego files",
                loaded
                    .empty
                    .iter()
                    .map(|s| terraci_db::escape::printable(s).into_owned())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        if blocking {
            print(
                io,
                &Diagnostic::error(
                    Code::PolicySource,
                    format!("{message}; with a blocking decision terraci fails closed"),
                ),
            )?;
            return Ok(EXIT_ERROR);
        }
        let passes = if all {
            "every module passes"
        } else {
            "its rules are missing"
        };
        print(
            io,
            &Diagnostic::warning(Code::PolicySource, format!("{message}: {passes}")),
        )?;
    }
    let files = loaded.files;
    let policies = match Policies::load(&files, Duration::from_secs_f64(args.timeout)) {
        Ok(p) => p,
        Err(e) => {
            print(io, &diagnostic(&e))?;
            return Ok(EXIT_ERROR);
        }
    };
    let mut wanted: Vec<&str> = policy
        .namespaces
        .iter()
        .chain(policy.overrides.iter().flat_map(|o| o.namespaces.iter()))
        .map(String::as_str)
        .collect();
    if policy.namespaces.is_empty() {
        wanted.push(policy_mod::DEFAULT_NAMESPACE);
    }
    wanted.sort_unstable();
    wanted.dedup();
    // A namespace without rules fails each module to check that a decision blocks (its
    // result says so); for the others it is a warning.
    let fails_closed = |ns: &str| {
        modules.iter().any(|m| {
            let e = policy_mod::effective(policy, m);
            e.is_enabled() && e.can_block() && e.wants(ns)
        })
    };
    for ns in wanted {
        if !files.is_empty() && !policies.has_rules(ns) && !fails_closed(ns) {
            print(
                io,
                &Diagnostic::warning(
                    Code::PolicyNamespace,
                    format!(
                        "namespace `{ns}` has no rules (no policy file declares `package {ns}` with a deny, violation or warn rule)"
                    ),
                ),
            )?;
        }
    }

    // A plan.json is the checkout's too: read confined to the project (a regular file
    // whose real path lies inside it, bounded), so a link to a file elsewhere is refused.
    let confined = terraci_db::system::ReadPolicy::new(io.system, root, global.max_plan_size);
    let mut plans = Vec::new();
    for m in &modules {
        let text = match io.system.read_confined(&plan_of(m), &confined, false) {
            Ok((bytes, _)) => String::from_utf8(bytes).unwrap_or_default(),
            Err(terraci_db::system::ReadError::TooLarge { limit }) => {
                return Err(failure(format!(
                    "cannot read {m}/plan.json: it is larger than the {limit} bytes of --max-plan-size (TERRACI_MAX_PLAN_SIZE)"
                )));
            }
            Err(e) => {
                return Err(failure(format!("cannot read {m}/plan.json: {e}")));
            }
        };
        // The module's pattern segments, for the envelope's `input.terraci.module`.
        let components: Vec<(String, String)> = ws.modules[m]
            .info(&ws.db)
            .components
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        plans.push((
            m.clone(),
            components,
            policy_mod::effective(policy, m),
            text,
        ));
    }
    let inputs: Vec<Input<'_>> = plans
        .iter()
        .map(|(m, components, settings, plan)| Input {
            module: m,
            components,
            settings: settings.clone(),
            plan,
            input: policy.input,
        })
        .collect();
    let summary = check::run(&policies, &inputs);

    for r in &summary.results {
        if let Some(e) = &r.error_detail {
            let mut d = diagnostic(e);
            d.module = Some(r.module.clone());
            print(io, &d)?;
        }
    }
    match args.format {
        PolicyFormat::Text => {
            if modules.is_empty() && !global.quiet {
                writeln!(
                    io.stderr,
                    "note: no module has a plan.json; nothing to check"
                )?;
            }
            write!(io.stdout, "{}", summary.text())?
        }
        PolicyFormat::Json => write!(io.stdout, "{}", summary.json())?,
    }
    // The summary comment's report, and the full results under TerraCi's file name.
    for (name, text) in [
        (
            "policy-report.json",
            summary.report(&pipeline_commit(io.system)),
        ),
        ("policy-results.json", summary.json()),
    ] {
        write_service_file(io, root, config, name, &text)?;
    }
    Ok(if summary.status == Status::Fail {
        EXIT_FAILED
    } else {
        exit::OK
    })
}

/// The commit this pipeline runs for (`CI_COMMIT_SHA`, else `GITHUB_SHA`; hex digits
/// only), which the report names so that the summary shows it as this run's; empty
/// outside CI.
pub(super) fn pipeline_commit(system: &dyn terraci_db::system::System) -> String {
    ["CI_COMMIT_SHA", "GITHUB_SHA"]
        .into_iter()
        .filter_map(|name| system.env_var(name))
        .map(|v| {
            v.chars()
                .filter(char::is_ascii_hexdigit)
                .collect::<String>()
        })
        .find(|v| !v.is_empty())
        .unwrap_or_default()
}
