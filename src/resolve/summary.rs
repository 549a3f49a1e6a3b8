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

use crate::db::Db;
use crate::diagnostic::{Anchor, Diagnostic};
use crate::facts::cache::{
    begin_file, content_hash, open_file, put_bytes, put_opt, put_str, put_u64, read_entries,
    Reader, R,
};
use crate::files::{File, Module, Project};
use crate::owners::StateIdentity;
use crate::syntax::NodeId;
use crate::system::System;

use super::references::{ModuleReferences, StateReference, StateTarget};

const MAGIC: &[u8; 16] = b"terraci-summary\0";
/// Bump when the encoding below changes, or what a summary holds.
const FORMAT: u64 = 1;
use crate::facts::cache::SUMMARY_FILE_NAME as FILE_NAME;

/// What the stages after resolution need of one module.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModuleSummary {
    /// The diagnostics of the module's facts.
    pub fact_diagnostics: Vec<Diagnostic>,
    /// The sources of the module's calls that are literal strings.
    pub call_sources: Vec<String>,
    /// For a root module.
    pub root: Option<RootSummary>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootSummary {
    pub identity: StateIdentity,
    pub scope_diagnostics: Vec<Diagnostic>,
    pub references: ModuleReferences,
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

/// The loaded cache: entries in module id order over one blob.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Summaries {
    blob: Vec<u8>,
    entries: Vec<SummaryEntry>,
}

#[derive(Debug, PartialEq, Eq)]
struct SummaryEntry {
    id: std::ops::Range<usize>,
    key: u64,
    reads: Vec<String>,
    payload: std::ops::Range<usize>,
}

impl Summaries {
    fn get(&self, id: &str) -> Option<&SummaryEntry> {
        let i = self
            .entries
            .binary_search_by(|e| self.blob[e.id.clone()].cmp(id.as_bytes()))
            .ok()?;
        Some(&self.entries[i])
    }
}

/// The cache as a salsa input: [`module_summary`] reads it.
#[salsa::input(singleton, debug)]
pub struct SummaryCache {
    #[returns(ref)]
    pub entries: Arc<Summaries>,
}

/// Sets `entries` (what [`load`] gave) as the cache `db` reads; `HIGH` as the fact
/// cache, for the same reason.
pub fn attach(db: &crate::db::Database, entries: Arc<Summaries>) {
    let _singleton = SummaryCache::builder(entries)
        .durability(salsa::Durability::HIGH)
        .new(db);
}

fn cached_summary(db: &dyn Db, project: Project, module: Module) -> Option<ModuleSummary> {
    let cache = SummaryCache::try_get(db)?;
    let summaries = cache.entries(db);
    let entry = summaries.get(&module.info(db).id)?;
    if summary_key(db, project, module, &entry.reads)? != entry.key {
        return None;
    }
    let mut modules = vec![module];
    for id in &entry.reads {
        modules.extend(super::calls::find_module(db, project, id));
    }
    let mut r = Reader::over(&summaries.blob[entry.payload.clone()]);
    let summary = read_summary(&mut r, db, &modules).ok()?;
    r.at_end().then_some(summary)
}

/// What everything a summary depends on hashes to; `None` when a file's contents have
/// no identity (unreadable, not UTF-8): such a module is not cached.
fn summary_key(db: &dyn Db, project: Project, module: Module, reads: &[String]) -> Option<u64> {
    let mut h = crate::files::hasher();
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
    settings: &crate::cache::CacheSettings,
) -> Result<Summaries, String> {
    let path = settings.dir.join(FILE_NAME);
    let Ok(bytes) = system.read(&path) else {
        return Ok(Summaries::default());
    };
    parse(bytes, &crate::facts::cache::binary_id(system))
        .map_err(|why| format!("ignoring the summary cache `{path}` ({why}); rebuilding it"))
}

fn parse(blob: Vec<u8>, binary: &[u8]) -> Result<Summaries, &'static str> {
    let mut r = open_file(&blob, MAGIC, FORMAT, "not a terraci summary cache")?;
    if r.bytes().map_err(|_| "truncated")? != binary {
        return Err("written by another build of terraci");
    }
    let entries = read_entries(&mut r, |r, last: Option<&SummaryEntry>| {
        Ok(SummaryEntry {
            id: r.sorted_key(last.map(|e| &e.id))?,
            key: r.fixed_u64()?,
            reads: read_strings(r)?,
            payload: r.range()?,
        })
    })?;
    Ok(Summaries { blob, entries })
}

