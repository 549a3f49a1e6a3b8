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
//! its own inode. An entry also holds the blob id git's index had for the version read
//! when its index entry was clean (`terraci_vcs::IndexIdentities`: stat data matching,
//! not racy), which costs no hashing: a fresh clone, where no stamp matches, does not
//! read a file whose clean index entry names the entry's blob. A corrupt, truncated or foreign
//! file is ignored with a notice and rewritten. Writes go to a temp file that is renamed
//! over the old one, so concurrent runs each leave a complete cache (the last one wins).

use std::sync::Arc;

use camino::Utf8Path;

use crate::facts::{
    AttrExpr, AttrExprData, BackendFact, FileFacts, ModuleCallFact, RemoteStateFact, VariableFact,
};
use crate::key_index;
use terraci_db::db::Db;
use terraci_db::diagnostic::Anchor;
use terraci_db::files::{BlobId, File, FileContents, FileKind};
use terraci_db::store::{
    begin_file, binary_id, exactly, open_file, put_blob, put_bytes, put_opt, put_stamp, put_str,
    put_u64, read_entries, worth_rewriting, write_diagnostic_head, write_expr, write_item,
    CacheSettings, Reader, Stream, R,
};
use terraci_db::syntax::{Name, NodeId};
use terraci_db::system::System;

const MAGIC: &[u8; 16] = b"terraci-facts\0\0\0";
/// Bump when the encoding of [`FileFacts`] changes, or the facts a text gives (a parser
/// that accepts more).
const FORMAT: u32 = 7;
/// One cached file: what it was, and where its path and encoded facts are in the blob.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    path: std::ops::Range<usize>,
    kind: u8,
    len: u64,
    hash: u64,
    /// The stamp of the version read, if it had settled before that run began.
    stamp: Option<terraci_db::system::Stamp>,
    /// The blob git's index held for the version read, if its entry was clean then
    /// (`terraci_vcs::IndexIdentities`).
    blob: Option<BlobId>,
    payload: std::ops::Range<usize>,
}

/// The loaded cache: one entry per file, over one shared blob. The entries are in path
/// order (the cache is written so, and a file that is not is refused); a path is found
/// through a hash index of the paths in the blob, with no copy of them.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Entries {
    blob: Vec<u8>,
    entries: Vec<Entry>,
    index: key_index::KeyIndex,
}

impl Entries {
    fn new(blob: Vec<u8>, entries: Vec<Entry>) -> Self {
        let index = key_index::KeyIndex::new(entries.iter().map(|e| &blob[e.path.clone()]));
        Entries {
            blob,
            entries,
            index,
        }
    }

    /// The entry of `path`; discovery asks in path order ([`key_index::find_near`]).
    fn get(&self, path: &str) -> Option<&Entry> {
        thread_local!(static NEXT: std::cell::Cell<usize> = const { std::cell::Cell::new(0) });
        let path_of = |i: usize| &self.blob[self.entries[i].path.clone()];
        let len = self.entries.len();
        let i = key_index::find_near(&self.index, &NEXT, path.as_bytes(), len, path_of)?;
        Some(&self.entries[i])
    }

