//! The table is what terraform 1.11.4 answered: for each constraint and each of
//! [`VERSIONS`], `terraform providers lock -fs-mirror` over a mirror holding only that
//! version of a provider whose `required_providers` entry has the constraint (exit 0: the
//! version is allowed; "no available releases match": it is not; "invalid version
//! constraint": the text is refused).

use super::*;

const VERSIONS: &[&str] = &[
    "0.9.0",
    "1.0.0",
    "1.2.0",
    "1.2.3",
    "1.2.9",
    "1.3.0",
    "1.10.0",
    "2.0.0-beta1",
    "2.0.0",
    "2.1.0",
    "3.0.0-rc.1",
];

/// Each constraint terraform reads, with the versions it allowed.
const ALLOWED: &[(&str, &[&str])] = &[
    ("1.2.3", &["1.2.3"]),
    ("= 1.2.3", &["1.2.3"]),
    ("=1.2", &["1.2.0"]),
    ("= 1", &["1.0.0"]),
    (
        "!= 1.2.3",
        &[
            "0.9.0", "1.0.0", "1.2.0", "1.2.9", "1.3.0", "1.10.0", "2.0.0", "2.1.0",
        ],
    ),
    ("> 1.2.3", &["1.2.9", "1.3.0", "1.10.0", "2.0.0", "2.1.0"]),
    (
        ">= 1.2",
        &[
            "1.2.0", "1.2.3", "1.2.9", "1.3.0", "1.10.0", "2.0.0", "2.1.0",
        ],
    ),
    (
        "< 2.0.0",
        &[
            "0.9.0", "1.0.0", "1.2.0", "1.2.3", "1.2.9", "1.3.0", "1.10.0",
        ],
    ),
    ("<= 1.2.9", &["0.9.0", "1.0.0", "1.2.0", "1.2.3", "1.2.9"]),
    ("~> 1.2", &["1.2.0", "1.2.3", "1.2.9", "1.3.0", "1.10.0"]),
    ("~> 1.2.0", &["1.2.0", "1.2.3", "1.2.9"]),
    (
        "~> 1",
        &["1.0.0", "1.2.0", "1.2.3", "1.2.9", "1.3.0", "1.10.0"],
    ),
    ("~> 1.2.3", &["1.2.3", "1.2.9"]),
    ("~> 0.9", &["0.9.0"]),
    (
        ">= 1.0, < 2.0",
        &["1.0.0", "1.2.0", "1.2.3", "1.2.9", "1.3.0", "1.10.0"],
    ),
    (">= 1.2.0, != 1.2.9, < 1.3", &["1.2.0", "1.2.3"]),
    (">=1.2,<1.3", &["1.2.0", "1.2.3", "1.2.9"]),
    ("~>1.2", &["1.2.0", "1.2.3", "1.2.9", "1.3.0", "1.10.0"]),
    ("2.0.0-beta1", &["2.0.0-beta1"]),
    ("= 2.0.0-beta1", &["2.0.0-beta1"]),
    (">= 2.0.0-beta1", &["2.0.0", "2.1.0"]),
    ("~> 2.0.0-beta1", &["2.0.0"]),
    (
        "!= 2.0.0-beta1",
        &[
            "0.9.0", "1.0.0", "1.2.0", "1.2.3", "1.2.9", "1.3.0", "1.10.0", "2.0.0", "2.1.0",
        ],
    ),
    (
        "> 1.0",
        &[
            "1.2.0", "1.2.3", "1.2.9", "1.3.0", "1.10.0", "2.0.0", "2.1.0",
        ],
    ),
    (
        "< 2",
        &[
            "0.9.0", "1.0.0", "1.2.0", "1.2.3", "1.2.9", "1.3.0", "1.10.0",
        ],
    ),
    (">= 3.0.0-rc.1", &[]),
    ("= 3.0.0-rc.1", &["3.0.0-rc.1"]),
    ("1.2.3+build", &[]),
    ("1.2", &["1.2.0"]),
    ("1", &["1.0.0"]),
    ("~> 1.2, ~> 1.2.3", &["1.2.3", "1.2.9"]),
];

/// Constraints terraform refused as invalid.
const REFUSED: &[&str] = &["v1.2.3", "=> 1.2", "1.2.3.4", "abc", ">= 1.0,"];

#[test]
fn constraints_allow_exactly_the_versions_terraform_selects() {
    let versions: Vec<Version> = VERSIONS
        .iter()
        .map(|v| Version::parse(v).expect("a whole version"))
        .collect();
    let mut wrong = Vec::new();
    for (text, allowed) in ALLOWED {
        let constraints = Constraints::parse(text).expect("terraform reads it");
        for v in &versions {
            let expected = allowed.contains(&v.to_string().as_str());
            if constraints.allows(v) != expected {
                wrong.push(format!("{text:?} {v}: expected {expected}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn constraints_terraform_refuses_are_errors() {
    for text in REFUSED {
        assert!(Constraints::parse(text).is_err(), "{text:?} parsed");
    }
}

#[test]
fn versions_sort_by_semantic_version_precedence() {
    let mut list: Vec<Version> = [
        "1.10.0",
        "1.2.0",
        "2.0.0",
        "2.0.0-rc.1",
        "2.0.0-beta.11",
        "2.0.0-beta.2",
        "2.0.0-beta",
    ]
    .iter()
    .map(|v| Version::parse(v).expect("version"))
    .collect();
    list.sort();
    let shown: Vec<String> = list.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        [
            "1.2.0",
            "1.10.0",
            "2.0.0-beta",
            "2.0.0-beta.2",
            "2.0.0-beta.11",
            "2.0.0-rc.1",
            "2.0.0"
        ]
    );
}

#[test]
fn a_clause_takes_a_new_version_with_as_many_parts_as_it_had() {
    let bump = |text: &str, to: &str| {
        let c = Constraints::parse(text).expect("constraint");
        let v = Version::parse(to).expect("version");
        c.clauses[0].with_version(&v).to_string()
    };
    assert_eq!(bump("~> 5.0", "5.80.1"), "~> 5.80");
    assert_eq!(bump("~> 5.0.1", "5.80.1"), "~> 5.80.1");
    assert_eq!(bump(">= 5", "6.2.0"), ">= 6");
    assert_eq!(bump("5.0.1", "5.0.3"), "5.0.3");
    assert_eq!(bump("= 5.0.1", "5.0.3"), "= 5.0.3");
}
