//! `.terraci.yaml`: types, defaults, lookup and validation.
//!
//! Input: the config file text (read through `System` by the driver). Output: a validated
//! [`Config`] plus warnings. The same Rust types parse the file and generate its
//! JSON Schema, so the two cannot drift apart.

mod duration;
mod load;
mod pattern;
mod schema;
mod tfupdate;

pub use duration::parse_go_duration;
pub use load::{
    closest, edit_distance, find_config_file, find_config_upward, load_config, load_config_text,
    parse_config, read_config_bytes, ConfigError, LoadedConfig, CONFIG_FILE_NAMES,
};
pub use pattern::{Pattern, PatternError};
pub use schema::config_schema;
pub use tfupdate::{TfUpdate, TfUpdateLock, TfUpdatePolicy, TfUpdateRegistries, TfUpdateSection};

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Directory for what terraci writes (local-exec logs, reports), relative to the
    /// project. TerraCi's key; default `.terraci`. The fact cache and run records stay in
    /// `.terraci/cache` (`--cache-dir` moves them): they are looked up before the config
    /// is read.
    pub service_dir: Option<String>,
    /// How module directories are laid out.
    pub structure: Structure,
    /// Globs on module ids; matching modules get no jobs.
    pub exclude: Vec<String>,
    /// Globs on module ids; when non-empty only matching modules get jobs.
    pub include: Vec<String>,
    /// Directories whose modules are libraries: dependencies, never targets.
    pub library_modules: LibraryModules,
    /// How Terraform/OpenTofu is run in the generated jobs.
    pub execution: Execution,
    /// CI provider settings, and TerraCi plugin sections (accepted, ignored).
    pub extensions: Extensions,
    /// Variable values for the modules whose id matches a glob, as a tfvars file would
    /// give them (values set in CI, per-stack tfvars kept elsewhere in the tree).
    pub variables: Vec<VariablesEntry>,
    /// What `terraform init -backend-config=...` gives the modules whose id matches a
    /// glob: merged over their backend block.
    pub backend_config: Vec<BackendConfigEntry>,
    /// Edges the code cannot show (`add`) and found edges that are not real (`ignore`).
    pub dependencies: Dependencies,
    /// State owned by other repositories (`s3://bucket/key` globs): references to it
    /// are listed, not warned about.
    pub external_state: Vec<String>,
    /// `--changed-only` settings.
    pub changed_only: ChangedOnly,
}

/// `changed_only:`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ChangedOnly {
    /// Also run the modules the changed ones read (TerraCi's affected set), as
    /// `--include-dependencies` does; by default only the changed modules and their
    /// dependents run.
    pub include_dependencies: bool,
}

/// `variables:` entry. Placeholders in `files`: each pattern segment (`{environment}`),
/// `{module_path}` (the id), `{module_name}` (its last directory).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct VariablesEntry {
    /// Globs on module ids.
    pub modules: Vec<String>,
    /// Variable name -> value (any YAML value: string, number, bool, list, map).
    #[schemars(with = "IndexMap<String, serde_json::Value>")]
    pub values: IndexMap<String, serde_yaml::Value>,
    /// tfvars files (native or `.json`), relative to the module directory; globs allowed.
    pub files: Vec<String>,
}

/// `backend_config:` entry. Placeholders in values and files: each pattern segment,
/// `{module_path}`, `{module_name}`, and in values `{var.NAME}` (the module's variable).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct BackendConfigEntry {
    /// Globs on module ids.
    pub modules: Vec<String>,
    /// Backend field -> value (`key: "{var.project}-{module_name}.tfstate"`).
    #[serde(deserialize_with = "scalar_map")]
    #[schemars(schema_with = "scalar_map_schema")]
    pub values: IndexMap<String, String>,
    /// `-backend-config` files (HCL attributes), relative to the module directory; globs
    /// allowed; a missing file is fine (not every module has one).
    pub files: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Dependencies {
    /// Edges to add: every module matching `from` depends on every module matching `to`.
    pub add: Vec<DependencyRule>,
    /// Found edges to drop (they are reported with `-v` and in JSON).
    pub ignore: Vec<DependencyRule>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct DependencyRule {
    /// Glob on the dependent module's id.
    pub from: String,
    /// Glob on the dependency's id.
    pub to: String,
    /// Why (shown with the edge).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Structure {
    /// Directory pattern of a root module: `{name}` segments separated by `/`; the last
    /// segment is the module. Default `{service}/{environment}/{region}/{module}`.
    pub pattern: String,
    /// How root modules are found: `pattern` (TerraCi's meaning: every directory with
    /// Terraform files at least as deep as the pattern) or `roots` (every directory with
    /// Terraform files at any depth, except libraries: `library_modules.paths` and the
    /// directories that a local module call anywhere in the project names as its literal
    /// `source`). With `roots`, `pattern` is not used and each module's only component is
    /// `module`, its directory's name.
    pub discovery: Discovery,
}

/// How root modules are found (`structure.discovery`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Discovery {
    /// Directories at least as deep as `structure.pattern` (TerraCi's meaning).
    #[default]
    Pattern,
    /// Every directory with Terraform files that is not a library, at any depth.
    Roots,
}

