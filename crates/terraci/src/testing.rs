//! Test support: a project in a `MemorySystem`, loaded into a database.

use crate::cli::{EvalArgs, GlobalArgs};
use crate::workspace::{load_workspace, Workspace};
use terraci_db::system::MemorySystem;

/// Loads `files` (paths relative to the project root `/p`) as a workspace.
pub fn workspace(files: &[(&str, &str)]) -> Workspace {
    let fs = memory_project(files);
    load_workspace(&fs, &global_args(), &EvalArgs::default()).expect("in-memory project loads")
}

/// A `MemorySystem` holding `files` (paths relative to the project root `/p`).
pub fn memory_project(files: &[(&str, &str)]) -> MemorySystem {
    let fs = MemorySystem::new();
    for (path, text) in files {
        fs.write_file(format!("/p/{path}"), *text);
    }
    fs
}

/// The global flags of a run in `/p`: no fact cache, no colour.
pub fn global_args() -> GlobalArgs {
    GlobalArgs {
        config: None,
        dir: Some("/p".into()),
        verbose: 0,
        quiet: false,
        color: crate::cli::ColorChoice::Never,
        log_level: crate::cli::LogLevel::Warn,
        no_cache: true,
        cache_dir: None,
        max_file_size: terraci_db::system::DEFAULT_MAX_FILE_SIZE,
        max_plan_size: terraci_ext::summary::plan::DEFAULT_MAX_PLAN_SIZE,
    }
}

#[cfg(test)]
mod incremental {
    use crate::workspace::InputChange;

    use super::workspace;
    use terraci_db::files::FileContents;
    use terraci_engine::graph::dependency_graph;

    const CONFIG: &str = "structure:\n  pattern: \"{env}/{module}\"\n";
    const VPC: &str = "terraform {\n  backend \"s3\" {\n    bucket = \"b\"\n    key    = \"stage/vpc/terraform.tfstate\"\n  }\n}\n";
    const DNS: &str = "terraform {\n  backend \"s3\" {\n    bucket = \"b\"\n    key    = \"stage/dns/terraform.tfstate\"\n  }\n}\n";
    const EKS: &str = "# reads the vpc\ndata \"terraform_remote_state\" \"net\" {\n  backend = \"s3\"\n  config = {\n    bucket = \"b\"\n    key    = \"stage/vpc/terraform.tfstate\"\n  }\n}\n";

    fn edges(ws: &crate::workspace::Workspace) -> Vec<String> {
        dependency_graph(&ws.db, ws.project)
            .edges()
            .map(|(a, b)| format!("{a} -> {b}"))
            .collect()
    }

    /// The input of the module file at `rel`.
    fn module_file(ws: &crate::workspace::Workspace, rel: &str) -> terraci_db::files::File {
        ws.db.module_file(rel).expect("a module file")
    }

    fn ran(log: &[String], query: &str) -> bool {
        log.iter().any(|l| l.contains(query))
    }

    #[test]
    fn a_comment_edit_does_not_rerun_the_graph() {
        let mut ws = workspace(&[
            (".terraci.yaml", CONFIG),
            ("stage/vpc/main.tf", VPC),
            ("stage/dns/main.tf", DNS),
            ("stage/eks/main.tf", EKS),
        ]);
        let before = edges(&ws);
        let file = module_file(&ws, "stage/eks/main.tf");
        // The first edit of a file lowers its durability (it was HIGH, as every file
        // the user has not touched), which salsa walks once; the edits after it are
        // the ones an editing session makes.
        let first = EKS.replace("# reads the vpc", "# reads the VPC");
        ws.apply(InputChange::edit(file, FileContents::Text(first)));
        assert_eq!(edges(&ws), before);
        ws.db.start_logging();
        let edited = EKS.replace("# reads the vpc", "# reads the network   ");
        ws.apply(InputChange::edit(file, FileContents::Text(edited)));
        assert_eq!(edges(&ws), before);
        let log = ws.db.take_log();
        assert!(
            ran(&log, "file_facts"),
            "the edited file's facts are extracted again: {log:?}"
        );
        assert!(
            !ran(&log, "module_facts"),
            "facts were equal, so nothing after them runs: {log:?}"
        );
        assert!(!ran(&log, "dependency_graph"), "{log:?}");
    }

    #[test]
    fn a_changed_key_changes_the_edge() {
        let mut ws = workspace(&[
            (".terraci.yaml", CONFIG),
            ("stage/vpc/main.tf", VPC),
            ("stage/dns/main.tf", DNS),
            ("stage/eks/main.tf", EKS),
        ]);
        assert_eq!(edges(&ws), ["stage/eks -> stage/vpc"]);
        ws.db.start_logging();
        let file = module_file(&ws, "stage/eks/main.tf");
        let edited = EKS.replace("stage/vpc/terraform", "stage/dns/terraform");
        ws.apply(InputChange::edit(file, FileContents::Text(edited)));
        assert_eq!(edges(&ws), ["stage/eks -> stage/dns"]);
        let log = ws.db.take_log();
        assert!(ran(&log, "dependency_graph"), "{log:?}");
        // Only the edited module's facts were recomputed.
        assert_eq!(
            log.iter().filter(|l| l.contains("module_facts")).count(),
            1,
            "{log:?}"
        );
    }

