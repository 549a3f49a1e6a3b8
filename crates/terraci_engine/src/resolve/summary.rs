//! Module summaries: what the rest of a run needs of one module, kept across runs.
//!
//! Input: the module's facts, scope, state identity and references (and those of the
//! local modules it calls), or an entry of the summary cache. Output: a
//! [`ModuleSummary`] per module: its facts' diagnostics and call sources, and for a root
//! module its state identity, scope diagnostics and evaluated references. Everything
//! after this stage (the owners index, matching, the graph, diagnostics, uses-library
//! links) reads summaries, never facts. Invalidated by the files of the module and of
//! every module its calls read (present or missing), its place in the pattern, and the
//! project's root, config, pattern and eval settings.
//!
//! A root module's entry also keeps its resolution ([`super::resolved_dependencies`]),
//! valid while the project's owners index hashes as it did and either the summary's
//! key holds or the module's references are as they were ([`reused_resolution`]). A
//! chunk whose every module holds is read as a chunk ([`held_heads`],
//! [`held_dependencies`]).
//!
//! The cache (`summaries.bin` beside the fact cache) holds one entry per module: the key
//! (a 64-bit hash of everything above, the files by length and content hash, as the
//! fact cache knows them without reading them), the ids of the modules its calls read,
//! and the summary. A repeat run whose files moved in a few modules decodes the other
//! summaries and does not decode their facts, evaluate their scopes or expand their
//! calls. The file is keyed on the terraci build like the fact cache, ends in a checksum,
//! and a damaged one is ignored and rewritten. Nothing is written when some evaluation
//! read a file outside the modules (`file()`, `fileset()`): those reads are not in the
//! key.

use std::hash::Hasher as _;
use std::sync::Arc;

use crate::chunk::{chunk_modules, ModuleChunk};
use terraci_db::db::Db;
use terraci_db::diagnostic::{Anchor, Diagnostic};
use terraci_db::files::{File, Module, Project};
use terraci_db::owners::StateIdentity;
use terraci_db::store::{
    begin_file, content_hash, open_file, put_bytes, put_opt, put_str, put_u64, read_entries,
    Reader, Stream, R,
};
use terraci_db::syntax::NodeId;
use terraci_db::system::System;

use super::references::{ModuleReferences, StateReference, StateTarget};

const MAGIC: &[u8; 16] = b"terraci-summary\0";
/// Bump when the encoding below changes, or what a summary holds.
const FORMAT: u64 = 4;
use terraci_db::store::SUMMARY_FILE_NAME as FILE_NAME;

/// What the stages after resolution need of one module.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModuleSummary {
    /// The diagnostics of the module's facts.
    pub(crate) fact_diagnostics: Vec<Diagnostic>,
    /// The sources of the module's calls that are literal strings.
    pub(crate) call_sources: Vec<String>,
    /// For a root module.
    pub root: Option<RootSummary>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootSummary {
    pub(crate) identity: StateIdentity,
    pub(crate) scope_diagnostics: Vec<Diagnostic>,
    pub(crate) references: ModuleReferences,
}

/// The summary of `module`: the cached one when its key still holds, else computed.
#[salsa::tracked(returns(ref))]
pub fn module_summary(db: &dyn Db, project: Project, module: Module) -> ModuleSummary {
    if let Some(summary) = cached_summary(db, project, module) {
        return summary;
    }
    let facts = crate::facts::module_facts(db, module);
    let call_sources = facts
        .module_calls
        .iter()
        .filter_map(|c| crate::facts::literal_string(&c.source.as_ref()?.expr))
        .map(str::to_owned)
        .collect();
    let root = module.info(db).is_root().then(|| RootSummary {
        identity: super::state_identity(db, project, module),
        scope_diagnostics: super::module_scope(db, project, module).diagnostics.clone(),
        references: super::module_references(db, project, module),
    });
    ModuleSummary {
        fact_diagnostics: facts.diagnostics.clone(),
        call_sources,
        root,
    }
}

/// The part of a module's summary that the project-wide stages read (the owners index,
/// diagnostics, uses-library links): a summary without a root's references.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummaryHead {
    pub(crate) fact_diagnostics: Vec<Diagnostic>,
    pub(crate) call_sources: Vec<String>,
    /// A root module's state identity and scope diagnostics.
    pub root: Option<(StateIdentity, Vec<Diagnostic>)>,
}

