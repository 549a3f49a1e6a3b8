//! The persistent fact cache: per-file facts from earlier runs, keyed by content.
//!
//! Input: `facts.bin` in the cache directory (`.terraci/cache/` of the project unless
//! `--cache-dir`; `--no-cache` skips it), read once through `System` before any query
//! runs and set as the [`FactCache`] input. Output: for a file whose path, kind, length
//! and content hash match an entry, [`cached_facts`] decodes the stored [`FileFacts`]
//! instead of parsing; [`save`] writes the facts of the current files back when anything
//! was new.
//!
//! Why a per-file cache of our own rather than salsa's persistence: the only expensive
//! query is parsing plus fact extraction (evaluation, resolution and rendering of 10,000
//! modules take a fraction of it), facts are small, span-free values, and a file's facts
//! depend on nothing but its text. A cache of exactly that is one flat file, is read with
//! one `read`, needs no serde support from every memo type, and stays valid across every
//! change elsewhere in the pipeline (a new module, a changed `.terraci.yaml`, a new
//! version of the evaluator), where a serialised salsa database would be all or nothing.
//!
//! Soundness: an entry is used only if path, kind, length and a 64-bit hash of the bytes
//! all match, and it is decoded against a format that names its own version and the
//! terraci version; the whole file ends in a CRC-32. An entry also holds the stamp of
//! the file it was made from (device, inode, length, modification and change time in ns,
//! taken on the open file before reading), when that version had settled before the run
//! that read it began ([`terraci_db::system::Stamp::settled_before`], as the run record's
//! stamps): discovery does not read a file whose `lstat` gives that stamp still
//! ([`Entries::unread`]), and its input is the entry's length and hash
//! ([`terraci_db::files::UnreadText`]). A write to the file moves its change time, so an
//! equal stamp is the version the facts were made from; a symlink put in its place has
//! its own inode. A corrupt, truncated or foreign
//! file is ignored with a notice and rewritten. Writes go to a temp file that is renamed
//! over the old one, so concurrent runs each leave a complete cache (the last one wins).

// The codec is shared with the stores above the engine (the run record, the repository
// fingerprint): its reader's error is `()`, since a corrupt file is all there is to say
// (the file is then ignored and rewritten), and its `len` reads a count, not a size.
#![allow(clippy::result_unit_err, clippy::len_without_is_empty)]

use std::sync::Arc;

use camino::{Utf8Path, Utf8PathBuf};

use crate::facts::{
    AttrExpr, AttrExprData, BackendFact, FileFacts, ModuleCallFact, RemoteStateFact, VariableFact,
};
use terraci_db::db::Db;
use terraci_db::diagnostic::{Anchor, Diagnostic, ItemPath, Severity};
use terraci_db::files::{File, FileContents, FileKind};
use terraci_db::syntax::{
    BinaryOp, Expr, ExprKind, ForExpr, Name, NodeId, Num, ObjectKey, TemplatePart, Traverser,
    UnaryOp,
};
use terraci_db::system::System;

const MAGIC: &[u8; 16] = b"terraci-facts\0\0\0";
/// Bump when the encoding of [`FileFacts`] changes, or the facts a text gives (a parser
/// that accepts more).
const FORMAT: u32 = 6;
const FILE_NAME: &str = "facts.bin";
/// The summary cache `crate::resolve::summary` keeps beside the facts.
pub(crate) const SUMMARY_FILE_NAME: &str = "summaries.bin";
/// The run record `terraci::replay` keeps beside the facts (its `FILE_NAME`; a test
/// checks the two agree).
pub const RUN_RECORD_FILE: &str = "run.bin";

/// Whether `name` is a run record's file name: `run.bin` (`generate`'s) or
/// `run-<command>.bin` (`terraci::replay` names them; a test checks the two agree).
pub fn is_record_name(name: &str) -> bool {
    name == RUN_RECORD_FILE
        || name
            .strip_prefix("run-")
            .and_then(|n| n.strip_suffix(".bin"))
            .is_some_and(|c| {
                !c.is_empty() && c.bytes().all(|b| b.is_ascii_lowercase() || b == b'-')
            })
}

/// Where the cache lives and whether to use it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheSettings {
    pub dir: Utf8PathBuf,
}

impl CacheSettings {
    /// `None` with `--no-cache`; else `--cache-dir` or `<project>/.terraci/cache`.
    pub fn new(root: &Utf8Path, no_cache: bool, dir: Option<&Utf8Path>) -> Option<Self> {
        if no_cache {
            return None;
        }
        let dir = match dir {
            Some(d) if d.is_absolute() => d.to_owned(),
            Some(d) => root.join(d),
            None => root.join(".terraci/cache"),
        };
        Some(CacheSettings { dir })
    }

    fn file(&self) -> Utf8PathBuf {
        self.dir.join(FILE_NAME)
    }

    /// Refuses a cache dir that is not terraci's own: the project directory or one
    /// above it, or a directory holding anything terraci does not write there (the fact
    /// cache, the run record, their temp files and a `.gitignore` of `*`). Writing the
    /// cache replaces `.gitignore` with `*`: in the project dir that hid every module
    /// from later runs.
    pub fn check(&self, system: &dyn System, root: &Utf8Path) -> Result<(), CacheDirError> {
        let real = |p: &Utf8Path| system.canonicalize(p).unwrap_or_else(|_| p.to_owned());
        let (dir, project) = (real(&self.dir), real(root));
        if project.starts_with(&dir) {
            return Err(CacheDirError::HoldsProject(self.dir.clone()));
        }
        let Ok(entries) = system.read_dir(&self.dir) else {
            // Missing: created on the first write.
            return Ok(());
        };
        let ours = |name: &str| {
            let own = |f: &str| {
                [FILE_NAME, SUMMARY_FILE_NAME, ".gitignore"].contains(&f) || is_record_name(f)
            };
            // A temp file is `.<name>.<suffix>.tmp`.
            own(name)
                || name
                    .strip_prefix('.')
                    .and_then(|n| n.strip_suffix(".tmp"))
                    .is_some_and(|n| n.match_indices('.').any(|(i, _)| own(&n[..i])))
        };
        for entry in entries {
            let foreign = !ours(&entry.name)
                || !matches!(entry.kind, terraci_db::system::EntryKind::File)
                || (entry.name == ".gitignore"
                    && system.read(&self.dir.join(".gitignore")).ok().as_deref() != Some(b"*\n"));
            if foreign {
                return Err(CacheDirError::Foreign {
                    dir: self.dir.clone(),
                    entry: terraci_db::escape::printable(&entry.name).into_owned(),
                });
            }
        }
        Ok(())
    }
}

