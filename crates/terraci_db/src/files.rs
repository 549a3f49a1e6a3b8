//! Salsa inputs: files, modules and the project.
//!
//! Discovery and all disk reads happen outside queries (through `System`), and their
//! results are set here as inputs, so a query never reads the disk behind salsa's back.
//! The one exception is an [`UnreadText`]: a file known by its length and content hash,
//! either one the fact cache knew by its stamp (not read at all) or one discovery read
//! and whose text is let go once its module's summary is made ([`UnreadText::release`]).
//! Its text is read only if a query needs it (a diagnostic's source line), and used only
//! if it is that version still, so what a query makes of it is a function of the input
//! all the same.

use std::sync::Arc;

use camino::Utf8PathBuf;
use indexmap::IndexMap;

use crate::config::{Config, Pattern};
pub use crate::selection::{ChangeInput, Selection};

/// What a file held when it was read. Equal when the contents are: a text and an
/// [`UnreadText`] compare by length and content hash (a file `watch` reads again after a
/// save without a change is the one discovery read and let go of).
#[derive(Debug, Clone, Eq)]
pub enum FileContents {
    /// The text as read (kept as the read buffer: no copy).
    Text(String),
    /// Read, but not valid UTF-8; the position of the first bad byte (1-based).
    NotUtf8 { line: u32, column: u32 },
    /// Could not be read; the message names the IO error.
    Unreadable(String),
    /// Known by length and hash: not read (the fact cache holds the facts of the version
    /// with the file's current stamp, [`terraci_engine::facts::cache`]), or read and held only
    /// until the facts are made.
    Unread(Arc<UnreadText>),
}

/// The text of a file known by its length and content hash ([`content_hash`]). Two are
/// equal when length and hash are.
///
/// Either discovery did not read it (the fact cache knew it by its stamp), or discovery
/// read it ([`UnreadText::held`]) and the text is held until [`UnreadText::release`],
/// which the warm-up calls once the module's summary is made (at 10,000 modules the texts
/// were 27 MB of a run's peak heap, for nothing after that). A text not held is read on first
/// use, from `source`, and kept: only the files a diagnostic points into are.
pub struct UnreadText {
    pub(crate) len: u64,
    pub(crate) hash: u64,
    /// Absolute.
    path: Utf8PathBuf,
    source: Arc<TextSource>,
    text: std::sync::OnceLock<Option<String>>,
    /// What discovery read, until released.
    held: std::sync::Mutex<Option<Arc<String>>>,
}

/// A file's text: borrowed from its input, or shared with it ([`UnreadText`]).
pub enum TextRef<'a> {
    Borrowed(&'a str),
    Shared(Arc<String>),
}

impl std::ops::Deref for TextRef<'_> {
    type Target = str;

    fn deref(&self) -> &str {
        match self {
            TextRef::Borrowed(text) => text,
            TextRef::Shared(text) => text,
        }
    }
}

/// Where unread texts are read when needed: the `System` and the policy discovery reads
/// with, one for every file of a run.
pub struct TextSource {
    pub system: Arc<dyn crate::system::System>,
    pub policy: crate::system::ReadPolicy,
}

impl UnreadText {
    /// The file at `path` (absolute), to read from `source` if needed.
    pub fn new(len: u64, hash: u64, path: Utf8PathBuf, source: Arc<TextSource>) -> UnreadText {
        UnreadText {
            len,
            hash,
            path,
            source,
            text: std::sync::OnceLock::new(),
            held: std::sync::Mutex::new(None),
        }
    }

    /// A file discovery read: `text` is held until [`UnreadText::release`].
    pub(crate) fn held(text: String, path: Utf8PathBuf, source: Arc<TextSource>) -> UnreadText {
        UnreadText {
            len: text.len() as u64,
            hash: content_hash(text.as_bytes()),
            path,
            source,
            text: std::sync::OnceLock::new(),
            held: std::sync::Mutex::new(Some(Arc::new(text))),
        }
    }

