//! The estimate: each module's plan priced before and after.
//!
//! Input: the modules (id and parsed plan), and the [`Prices`]. Output: an [`Estimate`]:
//! per module the monthly cost before and after the plan, per resource the lines that
//! make it up (unit price x usage), the resources not priced and why, and the totals.

use serde::Serialize;
use serde_json::Value;

use crate::offer::Match;
use crate::plan::{looks_like_region, region_in_path, CostPlan};
use crate::resources::{pricing, Component};
use crate::source::Prices;

/// Which side of the plan a line prices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    Before,
    After,
}

/// One component of a resource on one side: `price x quantity = monthly`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Line {
    pub side: Side,
    pub component: String,
    /// USD per unit, as the price file writes it.
    pub unit_price: String,
    pub unit: String,
    pub quantity: f64,
    /// How the quantity came about.
    pub usage: String,
    /// The quantity is an assumption about use.
    pub assumed: bool,
    pub monthly: f64,
    pub sku: String,
}

/// How far a resource's figure can be trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Every line is a price times what the plan says.
    Exact,
    /// Some line assumes usage (documented in `resources::assumed`).
    UsageEstimated,
    /// Charged only by use; no figure.
    UsageBased,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResourceCost {
    pub address: String,
    #[serde(rename = "type")]
    pub resource_type: String,
    pub action: &'static str,
    pub before: f64,
    pub after: f64,
    pub diff: f64,
    pub status: Status,
    pub lines: Vec<Line>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// A resource left out of the figures, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unpriced {
    pub address: String,
    #[serde(rename = "type")]
    pub resource_type: String,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModuleCost {
    pub module: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    pub before: f64,
    pub after: f64,
    pub diff: f64,
    pub resources: Vec<ResourceCost>,
    pub unpriced: Vec<Unpriced>,
    /// Why the module could not be estimated (its plan unreadable, no region).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Estimate {
    pub modules: Vec<ModuleCost>,
    pub total_before: f64,
    pub total_after: f64,
    pub total_diff: f64,
    pub currency: &'static str,
}

/// A module to estimate: its id and its plan, or why the plan cannot be read.
pub struct ModulePlan {
    pub module: String,
    pub plan: Result<CostPlan, String>,
}

/// Rounds to a hundredth of a cent, so sums and their rendering do not depend on the
/// order of float additions.
fn round(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

/// Prices every module (sorted by id).
pub fn estimate(mut plans: Vec<ModulePlan>, prices: &mut Prices<'_>) -> Estimate {
    plans.sort_by(|a, b| a.module.cmp(&b.module));
    let modules: Vec<ModuleCost> = plans
        .into_iter()
        .map(|m| estimate_module(m, prices))
        .collect();
    let total_before = round(modules.iter().map(|m| m.before).sum());
    let total_after = round(modules.iter().map(|m| m.after).sum());
    Estimate {
        total_diff: round(total_after - total_before),
        total_before,
        total_after,
        modules,
        currency: "USD",
    }
}

fn estimate_module(m: ModulePlan, prices: &mut Prices<'_>) -> ModuleCost {
    let mut out = ModuleCost {
        module: m.module.clone(),
        region: None,
        before: 0.0,
        after: 0.0,
        diff: 0.0,
        resources: Vec::new(),
        unpriced: Vec::new(),
        error: None,
    };
    let plan = match m.plan {
        Ok(plan) => plan,
        Err(e) => {
            out.error = Some(e);
            return out;
        }
    };
    // The plan's region is the checkout's text: it names a price file and the per-user
    // cache file it is kept in, so anything but a region name is refused here.
    if let Some(region) = plan.region.as_deref().filter(|r| !looks_like_region(r)) {
        out.error = Some(format!(
            "the plan's aws provider region \"{}\" is not an AWS region name (like eu-central-1)",
            region.escape_debug()
        ));
        return out;
    }
    out.region = plan.region.clone().or_else(|| region_in_path(&m.module));
    for change in &plan.changes {
        if matches!(change.action(), "read" | "forget") {
            continue;
        }
        let Some(region) = out.region.clone() else {
            if change.resource_type.starts_with("aws_") {
                out.unpriced.push(Unpriced {
                    address: change.address.clone(),
                    resource_type: change.resource_type.clone(),
                    reason: "the region is unknown: the plan's aws provider names none, nor does the module path".into(),
                });
            }
            continue;
        };
        let mut resource = ResourceCost {
            address: change.address.clone(),
            resource_type: change.resource_type.clone(),
            action: change.action(),
            before: 0.0,
            after: 0.0,
            diff: 0.0,
            status: Status::Exact,
            lines: Vec::new(),
            notes: Vec::new(),
        };
        let mut failure = None;
        let mut priced = false;
        for (side, values) in [(Side::Before, &change.before), (Side::After, &change.after)] {
            let Some(values) = values else { continue };
            match price_side(&change.resource_type, values, side, &region, prices) {
                None => {}
                Some(Err(e)) => failure = failure.or(Some(e)),
                Some(Ok((lines, notes))) => {
                    priced = true;
                    let sum = round(lines.iter().map(|l| l.monthly).sum());
                    match side {
                        Side::Before => resource.before = sum,
                        Side::After => resource.after = sum,
                    }
                    resource.lines.extend(lines);
                    for n in notes {
                        if !resource.notes.iter().any(|x| x == n) {
                            resource.notes.push(n.to_owned());
                        }
                    }
                }
            }
        }
        if let Some(reason) = failure {
            out.unpriced.push(Unpriced {
                address: change.address.clone(),
                resource_type: change.resource_type.clone(),
                reason,
            });
            continue;
        }
        if !priced {
            out.unpriced.push(Unpriced {
                address: change.address.clone(),
                resource_type: change.resource_type.clone(),
                reason: "not a resource type terraci prices".into(),
            });
            continue;
        }
        resource.status = if resource.lines.is_empty() {
            Status::UsageBased
        } else if resource.lines.iter().any(|l| l.assumed) {
            Status::UsageEstimated
        } else {
            Status::Exact
        };
        resource.diff = round(resource.after - resource.before);
        out.before += resource.before;
        out.after += resource.after;
        out.resources.push(resource);
    }
    out.before = round(out.before);
    out.after = round(out.after);
    out.diff = round(out.after - out.before);
    out
}

type Priced = (Vec<Line>, Vec<&'static str>);

/// The lines of one side of a resource; `None` when its type is not priced.
fn price_side(
    resource_type: &str,
    values: &Value,
    side: Side,
    region: &str,
    prices: &mut Prices<'_>,
) -> Option<Result<Priced, String>> {
    let pricing = match pricing(resource_type, values)? {
        Ok(p) => p,
        Err(e) => return Some(Err(e)),
    };
    let mut lines = Vec::new();
    for c in &pricing.components {
        match line(c, side, region, prices) {
            Ok(l) => lines.push(l),
            Err(e) => return Some(Err(e)),
        }
    }
    Some(Ok((lines, pricing.notes)))
}

fn line(c: &Component, side: Side, region: &str, prices: &mut Prices<'_>) -> Result<Line, String> {
    // Hostile or odd values (a negative size) price nothing rather than a negative sum.
    if !(c.quantity.is_finite() && c.quantity >= 0.0) {
        return Err(format!(
            "{}: the plan's values give a quantity of {}, not a number of units",
            c.label, c.quantity
        ));
    }
    let region = c.region.unwrap_or(region);
    let index = prices
        .index(c.service, region)
        .map_err(|e| format!("no {} prices for {region}: {e}", c.service))?;
    let mut filters: Vec<(&str, Match)> = c.filters.clone();
    if c.region.is_none() {
        filters.push(("regionCode", Match::Is(region.to_owned())));
    }
    let product = index.find(c.family, &filters).ok_or_else(|| {
        let wanted: Vec<String> = filters.iter().map(|(k, m)| format!("{k}={m}")).collect();
        format!(
            "no {} price in {region} for {:?} with {}",
            c.service,
            c.family,
            wanted.join(", ")
        )
    })?;
    Ok(Line {
        side,
        component: c.label.clone(),
        unit_price: product.price.clone(),
        unit: product.unit.clone(),
        quantity: c.quantity,
        usage: c.usage.clone(),
        assumed: c.assumed,
        monthly: round(product.usd() * c.quantity),
        sku: product.sku.clone(),
    })
}