/// Why a cache dir is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CacheDirError {
    #[error(
        "the cache dir `{0}` is the project directory or holds it; \
         pick a directory of its own (default .terraci/cache)"
    )]
    HoldsProject(Utf8PathBuf),
    /// `entry` is printable (control characters escaped).
    #[error(
        "the cache dir `{dir}` holds `{entry}`, which terraci did not write; \
         pick a directory of its own (default .terraci/cache)"
    )]
    Foreign { dir: Utf8PathBuf, entry: String },
}

impl CacheDirError {
    /// The process exit code of a run that stops here.
    pub fn exit_code(&self) -> u8 {
        terraci_db::exit::ERROR
    }
}

/// One cached file: what it was, and where its path and encoded facts are in the blob.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    path: std::ops::Range<usize>,
    kind: u8,
    len: u64,
    hash: u64,
    /// The stamp of the version read, if it had settled before that run began.
    stamp: Option<terraci_db::system::Stamp>,
    payload: std::ops::Range<usize>,
}

/// The loaded cache: one entry per file, over one shared blob. The entries are in path
/// order (the cache is written so, and a file that is not is refused), so a path is
/// found by binary search over the paths in the blob, with no copy of them.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Entries {
    blob: Vec<u8>,
    entries: Vec<Entry>,
}

impl Entries {
    fn get(&self, path: &str) -> Option<&Entry> {
        let i = self
            .entries
            .binary_search_by(|e| self.blob[e.path.clone()].cmp(path.as_bytes()))
            .ok()?;
        Some(&self.entries[i])
    }

    /// The contents of the file at `path` (project-relative; `abs` absolute) as an
    /// [`terraci_db::files::UnreadText`] read from `source` if needed, if the entry for it
    /// has a stamp and the file's `lstat` stamp now (`now`, asked only then) is that
    /// stamp still, with the stamp: its text need not be read.
    pub fn unread(
        &self,
        path: &str,
        kind: FileKind,
        abs: &Utf8Path,
        source: &Arc<terraci_db::files::TextSource>,
        now: impl FnOnce() -> Option<terraci_db::system::Stamp>,
    ) -> Option<(FileContents, terraci_db::system::Stamp)> {
        let entry = self.get(path)?;
        let stamp = entry.stamp?;
        if entry.kind != kind_code(kind) || now() != Some(stamp) {
            return None;
        }
        let text = terraci_db::files::UnreadText::new(
            entry.len,
            entry.hash,
            abs.to_owned(),
            source.clone(),
        );
        Some((FileContents::Unread(Arc::new(text)), stamp))
    }
}

/// The cache as a salsa input: [`crate::facts::file_facts`] reads it.
#[salsa::input(singleton, debug)]
pub(crate) struct FactCache {
    #[returns(ref)]
    pub(crate) entries: Arc<Entries>,
}

/// The cached facts of `file`, if an entry matches its current contents exactly.
pub(crate) fn cached_facts(db: &dyn Db, file: File) -> Option<FileFacts> {
    let cache = FactCache::try_get(db)?;
    let entries = cache.entries(db);
    let entry = entries.get(file.path(db).as_str())?;
    let (len, hash) = file.contents(db).identity()?;
    if entry.kind != kind_code(file.kind(db)) || entry.len != len || entry.hash != hash {
        return None;
    }
    let mut r = Reader {
        b: &entries.blob[entry.payload.clone()],
        i: 0,
        file,
    };
    let facts = r.facts().ok()?;
    r.at_end().then_some(facts)
}

/// Reads the cache file. `Err` is a notice for the user: the file was there but unusable.
pub fn load(system: &dyn System, settings: &CacheSettings) -> Result<Entries, String> {
    let path = settings.file();
    let Ok(bytes) = system.read(&path) else {
        // No cache yet: nothing to say.
        return Ok(Entries::default());
    };
    parse(bytes, &binary_id(system))
        .map_err(|why| format!("ignoring the fact cache `{path}` ({why}); rebuilding it"))
}

/// Starts a file of terraci's own (this cache, the run record of [`terraci::replay`]):
/// `magic`, the layout's `format` and the terraci version.
pub fn begin_file(magic: &[u8; 16], format: u64, capacity: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(capacity);
    out.extend_from_slice(magic);
    put_u64(&mut out, format);
    put_str(&mut out, env!("CARGO_PKG_VERSION"));
    out
}

/// Ends a file begun with [`begin_file`], written in pieces: the checksum of `parts` in
/// order (the same as of their concatenation), to write after them.
pub fn seal_parts(parts: &[&[u8]]) -> [u8; 8] {
    let mut sum = crc32fast::Hasher::new();
    for part in parts {
        sum.update(part);
    }
    sealed(sum)
}

/// The trailer of a file: its CRC-32 (a check against damage and truncation, not
/// against tampering: the cache directory is the user's), as eight bytes.
fn sealed(sum: crc32fast::Hasher) -> [u8; 8] {
    u64::from(sum.finalize()).to_le_bytes()
}

/// Checks a file written by [`begin_file`] and [`seal_parts`]: magic (`what` names the kind of
/// file when it is wrong), checksum, format and terraci version. Returns a reader over
/// the body after the header (without the checksum).
pub fn open_file<'a>(
    blob: &'a [u8],
    magic: &[u8; 16],
    format: u64,
    what: &'static str,
) -> Result<Reader<'a, ()>, &'static str> {
    if blob.len() < magic.len() + 8 || &blob[..magic.len()] != magic {
        return Err(what);
    }
    let (body, sum) = blob.split_at(blob.len() - 8);
    let mut r = Reader {
        b: body,
        i: magic.len(),
        file: (),
    };
    // The format first: another layout may end in another kind of checksum.
    let format_found = r.u64().map_err(|_| "truncated")?;
    let version = r.string().map_err(|_| "truncated")?;
    if format_found != format || version != env!("CARGO_PKG_VERSION") {
        return Err("written by another version of terraci");
    }
    if seal_parts(&[body]) != sum {
        return Err("corrupt or truncated");
    }
    Ok(r)
}

