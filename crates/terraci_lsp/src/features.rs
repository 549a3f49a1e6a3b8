//! The requests: definition, references, hover, code lens, workspace symbols. Each reads
//! the engine's memoized queries ([`terraci_engine::symbols`], the resolution), so a
//! request after an edit recomputes only what the edit changed.

use std::collections::{BTreeMap, BTreeSet};

use lsp_types::{
    CodeLens, Command, Hover, HoverContents, Location, MarkupContent, MarkupKind, Position,
    SymbolInformation, SymbolKind,
};

use terraci_db::files::{File, Module};
use terraci_engine::symbols::{
    file_symbols, remote_state_links, resolved_owners, root_module, FileSymbols,
};

use crate::convert::{file_uri, offset_at, range_of};
use crate::Host;

/// A project file: its input, its module, its text.
struct At {
    module: Module,
    id: String,
    offset: usize,
    symbols: FileSymbols,
}

/// The file `rel` of the project, its module and the byte offset of `pos`.
fn at(host: &dyn Host, rel: &str, pos: Position) -> Option<At> {
    let db = host.db();
    let file = db.module_file(rel)?;
    let module = module_of(host, file)?;
    let text = file.contents(db).text()?.to_string();
    Some(At {
        module,
        id: module.info(db).id.clone(),
        offset: offset_at(&text, pos),
        symbols: file_symbols(db, file).clone(),
    })
}

/// The root module that holds `file`.
fn module_of(host: &dyn Host, file: File) -> Option<Module> {
    let db = host.db();
    // A file's module is the directory it is in, whose id is its path.
    let dir = file.path(db).parent()?.as_str().to_owned();
    root_module(db, host.project(), &dir)
}

/// The location of `range` (bytes) in the project file `file`.
fn location(host: &dyn Host, file: File, range: &std::ops::Range<usize>) -> Option<Location> {
    let db = host.db();
    let text = file.contents(db).text()?.to_string();
    Some(Location {
        uri: file_uri(host, file.path(db).as_str())?,
        range: range_of(&text, range),
    })
}

/// The `backend`/`cloud` block of a module, with its file.
fn backend_of(host: &dyn Host, module: Module) -> Option<Location> {
    let db = host.db();
    module.files(db).iter().find_map(|&f| {
        let backend = file_symbols(db, f).backend.as_ref()?;
        location(host, f, &backend.range)
    })
}

/// `Some(owner id)` of the remote-state block `name` of `module`, when it resolved to one.
fn owner_of(host: &dyn Host, module: Module, name: &str) -> Option<String> {
    resolved_owners(host.db(), host.project(), module)
        .get(name)
        .map(|(owner, _)| owner.clone())
}

/// Definition: `...outputs.Y` -> the owner's `output "Y"`; a remote-state block (or any
/// read of it) -> the owner's `backend`/`cloud` block.
pub(crate) fn definition(host: &dyn Host, rel: &str, pos: Position) -> Vec<Location> {
    let db = host.db();
    let project = host.project();
    let Some(at) = at(host, rel, pos) else {
        return Vec::new();
    };
    if let Some(read) = at
        .symbols
        .output_reads
        .iter()
        .find(|r| r.range.contains(&at.offset))
    {
        let Some(owner) = owner_of(host, at.module, &read.block) else {
            return Vec::new();
        };
        let Some(owner) = root_module(db, project, &owner) else {
            return Vec::new();
        };
        if let (Some(output), true) = (&read.output, read.output_range.contains(&at.offset)) {
            return owner
                .files(db)
                .iter()
                .flat_map(|&f| {
                    file_symbols(db, f)
                        .outputs
                        .iter()
                        .filter(|o| o.name == *output)
                        .filter_map(move |o| location(host, f, &o.range))
                })
                .collect();
        }
        return backend_of(host, owner).into_iter().collect();
    }
    let Some(block) = at
        .symbols
        .remote_states
        .iter()
        .find(|b| b.range.contains(&at.offset))
    else {
        return Vec::new();
    };
    owner_of(host, at.module, &block.name)
        .and_then(|owner| root_module(db, project, &owner))
        .and_then(|owner| backend_of(host, owner))
        .into_iter()
        .collect()
}

