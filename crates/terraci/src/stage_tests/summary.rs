//! Tests of `terraci_engine::resolve::summary` that load a project through the workspace loader (this
//! crate's), so they live above the engine.
use crate::cli::EvalArgs;
use crate::workspace::{load_workspace, Workspace};
use terraci_db::db::Db;
use terraci_db::files::{Module, Project};
use terraci_db::system::MemorySystem;
use terraci_db::system::System as _;
use terraci_engine::resolve::summary::*;

const CONFIG: &str =
    "structure:\n  pattern: \"{env}/{module}\"\nlibrary_modules:\n  paths: [lib]\n";
const LIB: &str = "variable \"target\" {}\ndata \"terraform_remote_state\" \"t\" {\n  backend = \"s3\"\n  config = {\n    bucket = \"b\"\n    key    = \"stage/${var.target}/terraform.tfstate\"\n  }\n}\n";
const APP: &str = "module \"net\" {\n  source = \"../../lib/net\"\n  target = \"vpc\"\n}\n";

fn backend(id: &str) -> String {
    format!("terraform {{\n  backend \"s3\" {{\n    bucket = \"b\"\n    key    = \"{id}/terraform.tfstate\"\n  }}\n}}\n")
}

fn project() -> MemorySystem {
    let fs = MemorySystem::new();
    fs.write_file("/p/.terraci.yaml", CONFIG);
    fs.write_file("/p/stage/vpc/main.tf", backend("stage/vpc"));
    fs.write_file("/p/stage/dns/main.tf", backend("stage/dns"));
    fs.write_file("/p/stage/app/main.tf", APP);
    // A broken local: its diagnostic, anchored in the file, comes back from the cache.
    fs.write_file(
        "/p/stage/dns/locals.tf",
        "locals {\n  x = nosuchfunction(1)\n}\ndata \"terraform_remote_state\" \"v\" {\n  backend = \"s3\"\n  config = {\n    bucket = \"b\"\n    key    = \"stage/${local.x}/terraform.tfstate\"\n  }\n}\n",
    );
    fs.write_file("/p/lib/net/main.tf", LIB);
    fs
}

fn load(fs: &MemorySystem, cache: bool, vars: &[&str]) -> Workspace {
    let mut global = crate::testing::global_args();
    global.no_cache = !cache;
    let eval = EvalArgs {
        var: vars.iter().map(|v| (*v).to_owned()).collect(),
        ..EvalArgs::default()
    };
    load_workspace(fs, &global, &eval).expect("the project loads")
}

/// What a user sees of a run: the edges with the rule that made each (`--explain`)
/// and every diagnostic with its place.
fn outcome(ws: &Workspace) -> (Vec<String>, Vec<String>) {
    let edges = terraci_engine::graph::edge_sources(&ws.db, ws.project)
        .into_iter()
        .flat_map(|((a, b), sources)| {
            sources
                .iter()
                .map(move |s| format!("{a} -> {b} by {}", s.rule.as_str()))
                .collect::<Vec<_>>()
        })
        .collect();
    let diagnostics = ws
        .all_diagnostics()
        .iter()
        .map(|d| d.render_human_styled(None, false))
        .collect();
    (edges, diagnostics)
}

/// The modules for which `hit` finds an answer in the cache.
fn from_cache(ws: &Workspace, hit: impl Fn(&dyn Db, Project, Module) -> bool) -> Vec<String> {
    ws.project
        .modules(&ws.db)
        .iter()
        .filter(|&&m| hit(&ws.db, ws.project, m))
        .map(|m| m.info(&ws.db).id.clone())
        .collect()
}

/// The modules the summary cache answered for.
fn answered(ws: &Workspace) -> Vec<String> {
    from_cache(ws, |db, p, m| cached_summary(db, p, m).is_some())
}

/// The root modules whose resolution the cache answered for.
fn resolved(ws: &Workspace) -> Vec<String> {
    from_cache(ws, |db, p, m| cached_resolution(db, p, m).is_some())
}

#[test]
fn every_rule_is_read_back_as_itself() {
    for (i, &rule) in RULES.iter().enumerate() {
        assert_eq!(usize::from(rule_code(rule)), i, "{}", rule.as_str());
    }
}