/// The running binary, as the cache's key: facts are what this build's parser and
/// lowering make of a text, and a rebuilt binary (another lowering under the same version
/// and format number) must not read an older build's facts. The stamp of the executable,
/// as the run record keys on it; empty where the system cannot stamp it.
pub(crate) fn binary_id(system: &dyn System) -> Vec<u8> {
    let mut out = Vec::new();
    if let Some(s) = system.program_stamp() {
        put_stamp(&mut out, &s);
    }
    out
}

fn parse(blob: Vec<u8>, binary: &[u8]) -> Result<Entries, &'static str> {
    let mut r = open_file(&blob, MAGIC, u64::from(FORMAT), "not a terraci fact cache")?;
    if r.bytes().map_err(|_| "truncated")? != binary {
        return Err("written by another build of terraci");
    }
    let entries = read_entries(&mut r, |r, last: Option<&Entry>| {
        let path = r.sorted_key(last.map(|e| &e.path))?;
        let kind = r.u8()?;
        let len = r.u64()?;
        let hash = r.fixed_u64()?;
        let stamp = r.opt_with(Reader::stamp)?;
        let payload = r.range()?;
        Ok(Entry {
            path,
            kind,
            len,
            hash,
            stamp,
            payload,
        })
    })?;
    Ok(Entries { blob, entries })
}

/// How many stale entries a cache may keep rather than be rewritten.
const STALE_LIMIT: usize = 32;

/// Whether a cache of `old` entries (`None`: there is none) is rewritten to hold `new`
/// entries, `stale` of which it does not hold as they are now. Not for a few: a
/// merge request's push changes a few files, and rewriting megabytes of cache for them
/// took longer than the next run spends reading and parsing those files again (which
/// is all a stale entry costs: it is never used for a file that does not match it).
/// Entries of files that are gone count as stale too (as many as the cache shrinks by).
pub(crate) fn worth_rewriting(old: Option<usize>, new: usize, stale: usize) -> bool {
    let Some(old) = old.filter(|&n| n > 0) else {
        return new > 0;
    };
    let gone = old.saturating_sub(new);
    stale + gone > STALE_LIMIT.min(old / 2)
}

/// The entries of a file of terraci's own: their count, then each as `entry` reads it
/// (given the entry before it).
pub(crate) fn read_entries<T>(
    r: &mut Reader<'_, ()>,
    mut entry: impl FnMut(&mut Reader<'_, ()>, Option<&T>) -> R<T>,
) -> Result<Vec<T>, &'static str> {
    let count = r.u64().map_err(|_| "truncated")? as usize;
    let mut entries = Vec::with_capacity(count.min(1 << 20));
    for _ in 0..count {
        let next = entry(r, entries.last()).map_err(|()| "corrupt entry")?;
        entries.push(next);
    }
    Ok(entries)
}

/// Writes the facts of `files` (project-relative path and input, sorted by path) unless
/// the cache already holds exactly these files with these contents and stamps; `settled`
/// holds the stamps of the versions read that had settled before the run began (the
/// others are stored without one, and are read again next time).
///
/// Written as it is made: an entry whose file is unchanged is the old cache's bytes, and
/// everything goes through a buffer of about a megabyte. The cache (13 MB at 10,000
/// modules) is never held whole, beside the old one or beside the pipeline being built.
pub fn save(
    db: &dyn Db,
    system: &dyn System,
    settings: &CacheSettings,
    files: &[(&str, File)],
    settled: &rustc_hash::FxHashMap<&str, terraci_db::system::Stamp>,
) -> std::io::Result<()> {
    debug_assert!(files.is_sorted_by(|a, b| a.0 < b.0), "files sorted by path");
    let old = FactCache::try_get(db).map(|c| c.entries(db).clone());
    // (path, input, length, hash, stamp); an unread file's identity is the entry's.
    type Cacheable<'a> = (&'a str, File, u64, u64, Option<terraci_db::system::Stamp>);
    let cacheable: Vec<Cacheable<'_>> = files
        .iter()
        .filter_map(|&(p, f)| {
            let (len, hash) = f.contents(db).identity()?;
            Some((p, f, len, hash, settled.get(p).copied()))
        })
        .collect();
    // Each file's old entry if it holds: both lists are sorted by path, so one pass
    // pairs them (a binary search per file cost a tenth of the writer's time).
    let mut at = 0;
    let olds: Vec<Option<&Entry>> = cacheable
        .iter()
        .map(|&(path, file, len, hash, _)| {
            let o = old.as_ref()?;
            let path_of = |e: &Entry| &o.blob[e.path.clone()];
            while o
                .entries
                .get(at)
                .is_some_and(|e| path_of(e) < path.as_bytes())
            {
                at += 1;
            }
            let e = o
                .entries
                .get(at)
                .filter(|e| path_of(e) == path.as_bytes())?;
            (e.kind == kind_code(file.kind(db)) && e.len == len && e.hash == hash).then_some(e)
        })
        .collect();
    // An entry is stale also when only its stamp moved: the next run reads that file.
    let stale = cacheable
        .iter()
        .zip(&olds)
        .filter(|(c, old)| !old.is_some_and(|e| e.stamp == c.4))
        .count();
    if !worth_rewriting(
        old.as_ref().map(|o| o.entries.len()),
        cacheable.len(),
        stale,
    ) {
        return Ok(());
    }
    let blob = old.as_ref().map_or(&[][..], |o| &o.blob[..]);
    // A `.gitignore` of `*` keeps the cache out of `git status` and so out of
    // `--changed-only` (as pytest and ruff do with their caches).
    system.write_atomic(&settings.dir.join(".gitignore"), b"*\n")?;
    system.replace_streamed(&settings.file(), &mut |emit| {
        let mut out = Stream::new(emit);
        out.own(|head| {
            head.extend_from_slice(&begin_file(MAGIC, u64::from(FORMAT), 64));
            put_bytes(head, &binary_id(system));
            put_u64(head, cacheable.len() as u64);
        })?;
        let mut payload = Vec::new();
        for (&(path, file, len, hash, stamp), old) in cacheable.iter().zip(&olds) {
            let reused = old.map(|e| &blob[e.payload.clone()]);
            if reused.is_none() {
                payload.clear();
                write_facts(&mut payload, crate::facts::file_facts(db, file));
            }
            let facts = reused.unwrap_or(&payload);
            out.own(|b| {
                put_str(b, path);
                b.push(kind_code(file.kind(db)));
                put_u64(b, len);
                b.extend_from_slice(&hash.to_le_bytes());
                put_opt(b, &stamp, put_stamp);
                put_u64(b, facts.len() as u64);
                b.extend_from_slice(facts);
            })?;
        }
        out.finish()
    })
}

