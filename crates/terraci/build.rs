//! Stamps the binary with the commit and commit date it was built from, for `terraci
//! version`. The commit date, not the build time, so the same commit builds the same
//! binary. Outside a git checkout (a crates.io build) both are `unknown`. On Linux it
//! also links the binary at a fixed address (see `main`).

// A build script reads cargo's environment; the System boundary is for the product.
#![allow(clippy::disallowed_methods)]

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let text = text.trim();
    (out.status.success() && !text.is_empty()).then(|| text.to_owned())
}

fn main() {
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let date = git(&["log", "-1", "--format=%cs"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=TERRACI_COMMIT={commit}");
    println!("cargo:rustc-env=TERRACI_COMMIT_DATE={date}");
    // A new commit changes HEAD (a checkout) or the branch it points to (a commit).
    if let Some(head) = git(&["rev-parse", "--git-path", "HEAD"]) {
        println!("cargo:rerun-if-changed={head}");
    }
    if let Some(reference) = git(&["symbolic-ref", "-q", "HEAD"]) {
        if let Some(path) = git(&["rev-parse", "--git-path", &reference]) {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    // The binary is linked at a fixed address on Linux (as Go links TerraCi's): a
    // position-independent one had the loader apply 43,000 relocations at every start,
    // writing to 190 pages of pointer tables, a third of the startup of a 15 ms run.
    // Libraries, the stack, the heap and every mapping are still placed at random.
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os == "linux" && env == "gnu" {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
