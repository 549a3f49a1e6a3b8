//! The resource types terraci prices, and how: which product of which price file, and
//! how many units a month.
//!
//! Input: a resource type and its values (a plan's `before` or `after`). Output: its
//! [`Pricing`]: the components to look up ([`Component`]: service, product family,
//! attribute filters, monthly quantity and how that quantity was arrived at), and notes
//! for what is charged by use and not included. `None` for a type terraci does not price.
//!
//! Usage: an always-on resource runs [`HOURS_PER_MONTH`] hours a month. A resource
//! charged only by use is priced at the small assumed usage of [`assumed`] and says so
//! on each line, or, with nothing sensible to assume (queue messages), shown as
//! "usage-based" with no figure.

use serde_json::Value;

use crate::offer::Match;

/// Hours in a month, as AWS's own calculator counts them (365 * 24 / 12).
pub const HOURS_PER_MONTH: f64 = 730.0;

/// The usage assumed for resources charged only by use (`docs/cost.md` lists them).
pub mod assumed {
    /// Lambda: invocations a month.
    pub const LAMBDA_REQUESTS: f64 = 1_000_000.0;
    /// Lambda: seconds each invocation runs.
    pub const LAMBDA_SECONDS: f64 = 0.1;
    /// DynamoDB on demand: read and write request units a month, each.
    pub const DYNAMODB_REQUESTS: f64 = 1_000_000.0;
    /// S3: GB stored in S3 Standard.
    pub const S3_GB: f64 = 1.0;
    /// S3: PUT/COPY/POST/LIST requests a month.
    pub const S3_TIER1_REQUESTS: f64 = 10_000.0;
    /// S3: GET/SELECT requests a month.
    pub const S3_TIER2_REQUESTS: f64 = 100_000.0;
}

pub const EC2: &str = "AmazonEC2";
pub const RDS: &str = "AmazonRDS";
pub const ELASTICACHE: &str = "AmazonElastiCache";
pub const EKS: &str = "AmazonEKS";
pub const LAMBDA: &str = "AWSLambda";
pub const DYNAMODB: &str = "AmazonDynamoDB";
pub const S3: &str = "AmazonS3";
pub const VPC: &str = "AmazonVPC";
pub const KMS: &str = "awskms";
pub const ROUTE53: &str = "AmazonRoute53";
pub const SECRETS: &str = "AWSSecretsManager";
pub const CLOUDWATCH: &str = "AmazonCloudWatch";

/// The price-list region of services priced the same everywhere (Route 53).
pub const GLOBAL: &str = "global";

/// One thing a resource pays for each month.
#[derive(Debug, Clone, PartialEq)]
pub struct Component {
    /// What it is, for the line (`instance t3.micro`, `storage gp3`).
    pub label: String,
    pub service: &'static str,
    /// The price list's region when it is not the resource's ([`GLOBAL`]).
    pub region: Option<&'static str>,
    /// The product family; empty where AWS's list gives the products none (public IPv4).
    pub family: &'static str,
    pub filters: Vec<(&'static str, Match)>,
    /// Units a month.
    pub quantity: f64,
    /// How the quantity came about (`730 h`, `2 nodes x 730 h`, `20 GB`).
    pub usage: String,
    /// The quantity is an assumption about use, not read from the plan.
    pub assumed: bool,
}

/// How a resource is priced.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Pricing {
    pub components: Vec<Component>,
    /// What it is also charged for by use, which the figure leaves out.
    pub notes: Vec<&'static str>,
}

/// The resource types priced (sorted), for the docs and `--help`.
pub const PRICED: &[&str] = &[
    "aws_alb",
    "aws_cloudwatch_log_group",
    "aws_cloudwatch_metric_alarm",
    "aws_db_instance",
    "aws_dynamodb_table",
    "aws_ebs_volume",
    "aws_eks_cluster",
    "aws_eip",
    "aws_eks_node_group",
    "aws_elasticache_serverless_cache",
    "aws_elasticache_cluster",
    "aws_elasticache_replication_group",
    "aws_elb",
    "aws_instance",
    "aws_kms_key",
    "aws_lambda_function",
    "aws_lb",
    "aws_nat_gateway",
    "aws_rds_cluster",
    "aws_rds_cluster_instance",
    "aws_route53_zone",
    "aws_s3_bucket",
    "aws_secretsmanager_secret",
    "aws_sns_topic",
    "aws_sqs_queue",
];

