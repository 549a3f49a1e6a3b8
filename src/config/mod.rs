//! `.terraci.yaml`: types, defaults, lookup and validation.
//!
//! Input: the config file text (read through `System` by the driver). Output: a validated
//! [`Config`] plus warnings. The same Rust types parse the file and (later) generate its
//! JSON Schema, so the two cannot drift apart.

mod load;
mod pattern;

pub use load::{find_config_file, load_config, ConfigError, LoadedConfig, CONFIG_FILE_NAMES};
pub use pattern::Pattern;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Directory for runtime artefacts (cache, logs). TerraCi's key; default `.terraci`.
    pub service_dir: Option<String>,
    pub structure: Structure,
    /// Globs on module ids; matching modules get no jobs.
    pub exclude: Vec<String>,
    /// Globs on module ids; when non-empty only matching modules get jobs.
    pub include: Vec<String>,
    pub library_modules: LibraryModules,
    pub execution: Execution,
    pub extensions: Extensions,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Structure {
    pub pattern: String,
}

impl Default for Structure {
    fn default() -> Self {
        Structure {
            pattern: "{service}/{environment}/{region}/{module}".into(),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LibraryModules {
    pub paths: Vec<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Binary {
    #[default]
    Terraform,
    Tofu,
}

impl Binary {
    pub fn command(self) -> &'static str {
        match self {
            Binary::Terraform => "terraform",
            Binary::Tofu => "tofu",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Execution {
    pub binary: Binary,
    pub init_enabled: bool,
    /// TerraCi key; accepted, plan jobs are always generated.
    pub plan_enabled: bool,
    /// TerraCi key (`standard` or `detailed`); accepted for compatibility.
    pub plan_mode: Option<String>,
    /// Worker pool size for `local-exec`.
    pub parallelism: usize,
    /// Added to every plan and apply job.
    pub env: IndexMap<String, String>,
}

impl Default for Execution {
    fn default() -> Self {
        Execution {
            binary: Binary::Terraform,
            init_enabled: true,
            plan_enabled: true,
            plan_mode: None,
            parallelism: 4,
            env: IndexMap::new(),
        }
    }
}

/// `extensions:`. The TerraCi plugin sections terraci does not implement are accepted and
/// reported as a warning, so an existing `.terraci.yaml` loads unchanged.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Extensions {
    pub gitlab: Option<GitLab>,
    pub github: Option<GitHub>,
    pub cost: Option<Ignored>,
    pub policy: Option<Ignored>,
    pub summary: Option<Ignored>,
    pub tfupdate: Option<Ignored>,
    pub update: Option<Ignored>,
    pub localexec: Option<Ignored>,
}

impl Extensions {
    /// Names of configured plugin sections that terraci does not implement.
    pub fn ignored_sections(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        for (name, present) in [
            ("cost", self.cost.is_some()),
            ("policy", self.policy.is_some()),
            ("summary", self.summary.is_some()),
            ("tfupdate", self.tfupdate.is_some()),
            ("update", self.update.is_some()),
            ("localexec", self.localexec.is_some()),
        ] {
            if present {
                out.push(name);
            }
        }
        out
    }
}

/// Any YAML value, kept only to say it is not used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Ignored(pub serde_yaml::Value);

impl Eq for Ignored {}

/// `image: name` or `image: {name, entrypoint}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Image {
    Name(String),
    Full {
        name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        entrypoint: Option<Vec<String>>,
    },
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GitLab {
    pub image: Option<Image>,
    pub terraform_version: Option<String>,
    pub stages_prefix: Option<String>,
    /// TerraCi key; accepted.
    pub parallelism: Option<u32>,
    pub variables: IndexMap<String, String>,
    /// GitLab's limit of `needs` per job (default 50).
    pub needs_limit: Option<usize>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GitHub {
    pub runs_on: Option<String>,
    pub terraform_version: Option<String>,
    pub env: IndexMap<String, String>,
    pub permissions: IndexMap<String, String>,
}
