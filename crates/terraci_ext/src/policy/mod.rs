//! Policy checks: OPA/Rego policies evaluated against each module's `plan.json`.
//!
//! Input: `extensions.policy` of the config, the policy sources (a directory of the
//! project, a git repository, an OCI artifact) and the plans left by the plan jobs
//! (`<module>/plan.json`). Output: per-module results (pass / warn / fail with the
//! messages and the rules that produced them), the report `<service_dir>/policy-report.json`
//! the summary comment renders, and the exit code the decisions give.
//!
//! Stages: [`sources`] materialises git and OCI sources in the per-user cache home with a
//! lock of what was pulled (`policy pull`); [`engine`] evaluates Rego in process;
//! [`check`] applies the decisions and overrides per module and renders the report
//! (the commands are in `src/commands/policy.rs`).

pub mod check;
pub mod engine;
mod git;
mod git_http;
mod oci;
pub mod sources;

use terraci_db::config::{Action, Config, Policy};

/// The namespace evaluated when none is configured.
pub const DEFAULT_NAMESPACE: &str = "terraform";

/// Where TerraCi keeps its runtime files when `service_dir` is not set.
pub(crate) const DEFAULT_SERVICE_DIR: &str = ".terraci";

/// `service_dir` (project-relative).
pub fn service_dir(config: &Config) -> &str {
    config
        .service_dir
        .as_deref()
        .filter(|s| !s.is_empty())
        .unwrap_or(DEFAULT_SERVICE_DIR)
}

/// A module's settings after the overrides that match it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Effective {
    pub(crate) enabled: bool,
    pub(crate) namespaces: Vec<String>,
    pub(crate) deny: Action,
    pub(crate) warn: Action,
}

impl Effective {
    /// Whether a result can fail the module (some decision is `block`).
    pub fn can_block(&self) -> bool {
        self.deny == Action::Block || self.warn == Action::Block
    }

    /// Whether policy checks run for the module.
    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// Whether namespace `ns` is evaluated for the module.
    pub fn wants(&self, ns: &str) -> bool {
        self.namespaces.iter().any(|n| n == ns)
    }
}

/// The settings for `module`: the section's, then each matching override in order
/// (`enabled` and each decision replace, a non-empty `namespaces` replaces).
pub fn effective(policy: &Policy, module: &str) -> Effective {
    let mut out = Effective {
        enabled: policy.enabled,
        namespaces: if policy.namespaces.is_empty() {
            vec![DEFAULT_NAMESPACE.to_owned()]
        } else {
            policy.namespaces.clone()
        },
        deny: policy.decisions.deny.unwrap_or(Action::Block),
        warn: policy.decisions.warn.unwrap_or(Action::Warn),
    };
    for o in &policy.overrides {
        if !terraci_db::filter::glob_matches(&o.pattern, module) {
            continue;
        }
        if let Some(enabled) = o.enabled {
            out.enabled = enabled;
        }
        if !o.namespaces.is_empty() {
            out.namespaces = o.namespaces.clone();
        }
        if let Some(deny) = o.decisions.deny {
            out.deny = deny;
        }
        if let Some(warn) = o.decisions.warn {
            out.warn = warn;
        }
    }
    out
}

/// A problem of the section that makes it unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SectionError {
    #[error("extensions.policy is not configured: there are no policies to use")]
    NotConfigured,
    #[error("extensions.policy.sources is empty: at least one source is needed")]
    NoSources,
    /// `key` is `path` or `url`.
    #[error("extensions.policy.sources[{index}]: `{key}` is empty")]
    EmptySource { index: usize, key: &'static str },
    #[error("extensions.policy.overrides[{0}]: `match` is empty")]
    EmptyOverride(usize),
    #[error("extensions.policy: namespace `{0}` is not a Rego package path (letters, digits, `_`, parts joined by `.`)")]
    BadNamespace(String),
}

impl terraci_db::exit::Coded for SectionError {
    /// `policy`'s code for a section, source or policy that cannot be used.
    fn exit_code(&self) -> u8 {
        terraci_db::exit::USAGE
    }
}