fn text<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str).filter(|s| !s.is_empty())
}

fn number(v: &Value, key: &str) -> Option<f64> {
    v.get(key).and_then(Value::as_f64)
}

/// The first block of a nested block list (`root_block_device[0]`).
fn block<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    v.get(key)?.as_array()?.first()
}

fn is(value: &str) -> Match {
    Match::Is(value.to_owned())
}

fn ends(value: &str) -> Match {
    Match::EndsWith(value.to_owned())
}

/// `1,000,000`: quantities in lines (a fraction as it is).
pub fn count_text(n: f64) -> String {
    if n.fract() != 0.0 || !(0.0..1e15).contains(&n) {
        return format!("{n}");
    }
    terraci_ext::summary::markdown::thousands(n as usize)
}

fn hours(units: f64, unit_word: &str) -> (f64, String) {
    if units == 1.0 {
        (
            HOURS_PER_MONTH,
            format!("{} h", count_text(HOURS_PER_MONTH)),
        )
    } else {
        (
            units * HOURS_PER_MONTH,
            format!(
                "{} {unit_word} x {} h",
                count_text(units),
                count_text(HOURS_PER_MONTH)
            ),
        )
    }
}

/// How `resource_type` with values `v` is priced; `None` when terraci does not price it.
/// `Err` names the value the resource lacks.
pub fn pricing(resource_type: &str, v: &Value) -> Option<Result<Pricing, String>> {
    let p = match resource_type {
        "aws_instance" => instance(v),
        "aws_ebs_volume" => Ok(ebs_volume(
            "volume",
            text(v, "type").unwrap_or("gp2"),
            number(v, "size").unwrap_or(8.0),
            number(v, "iops"),
            number(v, "throughput"),
        )),
        "aws_nat_gateway" => Ok(Pricing {
            components: vec![hourly(
                "NAT gateway".into(),
                EC2,
                "NAT Gateway",
                vec![("usagetype", ends("NatGateway-Hours"))],
                1.0,
                "gateways",
            )],
            notes: vec!["data processed (per GB) is usage-based and not included"],
        }),
        "aws_lb" | "aws_alb" => Ok(load_balancer(v)),
        "aws_elb" => Ok(Pricing {
            components: vec![hourly(
                "classic load balancer".into(),
                EC2,
                "Load Balancer",
                vec![("usagetype", ends("LoadBalancerUsage"))],
                1.0,
                "",
            )],
            notes: vec!["data processed (per GB) is usage-based and not included"],
        }),
        "aws_db_instance" => db_instance(v),
        "aws_rds_cluster_instance" => rds_cluster_instance(v),
        "aws_rds_cluster" => Ok(Pricing {
            components: vec![],
            notes: vec!["usage-based: Aurora storage and I/O (the instances are priced as aws_rds_cluster_instance)"],
        }),
        "aws_elasticache_cluster" => elasticache(
            v,
            text(v, "node_type"),
            number(v, "num_cache_nodes").unwrap_or(1.0),
        ),
        "aws_elasticache_replication_group" => {
            let nodes = match number(v, "num_cache_clusters").filter(|n| *n > 0.0) {
                Some(n) => n,
                None => {
                    number(v, "num_node_groups").unwrap_or(1.0).max(1.0)
                        * (number(v, "replicas_per_node_group").unwrap_or(0.0) + 1.0)
                }
            };
            elasticache(v, text(v, "node_type"), nodes)
        }
        "aws_eks_cluster" => Ok(Pricing {
            components: vec![hourly(
                "EKS cluster".into(),
                EKS,
                "Compute",
                vec![("usagetype", ends("AmazonEKS-Hours:perCluster"))],
                1.0,
                "",
            )],
            notes: vec![],
        }),
        "aws_eks_node_group" => Ok(eks_node_group(v)),
        "aws_lambda_function" => Ok(lambda(v)),
        "aws_dynamodb_table" => Ok(dynamodb(v)),
        "aws_s3_bucket" => Ok(s3()),
        "aws_eip" => {
            // Every public IPv4 address is charged by the hour, attached or not.
            let state = if text(v, "instance").is_some() || text(v, "network_interface").is_some() {
                "InUseAddress"
            } else {
                "IdleAddress"
            };
            Ok(Pricing {
                components: vec![hourly(
                    "public IPv4 address".into(),
                    VPC,
                    "",
                    vec![
                        ("group", is("VPCPublicIPv4Address")),
                        ("usagetype", ends(&format!("PublicIPv4:{state}"))),
                    ],
                    1.0,
                    "",
                )],
                notes: vec![],
            })
        }
        "aws_kms_key" => Ok(monthly(
            "customer managed key",
            KMS,
            "Encryption Key",
            vec![("usagetype", ends("KMS-Keys"))],
            "key",
            vec!["requests are usage-based and not included"],
        )),
        "aws_secretsmanager_secret" => Ok(monthly(
            "secret",
            SECRETS,
            "Secret",
            vec![("usagetype", ends("AWSSecretsManager-Secrets"))],
            "secret",
            vec!["API calls are usage-based and not included"],
        )),
        "aws_route53_zone" => {
            let mut p = monthly(
                "hosted zone",
                ROUTE53,
                "DNS Zone",
                vec![("usagetype", ends("HostedZone"))],
                "zone",
                vec!["queries are usage-based and not included"],
            );
            p.components[0].region = Some(GLOBAL);
            Ok(p)
        }
        "aws_cloudwatch_metric_alarm" => {
            // An alarm on a period under a minute is a high-resolution alarm.
            let high = number(v, "period").is_some_and(|p| p > 0.0 && p < 60.0);
            let (label, usage) = if high {
                ("high-resolution alarm", "CW:HighResAlarmMonitorUsage")
            } else {
                ("alarm", "CW:AlarmMonitorUsage")
            };
            Ok(monthly(label, CLOUDWATCH, "Alarm", vec![("usagetype", ends(usage))], "alarm", vec![]))
        }
        "aws_cloudwatch_log_group" => Ok(Pricing {
            components: vec![],
            notes: vec!["usage-based: log data ingested and stored"],
        }),
        "aws_elasticache_serverless_cache" => Ok(Pricing {
            components: vec![],
            notes: vec!["usage-based: data stored and processing units"],
        }),
        "aws_sqs_queue" => Ok(Pricing {
            components: vec![],
            notes: vec!["usage-based: requests"],
        }),
        "aws_sns_topic" => Ok(Pricing {
            components: vec![],
            notes: vec!["usage-based: requests and deliveries"],
        }),
        _ => return None,
    };
    Some(p)
}