/// The root modules that read `id`'s state, each with the names of its blocks that do.
fn readers(host: &dyn Host, id: &str) -> BTreeMap<String, (Module, BTreeSet<String>)> {
    let db = host.db();
    let project = host.project();
    let mut out = BTreeMap::new();
    let roots = terraci_engine::chunk::roots(db, project);
    for (reader_id, &m) in roots.ids.iter().zip(&roots.modules) {
        let blocks: BTreeSet<String> = resolved_owners(db, project, m)
            .into_iter()
            .filter(|(_, (owner, _))| owner == id)
            .map(|(name, _)| name)
            .collect();
        if !blocks.is_empty() {
            out.insert(reader_id.clone(), (m, blocks));
        }
    }
    out
}

/// References: on a `backend`/`cloud` block, every remote-state block that reads the
/// module's state; on an `output "Y"` block, every `...outputs.Y` of those readers.
pub(crate) fn references(
    host: &dyn Host,
    rel: &str,
    pos: Position,
    include_declaration: bool,
) -> Vec<Location> {
    let db = host.db();
    let Some(at) = at(host, rel, pos) else {
        return Vec::new();
    };
    let file = db.module_file(rel);
    let output = at
        .symbols
        .outputs
        .iter()
        .find(|o| o.range.contains(&at.offset));
    let on_backend = at
        .symbols
        .backend
        .as_ref()
        .is_some_and(|b| b.range.contains(&at.offset));
    if output.is_none() && !on_backend {
        return Vec::new();
    }
    let mut out = Vec::new();
    if include_declaration {
        let declared = match output {
            Some(o) => Some(&o.range),
            None => at.symbols.backend.as_ref().map(|b| &b.range),
        };
        if let (Some(file), Some(range)) = (file, declared) {
            out.extend(location(host, file, range));
        }
    }
    for (_, (reader, blocks)) in readers(host, &at.id) {
        for &f in reader.files(db) {
            let symbols = file_symbols(db, f);
            match output {
                Some(o) => out.extend(
                    symbols
                        .output_reads
                        .iter()
                        .filter(|r| blocks.contains(&r.block) && r.output.as_ref() == Some(&o.name))
                        .filter_map(|r| location(host, f, &r.output_range)),
                ),
                None => out.extend(
                    symbols
                        .remote_states
                        .iter()
                        .filter(|b| blocks.contains(&b.name))
                        .filter_map(|b| location(host, f, &b.range)),
                ),
            }
        }
    }
    out
}

/// Hover on a remote-state block (or a read of one): its evaluated location, the rule
/// that matched and the owner; for an unresolved one, why, and what would resolve it.
pub(crate) fn hover(host: &dyn Host, rel: &str, pos: Position) -> Option<Hover> {
    let db = host.db();
    let at = at(host, rel, pos)?;
    let name = at
        .symbols
        .output_reads
        .iter()
        .find(|r| r.range.contains(&at.offset))
        .map(|r| r.block.clone())
        .or_else(|| {
            at.symbols
                .remote_states
                .iter()
                .find(|b| b.range.contains(&at.offset))
                .map(|b| b.name.clone())
        })?;
    let links = remote_state_links(db, host.project(), at.module, &name);
    let mut text = format!("**data.terraform_remote_state.{name}**\n");
    if links.is_empty() {
        text.push_str("\nnot read by terraci (the module is not a root module, or the block does not parse)\n");
    }
    for link in &links {
        text.push('\n');
        if links.len() > 1 {
            text.push_str(&format!("`{}`: ", link.instance));
        }
        let location = link
            .location
            .as_deref()
            .map_or("not known statically".to_owned(), |l| format!("`{l}`"));
        match (&link.owner, link.rule) {
            (Some(owner), Some(rule)) => text.push_str(&format!(
                "state {location} · owner `{owner}` · matched by {rule}\n"
            )),
            _ => {
                text.push_str(&format!("state {location} · no owner\n"));
                for why in &link.why {
                    text.push_str(&format!("\n- {why}\n"));
                }
                text.push_str(
                    "\nTo resolve it: give the state location literally, or set the values it \
                     is built from (`variables:` in .terraci.yaml, `--var`), or name the owner \
                     with `dependencies.add`.\n",
                );
            }
        }
    }
    Some(Hover {
        contents: HoverContents::Markup(MarkupContent {
            kind: MarkupKind::Markdown,
            value: text,
        }),
        range: None,
    })
}

