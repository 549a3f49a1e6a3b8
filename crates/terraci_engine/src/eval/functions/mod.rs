//! Terraform's pure built-in functions.
//!
//! Arguments are evaluated here, once, before dispatch (except for `try` and `can`, which
//! see their argument expressions). Unless a function is marked otherwise, an argument that
//! is or contains an unknown makes the whole call unknown with that argument's reason.

mod cidr;
mod collections;
mod encoding;
pub(crate) use encoding::json_string;
mod filesystem;
mod format;
mod hash;
mod numeric;
mod strings;
#[cfg(test)]
mod tests;

use crate::eval::Object;

use terraci_db::diagnostic::Code;
use terraci_db::syntax::{Expr, ExprKind, NodeId};

use super::convert::{to_bool, to_number, to_string_primitive};
use super::evaluator::{error, limit, Evaluator, R};
use super::limits;
use super::value::Value;

/// How a function treats unknown arguments.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Unknowns {
    /// Any unknown anywhere in the arguments makes the result unknown.
    Deep,
    /// Only a wholly unknown argument does; unknowns nested in collections are carried.
    Shallow,
    /// The function looks at unknown arguments itself.
    Own,
}

type Impl = fn(&mut Evaluator<'_, '_>, &mut Args) -> R<Value>;

struct Spec {
    name: &'static str,
    params: &'static [&'static str],
    variadic: Option<&'static str>,
    unknowns: Unknowns,
    run: Impl,
}

const fn f(
    name: &'static str,
    params: &'static [&'static str],
    variadic: Option<&'static str>,
    unknowns: Unknowns,
    run: Impl,
) -> Spec {
    Spec {
        name,
        params,
        variadic,
        unknowns,
        run,
    }
}

use Unknowns::{Deep, Own, Shallow};

