//! `cost`: the monthly AWS cost of each module's plan (the pricing is `terraci_cost`).
//!
//! Input: the command line, the project (config, modules, `<module>/plan.json`), the
//! price lists (`--pricing-dir`, the per-user cache, or AWS over HTTP; the base URL is
//! `TERRACI_PRICING_URL` when set, for a mirror). Output: stdout (text or JSON), stderr
//! (coded diagnostics), `<service_dir>/cost-report.json` (the summary's cost section) and
//! `cost-results.json` (the JSON output), the exit code (0 estimated, 2 cannot run).

use std::collections::BTreeSet;

use super::policy::{
    failure, load_plain, modules_with_plans, pipeline_commit, write_service_file, EXIT_ERROR,
};
use super::Io;
use crate::cli::{CostArgs, GlobalArgs, PolicyFormat};
use terraci_cost::estimate::{estimate, ModulePlan};
use terraci_cost::source::{self, Origin, Prices};
use terraci_db::diagnostic::{Code, Diagnostic};
use terraci_db::exit;

fn print(io: &mut Io<'_>, d: &Diagnostic) -> std::io::Result<()> {
    write!(io.stderr, "{}", d.render_human(None))
}

pub(super) fn cost(global: &GlobalArgs, args: &CostArgs, io: &mut Io<'_>) -> anyhow::Result<u8> {
    let ws = load_plain(global, io, EXIT_ERROR)?;
    let config = &ws.config.config;
    let root = ws.root.clone();
    let section = config
        .extensions
        .cost
        .as_ref()
        .filter(|c| c.is_enabled())
        .ok_or_else(|| {
            failure("cost estimation is not enabled (set extensions.cost.providers.aws.enabled: true in .terraci.yaml)")
        })?;
    let namespace = camino::Utf8Path::new(section.namespace());
    if namespace.is_absolute()
        || namespace
            .components()
            .any(|c| !matches!(c, camino::Utf8Component::Normal(_)))
    {
        return Err(failure(format!(
            "invalid cost configuration: extensions.cost.blob_cache.namespace `{}` must be a relative path without `..` (a directory of the cache home)",
            terraci_db::escape::printable(namespace.as_str())
        )));
    }
    let ttl = match section.ttl() {
        None => source::DEFAULT_TTL,
        Some(text) => terraci_db::config::parse_go_duration(text).ok_or_else(|| {
            failure(format!(
                "invalid cost configuration: extensions.cost cache TTL `{}` is not a duration (24h, 90m, 1h30m)",
                terraci_db::escape::printable(text)
            ))
        })?,
    };

    let plan_of = |m: &str| root.join(m).join("plan.json");
    let modules = modules_with_plans(io, &ws, &root, args.module.as_deref())?;
    if modules.is_empty() {
        return Err(failure(
            "no plan.json files found in the modules: run the plans first (terraform show -json plan.tfplan > plan.json)",
        ));
    }

    // A plan.json is the checkout's: read confined to the project, bounded.
    let confined = terraci_db::system::ReadPolicy::new(io.system, &root, global.max_plan_size);
    let mut plans = Vec::new();
    for m in &modules {
        let plan = io
            .system
            .read_confined(&plan_of(m), &confined, false)
            .map_err(|e| e.to_string())
            .and_then(|(bytes, _)| terraci_cost::plan::parse_plan(&bytes));
        let plan = plan.map_err(|e| format!("cannot read {m}/plan.json: {e}"));
        if let Err(e) = &plan {
            print(io, &Diagnostic::warning(Code::CostPlan, e.clone()))?;
        }
        plans.push(ModulePlan {
            module: m.clone(),
            plan,
        });
    }

    let origin = match &args.pricing_dir {
        Some(dir) => Origin::Dir(
            io.system
                .absolute(dir)
                .map_err(|e| failure(format!("--pricing-dir {dir}: {e}")))?,
        ),
        None => {
            let cache = match terraci_db::system::cache_home(io.system, &root) {
                Ok(home) => Some(home.join(namespace)),
                Err(e) => {
                    print(
                        io,
                        &Diagnostic::warning(
                            Code::CostPrices,
                            format!("prices are not cached: {e}"),
                        ),
                    )?;
                    None
                }
            };
            Origin::Http {
                base_url: io
                    .system
                    .env_var("TERRACI_PRICING_URL")
                    .filter(|u| !u.is_empty())
                    .unwrap_or_else(|| source::DEFAULT_BASE_URL.to_owned()),
                cache,
                ttl,
            }
        }
    };
    let mut prices = Prices::new(io.system, origin);
    let result = estimate(plans, &mut prices);

    // A price list that could not be read: once, not once per resource.
    let failed: BTreeSet<String> = result
        .modules
        .iter()
        .flat_map(|m| m.unpriced.iter())
        .filter(|u| u.reason.starts_with("no ") && u.reason.contains(" prices for "))
        .map(|u| u.reason.clone())
        .collect();
    for reason in failed {
        print(io, &Diagnostic::warning(Code::CostPrices, reason))?;
    }

    // `-v`: where each price list came from (TerraCi's verbose output shows its cache).
    if global.verbose > 0 {
        for ((service, region), from) in &prices.provenance {
            writeln!(
                io.stderr,
                "prices: {service} {region}: {}",
                terraci_db::escape::printable(from)
            )?;
        }
    }
    let json = terraci_cost::output::json(&result);
    let report = terraci_cost::output::report(&result, &pipeline_commit(io.system));
    write_service_file(io, &root, config, "cost-report.json", &report)?;
    write_service_file(io, &root, config, "cost-results.json", &json)?;
    match args.format {
        PolicyFormat::Text => write!(io.stdout, "{}", terraci_cost::output::text(&result))?,
        PolicyFormat::Json => write!(io.stdout, "{json}")?,
    }
    Ok(exit::OK)
}