impl Default for Structure {
    fn default() -> Self {
        Structure {
            pattern: "{service}/{environment}/{region}/{module}".into(),
            discovery: Discovery::Pattern,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct LibraryModules {
    /// Project-relative directories.
    pub paths: Vec<String>,
}

/// The Terraform-compatible binary the jobs run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Binary {
    #[default]
    Terraform,
    Tofu,
}

impl Config {
    /// `service_dir`, default `.terraci` (validated relative and inside at load).
    pub fn service_dir(&self) -> &str {
        self.service_dir.as_deref().unwrap_or(".terraci")
    }
}

impl Binary {
    pub fn command(self) -> &'static str {
        match self {
            Binary::Terraform => "terraform",
            Binary::Tofu => "tofu",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Execution {
    /// `terraform` or `tofu`.
    pub binary: Binary,
    /// Run `init` before `plan`/`apply` (default true).
    pub init_enabled: bool,
    /// TerraCi key; accepted, plan jobs are always generated.
    pub(crate) plan_enabled: bool,
    /// TerraCi key (`standard` or `detailed`); accepted for compatibility.
    pub(crate) plan_mode: Option<String>,
    /// Worker pool size for `local-exec`.
    pub parallelism: usize,
    /// Added to every plan and apply job.
    #[schemars(schema_with = "scalar_map_schema")]
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
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Extensions {
    /// GitLab CI settings.
    pub gitlab: Option<GitLab>,
    /// GitHub Actions settings.
    pub github: Option<GitHub>,
    /// Monthly AWS cost of each module's plan (`terraci cost`, the `cost` job), TerraCi's
    /// cost plugin keys.
    pub cost: Option<Cost>,
    /// OPA/Rego policy checks on each module's plan (`terraci policy pull|check`).
    pub policy: Option<Policy>,
    /// The merge-request / pull-request comment of `terraci summary` (on by default).
    pub(crate) summary: Option<SummarySettings>,
    /// Provider and module version bumps (`terraci tfupdate`).
    pub tfupdate: Option<TfUpdateSection>,
    /// TerraCi's update plugin: not implemented by terraci, accepted with a warning.
    pub(crate) update: Option<Ignored>,
    /// TerraCi's localexec plugin settings: not used by terraci, accepted with a warning.
    pub(crate) localexec: Option<Ignored>,
}

impl Extensions {
    /// Names of configured plugin sections that terraci does not implement.
    pub(crate) fn ignored_sections(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        for (name, present) in [
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

/// `extensions.cost`: TerraCi's cost plugin keys.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Cost {
    /// An older TerraCi's switch: the same as `providers.aws.enabled`.
    pub enabled: Option<bool>,
    /// The clouds priced, by name: `aws` (the only one terraci prices).
    pub providers: IndexMap<String, CostProvider>,
    /// How long downloaded prices are used before they are fetched again: a Go duration
    /// (`24h`, `90m`, `1h30m`). Default `24h`. `blob_cache.ttl` wins when both are set.
    pub cache_ttl: Option<String>,
    /// TerraCi's price cache settings: `ttl` and `namespace` (the cache's subdirectory)
    /// take effect; the cache itself is always the per-user cache home.
    pub blob_cache: Option<CostBlobCache>,
    /// An older TerraCi's cache directory: ignored with a warning, prices are cached in
    /// the per-user cache home (`TERRACI_CACHE_HOME`), never where a checkout can write.
    pub cache_dir: Option<String>,
}

impl Cost {
    /// Whether AWS costs are estimated (`providers.aws.enabled`, or `enabled`).
    pub fn is_enabled(&self) -> bool {
        self.enabled == Some(true) || self.providers.get("aws").is_some_and(|p| p.enabled)
    }

    /// The TTL as written (`blob_cache.ttl`, else `cache_ttl`).
    pub fn ttl(&self) -> Option<&str> {
        self.blob_cache
            .as_ref()
            .and_then(|b| b.ttl.as_deref())
            .or(self.cache_ttl.as_deref())
            .filter(|t| !t.is_empty())
    }

    /// The cache's subdirectory of the cache home (default `cost/pricing`).
    pub fn namespace(&self) -> &str {
        self.blob_cache
            .as_ref()
            .and_then(|b| b.namespace.as_deref())
            .filter(|n| !n.is_empty())
            .unwrap_or("cost/pricing")
    }
}

/// `extensions.cost.providers.<name>`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct CostProvider {
    pub enabled: bool,
}

/// `extensions.cost.blob_cache`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct CostBlobCache {
    /// TerraCi's blob backend plugin: only its default, `diskblob` (the per-user cache
    /// home), exists in terraci; another is ignored with a warning.
    pub backend: Option<String>,
    /// The cache's subdirectory of the cache home (default `cost/pricing`).
    pub namespace: Option<String>,
    /// How long downloaded prices are used (a Go duration, default `24h`).
    pub ttl: Option<String>,
}

/// `extensions.policy`: OPA policies evaluated against each module's `plan.json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Policy {
    /// Run policy checks (the `policy-check` job, `policy check`). Default false.
    pub enabled: bool,
    /// Where the `.rego` files come from; `policy pull` materialises them.
    pub sources: Vec<PolicySource>,
    /// Rego packages evaluated (`data.<namespace>.deny`, `.warn`, ...). Default `[terraform]`.
    pub namespaces: Vec<String>,
    /// What `deny` and `warn` results do.
    pub decisions: Decisions,
    /// Per-module changes, applied in order to the modules whose id matches `match`.
    pub overrides: Vec<PolicyOverride>,
    /// Where pulled policies go. Default `<service_dir>/policies`.
    pub source_cache_dir: Option<String>,
    /// What the policies see as `input`: `envelope` (default, TerraCi's: `input.plan` is
    /// the plan, `input.terraci` the module, namespaces and plan path) or `plan` (the plan
    /// JSON is the whole input, as conftest gives it).
    pub input: PolicyInput,
}

impl Policy {
    /// Whether some decision is `block` for some module: the section's (`deny` defaults to
    /// `block`) or an override's. Then the apply jobs wait for the check, and policy sources
    /// that hold no rules fail closed instead of passing every plan.
    pub fn blocks_anywhere(&self) -> bool {
        let blocks = |d: &Decisions, default_deny: bool| {
            d.deny.map_or(default_deny, |a| a == Action::Block) || d.warn == Some(Action::Block)
        };
        blocks(&self.decisions, true) || self.overrides.iter().any(|o| blocks(&o.decisions, false))
    }
}

/// `extensions.policy.input`: the shape of the Rego `input`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PolicyInput {
    /// `{"plan": <plan.json>, "terraci": {"module": {"path", "components"}, "policy":
    /// {"namespaces"}, "plan": {"path"}}}`, as TerraCi's policy plugin gives it.
    #[default]
    Envelope,
    /// The plan JSON itself (conftest style: `input.resource_changes`).
    Plan,
}

/// One policy source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
pub enum PolicySource {
    /// A directory of `.rego` files, relative to the project root.
    Path { path: String },
    /// A git repository (`ssh://`, `git://`, `file://` or a local path; not `https://`)
    /// at `ref` (branch, tag or full commit id; default: the remote's HEAD).
    Git {
        url: String,
        #[serde(default, rename = "ref", skip_serializing_if = "Option::is_none")]
        reference: Option<String>,
    },
    /// An OCI artifact (`oci://registry/repository:tag` or `@sha256:...`) holding a
    /// policy bundle (tar.gz layers).
    Oci { url: String },
}

/// What a `deny` (also `violation`) and a `warn` result does to a module.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Decisions {
    /// Default `block`.
    pub deny: Option<Action>,
    /// Default `warn`.
    pub warn: Option<Action>,
}

/// `block`: the module fails (exit 1); `warn`: reported, not failing; `ignore`: counted
/// as suppressed only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Block,
    Warn,
    Ignore,
}

/// `extensions.policy.overrides` entry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct PolicyOverride {
    /// Glob on module ids (`*` one segment, `**` any number).
    #[serde(rename = "match")]
    pub pattern: String,
    /// `false` skips the matching modules.
    pub enabled: Option<bool>,
    /// Replaces the namespaces for the matching modules.
    pub namespaces: Vec<String>,
    /// Replaces the decisions that are set here.
    pub decisions: Decisions,
}