/// The heads of the summaries of `chunk`'s modules, in module order, decoded straight
/// from the cache when every module of the chunk holds there; `None` otherwise. The
/// project-wide chunk queries read these instead of [`module_summary`]: a repeat run
/// then makes no memo per module and never decodes a reference that no resolution
/// needs (a root's resolution holds too, [`held_dependencies`]). Decoded once, by the
/// first chunk query that asks (the warm-up's, on all cores).
#[salsa::tracked(returns(ref))]
pub fn held_heads<'db>(
    db: &'db dyn Db,
    chunk: ModuleChunk<'db>,
) -> Option<Vec<(Module, SummaryHead)>> {
    let project = chunk.project(db);
    let summaries = SummaryCache::try_get(db)?.entries(db);
    modules_holding(db, chunk)
        .map(|(m, i)| {
            let entry = &summaries.entries[i?];
            let modules = anchored(db, project, m, &entry.reads);
            let mut r = Reader::over(&summaries.blob[entry.payload.clone()]);
            Some((m, read_head(&mut r, db, &modules).ok()?))
        })
        .collect()
}

/// What the graph reads of the resolutions of `chunk`'s root modules, decoded straight
/// from the cache when every root's entry holds with a resolution made against the
/// project's owners index as it is; `None` otherwise.
pub fn held_dependencies<'db>(
    db: &'db dyn Db,
    chunk: ModuleChunk<'db>,
) -> Option<super::ChunkDependencies> {
    let project = chunk.project(db);
    let summaries = SummaryCache::try_get(db)?.entries(db);
    let mut out = super::ChunkDependencies::default();
    for (m, i) in modules_holding(db, chunk) {
        if !m.info(db).is_root() {
            continue;
        }
        let (entry, at) = resolution_at(db, project, summaries, i?)?;
        let modules = anchored(db, project, m, &entry.reads);
        let mut r = Reader::over(&summaries.blob[at]);
        let (targets, diagnostics) = read_resolution_head(&mut r, db, &modules).ok()?;
        out.push(&targets, diagnostics);
    }
    Some(out)
}

/// Whether [`held_dependencies`] answers for `chunk`, without decoding anything.
pub fn dependencies_hold(db: &dyn Db, chunk: ModuleChunk<'_>) -> bool {
    let project = chunk.project(db);
    let Some(cache) = SummaryCache::try_get(db) else {
        return false;
    };
    let summaries = cache.entries(db);
    modules_holding(db, chunk)
        .filter(|(m, _)| m.info(db).is_root())
        .all(|(_, i)| i.is_some_and(|i| resolution_at(db, project, summaries, i).is_some()))
}

/// The loaded cache: entries in module id order over one blob.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Summaries {
    blob: Vec<u8>,
    /// The project context ([`summary_context`]) the cache was written in.
    context: u64,
    entries: Vec<SummaryEntry>,
    /// The module ids' index ([`Summaries::find`]).
    index: crate::key_index::KeyIndex,
}

#[derive(Debug, PartialEq, Eq)]
struct SummaryEntry {
    id: std::ops::Range<usize>,
    key: u64,
    reads: Vec<String>,
    payload: std::ops::Range<usize>,
    /// A root module's resolution: the owners index's hash it was made with, and where.
    resolution: Option<(u64, std::ops::Range<usize>)>,
}

impl Summaries {
    /// The entry of module `id`; a chunk asks for its modules in id order
    /// ([`crate::key_index::find_near`]).
    fn find(&self, id: &str) -> Option<usize> {
        thread_local!(static NEXT: std::cell::Cell<usize> = const { std::cell::Cell::new(0) });
        let id_of = |i: usize| &self.blob[self.entries[i].id.clone()];
        let len = self.entries.len();
        crate::key_index::find_near(&self.index, &NEXT, id.as_bytes(), len, id_of)
    }
}

/// The cache as a salsa input: [`module_summary`] reads it.
#[salsa::input(singleton, debug)]
pub(crate) struct SummaryCache {
    #[returns(ref)]
    pub(crate) entries: Arc<Summaries>,
}

/// Sets `entries` (what [`load`] gave) as the cache `db` reads; `HIGH` as the fact
/// cache, for the same reason. An empty cache is not set: no query then asks it
/// (a cold run makes no memo per module to say that nothing holds).
pub fn attach(db: &terraci_db::db::Database, entries: Arc<Summaries>) {
    if entries.entries.is_empty() {
        return;
    }
    let _singleton = SummaryCache::builder(entries)
        .durability(salsa::Durability::HIGH)
        .new(db);
}

/// Where the cache's entry for `module` is, if it still holds: its key is the key of
/// what the module and the modules its calls read are now.
///
/// A memo per module, for the passes that ask about one module; those that go over the
/// whole project ask [`chunk_holding`].
#[salsa::tracked]
fn holding_index(db: &dyn Db, project: Project, module: Module) -> Option<usize> {
    holds(db, project, SummaryCache::try_get(db)?.entries(db), module)
}