#[rustfmt::skip]
const FUNCTIONS: &[Spec] = &[
    // strings
    f("format", &["format"], Some("args"), Deep, format::format),
    f("formatlist", &["format"], Some("args"), Deep, format::formatlist),
    f("join", &["separator"], Some("lists"), Deep, strings::join),
    f("split", &["separator", "str"], None, Deep, strings::split),
    f("lower", &["str"], None, Deep, strings::lower),
    f("upper", &["str"], None, Deep, strings::upper),
    f("title", &["str"], None, Deep, strings::title),
    f("trim", &["str", "cutset"], None, Deep, strings::trim),
    f("trimprefix", &["str", "prefix"], None, Deep, strings::trimprefix),
    f("trimsuffix", &["str", "suffix"], None, Deep, strings::trimsuffix),
    f("trimspace", &["str"], None, Deep, strings::trimspace),
    f("chomp", &["str"], None, Deep, strings::chomp),
    f("replace", &["str", "substr", "replace"], None, Deep, strings::replace),
    f("substr", &["str", "offset", "length"], None, Deep, strings::substr),
    f("regex", &["pattern", "string"], None, Deep, strings::regex),
    f("regexall", &["pattern", "string"], None, Deep, strings::regexall),
    f("startswith", &["str", "prefix"], None, Deep, strings::startswith),
    f("endswith", &["str", "suffix"], None, Deep, strings::endswith),
    f("strcontains", &["str", "substr"], None, Deep, strings::strcontains),
    f("strrev", &["str"], None, Deep, strings::strrev),
    f("indent", &["spaces", "str"], None, Deep, strings::indent),
    f("templatestring", &["template", "vars"], None, Deep, strings::templatestring),
    // collections
    f("element", &["list", "index"], None, Shallow, collections::element),
    f("length", &["value"], None, Shallow, collections::length),
    f("lookup", &["inputMap", "key"], Some("default"), Shallow, collections::lookup),
    f("concat", &[], Some("seqs"), Shallow, collections::concat),
    f("contains", &["list", "value"], None, Deep, collections::contains),
    f("keys", &["inputMap"], None, Shallow, collections::keys),
    f("values", &["mapping"], None, Shallow, collections::values),
    f("merge", &[], Some("maps"), Shallow, collections::merge),
    f("flatten", &["list"], None, Shallow, collections::flatten),
    f("distinct", &["list"], None, Deep, collections::distinct),
    f("compact", &["list"], None, Deep, collections::compact),
    f("coalesce", &[], Some("vals"), Own, collections::coalesce),
    f("coalescelist", &[], Some("vals"), Shallow, collections::coalescelist),
    f("index", &["list", "value"], None, Deep, collections::index),
    f("one", &["list"], None, Shallow, collections::one),
    f("range", &[], Some("params"), Deep, collections::range),
    f("reverse", &["list"], None, Shallow, collections::reverse),
    f("slice", &["list", "start_index", "end_index"], None, Shallow, collections::slice),
    f("sort", &["list"], None, Deep, collections::sort),
    f("setproduct", &[], Some("sets"), Deep, collections::setproduct),
    f("setunion", &["first_set"], Some("other_sets"), Deep, collections::setunion),
    f("setintersection", &["first_set"], Some("other_sets"), Deep, collections::setintersection),
    f("setsubtract", &["a", "b"], None, Deep, collections::setsubtract),
    f("transpose", &["values"], None, Deep, collections::transpose),
    f("zipmap", &["keys", "values"], None, Shallow, collections::zipmap),
    f("chunklist", &["list", "size"], None, Shallow, collections::chunklist),
    f("tolist", &["v"], None, Shallow, collections::tolist),
    f("toset", &["v"], None, Deep, collections::toset),
    f("tomap", &["v"], None, Shallow, collections::tomap),
    f("sum", &["list"], None, Deep, collections::sum),
    f("alltrue", &["list"], None, Deep, collections::alltrue),
    f("anytrue", &["list"], None, Deep, collections::anytrue),
    f("matchkeys", &["values", "keys", "searchset"], None, Deep, collections::matchkeys),
    // numeric
    f("abs", &["num"], None, Deep, numeric::abs),
    f("ceil", &["num"], None, Deep, numeric::ceil),
    f("floor", &["num"], None, Deep, numeric::floor),
    f("max", &[], Some("numbers"), Deep, numeric::max),
    f("min", &[], Some("numbers"), Deep, numeric::min),
    f("log", &["num", "base"], None, Deep, numeric::log),
    f("pow", &["num", "power"], None, Deep, numeric::pow),
    f("parseint", &["number", "base"], None, Deep, numeric::parseint),
    f("signum", &["num"], None, Deep, numeric::signum),
    // encoding
    f("jsonencode", &["val"], None, Deep, encoding::jsonencode),
    f("jsondecode", &["str"], None, Deep, encoding::jsondecode),
    f("yamlencode", &["value"], None, Deep, encoding::yamlencode),
    f("yamldecode", &["src"], None, Deep, encoding::yamldecode),
    f("base64encode", &["str"], None, Deep, encoding::base64encode),
    f("base64decode", &["str"], None, Deep, encoding::base64decode),
    f("urlencode", &["str"], None, Deep, encoding::urlencode),
    f("csvdecode", &["str"], None, Deep, encoding::csvdecode),
    f("md5", &["str"], None, Deep, encoding::md5),
    f("sha1", &["str"], None, Deep, encoding::sha1),
    f("sha256", &["str"], None, Deep, encoding::sha256),
    f("sha512", &["str"], None, Deep, encoding::sha512),
    f("base64sha256", &["str"], None, Deep, encoding::base64sha256),
    f("base64sha512", &["str"], None, Deep, encoding::base64sha512),
    // IP networks
    f("cidrhost", &["prefix", "hostnum"], None, Deep, cidr::cidrhost),
    f("cidrnetmask", &["prefix"], None, Deep, cidr::cidrnetmask),
    f("cidrsubnet", &["prefix", "newbits", "netnum"], None, Deep, cidr::cidrsubnet),
    f("cidrsubnets", &["prefix"], Some("newbits"), Deep, cidr::cidrsubnets),
    // type conversion
    f("tostring", &["v"], None, Deep, tostring),
    f("tonumber", &["v"], None, Deep, tonumber),
    f("tobool", &["v"], None, Deep, tobool),
    f("sensitive", &["value"], None, Shallow, identity),
    f("nonsensitive", &["value"], None, Shallow, identity),
    f("ephemeralasnull", &["value"], None, Shallow, identity),
    // filesystem
    f("abspath", &["path"], None, Deep, filesystem::abspath),
    f("basename", &["path"], None, Deep, filesystem::basename),
    f("dirname", &["path"], None, Deep, filesystem::dirname),
    f("pathexpand", &["path"], None, Deep, filesystem::pathexpand),
    f("file", &["path"], None, Deep, filesystem::file),
    f("fileexists", &["path"], None, Deep, filesystem::fileexists),
    f("fileset", &["path", "pattern"], None, Deep, filesystem::fileset),
    f("templatefile", &["path", "vars"], None, Deep, filesystem::templatefile),
    // impure: known only when Terraform runs
    f("timestamp", &[], None, Deep, impure),
    f("plantimestamp", &[], None, Deep, impure),
    f("uuid", &[], None, Deep, impure),
    f("bcrypt", &["str"], Some("cost"), Deep, impure),
];

