//! `terraci lsp` driven over stdio with JSON-RPC, as an editor drives it, on
//! `fixtures/lsp` (stage/app and stage/db read stage/vpc's state; app reads db's and an
//! unowned `legacy` state, and one output vpc does not declare).

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Stdio};

use serde_json::{json, Value};

use crate::support::Project;

/// A running server and the messages it sent that were not read yet.
struct Lsp {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: i64,
    /// The project directory as the server sees it (no symlinks), for URIs.
    root: String,
    /// What the server sent between `initialized` and its first answer: the project's
    /// diagnostics, published once it is loaded.
    initial: Vec<Value>,
}

impl Lsp {
    /// `terraci lsp` in `p`, initialized with the project as the workspace root.
    fn start(p: &Project) -> Lsp {
        let mut cmd = p.command(&["lsp"]);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = cmd.spawn().expect("terraci lsp starts");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let root = p
            .path()
            .canonicalize()
            .expect("project dir")
            .display()
            .to_string();
        let mut lsp = Lsp {
            child,
            stdin,
            stdout,
            next_id: 0,
            root,
            initial: Vec::new(),
        };
        let root_uri = lsp.uri("");
        let (init, _) = lsp.request(
            "initialize",
            json!({"processId": null, "rootUri": root_uri, "capabilities": {}}),
        );
        assert_eq!(init["capabilities"]["definitionProvider"], json!(true));
        // Answered once the project is loaded: a test that then changes the disk does
        // not race the load.
        lsp.initial = lsp.notify_and_sync("initialized", json!({}));
        lsp
    }

    fn uri(&self, rel: &str) -> String {
        match rel {
            "" => format!("file://{}", self.root),
            _ => format!("file://{}/{rel}", self.root),
        }
    }

    fn send(&mut self, msg: Value) {
        let body = msg.to_string();
        write!(self.stdin, "Content-Length: {}\r\n\r\n{body}", body.len()).expect("write");
        self.stdin.flush().expect("flush");
    }

    fn read(&mut self) -> Value {
        let mut len = 0;
        loop {
            let mut line = String::new();
            let n = self.stdout.read_line(&mut line).expect("read header");
            assert!(n > 0, "the server closed its output");
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some(v) = line.strip_prefix("Content-Length: ") {
                len = v.parse().expect("a length");
            }
        }
        let mut body = vec![0; len];
        self.stdout.read_exact(&mut body).expect("read body");
        serde_json::from_slice(&body).expect("JSON")
    }