/// [`holding_index`] of each of `chunk`'s modules, in module order, in one memo: the
/// project-wide passes (the heads, the resolutions, the writer) ask chunk by chunk, and
/// a memo per module cost them more than checking the keys.
#[salsa::tracked(returns(ref))]
fn chunk_holding<'db>(db: &'db dyn Db, chunk: ModuleChunk<'db>) -> Vec<Option<usize>> {
    let project = chunk.project(db);
    let modules = chunk_modules(db, chunk);
    match SummaryCache::try_get(db) {
        Some(cache) => {
            let summaries = cache.entries(db);
            modules
                .iter()
                .map(|&m| holds(db, project, summaries, m))
                .collect()
        }
        None => vec![None; modules.len()],
    }
}

/// `chunk`'s modules, each with [`chunk_holding`]'s answer.
fn modules_holding<'db>(
    db: &'db dyn Db,
    chunk: ModuleChunk<'db>,
) -> impl Iterator<Item = (Module, Option<usize>)> + 'db {
    chunk_modules(db, chunk)
        .iter()
        .copied()
        .zip(chunk_holding(db, chunk).iter().copied())
}

fn holds(db: &dyn Db, project: Project, summaries: &Summaries, module: Module) -> Option<usize> {
    let i = summaries.find(&module.info(db).id)?;
    let entry = &summaries.entries[i];
    (summary_key(db, project, module, &entry.reads) == Some(entry.key)).then_some(i)
}

/// The entry of `module` that holds, with the modules its anchors point into.
fn holding_entry(
    db: &dyn Db,
    project: Project,
    module: Module,
) -> Option<(&Summaries, &SummaryEntry, Vec<Module>)> {
    let i = (*holding_index(db, project, module))?;
    let summaries = SummaryCache::try_get(db)?.entries(db);
    let entry = &summaries.entries[i];
    Some((
        summaries,
        entry,
        anchored(db, project, module, &entry.reads),
    ))
}

/// The modules an entry's anchors point into: the module, then those of its reads
/// that exist, in order (an anchor is a (module, file) index into them).
fn anchored(db: &dyn Db, project: Project, module: Module, reads: &[String]) -> Vec<Module> {
    let mut modules = vec![module];
    modules.extend(
        reads
            .iter()
            .filter_map(|id| super::calls::find_module(db, project, id)),
    );
    modules
}

pub fn cached_summary(db: &dyn Db, project: Project, module: Module) -> Option<ModuleSummary> {
    let (summaries, entry, modules) = holding_entry(db, project, module)?;
    let mut r = Reader::over(&summaries.blob[entry.payload.clone()]);
    let summary = read_summary(&mut r, db, &modules).ok()?;
    r.at_end().then_some(summary)
}

/// Where the cached resolution of `module` is, if its entry holds and the owners index
/// is the one it was resolved against: the cache, the entry, the resolution's bytes.
fn holding_resolution(
    db: &dyn Db,
    project: Project,
    module: Module,
) -> Option<(&Summaries, &SummaryEntry, std::ops::Range<usize>)> {
    let summaries = SummaryCache::try_get(db)?.entries(db);
    let (entry, at) = resolution_at(
        db,
        project,
        summaries,
        (*holding_index(db, project, module))?,
    )?;
    Some((summaries, entry, at))
}

/// Entry `i` and where its resolution is, when it was made against the project's owners
/// index as it is.
fn resolution_at<'s>(
    db: &dyn Db,
    project: Project,
    summaries: &'s Summaries,
    i: usize,
) -> Option<(&'s SummaryEntry, std::ops::Range<usize>)> {
    let entry = &summaries.entries[i];
    let (owners, at) = entry.resolution.clone()?;
    (owners == *owners_hash(db, project)).then_some((entry, at))
}

/// The cached resolution of `module`, if it holds ([`holding_resolution`]).
pub fn cached_resolution(
    db: &dyn Db,
    project: Project,
    module: Module,
) -> Option<super::ResolvedDependencies> {
    let (summaries, entry, at) = holding_resolution(db, project, module)?;
    decode_resolution(db, project, module, summaries, entry, at)
}

fn decode_resolution(
    db: &dyn Db,
    project: Project,
    module: Module,
    summaries: &Summaries,
    entry: &SummaryEntry,
    at: std::ops::Range<usize>,
) -> Option<super::ResolvedDependencies> {
    let modules = anchored(db, project, module, &entry.reads);
    let mut r = Reader::over(&summaries.blob[at]);
    let resolution = read_resolution(&mut r, db, &modules).ok()?;
    r.at_end().then_some(resolution)
}

/// The old resolution of a root module whose entry no longer holds (a file of it
/// changed), when nothing that resolution read has changed: the project context the
/// cache was written in, the owners index (by its hash), and the module's references
/// (compared whole, with their anchors and diagnostics, with those the entry holds).
/// An edit that leaves a module's `terraform_remote_state` blocks and what they
/// evaluate to as they were keeps its resolution.
pub fn reused_resolution(
    db: &dyn Db,
    project: Project,
    module: Module,
) -> Option<super::ResolvedDependencies> {
    let (summaries, i) = reusable(db, project, module)?;
    let entry = &summaries.entries[i];
    let (_, at) = entry.resolution.clone()?;
    decode_resolution(db, project, module, summaries, entry, at)
}