/// Terraform 1.11 functions terraci does not evaluate, and why. A call is `unknown-function`
/// with the reason; `tests::terraform` holds this list and [`FUNCTIONS`] against
/// `terraform metadata functions -json`. (Impure functions such as `timestamp` are in
/// [`FUNCTIONS`]: they evaluate to an unknown value.)
const UNSUPPORTED: &[(&str, &str)] = &[
    ("base64gzip", "its gzip output is not reproduced"),
    (
        "filebase64",
        "it reads a file's bytes, which terraci reads only as text",
    ),
    (
        "filebase64sha256",
        "it hashes a file's bytes, which terraci reads only as text",
    ),
    (
        "filebase64sha512",
        "it hashes a file's bytes, which terraci reads only as text",
    ),
    (
        "filemd5",
        "it hashes a file's bytes, which terraci reads only as text",
    ),
    (
        "filesha1",
        "it hashes a file's bytes, which terraci reads only as text",
    ),
    (
        "filesha256",
        "it hashes a file's bytes, which terraci reads only as text",
    ),
    (
        "filesha512",
        "it hashes a file's bytes, which terraci reads only as text",
    ),
    ("formatdate", "time functions are not evaluated"),
    ("issensitive", "sensitivity is not tracked statically"),
    ("rsadecrypt", "decryption needs a private key"),
    (
        "textdecodebase64",
        "character encodings other than UTF-8 are not supported",
    ),
    (
        "textencodebase64",
        "character encodings other than UTF-8 are not supported",
    ),
    ("timeadd", "time functions are not evaluated"),
    ("timecmp", "time functions are not evaluated"),
    ("uuidv5", "name-based UUIDs are not evaluated"),
];

/// Arguments of one call, with Terraform-style messages for bad ones.
pub(crate) struct Args {
    pub(crate) node: NodeId,
    name: &'static str,
    params: &'static [&'static str],
    variadic: Option<&'static str>,
    pub(crate) values: Vec<Value>,
}

impl Args {
    pub(super) fn len(&self) -> usize {
        self.values.len()
    }

    pub(super) fn take(&mut self, i: usize) -> Value {
        std::mem::replace(&mut self.values[i], Value::Null)
    }

