//! Benchmarks of the standard workload (spec §11): cold, warm (run replay), warm with the
//! fact cache only, and one-file edits on a long-lived database, at 200, 2,000 and 10,000
//! modules.
//!
//! The workload is written by `../shared/bench/gen_monorepo.py` (or the script named by
//! `TERRACI_BENCH_GEN`) into `target/bench-workloads/` the first time a size is used.
//! Run: `cargo bench --bench pipeline` (add a filter such as `cold` or `10000`).
//! These run in process; the README's whole-process figures come from `hyperfine` on the
//! release binary.

// The harness sets up its workload on disk itself; the System boundary is for the product.
#![allow(clippy::disallowed_methods)]

use std::process::Command;
use std::sync::OnceLock;

use camino::{Utf8Path, Utf8PathBuf};
use clap::Parser;
use divan::Bencher;
use terraci::cli::{Cli, Command as Sub, GlobalArgs};
use terraci::commands::Io;
use terraci::workspace::{load_workspace, Workspace};
use terraci_db::files::{FileContents, Selection};
use terraci_db::system::OsSystem;
use terraci_engine::ir::PlanOptions;

// The binary's allocator (see main.rs), so that figures match it.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const SIZES: &[usize] = &[200, 2000, 10000];

fn main() {
    divan::main();
}

/// The generated monorepo of `n` modules, made once per size and kept between runs.
fn workload(n: usize) -> Utf8PathBuf {
    static ROOT: OnceLock<Utf8PathBuf> = OnceLock::new();
    let root = ROOT.get_or_init(|| {
        let target = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".into());
        let root = Utf8PathBuf::from(target).join("bench-workloads");
        std::fs::create_dir_all(&root).unwrap();
        root
    });
    let dir = root.join(format!("m{n}"));
    if !dir.join(".complete").exists() {
        let _ = std::fs::remove_dir_all(&dir);
        let script = std::env::var("TERRACI_BENCH_GEN").unwrap_or_else(|_| {
            concat!(
                concat!(env!("CARGO_MANIFEST_DIR"), "/../.."),
                "/../shared/bench/gen_monorepo.py"
            )
            .into()
        });
        let status = Command::new("python3")
            .args([script.as_str(), dir.as_str(), &n.to_string()])
            .stdout(std::process::Stdio::null())
            .status()
            .expect("python3 runs the workload generator");
        assert!(status.success(), "{script} failed");
        std::fs::write(dir.join(".complete"), b"").unwrap();
    }
    dir
}

/// One whole `terraci generate` in process, output to a file in the workload.
fn generate(dir: &Utf8Path, cache: bool) {
    let out = dir.join(".terraci/bench-out.yml");
    let mut argv = vec![
        "terraci",
        "generate",
        "-d",
        dir.as_str(),
        "-o",
        out.as_str(),
        // At 2,000 modules and more the pipeline is over GitLab's default size limit;
        // the benchmark measures writing it whole.
        "--force",
    ];
    if !cache {
        argv.push("--no-cache");
    }
    let cli = Cli::parse_from(&argv);
    let (mut stdout, mut stderr) = (std::io::sink(), std::io::sink());
    let mut io = Io {
        system: &OsSystem,
        stdout: &mut stdout,
        stderr: &mut stderr,
        argv: argv.iter().map(|s| (*s).to_owned()).collect(),
    };
    assert_eq!(
        terraci::commands::run(cli, &mut io),
        0,
        "generate failed in {dir}"
    );
}

/// Read everything, parse everything, no cache.
#[divan::bench(args = SIZES, sample_count = 5, sample_size = 1)]
fn cold(bencher: Bencher, n: usize) {
    let dir = workload(n);
    bencher.bench(|| generate(&dir, false));
}

/// A repeat run over unchanged files: replayed from `.terraci/cache/run.bin` after a walk
/// and one stamp per file.
#[divan::bench(args = SIZES, sample_count = 5, sample_size = 1)]
fn warm(bencher: Bencher, n: usize) {
    let dir = workload(n);
    generate(&dir, true);
    bencher.bench(|| generate(&dir, true));
}

/// A repeat run without the run record (what a run after any edit does): every file is
/// read and hashed, facts come from `.terraci/cache/facts.bin`, the rest runs.
#[divan::bench(args = SIZES, sample_count = 5, sample_size = 1)]
fn warm_fact_cache(bencher: Bencher, n: usize) {
    let dir = workload(n);
    generate(&dir, true);
    let record = dir.join(".terraci/cache/run.bin");
    bencher
        .with_inputs(|| {
            let _ = std::fs::remove_file(&record);
        })
        .bench_values(|()| generate(&dir, true));
}