    /// Lets go of the text discovery read, if it holds one.
    pub(crate) fn release(&self) {
        self.held.lock().unwrap_or_else(|e| e.into_inner()).take();
    }

    /// The text, read now if it is not held and was not read yet: `None` when it cannot
    /// be read or is no longer the version known (the file changed during the run).
    pub(crate) fn text(&self) -> Option<TextRef<'_>> {
        if let Some(text) = &*self.held.lock().unwrap_or_else(|e| e.into_inner()) {
            return Some(TextRef::Shared(text.clone()));
        }
        self.text
            .get_or_init(|| {
                let TextSource { system, policy } = &*self.source;
                let (bytes, _) = system.read_confined(&self.path, policy, true).ok()?;
                let same = bytes.len() as u64 == self.len && content_hash(&bytes) == self.hash;
                same.then(|| String::from_utf8(bytes).ok()).flatten()
            })
            .as_deref()
            .map(TextRef::Borrowed)
    }
}

impl PartialEq for UnreadText {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.hash == other.hash
    }
}

impl Eq for UnreadText {}

impl std::fmt::Debug for UnreadText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UnreadText")
            .field("len", &self.len)
            .field("hash", &self.hash)
            .finish_non_exhaustive()
    }
}

impl PartialEq for FileContents {
    fn eq(&self, other: &FileContents) -> bool {
        use FileContents::*;
        match (self, other) {
            (Text(a), Text(b)) => a == b,
            (Unread(a), Unread(b)) => a == b,
            (Text(text), Unread(known)) | (Unread(known), Text(text)) => {
                text.len() as u64 == known.len && content_hash(text.as_bytes()) == known.hash
            }
            (NotUtf8 { line, column }, NotUtf8 { line: l, column: c }) => line == l && column == c,
            (Unreadable(a), Unreadable(b)) => a == b,
            _ => false,
        }
    }
}

impl FileContents {
    /// What discovery read of the file at `path` (absolute): a text is held until
    /// released ([`UnreadText::held`]), to be read again from `source` if needed after.
    pub fn held(bytes: Vec<u8>, path: Utf8PathBuf, source: &Arc<TextSource>) -> FileContents {
        match FileContents::from_bytes(bytes) {
            FileContents::Text(text) => {
                FileContents::Unread(Arc::new(UnreadText::held(text, path, source.clone())))
            }
            other => other,
        }
    }

    pub fn from_bytes(bytes: Vec<u8>) -> FileContents {
        match String::from_utf8(bytes) {
            Ok(s) => FileContents::Text(s),
            Err(e) => {
                let valid = e.utf8_error().valid_up_to();
                let bytes = e.as_bytes();
                let line = bytes[..valid].iter().filter(|&&b| b == b'\n').count() as u32 + 1;
                let line_start = bytes[..valid]
                    .iter()
                    .rposition(|&b| b == b'\n')
                    .map_or(0, |i| i + 1);
                let column = String::from_utf8_lossy(&bytes[line_start..valid])
                    .chars()
                    .count() as u32
                    + 1;
                FileContents::NotUtf8 { line, column }
            }
        }
    }

    /// The text; for an [`UnreadText`], read now if not held (see there).
    pub fn text(&self) -> Option<TextRef<'_>> {
        match self {
            FileContents::Text(t) => Some(TextRef::Borrowed(t)),
            FileContents::Unread(u) => u.text(),
            _ => None,
        }
    }

    /// Lets go of a text discovery read and holds ([`UnreadText::release`]).
    pub fn release(&self) {
        if let FileContents::Unread(u) = self {
            u.release();
        }
    }

    /// Length and content hash of the text, without reading an unread one.
    pub fn identity(&self) -> Option<(u64, u64)> {
        match self {
            FileContents::Text(t) => Some((t.len() as u64, content_hash(t.as_bytes()))),
            FileContents::Unread(u) => Some((u.len, u.hash)),
            _ => None,
        }
    }
}

