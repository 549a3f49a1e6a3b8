//! Project-wide results assembled from fixed-size chunks of modules.
//!
//! Input: the project's module list. Output, per chunk of [`CHUNK_SIZE`] consecutive
//! modules: the chunk's diagnostics ([`chunk_diagnostics`]), state identities
//! ([`chunk_identities`]) and dependency lists ([`chunk_dependencies`]), which the
//! project-wide queries concatenate. Invalidated by the chunk's modules.
//!
//! Why chunks: a project-wide query that reads one memo per module must check all of
//! them after any edit, since the edited file has made it volatile (low durability):
//! at 10,000 modules that check alone is milliseconds, on every keystroke in `watch`.
//! Reading one memo per chunk instead, it checks about 160 memos whose inputs have not
//! changed (one comparison each: they are high durability) and one chunk that holds the
//! edited module, whose 64 modules it checks one by one.

use crate::db::Db;
use crate::diagnostic::Diagnostic;
use crate::files::{Module, Project};
use crate::resolve::StateIdentity;

/// Modules per chunk: large enough that a project of 10,000 modules has few chunks, small
/// enough that checking the edited module's chunk is cheap.
pub const CHUNK_SIZE: usize = 64;

/// Chunk `index` of a project's module list: modules `index * CHUNK_SIZE ..`.
#[salsa::interned(debug)]
pub struct ModuleChunk<'db> {
    #[returns(copy)]
    pub project: Project,
    #[returns(copy)]
    pub index: u32,
}

/// Every chunk of the project's module list, in order.
pub fn chunks(db: &dyn Db, project: Project) -> Vec<ModuleChunk<'_>> {
    let count = project.modules(db).len().div_ceil(CHUNK_SIZE);
    (0..count as u32)
        .map(|index| ModuleChunk::new(db, project, index))
        .collect()
}

/// The modules of `chunk`, in the project's order.
pub fn chunk_modules<'db>(db: &'db dyn Db, chunk: ModuleChunk<'db>) -> &'db [Module] {
    let modules = chunk.project(db).modules(db);
    let start = (chunk.index(db) as usize * CHUNK_SIZE).min(modules.len());
    let end = (start + CHUNK_SIZE).min(modules.len());
    &modules[start..end]
}

/// The fact and scope diagnostics of a chunk's modules, each with its module, in module
/// order (resolution diagnostics come with the graph).
#[salsa::tracked(returns(ref))]
pub fn chunk_diagnostics<'db>(db: &'db dyn Db, chunk: ModuleChunk<'db>) -> Vec<Diagnostic> {
    let project = chunk.project(db);
    let mut out = Vec::new();
    for &m in chunk_modules(db, chunk) {
        let info = m.info(db);
        let with_module = |d: &Diagnostic| d.clone().with_module(info.id.clone());
        out.extend(
            crate::facts::module_facts(db, m)
                .diagnostics
                .iter()
                .map(with_module),
        );
        if info.is_root() {
            out.extend(
                crate::resolve::module_scope(db, project, m)
                    .diagnostics
                    .iter()
                    .map(with_module),
            );
        }
    }
    out
}

/// The root modules of a chunk: (id, state identity), in module order.
#[salsa::tracked(returns(ref))]
pub fn chunk_identities<'db>(
    db: &'db dyn Db,
    chunk: ModuleChunk<'db>,
) -> Vec<(String, StateIdentity)> {
    let project = chunk.project(db);
    chunk_modules(db, chunk)
        .iter()
        .filter(|m| m.info(db).is_root())
        .map(|&m| {
            let identity = crate::resolve::state_identity(db, project, m);
            (m.info(db).id.clone(), identity.clone())
        })
        .collect()
}

/// The direct dependencies of a chunk's root modules, as indices among all root modules
/// ([`crate::graph::roots`]), with their resolution diagnostics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChunkDependencies {
    /// Per root module of the chunk, in order: `targets[at[i]..at[i + 1]]`, sorted.
    pub at: Vec<u32>,
    pub targets: Vec<u32>,
    pub diagnostics: Vec<Diagnostic>,
}

#[salsa::tracked(returns(ref))]
pub fn chunk_dependencies<'db>(db: &'db dyn Db, chunk: ModuleChunk<'db>) -> ChunkDependencies {
    let project = chunk.project(db);
    let mut out = ChunkDependencies {
        at: vec![0],
        ..Default::default()
    };
    for &m in chunk_modules(db, chunk) {
        if !m.info(db).is_root() {
            continue;
        }
        let resolved = crate::resolve::resolved_dependencies(db, project, m);
        out.targets.extend_from_slice(&resolved.targets);
        out.at.push(out.targets.len() as u32);
        out.diagnostics.extend(resolved.diagnostics.iter().cloned());
    }
    out
}