/// The cache and the entry whose resolution [`reused_resolution`] reuses. A run without
/// the cache, or with one written in another context, makes no memo per module here.
fn reusable(db: &dyn Db, project: Project, module: Module) -> Option<(&Summaries, usize)> {
    let summaries = SummaryCache::try_get(db)?.entries(db);
    if summaries.context != *summary_context(db, project) {
        return None;
    }
    Some((summaries, (*reusable_index(db, project, module))?))
}

/// See [`reusable`]. A memo, so that the references are decoded and compared once,
/// though the warm-up's [`every_resolution_holds`] and the resolution itself both ask.
#[salsa::tracked]
fn reusable_index(db: &dyn Db, project: Project, module: Module) -> Option<usize> {
    let summaries = SummaryCache::try_get(db)?.entries(db);
    let i = summaries.find(&module.info(db).id)?;
    let entry = &summaries.entries[i];
    let (owners, _) = entry.resolution.as_ref()?;
    if *owners != *owners_hash(db, project) {
        return None;
    }
    let fresh = &module_summary(db, project, module)
        .root
        .as_ref()?
        .references;
    let modules = anchored(db, project, module, &entry.reads);
    let mut r = Reader::over(&summaries.blob[entry.payload.clone()]);
    let old = read_summary(&mut r, db, &modules).ok()?;
    (old.root?.references == *fresh).then_some(i)
}

/// Whether the summary cache holds a resolution, made against the owners index as it
/// is, for every root module of `project` (one whose entry no longer holds counts when
/// its resolution can be reused, [`reused_resolution`]): then no resolution of this
/// revision reads the index, and the driver need not build it.
pub fn every_resolution_holds(db: &dyn Db, project: Project) -> bool {
    let Some(cache) = SummaryCache::try_get(db) else {
        return false;
    };
    let summaries = cache.entries(db);
    crate::chunk::chunks(db, project).into_iter().all(|chunk| {
        modules_holding(db, chunk)
            .filter(|(m, _)| m.info(db).is_root())
            .all(|(m, i)| {
                i.is_some_and(|i| resolution_at(db, project, summaries, i).is_some())
                    || reusable(db, project, m).is_some()
            })
    })
}

/// The project's owners index, hashed by what it is made of (every root module's id and
/// state identity, in module order: the index is a function of that list alone): what
/// every resolution reads besides its module's summary and the project inputs in the
/// summary's key. Made from the chunks' hashes, without building the index.
#[salsa::tracked]
fn owners_hash(db: &dyn Db, project: Project) -> u64 {
    let mut h = terraci_db::files::hasher();
    for chunk in crate::chunk::chunks(db, project) {
        h.write_u64(*super::chunk_identities_hash(db, chunk));
    }
    h.finish()
}

/// What everything a summary depends on hashes to; `None` when a file's contents have
/// no identity (unreadable, not UTF-8): such a module is not cached.
fn summary_key(db: &dyn Db, project: Project, module: Module, reads: &[String]) -> Option<u64> {
    let mut h = terraci_db::files::hasher();
    h.write_u64(*summary_context(db, project));
    hash_module(db, module, &mut h)?;
    for id in reads {
        hash_str(&mut h, id);
        match super::calls::find_module(db, project, id) {
            Some(m) => {
                h.write_u8(1);
                hash_module(db, m, &mut h)?;
            }
            None => h.write_u8(0),
        }
    }
    Some(h.finish())
}

#[allow(deprecated)]
fn hash_module(db: &dyn Db, module: Module, h: &mut std::hash::SipHasher) -> Option<()> {
    let info = module.info(db);
    hash_str(h, &info.id);
    h.write_usize(info.components.len());
    for (k, v) in &info.components {
        hash_str(h, k);
        hash_str(h, v);
    }
    for part in [&info.submodule, &info.parent] {
        match part {
            Some(s) => {
                h.write_u8(1);
                hash_str(h, s);
            }
            None => h.write_u8(0),
        }
    }
    h.write_u8(info.role as u8);
    let files = module.files(db);
    h.write_usize(files.len());
    for &f in files {
        hash_str(h, f.path(db).as_str());
        h.write_u8(f.kind(db) as u8);
        let (len, hash) = f.contents(db).identity()?;
        h.write_u64(len);
        h.write_u64(hash);
    }
    Some(())
}

fn hash_str(h: &mut impl std::hash::Hasher, s: &str) {
    h.write_usize(s.len());
    h.write(s.as_bytes());
}

/// The project inputs every summary reads: root, config, pattern, eval settings.
#[salsa::tracked]
fn summary_context(db: &dyn Db, project: Project) -> u64 {
    let text = format!(
        "{:?}\n{:?}\n{:?}\n{:?}",
        project.root(db),
        project.config(db),
        project.pattern(db),
        project.eval_settings(db)
    );
    content_hash(text.as_bytes())
}

