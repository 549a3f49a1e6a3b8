//! The project's module lists that project-wide queries walk: the root modules in id
//! order ([`roots`]) and fixed-size chunks of all modules ([`chunks`]).
//!
//! Input: the project's module list. Each project-wide query reads one memo per chunk of
//! [`CHUNK_SIZE`] consecutive modules and concatenates them; the per-chunk query sits
//! beside the query it serves (`chunk_diagnostics` in `crate::resolve`, `chunk_identities`
//! beside `crate::resolve::identity_index`, `chunk_dependencies` beside
//! `crate::graph::dependency_graph`). Invalidated by the chunk's modules.
//!
//! Why chunks: a project-wide query that reads one memo per module must check all of
//! them after any edit, since the edited file has made it volatile (low durability):
//! at 10,000 modules that check alone is milliseconds, on every keystroke in `watch`.
//! Reading one memo per chunk instead, it checks about 160 memos whose inputs have not
//! changed (one comparison each: they are high durability) and one chunk that holds the
//! edited module, whose 64 modules it checks one by one.

use std::sync::Arc;

use terraci_db::db::Db;
use terraci_db::files::{Module, Project};

/// Modules per chunk: large enough that a project of 10,000 modules has few chunks, small
/// enough that checking the edited module's chunk is cheap.
pub const CHUNK_SIZE: usize = 64;

/// Chunk `index` of a project's module list: modules `index * CHUNK_SIZE ..`.
#[salsa::interned(debug)]
pub struct ModuleChunk<'db> {
    #[returns(copy)]
    pub(crate) project: Project,
    #[returns(copy)]
    pub(crate) index: u32,
}

/// Every chunk of the project's module list, in order.
pub fn chunks(db: &dyn Db, project: Project) -> Vec<ModuleChunk<'_>> {
    (0..chunk_count(db, project) as u32)
        .map(|index| ModuleChunk::new(db, project, index))
        .collect()
}

/// How many chunks the project's module list makes.
pub fn chunk_count(db: &dyn Db, project: Project) -> usize {
    project.modules(db).len().div_ceil(CHUNK_SIZE)
}

/// The modules of `chunk`, in the project's order.
pub fn chunk_modules<'db>(db: &'db dyn Db, chunk: ModuleChunk<'db>) -> &'db [Module] {
    let modules = chunk.project(db).modules(db);
    let start = (chunk.index(db) as usize * CHUNK_SIZE).min(modules.len());
    let end = (start + CHUNK_SIZE).min(modules.len());
    &modules[start..end]
}

/// The graph's nodes: root modules, sorted by id. Changes only when the module set
/// does, so the ids are shared (not copied) by every graph built over them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Roots {
    pub modules: Vec<Module>,
    pub ids: Arc<[String]>,
}

#[salsa::tracked(returns(ref))]
pub fn roots(db: &dyn Db, project: Project) -> Roots {
    let mut roots: Vec<(&str, Module)> = project
        .modules(db)
        .iter()
        .map(|&m| (m.info(db).id.as_str(), m))
        .filter(|&(_, m)| m.info(db).is_root())
        .collect();
    // The project keeps its modules sorted by id; sorting again is a no-op check.
    if !roots.is_sorted_by(|a, b| a.0 <= b.0) {
        roots.sort_by(|a, b| a.0.cmp(b.0));
    }
    Roots {
        ids: roots.iter().map(|(id, _)| (*id).to_owned()).collect(),
        modules: roots.into_iter().map(|(_, m)| m).collect(),
    }
}