    fn notify(&mut self, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// The result of a request, and the notifications the server sent before it.
    fn request(&mut self, method: &str, params: Value) -> (Value, Vec<Value>) {
        self.next_id += 1;
        let id = self.next_id;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let mut notes = Vec::new();
        loop {
            let msg = self.read();
            if msg["id"] == json!(id) {
                assert!(msg.get("error").is_none(), "{method}: {msg}");
                return (msg["result"].clone(), notes);
            }
            notes.push(msg);
        }
    }

    /// The diagnostics published for `rel` among `notes` (the last set), if any.
    fn published(&self, notes: &[Value], rel: &str) -> Option<Vec<Value>> {
        let uri = self.uri(rel);
        notes
            .iter()
            .rev()
            .find(|n| n["method"] == "textDocument/publishDiagnostics" && n["params"]["uri"] == uri)
            .map(|n| {
                n["params"]["diagnostics"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
    }

    /// Sends a notification and returns what the server published before answering the
    /// next request (it handles messages in order).
    fn notify_and_sync(&mut self, method: &str, params: Value) -> Vec<Value> {
        self.notify(method, params);
        self.request("workspace/symbol", json!({"query": "no such module"}))
            .1
    }

    fn open(&mut self, rel: &str, text: &str) -> Vec<Value> {
        let uri = self.uri(rel);
        self.notify_and_sync(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": uri, "languageId": "terraform", "version": 1, "text": text}}),
        )
    }

    fn change(&mut self, rel: &str, version: i64, text: &str) -> Vec<Value> {
        let uri = self.uri(rel);
        self.notify_and_sync(
            "textDocument/didChange",
            json!({"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]}),
        )
    }

    fn at(&mut self, method: &str, rel: &str, pos: (u32, u32), extra: Value) -> Value {
        let mut params = json!({
            "textDocument": {"uri": self.uri(rel)},
            "position": {"line": pos.0, "character": pos.1},
        });
        if let (Some(p), Some(e)) = (params.as_object_mut(), extra.as_object()) {
            p.extend(e.clone());
        }
        self.request(method, params).0
    }

    /// `shutdown`, `exit`; the exit status.
    fn stop(mut self) -> i32 {
        let (result, _) = self.request("shutdown", Value::Null);
        assert_eq!(result, Value::Null);
        self.notify("exit", Value::Null);
        self.child
            .wait()
            .expect("the server exits")
            .code()
            .unwrap_or(-1)
    }

    /// `(path, start line, start character)` of each location, in order.
    fn places(&self, locations: &Value) -> Vec<(String, u64, u64)> {
        let prefix = self.uri("");
        locations
            .as_array()
            .expect("locations")
            .iter()
            .map(|l| {
                let uri = l["uri"].as_str().expect("uri");
                (
                    uri.strip_prefix(&format!("{prefix}/"))
                        .unwrap_or(uri)
                        .to_owned(),
                    l["range"]["start"]["line"].as_u64().expect("line"),
                    l["range"]["start"]["character"]
                        .as_u64()
                        .expect("character"),
                )
            })
            .collect()
    }
}

/// A test that fails stops its server (a passing one has stopped it by `exit`).
impl Drop for Lsp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The 0-based line and character of the first `needle` in `text` (ASCII text).
fn pos_of(text: &str, needle: &str) -> (u32, u32) {
    let at = text
        .find(needle)
        .unwrap_or_else(|| panic!("`{needle}` in the text"));
    let line = text[..at].matches('\n').count() as u32;
    let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    (line, (at - start) as u32)
}

/// A location as [`Lsp::places`] gives it.
fn place(rel: &str, (line, character): (u32, u32)) -> (String, u64, u64) {
    (rel.to_owned(), line.into(), character.into())
}

fn codes(diagnostics: &[Value]) -> Vec<String> {
    diagnostics
        .iter()
        .map(|d| d["code"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn lsp_publishes_each_diagnostic_at_its_span_with_its_code() {
    let p = Project::fixture("lsp");
    let lsp = Lsp::start(&p);
    let app = p.read("stage/app/main.tf");
    // Published once the editor says it is initialized.
    let diags = lsp
        .published(&lsp.initial, "stage/app/main.tf")
        .expect("app's diagnostics");
    assert_eq!(
        codes(&diags),
        ["unmatched-remote-state", "unknown-remote-output"]
    );
    let unknown = &diags[1];
    let (line, character) = pos_of(&app, "vpc_idd");
    assert_eq!(
        unknown["range"],
        json!({"start": {"line": line, "character": character},
               "end": {"line": line, "character": character + 7}})
    );
    assert_eq!(unknown["severity"], json!(2));
    assert_eq!(
        unknown["codeDescription"]["href"],
        json!("terraci:explain-codes/unknown-remote-output")
    );
    let message = unknown["message"].as_str().expect("message");
    assert!(
        message.contains("(hint: the closest output there is `vpc_id`)")
            && message.ends_with("(terraci explain-codes unknown-remote-output)"),
        "{message}"
    );
    assert_eq!(lsp.stop(), 0);
}

#[test]
fn lsp_reads_the_editors_buffers_over_the_disk_and_survives_a_half_typed_block() {
    let p = Project::fixture("lsp");
    let mut lsp = Lsp::start(&p);
    let app = p.read("stage/app/main.tf");
    // Fixing the typo in the buffer (not on disk) clears the warning.
    let fixed = app.replace("outputs.vpc_idd", "outputs.vpc_id");
    let notes = lsp.open("stage/app/main.tf", &fixed);
    let diags = lsp
        .published(&notes, "stage/app/main.tf")
        .expect("republished");
    assert_eq!(codes(&diags), ["unmatched-remote-state"]);
    // A block half typed: a syntax error where it is, not a crash.
    let half = format!("{fixed}\nresource \"aws_instance\" \"web\" {{\n  ami = \n");
    let notes = lsp.change("stage/app/main.tf", 2, &half);
    let diags = lsp
        .published(&notes, "stage/app/main.tf")
        .expect("republished");
    assert!(
        codes(&diags).contains(&"syntax-error".to_owned()),
        "{diags:?}"
    );
    // Renaming an output in the owner's buffer warns in the reader's file.
    let vpc = p.read("stage/vpc/main.tf");
    let notes = lsp.open(
        "stage/vpc/main.tf",
        &vpc.replace("output \"vpc_id\"", "output \"vpc_ident\""),
    );
    let db = lsp
        .published(&notes, "stage/db/main.tf")
        .expect("db's diagnostics");
    assert_eq!(codes(&db), ["unknown-remote-output"]);
    assert!(db[0]["message"]
        .as_str()
        .is_some_and(|m| m.contains("closest output there is `vpc_ident`")));
    // Closing the owner's buffer goes back to the disk's text.
    let uri = lsp.uri("stage/vpc/main.tf");
    let notes = lsp.notify_and_sync(
        "textDocument/didClose",
        json!({"textDocument": {"uri": uri}}),
    );
    assert_eq!(lsp.published(&notes, "stage/db/main.tf"), Some(Vec::new()));
    assert_eq!(lsp.stop(), 0);
}

#[test]
fn lsp_ignores_a_file_outside_the_project() {
    let p = Project::fixture("lsp");
    let outside = tempfile::tempdir().expect("temp dir");
    let mut lsp = Lsp::start(&p);
    let uri = format!("file://{}/main.tf", outside.path().display());
    let notes = lsp.notify_and_sync(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": uri, "languageId": "terraform", "version": 1,
               "text": "resource \"x\" {\n"}}),
    );
    assert!(
        !notes.iter().any(|n| n["params"]["uri"] == json!(uri)),
        "{notes:?}"
    );
    let definition = lsp.at(
        "textDocument/definition",
        "../outside.tf",
        (0, 0),
        json!({}),
    );
    assert_eq!(definition, json!([]));
    assert_eq!(lsp.stop(), 0);
}

#[test]
fn lsp_goes_from_a_remote_state_to_its_owner_and_from_an_owner_to_its_readers() {
    let p = Project::fixture("lsp");
    let (app, db, vpc) = (
        p.read("stage/app/main.tf"),
        p.read("stage/db/main.tf"),
        p.read("stage/vpc/main.tf"),
    );
    let mut lsp = Lsp::start(&p);
    let backend = pos_of(&vpc, "backend \"s3\"");
    let owner_backend = place("stage/vpc/main.tf", backend);

    // The block, and its config, go to the owner's backend block.
    let block = pos_of(&app, "data \"terraform_remote_state\" \"vpc\"");
    let found = lsp.at(
        "textDocument/definition",
        "stage/app/main.tf",
        (block.0, block.1 + 5),
        json!({}),
    );
    assert_eq!(lsp.places(&found), std::slice::from_ref(&owner_backend));
    let config = pos_of(&app, "key    = \"stage/vpc/terraform.tfstate\"");
    let found = lsp.at(
        "textDocument/definition",
        "stage/app/main.tf",
        config,
        json!({}),
    );
    assert_eq!(lsp.places(&found), [owner_backend]);
    // `...outputs.subnet_ids` goes to `output "subnet_ids"`.
    let read = pos_of(&app, "subnet_ids");
    let found = lsp.at(
        "textDocument/definition",
        "stage/app/main.tf",
        (read.0, read.1 + 3),
        json!({}),
    );
    let output = pos_of(&vpc, "output \"subnet_ids\"");
    assert_eq!(lsp.places(&found), [place("stage/vpc/main.tf", output)]);
    // An unresolved block goes nowhere.
    let legacy = pos_of(&app, "\"legacy\"");
    let found = lsp.at(
        "textDocument/definition",
        "stage/app/main.tf",
        legacy,
        json!({}),
    );
    assert_eq!(found, json!([]));

    // The backend block's references: every block that reads the state.
    let refs = lsp.at(
        "textDocument/references",
        "stage/vpc/main.tf",
        backend,
        json!({"context": {"includeDeclaration": false}}),
    );
    let app_block = pos_of(&app, "data \"terraform_remote_state\" \"vpc\"");
    let db_block = pos_of(&db, "data \"terraform_remote_state\" \"vpc\"");
    assert_eq!(
        lsp.places(&refs),
        [
            place("stage/app/main.tf", app_block),
            place("stage/db/main.tf", db_block),
        ]
    );
    // An output's references: every read of it (db reads `vpc_id`; app misspells it).
    let output = pos_of(&vpc, "output \"vpc_id\"");
    let refs = lsp.at(
        "textDocument/references",
        "stage/vpc/main.tf",
        output,
        json!({"context": {"includeDeclaration": true}}),
    );
    let db_read = pos_of(&db, "vpc_id}");
    assert_eq!(
        lsp.places(&refs),
        [
            place("stage/vpc/main.tf", output),
            place("stage/db/main.tf", db_read),
        ]
    );
    assert_eq!(lsp.stop(), 0);
}

#[test]
fn lsp_hovers_code_lenses_and_workspace_symbols_tell_the_graph() {
    let p = Project::fixture("lsp");
    let app = p.read("stage/app/main.tf");
    let mut lsp = Lsp::start(&p);
    let block = pos_of(&app, "data \"terraform_remote_state\" \"vpc\"");
    let hover = lsp.at("textDocument/hover", "stage/app/main.tf", block, json!({}));
    let text = hover["contents"]["value"].as_str().expect("markdown");
    assert!(
        text.contains("owner `stage/vpc`") && text.contains("matched by state identity"),
        "{text}"
    );
    let legacy = pos_of(&app, "\"legacy\"");
    let hover = lsp.at("textDocument/hover", "stage/app/main.tf", legacy, json!({}));
    let text = hover["contents"]["value"].as_str().expect("markdown");
    assert!(
        text.contains("no owner")
            && text.contains("unmatched-remote-state: no module for state path \"stage/legacy\"")
            && text.contains("To resolve it"),
        "{text}"
    );

    let lens = |lsp: &mut Lsp, rel: &str| {
        let uri = lsp.uri(rel);
        let (lenses, _) = lsp.request(
            "textDocument/codeLens",
            json!({"textDocument": {"uri": uri}}),
        );
        lenses[0]["command"]["title"].clone()
    };
    assert_eq!(
        lens(&mut lsp, "stage/vpc/main.tf"),
        json!("read by 2 modules · reads 0 modules")
    );
    assert_eq!(
        lens(&mut lsp, "stage/app/main.tf"),
        json!("read by 0 modules · reads 2 modules")
    );
    assert_eq!(
        lens(&mut lsp, "stage/db/main.tf"),
        json!("read by 1 module · reads 1 module")
    );

    let (symbols, _) = lsp.request("workspace/symbol", json!({"query": "VP"}));
    let names: Vec<&str> = symbols
        .as_array()
        .expect("symbols")
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert_eq!(names, ["stage/vpc"]);
    assert_eq!(lsp.stop(), 0);
}

#[test]
fn explain_codes_prints_the_one_code_a_diagnostic_links_to() {
    let p = Project::empty();
    let out = p.run(&["explain-codes", "unknown-remote-output"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.starts_with("unknown-remote-output "),
        "{}",
        out.stdout
    );
    assert_eq!(out.stdout.lines().count(), 1, "{}", out.stdout);
    let out = p.run(&["explain-codes", "no-such-code"]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr
            .contains("no diagnostic code `no-such-code`; `terraci explain-codes` lists them"),
        "{}",
        out.stderr
    );
}

#[test]
fn lsp_follows_the_disk_through_watched_file_events() {
    let p = Project::fixture("lsp");
    let mut lsp = Lsp::start(&p);
    // A checkout renames the owner's output: the reader's file warns.
    let vpc = p.read("stage/vpc/main.tf");
    p.write(
        "stage/vpc/main.tf",
        vpc.replace("output \"vpc_id\"", "output \"id\""),
    );
    let changed = json!({"changes": [{"uri": lsp.uri("stage/vpc/main.tf"), "type": 2}]});
    let notes = lsp.notify_and_sync("workspace/didChangeWatchedFiles", changed);
    let db = lsp
        .published(&notes, "stage/db/main.tf")
        .expect("db's diagnostics");
    assert_eq!(codes(&db), ["unknown-remote-output"]);
    assert!(
        db[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("(hint: the closest output there is `id`)")),
        "{db:?}"
    );
    // A new module: discovered, and its own diagnostics published.
    p.write(
        "stage/cache/main.tf",
        "terraform {\n  backend \"s3\" {\n    bucket = \"tfstate\"\n    key    = \"stage/cache/terraform.tfstate\"\n    region = \"eu-west-1\"\n  }\n}\n\ndata \"terraform_remote_state\" \"db\" {\n  backend = \"s3\"\n  config = {\n    bucket = \"tfstate\"\n    key    = \"stage/db/terraform.tfstate\"\n    region = \"eu-west-1\"\n  }\n}\n\nlocals {\n  host = data.terraform_remote_state.db.outputs.endpont\n}\n",
    );
    let created = json!({"changes": [{"uri": lsp.uri("stage/cache/main.tf"), "type": 1}]});
    let notes = lsp.notify_and_sync("workspace/didChangeWatchedFiles", created);
    let cache = lsp
        .published(&notes, "stage/cache/main.tf")
        .expect("the new module's diagnostics");
    assert_eq!(codes(&cache), ["unknown-remote-output"]);
    assert_eq!(lsp.stop(), 0);
}

#[test]
fn lsp_shows_a_cycle_on_each_block_that_closes_it() {
    let p = Project::fixture("cycle");
    let lsp = Lsp::start(&p);
    // app -> eks -> vpc -> app; dns reads vpc but is not on the cycle.
    for (rel, block) in [
        ("stage/app/main.tf", "eks"),
        ("stage/eks/main.tf", "vpc"),
        ("stage/vpc/main.tf", "app"),
    ] {
        let diags = lsp
            .published(&lsp.initial, rel)
            .unwrap_or_else(|| panic!("{rel}'s diagnostics"));
        assert_eq!(codes(&diags), ["dependency-cycle"], "{rel}");
        let text = p.read(rel);
        let (line, character) = pos_of(&text, &format!("\"{block}\""));
        assert_eq!(
            diags[0]["range"]["start"],
            json!({"line": line, "character": character})
        );
        assert!(
            diags[0]["message"].as_str().is_some_and(|m| {
                m.contains(
                "which closes the dependency cycle stage/app -> stage/eks -> stage/vpc -> stage/app"
            )
            }),
            "{diags:?}"
        );
    }
    assert_eq!(lsp.published(&lsp.initial, "stage/dns/main.tf"), None);
    assert_eq!(lsp.stop(), 0);
}