/// Reads `summaries.bin`. `Err` is a notice: the file was there but unusable.
pub fn load(
    system: &dyn System,
    settings: &terraci_db::store::CacheSettings,
) -> Result<Summaries, String> {
    let path = settings.dir.join(FILE_NAME);
    let Ok(mut bytes) = system.read(&path) else {
        return Ok(Summaries::default());
    };
    let notice = |why| format!("ignoring the summary cache `{path}` ({why}); rebuilding it");
    let body = terraci_db::store::unseal(terraci_db::store::cache_key(system).as_ref(), &bytes)
        .map_err(notice)?;
    bytes.truncate(body);
    let binary =
        terraci_db::store::binary_id(system).ok_or("the running binary cannot be identified");
    binary
        .and_then(|binary| parse(bytes, &binary))
        .map_err(notice)
}

fn parse(blob: Vec<u8>, binary: &[u8]) -> Result<Summaries, &'static str> {
    let mut r = open_file(&blob, MAGIC, FORMAT, "not a terraci summary cache")?;
    if r.bytes().map_err(|_| "truncated")? != binary {
        return Err("written by another build of terraci");
    }
    let context = r.fixed_u64().map_err(|_| "truncated")?;
    let entries = read_entries(&mut r, |r, last: Option<&SummaryEntry>| {
        Ok(SummaryEntry {
            id: r.sorted_key(last.map(|e| &e.id))?,
            key: r.fixed_u64()?,
            reads: read_strings(r)?,
            payload: r.range()?,
            resolution: r.opt_with(|r| Ok((r.fixed_u64()?, r.range()?)))?,
        })
    })?;
    let index = crate::key_index::KeyIndex::new(entries.iter().map(|e| &blob[e.id.clone()]));
    Ok(Summaries {
        blob,
        context,
        entries,
        index,
    })
}

/// A module's entry as [`save`] writes it: what is kept of the old entry (its bytes
/// where the key, and for the resolution the owners index, still hold).
struct Fresh<'a> {
    module: Module,
    id: &'a str,
    key: u64,
    reads: std::borrow::Cow<'a, [String]>,
    kept: Option<&'a [u8]>,
    kept_resolution: Option<&'a [u8]>,
    root: bool,
}

/// Writes the summary of every module of `project` unless the cache holds them already
/// but a few ([`terraci_db::store::worth_rewriting`]: those are computed again next
/// time). A module whose key matches its old entry keeps the old entry's bytes.
pub fn save(
    db: &dyn Db,
    system: &dyn System,
    settings: &terraci_db::store::CacheSettings,
    project: Project,
) -> std::io::Result<()> {
    let old = SummaryCache::try_get(db).map(|c| c.entries(db).clone());
    let owners = *owners_hash(db, project);
    let mut fresh: Vec<Fresh<'_>> = Vec::with_capacity(project.modules(db).len());
    let modules = crate::chunk::chunks(db, project)
        .into_iter()
        .flat_map(|chunk| modules_holding(db, chunk));
    for (m, i) in modules {
        let id = m.info(db).id.as_str();
        // An entry that holds was the summary: its key and reads are this run's.
        let held = old
            .as_ref()
            .and_then(|o| Some((o, i?)))
            .map(|(o, i)| (o, &o.entries[i]));
        let (key, reads, old_entry) = match held {
            Some((o, e)) => (e.key, (&e.reads[..]).into(), Some((o, e))),
            None => {
                // Only an entry that does not hold is decoded or computed whole here.
                let reads = module_summary(db, project, m)
                    .root
                    .as_ref()
                    .map(|r| &r.references.reads[..])
                    .unwrap_or_default();
                let Some(key) = summary_key(db, project, m, reads) else {
                    continue;
                };
                (key, reads.into(), None)
            }
        };
        let kept = old_entry.map(|(o, e)| &o.blob[e.payload.clone()]);
        let kept_resolution = old_entry.and_then(|(o, e)| {
            let (hash, at) = e.resolution.clone()?;
            (hash == owners).then(|| &o.blob[at])
        });
        // A root module's summary has a root part ([`module_summary`]).
        let root = m.info(db).is_root();
        fresh.push(Fresh {
            module: m,
            id,
            key,
            reads,
            kept,
            kept_resolution: kept_resolution.filter(|_| root),
            root,
        });
    }
    let stale = fresh
        .iter()
        .filter(|f| f.kept.is_none() || (f.root && f.kept_resolution.is_none()))
        .count();
    let old_len = old.as_ref().map(|o| o.entries.len());
    if !terraci_db::store::worth_rewriting(old_len, fresh.len(), stale) {
        return Ok(());
    }
    // A build that cannot be told from another writes nothing another could read.
    let Some(binary) = terraci_db::store::binary_id(system) else {
        return Ok(());
    };
    // Written as it is made, as the fact cache is: never held whole.
    let mac_key = terraci_db::store::cache_key(system);
    settings.replace_streamed(system, FILE_NAME, &mut |emit| {
        let mut out = Stream::new(emit, mac_key.as_ref());
        out.own(|head| {
            head.extend_from_slice(&begin_file(MAGIC, FORMAT, 64));
            put_bytes(head, &binary);
            head.extend_from_slice(&summary_context(db, project).to_le_bytes());
            put_u64(head, fresh.len() as u64);
        })?;
        let (mut payload, mut resolution) = (Vec::new(), Vec::new());
        for f in &fresh {
            let scope = || anchored(db, project, f.module, &f.reads);
            // An anchor outside the module and what it reads (never made so) would
            // leave the payload empty: an entry that no run can decode.
            let bytes = match f.kept {
                Some(b) => b,
                None => {
                    payload.clear();
                    let summary = module_summary(db, project, f.module);
                    if write_summary(&mut payload, db, &scope(), summary).is_none() {
                        payload.clear();
                    }
                    &payload[..]
                }
            };
            let resolved = match (f.root, f.kept_resolution) {
                (false, _) => None,
                (true, Some(b)) => Some(b),
                (true, None) => {
                    resolution.clear();
                    let resolved = super::resolved_dependencies(db, project, f.module);
                    write_resolution(&mut resolution, db, &scope(), resolved)
                        .map(|()| &resolution[..])
                }
            };
            out.own(|body| {
                put_str(body, f.id);
                body.extend_from_slice(&f.key.to_le_bytes());
                put_strings(body, &f.reads);
                put_bytes(body, bytes);
                put_opt(body, &resolved, |o, b| {
                    o.extend_from_slice(&owners.to_le_bytes());
                    put_bytes(o, b);
                });
            })?;
        }
        out.finish()
    })
}

