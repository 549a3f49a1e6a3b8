//! The module order of `lib.rs` is the pipeline's order, and this test keeps it so: a
//! module may name (`crate::x`) only modules listed before it. Test code (`tests.rs`
//! files, `#[cfg(test)]` modules and imports) may reach any module, and comments are not
//! read. A `pub use a::b;` in `lib.rs` makes `crate::b` mean module `a`.

use std::collections::BTreeMap;

use camino::{Utf8Path, Utf8PathBuf};

use terraci_db::system::{EntryKind, OsSystem, System};

/// The modules of `lib.rs` in order, and its root aliases (`pub use a::b;`: b -> a).
fn modules_of(lib: &str) -> (Vec<String>, BTreeMap<String, String>) {
    let mut order = Vec::new();
    let mut aliases = BTreeMap::new();
    for line in lib.lines() {
        let declared = ["pub mod ", "pub(crate) mod ", "mod "]
            .iter()
            .find_map(|prefix| line.strip_prefix(prefix));
        if let Some(name) = declared.and_then(|l| l.strip_suffix(';')) {
            order.push(name.to_owned());
        } else if let Some(path) = line
            .strip_prefix("pub use ")
            .and_then(|l| l.strip_suffix(';'))
        {
            if let Some((module, name)) = path.split_once("::") {
                aliases.insert(name.to_owned(), module.to_owned());
            }
        }
    }
    (order, aliases)
}

/// The code of a file that the order applies to: without comments, and without what
/// follows a `#[cfg(test)]` module (test modules come last in a file) or a
/// `#[cfg(test)]` import.
fn non_test_code(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut lines = text.lines().enumerate().peekable();
    while let Some((i, line)) = lines.next() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("//") {
            continue;
        }
        if trimmed.starts_with("#[cfg(test)]") {
            let next = lines.peek().map(|(_, l)| l.trim_start()).unwrap_or("");
            let item = next
                .trim_start_matches("pub(crate) ")
                .trim_start_matches("pub ");
            if item.starts_with("mod ") {
                break;
            }
            if item.starts_with("use ") {
                // Skip the import, however many lines it spans.
                for (_, l) in lines.by_ref() {
                    if l.trim_end().ends_with(';') {
                        break;
                    }
                }
            }
            continue;
        }
        let code = match line.find("//") {
            Some(at) if !line[..at].contains('"') => &line[..at],
            _ => line,
        };
        out.push((i + 1, code));
    }
    out
}

/// The top-level modules a file's code names: `crate::x` and each `x` of `crate::{x, ..}`.
fn named_modules(code: &[(usize, &str)]) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut in_group: Option<u32> = None;
    for &(line, text) in code {
        let mut rest = text;
        loop {
            if let Some(depth) = in_group.as_mut() {
                // Inside `crate::{ .. }`: the names at depth 1 that start an item.
                let mut at_item = true;
                let mut consumed = rest.len();
                for (i, c) in rest.char_indices() {
                    match c {
                        '{' => *depth += 1,
                        '}' => {
                            *depth -= 1;
                            if *depth == 0 {
                                consumed = i + 1;
                                break;
                            }
                        }
                        ',' if *depth == 1 => at_item = true,
                        c if c.is_whitespace() => {}
                        _ if at_item && *depth == 1 => {
                            let name = ident(&rest[i..]);
                            if !name.is_empty() && name != "self" {
                                out.push((line, name));
                            }
                            at_item = false;
                        }
                        _ => {}
                    }
                }
                if *depth == 0 {
                    in_group = None;
                    rest = &rest[consumed..];
                } else {
                    break;
                }
            }
            let Some(at) = rest.find("crate::") else {
                break;
            };
            let preceded = rest[..at]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$');
            rest = &rest[at + "crate::".len()..];
            if preceded {
                continue;
            }
            if let Some(group) = rest.strip_prefix('{') {
                in_group = Some(1);
                rest = group;
            } else {
                let name = ident(rest);
                if !name.is_empty() {
                    out.push((line, name));
                }
            }
        }
    }
    out
}

/// Every `.rs` file of `dir`, recursively, relative to `root`, sorted.
fn rust_files(system: &dyn System, root: &Utf8Path, dir: &Utf8Path, out: &mut Vec<Utf8PathBuf>) {
    let mut entries = system.read_dir(&root.join(dir)).expect("read src dir");
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    for e in entries {
        let path = dir.join(&e.name);
        match e.kind {
            EntryKind::Dir => rust_files(system, root, &path, out),
            EntryKind::File if e.name.ends_with(".rs") => out.push(path),
            _ => {}
        }
    }
}

/// `file:line: a -> b` for every use of a module listed after the user.
fn backward_edges(
    order: &[String],
    aliases: &BTreeMap<String, String>,
    files: &[(Utf8PathBuf, String)],
) -> Vec<String> {
    let rank: BTreeMap<&str, usize> = order
        .iter()
        .enumerate()
        .map(|(i, m)| (m.as_str(), i))
        .collect();
    let mut problems = Vec::new();
    for (path, text) in files {
        let top = path
            .components()
            .next()
            .map(|c| c.as_str().trim_end_matches(".rs"))
            .unwrap_or("");
        if matches!(top, "lib" | "main" | "import_order" | "stage_tests") {
            continue;
        }
        if path.file_name() == Some("tests.rs") || path.components().any(|c| c.as_str() == "tests")
        {
            continue;
        }
        let Some(&own) = rank.get(top) else {
            problems.push(format!("{path}: module `{top}` is not listed in lib.rs"));
            continue;
        };
        for (line, name) in named_modules(&non_test_code(text)) {
            let target = aliases.get(&name).map_or(name.as_str(), String::as_str);
            match rank.get(target) {
                Some(&r) if r > own => problems.push(format!(
                    "{path}:{line}: `{top}` uses `{target}`, which lib.rs lists after it"
                )),
                Some(_) => {}
                None => problems.push(format!(
                    "{path}:{line}: `crate::{name}` is no module of lib.rs"
                )),
            }
        }
    }
    problems
}