fn hourly(
    label: String,
    service: &'static str,
    family: &'static str,
    filters: Vec<(&'static str, Match)>,
    units: f64,
    unit_word: &str,
) -> Component {
    let (quantity, usage) = hours(units, unit_word);
    Component {
        label,
        service,
        region: None,
        family,
        filters,
        quantity,
        usage,
        assumed: false,
    }
}

/// One unit a month of a product priced per month (a key, a secret, a zone, an alarm).
fn monthly(
    label: &str,
    service: &'static str,
    family: &'static str,
    filters: Vec<(&'static str, Match)>,
    unit_word: &str,
    notes: Vec<&'static str>,
) -> Pricing {
    Pricing {
        components: vec![Component {
            label: label.into(),
            service,
            region: None,
            family,
            filters,
            quantity: 1.0,
            usage: format!("1 {unit_word}"),
            assumed: false,
        }],
        notes,
    }
}

/// Linux on-demand compute of `instance_type` (shared tenancy unless `tenancy` says).
fn compute(instance_type: &str, tenancy: &str, units: f64, label: String) -> Component {
    let tenancy = match tenancy {
        "dedicated" => "Dedicated",
        "host" => "Host",
        _ => "Shared",
    };
    hourly(
        label,
        EC2,
        "Compute Instance",
        vec![
            ("instanceType", is(instance_type)),
            ("tenancy", is(tenancy)),
            ("operatingSystem", is("Linux")),
            ("preInstalledSw", is("NA")),
            ("capacitystatus", is("Used")),
        ],
        units,
        "instances",
    )
}

fn instance(v: &Value) -> Result<Pricing, String> {
    let instance_type = text(v, "instance_type").ok_or("instance_type is not known")?;
    let mut p = Pricing {
        components: vec![compute(
            instance_type,
            text(v, "tenancy").unwrap_or("default"),
            1.0,
            format!("instance {instance_type}"),
        )],
        notes: vec![],
    };
    // Until the instance exists the plan rarely knows its root volume: AWS's default
    // for most AMIs, 8 GB of gp2, is assumed then.
    let root = block(v, "root_block_device");
    let kind = root.and_then(|r| text(r, "volume_type")).unwrap_or("gp2");
    let size = root
        .and_then(|r| number(r, "volume_size"))
        .filter(|s| *s > 0.0)
        .unwrap_or(8.0);
    let root_volume = ebs_volume(
        "root volume",
        kind,
        size,
        root.and_then(|r| number(r, "iops")),
        root.and_then(|r| number(r, "throughput")),
    );
    p.components.extend(root_volume.components);
    Ok(p)
}

/// GB-months of `kind`, and for gp3 the IOPS and throughput above what it includes
/// (3,000 IOPS, 125 MiB/s), for io1/io2 every provisioned IOPS.
fn ebs_volume(
    what: &str,
    kind: &str,
    size: f64,
    iops: Option<f64>,
    throughput: Option<f64>,
) -> Pricing {
    let mut components = vec![Component {
        label: format!("{what} {kind}"),
        service: EC2,
        region: None,
        family: "Storage",
        filters: vec![("volumeApiName", is(kind))],
        quantity: size,
        usage: format!("{} GB", count_text(size)),
        assumed: false,
    }];
    let extra_iops = match kind {
        "gp3" => iops.map(|i| i - 3000.0),
        "io1" | "io2" => iops,
        _ => None,
    }
    .filter(|i| *i > 0.0);
    if let Some(extra) = extra_iops {
        components.push(Component {
            label: format!("{what} {kind} IOPS"),
            service: EC2,
            region: None,
            family: "System Operation",
            filters: vec![("volumeApiName", is(kind)), ("group", is("EBS IOPS"))],
            quantity: extra,
            usage: format!("{} IOPS", count_text(extra)),
            assumed: false,
        });
    }
    if let Some(extra) = throughput.filter(|_| kind == "gp3").map(|t| t - 125.0) {
        if extra > 0.0 {
            components.push(Component {
                label: format!("{what} gp3 throughput"),
                service: EC2,
                region: None,
                family: "Provisioned Throughput",
                filters: vec![("volumeApiName", is("gp3"))],
                quantity: extra,
                usage: format!("{} MiB/s", count_text(extra)),
                assumed: false,
            });
        }
    }
    Pricing {
        components,
        notes: vec![],
    }
}

fn load_balancer(v: &Value) -> Pricing {
    let (family, what) = match text(v, "load_balancer_type").unwrap_or("application") {
        "network" => ("Load Balancer-Network", "network load balancer"),
        "gateway" => ("Load Balancer-Gateway", "gateway load balancer"),
        _ => ("Load Balancer-Application", "application load balancer"),
    };
    Pricing {
        components: vec![hourly(
            what.into(),
            EC2,
            family,
            vec![("usagetype", ends("LoadBalancerUsage"))],
            1.0,
            "",
        )],
        notes: vec!["capacity units (LCU) are usage-based and not included"],
    }
}

/// The pricing file's name of an RDS engine.
fn rds_engine(engine: &str) -> &'static str {
    match engine {
        "postgres" | "postgresql" => "PostgreSQL",
        "mariadb" => "MariaDB",
        "aurora-postgresql" => "Aurora PostgreSQL",
        "aurora" | "aurora-mysql" => "Aurora MySQL",
        e if e.starts_with("oracle") => "Oracle",
        e if e.starts_with("sqlserver") => "SQL Server",
        _ => "MySQL",
    }
}

fn db_instance(v: &Value) -> Result<Pricing, String> {
    let class = text(v, "instance_class").ok_or("instance_class is not known")?;
    let engine = rds_engine(text(v, "engine").unwrap_or("mysql"));
    let deployment = if v.get("multi_az").and_then(Value::as_bool) == Some(true) {
        "Multi-AZ"
    } else {
        "Single-AZ"
    };
    let mut components = vec![hourly(
        format!("{class} {engine} {deployment}"),
        RDS,
        "Database Instance",
        vec![
            ("instanceType", is(class)),
            ("databaseEngine", is(engine)),
            ("deploymentOption", is(deployment)),
        ],
        1.0,
        "",
    )];
    let storage_type = text(v, "storage_type").unwrap_or("gp2");
    let volume = match storage_type {
        "gp3" => "General Purpose-GP3",
        "io1" => "Provisioned IOPS",
        "io2" => "Provisioned IOPS-IO2",
        "standard" => "Magnetic",
        _ => "General Purpose",
    };
    if let Some(size) = number(v, "allocated_storage").filter(|s| *s > 0.0) {
        components.push(Component {
            label: format!("storage {storage_type}"),
            service: RDS,
            region: None,
            family: "Database Storage",
            filters: vec![
                ("volumeType", is(volume)),
                ("databaseEngine", is(engine)),
                ("deploymentOption", is(deployment)),
            ],
            quantity: size,
            usage: format!("{} GB", count_text(size)),
            assumed: false,
        });
    }
    Ok(Pricing {
        components,
        notes: vec![],
    })
}

fn rds_cluster_instance(v: &Value) -> Result<Pricing, String> {
    let class = text(v, "instance_class").ok_or("instance_class is not known")?;
    let engine = rds_engine(text(v, "engine").unwrap_or("aurora-mysql"));
    Ok(Pricing {
        components: vec![hourly(
            format!("{class} {engine}"),
            RDS,
            "Database Instance",
            vec![
                ("instanceType", is(class)),
                ("databaseEngine", is(engine)),
                ("deploymentOption", is("Single-AZ")),
            ],
            1.0,
            "",
        )],
        notes: vec![],
    })
}

fn elasticache(v: &Value, node_type: Option<&str>, nodes: f64) -> Result<Pricing, String> {
    let node_type = node_type.ok_or("node_type is not known")?;
    let engine = match text(v, "engine").unwrap_or("redis") {
        "memcached" => "Memcached",
        "valkey" => "Valkey",
        _ => "Redis",
    };
    Ok(Pricing {
        components: vec![hourly(
            format!("{node_type} {engine}"),
            ELASTICACHE,
            "Cache Instance",
            vec![
                ("instanceType", is(node_type)),
                ("cacheEngine", is(engine)),
                ("usagetype", ends(&format!("NodeUsage:{node_type}"))),
            ],
            nodes.max(1.0),
            "nodes",
        )],
        notes: vec![],
    })
}

fn eks_node_group(v: &Value) -> Pricing {
    let instance_type = v
        .get("instance_types")
        .and_then(Value::as_array)
        .and_then(|t| t.first())
        .and_then(Value::as_str)
        .unwrap_or("t3.medium");
    let nodes = block(v, "scaling_config")
        .and_then(|s| number(s, "desired_size"))
        .unwrap_or(1.0)
        .max(0.0);
    let disk = number(v, "disk_size").filter(|d| *d > 0.0).unwrap_or(20.0);
    let mut components = vec![compute(
        instance_type,
        "default",
        nodes,
        format!("nodes {instance_type}"),
    )];
    components.push(Component {
        label: "node disks gp2".into(),
        service: EC2,
        region: None,
        family: "Storage",
        filters: vec![("volumeApiName", is("gp2"))],
        quantity: nodes * disk,
        usage: format!("{} nodes x {} GB", count_text(nodes), count_text(disk)),
        assumed: false,
    });
    Pricing {
        components,
        notes: vec![],
    }
}

fn lambda(v: &Value) -> Pricing {
    let memory = number(v, "memory_size").unwrap_or(128.0);
    let arm = v
        .get("architectures")
        .and_then(Value::as_array)
        .is_some_and(|a| a.iter().any(|x| x.as_str() == Some("arm64")));
    let gb_seconds = assumed::LAMBDA_REQUESTS * assumed::LAMBDA_SECONDS * memory / 1024.0;
    // arm64 (Graviton) functions have price groups of their own.
    let (requests_group, duration_group) = if arm {
        ("AWS-Lambda-Requests-ARM", "AWS-Lambda-Duration-ARM")
    } else {
        ("AWS-Lambda-Requests", "AWS-Lambda-Duration")
    };
    Pricing {
        components: vec![
            Component {
                label: "requests".into(),
                service: LAMBDA,
                region: None,
                family: "Serverless",
                filters: vec![("group", is(requests_group))],
                quantity: assumed::LAMBDA_REQUESTS,
                usage: format!("{} requests", count_text(assumed::LAMBDA_REQUESTS)),
                assumed: true,
            },
            Component {
                label: format!("duration {} MB", count_text(memory)),
                service: LAMBDA,
                region: None,
                family: "Serverless",
                filters: vec![("group", is(duration_group))],
                quantity: gb_seconds,
                usage: format!(
                    "{} requests x {} s x {} GB",
                    count_text(assumed::LAMBDA_REQUESTS),
                    assumed::LAMBDA_SECONDS,
                    memory / 1024.0
                ),
                assumed: true,
            },
        ],
        notes: vec![],
    }
}

fn dynamodb(v: &Value) -> Pricing {
    if text(v, "billing_mode") == Some("PAY_PER_REQUEST") {
        let request = |what: &str, group: &'static str| Component {
            label: format!("{what} request units"),
            service: DYNAMODB,
            region: None,
            family: "Amazon DynamoDB PayPerRequest Throughput",
            filters: vec![("group", is(group))],
            quantity: assumed::DYNAMODB_REQUESTS,
            usage: format!("{} units", count_text(assumed::DYNAMODB_REQUESTS)),
            assumed: true,
        };
        return Pricing {
            components: vec![
                request("read", "DDB-ReadUnits"),
                request("write", "DDB-WriteUnits"),
            ],
            notes: vec!["storage is usage-based and not included"],
        };
    }
    let capacity = |key: &str| number(v, key).filter(|c| *c > 0.0).unwrap_or(5.0);
    Pricing {
        components: vec![
            hourly(
                "read capacity".into(),
                DYNAMODB,
                "Provisioned IOPS",
                vec![("group", is("DDB-ReadUnits"))],
                capacity("read_capacity"),
                "RCU",
            ),
            hourly(
                "write capacity".into(),
                DYNAMODB,
                "Provisioned IOPS",
                vec![("group", is("DDB-WriteUnits"))],
                capacity("write_capacity"),
                "WCU",
            ),
        ],
        notes: vec!["storage is usage-based and not included"],
    }
}

