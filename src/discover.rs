//! Module discovery: the pattern plus a directory walk.
//!
//! Input: the project dir, the pattern and `library_modules.paths`, read through `System`.
//! Output: the [`Discovered`] module directories with their files' bytes, and diagnostics
//! for what could not be read. Runs outside salsa; the driver turns the result into inputs.
//! Invalidated by any directory or file creation/removal (the watcher re-runs it).

use camino::{Utf8Path, Utf8PathBuf};
use indexmap::IndexMap;

use crate::config::Pattern;
use crate::diagnostic::{Diagnostic, Severity};
use crate::files::{FileContents, FileKind, ModuleInfo, Role};
use crate::system::{EntryKind, System};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscoveredFile {
    /// Relative to the project dir.
    pub path: Utf8PathBuf,
    pub kind: FileKind,
    pub contents: FileContents,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscoveredModule {
    pub info: ModuleInfo,
    pub files: Vec<DiscoveredFile>,
}

#[derive(Debug, Default)]
pub struct Discovered {
    /// Sorted by id.
    pub modules: Vec<DiscoveredModule>,
    pub diagnostics: Vec<Diagnostic>,
}

/// Walks `root` and returns every module directory, libraries included.
pub fn discover_modules(
    system: &dyn System,
    root: &Utf8Path,
    pattern: &Pattern,
    library_paths: &[String],
) -> Discovered {
    let libraries: Vec<String> = library_paths
        .iter()
        .map(|p| p.trim_start_matches("./").trim_matches('/').to_owned())
        .filter(|p| !p.is_empty())
        .collect();
    let mut out = Discovered::default();
    let mut ignores = IgnoreRules::default();
    let mut stack: Vec<String> = vec![String::new()];
    // Depth-first, sorted: directories are popped in reverse push order.
    let mut module_dirs: Vec<(String, Vec<DiscoveredFile>)> = Vec::new();
    while let Some(rel) = stack.pop() {
        let abs = if rel.is_empty() {
            root.to_owned()
        } else {
            root.join(&rel)
        };
        let entries = match system.read_dir(&abs) {
            Ok(e) => e,
            Err(err) => {
                out.diagnostics.push(Diagnostic::new(
                    Severity::Error,
                    "unreadable-path",
                    format!("cannot read directory `{}`: {err}", display_rel(&rel)),
                ));
                continue;
            }
        };
        if entries.iter().any(|e| e.name == ".gitignore") {
            if let Ok(bytes) = system.read(&abs.join(".gitignore")) {
                ignores.add(&rel, &String::from_utf8_lossy(&bytes));
            }
        }
        let mut files: Vec<DiscoveredFile> = Vec::new();
        let mut subdirs: Vec<String> = Vec::new();
        for entry in entries {
            if entry.name.starts_with('.') {
                continue;
            }
            let child = if rel.is_empty() {
                entry.name.clone()
            } else {
                format!("{rel}/{}", entry.name)
            };
            let is_dir = matches!(
                entry.kind,
                EntryKind::Dir | EntryKind::Symlink { to_dir: true }
            );
            if ignores.is_ignored(&child, is_dir) {
                continue;
            }
            match entry.kind {
                EntryKind::Dir => subdirs.push(child),
                EntryKind::Symlink { to_dir: true } => {}
                EntryKind::File | EntryKind::Symlink { to_dir: false } => {
                    if let Some(kind) = FileKind::of(&entry.name) {
                        let contents = match system.read(&root.join(&child)) {
                            Ok(bytes) => FileContents::from_bytes(bytes),
                            Err(err) => {
                                out.diagnostics.push(
                                    Diagnostic::new(
                                        Severity::Error,
                                        "unreadable-path",
                                        format!("cannot read file: {err}"),
                                    )
                                    .with_file(child.clone()),
                                );
                                FileContents::Unreadable(err.to_string())
                            }
                        };
                        files.push(DiscoveredFile {
                            path: child.into(),
                            kind,
                            contents,
                        });
                    }
                }
            }
        }
        for dir in subdirs.into_iter().rev() {
            stack.push(dir);
        }
        let files = apply_tofu_shadowing(files);
        if files.iter().any(|f| !f.kind.is_vars()) && !rel.is_empty() {
            module_dirs.push((rel, files));
        }
    }
    module_dirs.sort_by(|a, b| a.0.cmp(&b.0));

    let depth = pattern.depth();
    let is_library = |id: &str| {
        libraries
            .iter()
            .any(|l| id == l || id.starts_with(&format!("{l}/")))
    };
    let module_ids: Vec<&str> = module_dirs
        .iter()
        .filter(|(id, _)| id.split('/').count() >= depth || is_library(id))
        .map(|(id, _)| id.as_str())
        .collect();
    for (id, files) in &module_dirs {
        let parts: Vec<&str> = id.split('/').collect();
        let role = if is_library(id) {
            Role::Library
        } else if parts.len() < depth {
            Role::Plain
        } else {
            Role::Root
        };
        let mut components = IndexMap::new();
        let mut submodule = None;
        if parts.len() >= depth {
            for (name, value) in pattern.segments().iter().zip(&parts) {
                components.insert(name.clone(), (*value).to_owned());
            }
            if parts.len() > depth {
                let rest = parts[depth..].join("/");
                components.insert("submodule".to_owned(), rest.clone());
                submodule = Some(rest);
            }
        }
        let parent = (1..parts.len())
            .rev()
            .map(|n| parts[..n].join("/"))
            .find(|p| module_ids.binary_search(&p.as_str()).is_ok());
        out.modules.push(DiscoveredModule {
            info: ModuleInfo {
                id: id.clone(),
                components,
                submodule,
                parent,
                role,
            },
            files: files.clone(),
        });
    }
    out
}

/// `.gitignore` files met during the walk (those inside the project dir), applied as git
/// does: later and deeper rules win, `!` re-includes, a trailing `/` matches only
/// directories, a pattern with a `/` is anchored to its `.gitignore`'s directory, one
/// without matches a name at any depth below it.
#[derive(Default)]
struct IgnoreRules {
    rules: Vec<IgnoreRule>,
}

struct IgnoreRule {
    base: String,
    glob: String,
    anchored: bool,
    dir_only: bool,
    negate: bool,
}

impl IgnoreRules {
    fn add(&mut self, base: &str, text: &str) {
        for line in text.lines() {
            let line = line.trim_end();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (negate, line) = match line.strip_prefix('!') {
                Some(rest) => (true, rest),
                None => (false, line.strip_prefix('\\').unwrap_or(line)),
            };
            let dir_only = line.ends_with('/');
            let line = line.trim_end_matches('/');
            let anchored = line.contains('/');
            let glob = line.trim_start_matches('/').to_owned();
            if glob.is_empty() {
                continue;
            }
            self.rules.push(IgnoreRule {
                base: base.to_owned(),
                glob,
                anchored,
                dir_only,
                negate,
            });
        }
    }

    fn is_ignored(&self, path: &str, is_dir: bool) -> bool {
        let mut ignored = false;
        for r in &self.rules {
            if r.dir_only && !is_dir {
                continue;
            }
            let rel = if r.base.is_empty() {
                path
            } else if let Some(rest) = path.strip_prefix(&r.base).and_then(|p| p.strip_prefix('/'))
            {
                rest
            } else {
                continue;
            };
            let hit = if r.anchored {
                crate::filter::glob_matches(&r.glob, rel)
            } else {
                let name = rel.rsplit('/').next().unwrap_or(rel);
                crate::filter::match_segment(&r.glob, name)
            };
            if hit {
                ignored = !r.negate;
            }
        }
        ignored
    }
}

/// OpenTofu: `x.tofu` replaces `x.tf`, `x.tofu.json` replaces `x.tf.json`.
fn apply_tofu_shadowing(files: Vec<DiscoveredFile>) -> Vec<DiscoveredFile> {
    let names: Vec<String> = files
        .iter()
        .map(|f| f.path.file_name().unwrap_or_default().to_owned())
        .collect();
    files
        .into_iter()
        .filter(|f| {
            let name = f.path.file_name().unwrap_or_default();
            let shadow = if let Some(stem) = name.strip_suffix(".tf") {
                format!("{stem}.tofu")
            } else if let Some(stem) = name.strip_suffix(".tf.json") {
                format!("{stem}.tofu.json")
            } else {
                return true;
            };
            !names.contains(&shadow)
        })
        .collect()
}

fn display_rel(rel: &str) -> &str {
    if rel.is_empty() {
        "."
    } else {
        rel
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::system::MemorySystem;

    fn ids(d: &Discovered) -> Vec<String> {
        d.modules
            .iter()
            .map(|m| {
                let mut s = m.info.id.clone();
                match m.info.role {
                    Role::Library => s.push_str(" (library)"),
                    Role::Plain => s.push_str(" (plain)"),
                    Role::Root => {}
                }
                if let Some(p) = &m.info.parent {
                    s.push_str(&format!(" parent={p}"));
                }
                s
            })
            .collect()
    }

    #[test]
    fn finds_modules_at_pattern_depth_and_submodules() {
        let fs = MemorySystem::new();
        for f in [
            "/p/platform/stage/eu/vpc/main.tf",
            "/p/platform/stage/eu/eks/main.tf",
            "/p/platform/stage/eu/eks/addons/main.tf",
            "/p/platform/stage/eu/eks/docs/readme.md",
            "/p/platform/stage/main.tf",
            "/p/.hidden/a/b/c/main.tf",
            "/p/platform/stage/eu/vpc/.terraform/modules/x/main.tf",
            "/p/_modules/kafka/main.tf",
        ] {
            fs.write_file(f, "");
        }
        let pattern = Pattern::parse("{service}/{environment}/{region}/{module}").unwrap();
        let d = discover_modules(&fs, "/p".into(), &pattern, &["_modules".into()]);
        assert_eq!(
            ids(&d),
            [
                "_modules/kafka (library)",
                "platform/stage (plain)",
                "platform/stage/eu/eks",
                "platform/stage/eu/eks/addons parent=platform/stage/eu/eks",
                "platform/stage/eu/vpc",
            ]
        );
        let addons = &d.modules[3].info;
        assert_eq!(addons.submodule.as_deref(), Some("addons"));
        assert_eq!(addons.components["module"], "eks");
    }

    #[test]
    fn gitignored_directories_and_files_are_skipped() {
        let fs = MemorySystem::new();
        fs.write_file(
            "/p/.gitignore",
            "build/\n*.generated.tf\nscratch\n!scratch/keep\n",
        );
        fs.write_file("/p/a/main.tf", "");
        fs.write_file("/p/a/x.generated.tf", "");
        fs.write_file("/p/build/b/main.tf", "");
        fs.write_file("/p/c/.gitignore", "/d\n");
        fs.write_file("/p/c/d/main.tf", "");
        fs.write_file("/p/c/e/d/main.tf", "");
        let pattern = Pattern::parse("{module}").unwrap();
        let d = discover_modules(&fs, "/p".into(), &pattern, &[]);
        assert_eq!(ids(&d), ["a", "c/e/d"]);
        let names: Vec<&str> = d.modules[0].files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(names, ["a/main.tf"]);
    }

    #[test]
    fn tofu_files_shadow_tf_files() {
        let fs = MemorySystem::new();
        fs.write_file("/p/a/main.tf", "");
        fs.write_file("/p/a/main.tofu", "");
        fs.write_file("/p/a/other.tf", "");
        let pattern = Pattern::parse("{module}").unwrap();
        let d = discover_modules(&fs, "/p".into(), &pattern, &[]);
        let names: Vec<&str> = d.modules[0].files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(names, ["a/main.tofu", "a/other.tf"]);
    }
}
