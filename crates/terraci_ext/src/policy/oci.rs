//! OCI policy sources: a manifest and its layer blobs pulled over the distribution API.
//!
//! Input: `oci://registry[:port]/repository[:tag|@sha256:digest]` (tag default `latest`;
//! `localhost`, `127.0.0.1` and `[::1]` registries are spoken to over plain HTTP, all
//! others over HTTPS). Output: the manifest digest and the policy files of the layers.
//! Layers are read as `conftest push` and `oras push` write them: a layer with an
//! `org.opencontainers.image.title` annotation is the file of that name; a `tar+gzip`
//! layer (an OPA bundle) is unpacked (into the directory its title names when the
//! `io.deis.oras.content.unpack` annotation is set). Each blob is checked against its
//! sha256 digest. Anonymous pulls, with the registry's bearer-token challenge answered.
//!
//! The artifact is bounded as a whole, not layer by layer (one small gzip bomb listed many
//! times must not unpack many times): at most [`MAX_LAYERS`] layers, none listed twice,
//! [`MAX_DOWNLOAD`] bytes of layers downloaded, [`MAX_INFLATED`] bytes of tar streams
//! decompressed, [`MAX_UNPACKED`] bytes of files kept and [`MAX_FILES`] files. Each error
//! names the bound it hit.

use std::io::Read;

use serde::Deserialize;

use crate::http;

/// Bound on a manifest and on each blob.
const MAX_MANIFEST: u64 = 4 << 20;
const MAX_BLOB: u64 = 64 << 20;
/// Bounds on the whole artifact: layers in its manifest, bytes of layers downloaded, bytes
/// of tar streams decompressed, bytes and number of files kept.
const MAX_LAYERS: usize = 64;
const MAX_DOWNLOAD: u64 = 128 << 20;
const MAX_INFLATED: u64 = 256 << 20;
const MAX_UNPACKED: u64 = 64 << 20;
const MAX_FILES: usize = 10_000;

/// A bound in MiB, for messages.
fn mib(bytes: u64) -> u64 {
    bytes >> 20
}

const TITLE: &str = "org.opencontainers.image.title";
const UNPACK: &str = "io.deis.oras.content.unpack";

const ACCEPT: &str = "application/vnd.oci.image.manifest.v1+json, \
application/vnd.docker.distribution.manifest.v2+json";

/// Why an OCI source cannot be pulled (the caller names the source).
#[derive(Debug, thiserror::Error)]
pub(super) enum OciError {
    #[error("`{0}` is not registry/repository[:tag]")]
    NotAReference(String),
    /// No response, or a body over its bound.
    #[error(transparent)]
    Http(http::FetchError),
    #[error(
        "the registry asks for credentials: put them in {} (https://user:token@registry)",
        CREDENTIALS_VAR
    )]
    NeedsCredentials,
    #[error("the registry asks for an unknown kind of authentication (`{0}`)")]
    UnknownChallenge(String),
    #[error("the registry's token challenge names no realm")]
    NoRealm,
    #[error("the registry refused an anonymous token (HTTP {0}): put credentials in {var} (https://user:token@registry)", var = CREDENTIALS_VAR)]
    AnonymousTokenRefused(u16),
    #[error("the registry refused the credentials of {var} (HTTP {0})", var = CREDENTIALS_VAR)]
    CredentialsRefused(u16),
    #[error("token response: {0}")]
    TokenResponse(serde_json::Error),
    #[error("the token response has no token")]
    NoToken,
    #[error("{repository}:{reference} was not found in the registry")]
    NotFound {
        repository: String,
        reference: String,
    },
    #[error("the registry answered HTTP {0} for the manifest")]
    ManifestStatus(u16),
    #[error("the manifest's digest is {digest}, not the {wanted} asked for")]
    DigestMismatch { digest: String, wanted: String },
    #[error("the manifest is not an OCI image manifest: {0}")]
    NotAManifest(serde_json::Error),
    #[error("the reference is an image index, not a policy bundle")]
    ImageIndex,
    #[error("layer {0} is not a sha256 digest")]
    NotSha256(String),
    #[error("the registry answered HTTP {status} for layer {digest}")]
    LayerStatus { status: u16, digest: String },
    #[error("layer {0} does not match its digest")]
    LayerMismatch(String),
    #[error("layer {digest}: {source}")]
    Layer { digest: String, source: TarError },
    #[error("the artifact has no policy files (no titled layer, no tar+gzip layer)")]
    NoPolicyFiles,
    #[error("the manifest lists {0} layers, over the {MAX_LAYERS} an artifact may have")]
    TooManyLayers(usize),
    #[error("layer {0} is listed twice in the manifest: a layer is unpacked once")]
    RepeatedLayer(String),
    #[error("the artifact's layers download more than {} MiB", mib(MAX_DOWNLOAD))]
    DownloadTooLarge,
    #[error("layer {0} is over the {max} MiB a layer may be", max = mib(MAX_BLOB))]
    LayerTooLarge(String),
    /// `what` says which bound: the bytes of files, the decompressed tar streams, the files.
    #[error("the artifact {what}")]
    OverBound { what: String },
}

