//! Tests of `terraci_engine::changes` that load a project through the workspace loader (this
//! crate's), so they live above the engine.
use salsa::Setter as _;

use crate::testing::workspace;
use terraci_db::files::{ChangeInput, Selection};
use terraci_db::filter::Filters;
use terraci_engine::ir::{job_plan, PlanOptions};

use terraci_engine::changes::{affected, unused_libraries};

const CONFIG: &str =
    "structure:\n  pattern: \"{env}/{module}\"\nlibrary_modules:\n  paths: [lib]\n";
const VPC: &str = "terraform {\n  backend \"s3\" {\n    bucket = \"b\"\n    key    = \"stage/vpc/terraform.tfstate\"\n  }\n}\n";
const EKS: &str = "data \"terraform_remote_state\" \"net\" {\n  backend = \"s3\"\n  config = {\n    bucket = \"b\"\n    key    = \"stage/vpc/terraform.tfstate\"\n  }\n}\nmodule \"q\" {\n  source = \"../../lib/queue\"\n}\n";
const APP: &str = "data \"terraform_remote_state\" \"eks\" {\n  backend = \"s3\"\n  config = {\n    bucket = \"b\"\n    key    = \"stage/eks/terraform.tfstate\"\n  }\n}\n";

fn project() -> crate::workspace::Workspace {
    workspace(&[
        (".terraci.yaml", CONFIG),
        ("stage/vpc/main.tf", VPC),
        ("stage/eks/main.tf", EKS),
        ("stage/app/main.tf", APP),
        (
            "lib/queue/main.tf",
            "variable \"name\" {\n  default = \"q\"\n}\n",
        ),
        ("lib/old/main.tf", "variable \"name\" {}\n"),
    ])
}

fn changes(files: &[&str]) -> Option<ChangeInput> {
    Some(ChangeInput {
        files: files.iter().map(|f| f.to_string()).collect(),
        submodules: Vec::new(),
        include_dependencies: false,
    })
}

fn reasons(ws: &crate::workspace::Workspace, selection: Selection) -> Vec<String> {
    affected(&ws.db, ws.project, selection)
        .affected
        .iter()
        .map(|(id, why)| format!("{id}: {}", why.join("; ")))
        .collect()
}

#[test]
fn reason_chains_name_the_file_the_library_and_the_dependency() {
    let ws = project();
    let selection = Selection::new(
        &ws.db,
        Filters::default(),
        PlanOptions::default(),
        changes(&["lib/queue/main.tf", "stage/vpc/main.tf"]),
    );
    assert_eq!(
        reasons(&ws, selection),
        [
            "stage/app: depends on stage/eks (changed)",
            "stage/eks: uses library lib/queue (changed: main.tf)",
            "stage/vpc: changed: main.tf",
        ]
    );
    let result = affected(&ws.db, ws.project, selection);
    // Libraries are never changed modules.
    assert_eq!(result.changed_modules, ["stage/eks", "stage/vpc"]);
}

#[test]
fn a_submodule_marks_the_module_around_it_the_modules_inside_and_library_users() {
    let ws = project();
    let with = |submodules: &[&str]| {
        let selection = Selection::new(
            &ws.db,
            Filters::default(),
            PlanOptions::default(),
            Some(ChangeInput {
                files: submodules.iter().map(|f| f.to_string()).collect(),
                submodules: submodules.iter().map(|f| f.to_string()).collect(),
                include_dependencies: false,
            }),
        );
        reasons(&ws, selection)
    };
    assert_eq!(
        with(&["stage/vpc"]),
        [
            "stage/app: depends on stage/eks (depends on stage/vpc (changed))",
            "stage/eks: depends on stage/vpc (changed)",
            "stage/vpc: changed: the submodule checked out here",
        ]
    );
    assert_eq!(
        with(&["stage/vpc/vendor"])[2],
        "stage/vpc: changed: vendor (submodule)"
    );
    assert_eq!(
        with(&["stage"]),
        [
            "stage/app: inside submodule stage (changed)",
            "stage/eks: inside submodule stage (changed)",
            "stage/vpc: inside submodule stage (changed)",
        ]
    );
    assert_eq!(
        with(&["lib/queue"]),
        [
            "stage/app: depends on stage/eks (changed)",
            "stage/eks: uses library lib/queue (changed: the submodule checked out here)",
        ]
    );
}

#[test]
fn a_deleted_module_is_a_warning_and_not_a_changed_module() {
    let ws = project();
    let selection = Selection::new(
        &ws.db,
        Filters::default(),
        PlanOptions::default(),
        changes(&["stage/gone/main.tf", "stage/gone/terraform.tfvars"]),
    );
    let result = affected(&ws.db, ws.project, selection);
    assert!(result.changed_modules.is_empty());
    assert!(result.affected.is_empty());
    let warnings: Vec<String> = result
        .diagnostics
        .iter()
        .map(|d| format!("{} {}", d.code, d.module.as_deref().unwrap_or("")))
        .collect();
    assert_eq!(warnings, ["deleted-module stage/gone"]);
}

#[test]
fn a_listed_library_nobody_uses_is_reported() {
    let ws = project();
    let unused: Vec<String> = unused_libraries(&ws.db, ws.project)
        .iter()
        .map(|d| format!("{} {}", d.code, d.module.as_deref().unwrap_or("")))
        .collect();
    assert_eq!(unused, ["unused-library lib/old"]);
}

#[test]
fn a_new_change_set_reruns_only_affected_and_the_job_plan() {
    let mut ws = project();
    let selection = Selection::new(
        &ws.db,
        Filters::default(),
        PlanOptions::default(),
        changes(&["stage/app/main.tf"]),
    );
    let first = job_plan(&ws.db, ws.project, selection)
        .clone()
        .expect("plan");
    assert_eq!(first.jobs.len(), 2);

    ws.db.start_logging();
    selection
        .set_changes(&mut ws.db)
        .to(changes(&["stage/vpc/main.tf"]));
    let second = job_plan(&ws.db, ws.project, selection)
        .clone()
        .expect("plan");
    assert_eq!(second.jobs.len(), 6);
    let log = ws.db.take_log();
    let ran = |query: &str| log.iter().any(|l| l.contains(query));
    assert!(ran("affected("), "{log:?}");
    assert!(ran("job_plan("), "{log:?}");
    for query in [
        "parsed_file(",
        "file_facts(",
        "module_facts(",
        "resolved_dependencies(",
        "dependency_graph(",
        "library_users(",
        "library_links(",
    ] {
        assert!(!ran(query), "{query} ran again: {log:?}");
    }

    // A file outside every module changes the input but not the affected set: the
    // job plan is reused.
    selection
        .set_changes(&mut ws.db)
        .to(changes(&["README.md", "stage/vpc/main.tf"]));
    let third = job_plan(&ws.db, ws.project, selection)
        .clone()
        .expect("plan");
    assert_eq!(third, second);
    let log = ws.db.take_log();
    assert!(log.iter().any(|l| l.contains("affected(")), "{log:?}");
    assert!(!log.iter().any(|l| l.contains("job_plan(")), "{log:?}");
}