    #[test]
    fn an_edit_in_a_called_module_moves_the_callers_edge() {
        const LIB: &str = "variable \"target\" {}\ndata \"terraform_remote_state\" \"t\" {\n  backend = \"s3\"\n  config = {\n    bucket = \"b\"\n    key    = \"stage/${var.target}/terraform.tfstate\"\n  }\n}\n";
        const APP: &str = "module \"net\" {\n  source = \"../../lib/net\"\n  target = \"vpc\"\n}\n";
        let config = format!("{CONFIG}library_modules:\n  paths: [lib]\n");
        let mut ws = workspace(&[
            (".terraci.yaml", &config),
            ("stage/vpc/main.tf", VPC),
            ("stage/dns/main.tf", DNS),
            ("stage/app/main.tf", APP),
            ("lib/net/main.tf", LIB),
        ]);
        assert_eq!(edges(&ws), ["stage/app -> stage/vpc"]);
        ws.db.start_logging();
        // The child's block now reads another state: the caller's edge follows.
        let file = module_file(&ws, "lib/net/main.tf");
        let edited = LIB.replace("stage/${var.target}", "stage/dns");
        ws.apply(InputChange::edit(file, FileContents::Text(edited)));
        assert_eq!(edges(&ws), ["stage/app -> stage/dns"]);
        let log = ws.db.take_log();
        assert_eq!(
            log.iter().filter(|l| l.contains("module_summary")).count(),
            1,
            "only the caller's references are evaluated again: {log:?}"
        );
        // The call's argument, in the caller: the edge follows too.
        ws.apply(InputChange {
            edits: vec![
                (
                    module_file(&ws, "stage/app/main.tf"),
                    FileContents::Text(APP.replace("\"vpc\"", "\"dns\"")),
                ),
                (
                    module_file(&ws, "lib/net/main.tf"),
                    FileContents::Text(LIB.into()),
                ),
            ],
            ..InputChange::default()
        });
        assert_eq!(edges(&ws), ["stage/app -> stage/dns"]);
    }

    /// A project of many modules: an edge edit recomputes the edited module's chunk,
    /// not the project's other modules, and keeps the owners input.
    #[test]
    fn an_edge_edit_recomputes_one_chunk() {
        let n = 3 * terraci_engine::chunk::CHUNK_SIZE;
        let texts: Vec<(String, String)> = (0..n)
            .map(|i| {
                let id = format!("stage/m{i:03}");
                let key = format!("key    = \"{id}/terraform.tfstate\"");
                (
                    format!("{id}/main.tf"),
                    VPC.replace("key    = \"stage/vpc/terraform.tfstate\"", &key),
                )
            })
            .collect();
        let mut files: Vec<(&str, &str)> = vec![(".terraci.yaml", CONFIG)];
        files.extend(texts.iter().map(|(p, t)| (p.as_str(), t.as_str())));
        let mut ws = workspace(&files);
        assert!(edges(&ws).is_empty());
        let _ = ws.all_diagnostics();
        ws.db.start_logging();
        let file = module_file(&ws, "stage/m100/main.tf");
        let edited = format!(
            "{}\n{}",
            texts[100].1,
            EKS.replace("# reads the vpc\n", "")
                .replace("stage/vpc/", "stage/m007/")
        );
        ws.apply(InputChange::edit(file, FileContents::Text(edited)));
        assert!(
            !terraci_engine::resolve::sync_owners(&mut ws.db, ws.project),
            "no identity changed: apply synced the owners index already"
        );
        assert_eq!(edges(&ws), ["stage/m100 -> stage/m007"]);
        assert!(ws.all_diagnostics().is_empty());
        let log = ws.db.take_log();
        let count = |q: &str| log.iter().filter(|l| l.contains(q)).count();
        assert_eq!(count("resolved_dependencies"), 1, "{log:?}");
        assert_eq!(count("chunk_dependencies"), 1, "{log:?}");
        assert_eq!(count("chunk_diagnostics"), 1, "{log:?}");
        assert_eq!(count("module_scope"), 1, "{log:?}");
    }
}

/// A mutation fuzzer over the whole parse -> facts -> evaluation -> graph -> IR path.
///
/// Seeds are the files of every fixture repo; each round mutates one of them (byte flips,
/// deletions, duplicated slices, inserted HCL fragments) and runs every stage on an
/// in-memory project, asserting only that nothing panics and that rendering works.
/// `TERRACI_FUZZ_ROUNDS` raises the number of rounds (the suite runs a few hundred; a
/// longer run: `TERRACI_FUZZ_ROUNDS=20000 cargo test --release --lib fuzz`).
#[cfg(test)]
mod fuzz {
    #![allow(clippy::disallowed_methods)]