fn s3() -> Pricing {
    let requests = |label: &str, group: &'static str, n: f64| Component {
        label: label.into(),
        service: S3,
        region: None,
        family: "API Request",
        filters: vec![("group", is(group))],
        quantity: n,
        usage: format!("{} requests", count_text(n)),
        assumed: true,
    };
    Pricing {
        components: vec![
            Component {
                label: "storage Standard".into(),
                service: S3,
                region: None,
                family: "Storage",
                filters: vec![("volumeType", is("Standard"))],
                quantity: assumed::S3_GB,
                usage: format!("{} GB", count_text(assumed::S3_GB)),
                assumed: true,
            },
            requests(
                "PUT, COPY, POST, LIST",
                "S3-API-Tier1",
                assumed::S3_TIER1_REQUESTS,
            ),
            requests("GET, SELECT", "S3-API-Tier2", assumed::S3_TIER2_REQUESTS),
        ],
        notes: vec![],
    }
}

/// Whether a product of `service` could be one a [`Component`] asks for: what a price
/// file keeps of a service (see `offer`).
pub fn keeps(
    service: &str,
    family: &str,
    attributes: &std::collections::BTreeMap<String, String>,
) -> bool {
    let attr = |k: &str| attributes.get(k).map(String::as_str);
    match service {
        EC2 => match family {
            // Of EC2's hundreds of thousands of compute products, the Linux on-demand
            // ones without preinstalled software are what `compute` asks for.
            "Compute Instance" => {
                attr("operatingSystem") == Some("Linux")
                    && attr("preInstalledSw") == Some("NA")
                    && attr("capacitystatus") == Some("Used")
            }
            "Storage"
            | "System Operation"
            | "Provisioned Throughput"
            | "NAT Gateway"
            | "Load Balancer"
            | "Load Balancer-Application"
            | "Load Balancer-Network"
            | "Load Balancer-Gateway" => true,
            _ => false,
        },
        RDS => matches!(family, "Database Instance" | "Database Storage"),
        ELASTICACHE => family == "Cache Instance",
        EKS => family == "Compute",
        LAMBDA => family == "Serverless",
        DYNAMODB => matches!(
            family,
            "Provisioned IOPS" | "Amazon DynamoDB PayPerRequest Throughput"
        ),
        S3 => matches!(family, "Storage" | "API Request"),
        VPC => attr("group") == Some("VPCPublicIPv4Address"),
        KMS => family == "Encryption Key",
        SECRETS => family == "Secret",
        ROUTE53 => family == "DNS Zone",
        CLOUDWATCH => family == "Alarm",
        _ => false,
    }
}
