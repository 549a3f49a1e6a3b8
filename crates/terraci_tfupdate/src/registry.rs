//! The Terraform registry protocol: service discovery (`/.well-known/terraform.json`),
//! `providers.v1` (versions, download endpoints, SHA256SUMS, packages) and `modules.v1`
//! (versions), over `terraci_ext::http`.
//!
//! Input: provider addresses and module sources; the configured hosts. Output: versions,
//! and provider packages whose SHA-256 was checked against the registry's SHA256SUMS,
//! kept in the per-user cache (never the checkout) so a second run downloads nothing.
//! A token (`TF_TOKEN_<host>`, as terraform reads it) goes only to the registry's own
//! origin over HTTPS or loopback HTTP; a redirect to another host carries none (ureq
//! drops `Authorization` on every redirect).

use std::cell::RefCell;
use std::collections::BTreeMap;

use camino::Utf8PathBuf;
use serde::Deserialize;

use terraci_db::system::System;

use crate::archive::{hex, zip_hash};
use crate::scan::DEFAULT_HOST;
use crate::version::Version;

/// The largest JSON answer read.
const MAX_JSON: u64 = 16 << 20;
/// The largest provider package read (the largest providers are about 200 MB zipped).
const MAX_PACKAGE: u64 = 1 << 30;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RegistryError(pub String);

/// A provider version a registry lists, with its platforms (`linux_amd64`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderRelease {
    pub version: Version,
    pub platforms: Vec<String>,
}

/// A provider package of one platform: the zip and the `zh:` hashes of every package of
/// that version (from SHA256SUMS).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Package {
    pub zip: Vec<u8>,
    pub all_zip_hashes: Vec<String>,
}

/// What the planner asks a registry; tests answer from memory.
pub trait Registry {
    /// The versions of a provider (`registry.terraform.io/hashicorp/aws`).
    fn provider_versions(&self, address: &str) -> Result<Vec<ProviderRelease>, RegistryError>;
    /// The versions of a module (`host`, `ns/name/system`).
    fn module_versions(&self, host: &str, path: &str) -> Result<Vec<Version>, RegistryError>;
    /// The package of `address` `version` for `platform` (`linux_amd64`).
    fn provider_package(
        &self,
        address: &str,
        version: &Version,
        platform: &str,
    ) -> Result<Package, RegistryError>;
}

/// Where each host's registry is: `extensions.tfupdate.registries`.
#[derive(Debug, Clone, Default)]
pub struct Hosts {
    /// The host asked for sources on `registry.terraform.io` (`registries.default`).
    pub default: Option<String>,
    /// A host per short provider source (`hashicorp/aws`).
    pub providers: BTreeMap<String, String>,
}

impl Hosts {
    /// The base URL (`https://host`) of the registry answering for `address`.
    fn provider_base(&self, address: &str) -> String {
        let (host, path) = address.split_once('/').unwrap_or((address, ""));
        // Keyed as sources are written: `ns/type` on the default host, else in full.
        let source = if host == DEFAULT_HOST { path } else { address };
        let chosen = self
            .providers
            .get(source)
            .or(self.providers.get(address))
            .cloned()
            .or_else(|| {
                (host == DEFAULT_HOST)
                    .then(|| self.default.clone())
                    .flatten()
            })
            .unwrap_or_else(|| host.to_owned());
        base_url(&chosen)
    }

    fn module_base(&self, host: &str) -> String {
        match (&self.default, host == DEFAULT_HOST) {
            (Some(default), true) => base_url(default),
            _ => base_url(host),
        }
    }
}

/// `host` as a URL: `https://host` unless a scheme is written (`http://127.0.0.1:8080`
/// for a registry on the machine).
fn base_url(host: &str) -> String {
    if host.contains("://") {
        host.trim_end_matches('/').to_owned()
    } else {
        format!("https://{}", host.trim_end_matches('/'))
    }
}

