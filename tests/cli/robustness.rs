//! No panic on any input: each bad file gives a diagnostic and the rest still works.
use crate::support::Project;

fn assert_still_works(p: &Project, bad: &str) {
    let out = p.run(&["graph", "--format", "json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    // The good module still depends on vpc.
    let edges = v["edges"].as_array().unwrap();
    assert!(
        edges
            .iter()
            .any(|e| e["from"] == "stage/app" && e["to"] == "stage/vpc"),
        "{}",
        out.stdout
    );
    // The bad file is reported by name.
    let diags = v["diagnostics"].as_array().unwrap();
    assert!(
        diags
            .iter()
            .any(|d| d["file"].as_str().is_some_and(|f| f.ends_with(bad))),
        "{bad}: {}",
        out.stdout
    );
}

/// `stage/vpc` owning state `stage/vpc`, and `stage/app` reading it.
pub(crate) fn base() -> Project {
    let p = Project::empty();
    p.write(
        ".terraci.yaml",
        "structure:\n  pattern: \"{environment}/{module}\"\n",
    );
    p.write(
        "stage/vpc/main.tf",
        "terraform {\n  backend \"s3\" {\n    bucket = \"b\"\n    key = \"stage/vpc/terraform.tfstate\"\n  }\n}\n",
    );
    p.write(
        "stage/app/main.tf",
        "data \"terraform_remote_state\" \"vpc\" {\n  backend = \"s3\"\n  config = {\n    bucket = \"b\"\n    key = \"stage/vpc/terraform.tfstate\"\n  }\n}\n",
    );
    p
}

#[test]
fn random_bytes() {
    let p = base();
    let mut bytes = Vec::new();
    let mut x: u32 = 12345;
    for _ in 0..4096 {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        bytes.push((x >> 16) as u8);
    }
    p.write("stage/junk/main.tf", bytes);
    assert_still_works(&p, "stage/junk/main.tf");
}

#[test]
fn half_typed_block() {
    let p = base();
    p.write(
        "stage/half/main.tf",
        "data \"terraform_remote_state\" \"x\" {\n  config = {\n",
    );
    assert_still_works(&p, "stage/half/main.tf");
}

#[test]
fn deeply_nested_expression() {
    let p = base();
    let deep = format!(
        "locals {{\n  x = {}1{}\n}}\n",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    p.write("stage/deep/main.tf", deep);
    assert_still_works(&p, "stage/deep/main.tf");
}

#[test]
fn empty_and_large_files_are_fine() {
    let p = base();
    p.write("stage/empty/main.tf", "");
    let mut big = String::new();
    while big.len() < 5 * 1024 * 1024 {
        big.push_str("resource \"null_resource\" \"x\" {\n  triggers = { a = \"b\" }\n}\n");
    }
    big.push_str("syntax error here {\n");
    p.write("stage/big/main.tf", big);
    assert_still_works(&p, "stage/big/main.tf");
}

#[test]
fn dangling_symlink_is_an_unreadable_file() {
    let p = base();
    std::fs::create_dir_all(p.path().join("stage/link")).unwrap();
    std::os::unix::fs::symlink("/nonexistent/x.tf", p.path().join("stage/link/main.tf")).unwrap();
    assert_still_works(&p, "stage/link/main.tf");
}