/// Writes the summary of every module of `project` unless the cache holds them already
/// but a few ([`crate::facts::cache::worth_rewriting`]: those are computed again next
/// time). A module whose key matches its old entry keeps the old entry's bytes.
pub fn save(
    db: &dyn Db,
    system: &dyn System,
    settings: &crate::cache::CacheSettings,
    project: Project,
) -> std::io::Result<()> {
    let old = SummaryCache::try_get(db).map(|c| c.entries(db).clone());
    let modules = project.modules(db);
    // (module id, key, the modules its calls read, the old entry's bytes if still valid)
    type Fresh<'a> = (&'a str, u64, Vec<String>, Option<&'a [u8]>);
    let mut fresh: Vec<Fresh<'_>> = Vec::new();
    for &m in modules {
        let summary = module_summary(db, project, m);
        let reads = summary
            .root
            .as_ref()
            .map(|r| r.references.reads.clone())
            .unwrap_or_default();
        let Some(key) = summary_key(db, project, m, &reads) else {
            continue;
        };
        let id = m.info(db).id.as_str();
        let kept = old.as_ref().and_then(|o| {
            let e = o.get(id)?;
            (e.key == key && e.reads == reads).then(|| &o.blob[e.payload.clone()])
        });
        fresh.push((id, key, reads, kept));
    }
    let stale = fresh.iter().filter(|f| f.3.is_none()).count();
    let old_len = old.as_ref().map(|o| o.entries.len());
    if !crate::facts::cache::worth_rewriting(old_len, fresh.len(), stale) {
        return Ok(());
    }
    let mut body = Vec::with_capacity(1 << 20);
    let mut payload = Vec::new();
    let mut count = 0u64;
    for (id, key, reads, kept) in &fresh {
        let bytes = match kept {
            Some(b) => *b,
            None => {
                payload.clear();
                let m = super::calls::find_module(db, project, id)
                    .expect("a module of the project is found by its id");
                let mut scope = vec![m];
                scope.extend(
                    reads
                        .iter()
                        .filter_map(|r| super::calls::find_module(db, project, r)),
                );
                let summary = module_summary(db, project, m);
                if write_summary(&mut payload, db, &scope, summary).is_none() {
                    continue;
                }
                &payload[..]
            }
        };
        put_str(&mut body, id);
        body.extend_from_slice(&key.to_le_bytes());
        put_strings(&mut body, reads);
        put_bytes(&mut body, bytes);
        count += 1;
    }
    let mut out = begin_file(MAGIC, FORMAT, body.len() + 64);
    put_bytes(&mut out, &crate::facts::cache::binary_id(system));
    put_u64(&mut out, count);
    out.extend_from_slice(&body);
    drop(body);
    let sum = crate::facts::cache::seal_parts(&[&out]);
    out.extend_from_slice(&sum);
    system.write_atomic(&settings.dir.join(FILE_NAME), &out)?;
    Ok(())
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
    let files: Vec<&[File]> = modules.iter().map(|&m| &m.files(db)[..]).collect();
    let anchor_at = |a: &Anchor| -> Option<(usize, usize)> {
        files
            .iter()
            .enumerate()
            .find_map(|(i, fs)| fs.iter().position(|&f| f == a.file).map(|j| (i, j)))
    };
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
                match &r.unresolved {
                    None => out.push(0),
                    Some(d) => {
                        out.push(1);
                        write_diagnostic(out, d, &anchor_at)?;
                    }
                }
            }
            write_diagnostics(out, &refs.diagnostics, &anchor_at)?;
            put_strings(out, &refs.reads);
        }
    }
    Some(())
}

type AnchorAt<'a> = dyn Fn(&Anchor) -> Option<(usize, usize)> + 'a;

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
    crate::facts::cache::write_item(out, &a.item);
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
    crate::facts::cache::write_diagnostic_head(out, d);
    put_strings(out, &d.details);
    match &d.anchor {
        None => out.push(0),
        Some(a) => {
            out.push(1);
            write_anchor(out, a, at)?;
        }
    }
    Some(())
}