/// A long-lived database (what `watch` keeps) and one file of one module to edit.
struct Session {
    ws: Workspace,
    selection: Selection,
    file: terraci_db::files::File,
    original: String,
    /// The same file with an extra `terraform_remote_state` on another module.
    with_edge: String,
    /// The same file with a trailing comment: no fact changes.
    with_comment: String,
    /// Job texts kept between renders, as `watch` keeps them.
    job_texts: terraci_render::JobTexts,
}

impl Session {
    fn new(n: usize) -> Self {
        let dir = workload(n);
        let cli = Cli::parse_from(["terraci", "generate", "-d", dir.as_str(), "--no-cache"]);
        let (global, eval): (GlobalArgs, _) = match cli.command {
            Sub::Generate(args) => (cli.global, args.pipeline.eval),
            _ => unreachable!(),
        };
        let ws = load_workspace(&OsSystem, &global, &eval).expect("the workload loads");
        let ids: Vec<&String> = ws.modules.keys().collect();
        // Edit the last module so that it may depend on the first without a cycle.
        let (edited, target) = (ids[ids.len() - 1].clone(), ids[0].clone());
        let path = format!("{edited}/main.tf");
        let file = ws.db.module_file(&path).expect("a module file");
        let original = std::fs::read_to_string(dir.join(&path)).unwrap();
        let target_main = std::fs::read_to_string(dir.join(&target).join("main.tf")).unwrap();
        let key = target_main
            .lines()
            .find_map(|l| l.trim().strip_prefix("key"))
            .and_then(|rest| rest.split('"').nth(1))
            .expect("each workload module has a backend key")
            .to_owned();
        let with_edge = format!(
            "{original}\ndata \"terraform_remote_state\" \"bench_edit\" {{\n  backend = \"s3\"\n  \
             config = {{\n    bucket = \"acme-terraform-state\"\n    key    = \"{key}\"\n    \
             region = \"eu-central-1\"\n  }}\n}}\n"
        );
        let with_comment = format!("{original}\n# edited\n");
        let selection = Selection::new(&ws.db, Default::default(), PlanOptions::default(), None);
        Session {
            ws,
            selection,
            file,
            original,
            with_edge,
            with_comment,
            job_texts: Default::default(),
        }
    }

    fn set(&mut self, text: &str) {
        self.ws.apply(terraci::workspace::InputChange::edit(
            self.file,
            FileContents::from_bytes(text.as_bytes().to_vec()),
        ));
    }

    /// What a regeneration recomputes: graph, selection, IR, YAML (jobs whose text is
    /// kept are not rendered again). Returns the edge count
    /// and the pipeline text.
    fn regenerate(&self) -> (usize, String) {
        let db = &self.ws.db;
        let graph = terraci_engine::graph::dependency_graph(db, self.ws.project);
        let plan = terraci_engine::ir::job_plan(db, self.ws.project, self.selection)
            .as_ref()
            .expect("no job name collisions");
        let header = terraci_render::Header {
            version: "bench".into(),
            command_line: "terraci generate".into(),
        };
        let text = terraci_render::render_gitlab_with(
            plan,
            &self.ws.config.config,
            &header,
            Some(&self.job_texts),
        )
        .expect("renders")
        .text;
        (graph.edge_count(), text)
    }
}

/// One file edited with a new edge, then back: both directions are measured.
#[divan::bench(args = SIZES, sample_count = 10, sample_size = 1)]
fn edit_with_edge_change(bencher: Bencher, n: usize) {
    let mut session = Session::new(n);
    let (before, _) = session.regenerate();
    session.set(&session.with_edge.clone());
    let (after, _) = session.regenerate();
    assert_eq!(after, before + 1, "the edit adds one edge");
    let texts = [session.original.clone(), session.with_edge.clone()];
    let mut i = 0;
    bencher.bench_local(|| {
        session.set(&texts[i % 2]);
        i += 1;
        session.regenerate()
    });
}

/// One file edited without changing any fact (a comment).
#[divan::bench(args = SIZES, sample_count = 10, sample_size = 1)]
fn edit_without_edge_change(bencher: Bencher, n: usize) {
    let mut session = Session::new(n);
    let (before, text) = session.regenerate();
    session.set(&session.with_comment.clone());
    assert_eq!(
        session.regenerate(),
        (before, text),
        "a comment changes nothing"
    );
    let texts = [session.original.clone(), session.with_comment.clone()];
    let mut i = 0;
    bencher.bench_local(|| {
        session.set(&texts[i % 2]);
        i += 1;
        session.regenerate()
    });
}