    fn param(&self, i: usize) -> &'static str {
        self.params
            .get(i)
            .copied()
            .or(self.variadic)
            .unwrap_or("argument")
    }

    /// `Invalid value for "x" parameter: ...`
    pub(super) fn arg_err(&self, i: usize, msg: impl std::fmt::Display) -> crate::eval::EvalError {
        error(
            self.node,
            format!("Invalid value for \"{}\" parameter: {msg}.", self.param(i)),
        )
    }

    /// `Call to function "x" failed: ...`
    pub(super) fn fail(&self, msg: impl std::fmt::Display) -> crate::eval::EvalError {
        error(
            self.node,
            format!("Call to function \"{}\" failed: {msg}.", self.name),
        )
    }

    pub(super) fn limit(&self, msg: impl std::fmt::Display) -> crate::eval::EvalError {
        limit(
            self.node,
            format!("Call to function \"{}\" failed: {msg}.", self.name),
        )
    }

    pub(super) fn not_null(&self, i: usize) -> R<&Value> {
        match &self.values[i] {
            Value::Null => Err(self.arg_err(i, "argument must not be null")),
            v => Ok(v),
        }
    }

    pub(super) fn string(&self, i: usize) -> R<String> {
        let v = self.not_null(i)?;
        to_string_primitive(v).map_err(|_| self.arg_err(i, "string required"))
    }

    pub(super) fn number(&self, i: usize) -> R<f64> {
        let v = self.not_null(i)?;
        to_number(v).map_err(|m| self.arg_err(i, m))
    }

    /// A whole number that fits an `i64`.
    pub(super) fn int(&self, i: usize) -> R<i64> {
        let n = self.number(i)?;
        if n.fract() != 0.0 || !n.is_finite() {
            return Err(self.arg_err(i, "a whole number is required"));
        }
        if n.abs() > 9.0e15 {
            return Err(self.arg_err(i, "the number is too large"));
        }
        Ok(n as i64)
    }

    /// A list, tuple or set, as its elements.
    pub(super) fn seq(&mut self, i: usize) -> R<Vec<Value>> {
        self.not_null(i)?;
        match self.take(i) {
            Value::List(items) | Value::Set(items) => Ok(items),
            other => {
                let msg = format!(
                    "list of any single type required, but have {}",
                    other.type_name()
                );
                self.values[i] = other;
                Err(self.arg_err(i, msg))
            }
        }
    }

    pub(super) fn map(&mut self, i: usize) -> R<Object> {
        self.not_null(i)?;
        match self.take(i) {
            Value::Map(map) => Ok(map),
            other => {
                let msg = format!(
                    "map of any single type required, but have {}",
                    other.type_name()
                );
                self.values[i] = other;
                Err(self.arg_err(i, msg))
            }
        }
    }
}

/// Whether `try` may swallow this error: only ordinary dynamic errors, not limits, unknown
/// functions or references to undeclared names (which Terraform rejects before evaluating).
fn catchable(e: &crate::eval::EvalError) -> bool {
    e.code == Code::EvaluationError && !e.message.ends_with("is not declared")
}

pub(crate) fn call(
    ev: &mut Evaluator<'_, '_>,
    node: NodeId,
    name: &str,
    args: &[Expr],
    expand_final: bool,
) -> R<Value> {
    match name {
        "try" => return call_try(ev, node, args),
        "can" => return call_can(ev, node, args),
        // Terraform takes the template only from a reference (`local.tpl`): a template
        // written in place would be rendered before the call, so it is refused.
        "templatestring" if !args.first().is_some_and(is_reference) => {
            return Err(error(
                node,
                "Invalid value for \"template\" parameter: invalid template expression: must be a direct reference to a single string from elsewhere, containing valid Terraform template syntax.",
            ));
        }
        _ => {}
    }
    let Some(spec) = FUNCTIONS.iter().find(|s| s.name == name) else {
        let message = match UNSUPPORTED.iter().find(|(n, _)| *n == name) {
            Some((_, why)) => format!("function `{name}` is not evaluated by terraci: {why}"),
            None => format!("unknown function `{name}`"),
        };
        return Err(crate::eval::EvalError {
            node,
            code: Code::UnknownFunction,
            message,
        });
    };
    let mut values = Vec::with_capacity(args.len());
    for a in args {
        values.push(ev.eval(a)?);
    }
    if expand_final {
        match values.pop() {
            Some(Value::List(items)) | Some(Value::Set(items)) => values.extend(items),
            Some(u @ Value::Unknown(_)) => return Ok(u),
            Some(Value::Null) => {
                return Err(error(
                    node,
                    "Invalid expanding argument value: the expanding argument (indicated by ...) must not be null.",
                ))
            }
            Some(other) => {
                return Err(error(
                    node,
                    format!(
                        "Invalid expanding argument value: the expanding argument (indicated by ...) must be of a tuple, list, or set type, not {}.",
                        other.type_name()
                    ),
                ))
            }
            None => {
                return Err(error(
                    node,
                    "Missing expanding argument: the ... can only be used after an argument.",
                ))
            }
        }
    }
    let n = spec.params.len();
    if values.len() < n {
        return Err(error(
            node,
            format!(
                "Not enough function arguments: function \"{}\" expects {}{n} argument(s). Missing value for \"{}\".",
                spec.name,
                if spec.variadic.is_some() { "at least " } else { "" },
                spec.params[values.len()]
            ),
        ));
    }
    if values.len() > n && spec.variadic.is_none() {
        return Err(error(
            node,
            format!(
                "Too many function arguments: function \"{}\" expects only {n} argument(s).",
                spec.name
            ),
        ));
    }
    let unknown = match spec.unknowns {
        Deep => values.iter().find_map(|v| v.first_unknown()),
        Shallow => values.iter().find_map(|v| match v {
            Value::Unknown(u) => Some(u),
            _ => None,
        }),
        Own => None,
    };
    if let Some(u) = unknown {
        return Ok(Value::Unknown(u.clone()));
    }
    let mut args = Args {
        node,
        name: spec.name,
        params: spec.params,
        variadic: spec.variadic,
        values,
    };
    let result = (spec.run)(ev, &mut args)?;
    check_size(node, spec.name, &result)?;
    ev.charge_value(node, &result)?;
    Ok(result)
}

