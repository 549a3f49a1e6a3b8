//! Git policy sources, fetched in process with gix.
//!
//! Input: a repository URL (`https://`, `ssh://`, `git://`, `file://` or a local path)
//! and a ref (a branch, a tag or a full commit id; default the remote's HEAD). Output:
//! the commit the ref resolves to and the policy files (`.rego`) of its tree. The objects
//! are kept in a bare repository per URL under the per-user cache home (`<home>/policies/git-store/<hash>`), so
//! a commit already fetched is read without the network. gix reads and writes that store
//! itself; the policy files go to disk through the `System` (see `sources`).
//!
//! HTTPS speaks git's smart protocol over this build's HTTP client (`git_http`); plain
//! `http://` only to this machine. Credentials: the URL's user-info, or a line of
//! `TERRACI_POLICY_GIT_CREDENTIALS` (the `~/.git-credentials` format, one
//! `https://user:token@host` per line) for the URL's host. The URL comes from the
//! repository under review, so a credential is bound to the host its owner named, never
//! to whatever host a merge request writes; git's credential helpers and prompts are never
//! run.

use std::sync::atomic::AtomicBool;

use gix::error::ErrorExt as _;

use camino::Utf8Path;

pub(super) struct Fetched {
    /// Full hex id.
    pub(crate) commit: String,
    /// (repository path, bytes), the policy files of the commit's tree.
    pub files: Vec<(String, Vec<u8>)>,
}

fn store_name(url: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, url.as_bytes());
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

fn is_commit_id(r: &str) -> bool {
    r.len() == 40 && r.chars().all(|c| c.is_ascii_hexdigit())
}

/// Why a git source cannot be fetched (the caller names the source). gix's errors are
/// kept as their text (with their causes where the message shows them).
#[derive(Debug, thiserror::Error)]
pub(super) enum GitError {
    #[error(
        "the git cache {path} is refused: {why} (expected a bare repository terraci made; delete the directory and pull again)"
    )]
    UnsafeStore {
        path: camino::Utf8PathBuf,
        why: String,
    },
    #[error("git over plain http:// is only spoken to this machine: use https://")]
    PlainHttp,
    #[error("cannot create the git cache {path}: {why}")]
    Store {
        path: camino::Utf8PathBuf,
        why: String,
    },
    #[error("not a repository URL: {0}")]
    NotAUrl(String),
    #[error("refspecs: {0}")]
    Refspecs(String),
    #[error("credentials: {0}")]
    Credentials(String),
    #[error("cannot connect: {0}")]
    Connect(String),
    #[error("cannot list the repository's refs: {0}")]
    ListRefs(String),
    #[error("fetch failed: {0}")]
    Fetch(String),
    #[error("`{wanted}`: {why}")]
    BadCommitId { wanted: String, why: String },
    #[error("the repository has no branch or tag `{0}`")]
    NoSuchRef(String),
    #[error("`{wanted}` ({oid}): {source}")]
    Tree {
        wanted: String,
        oid: gix::ObjectId,
        source: TreeError,
    },
}

/// Why a commit's policy files cannot be read from the repository.
#[derive(Debug, thiserror::Error)]
pub(super) enum TreeError {
    #[error("not in the repository: {0}")]
    NotInRepository(String),
    #[error("not a commit: {0}")]
    NotACommit(String),
    #[error("no tree: {0}")]
    NoTree(String),
    #[error("cannot walk the tree: {0}")]
    Walk(String),
    #[error("{path}: {why}")]
    Blob { path: String, why: String },
}

const STORE_README: &str =
    "Objects of the git policy sources, one bare repository per URL (terraci policy pull).\n";

