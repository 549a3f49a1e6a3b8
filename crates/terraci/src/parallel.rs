//! Parallel warm-up: runs the per-module queries on every core before the driver reads
//! their results in module order; and [`map_ordered`], an ordered parallel map for
//! the other work that goes per module (locating every edge's source).
//!
//! Input: a [`Project`] whose inputs are set. Output: nothing; the memos it fills are what
//! the sequential code after it reads. Each worker owns a clone of the database (clones
//! share storage), so results are the same values a sequential run computes: only the
//! order in which memos are filled changes, never what reaches the output.

use std::sync::Mutex;

use rayon::prelude::*;

use terraci_db::db::Database;
use terraci_db::files::Project;

/// Parses, extracts facts and resolves references of every module in parallel, and
/// brings the project's owners input up to date ([`terraci_engine::resolve::sync_owners`]),
/// unless it was never set and no resolution needs it.
///
/// Work goes out by chunk ([`terraci_engine::chunk`]): a worker that has a chunk's modules'
/// summaries (or resolutions) also makes the chunk queries that concatenate them, which
/// the driver would otherwise make one after another on one core. Within a chunk that
/// the summary cache does not answer, each module is a task of its own, so the cores
/// stay busy when the chunks are few or uneven.
///
/// Unless `keep_texts`, each module lets go of the texts discovery read as soon as its
/// summary is made, or is read from the cache ([`terraci_db::files::UnreadText::release`]):
/// after that only a diagnostic's source line (or an edge's, for the JSON views) reads a
/// text, and reads it anew.
pub(crate) fn warm_up(db: &mut Database, project: Project, keep_texts: bool) {
    let chunks = terraci_engine::chunk::chunk_count(db, project) as u32;
    // Two passes: the second (`resolved_dependencies`) needs the index of every module's
    // state identity, which the first pass fills in parallel; in one pass, one worker
    // would compute the whole index while the others wait for it.
    // A chunk query computes the summaries of its modules unless the summary cache
    // holds them all (`resolve::summary::held_heads`), and so for resolutions.
    for_each_chunk(db, project, chunks, |db, chunk| {
        // A chunk the cache does not answer computes its modules' summaries first, each
        // a task of its own: a project of a few chunks would otherwise leave a core idle
        // once the others are taken (200 modules make three chunks and a sliver).
        let modules = terraci_engine::chunk::chunk_modules(db, chunk);
        let release = |db: &Database, module: terraci_db::files::Module| {
            if !keep_texts {
                for file in module.files(db) {
                    file.contents(db).release();
                }
            }
        };
        if terraci_engine::resolve::summary::held_heads(db, chunk).is_none() {
            for_each(db, modules, |db, &module| {
                terraci_engine::resolve::module_summary(db, project, module);
                release(db, module);
            });
        } else {
            // The cache answers for the chunk: a text read (a file it did not know by
            // its stamp) is not needed either.
            for &module in modules {
                release(db, module);
            }
        }
        terraci_engine::resolve::chunk_identities_hash(db, chunk);
        terraci_engine::resolve::chunk_diagnostics(db, chunk);
    });
    // A load whose every resolution is read from the summary cache (checked against the
    // identities' hash) does not build the owners index; once built (`watch` syncs it
    // after every batch), it is always kept in sync.
    let unbuilt = project.owners(db).is_none();
    if !(unbuilt && terraci_engine::resolve::summary::every_resolution_holds(db, project)) {
        terraci_engine::resolve::sync_owners(db, project);
    }
    for_each_chunk(db, project, chunks, |db, chunk| {
        if !terraci_engine::resolve::summary::dependencies_hold(db, chunk) {
            let roots: Vec<_> = terraci_engine::chunk::chunk_modules(db, chunk)
                .iter()
                .filter(|m| m.info(db).is_root())
                .collect();
            for_each(db, &roots, |db, &&module| {
                terraci_engine::resolve::resolved_dependencies(db, project, module);
            });
        }
        terraci_engine::graph::chunk_dependencies(db, chunk);
    });
}

/// `f` of every item, in order, computed in parallel: each worker has its own clone of
/// `db` and its own `W` (a cache of the worker's, say), made by `W::default()`.
pub(crate) fn map_ordered<T: Send, W: Default, R: Send>(
    db: &Database,
    items: Vec<T>,
    f: impl Fn(&Database, &mut W, T) -> R + Sync,
) -> Vec<R> {
    let shared = Mutex::new(db.clone());
    items
        .into_par_iter()
        .with_min_len(32)
        .map_init(
            || (worker_db(&shared), W::default()),
            |(db, state), item| f(db, state, item),
        )
        .collect()
}

/// `f` on every item, in parallel, each worker with its own clone of `db`.
fn for_each<T: Sync>(db: &Database, items: &[T], f: impl Fn(&Database, &T) + Sync) {
    let shared = Mutex::new(db.clone());
    items
        .par_iter()
        .for_each_init(|| worker_db(&shared), |db, item| f(db, item));
}

fn for_each_chunk(
    db: &Database,
    project: Project,
    chunks: u32,
    f: impl Fn(&Database, terraci_engine::chunk::ModuleChunk<'_>) + Sync,
) {
    let indices: Vec<u32> = (0..chunks).collect();
    for_each(db, &indices, |db, &index| {
        f(
            db,
            terraci_engine::chunk::ModuleChunk::new(db, project, index),
        )
    });
}

/// A worker's own handle: a database handle is `Send` but not `Sync`, so each worker
/// clones the shared one.
fn worker_db(shared: &Mutex<Database>) -> Database {
    shared
        .lock()
        .expect("no worker panics while cloning")
        .clone()
}