/// Why a tar+gzip layer cannot be unpacked.
#[derive(Debug, thiserror::Error)]
pub(super) enum TarError {
    #[error("not a tar.gz: {0}")]
    NotTarGz(std::io::Error),
    #[error("a path in the archive: {0}")]
    Path(std::io::Error),
    #[error("reading {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    /// A bound of the whole artifact ([`Budget`]), named.
    #[error("{0}")]
    Bound(String),
}

/// What the artifact has used of its bounds so far, across all its layers.
#[derive(Debug, Default)]
struct Budget {
    downloaded: u64,
    inflated: u64,
    unpacked: u64,
    files: usize,
}

impl Budget {
    /// Counts one more file of `bytes` bytes, refusing it past a bound.
    fn file(&mut self, bytes: u64) -> Result<(), String> {
        self.files += 1;
        if self.files > MAX_FILES {
            return Err(format!("has more than {MAX_FILES} files"));
        }
        self.unpacked = self.unpacked.saturating_add(bytes);
        if self.unpacked > MAX_UNPACKED {
            return Err(unpacked_too_large());
        }
        Ok(())
    }
}

fn unpacked_too_large() -> String {
    format!("unpacks to more than {} MiB", mib(MAX_UNPACKED))
}

fn inflated_too_large() -> String {
    format!("decompresses to more than {} MiB of tar", mib(MAX_INFLATED))
}

/// A reader that counts what it reads into `count` and fails once past `limit` (the error
/// is told apart by the count).
struct Counted<R> {
    inner: R,
    count: std::rc::Rc<std::cell::Cell<u64>>,
    limit: u64,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.count.get() > self.limit {
            return Err(std::io::Error::other(inflated_too_large()));
        }
        // Never more than one byte past the limit.
        let room = usize::try_from(self.limit + 1 - self.count.get()).unwrap_or(usize::MAX);
        let take = buf.len().min(room.max(1));
        let n = self.inner.read(&mut buf[..take])?;
        self.count.set(self.count.get() + n as u64);
        if self.count.get() > self.limit {
            return Err(std::io::Error::other(inflated_too_large()));
        }
        Ok(n)
    }
}

pub(super) struct Pulled {
    /// `sha256:...` of the manifest.
    pub(crate) digest: String,
    /// (relative path, bytes).
    pub files: Vec<(String, Vec<u8>)>,
}

/// `oci://host/repo:tag` split.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Reference {
    pub(crate) base: String,
    pub(crate) repository: String,
    pub(crate) reference: String,
}

pub(super) fn parse(url: &str) -> Result<Reference, OciError> {
    let not_a_reference = || OciError::NotAReference(url.to_owned());
    let rest = url.strip_prefix("oci://").unwrap_or(url);
    let (host, path) = rest.split_once('/').ok_or_else(not_a_reference)?;
    if host.is_empty() || path.is_empty() || host.contains('@') {
        return Err(not_a_reference());
    }
    let (repository, reference) = if let Some((repo, digest)) = path.split_once('@') {
        (repo.to_owned(), digest.to_owned())
    } else {
        match path.rsplit_once(':') {
            Some((repo, tag)) if !tag.contains('/') => (repo.to_owned(), tag.to_owned()),
            _ => (path.to_owned(), "latest".to_owned()),
        }
    };
    let valid_repo = !repository.is_empty()
        && repository
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-/".contains(c));
    let valid_ref = !reference.is_empty()
        && reference
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-:".contains(c));
    if !valid_repo || !valid_ref {
        return Err(not_a_reference());
    }
    // The host as the transport reads it: a `?`, `#` or user-info in it is refused.
    let endpoint =
        http::Endpoint::parse(&format!("https://{host}/")).map_err(|_| not_a_reference())?;
    let plain = matches!(endpoint.host.as_str(), "localhost" | "127.0.0.1" | "::1");
    let scheme = if plain { "http" } else { "https" };
    Ok(Reference {
        base: format!("{scheme}://{host}"),
        repository,
        reference,
    })
}

