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
use crate::files::{Module, Project};

/// Parses, extracts facts and resolves references of every module in parallel, and
/// brings the project's owners input up to date ([`crate::resolve::sync_owners`]).
pub fn warm_up(db: &mut Database, project: Project) {
    let modules: Vec<Module> = project.modules(db).clone();
    // Two passes: the second (`resolved_dependencies`) needs the index of every module's
    // state identity, which the first pass fills in parallel; in one pass, one worker
    // would compute the whole index while the others wait for it.
    for_each_module(db, &modules, |db, m| {
        crate::resolve::module_summary(db, project, m);
    });
    crate::resolve::sync_owners(db, project);
    for_each_module(db, &modules, |db, m| {
        if m.info(db).is_root() {
            crate::resolve::resolved_dependencies(db, project, m);
        }
    });
}

fn for_each_module(db: &Database, modules: &[Module], f: impl Fn(&Database, Module) + Sync) {
    // A database handle is `Send` but not `Sync`: each worker takes its own clone.
    let shared = Mutex::new(db.clone());
    modules.par_iter().with_min_len(16).for_each_init(
        || {
            shared
                .lock()
                .expect("no worker panics while cloning")
                .clone()
        },
        |db, &m| f(db, m),
    );
}