// ---- the encoding of a summary ----

/// `modules`: the module and those its calls read, in the entry's order: an anchor is
/// written as (module, file) indices into them. `None` when an anchor points elsewhere.
fn write_summary(
    out: &mut Vec<u8>,
    db: &dyn Db,
    modules: &[Module],
    s: &ModuleSummary,
) -> Option<()> {
    let anchor_at = anchor_index(db, modules);
    write_diagnostics(out, &s.fact_diagnostics, &anchor_at)?;
    put_u64(out, s.call_sources.len() as u64);
    for c in &s.call_sources {
        put_str(out, c);
    }
    match &s.root {
        None => out.push(0),
        Some(root) => {
            out.push(1);
            write_identity(out, &root.identity);
            write_diagnostics(out, &root.scope_diagnostics, &anchor_at)?;
            let refs = &root.references;
            put_u64(out, refs.references.len() as u64);
            for r in &refs.references {
                put_str(out, &r.name);
                let t = &r.target;
                put_opt(out, &t.backend, |o, s| put_str(o, s));
                put_opt(out, &t.identity, write_identity);
                put_opt(out, &t.path, |o, s| put_str(o, s));
                put_opt(out, &t.tail, |o, s| put_str(o, s));
                put_str(out, &t.workspace);
                put_opt(out, &t.workspace_key_prefix, |o, s| put_str(o, s));
                write_anchor(out, &r.anchor, &anchor_at)?;
                put_strings(out, &r.via);
                put_opt_or_fail(out, &r.unresolved, |o, d| {
                    write_diagnostic(o, d, &anchor_at)
                })?;
            }
            write_diagnostics(out, &refs.diagnostics, &anchor_at)?;
            put_strings(out, &refs.reads);
        }
    }
    Some(())
}

/// A resolution: its edges (target, then each source), targets, diagnostics, external
/// references and the config rules used. `None` when an anchor points elsewhere.
fn write_resolution(
    out: &mut Vec<u8>,
    db: &dyn Db,
    modules: &[Module],
    res: &super::ResolvedDependencies,
) -> Option<()> {
    let anchor_at = anchor_index(db, modules);
    let source = |out: &mut Vec<u8>, s: &super::EdgeSource| -> Option<()> {
        put_str(out, &s.name);
        put_opt_or_fail(out, &s.anchor, |o, a| write_anchor(o, a, &anchor_at))?;
        out.push(rule_code(s.rule));
        put_strings(out, &s.via);
        Some(())
    };
    // What the graph reads comes first: a chunk whose entries hold decodes only that.
    put_u64(out, res.targets.len() as u64);
    for &t in &res.targets {
        put_u64(out, t.into());
    }
    write_diagnostics(out, &res.diagnostics, &anchor_at)?;
    put_u64(out, res.edges.len() as u64);
    for (target, sources) in &res.edges {
        put_str(out, target);
        put_u64(out, sources.len() as u64);
        for s in sources {
            source(out, s)?;
        }
    }
    put_u64(out, res.external.len() as u64);
    for (state, s) in &res.external {
        put_str(out, state);
        source(out, s)?;
    }
    put_u64(out, res.rules_used.len() as u64);
    for &(add, i) in &res.rules_used {
        out.push(u8::from(add));
        put_u64(out, i as u64);
    }
    Some(())
}