/// `target` resolved against `base` (a URL): absolute, absolute path, or relative.
fn resolve(base: &str, target: &str) -> String {
    if target.contains("://") {
        return target.to_owned();
    }
    let (scheme, rest) = base.split_once("://").unwrap_or(("https", base));
    let authority = rest.split('/').next().unwrap_or(rest);
    if target.starts_with('/') {
        return format!("{scheme}://{authority}{target}");
    }
    // Relative to the base's directory, with `.` and `..` resolved (never above the
    // authority).
    let path = rest[authority.len()..].split('?').next().unwrap_or("");
    let mut segments: Vec<&str> = path.split('/').skip(1).collect();
    segments.pop();
    for part in target.split('/') {
        match part {
            "." => {}
            ".." => {
                segments.pop();
            }
            p => segments.push(p),
        }
    }
    format!("{scheme}://{authority}/{}", segments.join("/"))
}

#[cfg(test)]
mod tests {
    use super::resolve;

    #[test]
    fn download_urls_resolve_against_the_answer_they_came_in() {
        let base = "https://r.example/v1/providers/ns/t/1.0.0/download/linux/amd64";
        assert_eq!(
            resolve(base, "https://cdn.example/x.zip"),
            "https://cdn.example/x.zip"
        );
        assert_eq!(
            resolve(base, "/files/x.zip"),
            "https://r.example/files/x.zip"
        );
        assert_eq!(
            resolve(base, "x.zip"),
            "https://r.example/v1/providers/ns/t/1.0.0/download/linux/x.zip"
        );
        assert_eq!(
            resolve(base, "../../../../../../../../../x.zip"),
            "https://r.example/x.zip"
        );
        assert_eq!(
            resolve(
                "https://r.example/.well-known/terraform.json",
                "/v1/providers/"
            ),
            "https://r.example/v1/providers/"
        );
        assert_eq!(
            resolve(
                "https://r.example/.well-known/terraform.json",
                "v1/modules/"
            ),
            "https://r.example/.well-known/v1/modules/"
        );
    }
}

#[derive(Deserialize)]
struct Discovery {
    #[serde(rename = "providers.v1")]
    providers: Option<String>,
    #[serde(rename = "modules.v1")]
    modules: Option<String>,
}

#[derive(Deserialize)]
struct ProviderVersions {
    versions: Vec<ProviderVersionEntry>,
}

#[derive(Deserialize)]
struct ProviderVersionEntry {
    version: String,
    #[serde(default)]
    platforms: Vec<PlatformEntry>,
}

#[derive(Deserialize)]
struct PlatformEntry {
    os: String,
    arch: String,
}

#[derive(Deserialize)]
struct ModuleVersions {
    modules: Vec<ModuleVersionList>,
}

#[derive(Deserialize)]
struct ModuleVersionList {
    versions: Vec<ModuleVersionEntry>,
}

#[derive(Deserialize)]
struct ModuleVersionEntry {
    version: String,
}

#[derive(Deserialize)]
struct DownloadAnswer {
    filename: String,
    download_url: String,
    shasums_url: String,
    shasum: String,
}

/// A registry's `providers.v1` and `modules.v1` paths, as discovery gave them.
type Services = (Option<String>, Option<String>);

/// The registry client over HTTP.
pub struct HttpRegistry<'a> {
    system: &'a dyn System,
    hosts: Hosts,
    /// Provider packages are kept here (under the per-user cache home); `None`: not kept.
    cache: Option<Utf8PathBuf>,
    /// Service discovery answers by base URL.
    services: RefCell<BTreeMap<String, Services>>,
    /// No request starts after this (the run's `timeout`).
    deadline: Option<std::time::SystemTime>,
}

impl<'a> HttpRegistry<'a> {
    pub fn new(system: &'a dyn System, hosts: Hosts, cache: Option<Utf8PathBuf>) -> Self {
        HttpRegistry {
            system,
            hosts,
            cache,
            services: RefCell::new(BTreeMap::new()),
            deadline: None,
        }
    }