/// The crates whose `lib.rs` lists their modules in pipeline order (`terraci_render` and
/// `terraci_vcs` are one stage each, their modules at the crate's root).
const ORDERED_CRATES: [&str; 6] = [
    "terraci_db",
    "terraci_engine",
    "terraci_ext",
    "terraci_cost",
    "terraci_tfupdate",
    "terraci",
];

#[test]
fn no_module_uses_a_later_one() {
    let crates = Utf8Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for name in ORDERED_CRATES {
        let root = crates.join(name).join("src");
        let lib = String::from_utf8(OsSystem.read(&root.join("lib.rs")).expect("read lib.rs"))
            .expect("utf-8");
        let (order, aliases) = modules_of(&lib);
        assert!(
            order.len() > 2,
            "{name}'s lib.rs lists its modules: {order:?}"
        );
        let mut paths = Vec::new();
        rust_files(&OsSystem, &root, Utf8Path::new(""), &mut paths);
        let files: Vec<(Utf8PathBuf, String)> = paths
            .into_iter()
            .map(|p| {
                let text =
                    String::from_utf8(OsSystem.read(&root.join(&p)).expect("read")).expect("utf-8");
                (p, text)
            })
            .collect();
        assert!(files.len() > 3, "found {name}'s sources: {}", files.len());
        let problems = backward_edges(&order, &aliases, &files);
        assert!(
            problems.is_empty(),
            "{name}: modules use modules listed after them in lib.rs (move the shared item \
             down, or the module up):\n{}",
            problems.join("\n")
        );
    }
}

/// The crates each crate may depend on: the layers, arrows only downward
/// (`docs/architecture.md`). The engine never reaches render, vcs or ext.
const LAYERS: [(&str, &[&str]); 9] = [
    ("terraci_db", &[]),
    ("terraci_engine", &["terraci_db"]),
    ("terraci_render", &["terraci_db", "terraci_engine"]),
    ("terraci_vcs", &["terraci_db"]),
    ("terraci_lsp", &["terraci_db", "terraci_engine"]),
    (
        "terraci_ext",
        &["terraci_db", "terraci_engine", "terraci_render"],
    ),
    ("terraci_cost", &["terraci_db", "terraci_ext"]),
    ("terraci_tfupdate", &["terraci_db", "terraci_ext"]),
    (
        "terraci",
        &[
            "terraci_db",
            "terraci_engine",
            "terraci_render",
            "terraci_vcs",
            "terraci_ext",
            "terraci_cost",
            "terraci_tfupdate",
            "terraci_lsp",
        ],
    ),
];

#[test]
fn crates_depend_only_on_the_layers_below() {
    let crates = Utf8Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut problems = Vec::new();
    for (name, allowed) in LAYERS {
        let manifest = crates.join(name).join("Cargo.toml");
        let text =
            String::from_utf8(OsSystem.read(&manifest).expect("read Cargo.toml")).expect("utf-8");
        for line in text.lines() {
            let Some(dep) = line
                .split([' ', '='])
                .next()
                .filter(|d| d.starts_with("terraci"))
            else {
                continue;
            };
            if dep != name && !allowed.contains(&dep) {
                problems.push(format!("{name} depends on {dep}"));
            }
        }
    }
    assert!(problems.is_empty(), "arrows that point up: {problems:?}");
}

#[test]
fn a_backward_use_is_reported_with_its_line() {
    let order: Vec<String> = ["syntax", "parse", "facts"].map(String::from).into();
    let aliases = BTreeMap::from([("cache".to_owned(), "facts".to_owned())]);
    let file = |path: &str, text: &str| (Utf8PathBuf::from(path), text.to_owned());
    let files = [
        file("syntax.rs", "//! see crate::facts\nuse std::fmt;\n"),
        file(
            "parse/fast.rs",
            "use crate::syntax::Expr;\nfn f() {\n    crate::cache::load();\n}\n",
        ),
        file(
            "facts/mod.rs",
            "use crate::{\n    parse::X,\n    syntax::{A, B},\n};\n#[cfg(test)]\nmod tests {\n    use crate::later::Y;\n}\n",
        ),
        file("parse/tests.rs", "use crate::facts::Z;\n"),
        file("syntax/extra.rs", "pub(crate) use crate::{facts::Q, parse};\n"),
    ];
    assert_eq!(
        backward_edges(&order, &aliases, &files),
        [
            "parse/fast.rs:3: `parse` uses `facts`, which lib.rs lists after it",
            "syntax/extra.rs:1: `syntax` uses `facts`, which lib.rs lists after it",
            "syntax/extra.rs:1: `syntax` uses `parse`, which lib.rs lists after it",
        ]
    );
}
