//! `tfupdate`: provider and module version updates (the work is in `terraci_tfupdate`).
//!
//! Input: the command line, the project (config, modules, their `.tf` and lock files),
//! the registries. Output: stdout (the result as text or JSON), the `.tf` and lock files
//! with `--write`, `<service_dir>/tfupdate-results.json` (the JSON) and
//! `tfupdate-report.json` (the summary's section), the exit code (0 when the run
//! completes, updates or not; 1 on a parse, registry or write error).

use std::time::Duration;

use super::Io;
use crate::cli::{GlobalArgs, PolicyFormat, TfupdateArgs};
use terraci_db::diagnostic::{Code, Diagnostic};
use terraci_db::exit::{self, Failure};
use terraci_tfupdate::plan::{self, Bump, Settings, Status, Target};
use terraci_tfupdate::registry::{Hosts, HttpRegistry};
use terraci_tfupdate::{report, scan, write};

fn failure(message: impl Into<String>) -> anyhow::Error {
    Failure {
        code: exit::ERROR,
        message: message.into(),
    }
    .into()
}

pub(super) fn tfupdate(
    global: &GlobalArgs,
    args: &TfupdateArgs,
    io: &mut Io<'_>,
) -> anyhow::Result<u8> {
    let ws = super::policy::load_plain(global, io, exit::ERROR)?;
    let config = &ws.config.config;
    let section = config
        .extensions
        .tfupdate
        .as_ref()
        .map(|s| s.settings())
        .transpose()
        .map_err(failure)?
        .unwrap_or_default();
    if !section.enabled {
        return Err(failure(
            "tfupdate is not enabled (set extensions.tfupdate.enabled: true)",
        ));
    }
    let target_text = args
        .target
        .clone()
        .or(section.target.clone())
        .unwrap_or_else(|| "all".to_owned());
    let target = Target::parse(&target_text).ok_or_else(|| {
        failure(format!(
            "invalid target {target_text:?}: expected modules, providers or all"
        ))
    })?;
    let bump_text = args.bump.clone().or(section.policy.bump.clone()).ok_or_else(|| {
        failure("a bump level is needed: set extensions.tfupdate.policy.bump or pass --bump (patch, minor, major)")
    })?;
    let bump = Bump::parse(&bump_text).ok_or_else(|| {
        failure(format!(
            "invalid bump {bump_text:?}: expected patch, minor or major"
        ))
    })?;
    let timeout_text = args.timeout.clone().or(section.timeout.clone());
    let timeout = match &timeout_text {
        Some(t) => terraci_db::config::parse_go_duration(t).ok_or_else(|| {
            failure(format!(
                "invalid timeout {t:?}: expected a duration like 90s, 15m or 1h"
            ))
        })?,
        None if args.write => Duration::from_secs(20 * 60),
        None => Duration::from_secs(5 * 60),
    };
    let settings = Settings {
        target,
        bump,
        pin: args.pin || section.policy.pin,
        ignore: section.ignore.clone(),
    };
    let platforms = if args.lock_platforms.is_empty() {
        section.lock.platforms.clone()
    } else {
        args.lock_platforms.clone()
    };
    let ids: Vec<String> = match &args.module {
        Some(m) => {
            let m = m.trim_end_matches('/').to_owned();
            if !ws.modules.contains_key(&m) {
                return Err(failure(format!("`{m}` is not a module of the project")));
            }
            vec![m]
        }
        // Libraries are reached through the modules that call them; their constraints
        // bound those modules' versions and are never rewritten.
        None => ws
            .modules
            .iter()
            .filter(|(_, m)| m.info(&ws.db).is_root())
            .map(|(id, _)| id.clone())
            .collect(),
    };
    let root = ws.root.clone();
    // Packages are kept in the per-user cache; without one they are downloaded each run.
    let cache = terraci_db::system::cache_home(io.system, &root).ok();
    let hosts = Hosts {
        default: section.registries.default.clone(),
        providers: section.registries.providers.clone(),
    };
    let registry =
        HttpRegistry::new(io.system, hosts, cache).with_deadline(io.system.now() + timeout);
    let scans = scan::scan_modules(io.system, &ws.policy, &ids);
    let mut result = plan::plan(&scans, &registry, &settings);
    if args.write {
        write::apply(
            io.system,
            &ws.policy,
            &scans,
            &mut result,
            &registry,
            &settings,
            &platforms,
        );
    }
    let json = report::render_json(&result);
    match args.output {
        PolicyFormat::Json => io.stdout.write_all(json.as_bytes())?,
        PolicyFormat::Text => io
            .stdout
            .write_all(report::render_text(&result).as_bytes())?,
    }
    super::policy::write_service_file(io, &root, config, "tfupdate-results.json", &json)?;
    // What went wrong, once more as coded diagnostics on stderr.
    let rows = result
        .providers
        .iter()
        .map(|r| {
            (
                &r.dependency.module_path,
                &r.dependency.provider_source,
                &r.outcome,
            )
        })
        .chain(
            result
                .modules
                .iter()
                .map(|m| (&m.dependency.module_path, &m.dependency.source, &m.outcome)),
        );
    let diagnostics = result
        .problems
        .iter()
        .map(|p| Diagnostic::error(Code::TfupdateRead, p.clone()))
        .chain(
            rows.filter(|(_, _, o)| o.status == Status::Error)
                .map(|(m, what, o)| {
                    Diagnostic::error(Code::TfupdateUpdate, format!("{m}: {what}: {}", o.issue))
                }),
        );
    for d in diagnostics {
        write!(io.stderr, "{}", d.render_human(None))?;
    }
    let commit = super::policy::pipeline_commit(io.system);
    super::policy::write_service_file(
        io,
        &root,
        config,
        "tfupdate-report.json",
        &report::summary_report(&result, &commit),
    )?;
    Ok(if result.summary.errors > 0 {
        exit::ERROR
    } else {
        exit::OK
    })
}
