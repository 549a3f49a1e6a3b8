//! Tests of `terraci_engine::resolve` that load a project through the workspace loader (this
//! crate's), so they live above the engine.
use crate::cli::EvalArgs;
use crate::workspace::{load_workspace, Workspace};
use terraci_db::system::MemorySystem;
use terraci_engine::graph::dependency_graph;

const CONFIG: &str = "structure:\n  pattern: \"{env}/{module}\"\n";
const APP: &str = "data \"terraform_remote_state\" \"dep\" {\n  backend = \"s3\"\n  config = {\n    bucket = \"b\"\n    key    = chomp(file(\"${path.module}/dep.txt\"))\n  }\n}\n";

fn backend(id: &str) -> String {
    format!("terraform {{\n  backend \"s3\" {{\n    bucket = \"b\"\n    key    = \"{id}/terraform.tfstate\"\n  }}\n}}\n")
}

fn load(fs: &MemorySystem) -> Workspace {
    load_workspace(fs, &crate::testing::global_args(), &EvalArgs::default())
        .expect("in-memory project loads")
}

fn edges(ws: &Workspace) -> Vec<String> {
    dependency_graph(&ws.db, ws.project)
        .edges()
        .map(|(a, b)| format!("{a} -> {b}"))
        .collect()
}

#[test]
fn a_file_read_by_file_is_a_tracked_input() {
    let fs = MemorySystem::new();
    fs.write_file("/p/.terraci.yaml", CONFIG);
    fs.write_file("/p/stage/vpc/main.tf", backend("stage/vpc"));
    fs.write_file("/p/stage/dns/main.tf", backend("stage/dns"));
    fs.write_file("/p/stage/app/main.tf", APP);
    fs.write_file("/p/stage/app/dep.txt", "stage/vpc/terraform.tfstate\n");
    let mut ws = load(&fs);
    assert_eq!(edges(&ws), ["stage/app -> stage/vpc"]);

    // Nothing changed on disk: nothing to refresh, nothing re-runs.
    ws.db.start_logging();
    assert!(ws.db.refresh_extra().is_empty());
    assert_eq!(edges(&ws), ["stage/app -> stage/vpc"]);
    assert!(ws.db.take_log().is_empty());

    fs.write_file("/p/stage/app/dep.txt", "stage/dns/terraform.tfstate\n");
    assert_eq!(ws.db.refresh_extra(), ["/p/stage/app/dep.txt"]);
    assert_eq!(edges(&ws), ["stage/app -> stage/dns"]);
    let log = ws.db.take_log();
    let ran = |q: &str| log.iter().filter(|l| l.contains(q)).count();
    assert_eq!(ran("module_summary"), 1, "{log:?}");
    assert_eq!(ran("module_facts"), 0, "no Terraform file changed: {log:?}");
}

#[test]
fn fileset_lists_through_the_system() {
    let fs = MemorySystem::new();
    fs.write_file("/p/.terraci.yaml", CONFIG);
    fs.write_file("/p/stage/vpc/main.tf", backend("stage/vpc"));
    fs.write_file("/p/stage/dns/main.tf", backend("stage/dns"));
    fs.write_file(
        "/p/stage/app/main.tf",
        "data \"terraform_remote_state\" \"dep\" {\n  for_each = fileset(path.module, \"deps/*\")\n  backend  = \"s3\"\n  config = {\n    bucket = \"b\"\n    key    = \"stage/${basename(each.key)}/terraform.tfstate\"\n  }\n}\n",
    );
    fs.write_file("/p/stage/app/deps/vpc", "");
    let mut ws = load(&fs);
    assert_eq!(edges(&ws), ["stage/app -> stage/vpc"]);
    fs.write_file("/p/stage/app/deps/dns", "");
    assert_eq!(ws.db.refresh_extra(), ["/p/stage/app"]);
    assert_eq!(
        edges(&ws),
        ["stage/app -> stage/dns", "stage/app -> stage/vpc"]
    );
}