fn read_summary(r: &mut Reader<'_, ()>, db: &dyn Db, modules: &[Module]) -> R<ModuleSummary> {
    let fact_diagnostics = read_diagnostics(r, db, modules)?;
    let call_sources = read_strings(r)?;
    let root = match r.u8()? {
        0 => None,
        1 => {
            let identity = read_identity(r)?;
            let scope_diagnostics = read_diagnostics(r, db, modules)?;
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
        _ => return Err(()),
    };
    Ok(ModuleSummary {
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
    let mut fields = crate::owners::Fields::default();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::EvalArgs;
    use crate::system::MemorySystem;
    use crate::workspace::{load_workspace, Workspace};

    const CONFIG: &str =
        "structure:\n  pattern: \"{env}/{module}\"\nlibrary_modules:\n  paths: [lib]\n";
    const LIB: &str = "variable \"target\" {}\ndata \"terraform_remote_state\" \"t\" {\n  backend = \"s3\"\n  config = {\n    bucket = \"b\"\n    key    = \"stage/${var.target}/terraform.tfstate\"\n  }\n}\n";
    const APP: &str = "module \"net\" {\n  source = \"../../lib/net\"\n  target = \"vpc\"\n}\n";

    fn backend(id: &str) -> String {
        format!("terraform {{\n  backend \"s3\" {{\n    bucket = \"b\"\n    key    = \"{id}/terraform.tfstate\"\n  }}\n}}\n")
    }

    fn project() -> MemorySystem {
        let fs = MemorySystem::new();
        fs.write_file("/p/.terraci.yaml", CONFIG);
        fs.write_file("/p/stage/vpc/main.tf", backend("stage/vpc"));
        fs.write_file("/p/stage/dns/main.tf", backend("stage/dns"));
        fs.write_file("/p/stage/app/main.tf", APP);
        // A broken local: its diagnostic, anchored in the file, comes back from the cache.
        fs.write_file(
            "/p/stage/dns/locals.tf",
            "locals {\n  x = nosuchfunction(1)\n}\ndata \"terraform_remote_state\" \"v\" {\n  backend = \"s3\"\n  config = {\n    bucket = \"b\"\n    key    = \"stage/${local.x}/terraform.tfstate\"\n  }\n}\n",
        );
        fs.write_file("/p/lib/net/main.tf", LIB);
        fs
    }

    fn load(fs: &MemorySystem, cache: bool, vars: &[&str]) -> Workspace {
        let mut global = crate::testing::global_args();
        global.no_cache = !cache;
        let eval = EvalArgs {
            var: vars.iter().map(|v| (*v).to_owned()).collect(),
            ..EvalArgs::default()
        };
        load_workspace(fs, &global, &eval).expect("the project loads")
    }

    /// What a user sees of a run: the edges and every diagnostic with its place.
    fn outcome(ws: &Workspace) -> (Vec<String>, Vec<String>) {
        let edges = crate::graph::dependency_graph(&ws.db, ws.project)
            .edges()
            .map(|(a, b)| format!("{a} -> {b}"))
            .collect();
        let diagnostics = ws
            .all_diagnostics()
            .iter()
            .map(|d| d.render_human_styled(None, false))
            .collect();
        (edges, diagnostics)
    }

    /// The modules the summary cache answered for.
    fn answered(ws: &Workspace) -> Vec<String> {
        ws.project
            .modules(&ws.db)
            .iter()
            .filter(|&&m| cached_summary(&ws.db, ws.project, m).is_some())
            .map(|m| m.info(&ws.db).id.clone())
            .collect()
    }

    #[test]
    fn a_repeat_run_reads_summaries_and_never_a_stale_one() {
        let fs = project();
        let first = load(&fs, true, &[]);
        let expected = outcome(&first);
        assert_eq!(expected.0, ["stage/app -> stage/vpc"]);
        assert!(
            expected.1.iter().any(|d| d.contains("locals.tf:2")),
            "{:?}",
            expected.1
        );
        assert!(answered(&first).is_empty(), "no cache yet");

        // Nothing changed: every module is answered from the cache, with the same result.
        let again = load(&fs, true, &[]);
        assert_eq!(
            answered(&again),
            ["lib/net", "stage/app", "stage/dns", "stage/vpc"]
        );
        assert_eq!(outcome(&again), expected);

        // The called library changes: its caller is evaluated again, and follows.
        fs.write_file(
            "/p/lib/net/main.tf",
            LIB.replace("stage/${var.target}", "stage/dns"),
        );
        let edited = load(&fs, true, &[]);
        assert_eq!(answered(&edited), ["stage/dns", "stage/vpc"]);
        assert_eq!(outcome(&edited).0, ["stage/app -> stage/dns"]);
        assert_eq!(outcome(&edited), outcome(&load(&fs, false, &[])));

        // A file added to a module, and a `--var`: not answered from the cache either.
        // (Two stale entries of four were not worth rewriting the cache for: the
        // library and its caller are computed again too, never answered stale.)
        fs.write_file("/p/stage/vpc/extra.tf", "# more\n");
        let added = load(&fs, true, &[]);
        assert_eq!(answered(&added), ["stage/dns"]);
        assert_eq!(outcome(&added), outcome(&load(&fs, false, &[])));
        let with_var = load(&fs, true, &["target=dns"]);
        assert!(answered(&with_var).is_empty());
        assert_eq!(
            outcome(&with_var),
            outcome(&load(&fs, false, &["target=dns"]))
        );
    }

    #[test]
    fn a_damaged_summary_cache_is_ignored_with_a_notice() {
        let fs = project();
        let expected = outcome(&load(&fs, true, &[]));
        let path = "/p/.terraci/cache/summaries.bin";
        let mut bytes = fs.read(camino::Utf8Path::new(path)).expect("written");
        let at = bytes.len() / 2;
        bytes[at] ^= 0xff;
        fs.write_file(path, bytes);
        let damaged = load(&fs, true, &[]);
        assert!(
            damaged
                .notices
                .iter()
                .any(|n| n.contains("ignoring the summary cache")),
            "{:?}",
            damaged.notices
        );
        assert_eq!(outcome(&damaged), expected);
        assert_eq!(answered(&load(&fs, true, &[])).len(), 4, "rewritten");
    }
}
