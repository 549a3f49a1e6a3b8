//! JSON syntax (`*.tf.json`, `*.tofu.json`, `*.tfvars.json`) mapped onto the same facts.
//!
//! Strings in configuration files are templates (`"${local.env}/vpc"`); strings in tfvars
//! files are literal values. Block nesting follows Terraform's JSON syntax: a block type
//! maps labels to bodies, and any level may be an array of objects.

use serde_json::Value as Json;

use super::{
    AttrExpr, AttrExprData, BackendFact, FileFacts, ModuleCallFact, RemoteStateFact, VariableFact,
};
use crate::parse::lower_template;
use terraci_db::diagnostic::{Code, Diagnostic, ItemPath};
use terraci_db::files::{File, FileKind};
use terraci_db::syntax::{Expr, ExprKind, Name, NodeId, Num, ObjectKey};

pub(super) fn json_facts(file: File, kind: FileKind, value: &Json) -> FileFacts {
    let mut facts = FileFacts::default();
    let Json::Object(top) = value else {
        facts.diagnostics.push(Diagnostic::error(
            Code::SyntaxError,
            "a Terraform JSON file must hold an object at the top level",
        ));
        return facts;
    };
    if kind.is_vars() {
        for (name, v) in top {
            facts.tfvars.push((
                name.as_str().into(),
                AttrExpr::from(AttrExprData {
                    expr: literal(v),
                    file,
                    item: path(&[], &[name]),
                }),
            ));
        }
        return facts;
    }
    for (key, v) in top {
        match key.as_str() {
            "locals" => {
                for body in bodies(v) {
                    for (name, e) in body {
                        facts.locals.push((
                            name.as_str().into(),
                            AttrExpr::from(AttrExprData {
                                expr: config_expr(e),
                                file,
                                item: path(&["locals"], &[name]),
                            }),
                        ));
                    }
                }
            }
            "variable" => {
                for (name, body) in labelled(v) {
                    facts.variables.push(VariableFact {
                        name: name.clone(),
                        default: body.get("default").map(|d| {
                            AttrExpr::from(AttrExprData {
                                expr: literal(d),
                                file,
                                item: path(&["variable", &name], &["default"]),
                            })
                        }),
                        type_constraint: body
                            .get("type")
                            .and_then(Json::as_str)
                            .and_then(|t| hcl_edit::parser::parse_expr(t).ok())
                            .map(|t| crate::parse::lower(&t)),
                    });
                }
            }
            "terraform" => {
                for body in bodies(v) {
                    if let Some(backends) = body.get("backend") {
                        for (kind, cfg) in labelled(backends) {
                            facts.backend = Some(BackendFact {
                                config: AttrExpr::from(AttrExprData {
                                    expr: object_of(&cfg),
                                    file,
                                    item: path(&["terraform"], &["backend"]),
                                }),
                                kind,
                            });
                        }
                    }
                    if let Some(cloud) = body.get("cloud") {
                        for cfg in bodies(cloud) {
                            facts.backend = Some(BackendFact {
                                kind: "remote".into(),
                                config: AttrExpr::from(AttrExprData {
                                    expr: object_of(cfg),
                                    file,
                                    item: path(&["terraform"], &["cloud"]),
                                }),
                            });
                        }
                    }
                }
            }
            "data" => {
                for body in bodies(v) {
                    let Some(rs) = body.get("terraform_remote_state") else {
                        continue;
                    };
                    for (name, b) in labelled(rs) {
                        let get = |attr: &str| {
                            b.get(attr).map(|e| {
                                AttrExpr::from(AttrExprData {
                                    expr: config_expr(e),
                                    file,
                                    item: path(&["data", "terraform_remote_state", &name], &[attr]),
                                })
                            })
                        };
                        facts.remote_states.push(RemoteStateFact {
                            name: name.clone(),
                            file,
                            backend: get("backend"),
                            config: get("config"),
                            workspace: get("workspace"),
                            for_each: get("for_each"),
                            count: get("count"),
                        });
                    }
                }
            }
            "module" => {
                for (name, b) in labelled(v) {
                    let get = |attr: &str| {
                        b.get(attr).map(|e| {
                            AttrExpr::from(AttrExprData {
                                expr: config_expr(e),
                                file,
                                item: path(&["module", &name], &[attr]),
                            })
                        })
                    };
                    let arguments = b
                        .keys()
                        .filter(|k| !super::MODULE_META_ARGUMENTS.contains(&k.as_str()))
                        .filter_map(|k| Some((k.as_str().into(), get(k)?)))
                        .collect();
                    facts.module_calls.push(ModuleCallFact {
                        source: get("source"),
                        count: get("count"),
                        for_each: get("for_each"),
                        arguments,
                        name,
                    });
                }
            }
            _ => {}
        }
    }
    facts
}

fn path(block: &[&str], attr: &[&str]) -> ItemPath {
    ItemPath {
        block: block.iter().map(|s| Name::from(*s)).collect(),
        attr: attr.iter().map(|s| Name::from(*s)).collect(),
    }
}

/// The bodies of a block type: an object, or an array of objects.
fn bodies(v: &Json) -> Vec<&serde_json::Map<String, Json>> {
    match v {
        Json::Object(o) => vec![o],
        Json::Array(items) => items.iter().filter_map(Json::as_object).collect(),
        _ => Vec::new(),
    }
}

/// `{ "label": body }` (or arrays of such objects) -> (label, body) pairs.
fn labelled(v: &Json) -> Vec<(Name, serde_json::Map<String, Json>)> {
    let mut out = Vec::new();
    for outer in bodies(v) {
        for (label, inner) in outer {
            for body in bodies(inner) {
                out.push((label.as_str().into(), body.clone()));
            }
        }
    }
    out
}

fn object_of(body: &serde_json::Map<String, Json>) -> Expr {
    Expr {
        id: NodeId(0),
        kind: ExprKind::Object(
            body.iter()
                .map(|(k, v)| (ObjectKey::Ident(k.as_str().into()), config_expr(v)))
                .collect(),
        ),
    }
}

/// A value in a configuration file: strings are templates.
fn config_expr(v: &Json) -> Expr {
    convert(v, true)
}

/// A value in a tfvars file: strings are literal.
pub(crate) fn literal(v: &Json) -> Expr {
    convert(v, false)
}

fn convert(v: &Json, templates: bool) -> Expr {
    let kind = match v {
        Json::Null => ExprKind::Null,
        Json::Bool(b) => ExprKind::Bool(*b),
        Json::Number(n) => ExprKind::Number(Num::new(n.as_f64().unwrap_or(f64::NAN))),
        Json::String(s) => {
            if templates && (s.contains("${") || s.contains("%{")) {
                match hcl_edit::parser::parse_template(s) {
                    Ok(t) => return lower_template(&t),
                    Err(_) => ExprKind::String(s.as_str().into()),
                }
            } else {
                ExprKind::String(s.as_str().into())
            }
        }
        Json::Array(items) => {
            ExprKind::Array(items.iter().map(|i| convert(i, templates)).collect())
        }
        Json::Object(o) => ExprKind::Object(
            o.iter()
                .map(|(k, v)| (ObjectKey::Ident(k.as_str().into()), convert(v, templates)))
                .collect(),
        ),
    };
    Expr {
        id: NodeId(0),
        kind,
    }
}