/// A lens above a module's `backend`/`cloud` block: how many modules read its state and
/// how many states it reads; it runs [`crate::SHOW_JOBS`].
pub(crate) fn code_lenses(host: &dyn Host, rel: &str) -> Vec<CodeLens> {
    let db = host.db();
    let Some(at) = at(host, rel, Position::default()) else {
        return Vec::new();
    };
    let Some(backend) = &at.symbols.backend else {
        return Vec::new();
    };
    let Some(file) = db.module_file(rel) else {
        return Vec::new();
    };
    let Some(text) = file.contents(db).text().map(|t| t.to_string()) else {
        return Vec::new();
    };
    let read_by = readers(host, &at.id).len();
    let reads = terraci_engine::symbols::dependencies_of(db, host.project(), at.module).len();
    let plural = |n: usize, one: &str, many: &str| match n {
        1 => format!("1 {one}"),
        _ => format!("{n} {many}"),
    };
    let title = format!(
        "read by {} · reads {}",
        plural(read_by, "module", "modules"),
        plural(reads, "module", "modules")
    );
    vec![CodeLens {
        range: range_of(&text, &backend.range),
        command: Some(Command {
            title,
            command: crate::SHOW_JOBS.to_owned(),
            arguments: Some(vec![serde_json::Value::String(at.id)]),
        }),
        data: None,
    }]
}

/// Workspace symbols: the root modules whose id contains `query` (ignoring case), at
/// their `backend`/`cloud` block.
#[allow(deprecated)] // SymbolInformation::deprecated: a field the protocol keeps.
pub(crate) fn workspace_symbols(host: &dyn Host, query: &str) -> Vec<SymbolInformation> {
    let db = host.db();
    let roots = terraci_engine::chunk::roots(db, host.project());
    let query = query.to_lowercase();
    roots
        .ids
        .iter()
        .zip(&roots.modules)
        .filter(|(id, _)| id.to_lowercase().contains(&query))
        .filter_map(|(id, &m)| {
            let location = backend_of(host, m).or_else(|| {
                let first = *m.files(db).first()?;
                location(host, first, &(0..0))
            })?;
            Some(SymbolInformation {
                name: id.clone(),
                kind: SymbolKind::MODULE,
                tags: None,
                deprecated: None,
                location,
                container_name: None,
            })
        })
        .collect()
}

/// A `dependency-cycle` on each remote-state block that closes a cycle: the block of
/// each edge of each cycle, with the cycle it is part of. (The project's diagnostic has
/// no place of its own: it names every edge in its details.)
pub(crate) fn cycle_blocks(host: &dyn Host) -> Vec<(Location, String)> {
    let db = host.db();
    let project = host.project();
    let graph = terraci_engine::graph::dependency_graph(db, project);
    let mut out = Vec::new();
    for cycle in &graph.cycles {
        let mut path = cycle.clone();
        path.extend(cycle.first().cloned());
        let shown = path.join(" -> ");
        for pair in path.windows(2) {
            let [from, to] = pair else { continue };
            let Some(module) = root_module(db, project, from) else {
                continue;
            };
            let owners = resolved_owners(db, project, module);
            for &f in module.files(db) {
                for block in &file_symbols(db, f).remote_states {
                    if owners
                        .get(&block.name)
                        .is_some_and(|(owner, _)| owner == to)
                    {
                        if let Some(at) = location(host, f, &block.name_range) {
                            out.push((
                                at,
                                format!(
                                    "`data.terraform_remote_state.{}` reads `{to}`, which closes the dependency cycle {shown}",
                                    block.name
                                ),
                            ));
                        }
                    }
                }
            }
        }
    }
    out
}
