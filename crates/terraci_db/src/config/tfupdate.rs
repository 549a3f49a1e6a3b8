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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(transparent)]
pub struct TfUpdateSection(#[schemars(with = "TfUpdate")] pub serde_yaml::Value);

impl<'de> Deserialize<'de> for TfUpdateSection {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(Lenient).map(TfUpdateSection)
    }
}

/// Any YAML value, an integer beyond 64 bits kept as its text (which `serde_yaml::Value`
/// cannot hold): such a section must not make the whole config an error, only itself
/// unreadable for `terraci tfupdate`.
struct Lenient;

impl<'de> serde::de::Visitor<'de> for Lenient {
    type Value = serde_yaml::Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_i128<E>(self, v: i128) -> Result<Self::Value, E> {
        Ok(v.to_string().into())
    }
    fn visit_u128<E>(self, v: u128) -> Result<Self::Value, E> {
        Ok(v.to_string().into())
    }
    fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(serde_yaml::Value::Null)
    }
    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(serde_yaml::Value::Null)
    }
    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(Lenient)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        while let Some(TfUpdateSection(v)) = seq.next_element()? {
            out.push(v);
        }
        Ok(serde_yaml::Value::Sequence(out))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = serde_yaml::Mapping::new();
        while let Some((TfUpdateSection(k), TfUpdateSection(v))) = map.next_entry()? {
            if out.contains_key(&k) {
                let shown = serde_yaml::to_string(&k).unwrap_or_default();
                return Err(serde::de::Error::custom(format!(
                    "duplicate key `{}`",
                    shown.trim_end()
                )));
            }
            out.insert(k, v);
        }
        Ok(serde_yaml::Value::Mapping(out))
    }
}

impl TfUpdateSection {
    /// The section read; `Err` names the key that is not what was expected.
    pub fn settings(&self) -> Result<TfUpdate, String> {
        if self.0.is_null() {
            return Ok(TfUpdate::default());
        }
        serde_yaml::from_value(self.0.clone()).map_err(|e| {
            // serde_yaml's message names no key: find the first key that fails alone.
            let key = self.0.as_mapping().and_then(|map| {
                map.iter().find_map(|(k, v)| {
                    let mut one = serde_yaml::Mapping::new();
                    one.insert(k.clone(), v.clone());
                    serde_yaml::from_value::<TfUpdate>(serde_yaml::Value::Mapping(one))
                        .is_err()
                        .then(|| k.as_str().map(str::to_owned))
                        .flatten()
                })
            });
            match key {
                Some(key) => format!("extensions.tfupdate.{key}: {e}"),
                None => format!("extensions.tfupdate: {e}"),
            }
        })
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
