//! `terraci tfupdate` against a fake registry on a loopback port: service discovery,
//! provider versions, download answers, SHA256SUMS and provider zips built here, so every
//! hash is known. The fixture's module reaches the provider through two local module
//! calls with different constraints. The lock file terraci writes is compared with the
//! one terraform 1.11.4 wrote over the same zips (`terraform providers lock
//! -fs-mirror`), committed as `fixtures/tfupdate/expected/`; the clients tier runs
//! terraform again.

use std::path::Path;
use std::sync::{Arc, Mutex};

use ring::digest::{digest, SHA256};

use crate::policy::{response, serve, Request};
use crate::support::Project;

const VERSIONS: &[&str] = &["1.0.0", "1.2.0", "1.2.3", "1.3.0", "2.0.0"];
const PLATFORMS: &[&str] = &["linux_amd64", "darwin_arm64"];
const MODULE_VERSIONS: &[&str] = &["1.0.0", "1.1.0", "1.4.2", "2.0.0"];
const APP: &str = "platform/prod/eu-central-1/app";

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn zip_name(version: &str, platform: &str) -> String {
    format!("terraform-provider-tiny_{version}_{platform}.zip")
}

/// The package of `version` for `platform`: one file, deflated.
fn package(version: &str, platform: &str) -> Vec<u8> {
    let name = format!("terraform-provider-tiny_v{version}");
    let content = format!("tiny {version} {platform}\n");
    terraci_tfupdate::archive::build_zip(&[(name.as_str(), content.as_bytes())], true)
}

fn sha256sums(version: &str) -> String {
    PLATFORMS
        .iter()
        .map(|p| {
            format!(
                "{}  {}\n",
                hex(digest(&SHA256, &package(version, p)).as_ref()),
                zip_name(version, p)
            )
        })
        .collect()
}

/// What the fake registry saw: request paths and the `Authorization` each carried.
#[derive(Default)]
struct Seen {
    requests: Vec<(String, Option<String>)>,
}

impl Seen {
    fn zips(&self) -> usize {
        self.requests
            .iter()
            .filter(|(p, _)| p.ends_with(".zip"))
            .count()
    }
}

/// The registry: `/.well-known/terraform.json`, `/v1/providers/example/tiny/...`,
/// `/v1/modules/example/vpc/aws/versions`, packages under `/files/`. With `elsewhere`,
/// every package download is redirected there.
fn registry(seen: Arc<Mutex<Seen>>, elsewhere: Option<String>) -> u16 {
    serve(move |Request { path, headers, .. }: Request| {
        seen.lock()
            .unwrap()
            .requests
            .push((path.clone(), headers.get("authorization").cloned()));
        let json = |v: serde_json::Value| response("200 OK", "", v.to_string().as_bytes());
        let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        match parts.as_slice() {
            [".well-known", "terraform.json"] => json(serde_json::json!({
                "providers.v1": "/v1/providers/",
                "modules.v1": "/v1/modules/",
            })),
            ["v1", "providers", "example", "tiny", "versions"] => {
                let platforms: Vec<serde_json::Value> = PLATFORMS
                    .iter()
                    .map(|p| {
                        let (os, arch) = p.split_once('_').unwrap();
                        serde_json::json!({"os": os, "arch": arch})
                    })
                    .collect();
                json(serde_json::json!({
                    "versions": VERSIONS.iter().map(|v| serde_json::json!({
                        "version": v, "protocols": ["5.0"], "platforms": platforms,
                    })).collect::<Vec<_>>()
                }))
            }
            ["v1", "providers", "example", "tiny", v, "download", os, arch] => {
                let platform = format!("{os}_{arch}");
                let zip = package(v, &platform);
                json(serde_json::json!({
                    "protocols": ["5.0"],
                    "os": os,
                    "arch": arch,
                    "filename": zip_name(v, &platform),
                    // Relative to this answer, as the protocol allows.
                    "download_url": format!("../../../../../../../files/{}", zip_name(v, &platform)),
                    "shasums_url": format!("/files/terraform-provider-tiny_{v}_SHA256SUMS"),
                    "shasum": hex(digest(&SHA256, &zip).as_ref()),
                }))
            }
            ["files", name] if name.ends_with("_SHA256SUMS") => {
                let v = name
                    .trim_start_matches("terraform-provider-tiny_")
                    .trim_end_matches("_SHA256SUMS");
                response("200 OK", "", sha256sums(v).as_bytes())
            }
            ["files", name] if name.ends_with(".zip") => {
                if let Some(other) = &elsewhere {
                    return response(
                        "302 Found",
                        &format!("Location: {other}/files/{name}\r\n"),
                        b"",
                    );
                }
                let rest = name.trim_start_matches("terraform-provider-tiny_");
                let rest = rest.trim_end_matches(".zip");
                let (v, platform) = rest.split_once('_').unwrap();
                response("200 OK", "", &package(v, platform))
            }
            ["v1", "modules", "example", "vpc", "aws", "versions"] => json(serde_json::json!({
                "modules": [{"versions": MODULE_VERSIONS.iter().map(|v| serde_json::json!({"version": v})).collect::<Vec<_>>()}]
            })),
            _ => response("404 Not Found", "", b"{}"),
        }
    })
}

