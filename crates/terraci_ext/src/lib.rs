//! Integrations around the pipeline: the HTTP boundary, policy checks (Rego, pulled
//! from git and OCI sources) and the merge-request summary comment. Each contributes its
//! jobs through the engine's contribution model; the job plan never names one.

pub mod http;
pub mod policy;
pub mod summary;