    /// No request starts once `deadline` (by the system's clock) has passed.
    pub fn with_deadline(mut self, deadline: std::time::SystemTime) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// The `Authorization` header for `url` when terraform's `TF_TOKEN_<host>` is set for
    /// the registry `base` and `url` is on its origin over HTTPS (or loopback HTTP).
    fn token_for(&self, base: &str, url: &str) -> Option<String> {
        let origin = |u: &str| {
            let (scheme, rest) = u.split_once("://")?;
            Some((scheme.to_owned(), rest.split('/').next()?.to_owned()))
        };
        let (scheme, authority) = origin(base)?;
        if origin(url)? != (scheme.clone(), authority.clone()) {
            return None;
        }
        let host = authority.split(':').next().unwrap_or(&authority);
        let local = matches!(host, "localhost" | "127.0.0.1");
        if scheme != "https" && !(scheme == "http" && local) {
            return None;
        }
        let var = format!(
            "TF_TOKEN_{}",
            authority.replace('-', "__").replace(['.', ':'], "_")
        );
        self.system.env_var(&var).map(|t| format!("Bearer {t}"))
    }

    fn fetch(&self, base: &str, url: &str, max: u64) -> Result<Vec<u8>, RegistryError> {
        if self.deadline.is_some_and(|d| self.system.now() > d) {
            return Err(RegistryError(
                "the run's timeout passed (extensions.tfupdate.timeout or --timeout)".to_owned(),
            ));
        }
        let auth = self.token_for(base, url);
        let mut headers = vec![("Accept", "application/json")];
        if let Some(auth) = &auth {
            headers.push(("Authorization", auth.as_str()));
        }
        let shown = terraci_ext::http::redact_url(url);
        let answer =
            terraci_ext::http::get(url, &headers, max).map_err(|e| RegistryError(e.to_string()))?;
        if answer.status != 200 {
            return Err(RegistryError(format!(
                "GET {shown}: the registry answered {}",
                answer.status
            )));
        }
        Ok(answer.body)
    }

    fn json<T: for<'de> Deserialize<'de>>(
        &self,
        base: &str,
        url: &str,
    ) -> Result<T, RegistryError> {
        let body = self.fetch(base, url, MAX_JSON)?;
        serde_json::from_slice(&body).map_err(|e| {
            RegistryError(format!(
                "GET {}: not the registry protocol's answer: {e}",
                terraci_ext::http::redact_url(url)
            ))
        })
    }

    /// The `providers.v1` or `modules.v1` URL of the registry at `base`.
    fn service(&self, base: &str, providers: bool) -> Result<String, RegistryError> {
        let known = self.services.borrow().get(base).cloned();
        let (p, m) = match known {
            Some(found) => found,
            None => {
                let found: Discovery =
                    self.json(base, &format!("{base}/.well-known/terraform.json"))?;
                let pair = (found.providers, found.modules);
                self.services
                    .borrow_mut()
                    .insert(base.to_owned(), pair.clone());
                pair
            }
        };
        let (name, path) = if providers {
            ("providers.v1", p)
        } else {
            ("modules.v1", m)
        };
        let path = path.ok_or_else(|| {
            RegistryError(format!(
                "{base} offers no {name} service (/.well-known/terraform.json)"
            ))
        })?;
        let url = resolve(&format!("{base}/.well-known/terraform.json"), &path);
        Ok(if url.ends_with('/') {
            url
        } else {
            format!("{url}/")
        })
    }

    fn cached_package(&self, address: &str, filename: &str) -> Option<Utf8PathBuf> {
        let safe = |s: &str| !s.is_empty() && !s.contains(['/', '\\']) && s != "." && s != "..";
        if !safe(filename) {
            return None;
        }
        Some(
            self.cache
                .as_ref()?
                .join("tfupdate/providers")
                .join(address)
                .join(filename),
        )
    }
}