pub const RULES: [super::Rule; 7] = [
    super::Rule::Identity,
    super::Rule::PartialIdentity,
    super::Rule::Path,
    super::Rule::Context,
    super::Rule::Tail,
    super::Rule::Declared,
    super::Rule::FlatSuffix,
];

/// The index of `rule` in [`RULES`], which the decoder reads back. A match, so that a
/// new rule does not compile until it has a code (a code past the table is refused).
pub fn rule_code(rule: super::Rule) -> u8 {
    use super::Rule;
    match rule {
        Rule::Identity => 0,
        Rule::PartialIdentity => 1,
        Rule::Path => 2,
        Rule::Context => 3,
        Rule::Tail => 4,
        Rule::Declared => 5,
        Rule::FlatSuffix => 6,
    }
}

fn read_resolution(
    r: &mut Reader<'_, ()>,
    db: &dyn Db,
    modules: &[Module],
) -> R<super::ResolvedDependencies> {
    fn source(r: &mut Reader<'_, ()>, db: &dyn Db, modules: &[Module]) -> R<super::EdgeSource> {
        Ok(super::EdgeSource {
            name: r.string()?,
            anchor: r.opt_with(|r| read_anchor(r, db, modules))?,
            rule: *RULES.get(usize::from(r.u8()?)).ok_or(())?,
            via: read_strings(r)?,
        })
    }
    let mut res = super::ResolvedDependencies::default();
    (res.targets, res.diagnostics) = read_resolution_head(r, db, modules)?;
    for _ in 0..r.len()? {
        let target = r.string()?;
        let n = r.len()?;
        let sources = (0..n)
            .map(|_| source(r, db, modules))
            .collect::<R<Vec<_>>>()?;
        res.edges.insert(target, sources);
    }
    let n = r.len()?;
    res.external = (0..n)
        .map(|_| Ok((r.string()?, source(r, db, modules)?)))
        .collect::<R<_>>()?;
    let n = r.len()?;
    res.rules_used = (0..n)
        .map(|_| {
            let add = match r.u8()? {
                0 => false,
                1 => true,
                _ => return Err(()),
            };
            Ok((add, usize::try_from(r.u64()?).map_err(|_| ())?))
        })
        .collect::<R<_>>()?;
    Ok(res)
}

/// The start of a resolution's encoding: its targets and diagnostics.
fn read_resolution_head(
    r: &mut Reader<'_, ()>,
    db: &dyn Db,
    modules: &[Module],
) -> R<(Vec<u32>, Vec<Diagnostic>)> {
    let n = r.len()?;
    let targets = (0..n)
        .map(|_| u32::try_from(r.u64()?).map_err(|_| ()))
        .collect::<R<_>>()?;
    Ok((targets, read_diagnostics(r, db, modules)?))
}

/// Where an anchor's file is among the files of `modules`: (module, file) indices.
fn anchor_index<'a>(
    db: &'a dyn Db,
    modules: &'a [Module],
) -> impl Fn(&Anchor) -> Option<(usize, usize)> + 'a {
    let files: Vec<&[File]> = modules.iter().map(|&m| &m.files(db)[..]).collect();
    move |a: &Anchor| {
        files
            .iter()
            .enumerate()
            .find_map(|(i, fs)| fs.iter().position(|&f| f == a.file).map(|j| (i, j)))
    }
}

type AnchorAt<'a> = dyn Fn(&Anchor) -> Option<(usize, usize)> + 'a;

/// [`put_opt`] for a writer that can fail (an anchor outside the entry's modules).
fn put_opt_or_fail<T>(
    out: &mut Vec<u8>,
    v: &Option<T>,
    f: impl FnOnce(&mut Vec<u8>, &T) -> Option<()>,
) -> Option<()> {
    match v {
        None => out.push(0),
        Some(x) => {
            out.push(1);
            f(out, x)?;
        }
    }
    Some(())
}

fn put_strings(out: &mut Vec<u8>, items: &[String]) {
    put_u64(out, items.len() as u64);
    for s in items {
        put_str(out, s);
    }
}

fn write_identity(out: &mut Vec<u8>, i: &StateIdentity) {
    put_str(out, &i.backend);
    put_u64(out, i.fields.len() as u64);
    for (k, v) in i.fields.iter() {
        put_str(out, k);
        put_str(out, v);
    }
    out.push(u8::from(i.partial));
    put_opt(out, &i.workspace_prefix, |o, s| put_str(o, s));
}