fn check_size(node: NodeId, name: &str, v: &Value) -> R<()> {
    let too_big = match v {
        Value::String(s) => s.len() > limits::MAX_STRING,
        Value::List(items) | Value::Set(items) => items.len() > limits::MAX_ELEMENTS,
        Value::Map(map) => map.len() > limits::MAX_ELEMENTS,
        _ => false,
    };
    if too_big {
        return Err(limit(
            node,
            format!("Call to function \"{name}\" failed: the result is too large."),
        ));
    }
    Ok(())
}

fn is_reference(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Variable(_) => true,
        ExprKind::Traversal(root, _) => matches!(root.kind, ExprKind::Variable(_)),
        _ => false,
    }
}

fn call_try(ev: &mut Evaluator<'_, '_>, node: NodeId, args: &[Expr]) -> R<Value> {
    if args.is_empty() {
        return Err(error(
            node,
            "Not enough function arguments: function \"try\" expects at least one argument.",
        ));
    }
    let mut last = None;
    for a in args {
        match ev.eval(a) {
            Ok(v) => {
                // A value that is not wholly known might still fail once it is known.
                if let Some(u) = v.first_unknown() {
                    return Ok(Value::Unknown(u.clone()));
                }
                return Ok(v);
            }
            Err(e) if catchable(&e) => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    let detail = last.map(|e| e.message).unwrap_or_default();
    Err(error(
        node,
        format!("Call to function \"try\" failed: no expression succeeded: {detail}"),
    ))
}

fn call_can(ev: &mut Evaluator<'_, '_>, node: NodeId, args: &[Expr]) -> R<Value> {
    let [a] = args else {
        return Err(error(
            node,
            "Function \"can\" expects exactly one argument.",
        ));
    };
    match ev.eval(a) {
        Ok(v) => match v.first_unknown() {
            Some(u) => Ok(Value::Unknown(u.clone())),
            None => Ok(Value::Bool(true)),
        },
        Err(e) if catchable(&e) => Ok(Value::Bool(false)),
        Err(e) => Err(e),
    }
}

fn tostring(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    match &a.values[0] {
        Value::Null => Ok(Value::Null),
        v => to_string_primitive(v)
            .map(Value::String)
            .map_err(|_| a.arg_err(0, format!("cannot convert {} to string", v.type_name()))),
    }
}

fn tonumber(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    match &a.values[0] {
        Value::Null => Ok(Value::Null),
        Value::Bool(_) => Err(a.arg_err(0, "cannot convert bool to number")),
        v => to_number(v).map(Value::Number).map_err(|m| a.arg_err(0, m)),
    }
}

fn tobool(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    match &a.values[0] {
        Value::Null => Ok(Value::Null),
        Value::Number(_) => Err(a.arg_err(0, "cannot convert number to bool")),
        v => to_bool(v).map(Value::Bool).map_err(|m| a.arg_err(0, m)),
    }
}

fn identity(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    Ok(a.take(0))
}

fn impure(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    Ok(Value::unknown(format!(
        "`{}()` is only known when Terraform runs",
        a.name
    )))
}