fn config(port: u16) -> String {
    format!(
        "structure:\n  pattern: \"{{service}}/{{environment}}/{{region}}/{{module}}\"\n\
         extensions:\n  tfupdate:\n    enabled: true\n    policy:\n      bump: minor\n\
         \x20   registries:\n      default: \"http://127.0.0.1:{port}\"\n\
         \x20   lock:\n      platforms: [linux_amd64, darwin_arm64]\n"
    )
}

fn project(port: u16) -> Project {
    let p = Project::fixture("tfupdate");
    p.write(".terraci.yaml", config(port));
    p
}

/// A lock file without its `zh:` lines.
fn without_zh(lock: &str) -> String {
    lock.lines()
        .filter(|l| !l.contains("\"zh:"))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// A file of `fixtures/tfupdate` as committed.
fn fixture_file(rel: &str) -> String {
    let path = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/tfupdate"
    ))
    .join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn tfupdate_reports_current_against_available_and_names_the_constraint_in_the_way() {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let p = project(registry(seen.clone(), None));
    let before = p.read(&format!("{APP}/main.tf"));
    let out = p.run(&["tfupdate"]);
    crate::snap!("tfupdate_check_text", out.snapshot());
    // Read-only: nothing rewritten, nothing downloaded.
    assert_eq!(p.read(&format!("{APP}/main.tf")), before);
    assert_eq!(seen.lock().unwrap().zips(), 0);

    let out = p.run(&["tfupdate", "--output", "json", "--target", "providers"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let json: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let row = &json["providers"][0];
    assert_eq!(row["current_version"], "1.0.0");
    assert_eq!(row["bumped_version"], "1.2.0");
    assert_eq!(row["latest_version"], "2.0.0");
    assert_eq!(row["status"], "update_available");
    assert_eq!(
        row["issue"],
        "1.3.0 is ruled out by \">= 1.0, < 1.3\" (shared/net/versions.tf:5)"
    );
    assert!(json.get("modules").is_none(), "--target providers");

    // The summary's section.
    let report: serde_json::Value =
        serde_json::from_str(&p.read(".terraci/tfupdate-report.json")).unwrap();
    assert_eq!(report["producer"], "tfupdate");
    assert_eq!(report["status"], "warn");
    assert_eq!(report["modules"][0]["module"], APP);
}

#[test]
fn tfupdate_write_keeps_the_operator_and_writes_the_lock_terraform_writes() {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let p = project(registry(seen.clone(), None));
    let out = p.run(&["tfupdate", "--write"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    crate::snap!("tfupdate_write_main_tf", p.read(&format!("{APP}/main.tf")));
    // Local modules are other modules' too: never rewritten.
    assert_eq!(
        p.read("shared/net/versions.tf"),
        fixture_file("shared/net/versions.tf")
    );
    // Byte for byte what terraform 1.11.4 wrote over the same packages, with the `zh:`
    // hashes a filesystem mirror cannot give (terraform records them from the
    // registry's SHA256SUMS): one per package of the version, every platform.
    let lock = p.read(&format!("{APP}/.terraform.lock.hcl"));
    assert_eq!(
        without_zh(&lock),
        fixture_file("expected/app.terraform.lock.hcl")
    );
    let zh: Vec<String> = lock
        .lines()
        .filter(|l| l.contains("\"zh:"))
        .map(str::to_owned)
        .collect();
    let mut want: Vec<String> = PLATFORMS
        .iter()
        .map(|pl| {
            format!(
                "    \"zh:{}\",",
                hex(digest(&SHA256, &package("1.2.0", pl)).as_ref())
            )
        })
        .collect();
    want.sort();
    assert_eq!(zh, want);
    assert_eq!(seen.lock().unwrap().zips(), PLATFORMS.len());

    // A second project with the same cache home downloads no package again.
    let again = project(registry(seen.clone(), None));
    let cache = p.cache_home().to_str().unwrap().to_owned();
    let out = again.run_env(&["tfupdate", "--write"], &[("TERRACI_CACHE_HOME", &cache)]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    assert_eq!(
        seen.lock().unwrap().zips(),
        PLATFORMS.len(),
        "served from the cache"
    );
    assert_eq!(again.read(&format!("{APP}/.terraform.lock.hcl")), lock);
}

#[test]
fn tfupdate_write_pin_writes_exact_versions() {
    let p = project(registry(Arc::default(), None));
    let out = p.run(&["tfupdate", "--write", "--pin", "--bump", "patch"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    let main = p.read(&format!("{APP}/main.tf"));
    // Patch: 1.0.x has nothing newer for the provider; the module's 1.0.0 neither.
    assert!(main.contains("version = \"~> 1.0\""), "{main}");
    assert!(
        main.contains("version = \"1.0.0\" # an exact version"),
        "{main}"
    );
    let out = p.run(&["tfupdate", "--write", "--pin", "--bump", "major"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    let main = p.read(&format!("{APP}/main.tf"));
    assert!(main.contains("version = \"1.2.0\""), "{main}");
    assert!(
        main.contains("version = \"2.0.0\" # an exact version"),
        "{main}"
    );
}

#[test]
fn tfupdate_sends_no_token_to_another_host_a_download_is_redirected_to() {
    let other_seen = Arc::new(Mutex::new(Seen::default()));
    let other = registry(other_seen.clone(), None);
    let seen = Arc::new(Mutex::new(Seen::default()));
    let port = registry(seen.clone(), Some(format!("http://localhost:{other}")));
    let p = project(port);
    let var = format!("TF_TOKEN_127_0_0_1_{port}");
    let out = p.run_env(&["tfupdate", "--write"], &[(var.as_str(), "s3cret")]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    let seen = seen.lock().unwrap();
    assert!(
        seen.requests
            .iter()
            .all(|(_, auth)| auth.as_deref() == Some("Bearer s3cret")),
        "the registry's own origin gets the token: {:?}",
        seen.requests
    );
    let other_seen = other_seen.lock().unwrap();
    assert_eq!(other_seen.zips(), PLATFORMS.len());
    assert!(
        other_seen.requests.iter().all(|(_, auth)| auth.is_none()),
        "{:?}",
        other_seen.requests
    );
    assert!(!out.stdout.contains("s3cret") && !out.stderr.contains("s3cret"));
}

#[test]
fn tfupdate_errors_name_what_was_expected() {
    let p = project(registry(Arc::default(), None));
    p.write(
        ".terraci.yaml",
        config(1).replace("bump: minor", "bump: sideways"),
    );
    let out = p.run(&["tfupdate"]);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr
            .contains("invalid bump \"sideways\": expected patch, minor or major"),
        "{}",
        out.stderr
    );

    p.write(
        ".terraci.yaml",
        config(1).replace("enabled: true", "enabled: false"),
    );
    let out = p.run(&["tfupdate"]);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("set extensions.tfupdate.enabled: true"),
        "{}",
        out.stderr
    );

    // A registry that is not there: an error row, exit 1.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    p.write(".terraci.yaml", config(port));
    let out = p.run(&["tfupdate"]);
    assert_eq!(out.code, 1, "{}", out.snapshot());
    assert!(
        out.stdout.contains(": error: GET http://127.0.0.1:"),
        "{}",
        out.stdout
    );
    assert!(
        out.stderr.contains(&format!(
            "error[tfupdate-update]: {APP}: example/tiny: GET http://127.0.0.1:"
        )),
        "{}",
        out.stderr
    );

    // A constraint terraform would refuse names its file and line.
    let p = project(registry(Arc::default(), None));
    p.write("shared/dns/versions.tf", "terraform {\n  required_providers {\n    tiny = {\n      source  = \"example/tiny\"\n      version = \"=> 1.2\"\n    }\n  }\n}\n");
    let out = p.run(&["tfupdate"]);
    assert_eq!(out.code, 1, "{}", out.snapshot());
    assert!(
        out.stdout
            .contains("error: shared/dns/versions.tf:5: invalid version constraint \"=> 1.2\""),
        "{}",
        out.stdout
    );
    assert!(
        out.stderr.contains(
            "error[tfupdate-read]: shared/dns/versions.tf:5: invalid version constraint \"=> 1.2\""
        ),
        "{}",
        out.stderr
    );
}

#[test]
fn tfupdate_is_listed_in_help() {
    let p = Project::empty();
    let out = p.run(&["--help"]);
    assert!(
        out.stdout
            .lines()
            .any(|l| l.trim_start().starts_with("tfupdate ")),
        "{}",
        out.stdout
    );
}

/// terraform, given the packages as a filesystem mirror, writes the lock terraci wrote
/// (and keeps it as it is when run on it).
#[test]
#[cfg_attr(
    not(feature = "clients"),
    ignore = "runs a CI client or terraform: the clients tier (bash .ci/test)"
)]
fn terraform_writes_the_lock_file_terraci_writes() {
    let p = project(registry(Arc::default(), None));
    let out = p.run(&["tfupdate", "--write"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    let ours = p.read(&format!("{APP}/.terraform.lock.hcl"));
    // Given terraci's lock, terraform finds nothing to change, and `terraform init`
    // installs from the mirror under it (`-lockfile=readonly` fails on any change).
    assert_eq!(terraform_lock(&p, &ours), ours);
    // From nothing, it writes the same but for the `zh:` hashes only a registry gives.
    assert_eq!(terraform_lock(&p, ""), without_zh(&ours));
}

/// Runs `terraform get` and `terraform providers lock -fs-mirror` in a copy of the app
/// module (without its registry module call, which needs the network) whose lock file
/// is `lock` (none when empty), then, with a lock, `terraform init` from the mirror;
/// returns the lock file terraform leaves.
fn terraform_lock(p: &Project, lock: &str) -> String {
    let mirror = tempfile::tempdir().unwrap();
    write_packages(mirror.path());
    let main = p.read(&format!("{APP}/main.tf"));
    let without_registry_call = main.split("module \"vpc\"").next().unwrap().to_owned();
    p.write(&format!("{APP}/main.tf"), without_registry_call);
    if lock.is_empty() {
        let _ = std::fs::remove_file(p.path().join(APP).join(".terraform.lock.hcl"));
    } else {
        p.write(&format!("{APP}/.terraform.lock.hcl"), lock);
    }
    let module = p.path().join(APP);
    // For `init`: the mirror as the only place providers come from.
    let cli_config = mirror.path().join("terraform.rc");
    std::fs::write(
        &cli_config,
        format!(
            "provider_installation {{\n  filesystem_mirror {{\n    path = \"{}\"\n  }}\n}}\n",
            mirror.path().display()
        ),
    )
    .unwrap();
    let run = |args: &[&str]| {
        let out =
            std::process::Command::new(crate::real_terraform::terraform_dir().join("terraform"))
                .args(args)
                .current_dir(&module)
                .env("TF_IN_AUTOMATION", "1")
                .env("CHECKPOINT_DISABLE", "1")
                .env("TF_CLI_CONFIG_FILE", &cli_config)
                .output()
                .expect("run terraform");
        assert!(
            out.status.success(),
            "terraform {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    run(&["get"]);
    let mut args = vec!["providers".to_owned(), "lock".to_owned()];
    args.push(format!("-fs-mirror={}", mirror.path().display()));
    for platform in PLATFORMS {
        args.push(format!("-platform={platform}"));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run(&args);
    if !lock.is_empty() {
        run(&[
            "init",
            "-backend=false",
            "-input=false",
            "-lockfile=readonly",
        ]);
    }
    p.read(&format!("{APP}/.terraform.lock.hcl"))
}

/// The packages of every version and platform as a filesystem mirror under `root`.
fn write_packages(root: &Path) {
    let dir = root.join("registry.terraform.io/example/tiny");
    std::fs::create_dir_all(&dir).unwrap();
    for v in VERSIONS {
        for platform in PLATFORMS {
            std::fs::write(dir.join(zip_name(v, platform)), package(v, platform)).unwrap();
        }
    }
}

/// Writes the packages as a filesystem mirror into `$TFUPDATE_MIRROR` (how the expected
/// lock files were made with terraform).
#[test]
#[ignore = "writes the mirror for making the expected files"]
fn write_mirror() {
    write_packages(Path::new(&std::env::var("TFUPDATE_MIRROR").unwrap()));
}

#[test]
fn tfupdate_pipeline_adds_a_check_job_whose_report_is_a_section_of_the_summary() {
    let p = project(registry(Arc::default(), None));
    let plain = p.run(&["generate"]);
    assert_eq!(plain.code, 0, "{}", plain.stderr);
    assert!(!plain.stdout.contains("tfupdate"), "{}", plain.stdout);

    let port = registry(Arc::default(), None);
    p.write(
        ".terraci.yaml",
        config(port).replace(
            "    enabled: true\n",
            "    enabled: true\n    pipeline: true\n",
        ),
    );
    let gitlab = p.run(&["generate"]);
    assert_eq!(gitlab.code, 0, "{}", gitlab.stderr);
    let job = gitlab
        .stdout
        .split("\n\n")
        .find(|block| block.starts_with("tfupdate-check:"))
        .unwrap_or_else(|| panic!("no tfupdate-check job:\n{}", gitlab.stdout));
    crate::snap!("tfupdate_pipeline_gitlab_job", job);
    let github = p.run(&["generate", "--provider", "github"]);
    assert_eq!(github.code, 0, "{}", github.stderr);
    for line in [
        "  tfupdate-check:",
        "          terraci tfupdate",
        "          path: .terraci/tfupdate-report.json",
        "      - tfupdate-check",
    ] {
        assert!(github.stdout.contains(line), "{line}: {}", github.stdout);
    }

    let out = p.run(&["tfupdate"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    // The summary shows reports beside plans: the app module planned without changes.
    p.write(&format!("{APP}/plan.result.json"), "{\"exit_code\": 0}\n");
    let summary = p.run(&["summary"]);
    assert_eq!(summary.code, 0, "{}", summary.snapshot());
    crate::snap!("tfupdate_summary_section", summary.stdout);

    // A section that cannot be read stops `generate` only when it asks for the job.
    let unreadable =
        config(port).replace("    policy:\n      bump: minor\n", "    policy: latest\n");
    p.write(".terraci.yaml", &unreadable);
    let out = p.run(&["generate"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("warning[config-warning]: extensions.tfupdate.policy: invalid type"),
        "{}",
        out.stderr
    );
    p.write(
        ".terraci.yaml",
        unreadable.replace(
            "    enabled: true\n",
            "    enabled: true\n    pipeline: true\n",
        ),
    );
    let broken = p.run(&["generate"]);
    assert_eq!(broken.code, 1, "{}", broken.stderr);
    assert!(
        broken
            .stderr
            .contains("error[contribution-invalid]: extensions.tfupdate.policy: invalid type"),
        "{}",
        broken.stderr
    );
}

#[test]
fn tfupdate_reads_no_file_a_symlink_leads_out_of_the_project_to() {
    let p = project(registry(Arc::default(), None));
    let outside = tempfile::tempdir().unwrap();
    // Followed, it would hold the provider at 1.0.0.
    std::fs::write(
        outside.path().join("pin.tf"),
        "terraform {\n  required_providers {\n    tiny = {\n      source  = \"example/tiny\"\n      version = \"= 1.0.0\"\n    }\n  }\n}\n",
    )
    .unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("pin.tf"),
        p.path().join(APP).join("pin.tf"),
    )
    .unwrap();
    let out = p.run(&["tfupdate", "--target", "providers"]);
    assert_eq!(out.code, 1, "{}", out.snapshot());
    assert!(
        out.stdout
            .contains("error: platform/prod/eu-central-1/app/pin.tf: "),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("-> 1.2.0"), "{}", out.stdout);
}

#[test]
fn tfupdate_leaves_ignored_sources_and_other_modules_alone() {
    let port = registry(Arc::default(), None);
    let p = project(port);
    p.write(
        ".terraci.yaml",
        config(port).replace(
            "    enabled: true\n",
            "    enabled: true\n    ignore: [example/tiny]\n",
        ),
    );
    let out = p.run(&["tfupdate", "--output", "json"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    let json: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert!(json.get("providers").is_none(), "{}", out.stdout);
    assert_eq!(
        json["modules"][0]["dependency"]["source"],
        "example/vpc/aws"
    );

    p.write(".terraci.yaml", config(port));
    let out = p.run(&["tfupdate", "--module", "platform/prod/eu-central-1/nope"]);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr
            .contains("`platform/prod/eu-central-1/nope` is not a module of the project"),
        "{}",
        out.stderr
    );
    let out = p.run(&["tfupdate", "-m", &format!("{APP}/"), "-t", "modules"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    assert!(out.stdout.contains("module vpc"), "{}", out.stdout);
    assert!(!out.stdout.contains("provider"), "{}", out.stdout);
}

#[test]
fn tfupdate_write_completes_the_lock_of_a_provider_that_keeps_its_version() {
    let p = project(registry(Arc::default(), None));
    let before = p.read(&format!("{APP}/.terraform.lock.hcl"));
    // Patch: nothing newer than 1.0.0; only linux_amd64 asked for.
    let out = p.run(&[
        "tfupdate",
        "--write",
        "--bump",
        "patch",
        "--target",
        "providers",
        "--lock-platforms",
        "linux_amd64",
    ]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    let after = p.read(&format!("{APP}/.terraform.lock.hcl"));
    // The h1: hashes terraform recorded (both platforms) are kept, and the zh: hashes of
    // every 1.0.0 package are added; nothing else changes.
    assert_eq!(without_zh(&after), before);
    let zh: Vec<&str> = after.lines().filter(|l| l.contains("\"zh:")).collect();
    assert_eq!(zh.len(), PLATFORMS.len(), "{after}");
    for platform in PLATFORMS {
        let sum = hex(digest(&SHA256, &package("1.0.0", platform)).as_ref());
        assert!(
            after.contains(&format!("\"zh:{sum}\"")),
            "{platform}: {after}"
        );
    }
    assert_eq!(
        p.read(&format!("{APP}/main.tf")),
        fixture_file(&format!("{APP}/main.tf"))
    );
}