/// A file's content identity as git knows it: the id of the blob git's index holds for a
/// tracked file whose index entry is clean (its stat data matches the file's and the
/// entry is not racy, `terraci_vcs::IndexIdentities`). A run takes it from the index
/// without reading the file; the fact cache and the run record keep it beside the
/// length and hash of the text, so a fresh clone (new stamps, same contents) finds
/// them. SHA-1 repositories only: a SHA-256 one gives no blob ids.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BlobId(pub [u8; 20]);

impl std::fmt::Debug for BlobId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

/// The 64-bit hash of a file's bytes that the fact cache keys on (and checksums its
/// own files with).
pub fn content_hash(bytes: &[u8]) -> u64 {
    use std::hash::Hasher as _;
    let mut h = hasher();
    h.write(bytes);
    h.finish()
}

#[allow(deprecated)]
pub fn hasher() -> std::hash::SipHasher {
    std::hash::SipHasher::new_with_keys(0x7465_7272_6163_6921, 0x6661_6374_7321)
}

/// What role a file plays in its module.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FileKind {
    /// `*.tf` / `*.tofu`
    Native,
    /// `*.tf.json` / `*.tofu.json`
    Json,
    /// `terraform.tfvars`, `*.auto.tfvars`
    VarsNative,
    /// `terraform.tfvars.json`, `*.auto.tfvars.json`
    VarsJson,
}

impl FileKind {
    /// The kind of a file by its name, or `None` if terraci does not read it.
    pub fn of(name: &str) -> Option<FileKind> {
        if name.starts_with('.') {
            return None;
        }
        if name.ends_with(".tf") || name.ends_with(".tofu") {
            Some(FileKind::Native)
        } else if name.ends_with(".tf.json") || name.ends_with(".tofu.json") {
            Some(FileKind::Json)
        } else if name == "terraform.tfvars" || name.ends_with(".auto.tfvars") {
            Some(FileKind::VarsNative)
        } else if name == "terraform.tfvars.json" || name.ends_with(".auto.tfvars.json") {
            Some(FileKind::VarsJson)
        } else {
            None
        }
    }

    pub fn is_vars(self) -> bool {
        matches!(self, FileKind::VarsNative | FileKind::VarsJson)
    }
}

#[salsa::input(debug)]
pub struct File {
    /// Path relative to the project dir, `/`-separated.
    #[returns(ref)]
    pub path: Utf8PathBuf,
    #[returns(copy)]
    pub kind: FileKind,
    #[returns(ref)]
    pub contents: FileContents,
}

/// Where a module sits in the pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleInfo {
    /// Path relative to the project dir with `/` separators.
    pub id: String,
    /// Segment name -> path part, in pattern order (empty for libraries above depth N).
    pub components: IndexMap<String, String>,
    /// For a module deeper than the pattern: the rest of its path.
    pub submodule: Option<String>,
    /// Nearest module directory above this one, if any.
    pub parent: Option<String>,
    pub role: Role,
}

impl ModuleInfo {
    /// A root module: gets jobs, is a node of the graph, can own a referenced state.
    pub fn is_root(&self) -> bool {
        self.role == Role::Root
    }
}

/// What a directory with Terraform files is to terraci.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    /// At or below the pattern depth: a module.
    Root,
    /// Under a `library_modules.paths` entry: never a target, never a state candidate.
    Library,
    /// Above the pattern depth and not listed as a library: not a module, kept only so
    /// that `module` calls through it are followed (uses-library links).
    Plain,
}

#[salsa::input(debug)]
pub struct Module {
    #[returns(ref)]
    pub info: ModuleInfo,
    /// Terraform and tfvars files, sorted by name, after the `.tofu`-shadows-`.tf` rule.
    #[returns(ref)]
    pub files: Vec<File>,
}

