//! `terraci cost`: the monthly AWS cost of each module's plan, before and after, from
//! AWS's public bulk price lists.
//!
//! Stages, top to bottom: [`offer`] reads a price list as a stream, [`resources`] says
//! how each resource type is priced (and so which products a list keeps), [`source`]
//! finds a list (`--pricing-dir`, the per-user cache, or HTTP), [`plan`] reads a
//! module's `plan.json`, [`estimate`] prices the plans, [`output`] renders text, JSON and
//! the summary's report. No IO but through
//! the `System` boundary and `terraci_ext::http`.

pub mod offer;
pub mod resources;
pub mod plan;
pub mod source;
pub mod estimate;
pub mod output;