    /// The contents of the file at `path` (project-relative; `abs` absolute) as an
    /// [`terraci_db::files::UnreadText`] read from `source` if needed, with the file's
    /// `lstat` stamp now (`now`, asked only if there is an entry): its text need not be
    /// read when the entry's stamp is that stamp still, or when git's index holds the
    /// entry's blob for the file with that stamp (`blob_of`, asked only if the stamps
    /// differ: a fresh clone of the same contents). The flag says the stamp alone
    /// answered: the entry then stays as it is ([`may_rewrite`]).
    pub fn unread(
        &self,
        path: &str,
        kind: FileKind,
        abs: &Utf8Path,
        source: &Arc<terraci_db::files::TextSource>,
        now: impl FnOnce() -> Option<terraci_db::system::Stamp>,
        blob_of: impl FnOnce(&terraci_db::system::Stamp) -> Option<BlobId>,
    ) -> Option<(FileContents, terraci_db::system::Stamp, bool)> {
        let entry = self.get(path)?;
        if entry.kind != kind_code(kind) || (entry.stamp.is_none() && entry.blob.is_none()) {
            return None;
        }
        let stamp = now()?;
        let by_stamp = entry.stamp == Some(stamp);
        let same = by_stamp || entry.blob.is_some_and(|blob| blob_of(&stamp) == Some(blob));
        if !same {
            return None;
        }
        let text = terraci_db::files::UnreadText::new(
            entry.len,
            entry.hash,
            abs.to_owned(),
            source.clone(),
        );
        Some((FileContents::Unread(Arc::new(text)), stamp, by_stamp))
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
    let mut r = Reader::with_file(&entries.blob[entry.payload.clone()], file);
    let facts = read_facts(&mut r).ok()?;
    r.at_end().then_some(facts)
}

/// Whether [`save`] may find the cache worth rewriting, told without a look at any
/// file: `files` were discovered, and `by_stamp` of them found in the cache under the
/// stamp its entry holds ([`Entries::unread`]). Such a file keeps its entry as it is
/// (its identity is the entry's, and its stamp had settled when the entry was written),
/// so at most the other files are stale, and at most the entries beyond `by_stamp` are
/// gone. A run of a few changed files among 30,000 skips the writer's pass over them.
pub fn may_rewrite(db: &dyn Db, files: usize, by_stamp: usize) -> bool {
    let old = FactCache::try_get(db).map_or(0, |c| c.entries(db).entries.len());
    if old == 0 {
        return true;
    }
    let by_stamp = by_stamp.min(files);
    terraci_db::store::worth_rewriting(Some(old), by_stamp, files - by_stamp)
}

/// Reads the cache file. `Err` is a notice for the user: the file was there but unusable.
pub fn load(system: &dyn System, settings: &CacheSettings) -> Result<Entries, String> {
    let path = settings.file();
    let Ok(mut bytes) = system.read(&path) else {
        // No cache yet: nothing to say.
        return Ok(Entries::default());
    };
    let notice = |why| format!("ignoring the fact cache `{path}` ({why}); rebuilding it");
    let body = terraci_db::store::unseal(terraci_db::store::cache_key(system).as_ref(), &bytes)
        .map_err(notice)?;
    bytes.truncate(body);
    let binary = binary_id(system).ok_or("the running binary cannot be identified");
    binary
        .and_then(|binary| parse(bytes, &binary))
        .map_err(notice)
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
        let blob = r.opt_with(Reader::blob)?;
        let payload = r.range()?;
        Ok(Entry {
            path,
            kind,
            len,
            hash,
            stamp,
            blob,
            payload,
        })
    })?;
    Ok(Entries::new(blob, entries))
}

/// Writes the facts of `files` (project-relative path and input, sorted by path) unless
/// the cache already holds exactly these files with these contents and stamps or blobs;
/// `settled` holds the stamps of the versions read that had settled before the run began
/// (the others are stored without one, and are read again next time), `blob_of` the
/// blob git's index holds for a file's version read when its entry was clean (asked
/// only for a file whose stamp is not the entry's, and for every file when the cache is
/// rewritten).
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
    blob_of: &(dyn Fn(&str) -> Option<BlobId> + Sync),
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
    // An entry is stale also when its stamp moved and git's index does not vouch for
    // it by its blob either: the next run reads that file. (A fresh clone of the same
    // contents moves every stamp and keeps every blob: nothing is rewritten.) The index
    // is asked only when the stamps alone would have the cache rewritten: after an edit
    // in a kept work tree, a few stamps moved, and reading the index is not worth it.
    let old_len = old.as_ref().map(|o| o.entries.len());
    let stale = |vouched: &dyn Fn(&Entry, &str) -> bool| {
        cacheable
            .iter()
            .zip(&olds)
            .filter(|(c, old)| !old.is_some_and(|e| e.stamp == c.4 || vouched(e, c.0)))
            .count()
    };
    if !worth_rewriting(old_len, cacheable.len(), stale(&|_, _| false))
        || !worth_rewriting(
            old_len,
            cacheable.len(),
            stale(&|e, path| e.blob.is_some() && e.blob == blob_of(path)),
        )
    {
        return Ok(());
    }
    let blob = old.as_ref().map_or(&[][..], |o| &o.blob[..]);
    // A build that cannot be told from another writes nothing another could read.
    let Some(binary) = binary_id(system) else {
        return Ok(());
    };
    let key = terraci_db::store::cache_key(system);
    // A `.gitignore` of `*` keeps the cache out of `git status` and so out of
    // `--changed-only` (as pytest and ruff do with their caches).
    settings.write(system, ".gitignore", b"*\n")?;
    settings.replace_streamed(system, terraci_db::store::FACTS_FILE_NAME, &mut |emit| {
        let mut out = Stream::new(emit, key.as_ref());
        out.own(|head| {
            head.extend_from_slice(&begin_file(MAGIC, u64::from(FORMAT), 64));
            put_bytes(head, &binary);
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
                put_opt(b, &blob_of(path), put_blob);
                put_u64(b, facts.len() as u64);
                b.extend_from_slice(facts);
            })?;
        }
        out.finish()
    })
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