#[derive(Deserialize)]
struct Manifest {
    #[serde(default, rename = "mediaType")]
    media_type: Option<String>,
    #[serde(default)]
    layers: Vec<Descriptor>,
    #[serde(default)]
    manifests: Option<Vec<serde_json::Value>>,
}

#[derive(Deserialize)]
struct Descriptor {
    #[serde(rename = "mediaType")]
    media_type: String,
    digest: String,
    #[serde(default)]
    annotations: std::collections::BTreeMap<String, String>,
}

/// The environment variable whose lines bind registry credentials to a registry.
pub(super) const CREDENTIALS_VAR: &str = "TERRACI_POLICY_OCI_CREDENTIALS";

/// A GET with the registry's challenge answered once: a `Bearer` challenge with a token
/// from its realm (asked for with the registry's credentials, or anonymously), a `Basic`
/// one with the credentials.
struct Client {
    /// `Basic <base64>` of the credentials bound to the registry.
    basic: Option<String>,
    authorization: Option<String>,
}

fn basic(user: &str, password: &str) -> String {
    use base64::Engine as _;
    let pair = format!("{user}:{password}");
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(pair)
    )
}

impl Client {
    fn get(&mut self, url: &str, accept: &str, max: u64) -> Result<http::Download, OciError> {
        let response = self.send(url, accept, max)?;
        if response.status != 401 || self.authorization.is_some() {
            return Ok(response);
        }
        let Some(challenge) = response.header("www-authenticate").map(str::to_owned) else {
            return Ok(response);
        };
        self.authorization = Some(if challenge.starts_with("Basic") {
            self.basic.clone().ok_or(OciError::NeedsCredentials)?
        } else {
            format!("Bearer {}", token(&challenge, self.basic.as_deref())?)
        });
        self.send(url, accept, max)
    }

    fn send(&self, url: &str, accept: &str, max: u64) -> Result<http::Download, OciError> {
        let mut headers = vec![("Accept", accept)];
        if let Some(a) = &self.authorization {
            headers.push(("Authorization", a.as_str()));
        }
        http::get(url, &headers, max).map_err(OciError::Http)
    }
}

/// A token from a `Bearer realm="...",service="...",scope="..."` challenge, asked for with
/// `basic` (the registry's credentials) when the realm is HTTPS or this machine.
fn token(challenge: &str, basic: Option<&str>) -> Result<String, OciError> {
    let Some(params) = challenge.strip_prefix("Bearer ") else {
        return Err(OciError::UnknownChallenge(challenge.to_owned()));
    };
    let mut realm = None;
    let mut query = Vec::new();
    for part in params.split(',') {
        let Some((k, v)) = part.trim().split_once('=') else {
            continue;
        };
        let v = v.trim_matches('"');
        if k == "realm" {
            realm = Some(v.to_owned());
        } else if k == "service" || k == "scope" {
            query.push(format!("{k}={}", v.replace(' ', "%20")));
        }
    }
    let realm = realm.ok_or(OciError::NoRealm)?;
    let url = if query.is_empty() {
        realm
    } else {
        format!("{realm}?{}", query.join("&"))
    };
    let safe = http::Endpoint::parse(&url).is_ok_and(|e| e.is_safe_for_credentials());
    let mut headers = Vec::new();
    if let Some(b) = basic.filter(|_| safe) {
        headers.push(("Authorization", b));
    }
    let response = http::get(&url, &headers, MAX_MANIFEST).map_err(OciError::Http)?;
    if response.status != 200 {
        return Err(if headers.is_empty() {
            OciError::AnonymousTokenRefused(response.status)
        } else {
            OciError::CredentialsRefused(response.status)
        });
    }
    let value: serde_json::Value =
        serde_json::from_slice(&response.body).map_err(OciError::TokenResponse)?;
    value["token"]
        .as_str()
        .or_else(|| value["access_token"].as_str())
        .map(str::to_owned)
        .ok_or(OciError::NoToken)
}