#[test]
fn a_repeat_run_reads_summaries_and_never_a_stale_one() {
    let fs = project();
    let first = load(&fs, true, &[]);
    let expected = outcome(&first);
    assert_eq!(expected.0, ["stage/app -> stage/vpc by state identity"]);
    assert!(
        expected.1.iter().any(|d| d.contains("locals.tf:2")),
        "{:?}",
        expected.1
    );
    assert!(answered(&first).is_empty(), "no cache yet");

    // Nothing changed: every module is answered from the cache, with the same result.
    let again = load(&fs, true, &[]);
    assert_eq!(
        answered(&again),
        ["lib/net", "stage/app", "stage/dns", "stage/vpc"]
    );
    assert_eq!(outcome(&again), expected);
    assert_eq!(resolved(&again), ["stage/app", "stage/dns", "stage/vpc"]);

    // The called library changes: its caller is evaluated again, and follows.
    fs.write_file(
        "/p/lib/net/main.tf",
        LIB.replace("stage/${var.target}", "stage/dns"),
    );
    let edited = load(&fs, true, &[]);
    assert_eq!(answered(&edited), ["stage/dns", "stage/vpc"]);
    assert_eq!(resolved(&edited), ["stage/dns", "stage/vpc"]);
    assert_eq!(
        outcome(&edited).0,
        ["stage/app -> stage/dns by state identity"]
    );
    assert_eq!(outcome(&edited), outcome(&load(&fs, false, &[])));

    // A file added to a module, and a `--var`: not answered from the cache either.
    // (Two stale entries of four were not worth rewriting the cache for: the
    // library and its caller are computed again too, never answered stale.)
    fs.write_file("/p/stage/vpc/extra.tf", "# more\n");
    let added = load(&fs, true, &[]);
    assert_eq!(answered(&added), ["stage/dns"]);
    assert_eq!(outcome(&added), outcome(&load(&fs, false, &[])));
    let with_var = load(&fs, true, &["target=dns"]);
    assert!(answered(&with_var).is_empty());
    assert_eq!(
        outcome(&with_var),
        outcome(&load(&fs, false, &["target=dns"]))
    );
}

/// Per chunk of the project-wide queries: whether its summary heads, and its
/// roots' resolutions, are read straight from the cache.
fn held(ws: &Workspace) -> Vec<(bool, bool)> {
    terraci_engine::chunk::chunks(&ws.db, ws.project)
        .into_iter()
        .map(|c| {
            (
                held_heads(&ws.db, c).is_some(),
                held_dependencies(&ws.db, c).is_some(),
            )
        })
        .collect()
}

/// What the graph and `--changed-only` read of the chunks: the graph's edges, its
/// diagnostics and the uses-library links.
fn graph_outcome(ws: &Workspace) -> (Vec<String>, Vec<String>, String) {
    let graph = terraci_engine::graph::dependency_graph(&ws.db, ws.project);
    let edges = graph.edges().map(|(a, b)| format!("{a} -> {b}")).collect();
    let diagnostics = ws
        .all_diagnostics()
        .iter()
        .map(|d| d.render_human_styled(None, false))
        .collect();
    let links = format!(
        "{:?}",
        terraci_engine::changes::library_links(&ws.db, ws.project)
    );
    (edges, diagnostics, links)
}

