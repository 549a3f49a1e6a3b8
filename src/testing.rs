//! Test support: a project in a `MemorySystem`, loaded into a database.

use crate::cli::{EvalArgs, GlobalArgs};
use crate::run::{load_workspace, Workspace};
use crate::system::MemorySystem;

/// Loads `files` (paths relative to the project root `/p`) as a workspace.
pub fn workspace(files: &[(&str, &str)]) -> Workspace {
    let fs = MemorySystem::new();
    for (path, text) in files {
        fs.write_file(format!("/p/{path}"), *text);
    }
    let global = GlobalArgs {
        config: None,
        dir: Some("/p".into()),
        verbose: 0,
        quiet: false,
        color: crate::cli::ColorChoice::Never,
        log_level: "warn".into(),
        no_cache: true,
        cache_dir: None,
    };
    load_workspace(&fs, &global, &EvalArgs::default()).expect("in-memory project loads")
}

#[cfg(test)]
mod incremental {
    use salsa::Setter as _;

    use super::workspace;
    use crate::files::FileContents;
    use crate::graph::dependency_graph;

    const CONFIG: &str = "structure:\n  pattern: \"{env}/{module}\"\n";
    const VPC: &str = "terraform {\n  backend \"s3\" {\n    bucket = \"b\"\n    key    = \"stage/vpc/terraform.tfstate\"\n  }\n}\n";
    const DNS: &str = "terraform {\n  backend \"s3\" {\n    bucket = \"b\"\n    key    = \"stage/dns/terraform.tfstate\"\n  }\n}\n";
    const EKS: &str = "# reads the vpc\ndata \"terraform_remote_state\" \"net\" {\n  backend = \"s3\"\n  config = {\n    bucket = \"b\"\n    key    = \"stage/vpc/terraform.tfstate\"\n  }\n}\n";

    fn edges(ws: &crate::run::Workspace) -> Vec<String> {
        dependency_graph(&ws.db, ws.project)
            .edges
            .keys()
            .map(|(a, b)| format!("{a} -> {b}"))
            .collect()
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
        ws.db.start_logging();
        let file = ws.files["stage/eks/main.tf"];
        let edited = EKS.replace("# reads the vpc", "# reads the network   ");
        file.set_contents(&mut ws.db)
            .to(FileContents::Text(edited.into()));
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
        let file = ws.files["stage/eks/main.tf"];
        let edited = EKS.replace("stage/vpc/terraform", "stage/dns/terraform");
        file.set_contents(&mut ws.db)
            .to(FileContents::Text(edited.into()));
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
}