fn sha256(bytes: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    let mut out = String::from("sha256:");
    for b in digest.as_ref() {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

pub(super) fn pull(system: &dyn terraci_db::system::System, url: &str) -> Result<Pulled, OciError> {
    let r = parse(url)?;
    let mut client = Client {
        basic: http::bound_credentials(system, CREDENTIALS_VAR, &r.base)
            .map(|(user, password)| basic(&user, &password)),
        authorization: None,
    };
    let manifest_url = format!("{}/v2/{}/manifests/{}", r.base, r.repository, r.reference);
    let response = client.get(&manifest_url, ACCEPT, MAX_MANIFEST)?;
    match response.status {
        200 => {}
        404 => {
            return Err(OciError::NotFound {
                repository: r.repository,
                reference: r.reference,
            })
        }
        status => return Err(OciError::ManifestStatus(status)),
    }
    let digest = sha256(&response.body);
    if r.reference.starts_with("sha256:") && r.reference != digest {
        return Err(OciError::DigestMismatch {
            digest,
            wanted: r.reference,
        });
    }
    let manifest: Manifest =
        serde_json::from_slice(&response.body).map_err(OciError::NotAManifest)?;
    if manifest.manifests.is_some()
        || manifest
            .media_type
            .as_deref()
            .is_some_and(|m| m.contains("index") || m.contains("manifest.list"))
    {
        return Err(OciError::ImageIndex);
    }
    if manifest.layers.len() > MAX_LAYERS {
        return Err(OciError::TooManyLayers(manifest.layers.len()));
    }
    let mut seen = std::collections::BTreeSet::new();
    for layer in &manifest.layers {
        if !layer.digest.starts_with("sha256:") {
            return Err(OciError::NotSha256(layer.digest.clone()));
        }
        if !seen.insert(layer.digest.as_str()) {
            return Err(OciError::RepeatedLayer(layer.digest.clone()));
        }
    }
    let mut budget = Budget::default();
    let mut files = Vec::new();
    for layer in &manifest.layers {
        let blob_url = format!("{}/v2/{}/blobs/{}", r.base, r.repository, layer.digest);
        let left = MAX_DOWNLOAD - budget.downloaded;
        let blob = match client.get(&blob_url, "*/*", MAX_BLOB.min(left)) {
            Err(OciError::Http(http::FetchError::Body {
                source: ureq::Error::BodyExceedsLimit(_),
                ..
            })) => {
                return Err(if left <= MAX_BLOB {
                    OciError::DownloadTooLarge
                } else {
                    OciError::LayerTooLarge(layer.digest.clone())
                })
            }
            other => other?,
        };
        if blob.status != 200 {
            return Err(OciError::LayerStatus {
                status: blob.status,
                digest: layer.digest.clone(),
            });
        }
        budget.downloaded += blob.body.len() as u64;
        if sha256(&blob.body) != layer.digest {
            return Err(OciError::LayerMismatch(layer.digest.clone()));
        }
        let title = layer.annotations.get(TITLE);
        let is_tar =
            layer.media_type.ends_with("tar+gzip") || layer.media_type.ends_with(".tar.gzip");
        if is_tar {
            let prefix = match (title, layer.annotations.get(UNPACK).map(String::as_str)) {
                (Some(t), Some("true")) => format!("{}/", t.trim_end_matches('/')),
                _ => String::new(),
            };
            unpack(&blob.body, &prefix, &mut budget, &mut files).map_err(
                |source| match source {
                    TarError::Bound(what) => OciError::OverBound { what },
                    source => OciError::Layer {
                        digest: layer.digest.clone(),
                        source,
                    },
                },
            )?;
        } else if let Some(title) = title {
            budget
                .file(blob.body.len() as u64)
                .map_err(|what| OciError::OverBound { what })?;
            files.push((title.clone(), blob.body));
        }
    }
    if files.is_empty() {
        return Err(OciError::NoPolicyFiles);
    }
    Ok(Pulled { digest, files })
}

/// The regular files of a tar.gz (`prefix` put before each path), counted against the
/// artifact's `budget`: the decompressed stream, each file's bytes (refused by its header
/// before it is read) and the number of files.
fn unpack(
    bytes: &[u8],
    prefix: &str,
    budget: &mut Budget,
    out: &mut Vec<(String, Vec<u8>)>,
) -> Result<(), TarError> {
    let count = std::rc::Rc::new(std::cell::Cell::new(0u64));
    let limit = MAX_INFLATED - budget.inflated;
    let gz = Counted {
        inner: flate2::read::GzDecoder::new(bytes),
        count: count.clone(),
        limit,
    };
    let over = || count.get() > limit;
    // An error of the stream is the bound's when the stream went past it.
    let named = |e: std::io::Error, other: fn(std::io::Error) -> TarError| {
        if over() {
            TarError::Bound(inflated_too_large())
        } else {
            other(e)
        }
    };
    let mut archive = tar::Archive::new(gz);
    for entry in archive
        .entries()
        .map_err(|e| named(e, TarError::NotTarGz))?
    {
        let mut entry = entry.map_err(|e| named(e, TarError::NotTarGz))?;
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let size = entry.size();
        budget.file(size).map_err(TarError::Bound)?;
        let path = entry
            .path()
            .map_err(TarError::Path)?
            .to_string_lossy()
            .trim_start_matches("./")
            .trim_start_matches('/')
            .to_owned();
        let mut data = Vec::new();
        (&mut entry)
            .take(size)
            .read_to_end(&mut data)
            .map_err(|source| {
                if over() {
                    TarError::Bound(inflated_too_large())
                } else {
                    TarError::Read {
                        path: path.clone(),
                        source,
                    }
                }
            })?;
        out.push((format!("{prefix}{path}"), data));
    }
    budget.inflated += count.get();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_name_registry_repository_and_tag() {
        assert_eq!(
            parse("oci://ghcr.io/org/policies:v1.0").unwrap(),
            Reference {
                base: "https://ghcr.io".into(),
                repository: "org/policies".into(),
                reference: "v1.0".into()
            }
        );
        let local = parse("oci://localhost:5000/p").unwrap();
        assert_eq!(
            (local.base.as_str(), local.reference.as_str()),
            ("http://localhost:5000", "latest")
        );
        let pinned = parse("oci://127.0.0.1:80/a/b@sha256:abc").unwrap();
        assert_eq!(pinned.reference, "sha256:abc");
        assert!(parse("oci://ghcr.io").is_err());
        assert!(parse("oci://ghcr.io/Org/x").is_err());
        assert!(parse("oci://ghcr.io/org/x:a b").is_err());
    }

    fn tar_gz(files: &[(&str, usize)]) -> Vec<u8> {
        let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        let mut tar = tar::Builder::new(gz);
        for (path, size) in files {
            let mut header = tar::Header::new_gnu();
            header.set_size(*size as u64);
            header.set_mode(0o644);
            header.set_cksum();
            tar.append_data(&mut header, path, std::io::repeat(b'x').take(*size as u64))
                .unwrap();
        }
        tar.into_inner().unwrap().finish().unwrap()
    }

    /// Each bound counts across layers: what earlier layers used is not given back.
    #[test]
    fn unpacking_counts_against_the_whole_artifacts_budget() {
        let layer = tar_gz(&[("a.rego", 4000), ("b.rego", 10)]);
        let mut files = Vec::new();
        let mut budget = Budget::default();
        unpack(&layer, "p/", &mut budget, &mut files).unwrap();
        assert_eq!(files.len(), 2);
        assert_eq!(files[0].0, "p/a.rego");
        assert_eq!((budget.files, budget.unpacked), (2, 4010));
        assert!(budget.inflated > 4010);

        let mut budget = Budget {
            inflated: MAX_INFLATED - 2000,
            ..Budget::default()
        };
        let err = unpack(&layer, "", &mut budget, &mut Vec::new()).unwrap_err();
        assert_eq!(err.to_string(), "decompresses to more than 256 MiB of tar");

        let mut budget = Budget {
            unpacked: MAX_UNPACKED - 100,
            ..Budget::default()
        };
        let err = unpack(&layer, "", &mut budget, &mut Vec::new()).unwrap_err();
        assert_eq!(err.to_string(), "unpacks to more than 64 MiB");

        let mut budget = Budget {
            files: MAX_FILES - 1,
            ..Budget::default()
        };
        let err = unpack(&layer, "", &mut budget, &mut Vec::new()).unwrap_err();
        assert_eq!(err.to_string(), "has more than 10000 files");
    }

    #[test]
    fn challenge_parameters_become_the_token_query() {
        assert!(token("Digest realm=x", None)
            .unwrap_err()
            .to_string()
            .contains("unknown kind"));
    }
}