/// Any value: accepted so existing files load, and reported as unused.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub(crate) struct Ignored(#[schemars(with = "serde_json::Value")] pub serde_yaml::Value);

impl<'de> Deserialize<'de> for Ignored {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Skipped, not kept: a value `serde_yaml::Value` cannot hold (an integer beyond 64
        // bits) must not make a section that is ignored anyway a config error.
        serde::de::IgnoredAny::deserialize(d)?;
        Ok(Ignored(serde_yaml::Value::Null))
    }
}

impl Eq for Ignored {}

/// `image: name` or `image: {name, entrypoint}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Image {
    Name(String),
    Full {
        name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        entrypoint: Option<Vec<String>>,
    },
}

impl Image {
    pub fn name(&self) -> &str {
        match self {
            Image::Name(name) | Image::Full { name, .. } => name,
        }
    }
}

/// Which generated jobs an `overwrites` entry applies to: `plan`, `apply`, or the name
/// of a contributed job (`terraci-summary`), as in TerraCi.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(into = "String")]
pub enum OverwriteType {
    Plan,
    Apply,
    /// A contributed job, by name.
    Job(String),
}

impl OverwriteType {
    pub(crate) fn as_str(&self) -> &str {
        match self {
            OverwriteType::Plan => "plan",
            OverwriteType::Apply => "apply",
            OverwriteType::Job(name) => name,
        }
    }
}

impl From<OverwriteType> for String {
    fn from(t: OverwriteType) -> String {
        t.as_str().to_owned()
    }
}