/// Problems of the section that make it unusable (checked before any work).
pub fn validate(policy: &Policy) -> Result<(), SectionError> {
    if policy.sources.is_empty() {
        return Err(SectionError::NoSources);
    }
    for (i, s) in policy.sources.iter().enumerate() {
        let empty = match s {
            terraci_db::config::PolicySource::Path { path } => path.trim().is_empty(),
            terraci_db::config::PolicySource::Git { url, .. }
            | terraci_db::config::PolicySource::Oci { url } => url.trim().is_empty(),
        };
        if empty {
            return Err(SectionError::EmptySource {
                index: i,
                key: if matches!(s, terraci_db::config::PolicySource::Path { .. }) {
                    "path"
                } else {
                    "url"
                },
            });
        }
    }
    for (i, o) in policy.overrides.iter().enumerate() {
        if o.pattern.trim().is_empty() {
            return Err(SectionError::EmptyOverride(i));
        }
    }
    for ns in policy
        .namespaces
        .iter()
        .chain(policy.overrides.iter().flat_map(|o| o.namespaces.iter()))
    {
        if !is_namespace(ns) {
            return Err(SectionError::BadNamespace(ns.clone()));
        }
    }
    Ok(())
}

/// `terraform`, `org.terraform`: what `data.<namespace>.deny` can be written with.
fn is_namespace(ns: &str) -> bool {
    !ns.is_empty()
        && ns.split('.').all(|part| {
            let mut chars = part.chars();
            chars
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use terraci_db::config::{Decisions, PolicyOverride};
    use terraci_engine::contrib::pipeline_job;

    fn policy() -> Policy {
        Policy {
            enabled: true,
            overrides: vec![
                PolicyOverride {
                    pattern: "**/sandbox/**".into(),
                    decisions: Decisions {
                        deny: Some(Action::Warn),
                        warn: None,
                    },
                    ..Default::default()
                },
                PolicyOverride {
                    pattern: "legacy/**".into(),
                    enabled: Some(false),
                    ..Default::default()
                },
                PolicyOverride {
                    pattern: "**/prod/**".into(),
                    namespaces: vec!["terraform".into(), "compliance".into()],
                    decisions: Decisions {
                        deny: None,
                        warn: Some(Action::Block),
                    },
                    ..Default::default()
                },
            ],
            ..Default::default()
        }
    }

    #[test]
    fn overrides_apply_in_order_to_matching_modules() {
        let p = policy();
        let plain = effective(&p, "platform/stage/eu/app");
        assert_eq!(
            plain,
            Effective {
                enabled: true,
                namespaces: vec!["terraform".into()],
                deny: Action::Block,
                warn: Action::Warn
            }
        );
        assert_eq!(effective(&p, "platform/sandbox/eu/test").deny, Action::Warn);
        assert!(!effective(&p, "legacy/old/eu/db").enabled);
        assert!(effective(&p, "platform/legacy/x").enabled);
        let prod = effective(&p, "platform/prod/eu/vpc");
        assert_eq!(prod.namespaces, ["terraform", "compliance"]);
        assert_eq!((prod.deny, prod.warn), (Action::Block, Action::Block));
    }

    #[test]
    fn the_pipeline_job_gates_applies_when_a_decision_blocks() {
        let mut config = Config::default();
        assert_eq!(pipeline_job(&config), None);
        config.extensions.policy = Some(Policy::default());
        assert_eq!(pipeline_job(&config), None, "not enabled");
        config.extensions.policy = Some(policy());
        let job = pipeline_job(&config).unwrap();
        assert_eq!(job.name, "policy-check");
        assert_eq!(job.commands[1], ["terraci", "policy", "check"]);
        assert!(job.gates_applies, "deny defaults to block");
        let mut relaxed = policy();
        relaxed.decisions.deny = Some(Action::Warn);
        relaxed.overrides.truncate(2);
        config.extensions.policy = Some(relaxed.clone());
        assert!(!pipeline_job(&config).unwrap().gates_applies);
        relaxed.overrides[1].decisions.warn = Some(Action::Block);
        config.extensions.policy = Some(relaxed);
        assert!(
            pipeline_job(&config).unwrap().gates_applies,
            "an override blocks"
        );
    }

    #[test]
    fn namespaces_must_be_package_paths() {
        assert!(is_namespace("terraform"));
        assert!(is_namespace("org.aws_rules"));
        assert!(!is_namespace("terraform.deny["));
        assert!(!is_namespace("1abc"));
        assert!(!is_namespace("a..b"));
    }
}