#[test]
fn a_chunk_is_read_from_the_cache_only_while_all_its_modules_hold() {
    // 72 modules, two chunks: lib/net, stage/app, m00..m61 | m62..m69. Each mNN
    // reads the one before it; a broken local in each chunk gives a diagnostic
    // anchored in its file; app calls the library.
    let fs = MemorySystem::new();
    fs.write_file("/p/.terraci.yaml", CONFIG);
    fs.write_file("/p/lib/net/main.tf", LIB);
    fs.write_file("/p/stage/app/main.tf", APP);
    let reads = |id: &str| {
        format!("data \"terraform_remote_state\" \"prev\" {{\n  backend = \"s3\"\n  config = {{\n    bucket = \"b\"\n    key    = \"{id}/terraform.tfstate\"\n  }}\n}}\n")
    };
    for i in 0..70 {
        let id = format!("stage/m{i:02}");
        let mut text = backend(&id);
        if i > 0 {
            text += &reads(&format!("stage/m{:02}", i - 1));
        }
        fs.write_file(format!("/p/{id}/main.tf"), text);
    }
    for id in ["stage/m10", "stage/m66"] {
        fs.write_file(
            format!("/p/{id}/locals.tf"),
            "locals {\n  x = nosuchfunction(1)\n}\ndata \"terraform_remote_state\" \"v\" {\n  backend = \"s3\"\n  config = {\n    bucket = \"b\"\n    key    = \"stage/${local.x}/terraform.tfstate\"\n  }\n}\n",
        );
    }
    // A cycle of locals (a scope diagnostic) and a syntax error (a fact diagnostic).
    fs.write_file(
        "/p/stage/m20/cycle.tf",
        "locals {\n  a = local.b\n  b = local.a\n}\ndata \"terraform_remote_state\" \"c\" {\n  backend = \"s3\"\n  config = {\n    bucket = \"b\"\n    key    = local.a\n  }\n}\n",
    );
    fs.write_file("/p/stage/m64/broken.tf", "locals {\n  a = \n");
    let fresh = |fs: &MemorySystem| graph_outcome(&load(fs, false, &[]));
    let expected = fresh(&fs);
    assert_eq!(expected.0.len(), 69, "{:?}", expected.0);
    for at in [
        "stage/m10/locals.tf:2",
        "stage/m66/locals.tf:2",
        "local-cycle",
        "stage/m64/broken.tf:",
    ] {
        assert!(
            expected.1.iter().any(|d| d.contains(at)),
            "{:?}",
            expected.1
        );
    }
    assert!(expected.2.contains("stage/app"), "{}", expected.2);

    let first = load(&fs, true, &[]);
    assert_eq!(held(&first), [(false, false); 2], "no cache yet");
    assert_eq!(graph_outcome(&first), expected);
    let again = load(&fs, true, &[]);
    assert_eq!(held(&again), [(true, true); 2]);
    assert_eq!(graph_outcome(&again), expected);

    // An edit in m67 that keeps every identity: its chunk is computed (its other
    // modules from their own entries), the first chunk is read whole.
    let m67 = format!("{}# edited\n", backend("stage/m67") + &reads("stage/m66"));
    fs.write_file("/p/stage/m67/main.tf", m67);
    let edited = load(&fs, true, &[]);
    assert_eq!(held(&edited), [(true, true), (false, false)]);
    assert_eq!(graph_outcome(&edited), fresh(&fs));
    // m67's references are as they were: its resolution is reused, and no
    // resolution needed the owners index, which was not built.
    let module = |ws: &Workspace, id: &str| ws.modules[id];
    let m67 = module(&edited, "stage/m67");
    assert!(reused_resolution(&edited.db, edited.project, m67).is_some());
    assert!(edited.project.owners(&edited.db).is_none());
    assert!(again.project.owners(&again.db).is_none());
    assert!(
        first.project.owners(&first.db).is_some(),
        "a cold load builds it"
    );

    // m67 now reads m65: its references changed, so it is resolved again, against
    // the index, which is built.
    let rewired = backend("stage/m67") + &reads("stage/m65");
    fs.write_file("/p/stage/m67/main.tf", rewired);
    let rewired = load(&fs, true, &[]);
    let m67 = module(&rewired, "stage/m67");
    assert!(reused_resolution(&rewired.db, rewired.project, m67).is_none());
    assert!(rewired.project.owners(&rewired.db).is_some());
    let expected = fresh(&fs);
    assert!(expected.0.contains(&"stage/m67 -> stage/m65".to_owned()));
    assert_eq!(graph_outcome(&rewired), expected);

    // m67's state moves: every resolution was matched against the old owners, so
    // none is read from the cache (m68 now finds m67 by its directory only).
    let moved = backend("stage/elsewhere") + &reads("stage/m66");
    fs.write_file("/p/stage/m67/main.tf", moved);
    let moved = load(&fs, true, &[]);
    assert_eq!(held(&moved), [(true, false), (false, false)]);
    assert_eq!(graph_outcome(&moved), fresh(&fs));
}

#[test]
fn a_resolution_is_reused_only_against_the_owners_it_was_made_with() {
    let fs = project();
    load(&fs, true, &[]);
    let again = load(&fs, true, &[]);
    assert_eq!(resolved(&again), ["stage/app", "stage/dns", "stage/vpc"]);
    assert_eq!(outcome(&again), outcome(&load(&fs, false, &[])));

    // vpc's state moves: app's reference now matches vpc by its directory only.
    // Every summary but vpc's still holds, but no resolution does: each was matched
    // against the old owners.
    fs.write_file("/p/stage/vpc/main.tf", backend("stage/network"));
    let moved = load(&fs, true, &[]);
    assert_eq!(answered(&moved), ["lib/net", "stage/app", "stage/dns"]);
    assert!(resolved(&moved).is_empty(), "{:?}", resolved(&moved));
    let expected = outcome(&load(&fs, false, &[]));
    assert_eq!(expected.0, ["stage/app -> stage/vpc by state path"]);
    assert_eq!(outcome(&moved), expected);
}

#[test]
fn a_damaged_summary_cache_is_ignored_with_a_notice() {
    let fs = project();
    let expected = outcome(&load(&fs, true, &[]));
    let path = "/p/.terraci/cache/summaries.bin";
    let mut bytes = fs.read(camino::Utf8Path::new(path)).expect("written");
    let at = bytes.len() / 2;
    bytes[at] ^= 0xff;
    fs.write_file(path, bytes);
    let damaged = load(&fs, true, &[]);
    assert!(
        damaged
            .notices
            .iter()
            .any(|n| n.contains("ignoring the summary cache")),
        "{:?}",
        damaged.notices
    );
    assert_eq!(outcome(&damaged), expected);
    assert_eq!(answered(&load(&fs, true, &[])).len(), 4, "rewritten");
}
