//! Parallel warm-up: runs the per-module queries on every core before the driver reads
//! their results in module order.
//!
//! Input: a [`Project`] whose inputs are set. Output: nothing; the memos it fills are what
//! the sequential code after it reads. Each worker owns a clone of the database (clones
//! share storage), so results are the same values a sequential run computes: only the
//! order in which memos are filled changes, never what reaches the output.

use std::sync::Mutex;

use rayon::prelude::*;

use crate::db::Database;
use crate::files::Project;

/// Parses, extracts facts and resolves references of every module in parallel, and
/// brings the project's owners input up to date ([`crate::resolve::sync_owners`]),
/// unless it was never set and no resolution needs it.
///
/// Work goes out by chunk ([`crate::chunk`]): a worker that has a chunk's modules'
/// summaries (or resolutions) also makes the chunk queries that concatenate them, which
/// the driver would otherwise make one after another on one core.
pub fn warm_up(db: &mut Database, project: Project) {
    let chunks = crate::chunk::chunk_count(db, project) as u32;
    // Two passes: the second (`resolved_dependencies`) needs the index of every module's
    // state identity, which the first pass fills in parallel; in one pass, one worker
    // would compute the whole index while the others wait for it.
    // A chunk query computes the summaries of its modules unless the summary cache
    // holds them all (`resolve::summary::held_heads`), and so for resolutions.
    for_each_chunk(db, project, chunks, |db, chunk| {
        crate::resolve::chunk_identities_hash(db, chunk);
        crate::resolve::chunk_diagnostics(db, chunk);
    });
    // A load whose every resolution is read from the summary cache (checked against the
    // identities' hash) does not build the owners index; once built (`watch` syncs it
    // after every batch), it is always kept in sync.
    let unbuilt = project.owners(db).is_none();
    if !(unbuilt && crate::resolve::summary::every_resolution_holds(db, project)) {
        crate::resolve::sync_owners(db, project);
    }
    for_each_chunk(db, project, chunks, |db, chunk| {
        crate::graph::chunk_dependencies(db, chunk);
    });
}

fn for_each_chunk(
    db: &Database,
    project: Project,
    chunks: u32,
    f: impl Fn(&Database, crate::chunk::ModuleChunk<'_>) + Sync,
) {
    // A database handle is `Send` but not `Sync`: each worker takes its own clone.
    let shared = Mutex::new(db.clone());
    (0..chunks).into_par_iter().for_each_init(
        || {
            shared
                .lock()
                .expect("no worker panics while cloning")
                .clone()
        },
        |db, index| f(db, crate::chunk::ModuleChunk::new(&*db, project, index)),
    );
}