#[allow(
    clippy::disallowed_methods,
    reason = "the store is gix's own real directory (gix reads and writes it directly, not through the System); these checks must see that same file system"
)]
pub(super) fn fetch(
    system: &dyn terraci_db::system::System,
    store: &Utf8Path,
    url: &str,
    reference: Option<&str>,
) -> Result<Fetched, GitError> {
    let http = http_url(url)?;
    if http
        .as_ref()
        .is_some_and(|(e, _)| e.scheme == "http" && !e.is_local_http())
    {
        return Err(GitError::PlainHttp);
    }
    let dir = store.join(store_name(url));
    if std::fs::symlink_metadata(dir.as_std_path()).is_err() {
        // The store's directory, made through the System (gix wants its parent).
        system
            .write_atomic(&store.join("README"), STORE_README.as_bytes())
            .map_err(|e| GitError::Store {
                path: store.to_owned(),
                why: e.to_string(),
            })?;
        gix::init_bare(dir.as_std_path()).map_err(|e| GitError::Store {
            path: dir.clone(),
            why: e.to_string(),
        })?;
    }
    let repo = open_store(store, &dir)?;
    // A commit already fetched: no network.
    if let Some(id) = reference.filter(|r| is_commit_id(r)) {
        if let Ok(oid) = gix::ObjectId::from_hex(id.to_ascii_lowercase().as_bytes()) {
            if let Ok(fetched) = tree_files(&repo, oid) {
                return Ok(fetched);
            }
        }
    }
    let remote = repo
        .remote_at(url)
        .map_err(|e| GitError::NotAUrl(e.to_string()))?
        .with_fetch_tags(gix::remote::fetch::Tags::None)
        .with_refspecs(
            [
                "+refs/heads/*:refs/remotes/origin/*",
                "+refs/tags/*:refs/tags/*",
            ],
            gix::remote::Direction::Fetch,
        )
        .map_err(|e| GitError::Refspecs(e.to_string()))?;
    let outcome = if let Some((endpoint, parsed)) = http {
        let has_user_info = parsed.user().is_some();
        let mut transport = gix_transport::client::blocking_io::http::connect_http(
            super::git_http::UreqHttp::new(),
            parsed,
            gix_transport::Protocol::V2,
            false,
        );
        if !has_user_info {
            let bound = crate::http::bound_credentials_for(
                system,
                "TERRACI_POLICY_GIT_CREDENTIALS",
                &endpoint,
            );
            if let Some((username, password)) = bound {
                let account = gix::sec::identity::Account {
                    username,
                    password,
                    oauth_refresh_token: None,
                };
                gix_transport::client::TransportWithoutIO::set_identity(&mut transport, account)
                    .map_err(|e| GitError::Credentials(e.to_string()))?;
            }
        }
        receive(remote.to_connection_with_transport(transport))?
    } else {
        receive(
            remote
                .connect(gix::remote::Direction::Fetch)
                .map_err(|e| GitError::Connect(e.to_string()))?,
        )?
    };
    let refs = &outcome.ref_map.remote_refs;
    let wanted = reference.unwrap_or("HEAD");
    let candidates = [
        wanted.to_owned(),
        format!("refs/heads/{wanted}"),
        format!("refs/tags/{wanted}"),
    ];
    let found = candidates.iter().find_map(|name| {
        refs.iter().find_map(|r| {
            let (n, target, peeled) = r.unpack();
            (n == name.as_str()).then(|| peeled.or(target).map(ToOwned::to_owned))?
        })
    });
    let oid = match found {
        Some(oid) => oid,
        None if is_commit_id(wanted) => {
            gix::ObjectId::from_hex(wanted.to_ascii_lowercase().as_bytes()).map_err(|e| {
                GitError::BadCommitId {
                    wanted: wanted.to_owned(),
                    why: e.to_string(),
                }
            })?
        }
        None => return Err(GitError::NoSuchRef(wanted.to_owned())),
    };
    tree_files(&repo, oid).map_err(|source| GitError::Tree {
        wanted: wanted.to_owned(),
        oid,
        source,
    })
}

/// For an `http://` or `https://` URL: where its requests go, and the URL gix's transport
/// is built from. The transport makes every request URL from gix's serialisation of the
/// URL and sends it with ureq, so the [`crate::http::Endpoint`] of that serialisation is
/// where credentials would go; it must be the endpoint of the URL as written too, or the
/// URL is refused (`https://attacker?@git.example.com/` must not bind git.example.com's
/// credentials). `None` for any other kind of URL.
fn http_url(url: &str) -> Result<Option<(crate::http::Endpoint, gix::Url)>, GitError> {
    let Ok(parsed) = gix::url::parse(gix::bstr::BStr::new(url)) else {
        return Ok(None);
    };
    if !matches!(
        parsed.scheme,
        gix::url::Scheme::Http | gix::url::Scheme::Https
    ) {
        return Ok(None);
    }
    let ambiguous = |why: String| GitError::NotAUrl(format!("ambiguous authority: {why}"));
    let written = crate::http::Endpoint::parse(url).map_err(|e| ambiguous(e.to_string()))?;
    let serialised = parsed.to_bstring().to_string();
    let sent = crate::http::Endpoint::parse(&serialised).map_err(|e| ambiguous(e.to_string()))?;
    if !written.same_origin(&sent) {
        return Err(ambiguous(format!(
            "the transport would connect to {}, not {}",
            sent.host, written.host
        )));
    }
    Ok(Some((sent, parsed)))
}

/// The store's `config`, always terraci's own: whatever a store found on disk says
/// (`core.sshCommand`, `core.gitProxy`, `url.*.insteadOf`, includes, ...) is replaced.
const STORE_CONFIG: &str = "[core]\n\trepositoryformatversion = 0\n\tbare = true\n";

/// Files that would make gix read objects, refs or config from elsewhere: a store holding
/// one is refused, not repaired.
const REDIRECTS: [&str; 4] = ["objects/info/alternates", "commondir", "gitdir", ".git"];