    use std::path::Path;

    use super::workspace;
    use terraci_db::files::Selection;
    use terraci_db::filter::Filters;
    use terraci_engine::ir::PlanOptions;

    const FRAGMENTS: &[&str] = &[
        "${",
        "}",
        "{",
        "\"",
        "%{ if x }",
        "%{ endif }",
        "local.",
        "var.",
        "each.key",
        "[",
        "]",
        "(",
        ")",
        "for_each = ",
        "count = ",
        "<<EOF\n",
        "\nEOF\n",
        "...",
        "=>",
        "?",
        ":",
        "range(100000)",
        "toset(",
        "merge(",
        "jsondecode(\"",
        "*",
        ".*",
        "[*]",
        "#",
        "/*",
        "*/",
        "\n",
        "\u{0}",
        "\u{feff}",
        "é",
        "data \"terraform_remote_state\" \"x\" {",
        "config = {",
        "key = local.k",
        "locals {",
        "backend \"s3\" {",
        "terraform {",
    ];

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: usize) -> usize {
            if n == 0 {
                0
            } else {
                (self.next() % n as u64) as usize
            }
        }
    }

    /// (path, bytes) of one fixture repo's files.
    type Files = Vec<(String, Vec<u8>)>;

    fn seeds() -> Vec<(String, Files)> {
        let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join("fixtures");
        let mut repos = Vec::new();
        for name in ["example", "diagnostics", "cycle"] {
            let mut files = Vec::new();
            collect(&root.join(name), &root.join(name), &mut files);
            files.sort();
            repos.push((name.to_owned(), files));
        }
        repos
    }

    fn collect(base: &Path, dir: &Path, out: &mut Files) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                collect(base, &p, out);
            } else if let Ok(bytes) = std::fs::read(&p) {
                let rel = p.strip_prefix(base).expect("under base");
                out.push((rel.to_string_lossy().replace('\\', "/"), bytes));
            }
        }
    }

    fn mutate(rng: &mut Rng, bytes: &mut Vec<u8>) {
        for _ in 0..1 + rng.below(4) {
            let len = bytes.len();
            match rng.below(5) {
                0 if len > 0 => {
                    let i = rng.below(len);
                    bytes[i] ^= 1 << rng.below(8);
                }
                1 if len > 0 => {
                    let i = rng.below(len);
                    let n = rng.below(len - i + 1).min(64);
                    bytes.drain(i..i + n);
                }
                2 if len > 0 => {
                    let i = rng.below(len);
                    let n = rng.below(len - i + 1).min(256);
                    let slice: Vec<u8> = bytes[i..i + n].to_vec();
                    let at = rng.below(bytes.len() + 1);
                    bytes.splice(at..at, slice);
                }
                _ => {
                    let frag = FRAGMENTS[rng.below(FRAGMENTS.len())].as_bytes();
                    let at = rng.below(len + 1);
                    bytes.splice(at..at, frag.iter().copied());
                }
            }
        }
    }

    #[test]
    fn mutated_inputs_never_panic() {
        let rounds: usize = std::env::var("TERRACI_FUZZ_ROUNDS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(150);
        let repos = seeds();
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for round in 0..rounds {
            let (_, files) = &repos[round % repos.len()];
            let mut files = files.clone();
            // Mutate one Terraform file, sometimes two.
            for _ in 0..1 + rng.below(2) {
                let candidates: Vec<usize> = files
                    .iter()
                    .enumerate()
                    .filter(|(_, (p, _))| p.ends_with(".tf") || p.ends_with(".tfvars"))
                    .map(|(i, _)| i)
                    .collect();
                let pick = candidates[rng.below(candidates.len())];
                mutate(&mut rng, &mut files[pick].1);
            }
            let texts: Vec<(String, String)> = files
                .iter()
                .map(|(p, b)| (p.clone(), String::from_utf8_lossy(b).into_owned()))
                .collect();
            // Invalid UTF-8 is exercised by the CLI robustness tests; here the lossy text
            // keeps the in-memory loader simple.
            let refs: Vec<(&str, &str)> = texts
                .iter()
                .map(|(p, t)| (p.as_str(), t.as_str()))
                .collect();
            let Ok(ws) = std::panic::catch_unwind(|| workspace(&refs)) else {
                panic!("round {round}: loading panicked");
            };
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let _ = ws.all_diagnostics();
                let graph = terraci_engine::graph::dependency_graph(&ws.db, ws.project);
                if graph.cycles.is_empty() {
                    let selection =
                        Selection::new(&ws.db, Filters::default(), PlanOptions::default(), None);
                    if let Ok(plan) = terraci_engine::ir::job_plan(&ws.db, ws.project, selection) {
                        let header = terraci_render::Header {
                            version: "0".into(),
                            command_line: "terraci".into(),
                        };
                        let _ = terraci_render::render_gitlab(plan, &ws.config.config, &header);
                    }
                }
            }));
            assert!(result.is_ok(), "round {round} panicked; input: {texts:?}");
        }
    }
}