/// A file written as it is made, through a buffer of about a megabyte (an old entry's
/// bytes are copied into it too: writing them on their own took two `write` calls per
/// entry, 60,000 at 10,000 modules), the checksum of everything last.
pub(crate) struct Stream<'a> {
    emit: &'a mut terraci_db::system::Sink<'a>,
    buffer: Vec<u8>,
    sum: crc32fast::Hasher,
}

impl<'a> Stream<'a> {
    const BUFFER: usize = 1 << 20;

    pub(crate) fn new(emit: &'a mut terraci_db::system::Sink<'a>) -> Self {
        Stream {
            emit,
            buffer: Vec::with_capacity(Self::BUFFER + Self::BUFFER / 4),
            sum: crc32fast::Hasher::new(),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if !self.buffer.is_empty() {
            self.sum.update(&self.buffer);
            (self.emit)(&self.buffer)?;
            self.buffer.clear();
        }
        Ok(())
    }

    /// Appends what `write` writes.
    pub(crate) fn own(&mut self, write: impl FnOnce(&mut Vec<u8>)) -> std::io::Result<()> {
        write(&mut self.buffer);
        if self.buffer.len() >= Self::BUFFER {
            self.flush()?;
        }
        Ok(())
    }

    /// The rest of the buffer, then the checksum ([`seal_parts`] of all of it).
    pub(crate) fn finish(mut self) -> std::io::Result<()> {
        self.flush()?;
        let sum = sealed(self.sum);
        (self.emit)(&sum)
    }
}

/// Sets `entries` (what [`load`] gave) as the cache `db` reads.
pub fn attach(db: &terraci_db::db::Database, entries: Arc<Entries>) {
    // HIGH: the cache never changes while the database lives, and every `file_facts`
    // reads it; at the default LOW, every memo of the project would depend on a LOW
    // input and be walked on each later edit (watch) instead of checked in O(1).
    let _singleton = FactCache::builder(entries)
        .durability(salsa::Durability::HIGH)
        .new(db);
}

fn kind_code(kind: FileKind) -> u8 {
    match kind {
        FileKind::Native => 0,
        FileKind::Json => 1,
        FileKind::VarsNative => 2,
        FileKind::VarsJson => 3,
    }
}

/// SipHash with fixed keys: deterministic across runs of one build. A different hash in
/// another build only turns hits into misses; the format version guards the rest.
pub(crate) use terraci_db::files::content_hash;

// ---- encoding: LEB128 integers, length-prefixed strings, one tag byte per variant ----

pub fn put_u64(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

pub fn put_str(out: &mut Vec<u8>, s: &str) {
    put_bytes(out, s.as_bytes());
}

/// Length-prefixed bytes.
pub fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_u64(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn put_strs(out: &mut Vec<u8>, items: &[Name]) {
    put_u64(out, items.len() as u64);
    for s in items {
        put_str(out, s);
    }
}

/// A file's stamp, as the run record and the repository's fingerprint hold it.
pub fn put_stamp(out: &mut Vec<u8>, s: &terraci_db::system::Stamp) {
    for v in [s.dev, s.ino, s.len, s.mtime_ns as u64, s.ctime_ns as u64] {
        put_u64(out, v);
    }
}

pub fn put_opt<T>(out: &mut Vec<u8>, v: &Option<T>, f: impl FnOnce(&mut Vec<u8>, &T)) {
    match v {
        None => out.push(0),
        Some(x) => {
            out.push(1);
            f(out, x);
        }
    }
}

fn write_facts(out: &mut Vec<u8>, f: &FileFacts) {
    let named = |out: &mut Vec<u8>, items: &[(Name, AttrExpr)]| {
        put_u64(out, items.len() as u64);
        for (name, e) in items {
            put_str(out, name);
            write_attr(out, e);
        }
    };
    named(out, &f.locals);
    put_u64(out, f.variables.len() as u64);
    for v in &f.variables {
        put_str(out, &v.name);
        put_opt(out, &v.default, write_attr);
        put_opt(out, &v.type_constraint, write_expr);
    }
    put_opt(out, &f.backend, |out, b| {
        put_str(out, &b.kind);
        write_attr(out, &b.config);
    });
    put_u64(out, f.remote_states.len() as u64);
    for r in &f.remote_states {
        put_str(out, &r.name);
        for slot in [&r.backend, &r.config, &r.workspace, &r.for_each, &r.count] {
            put_opt(out, slot, write_attr);
        }
    }
    put_u64(out, f.module_calls.len() as u64);
    for m in &f.module_calls {
        put_str(out, &m.name);
        for slot in [&m.source, &m.count, &m.for_each] {
            put_opt(out, slot, write_attr);
        }
        named(out, &m.arguments);
    }
    named(out, &f.tfvars);
    put_u64(out, f.diagnostics.len() as u64);
    for d in &f.diagnostics {
        write_diagnostic_head(out, d);
        // Facts only ever anchor into their own file.
        put_opt(out, &d.anchor, |o, a| {
            write_item(o, &a.item);
            put_u64(o, a.node.0.into());
        });
    }
}

/// A diagnostic up to its message: severity, code, module, file, line, column, message.
pub(crate) fn write_diagnostic_head(out: &mut Vec<u8>, d: &Diagnostic) {
    out.push(match d.severity {
        Severity::Error => 0,
        Severity::Warning => 1,
        Severity::Info => 2,
    });
    put_str(out, d.code.as_str());
    put_opt(out, &d.module, |o, s| put_str(o, s));
    put_opt(out, &d.file, |o, s| put_str(o, s));
    put_opt(out, &d.line, |o, &n| put_u64(o, n.into()));
    put_opt(out, &d.column, |o, &n| put_u64(o, n.into()));
    put_str(out, &d.message);
}

pub(crate) fn write_item(out: &mut Vec<u8>, item: &ItemPath) {
    put_strs(out, &item.block);
    put_strs(out, &item.attr);
}

fn write_attr(out: &mut Vec<u8>, a: &AttrExpr) {
    write_expr(out, &a.expr);
    write_item(out, &a.item);
}

fn write_expr(out: &mut Vec<u8>, e: &Expr) {
    put_u64(out, e.id.0.into());
    match &e.kind {
        ExprKind::Null => out.push(0),
        ExprKind::Bool(b) => out.push(if *b { 2 } else { 1 }),
        ExprKind::Number(n) => {
            out.push(3);
            out.extend_from_slice(&n.get().to_bits().to_le_bytes());
        }
        ExprKind::String(s) => {
            out.push(4);
            put_str(out, s);
        }
        ExprKind::Template(parts) => {
            out.push(5);
            write_parts(out, parts);
        }
        ExprKind::Array(items) => {
            out.push(6);
            write_exprs(out, items);
        }
        ExprKind::Object(entries) => {
            out.push(7);
            put_u64(out, entries.len() as u64);
            for (k, v) in entries {
                match k {
                    ObjectKey::Ident(s) => {
                        out.push(0);
                        put_str(out, s);
                    }
                    ObjectKey::Expr(k) => {
                        out.push(1);
                        write_expr(out, k);
                    }
                }
                write_expr(out, v);
            }
        }
        ExprKind::Variable(s) => {
            out.push(8);
            put_str(out, s);
        }
        ExprKind::Traversal(root, ops) => {
            out.push(9);
            write_expr(out, root);
            put_u64(out, ops.len() as u64);
            for op in ops {
                match op {
                    Traverser::Attr(s) => {
                        out.push(0);
                        put_str(out, s);
                    }
                    Traverser::Index(i) => {
                        out.push(1);
                        write_expr(out, i);
                    }
                    Traverser::LegacyIndex(n) => {
                        out.push(2);
                        put_u64(out, *n);
                    }
                    Traverser::AttrSplat => out.push(3),
                    Traverser::FullSplat => out.push(4),
                }
            }
        }
        ExprKind::FuncCall(call) => {
            out.push(10);
            put_str(out, &call.name);
            write_exprs(out, &call.args);
            out.push(u8::from(call.expand_final));
        }
        ExprKind::Conditional(c, t, f) => {
            out.push(11);
            write_expr(out, c);
            write_expr(out, t);
            write_expr(out, f);
        }
        ExprKind::Unary(op, x) => {
            out.push(12);
            out.push(match op {
                UnaryOp::Neg => 0,
                UnaryOp::Not => 1,
            });
            write_expr(out, x);
        }
        ExprKind::Binary(op, l, r) => {
            out.push(13);
            out.push(BINARY.iter().position(|b| b == op).expect("listed") as u8);
            write_expr(out, l);
            write_expr(out, r);
        }
        ExprKind::For(f) => {
            out.push(14);
            put_opt(out, &f.key_var, |o, s| put_str(o, s));
            put_str(out, &f.value_var);
            write_expr(out, &f.collection);
            put_opt(out, &f.key_expr, write_expr);
            write_expr(out, &f.value_expr);
            put_opt(out, &f.cond, write_expr);
            out.push(u8::from(f.grouping));
        }
        ExprKind::Paren(x) => {
            out.push(15);
            write_expr(out, x);
        }
    }
}

const BINARY: [BinaryOp; 13] = [
    BinaryOp::Eq,
    BinaryOp::NotEq,
    BinaryOp::LessEq,
    BinaryOp::GreaterEq,
    BinaryOp::Less,
    BinaryOp::Greater,
    BinaryOp::Plus,
    BinaryOp::Minus,
    BinaryOp::Mul,
    BinaryOp::Div,
    BinaryOp::Mod,
    BinaryOp::And,
    BinaryOp::Or,
];

fn write_exprs(out: &mut Vec<u8>, items: &[Expr]) {
    put_u64(out, items.len() as u64);
    for e in items {
        write_expr(out, e);
    }
}

fn write_parts(out: &mut Vec<u8>, parts: &[TemplatePart]) {
    put_u64(out, parts.len() as u64);
    for p in parts {
        match p {
            TemplatePart::Literal(s) => {
                out.push(0);
                put_str(out, s);
            }
            TemplatePart::Interpolation(e) => {
                out.push(1);
                write_expr(out, e);
            }
            TemplatePart::If {
                cond,
                then,
                otherwise,
            } => {
                out.push(2);
                write_expr(out, cond);
                write_parts(out, then);
                write_parts(out, otherwise);
            }
            TemplatePart::For {
                key_var,
                value_var,
                collection,
                body,
            } => {
                out.push(3);
                put_opt(out, key_var, |o, s| put_str(o, s));
                put_str(out, value_var);
                write_expr(out, collection);
                write_parts(out, body);
            }
        }
    }
}

/// Decoding; `F` is the file the facts are rebuilt for (`()` while reading the index).
pub struct Reader<'a, F> {
    b: &'a [u8],
    i: usize,
    file: F,
}

pub type R<T> = Result<T, ()>;

impl<'a> Reader<'a, ()> {
    /// A reader over bytes of terraci's own encoding (no file header).
    pub fn over(b: &'a [u8]) -> Reader<'a, ()> {
        Reader { b, i: 0, file: () }
    }

    /// What [`put_stamp`] wrote.
    pub fn stamp(&mut self) -> R<terraci_db::system::Stamp> {
        Ok(terraci_db::system::Stamp {
            dev: self.u64()?,
            ino: self.u64()?,
            len: self.u64()?,
            mtime_ns: self.u64()? as i64,
            ctime_ns: self.u64()? as i64,
        })
    }

    /// What [`put_opt`] wrote.
    pub fn opt_with<T>(&mut self, f: impl FnOnce(&mut Self) -> R<T>) -> R<Option<T>> {
        match self.u8()? {
            0 => Ok(None),
            1 => f(self).map(Some),
            _ => Err(()),
        }
    }
}

/// Nesting bound while decoding: a corrupt entry must not recurse without end.
const MAX_DEPTH: u32 = 512;

impl<F> Reader<'_, F> {
    pub fn u8(&mut self) -> R<u8> {
        let b = *self.b.get(self.i).ok_or(())?;
        self.i += 1;
        Ok(b)
    }

    pub(crate) fn u64(&mut self) -> R<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(())
    }

    fn u32(&mut self) -> R<u32> {
        u32::try_from(self.u64()?).map_err(|_| ())
    }

    pub(crate) fn fixed_u64(&mut self) -> R<u64> {
        let bytes = self.b.get(self.i..self.i + 8).ok_or(())?;
        self.i += 8;
        Ok(u64::from_le_bytes(bytes.try_into().map_err(|_| ())?))
    }

    pub fn len(&mut self) -> R<usize> {
        let n = self.u64()? as usize;
        // Every item takes at least one byte: a count beyond the rest is corrupt.
        if n > self.b.len() - self.i {
            return Err(());
        }
        Ok(n)
    }

    /// Where the bytes [`put_bytes`] wrote are (offsets into the reader's bytes), skipped.
    pub(crate) fn range(&mut self) -> R<std::ops::Range<usize>> {
        let n = self.u64()? as usize;
        let start = self.i;
        let end = start
            .checked_add(n)
            .filter(|&e| e <= self.b.len())
            .ok_or(())?;
        self.i = end;
        Ok(start..end)
    }

    pub fn string(&mut self) -> R<String> {
        let s = std::str::from_utf8(self.bytes()?).map_err(|_| ())?;
        Ok(s.to_owned())
    }

    /// Length-prefixed bytes.
    pub fn bytes(&mut self) -> R<&[u8]> {
        let n = self.len()?;
        let b = &self.b[self.i..self.i + n];
        self.i += n;
        Ok(b)
    }

    /// Where the UTF-8 key of an entry is, which must sort after the key at `previous`
    /// (a file's entries are in key order, so a key is found by binary search).
    pub(crate) fn sorted_key(
        &mut self,
        previous: Option<&std::ops::Range<usize>>,
    ) -> R<std::ops::Range<usize>> {
        let key = self.range()?;
        std::str::from_utf8(&self.b[key.clone()]).map_err(|_| ())?;
        if previous.is_some_and(|p| self.b[p.clone()] >= self.b[key.clone()]) {
            return Err(());
        }
        Ok(key)
    }

    /// Whether every byte was read.
    pub fn at_end(&self) -> bool {
        self.i == self.b.len()
    }

    /// What [`put_str`] wrote, as a [`Name`] (inline when short: no heap block).
    fn name(&mut self) -> R<Name> {
        let s = std::str::from_utf8(self.bytes()?).map_err(|_| ())?;
        Ok(Name::from(s))
    }

    fn names(&mut self) -> R<Vec<Name>> {
        let n = self.len()?;
        exactly(n, || self.name())
    }

    fn bool(&mut self) -> R<bool> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(()),
        }
    }

    fn opt<T>(&mut self, f: impl FnOnce(&mut Self) -> R<T>) -> R<Option<T>> {
        if self.bool()? {
            f(self).map(Some)
        } else {
            Ok(None)
        }
    }

    /// What [`write_diagnostic_head`] wrote.
    pub(crate) fn diagnostic_head(&mut self) -> R<Diagnostic> {
        let severity = match self.u8()? {
            0 => Severity::Error,
            1 => Severity::Warning,
            2 => Severity::Info,
            _ => return Err(()),
        };
        let code = self.string()?;
        // An unknown code means another terraci wrote this.
        let code = terraci_db::diagnostic::Code::named(&code).ok_or(())?;
        let mut d = Diagnostic::new(severity, code, String::new());
        d.module = self.opt(|r| r.string())?;
        d.file = self.opt(|r| r.string())?;
        d.line = self.opt(|r| r.u32())?;
        d.column = self.opt(|r| r.u32())?;
        d.message = self.string()?;
        Ok(d)
    }

    pub(crate) fn item(&mut self) -> R<ItemPath> {
        Ok(ItemPath {
            block: self.names()?,
            attr: self.names()?,
        })
    }

    fn expr(&mut self, depth: u32) -> R<Expr> {
        if depth > MAX_DEPTH {
            return Err(());
        }
        let d = depth + 1;
        let id = NodeId(self.u32()?);
        let kind = match self.u8()? {
            0 => ExprKind::Null,
            1 => ExprKind::Bool(false),
            2 => ExprKind::Bool(true),
            3 => ExprKind::Number(Num::new(f64::from_bits(self.fixed_u64()?))),
            4 => ExprKind::String(self.name()?),
            5 => ExprKind::Template(self.parts(d)?),
            6 => ExprKind::Array(self.exprs(d)?),
            7 => {
                let n = self.len()?;
                let mut entries = Vec::with_capacity(n);
                for _ in 0..n {
                    let key = match self.u8()? {
                        0 => ObjectKey::Ident(self.name()?),
                        1 => ObjectKey::Expr(self.expr(d)?),
                        _ => return Err(()),
                    };
                    entries.push((key, self.expr(d)?));
                }
                ExprKind::Object(entries)
            }
            8 => ExprKind::Variable(self.name()?),
            9 => {
                let root = self.expr(d)?;
                let n = self.len()?;
                let mut ops = Vec::with_capacity(n);
                for _ in 0..n {
                    ops.push(match self.u8()? {
                        0 => Traverser::Attr(self.name()?),
                        1 => Traverser::Index(self.expr(d)?),
                        2 => Traverser::LegacyIndex(self.u64()?),
                        3 => Traverser::AttrSplat,
                        4 => Traverser::FullSplat,
                        _ => return Err(()),
                    });
                }
                ExprKind::Traversal(Box::new(root), ops)
            }
            10 => terraci_db::syntax::Call::kind(self.name()?, self.exprs(d)?, self.bool()?),
            11 => ExprKind::Conditional(
                Box::new(self.expr(d)?),
                Box::new(self.expr(d)?),
                Box::new(self.expr(d)?),
            ),
            12 => {
                let op = match self.u8()? {
                    0 => UnaryOp::Neg,
                    1 => UnaryOp::Not,
                    _ => return Err(()),
                };
                ExprKind::Unary(op, Box::new(self.expr(d)?))
            }
            13 => {
                let op = *BINARY.get(self.u8()? as usize).ok_or(())?;
                ExprKind::Binary(op, Box::new(self.expr(d)?), Box::new(self.expr(d)?))
            }
            14 => ExprKind::For(Box::new(ForExpr {
                key_var: self.opt(|r| r.name())?,
                value_var: self.name()?,
                collection: self.expr(d)?,
                key_expr: self.opt(|r| r.expr(d))?,
                value_expr: self.expr(d)?,
                cond: self.opt(|r| r.expr(d))?,
                grouping: self.bool()?,
            })),
            15 => ExprKind::Paren(Box::new(self.expr(d)?)),
            _ => return Err(()),
        };
        Ok(Expr { id, kind })
    }

    fn exprs(&mut self, depth: u32) -> R<Vec<Expr>> {
        let n = self.len()?;
        exactly(n, || self.expr(depth))
    }

    fn parts(&mut self, depth: u32) -> R<Vec<TemplatePart>> {
        if depth > MAX_DEPTH {
            return Err(());
        }
        let d = depth + 1;
        let n = self.len()?;
        let mut parts = Vec::with_capacity(n);
        for _ in 0..n {
            parts.push(match self.u8()? {
                0 => TemplatePart::Literal(self.name()?),
                1 => TemplatePart::Interpolation(self.expr(d)?),
                2 => TemplatePart::If {
                    cond: self.expr(d)?,
                    then: self.parts(d)?,
                    otherwise: self.parts(d)?,
                },
                3 => TemplatePart::For {
                    key_var: self.opt(|r| r.name())?,
                    value_var: self.name()?,
                    collection: self.expr(d)?,
                    body: self.parts(d)?,
                },
                _ => return Err(()),
            });
        }
        Ok(parts)
    }
}