fn write_anchor(out: &mut Vec<u8>, a: &Anchor, at: &AnchorAt<'_>) -> Option<()> {
    let (m, f) = at(a)?;
    put_u64(out, m as u64);
    put_u64(out, f as u64);
    terraci_db::store::write_item(out, &a.item);
    put_u64(out, a.node.0.into());
    Some(())
}

fn write_diagnostics(out: &mut Vec<u8>, ds: &[Diagnostic], at: &AnchorAt<'_>) -> Option<()> {
    put_u64(out, ds.len() as u64);
    for d in ds {
        write_diagnostic(out, d, at)?;
    }
    Some(())
}

fn write_diagnostic(out: &mut Vec<u8>, d: &Diagnostic, at: &AnchorAt<'_>) -> Option<()> {
    terraci_db::store::write_diagnostic_head(out, d);
    put_strings(out, &d.details);
    put_opt_or_fail(out, &d.anchor, |o, a| write_anchor(o, a, at))
}

fn read_summary(r: &mut Reader<'_, ()>, db: &dyn Db, modules: &[Module]) -> R<ModuleSummary> {
    let head = read_head(r, db, modules)?;
    let root = match head.root {
        None => None,
        Some((identity, scope_diagnostics)) => {
            let n = r.len()?;
            let mut references = Vec::with_capacity(n);
            for _ in 0..n {
                references.push(StateReference {
                    name: r.string()?,
                    target: StateTarget {
                        backend: r.opt_with(|r| r.string())?,
                        identity: r.opt_with(read_identity)?,
                        path: r.opt_with(|r| r.string())?,
                        tail: r.opt_with(|r| r.string())?,
                        workspace: r.string()?,
                        workspace_key_prefix: r.opt_with(|r| r.string())?,
                    },
                    anchor: read_anchor(r, db, modules)?,
                    via: read_strings(r)?,
                    unresolved: r.opt_with(|r| read_diagnostic(r, db, modules))?,
                });
            }
            let diagnostics = read_diagnostics(r, db, modules)?;
            let reads = read_strings(r)?;
            Some(RootSummary {
                identity,
                scope_diagnostics,
                references: ModuleReferences {
                    references,
                    diagnostics,
                    reads,
                },
            })
        }
    };
    Ok(ModuleSummary {
        fact_diagnostics: head.fact_diagnostics,
        call_sources: head.call_sources,
        root,
    })
}

/// The start of a summary's encoding: everything but a root's references.
fn read_head(r: &mut Reader<'_, ()>, db: &dyn Db, modules: &[Module]) -> R<SummaryHead> {
    let fact_diagnostics = read_diagnostics(r, db, modules)?;
    let call_sources = read_strings(r)?;
    let root = match r.u8()? {
        0 => None,
        1 => Some((read_identity(r)?, read_diagnostics(r, db, modules)?)),
        _ => return Err(()),
    };
    Ok(SummaryHead {
        fact_diagnostics,
        call_sources,
        root,
    })
}

fn read_strings(r: &mut Reader<'_, ()>) -> R<Vec<String>> {
    let n = r.len()?;
    (0..n).map(|_| r.string()).collect()
}

fn read_identity(r: &mut Reader<'_, ()>) -> R<StateIdentity> {
    let backend = r.string()?;
    let n = r.len()?;
    let mut fields = terraci_db::owners::Fields::default();
    for _ in 0..n {
        let name = r.string()?;
        // The fields are the backend's own names: the static ones are found again.
        let field = super::identity::field_name(&name).ok_or(())?;
        fields.insert(field, r.string()?);
    }
    let partial = match r.u8()? {
        0 => false,
        1 => true,
        _ => return Err(()),
    };
    Ok(StateIdentity {
        backend,
        fields,
        partial,
        workspace_prefix: r.opt_with(|r| r.string())?,
    })
}

fn read_anchor(r: &mut Reader<'_, ()>, db: &dyn Db, modules: &[Module]) -> R<Anchor> {
    let m = r.u64()? as usize;
    let f = r.u64()? as usize;
    let file = *modules.get(m).ok_or(())?.files(db).get(f).ok_or(())?;
    Ok(Anchor {
        file,
        item: r.item()?,
        node: NodeId(u32::try_from(r.u64()?).map_err(|_| ())?),
    })
}

fn read_diagnostics(r: &mut Reader<'_, ()>, db: &dyn Db, modules: &[Module]) -> R<Vec<Diagnostic>> {
    let n = r.len()?;
    (0..n).map(|_| read_diagnostic(r, db, modules)).collect()
}

fn read_diagnostic(r: &mut Reader<'_, ()>, db: &dyn Db, modules: &[Module]) -> R<Diagnostic> {
    let mut d = r.diagnostic_head()?;
    d.details = read_strings(r)?;
    d.anchor = r.opt_with(|r| read_anchor(r, db, modules))?;
    Ok(d)
}