impl JsonSchema for OverwriteType {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "OverwriteType".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "`plan`, `apply`, or the name of a contributed job (`terraci-summary`)",
            "type": "string",
            "minLength": 1
        })
    }
}

impl<'de> Deserialize<'de> for OverwriteType {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // A visitor, so the YAML reader attaches the key path and position to the error.
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = OverwriteType;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("plan, apply or the name of a contributed job")
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<OverwriteType, E> {
                match text {
                    "plan" => Ok(OverwriteType::Plan),
                    "apply" => Ok(OverwriteType::Apply),
                    "" => Err(E::custom(
                        "expected plan, apply or the name of a contributed job, got an empty string",
                    )),
                    other => Ok(OverwriteType::Job(other.to_owned())),
                }
            }
        }
        d.deserialize_str(Visitor)
    }
}

/// The schema of a [`scalar_map`] field: string keys, scalar values.
fn scalar_map_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "additionalProperties": {"type": ["string", "number", "boolean", "null"]}
    })
}

/// A map whose values may be written as YAML strings, numbers or booleans
/// (`TF_INPUT: false`); they are kept as the strings a CI variable holds.
/// Whether `name` can name an environment variable in every place terraci writes one
/// (a shell `export`, GitLab `variables`, GitHub `env`): a letter or `_`, then letters,
/// digits and `_`.
pub(crate) fn is_env_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// The message for an invalid variable name.
pub(crate) fn env_name_error(name: &str) -> String {
    format!(
        "`{}` is not a valid variable name: use letters, digits and `_`, not starting with a digit",
        crate::escape::printable(name)
    )
}

/// [`scalar_map`] whose keys are variable names ([`is_env_name`]): `env` and
/// `variables` sections, which reach shells and CI variable tables as names.
fn env_map<'de, D: serde::Deserializer<'de>>(d: D) -> Result<IndexMap<String, String>, D::Error> {
    let map = scalar_map(d)?;
    match map.keys().find(|k| !is_env_name(k)) {
        Some(bad) => Err(serde::de::Error::custom(env_name_error(bad))),
        None => Ok(map),
    }
}

fn scalar_map<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<IndexMap<String, String>, D::Error> {
    let raw: IndexMap<String, serde_yaml::Value> = IndexMap::deserialize(d)?;
    raw.into_iter()
        .map(|(key, value)| {
            let text = match value {
                serde_yaml::Value::String(s) => s,
                serde_yaml::Value::Bool(b) => b.to_string(),
                serde_yaml::Value::Number(n) => n.to_string(),
                serde_yaml::Value::Null => String::new(),
                _ => {
                    return Err(serde::de::Error::custom(format!(
                        "`{key}`: expected a string, number or boolean"
                    )))
                }
            };
            Ok((key, text))
        })
        .collect()
}

/// `extensions.gitlab`: TerraCi's GitLab CI keys.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct GitLab {
    /// `default.image`; by default the official image of `execution.binary`.
    pub image: Option<Image>,
    /// TerraCi's deprecated spelling of `image`; used when `image` is not set.
    pub terraform_image: Option<Image>,
    /// Tag of the default image (terraci's key).
    pub terraform_version: Option<String>,
    /// Stage names are `<stages_prefix>-<level>`; default `deploy`.
    pub stages_prefix: Option<String>,
    /// TerraCi key, reserved there too; accepted.
    pub(crate) parallelism: Option<u32>,
    /// Pipeline-level `variables`.
    #[serde(deserialize_with = "env_map")]
    #[schemars(schema_with = "scalar_map_schema")]
    pub variables: IndexMap<String, String>,
    /// GitLab's limit of `needs` per job (default 50).
    pub needs_limit: Option<usize>,
    /// The instance's `max_yaml_size_bytes` (default 2 MiB = 2097152, GitLab's default):
    /// a pipeline whose loaded YAML GitLab would measure above it is an error unless
    /// `generate --force`.
    pub max_yaml_size_bytes: Option<u64>,
    /// The instance's limit of jobs in one pipeline (default: none): more jobs is an
    /// error unless `generate --force`.
    pub max_jobs: Option<usize>,
    /// Over `max_yaml_size_bytes` or `max_jobs`, `generate -o FILE` writes a parent
    /// pipeline that triggers child pipelines, each under the limits, beside FILE in
    /// `<FILE's stem>.d/` (default true); `false` keeps the `pipeline-limit` error.
    pub split_pipelines: Option<bool>,
    /// The job of the pipeline that triggers the generated one which runs `terraci
    /// generate` and keeps its files as artifacts (default `generate-pipeline`, the
    /// recipe's): a split parent takes the child pipelines from it.
    pub generate_job: Option<String>,
    /// Plan jobs only (as `--plan-only`).
    pub plan_only: bool,
    /// Per-module `.terraform/` cache (default true).
    pub cache_enabled: Option<bool>,
    pub cache: Option<GitLabCache>,
    /// Adds GitLab's `cache:` of terraci's own cache, `.terraci/cache/`, to the jobs of the
    /// pipeline that run terraci (summary, policy-check, cost, tfupdate-check), keyed
    /// per base branch and read-only (`policy: pull`): the job that runs `terraci
    /// generate` writes it (docs/recipes.md). Default false.
    pub terraci_cache: bool,
    /// `workflow.rules` of the pipeline.
    pub rules: Vec<GitLabRule>,
    /// Applied to every plan and apply job.
    pub job_defaults: Option<GitLabJobConfig>,
    /// Applied after `job_defaults` to the jobs of one type, in order.
    pub overwrites: Vec<GitLabOverwrite>,
    /// Merge-request comment and labels of `terraci summary`, and its job.
    pub mr: Option<GitLabMr>,
    /// TerraCi's older spelling of `execution.binary`; when set, it is the binary.
    pub(crate) terraform_binary: Option<Binary>,
    /// TerraCi key; plan jobs are always generated (`false` is a warning).
    pub plan_enabled: Option<bool>,
    /// TerraCi's older spelling of `execution.init_enabled`; when set, it wins.
    pub(crate) init_enabled: Option<bool>,
    /// TerraCi key: unless `true`, apply jobs are `when: manual` (as in TerraCi; unless
    /// `overwrites` or `job_defaults` set `when`); `true`, applies run on their own (on
    /// the default branch, see the README). `generate --auto-approve` /
    /// `--no-auto-approve` set it for one run.
    pub auto_approve: Option<bool>,
}