impl Registry for HttpRegistry<'_> {
    fn provider_versions(&self, address: &str) -> Result<Vec<ProviderRelease>, RegistryError> {
        let base = self.hosts.provider_base(address);
        let service = self.service(&base, true)?;
        let short = address.split_once('/').map_or(address, |(_, s)| s);
        let answer: ProviderVersions = self.json(&base, &format!("{service}{short}/versions"))?;
        let mut out: Vec<ProviderRelease> = answer
            .versions
            .into_iter()
            .filter_map(|v| {
                Some(ProviderRelease {
                    version: Version::parse(&v.version)?,
                    platforms: v
                        .platforms
                        .into_iter()
                        .map(|p| format!("{}_{}", p.os, p.arch))
                        .collect(),
                })
            })
            .collect();
        out.sort_by(|a, b| a.version.cmp(&b.version));
        Ok(out)
    }

    fn module_versions(&self, host: &str, path: &str) -> Result<Vec<Version>, RegistryError> {
        let base = self.hosts.module_base(host);
        let service = self.service(&base, false)?;
        let answer: ModuleVersions = self.json(&base, &format!("{service}{path}/versions"))?;
        let mut out: Vec<Version> = answer
            .modules
            .into_iter()
            .flat_map(|m| m.versions)
            .filter_map(|v| Version::parse(&v.version))
            .collect();
        out.sort();
        Ok(out)
    }

    fn provider_package(
        &self,
        address: &str,
        version: &Version,
        platform: &str,
    ) -> Result<Package, RegistryError> {
        let base = self.hosts.provider_base(address);
        let service = self.service(&base, true)?;
        let short = address.split_once('/').map_or(address, |(_, s)| s);
        let (os, arch) = platform.split_once('_').ok_or_else(|| {
            RegistryError(format!("{platform:?} is not a platform like linux_amd64"))
        })?;
        let endpoint = format!("{service}{short}/{version}/download/{os}/{arch}");
        let answer: DownloadAnswer = self.json(&base, &endpoint)?;
        let sums_url = resolve(&endpoint, &answer.shasums_url);
        let sums = String::from_utf8(self.fetch(&base, &sums_url, MAX_JSON)?).map_err(|_| {
            RegistryError(format!(
                "{}: not text",
                terraci_ext::http::redact_url(&sums_url)
            ))
        })?;
        let mut all_zip_hashes = Vec::new();
        let mut listed = None;
        for line in sums.lines() {
            let Some((sum, name)) = line.split_once("  ") else {
                continue;
            };
            if !name.ends_with(".zip") {
                continue;
            }
            all_zip_hashes.push(format!("zh:{sum}"));
            if name == answer.filename {
                listed = Some(sum.to_owned());
            }
        }
        let listed = listed.ok_or_else(|| {
            RegistryError(format!(
                "{address} {version}: SHA256SUMS does not list {}",
                answer.filename
            ))
        })?;
        if !listed.eq_ignore_ascii_case(&answer.shasum) {
            return Err(RegistryError(format!(
                "{address} {version}: the download answer's shasum for {} is not the one SHA256SUMS lists",
                answer.filename
            )));
        }
        let expected = format!("zh:{}", listed.to_ascii_lowercase());
        let cached = self.cached_package(address, &answer.filename);
        if let Some(path) = &cached {
            if let Ok(zip) = self.system.read(path) {
                if zip_hash(&zip) == expected {
                    return Ok(Package {
                        zip,
                        all_zip_hashes,
                    });
                }
            }
        }
        let url = resolve(&endpoint, &answer.download_url);
        let zip = self.fetch(&base, &url, MAX_PACKAGE)?;
        if zip_hash(&zip) != expected {
            return Err(RegistryError(format!(
                "{address} {version}: {} does not have the SHA-256 SHA256SUMS lists (got {})",
                answer.filename,
                hex(ring::digest::digest(&ring::digest::SHA256, &zip).as_ref())
            )));
        }
        if let Some(path) = cached {
            // Best effort: a package not kept is downloaded again next time.
            if let Some(dir) = path.parent() {
                let _ = self.system.create_dir_all(dir);
            }
            let _ = self.system.write_atomic(&path, &zip);
        }
        Ok(Package {
            zip,
            all_zip_hashes,
        })
    }
}
