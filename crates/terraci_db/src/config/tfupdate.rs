//! `extensions.tfupdate`: TerraCi's tfupdate plugin keys, for `terraci tfupdate` and its
//! `tfupdate-check` job.
//!
//! The section is kept as written when the config loads and read into [`TfUpdate`] by
//! its users ([`TfUpdateSection::settings`]), so a section with a key of another TerraCi
//! version never stops `generate`; `terraci tfupdate` reports it with the key's path.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `extensions.tfupdate` as written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct TfUpdateSection(#[schemars(with = "TfUpdate")] pub serde_yaml::Value);

impl TfUpdateSection {
    /// The section read; `Err` names the key that is not what was expected.
    pub fn settings(&self) -> Result<TfUpdate, String> {
        if self.0.is_null() {
            return Ok(TfUpdate::default());
        }
        serde_yaml::from_value(self.0.clone()).map_err(|e| format!("extensions.tfupdate: {e}"))
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct TfUpdate {
    /// Turns `terraci tfupdate` on (default false).
    pub enabled: bool,
    /// What is checked: `modules`, `providers` or `all` (default).
    pub target: Option<String>,
    /// Provider sources (`hashicorp/aws`) and module sources never bumped.
    pub ignore: Vec<String>,
    /// Adds a `tfupdate-check` job whose report is a section of the summary.
    pub pipeline: bool,
    /// The longest a run may take, e.g. `15m` (default 5m, 20m with `--write`).
    pub timeout: Option<String>,
    pub policy: TfUpdatePolicy,
    pub registries: TfUpdateRegistries,
    pub lock: TfUpdateLock,
    /// TerraCi's cache backends: accepted; terraci keeps registry answers and provider
    /// packages under its per-user cache home.
    #[schemars(with = "serde_json::Value")]
    pub cache: Option<serde_yaml::Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct TfUpdatePolicy {
    /// How far a version may move: `patch`, `minor` or `major` (or `--bump`).
    pub bump: Option<String>,
    /// Write exact versions (`5.80.0`) instead of keeping each constraint's operator.
    pub pin: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct TfUpdateRegistries {
    /// The registry host of sources without one (default `registry.terraform.io`).
    pub default: Option<String>,
    /// A host per provider source (`hashicorp/aws: registry.example.com`).
    pub providers: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct TfUpdateLock {
    /// Platforms whose `h1:` hashes the lock files get (`linux_amd64`, `darwin_arm64`).
    pub platforms: Vec<String>,
}