/// `n` items read one after the other, in a vector of exactly `n` (collecting `Result`s
/// does not know the length, and its growth slack was a third of the decoded facts).
fn exactly<T>(n: usize, mut item: impl FnMut() -> R<T>) -> R<Vec<T>> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(item()?);
    }
    Ok(out)
}

impl Reader<'_, File> {
    fn attr(&mut self) -> R<AttrExpr> {
        Ok(AttrExpr::from(AttrExprData {
            expr: self.expr(0)?,
            item: self.item()?,
            file: self.file,
        }))
    }

    fn named(&mut self) -> R<Vec<(Name, AttrExpr)>> {
        let n = self.len()?;
        exactly(n, || Ok((self.name()?, self.attr()?)))
    }

    fn facts(&mut self) -> R<FileFacts> {
        let locals = self.named()?;
        let n = self.len()?;
        let mut variables = Vec::with_capacity(n);
        for _ in 0..n {
            variables.push(VariableFact {
                name: self.name()?,
                default: self.opt(|r| r.attr())?,
                type_constraint: self.opt(|r| r.expr(0))?,
            });
        }
        let backend = self.opt(|r| {
            Ok(BackendFact {
                kind: r.name()?,
                config: r.attr()?,
            })
        })?;
        let n = self.len()?;
        let mut remote_states = Vec::with_capacity(n);
        for _ in 0..n {
            remote_states.push(RemoteStateFact {
                name: self.name()?,
                file: self.file,
                backend: self.opt(|r| r.attr())?,
                config: self.opt(|r| r.attr())?,
                workspace: self.opt(|r| r.attr())?,
                for_each: self.opt(|r| r.attr())?,
                count: self.opt(|r| r.attr())?,
            });
        }
        let n = self.len()?;
        let mut module_calls = Vec::with_capacity(n);
        for _ in 0..n {
            module_calls.push(ModuleCallFact {
                name: self.name()?,
                source: self.opt(|r| r.attr())?,
                count: self.opt(|r| r.attr())?,
                for_each: self.opt(|r| r.attr())?,
                arguments: self.named()?,
            });
        }
        let tfvars = self.named()?;
        let n = self.len()?;
        let mut diagnostics = Vec::with_capacity(n);
        for _ in 0..n {
            let mut d = self.diagnostic_head()?;
            let file = self.file;
            d.anchor = self.opt(|r| {
                Ok(Anchor {
                    file,
                    item: r.item()?,
                    node: NodeId(r.u32()?),
                })
            })?;
            diagnostics.push(d);
        }
        Ok(FileFacts {
            locals,
            variables,
            backend,
            remote_states,
            module_calls,
            tfvars,
            diagnostics,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use terraci_db::db::Database;

    /// `check` accepts the run record in the cache dir by this name.
    #[test]
    fn a_cache_is_rewritten_for_many_stale_entries_not_for_a_few() {
        assert!(worth_rewriting(None, 10, 10), "no cache yet");
        assert!(!worth_rewriting(Some(30_000), 30_000, 0));
        assert!(!worth_rewriting(Some(30_000), 30_000, 1), "one edited file");
        assert!(worth_rewriting(Some(30_000), 30_000, 33), "a branch switch");
        assert!(
            worth_rewriting(Some(30_000), 29_000, 0),
            "a thousand files gone"
        );
        assert!(worth_rewriting(Some(4), 4, 3), "most of a small cache");
    }

    #[test]
    fn a_cache_dir_that_is_not_terraci_s_own_is_refused_with_its_reason() {
        let fs = terraci_db::system::MemorySystem::new();
        fs.write_file("/p/main.tf", "");
        fs.write_file("/p/.terraci/cache/facts.bin", "");
        fs.write_file("/p/.terraci/cache/.gitignore", "*\n");
        let ours = CacheSettings::new("/p".into(), false, None).expect("cache on");
        assert_eq!(ours.check(&fs, "/p".into()), Ok(()));

        let project = CacheSettings::new("/p/env".into(), false, Some("..".into()));
        let err = project.expect("cache on").check(&fs, "/p/env".into());
        assert_eq!(err, Err(CacheDirError::HoldsProject("/p/env/..".into())));

        fs.write_file("/p/.terraci/cache/notes\u{7}.txt", "mine");
        let err = ours.check(&fs, "/p".into()).expect_err("foreign file");
        assert_eq!(
            err.to_string(),
            "the cache dir `/p/.terraci/cache` holds `notes\\u{7}.txt`, which terraci did not \
             write; pick a directory of its own (default .terraci/cache)"
        );
        assert_eq!(err.exit_code(), terraci_db::exit::ERROR);
    }

    fn roundtrip(kind: FileKind, path: &str, text: &str) {
        let db = Database::default();
        let file = File::new(&db, path.into(), kind, FileContents::Text(text.into()));
        let facts = crate::facts::file_facts(&db, file).clone();
        let mut bytes = Vec::new();
        write_facts(&mut bytes, &facts);
        let mut r = Reader {
            b: &bytes,
            i: 0,
            file,
        };
        assert_eq!(r.facts(), Ok(facts));
        assert_eq!(r.i, bytes.len());
        // Every truncation is refused, never a panic or a partial result.
        for cut in 0..bytes.len() {
            let mut r = Reader {
                b: &bytes[..cut],
                i: 0,
                file,
            };
            assert!(r.facts().is_err(), "cut at {cut}");
        }
    }

    /// Files covering every kind of fact, for the round trip and the pinned encoding.
    const FILES: [(FileKind, &str, &str); 4] = [
        (
            FileKind::Native,
            "m/main.tf",
            concat!(
                "terraform {\n  backend \"s3\" {\n    key = \"a/${local.x}\"\n  }\n}\n",
                "locals {\n  a = [for k, v in var.m : \"${k}-${v}\" if v != null]\n",
                "  b = { for k in local.a : k => -1.5 ... }\n",
                "  c = \"%{ if true }x%{ else }y%{ endif }%{ for x in [1] }${x}%{ endfor }\"\n",
                "  d = (a.b[0].c.* == !true) ? x[*].y : f(g()...)\n  e = null\n}\n",
                "variable \"v\" {\n  type = map(string)\n  default = { (local.k) = 1 }\n}\n",
                "data \"terraform_remote_state\" \"r\" {\n  for_each = toset([\"a\"])\n",
                "  backend = \"s3\"\n  workspace = \"w\"\n  count = 2 % 3\n  config { key = each.key }\n}\n",
                "module \"m\" {\n  source = \"./x\"\n}\n",
            ),
        ),
        (FileKind::VarsNative, "m/terraform.tfvars", "a = 1\nb = \"x\"\n"),
        (FileKind::Native, "m/broken.tf", "locals {\n  a = \n"),
        (FileKind::Json, "m/x.tf.json", "{\"locals\": {\"a\": \"${b}\"}}"),
    ];

    #[test]
    fn facts_survive_the_round_trip() {
        for (kind, path, text) in FILES {
            roundtrip(kind, path, text);
        }
    }

    /// An empty cache file of `version` written by the build `binary`.
    fn empty_cache(version: &str, binary: &[u8]) -> Vec<u8> {
        let mut blob = MAGIC.to_vec();
        put_u64(&mut blob, u64::from(FORMAT));
        put_str(&mut blob, version);
        put_bytes(&mut blob, binary);
        put_u64(&mut blob, 0);
        blob.extend_from_slice(&seal_parts(&[&blob]));
        blob
    }

    #[test]
    fn a_cache_with_its_entries_out_of_path_order_is_refused() {
        let binary = b"build";
        let cases = [
            (["a/main.tf", "b/main.tf"], true),
            (["b/main.tf", "a/main.tf"], false),
            (["a/main.tf", "a/main.tf"], false),
        ];
        for (paths, valid) in cases {
            let mut blob = MAGIC.to_vec();
            put_u64(&mut blob, u64::from(FORMAT));
            put_str(&mut blob, env!("CARGO_PKG_VERSION"));
            put_bytes(&mut blob, binary);
            put_u64(&mut blob, paths.len() as u64);
            for path in paths {
                put_str(&mut blob, path);
                blob.push(0);
                put_u64(&mut blob, 0);
                blob.extend_from_slice(&0u64.to_le_bytes());
                blob.push(0); // no stamp
                put_bytes(&mut blob, b"");
            }
            blob.extend_from_slice(&seal_parts(&[&blob]));
            match parse(blob, binary) {
                Ok(entries) => {
                    assert!(valid, "{paths:?} accepted");
                    assert!(
                        entries.get("a/main.tf").is_some() && entries.get("b/main.tf").is_some()
                    );
                    assert!(entries.get("a").is_none() && entries.get("c/main.tf").is_none());
                }
                Err(why) => assert!(!valid && why == "corrupt entry", "{paths:?}: {why}"),
            }
        }
    }

    #[test]
    fn a_checksum_of_pieces_is_the_checksum_of_their_concatenation() {
        let text = b"terraform { backend \"s3\" {} }\n".repeat(100);
        for cut in [0, 1, 7, 8, 9, 63, 64, 65, text.len()] {
            let (a, b) = text.split_at(cut);
            assert_eq!(seal_parts(&[a, &[], b]), seal_parts(&[&text]), "{cut}");
        }
    }

    #[test]
    fn a_damaged_cache_file_is_refused() {
        let good = empty_cache(env!("CARGO_PKG_VERSION"), b"build");
        assert!(parse(good.clone(), b"build").is_ok());
        assert_eq!(
            parse(good[..good.len() - 1].to_vec(), b"build").err(),
            Some("corrupt or truncated")
        );
        // A flipped bit in the body fails the checksum; in the version, it reads as
        // another version's file (the format is read before the checksum). Both are
        // refused.
        let mut flipped = good.clone();
        flipped[good.len() - 9] ^= 1;
        assert_eq!(parse(flipped, b"build").err(), Some("corrupt or truncated"));
        let mut flipped = good.clone();
        flipped[MAGIC.len() + 2] ^= 1;
        assert_eq!(
            parse(flipped, b"build").err(),
            Some("written by another version of terraci")
        );
        assert_eq!(
            parse(b"garbage".to_vec(), b"build").err(),
            Some("not a terraci fact cache")
        );
        assert_eq!(
            parse(empty_cache("0.0.0-other", b"build"), b"build").err(),
            Some("written by another version of terraci")
        );
    }

    #[test]
    fn a_cache_written_by_another_build_of_the_same_version_is_refused() {
        // A rebuilt binary may lower the same text into other facts (the format number
        // is bumped by hand and was not, more than once): the cache is keyed on the
        // executable's stamp as the run record is.
        let cache = empty_cache(env!("CARGO_PKG_VERSION"), b"old build");
        assert_eq!(
            parse(cache, b"new build").err(),
            Some("written by another build of terraci")
        );
    }

    /// The encoding of the facts of a text covering every fact kind, pinned: a change of
    /// the encoding or of what the parsers make of a text fails here, and must bump
    /// `FORMAT` together with the pinned hash (a cache of the old facts is then refused
    /// by every build, not only by a rebuilt one).
    #[test]
    fn the_encoding_of_facts_is_pinned_to_the_format_number() {
        let db = Database::default();
        let mut bytes = Vec::new();
        for (kind, path, text) in FILES {
            let file = File::new(&db, path.into(), kind, FileContents::Text(text.into()));
            write_facts(&mut bytes, crate::facts::file_facts(&db, file));
        }
        assert_eq!(
            (FORMAT, bytes.len(), content_hash(&bytes)),
            (6, 874, 2603916788371675767),
            "the encoded facts changed: bump FORMAT and pin the new length and hash"
        );
    }
}