/// `extensions.gitlab.cache`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct GitLabCache {
    pub enabled: Option<bool>,
    /// Placeholders: `{module_path}` and `{<segment>}` of the pattern.
    pub key: Option<String>,
    pub paths: Vec<String>,
    pub policy: Option<CachePolicy>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum CachePolicy {
    #[serde(rename = "pull")]
    Pull,
    #[serde(rename = "push")]
    Push,
    #[serde(rename = "pull-push")]
    PullPush,
}

/// GitLab's `when`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum GitLabWhen {
    OnSuccess,
    OnFailure,
    Always,
    Never,
    Manual,
    Delayed,
}

/// One entry of GitLab `rules` (workflow or job).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct GitLabRule {
    #[serde(rename = "if", skip_serializing_if = "Option::is_none")]
    pub if_: Option<String>,
    /// A list of globs or `{paths, compare_to}`, passed through.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<serde_json::Value>")]
    pub changes: Option<serde_yaml::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<serde_json::Value>")]
    pub exists: Option<serde_yaml::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub when: Option<GitLabWhen>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_in: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_failure: Option<bool>,
    #[serde(
        deserialize_with = "env_map",
        skip_serializing_if = "IndexMap::is_empty"
    )]
    #[schemars(schema_with = "scalar_map_schema")]
    pub variables: IndexMap<String, String>,
}

/// `id_tokens.<NAME>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IdToken {
    /// One audience or a list of them.
    #[schemars(with = "serde_json::Value")]
    pub(crate) aud: serde_yaml::Value,
}

/// `secrets.<NAME>`: GitLab's secret sources, passed through.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Secret {
    /// `path/to/secret/field@engine` or `{engine: {name, path}, path, field}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<serde_json::Value>")]
    pub(crate) vault: Option<serde_yaml::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<serde_json::Value>")]
    pub(crate) gcp_secret_manager: Option<serde_yaml::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<serde_json::Value>")]
    pub(crate) azure_key_vault: Option<serde_yaml::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<serde_json::Value>")]
    pub(crate) aws_secrets_manager: Option<serde_yaml::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) file: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) token: Option<String>,
}

/// GitLab job `artifacts`. On plan jobs the plan file path is always kept.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct GitLabArtifacts {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) name: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) exclude: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expire_in: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) expose_as: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) untracked: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub when: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) public: Option<bool>,
    /// `{terraform: [...], junit: [...], ...}`, passed through.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<serde_json::Value>")]
    pub(crate) reports: Option<serde_yaml::Value>,
}

/// `extensions.gitlab.job_defaults`. A key that is set replaces the job's value, except
/// `variables`, merged key by key.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct GitLabJobConfig {
    pub image: Option<Image>,
    pub id_tokens: Option<IndexMap<String, IdToken>>,
    pub secrets: Option<IndexMap<String, Secret>>,
    pub before_script: Option<Vec<String>>,
    pub after_script: Option<Vec<String>>,
    pub artifacts: Option<GitLabArtifacts>,
    pub tags: Option<Vec<String>>,
    pub rules: Option<Vec<GitLabRule>>,
    #[serde(deserialize_with = "env_map")]
    #[schemars(schema_with = "scalar_map_schema")]
    pub variables: IndexMap<String, String>,
    pub when: Option<GitLabWhen>,
}