fn write_attr(out: &mut Vec<u8>, a: &AttrExpr) {
    write_expr(out, &a.expr);
    write_item(out, &a.item);
}

// Decoding of facts: the syntax tree is the store's ([`Reader::expr`]); an attribute is
// bound to the file it was read for.
fn read_attr(r: &mut Reader<'_, File>) -> R<AttrExpr> {
    Ok(AttrExpr::from(AttrExprData {
        expr: r.expr(0)?,
        item: r.item()?,
        file: r.file(),
    }))
}

fn read_named(r: &mut Reader<'_, File>) -> R<Vec<(Name, AttrExpr)>> {
    let n = r.len()?;
    exactly(n, || Ok((r.name()?, read_attr(r)?)))
}

fn read_facts(r: &mut Reader<'_, File>) -> R<FileFacts> {
    let locals = read_named(r)?;
    let n = r.len()?;
    let mut variables = Vec::with_capacity(n);
    for _ in 0..n {
        variables.push(VariableFact {
            name: r.name()?,
            default: r.opt(read_attr)?,
            type_constraint: r.opt(|r| r.expr(0))?,
        });
    }
    let backend = r.opt(|r| {
        Ok(BackendFact {
            kind: r.name()?,
            config: read_attr(r)?,
        })
    })?;
    let n = r.len()?;
    let mut remote_states = Vec::with_capacity(n);
    for _ in 0..n {
        remote_states.push(RemoteStateFact {
            name: r.name()?,
            file: r.file(),
            backend: r.opt(read_attr)?,
            config: r.opt(read_attr)?,
            workspace: r.opt(read_attr)?,
            for_each: r.opt(read_attr)?,
            count: r.opt(read_attr)?,
        });
    }
    let n = r.len()?;
    let mut module_calls = Vec::with_capacity(n);
    for _ in 0..n {
        module_calls.push(ModuleCallFact {
            name: r.name()?,
            source: r.opt(read_attr)?,
            count: r.opt(read_attr)?,
            for_each: r.opt(read_attr)?,
            arguments: read_named(r)?,
        });
    }
    let tfvars = read_named(r)?;
    let n = r.len()?;
    let mut diagnostics = Vec::with_capacity(n);
    for _ in 0..n {
        let mut d = r.diagnostic_head()?;
        let file = r.file();
        d.anchor = r.opt(|r| {
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

#[cfg(test)]
mod tests {
    use super::*;
    use terraci_db::db::Database;
    use terraci_db::store::*;

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
    fn the_writer_skips_its_pass_only_when_no_count_of_stale_files_could_be_worth_it() {
        let db = Database::default();
        assert!(
            may_rewrite(&db, 100, 0),
            "no cache attached: the writer decides"
        );
        let mut blob = Vec::new();
        let entries = (0..100)
            .map(|i| {
                let at = blob.len();
                blob.extend_from_slice(format!("m{i:03}/main.tf").as_bytes());
                Entry {
                    path: at..blob.len(),
                    kind: kind_code(FileKind::Native),
                    len: 0,
                    hash: 0,
                    stamp: None,
                    blob: None,
                    payload: 0..0,
                }
            })
            .collect();
        attach(&db, Arc::new(Entries::new(blob, entries)));
        assert!(
            !may_rewrite(&db, 100, 100),
            "every file answered by its stamp"
        );
        assert!(!may_rewrite(&db, 100, 99), "one edited file");
        // At most 16 stale and 16 entries gone: 32, the most a cache keeps.
        assert!(!may_rewrite(&db, 100, 84));
        assert!(may_rewrite(&db, 100, 83), "17 edited files");
        assert!(
            !may_rewrite(&db, 130, 100),
            "30 files the cache does not know"
        );
        assert!(
            may_rewrite(&db, 140, 100),
            "40 files the cache does not know"
        );
        assert!(may_rewrite(&db, 60, 60), "40 entries of files gone");
        assert!(
            !may_rewrite(&db, 100, 1_000),
            "a count beyond the files is capped"
        );
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
        let mut r = Reader::with_file(&bytes, file);
        assert_eq!(read_facts(&mut r), Ok(facts));
        assert!(r.at_end());
        // Every truncation is refused, never a panic or a partial result.
        for cut in 0..bytes.len() {
            let mut r = Reader::with_file(&bytes[..cut], file);
            assert!(read_facts(&mut r).is_err(), "cut at {cut}");
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
                blob.push(0); // no blob
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
        // build's identity as the run record is.
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
            (7, 874, 2603916788371675767),
            "the encoded facts changed: bump FORMAT and pin the new length and hash"
        );
    }
}