/// Opens the bare repository `dir` without honouring anything in it that could run a
/// program or redirect the fetch. The store may lie in the checkout (a merge request can
/// commit one there), so its own configuration is never read: the `config` file is
/// rewritten with [`STORE_CONFIG`] first, and gix is told to ignore repository-local
/// configuration anyway. The runner's own configuration (`~/.gitconfig`,
/// `GIT_SSH_COMMAND`) still applies.
#[allow(
    clippy::disallowed_methods,
    reason = "the store is gix's own real directory (gix reads and writes it directly, not through the System); these checks must see that same file system"
)]
fn open_store(store: &Utf8Path, dir: &Utf8Path) -> Result<gix::Repository, GitError> {
    let unsafe_store = |why: String| GitError::UnsafeStore {
        path: dir.to_owned(),
        why,
    };
    for link in [store, dir] {
        let meta = std::fs::symlink_metadata(link.as_std_path())
            .map_err(|e| unsafe_store(format!("cannot inspect {link}: {e}")))?;
        if !meta.file_type().is_dir() {
            return Err(unsafe_store(format!(
                "{link} is a symlink or not a directory (expected a directory)"
            )));
        }
    }
    for redirect in REDIRECTS {
        if std::fs::symlink_metadata(dir.join(redirect).as_std_path()).is_ok() {
            return Err(unsafe_store(format!(
                "it has `{redirect}` (expected none: it would point git elsewhere)"
            )));
        }
    }
    let config = dir.join("config");
    match std::fs::remove_file(config.as_std_path()) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            return Err(unsafe_store(format!(
                "cannot replace its config (expected a file terraci can rewrite): {e}"
            )))
        }
    }
    {
        use std::io::Write as _;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(config.as_std_path())
            .and_then(|mut f| f.write_all(STORE_CONFIG.as_bytes()).map(|()| f))
            .map_err(|e| unsafe_store(format!("cannot write its config: {e}")))?;
        file.flush()
            .map_err(|e| unsafe_store(format!("cannot write its config: {e}")))?;
    }
    let options = gix::open::Options::default()
        .open_path_as_is(true)
        .with(gix::sec::Trust::Reduced)
        .filter_config_section(not_repository_local);
    gix::open_opts(dir.as_std_path(), options).map_err(|e| unsafe_store(chain(&e)))
}

/// The section filter for the store: nothing from the repository's own configuration.
fn not_repository_local(meta: &gix::config::file::Metadata) -> bool {
    meta.source.kind() != gix::config::source::Kind::Repository
}

/// The directory a `file://` or local-path git URL names (`None` for a network URL).
pub(super) fn local_path(url: &str) -> Option<std::path::PathBuf> {
    let parsed = gix::url::parse(gix::bstr::BStr::new(url)).ok()?;
    if parsed.scheme != gix::url::Scheme::File {
        return None;
    }
    let path = gix::path::from_bstr(&parsed.path).ok()?.into_owned();
    Some(std::path::absolute(&path).unwrap_or(path))
}

/// Lists the remote's refs and receives the pack, over `connection`'s transport, with
/// git's credential helpers replaced by a refusal.
fn receive<T>(
    connection: gix::remote::Connection<'_, '_, '_, T>,
) -> Result<gix::remote::fetch::Outcome, GitError>
where
    T: gix_transport::client::blocking_io::Transport,
{
    connection
        .with_credentials(|action| match action {
            gix::credentials::helper::Action::Get(_) => Err(gix::error::message(
                "the repository needs credentials: put them in TERRACI_POLICY_GIT_CREDENTIALS (https://user:token@host)",
            )
            .raise()),
            _ => Ok(None),
        })
        .prepare_fetch(gix::progress::Discard, Default::default())
        .map_err(|e| GitError::ListRefs(chain(&e)))?
        .receive(gix::progress::Discard, &AtomicBool::new(false))
        .map_err(|e| GitError::Fetch(chain(&e)))
}

/// An error and its causes on one line (`a: b: c`), each said once.
fn chain(error: &dyn std::error::Error) -> String {
    let mut parts: Vec<String> = vec![error.to_string()];
    let mut cause = error.source();
    while let Some(e) = cause {
        let text = e.to_string();
        if parts.last() != Some(&text) {
            parts.push(text);
        }
        cause = e.source();
    }
    parts.join(": ")
}

/// The commit `oid` is (or a tag points to) and the policy files of its tree.
fn tree_files(repo: &gix::Repository, oid: gix::ObjectId) -> Result<Fetched, TreeError> {
    let object = repo
        .find_object(oid)
        .map_err(|e| TreeError::NotInRepository(e.to_string()))?;
    let commit = object
        .peel_to_commit()
        .map_err(|e| TreeError::NotACommit(e.to_string()))?;
    let tree = commit
        .tree()
        .map_err(|e| TreeError::NoTree(e.to_string()))?;
    let mut recorder = gix::traverse::tree::Recorder::default();
    tree.traverse()
        .breadthfirst(&mut recorder)
        .map_err(|e| TreeError::Walk(e.to_string()))?;
    let mut out = Vec::new();
    for entry in recorder.records {
        if !entry.mode.is_blob() {
            continue;
        }
        let path = entry.filepath.to_string();
        let name = path.rsplit('/').next().unwrap_or(&path);
        if !super::sources::is_policy_file(name) {
            continue;
        }
        let blob = repo.find_object(entry.oid).map_err(|e| TreeError::Blob {
            path: path.clone(),
            why: e.to_string(),
        })?;
        out.push((path, blob.data.clone()));
    }
    out.sort();
    Ok(Fetched {
        commit: commit.id.to_string(),
        files: out,
    })
}
