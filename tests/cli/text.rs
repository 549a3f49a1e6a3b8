//! How Terraform files are read as text: byte order marks, duplicate object keys, binary
//! files and files with one broken block. Terraform 1.11 is the reference for what is valid.
use crate::support::Project;

/// `stage/vpc` owns state `stage/vpc`; the test rewrites `stage/app/main.tf`.
fn two_modules() -> Project {
    crate::robustness::base()
}

/// `graph --format json` of `p`: (edges as `from -> to`, diagnostics as `code file:line:column`).
fn graph(p: &Project) -> (Vec<String>, Vec<String>) {
    let out = p.run(&["graph", "--format", "json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).expect("json");
    let edges = v["edges"]
        .as_array()
        .expect("edges")
        .iter()
        .map(|e| {
            format!(
                "{} -> {}",
                e["from"].as_str().unwrap(),
                e["to"].as_str().unwrap()
            )
        })
        .collect();
    let diags = v["diagnostics"]
        .as_array()
        .expect("diagnostics")
        .iter()
        .map(|d| {
            format!(
                "{} {}:{}:{}",
                d["code"].as_str().unwrap(),
                d["file"].as_str().unwrap_or("-"),
                d["line"],
                d["column"]
            )
        })
        .collect();
    (edges, diags)
}

#[test]
fn a_byte_order_mark_is_not_a_syntax_error() {
    let p = two_modules();
    p.write(
        "stage/app/main.tf",
        "\u{feff}variable \"env\" {}\n\ndata \"terraform_remote_state\" \"vpc\" {\n  backend = \"s3\"\n  config = {\n    bucket = \"b\"\n    key    = \"${var.env}/vpc/terraform.tfstate\"\n  }\n}\n",
    );
    p.write("stage/app/terraform.tfvars", "\u{feff}env = \"stage\"\n");
    let (edges, diags) = graph(&p);
    assert_eq!(edges, ["stage/app -> stage/vpc"]);
    assert_eq!(diags, Vec::<String>::new());
}

#[test]
fn a_duplicate_object_key_takes_the_later_value() {
    // Terraform 1.11 accepts a repeated key in an object constructor and keeps the later
    // value (`terraform console`: `{ a = 1, a = 2 }` is `{ "a" = 2 }`).
    let p = two_modules();
    p.write(
        "stage/app/main.tf",
        "locals {\n  tags = { team = \"a\", team = \"b\" }\n}\n\ndata \"terraform_remote_state\" \"vpc\" {\n  backend = \"s3\"\n  config = {\n    bucket = \"b\"\n    key    = \"nowhere/terraform.tfstate\"\n    key    = \"stage/vpc/terraform.tfstate\"\n  }\n}\n",
    );
    let (edges, diags) = graph(&p);
    assert_eq!(edges, ["stage/app -> stage/vpc"]);
    assert_eq!(diags, Vec::<String>::new());
}
