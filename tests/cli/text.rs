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

/// What git-crypt writes: a header with NUL bytes, then ciphertext.
fn encrypted() -> Vec<u8> {
    let mut bytes = b"\0GITCRYPT\0".to_vec();
    let mut x: u32 = 7;
    for _ in 0..256 {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        bytes.push((x >> 16) as u8);
    }
    bytes
}

#[test]
fn an_encrypted_tfvars_file_is_a_warning_and_the_module_is_evaluated_without_it() {
    let p = crate::robustness::base();
    p.write("stage/app/secrets.auto.tfvars", encrypted());
    // Valid UTF-8 with NUL bytes is not text either.
    p.write("stage/vpc/terraform.tfvars", "\0GITCRYPT\0 password = 1\n");
    let out = p.run(&["validate"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.stderr,
        "warning[binary-file]: stage/app/secrets.auto.tfvars: not a text file (invalid UTF-8 at 1:14): encrypted (git-crypt?) or binary; the module is evaluated without its values\n\
         warning[binary-file]: stage/vpc/terraform.tfvars: not a text file (a NUL byte at 1:1): encrypted (git-crypt?) or binary; the module is evaluated without its values\n"
    );
    let (edges, _) = graph(&p);
    assert_eq!(edges, ["stage/app -> stage/vpc"]);
}

#[test]
fn a_terraform_file_that_is_not_text_is_an_error() {
    let p = crate::robustness::base();
    p.write("stage/app/secrets.tf", encrypted());
    let out = p.run(&["validate"]);
    assert_eq!(out.code, 3, "{}", out.stderr);
    assert_eq!(
        out.stderr,
        "error[binary-file]: stage/app/secrets.tf: not a text file (invalid UTF-8 at 1:14): encrypted (git-crypt?) or binary; Terraform cannot load it either, and its blocks are not read\n"
    );
    // The module's other files are still read.
    let (edges, _) = graph(&p);
    assert_eq!(edges, ["stage/app -> stage/vpc"]);
}

#[test]
fn a_syntax_error_keeps_the_other_blocks_of_the_file() {
    let p = crate::robustness::base();
    p.write(
        "stage/app/main.tf",
        "variable \"env\" {\n  default = \"stage\"\n}\n\nlocals {\n  broken = (1\n}\n\ndata \"terraform_remote_state\" \"vpc\" {\n  backend = \"s3\"\n  config = {\n    bucket = \"b\"\n    key    = \"${var.env}/vpc/terraform.tfstate\"\n  }\n}\n\nlocals {\n  half = {\n",
    );
    let out = p.run(&["validate"]);
    assert_eq!(out.code, 3, "{}", out.stderr);
    assert_eq!(
        out.stderr,
        "error[syntax-error]: stage/app/main.tf:7:1: expected `)`\n  |\n7 | }\n  | ^\n"
    );
    let (edges, diags) = graph(&p);
    assert_eq!(edges, ["stage/app -> stage/vpc"]);
    assert_eq!(diags, ["syntax-error stage/app/main.tf:7:1"]);
}
