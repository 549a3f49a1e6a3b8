//! `terraci cost` on `fixtures/cost` (see its README): slices of AWS's price lists served
//! from a loopback HTTP server or read with `--pricing-dir`, plans in terraform 1.11.4's
//! JSON shape. Every figure is checked against the slice's price times the usage,
//! computed here by hand.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::snap;
use crate::support::Project;

fn prices_dir() -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .join("fixtures/cost/prices")
        .canonicalize()
        .expect("fixtures/cost/prices")
}

/// Serves `fixtures/cost/prices` as AWS serves its price lists (same paths); records
/// each path asked for.
struct PriceServer {
    url: String,
    seen: Arc<Mutex<Vec<String>>>,
}

impl PriceServer {
    fn start() -> PriceServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let shared = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let seen = shared.clone();
                std::thread::spawn(move || serve(stream, &seen));
            }
        });
        PriceServer { url, seen }
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

fn serve(mut stream: TcpStream, seen: &Mutex<Vec<String>>) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut request = String::new();
    if reader.read_line(&mut request).is_err() {
        return;
    }
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
    }
    let path = request.split_whitespace().nth(1).unwrap_or("/").to_owned();
    seen.lock().unwrap().push(path.clone());
    let file = prices_dir().join(path.trim_start_matches('/'));
    let (status, body) = match (path.contains(".."), std::fs::read(&file)) {
        (false, Ok(body)) => ("200 OK", body),
        _ => (
            "404 Not Found",
            b"<Error><Code>NoSuchKey</Code></Error>".to_vec(),
        ),
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(&body);
}

fn project() -> Project {
    Project::fixture("cost/project")
}

fn json(out: &crate::support::Output) -> Value {
    assert_eq!(out.code, 0, "{}", out.stderr);
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", out.stdout))
}

fn module<'a>(estimate: &'a Value, id: &str) -> &'a Value {
    estimate["modules"]
        .as_array()
        .expect("modules")
        .iter()
        .find(|m| m["module"] == id)
        .unwrap_or_else(|| panic!("no module {id} in {estimate:#}"))
}

fn resource<'a>(module: &'a Value, address: &str) -> &'a Value {
    module["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .find(|r| r["address"] == address)
        .unwrap_or_else(|| panic!("no resource {address} in {module:#}"))
}