/// `extensions.gitlab.overwrites[]`: [`GitLabJobConfig`] for the jobs of one `type`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GitLabOverwrite {
    #[serde(rename = "type")]
    pub job_type: OverwriteType,
    #[serde(default)]
    pub(crate) image: Option<Image>,
    #[serde(default)]
    pub(crate) id_tokens: Option<IndexMap<String, IdToken>>,
    #[serde(default)]
    pub(crate) secrets: Option<IndexMap<String, Secret>>,
    #[serde(default)]
    pub(crate) before_script: Option<Vec<String>>,
    #[serde(default)]
    pub(crate) after_script: Option<Vec<String>>,
    #[serde(default)]
    pub(crate) artifacts: Option<GitLabArtifacts>,
    #[serde(default)]
    pub(crate) tags: Option<Vec<String>>,
    #[serde(default)]
    pub(crate) rules: Option<Vec<GitLabRule>>,
    #[serde(default, deserialize_with = "env_map")]
    #[schemars(schema_with = "scalar_map_schema")]
    pub(crate) variables: IndexMap<String, String>,
    #[serde(default)]
    pub when: Option<GitLabWhen>,
}

impl GitLabOverwrite {
    /// The settings of this entry, without its `type`.
    pub fn job_config(&self) -> GitLabJobConfig {
        GitLabJobConfig {
            image: self.image.clone(),
            id_tokens: self.id_tokens.clone(),
            secrets: self.secrets.clone(),
            before_script: self.before_script.clone(),
            after_script: self.after_script.clone(),
            artifacts: self.artifacts.clone(),
            tags: self.tags.clone(),
            rules: self.rules.clone(),
            variables: self.variables.clone(),
            when: self.when,
        }
    }
}

/// `extensions.github`: TerraCi's GitHub Actions keys.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct GitHub {
    /// Workflow `name` (default `Terraform`).
    pub name: Option<String>,
    /// Workflow triggers, passed through; default pull_request, push to
    /// `default_branch`, workflow_dispatch.
    #[schemars(with = "Option<serde_json::Value>")]
    pub on: Option<serde_yaml::Value>,
    /// Branch of the default `push` trigger (default `main`).
    pub default_branch: Option<String>,
    /// Runner label (default `ubuntu-latest`).
    pub runs_on: Option<String>,
    pub container: Option<Image>,
    /// Version input of the setup action; the action's default when unset.
    pub terraform_version: Option<String>,
    /// TerraCi's per-provider spelling of `execution.binary`; when set, it is the binary.
    pub(crate) terraform_binary: Option<Binary>,
    /// Adds the setup-terraform / setup-opentofu step (default true).
    pub setup_step: Option<bool>,
    /// Workflow-level `env`.
    #[serde(deserialize_with = "env_map")]
    #[schemars(schema_with = "scalar_map_schema")]
    pub env: IndexMap<String, String>,
    pub permissions: IndexMap<String, String>,
    /// Plan jobs only (as `--plan-only`).
    pub plan_only: bool,
    /// A first job, `terraci-affected`, runs `terraci generate --changed-only` against
    /// the pull request's base (or the commit a push replaced) and each plan and apply job
    /// runs only when its module is in that affected set (default true). Without terraci
    /// in that job, on other events, or when the base commit is not in the clone, every
    /// module runs. false: every job runs on every event.
    pub affected_only: Option<bool>,
    /// Adds `actions/cache` of terraci's own cache, `.terraci/cache/`, to the jobs that
    /// run terraci, keyed per base branch: each restores the newest cache of its base
    /// branch, and the `terraci-affected` job saves one on a push to the default branch
    /// (docs/recipes.md). Default false.
    pub terraci_cache: bool,
    /// Applied to every plan and apply job.
    pub job_defaults: Option<GitHubJobConfig>,
    /// Applied after `job_defaults` to the jobs of one type, in order.
    pub overwrites: Vec<GitHubOverwrite>,
    /// Pull-request comment and labels of `terraci summary`, and its job.
    pub pr: Option<GitHubPr>,
}

/// One step of `steps_before` / `steps_after`, passed through.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct GitHubStep {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) name: Option<String>,
    #[serde(rename = "if", skip_serializing_if = "Option::is_none")]
    pub(crate) if_: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) uses: Option<String>,
    #[serde(
        deserialize_with = "scalar_map",
        skip_serializing_if = "IndexMap::is_empty"
    )]
    #[schemars(schema_with = "scalar_map_schema")]
    pub(crate) with: IndexMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) run: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) shell: Option<String>,
    #[serde(rename = "working-directory", skip_serializing_if = "Option::is_none")]
    pub(crate) working_directory: Option<String>,
    #[serde(
        deserialize_with = "env_map",
        skip_serializing_if = "IndexMap::is_empty"
    )]
    #[schemars(schema_with = "scalar_map_schema")]
    pub(crate) env: IndexMap<String, String>,
    #[serde(rename = "continue-on-error", skip_serializing_if = "Option::is_none")]
    pub(crate) continue_on_error: Option<bool>,
    #[serde(rename = "timeout-minutes", skip_serializing_if = "Option::is_none")]
    pub(crate) timeout_minutes: Option<u32>,
}