/// Evaluation settings from the command line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EvalSettings {
    /// `--workspace` (default `"default"`).
    pub workspace: String,
    /// `--var-file` contents, in order: (display path, text).
    pub var_files: Vec<(String, String)>,
    /// `--var NAME=VALUE`, in order.
    pub vars: Vec<(String, String)>,
}

#[salsa::input(debug)]
pub struct Project {
    /// Absolute project directory.
    #[returns(ref)]
    pub root: Utf8PathBuf,
    #[returns(ref)]
    pub config: Arc<Config>,
    #[returns(ref)]
    pub pattern: Pattern,
    /// Every discovered module, sorted by id.
    #[returns(ref)]
    pub modules: Vec<Module>,
    #[returns(ref)]
    pub eval_settings: EvalSettings,
    /// Who owns which state: a copy of [`terraci_engine::resolve::identity_index`], kept by
    /// [`terraci_engine::resolve::sync_owners`] after every change of inputs. Matching reads this
    /// input instead of the query, so that an edit which leaves every state identity as
    /// it was does not make every module's resolution depend on a changed (low
    /// durability) value: only the edited module's resolution is verified deeply.
    /// `None` until first synced: a load whose every resolution comes from the summary
    /// cache never builds the index, and matching then reads it through
    /// [`terraci_engine::resolve::owners_index`].
    #[returns(ref)]
    pub owners: Option<Arc<crate::owners::IdentityIndex>>,
}

/// A file that an expression reads (`file()`, `templatefile()`, `fileexists()`), created
/// lazily the first time a query asks for it (salsa's on-demand input pattern). Reading
/// its contents records a dependency, so a later [`crate::db::Database::refresh_extra`]
/// that sees a change re-runs exactly the evaluations that read it.
#[salsa::input(debug)]
pub struct ExtraFile {
    /// Absolute, normalised.
    #[returns(ref)]
    pub path: Utf8PathBuf,
    /// `None`: no such file (or a directory).
    #[returns(ref)]
    pub contents: Option<FileContents>,
}

/// The files below a directory (`fileset()`), `/`-separated relative paths, sorted;
/// created lazily like [`ExtraFile`].
#[salsa::input(debug)]
pub struct ExtraDir {
    /// Absolute, normalised.
    #[returns(ref)]
    pub path: Utf8PathBuf,
    #[returns(ref)]
    pub files: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::system::{MemorySystem, ReadPolicy, System as _};

    #[test]
    fn a_held_text_once_released_is_read_again_and_only_as_the_version_known() {
        let fs = MemorySystem::new();
        fs.write_file("/p/a.tf", "locals {}\n");
        fs.write_file("/p/b.tf", "locals {}\n");
        let source = Arc::new(TextSource {
            system: fs.shared(),
            policy: ReadPolicy::new(&fs, "/p".into(), crate::system::DEFAULT_MAX_FILE_SIZE),
        });
        let held = |path: &str| FileContents::held(b"locals {}\n".to_vec(), path.into(), &source);
        let (a, b) = (held("/p/a.tf"), held("/p/b.tf"));
        // What was read is equal to the same text read again (as `watch` reads a file
        // saved without a change), and to nothing else.
        assert_eq!(a, FileContents::Text("locals {}\n".into()));
        assert_ne!(a, FileContents::Text("locals { }\n".into()));
        fs.take_reads();
        assert_eq!(a.text().as_deref(), Some("locals {}\n"));
        assert!(fs.take_reads().is_empty(), "held: not read again");
        a.release();
        b.release();
        fs.write_file("/p/b.tf", "locals { x = 1 }\n");
        assert_eq!(a.text().as_deref(), Some("locals {}\n"));
        assert_eq!(a.text().as_deref(), Some("locals {}\n"));
        assert_eq!(fs.take_reads(), ["/p/a.tf"], "read again once, then kept");
        // A file changed since it was read never stands in for the version its facts
        // came from.
        assert_eq!(b.text().as_deref(), None);
    }
}