fn money(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn assert_cost(actual: &Value, expected: f64, what: &str) {
    let actual = money(actual);
    assert!(
        (actual - expected).abs() < 0.0001,
        "{what}: {actual} != {expected} (by hand)"
    );
}

const APP: &str = "platform/prod/us-east-1/app";

#[test]
fn ten_common_resources_cost_the_price_in_the_slice_times_the_documented_usage() {
    let server = PriceServer::start();
    let p = project();
    let out = p.run_env(
        &["cost", "--format", "json", "-v"],
        &[("TERRACI_PRICING_URL", &server.url)],
    );
    let estimate = json(&out);
    assert!(
        out.stderr.contains(&format!(
            "prices: AmazonEKS us-east-1: downloaded from {}/offers/v1.0/aws/AmazonEKS/current/us-east-1/index.json\n",
            server.url
        )),
        "{}",
        out.stderr
    );
    let app = module(&estimate, APP);
    let hours = 730.0;
    // Prices from fixtures/cost/prices (us-east-1), usage as docs/cost.md states it.
    let expected: [(&str, f64); 10] = [
        // t3.micro Linux on demand, and its root volume (8 GB of gp2 when the plan does
        // not know it).
        ("aws_instance.web", 0.0104 * hours + 0.10 * 8.0),
        ("aws_ebs_volume.data", 0.08 * 100.0),
        // db.t3.medium PostgreSQL Single-AZ and 20 GB of gp2 storage.
        ("aws_db_instance.db", 0.072 * hours + 0.115 * 20.0),
        ("aws_nat_gateway.main", 0.045 * hours),
        ("aws_lb.web", 0.0225 * hours),
        ("aws_eks_cluster.main", 0.10 * hours),
        ("aws_elasticache_cluster.cache", 0.017 * hours),
        // On demand: 1,000,000 read and 1,000,000 write request units assumed.
        (
            "aws_dynamodb_table.events",
            0.000000125 * 1e6 + 0.000000625 * 1e6,
        ),
        // 1,000,000 requests of 0.1 s at 512 MB assumed.
        (
            "aws_lambda_function.worker",
            0.0000002 * 1e6 + 0.0000166667 * (1e6 * 0.1 * 512.0 / 1024.0),
        ),
        // 1 GB of Standard, 10,000 tier-1 and 100,000 tier-2 requests assumed.
        (
            "aws_s3_bucket.logs",
            0.023 * 1.0 + 0.000005 * 10_000.0 + 0.0000004 * 100_000.0,
        ),
    ];
    let mut total = 0.0;
    for (address, cost) in expected {
        let r = resource(app, address);
        assert_eq!(r["action"], "create", "{address}");
        assert_cost(&r["after"], cost, address);
        assert_cost(&r["before"], 0.0, address);
        assert_cost(&r["diff"], cost, address);
        total += cost;
    }
    // Assumed usage is said so, per resource and per line.
    for address in [
        "aws_dynamodb_table.events",
        "aws_lambda_function.worker",
        "aws_s3_bucket.logs",
    ] {
        let r = resource(app, address);
        assert_eq!(r["status"], "usage_estimated", "{address}");
        assert!(r["lines"]
            .as_array()
            .unwrap()
            .iter()
            .all(|l| l["assumed"] == true));
    }
    assert_eq!(resource(app, "aws_instance.web")["status"], "exact");
    // A queue is charged by use only: shown as such, not as a silent 0.
    let queue = resource(app, "aws_sqs_queue.jobs");
    assert_eq!(queue["status"], "usage_based");
    assert_eq!(queue["notes"][0], "usage-based: requests");
    // A type terraci does not price is listed, not dropped.
    assert_eq!(
        app["unpriced"],
        serde_json::json!([{"address": "aws_iam_role.worker", "type": "aws_iam_role", "reason": "not a resource type terraci prices"}])
    );
    assert_cost(&app["after"], total, "the module");
    assert_eq!(estimate["currency"], "USD");

    // Each price list was fetched once, by AWS's path.
    let mut seen = server.seen();
    seen.sort();
    assert_eq!(
        seen,
        [
            "/offers/v1.0/aws/AWSLambda/current/us-east-1/index.json",
            "/offers/v1.0/aws/AWSSecretsManager/current/us-east-1/index.json",
            "/offers/v1.0/aws/AmazonCloudWatch/current/us-east-1/index.json",
            "/offers/v1.0/aws/AmazonDynamoDB/current/us-east-1/index.json",
            "/offers/v1.0/aws/AmazonEC2/current/eu-central-1/index.json",
            "/offers/v1.0/aws/AmazonEC2/current/us-east-1/index.json",
            "/offers/v1.0/aws/AmazonEKS/current/us-east-1/index.json",
            "/offers/v1.0/aws/AmazonElastiCache/current/us-east-1/index.json",
            "/offers/v1.0/aws/AmazonRDS/current/us-east-1/index.json",
            "/offers/v1.0/aws/AmazonRoute53/current/global/index.json",
            "/offers/v1.0/aws/AmazonS3/current/us-east-1/index.json",
            "/offers/v1.0/aws/AmazonVPC/current/us-east-1/index.json",
            "/offers/v1.0/aws/awskms/current/us-east-1/index.json",
        ]
    );
    // Cached outside the checkout: a second run asks the network for nothing and
    // prints the same.
    assert!(p
        .cache_home()
        .join("cost/pricing/AmazonEC2/us-east-1.json")
        .is_file());
    let again = p.run_env(
        &["cost", "--format", "json", "-v"],
        &[("TERRACI_PRICING_URL", &server.url)],
    );
    assert_eq!(again.stdout, out.stdout);
    let ec2 = format!(
        "prices: AmazonEC2 us-east-1: cached in {}\n",
        p.cache_home()
            .join("cost/pricing/AmazonEC2/us-east-1.json")
            .display()
    );
    assert!(again.stderr.contains(&ec2), "{}", again.stderr);
    assert_eq!(server.seen().len(), 13, "{:?}", server.seen());
}

#[test]
fn monthly_resources_and_a_public_address_cost_their_price_lists_figures() {
    let p = project();
    let dir = prices_dir();
    let out = p.run(&[
        "cost",
        "-o",
        "json",
        "-m",
        "platform/prod/us-east-1/shared",
        "--pricing-dir",
        dir.to_str().unwrap(),
    ]);
    let estimate = json(&out);
    let shared = module(&estimate, "platform/prod/us-east-1/shared");
    for (address, cost) in [
        ("aws_eip.nat", 0.005 * 730.0),
        ("aws_kms_key.main", 1.0),
        ("aws_secretsmanager_secret.db", 0.40),
        // The first tier of Route 53's global price list (up to 25 zones).
        ("aws_route53_zone.main", 0.50),
        ("aws_cloudwatch_metric_alarm.cpu", 0.10),
        // A period under a minute: a high-resolution alarm.
        ("aws_cloudwatch_metric_alarm.fast", 0.30),
    ] {
        let r = resource(shared, address);
        assert_eq!(r["status"], "exact", "{address}");
        assert_cost(&r["after"], cost, address);
    }
    assert_eq!(
        resource(shared, "aws_cloudwatch_log_group.app")["status"],
        "usage_based"
    );
    assert_eq!(shared["unpriced"], serde_json::json!([]));
}

#[test]
fn an_expired_cache_is_fetched_again() {
    let server = PriceServer::start();
    let p = project();
    p.write(
        ".terraci.yaml",
        "extensions:\n  cost:\n    providers: {aws: {enabled: true}}\n    blob_cache: {ttl: 1s}\n",
    );
    let env = [("TERRACI_PRICING_URL", server.url.as_str())];
    let args = ["cost", "--module", "platform/prod/us-east-1/resize"];
    assert_eq!(p.run_env(&args, &env).code, 0);
    assert_eq!(server.seen().len(), 1);
    std::thread::sleep(std::time::Duration::from_millis(2100));
    assert_eq!(p.run_env(&args, &env).code, 0);
    assert_eq!(server.seen().len(), 2, "the 1s TTL expired: fetched again");
}

#[test]
fn plans_that_create_change_delete_and_replace_give_before_after_and_diff() {
    let p = project();
    let dir = prices_dir();
    let out = p.run(&["cost", "-o", "json", "--pricing-dir", dir.to_str().unwrap()]);
    let estimate = json(&out);
    let hours = 730.0;
    let root = 0.10 * 8.0;

    // An instance type changed: t3.micro -> t3.small, the same root volume.
    let resize = module(&estimate, "platform/prod/us-east-1/resize");
    let api = resource(resize, "aws_instance.api");
    assert_eq!(api["action"], "update");
    assert_cost(&api["before"], 0.0104 * hours + root, "before");
    assert_cost(&api["after"], 0.0208 * hours + root, "after");
    assert_cost(&api["diff"], (0.0208 - 0.0104) * hours, "diff");
    assert_cost(&resize["diff"], (0.0208 - 0.0104) * hours, "module diff");

    // A NAT gateway deleted, an EKS cluster left alone.
    let retire = module(&estimate, "platform/prod/us-east-1/retire");
    let old = resource(retire, "aws_nat_gateway.old");
    assert_eq!(old["action"], "delete");
    assert_cost(&old["before"], 0.045 * hours, "deleted before");
    assert_cost(&old["after"], 0.0, "deleted after");
    let keep = resource(retire, "aws_eks_cluster.keep");
    assert_eq!(keep["action"], "no-op");
    assert_cost(&keep["diff"], 0.0, "no-op diff");
    assert_cost(
        &retire["before"],
        0.045 * hours + 0.10 * hours,
        "module before",
    );
    assert_cost(&retire["after"], 0.10 * hours, "module after");
    assert_cost(&retire["diff"], -0.045 * hours, "module diff");

    // A database replaced: MySQL -> PostgreSQL, same class and storage.
    let rebuild = module(&estimate, "platform/prod/us-east-1/rebuild");
    let db = resource(rebuild, "aws_db_instance.main");
    assert_eq!(db["action"], "replace");
    assert_cost(
        &db["before"],
        0.068 * hours + 0.115 * 20.0,
        "replaced before",
    );
    assert_cost(&db["after"], 0.072 * hours + 0.115 * 20.0, "replaced after");

    // The region of a provider given by a root variable, and its prefixed usage types.
    let web = module(&estimate, "platform/stage/eu-central-1/web");
    assert_eq!(web["region"], "eu-central-1");
    assert_cost(
        &web["after"],
        0.012 * hours + 0.119 * 8.0 + 0.052 * hours,
        "eu-central-1",
    );

    // The totals are the modules' sums.
    let sum = |key: &str| -> f64 {
        estimate["modules"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| money(&m[key]))
            .sum()
    };
    assert_cost(&estimate["total_before"], sum("before"), "total before");
    assert_cost(&estimate["total_after"], sum("after"), "total after");
    assert_cost(
        &estimate["total_diff"],
        sum("after") - sum("before"),
        "total diff",
    );
}

#[test]
fn the_text_output_shows_each_line_as_unit_price_times_usage() {
    let p = project();
    let dir = prices_dir();
    let out = p.run(&["cost", "--pricing-dir", dir.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    snap!(
        "cost_text",
        out.snapshot().replace(dir.to_str().unwrap(), "[PRICES]")
    );
}

// --- TerraCi's cost command tests, replayed -------------------------------------------

#[test]
fn not_enabled_is_an_error_saying_how_to_enable_it() {
    let p = project();
    p.write(".terraci.yaml", "extensions:\n  cost: {}\n");
    let out = p.run(&["cost"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains(
            "cost estimation is not enabled (set extensions.cost.providers.aws.enabled: true"
        ),
        "{}",
        out.stderr
    );
    p.write(".terraci.yaml", "");
    assert!(p.run(&["cost"]).stderr.contains("not enabled"));
}

#[test]
fn no_plan_files_is_an_error() {
    let p = project();
    for m in [
        "platform/prod/us-east-1/app",
        "platform/prod/us-east-1/rebuild",
        "platform/prod/us-east-1/resize",
        "platform/prod/us-east-1/retire",
        "platform/prod/us-east-1/shared",
        "platform/stage/eu-central-1/web",
    ] {
        p.remove(&format!("{m}/plan.json"));
    }
    let out = p.run(&["cost"]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("no plan.json files found"),
        "{}",
        out.stderr
    );
}

#[test]
fn an_invalid_ttl_is_an_invalid_cost_configuration() {
    let p = project();
    p.write(
        ".terraci.yaml",
        "extensions:\n  cost:\n    providers: {aws: {enabled: true}}\n    blob_cache: {ttl: invalid-duration}\n",
    );
    let out = p.run(&["cost"]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("invalid cost configuration"),
        "{}",
        out.stderr
    );
    // The cache's namespace stays inside the cache home.
    p.write(
        ".terraci.yaml",
        "extensions:\n  cost:\n    providers: {aws: {enabled: true}}\n    blob_cache: {namespace: ../../elsewhere}\n",
    );
    let out = p.run(&["cost"]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("must be a relative path"),
        "{}",
        out.stderr
    );
}

#[test]
fn with_plan_files_the_report_for_the_summary_is_written() {
    let p = project();
    let dir = prices_dir();
    let out = p.run_env(
        &["cost", "--pricing-dir", dir.to_str().unwrap()],
        &[("CI_COMMIT_SHA", "0123abcd")],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let report: Value = serde_json::from_str(&p.read(".terraci/cost-report.json")).unwrap();
    assert_eq!(report["producer"], "cost");
    assert_eq!(report["status"], "pass");
    assert_eq!(report["commit"], "0123abcd");
    assert_eq!(report["modules"].as_array().unwrap().len(), 6);
    let results: Value = serde_json::from_str(&p.read(".terraci/cost-results.json")).unwrap();
    assert_eq!(results["currency"], "USD");
    assert!(money(&results["total_after"]) > 0.0);

    // The summary comment shows it as its cost section: Module / Before / After / Diff,
    // and the totals.
    let summary = p.run_env(&["summary"], &[("CI_COMMIT_SHA", "0123abcd")]);
    assert_eq!(summary.code, 0, "{}", summary.stderr);
    assert!(
        summary.stdout.contains("### ✅ Cost estimation"),
        "{}",
        summary.stdout
    );
    assert!(
        summary
            .stdout
            .contains("| **Total** | **\\$166\\.18** | **\\$405\\.30** | **\\+\\$239\\.12** |"),
        "{}",
        summary.stdout
    );
    assert!(
        summary.stdout.contains(
            "| `platform/prod/us-east-1/resize` | \\$8\\.39 | \\$15\\.98 | \\+\\$7\\.59 |"
        ),
        "{}",
        summary.stdout
    );
}

#[test]
fn the_module_filter_estimates_one_module() {
    let p = project();
    let dir = prices_dir();
    let out = p.run(&[
        "cost",
        "-m",
        "platform/prod/us-east-1/resize",
        "-o",
        "json",
        "--pricing-dir",
        dir.to_str().unwrap(),
    ]);
    let estimate = json(&out);
    let ids: Vec<&str> = estimate["modules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["module"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["platform/prod/us-east-1/resize"]);
    let out = p.run(&["cost", "-m", "platform/prod/nowhere"]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("is not a module of the project"),
        "{}",
        out.stderr
    );
}

#[test]
fn prices_that_cannot_be_had_leave_resources_listed_as_not_priced() {
    let p = project();
    // Nothing listens there.
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let out = p.run_env(
        &["cost", "-m", "platform/prod/us-east-1/resize", "-o", "json"],
        &[("TERRACI_PRICING_URL", &url)],
    );
    let estimate = json(&out);
    assert!(
        out.stderr.contains("warning[cost-prices]"),
        "{}",
        out.stderr
    );
    let resize = module(&estimate, "platform/prod/us-east-1/resize");
    assert_eq!(resize["resources"], serde_json::json!([]));
    let reason = resize["unpriced"][0]["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("no AmazonEC2 prices for us-east-1: GET "),
        "{reason}"
    );

    // Offline, a directory without the region's file says which file it lacks.
    let empty = tempfile::tempdir().unwrap();
    let out = p.run(&[
        "cost",
        "-m",
        "platform/prod/us-east-1/resize",
        "--pricing-dir",
        empty.path().to_str().unwrap(),
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout
            .contains("offers/v1.0/aws/AmazonEC2/current/us-east-1/index.json"),
        "{}",
        out.stdout
    );
}

#[test]
fn the_cost_job_runs_after_the_plans_in_review_pipelines() {
    let p = project();
    let out = p.run(&["generate", "--provider", "gitlab"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let pipeline: serde_yaml::Value = serde_yaml::from_str(&out.stdout).expect("yaml");
    let cost = &pipeline["cost"];
    assert!(cost.is_mapping(), "{}", out.stdout);
    let script = serde_yaml::to_string(&cost["script"]).unwrap();
    assert!(script.contains("terraci cost"), "{script}");
    assert!(
        serde_yaml::to_string(&cost["artifacts"])
            .unwrap()
            .contains(".terraci/cost-report.json"),
        "{}",
        out.stdout
    );
    // GitHub: a job after the plans, on pull requests.
    let out = p.run(&["generate", "--provider", "github"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let workflow: serde_yaml::Value = serde_yaml::from_str(&out.stdout).expect("yaml");
    let job = &workflow["jobs"]["cost"];
    assert!(job.is_mapping(), "{}", out.stdout);
    let text = serde_yaml::to_string(job).unwrap();
    assert!(text.contains("terraci cost"), "{text}");
    assert!(text.contains("pull_request"), "{text}");
    // Without the section there is no job.
    p.write(".terraci.yaml", "");
    let out = p.run(&["generate", "--provider", "gitlab"]);
    assert!(!out.stdout.contains("terraci cost"), "{}", out.stdout);
}

#[test]
fn hostile_plan_values_are_escaped_and_a_negative_size_prices_nothing() {
    let p = project();
    let change = |kind: &str, name: &str, after: Value| {
        serde_json::json!({"address": format!("{kind}.{name}"), "mode": "managed", "type": kind,
            "name": name, "provider_name": "registry.terraform.io/hashicorp/aws",
            "change": {"actions": ["create"], "before": null, "after": after, "after_unknown": {}}})
    };
    let plan = serde_json::json!({
        "format_version": "1.2", "terraform_version": "1.11.4",
        "resource_changes": [
            change("aws_instance", "evil\u{1b}[2J", serde_json::json!({"instance_type": "t3.micro\u{1b}[31m"})),
            change("aws_ebs_volume", "negative", serde_json::json!({"type": "gp3", "size": -5})),
        ],
        "configuration": {"provider_config": {"aws": {"name": "aws", "expressions": {"region": {"constant_value": "us-east-1"}}}}},
    });
    p.write(
        "platform/prod/us-east-1/resize/plan.json",
        serde_json::to_string(&plan).unwrap(),
    );
    let dir = prices_dir();
    let out = p.run(&[
        "cost",
        "-m",
        "platform/prod/us-east-1/resize",
        "--pricing-dir",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!out.stdout.contains('\u{1b}'), "{:?}", out.stdout);
    assert!(
        out.stdout.contains("before $0.00, after $0.00, diff $0.00"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains(
            "aws_ebs_volume.negative: volume gp3: the plan's values give a quantity of -5"
        ),
        "{}",
        out.stdout
    );
}

#[test]
fn a_region_that_is_not_a_region_name_fetches_and_writes_nothing() {
    let server = PriceServer::start();
    let p = project();
    let plan = serde_json::json!({
        "format_version": "1.2", "terraform_version": "1.11.4",
        "resource_changes": [{"address": "aws_instance.web", "mode": "managed", "type": "aws_instance",
            "name": "web", "provider_name": "registry.terraform.io/hashicorp/aws",
            "change": {"actions": ["create"], "before": null, "after": {"instance_type": "t3.micro"}, "after_unknown": {}}}],
        "configuration": {"provider_config": {"aws": {"name": "aws", "expressions": {"region": {"constant_value": "../../../escaped"}}}}},
    });
    p.write(
        "platform/prod/us-east-1/resize/plan.json",
        serde_json::to_string(&plan).unwrap(),
    );
    let env = [("TERRACI_PRICING_URL", server.url.as_str())];
    let out = p.run_env(
        &["cost", "-o", "json", "-m", "platform/prod/us-east-1/resize"],
        &env,
    );
    assert_eq!(server.seen(), Vec::<String>::new(), "nothing is fetched");
    let estimate = json(&out);
    let error = module(&estimate, "platform/prod/us-east-1/resize")["error"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        error.contains(r#"region "../../../escaped" is not an AWS region name"#),
        "{estimate:#}"
    );
}