/// `extensions.github.job_defaults`. A key that is set replaces the job's value, except
/// `env`, merged key by key, and an overwrite's `steps_before` / `steps_after`, appended
/// to these.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct GitHubJobConfig {
    pub runs_on: Option<String>,
    pub container: Option<Image>,
    #[serde(deserialize_with = "env_map")]
    #[schemars(schema_with = "scalar_map_schema")]
    pub env: IndexMap<String, String>,
    #[serde(rename = "if")]
    pub if_: Option<String>,
    pub environment: Option<String>,
    pub steps_before: Option<Vec<GitHubStep>>,
    pub steps_after: Option<Vec<GitHubStep>>,
}

/// `extensions.github.overwrites[]`: [`GitHubJobConfig`] for the jobs of one `type`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GitHubOverwrite {
    #[serde(rename = "type")]
    pub job_type: OverwriteType,
    #[serde(default)]
    pub(crate) runs_on: Option<String>,
    #[serde(default)]
    pub(crate) container: Option<Image>,
    #[serde(default, deserialize_with = "env_map")]
    #[schemars(schema_with = "scalar_map_schema")]
    pub(crate) env: IndexMap<String, String>,
    #[serde(default, rename = "if")]
    pub(crate) if_: Option<String>,
    #[serde(default)]
    pub(crate) environment: Option<String>,
    #[serde(default)]
    pub(crate) steps_before: Option<Vec<GitHubStep>>,
    #[serde(default)]
    pub(crate) steps_after: Option<Vec<GitHubStep>>,
}

impl GitHubOverwrite {
    /// The settings of this entry, without its `type`.
    pub fn job_config(&self) -> GitHubJobConfig {
        GitHubJobConfig {
            runs_on: self.runs_on.clone(),
            container: self.container.clone(),
            env: self.env.clone(),
            if_: self.if_.clone(),
            environment: self.environment.clone(),
            steps_before: self.steps_before.clone(),
            steps_after: self.steps_after.clone(),
        }
    }
}

/// `extensions.summary`: what `terraci summary` writes, for every CI provider.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct SummarySettings {
    /// The summary job and comment (default true; `false` turns both off).
    pub(crate) enabled: Option<bool>,
    /// Post no comment when no module has changes or failed and no report warns.
    pub(crate) on_changes_only: bool,
    /// A `<details>` section per module with its resource changes (default true).
    pub(crate) include_details: Option<bool>,
    /// Labels for the merge request / pull request. Placeholders: each pattern segment
    /// (`{service}`, `{environment}`...), `{env}`, `{module_id}`, `{module_path}`,
    /// `{status}` (per changed or failed module), and `{resource_type}`,
    /// `{resource_name}`, `{resource_address}`, `{resource_action}` (per changed
    /// resource).
    pub(crate) labels: Vec<String>,
}

/// `comment:` of `extensions.gitlab.mr` / `extensions.github.pr`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct CommentSettings {
    /// Post the comment (default true).
    pub(crate) enabled: Option<bool>,
    /// Post no comment when nothing changes (as `extensions.summary.on_changes_only`).
    pub(crate) on_changes_only: bool,
    /// Per-module `<details>` (default true; as `extensions.summary.include_details`).
    pub(crate) include_details: Option<bool>,
}

/// `extensions.gitlab.mr` and `extensions.github.pr`: the comment, the labels and the
/// provider's summary job (`J`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(
    deny_unknown_fields,
    default,
    bound(deserialize = "J: Deserialize<'de>")
)]
#[schemars(rename = "ReviewSettings_{J}")]
pub struct ReviewSettings<J> {
    pub(crate) comment: Option<CommentSettings>,
    /// Labels; placeholders as in `extensions.summary.labels`.
    pub(crate) labels: Vec<String>,
    /// The `terraci-summary` job.
    pub summary_job: Option<J>,
}

impl<J> Default for ReviewSettings<J> {
    fn default() -> Self {
        ReviewSettings {
            comment: None,
            labels: Vec::new(),
            summary_job: None,
        }
    }
}

/// `extensions.gitlab.mr`.
pub(crate) type GitLabMr = ReviewSettings<GitLabSummaryJob>;
/// `extensions.github.pr`.
pub(crate) type GitHubPr = ReviewSettings<GitHubSummaryJob>;

/// `extensions.gitlab.mr.summary_job`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct GitLabSummaryJob {
    /// Image of the job; it must contain terraci.
    pub image: Option<Image>,
    /// Runner tags of the job.
    pub tags: Vec<String>,
}

/// `extensions.github.pr.summary_job`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct GitHubSummaryJob {
    /// Runner label of the job (default: `runs_on`).
    pub runs_on: Option<String>,
}

/// Which provider's comment settings apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommentProvider {
    GitLab,
    GitHub,
}

/// The summary settings in effect for one provider: `extensions.summary` combined with
/// the provider's `comment` section (either can turn the comment off or details off;
/// either can ask for changes only) and both label lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EffectiveSummary {
    pub enabled: bool,
    pub on_changes_only: bool,
    pub include_details: bool,
    pub labels: Vec<String>,
}

impl Extensions {
    /// Whether the summary job and command are on (`extensions.summary.enabled`,
    /// default true).
    pub fn summary_enabled(&self) -> bool {
        self.summary
            .as_ref()
            .and_then(|s| s.enabled)
            .unwrap_or(true)
    }

    /// The summary settings for `provider` (`None`: no provider, as outside CI).
    pub fn effective_summary(&self, provider: Option<CommentProvider>) -> EffectiveSummary {
        let summary = self.summary.clone().unwrap_or_default();
        let (comment, labels) = match provider {
            Some(CommentProvider::GitLab) => self
                .gitlab
                .as_ref()
                .and_then(|g| g.mr.as_ref())
                .map(|mr| (mr.comment.clone(), mr.labels.clone())),
            Some(CommentProvider::GitHub) => self
                .github
                .as_ref()
                .and_then(|g| g.pr.as_ref())
                .map(|pr| (pr.comment.clone(), pr.labels.clone())),
            None => None,
        }
        .unwrap_or_default();
        let comment = comment.unwrap_or_default();
        let mut all_labels = summary.labels.clone();
        for label in labels {
            if !all_labels.contains(&label) {
                all_labels.push(label);
            }
        }
        EffectiveSummary {
            enabled: summary.enabled.unwrap_or(true) && comment.enabled.unwrap_or(true),
            on_changes_only: summary.on_changes_only || comment.on_changes_only,
            include_details: summary.include_details.unwrap_or(true)
                && comment.include_details.unwrap_or(true),
            labels: all_labels,
        }
    }
}

#[cfg(test)]
mod summary_tests {
    use super::load::parse_config_with_warnings;
    use super::*;

    #[test]
    fn summary_settings_default_on_with_details() {
        let c = parse_config("", ".terraci.yaml").expect("empty loads");
        let effective = c
            .extensions
            .effective_summary(Some(CommentProvider::GitLab));
        assert!(c.extensions.summary_enabled());
        assert_eq!(
            effective,
            EffectiveSummary {
                enabled: true,
                on_changes_only: false,
                include_details: true,
                labels: Vec::new(),
            }
        );
    }

    #[test]
    fn terraci_summary_and_mr_sections_load_and_combine() {
        let text = "extensions:\n  summary:\n    on_changes_only: true\n    labels: [terraform]\n  gitlab:\n    mr:\n      comment:\n        enabled: true\n        include_details: false\n      labels: [\"env:{environment}\", terraform]\n      summary_job:\n        image: registry.example.com/terraci:1\n        tags: [docker]\n  github:\n    pr:\n      comment:\n        enabled: false\n      summary_job:\n        runs_on: self-hosted\n";
        let (c, warnings) = parse_config_with_warnings(text, ".terraci.yaml").expect("loads");
        assert!(warnings.is_empty(), "{warnings:?}");
        let gitlab = c
            .extensions
            .effective_summary(Some(CommentProvider::GitLab));
        assert!(gitlab.enabled && gitlab.on_changes_only && !gitlab.include_details);
        assert_eq!(gitlab.labels, ["terraform", "env:{environment}"]);
        let github = c
            .extensions
            .effective_summary(Some(CommentProvider::GitHub));
        assert!(!github.enabled && github.include_details);
        assert_eq!(github.labels, ["terraform"]);
        let mr = c.extensions.gitlab.as_ref().and_then(|g| g.mr.as_ref());
        let job = mr
            .and_then(|m| m.summary_job.as_ref())
            .expect("summary_job");
        assert_eq!(
            job.image.as_ref().map(Image::name),
            Some("registry.example.com/terraci:1")
        );
        assert_eq!(job.tags, ["docker"]);
        let pr = c.extensions.github.as_ref().and_then(|g| g.pr.as_ref());
        assert_eq!(
            pr.and_then(|p| p.summary_job.as_ref())
                .and_then(|j| j.runs_on.as_deref()),
            Some("self-hosted")
        );
    }

    #[test]
    fn summary_disabled_turns_the_comment_off_everywhere() {
        let c = parse_config("extensions:\n  summary:\n    enabled: false\n", "c").expect("loads");
        assert!(!c.extensions.summary_enabled());
        assert!(!c.extensions.effective_summary(None).enabled);
        assert!(
            !c.extensions
                .effective_summary(Some(CommentProvider::GitHub))
                .enabled
        );
    }

    #[test]
    fn a_typo_inside_the_mr_comment_is_a_warning_naming_the_key() {
        let text =
            "extensions:\n  gitlab:\n    mr:\n      comment:\n        on_change_only: true\n";
        let (config, warnings) =
            parse_config_with_warnings(text, ".terraci.yaml").expect("loads, as TerraCi's does");
        assert_eq!(
            warnings,
            ["extensions.gitlab.mr.comment.on_change_only is not a key terraci knows; it has no effect (did you mean `on_changes_only`?)"]
        );
        assert!(!config.extensions.effective_summary(None).on_changes_only);
    }
}
