//! `terraci lsp`: one keystroke in one file of a large project -> that file's
//! diagnostics, on the server's warm database, at 200, 2,000 and 10,000 modules.
//!
//! The server runs in process on an in-memory connection (the same loop `terraci lsp`
//! runs on stdio); the client is this harness. The workload is the shape of the CLI
//! tests' `support::synthetic_monorepo` (chains of ten modules per context, a
//! `for_each` remote state every third module), each module with an output, written
//! into `target/bench-workloads/lsp-<n>/` the first time a size is used.
//! Run: `cargo bench --bench lsp` (add a filter such as `10000`).

// The harness sets up its workload on disk itself; the System boundary is for the product.
#![allow(clippy::disallowed_methods)]

use camino::Utf8PathBuf;
use clap::Parser;
use divan::Bencher;
use terraci::cli::{Cli, Command as Sub};
use terraci_db::system::OsSystem;
use terraci_lsp::lsp_server::{Connection, Message, Notification, Request, RequestId};

// The binary's allocator (see main.rs), so that figures match it.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const SIZES: &[usize] = &[200, 2000, 10000];

fn main() {
    divan::main();
}

/// The workload of `n` modules (made once per size and kept between runs).
fn workload(n: usize) -> Utf8PathBuf {
    // The workspace's target directory (cargo runs benches in the package's).
    let target = std::env::var("CARGO_TARGET_DIR")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../../target").into());
    let dir = Utf8PathBuf::from(target).join(format!("bench-workloads/lsp-{n}"));
    if dir.join(".complete").exists() {
        return dir;
    }
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for i in 0..n {
        let (context, k) = (i / 10, i % 10);
        let service = format!("svc{}", context % 7);
        let env = ["dev", "stage", "prod"][(context / 7) % 3];
        let region = format!("r{}", context / 21);
        let base = format!("{service}/{env}/{region}");
        let id = |k: usize| format!("{base}/m{k}");
        let mut text = format!(
            "terraform {{\n  backend \"s3\" {{\n    bucket = \"state\"\n    key    = \"{}/terraform.tfstate\"\n  }}\n}}\n\nlocals {{\n  context = \"{base}\"\n}}\n\noutput \"id\" {{\n  value = local.context\n}}\n",
            id(k)
        );
        if k >= 1 {
            text.push_str(&format!(
                "\ndata \"terraform_remote_state\" \"previous\" {{\n  backend = \"s3\"\n  config = {{\n    bucket = \"state\"\n    key    = \"{}/terraform.tfstate\"\n  }}\n}}\n",
                id(k - 1)
            ));
        }
        if k >= 2 && k % 3 == 0 {
            text.push_str(&format!(
                "\nlocals {{\n  deps = {{ older = \"m{}\" }}\n}}\n\ndata \"terraform_remote_state\" \"older\" {{\n  for_each = local.deps\n  backend  = \"s3\"\n  config = {{\n    bucket = \"state\"\n    key    = \"${{local.context}}/${{each.value}}/terraform.tfstate\"\n  }}\n}}\n",
                k - 2
            ));
        }
        let path = dir.join(id(k)).join("main.tf");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    std::fs::write(
        dir.join(".terraci.yaml"),
        "structure:\n  pattern: \"{service}/{environment}/{region}/{module}\"\n",
    )
    .unwrap();
    std::fs::write(dir.join(".complete"), b"").unwrap();
    dir
}

/// `path` without symlinks, as the server names files.
fn real(path: &std::path::Path) -> Utf8PathBuf {
    Utf8PathBuf::try_from(std::fs::canonicalize(path).unwrap()).unwrap()
}

/// The editor's side of a server running on another thread.
struct Client {
    conn: Connection,
    server: Option<std::thread::JoinHandle<()>>,
    next: i32,
}

impl Client {
    /// Starts the server on `dir`, initializes it and waits for its first diagnostics.
    fn start(dir: &Utf8PathBuf) -> Client {
        let (server, conn) = Connection::memory();
        let dir_arg = dir.to_string();
        let handle = std::thread::spawn(move || {
            let cli = Cli::parse_from(["terraci", "lsp", "-d", dir_arg.as_str(), "--no-cache"]);
            let Sub::Lsp(args) = &cli.command else {
                unreachable!()
            };
            terraci::commands::serve_lsp(&server, &OsSystem, &cli.global, args)
                .expect("the server runs");
        });
        let mut client = Client {
            conn,
            server: Some(handle),
            next: 0,
        };
        let root = terraci_lsp::uri_of_path(&real(dir.as_std_path()));
        client.request(
            "initialize",
            serde_json::json!({"processId": null, "rootUri": root, "capabilities": {}}),
        );
        client.notify("initialized", serde_json::json!({}));
        client
    }

    fn notify(&self, method: &str, params: serde_json::Value) {
        self.conn
            .sender
            .send(Message::Notification(Notification::new(
                method.into(),
                params,
            )))
            .unwrap();
    }

    fn request(&mut self, method: &str, params: serde_json::Value) -> serde_json::Value {
        self.next += 1;
        let id = RequestId::from(self.next);
        self.conn
            .sender
            .send(Message::Request(Request::new(
                id.clone(),
                method.into(),
                params,
            )))
            .unwrap();
        loop {
            if let Message::Response(r) = self.conn.receiver.recv().unwrap() {
                if r.id == id {
                    return r.result.unwrap_or_default();
                }
            }
        }
    }

    /// Waits for the diagnostics of `uri`; their count.
    fn diagnostics_of(&self, uri: &str) -> usize {
        loop {
            if let Message::Notification(n) = self.conn.receiver.recv().unwrap() {
                if n.method == "textDocument/publishDiagnostics" && n.params["uri"] == uri {
                    return n.params["diagnostics"].as_array().map_or(0, Vec::len);
                }
            }
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.request("shutdown", serde_json::Value::Null);
        self.notify("exit", serde_json::Value::Null);
        if let Some(server) = self.server.take() {
            server.join().unwrap();
        }
    }
}

/// One `didChange` of one module's file that adds or removes an `unknown-remote-output`
/// (a read of an output its owner does not declare) -> that file's diagnostics.
#[divan::bench(args = SIZES, sample_count = 20, sample_size = 1)]
fn keystroke_to_diagnostics(bencher: Bencher, n: usize) {
    let dir = workload(n);
    // A module in the middle of the last context's chain: it reads `previous`.
    let rel = format!("{}/main.tf", {
        let context = (n - 1) / 10;
        let base = format!(
            "svc{}/{}/r{}",
            context % 7,
            ["dev", "stage", "prod"][(context / 7) % 3],
            context / 21
        );
        format!("{base}/m5")
    });
    let original = std::fs::read_to_string(dir.join(&rel)).unwrap();
    let texts = [
        format!("{original}\nlocals {{\n  peer = data.terraform_remote_state.previous.outputs.idd\n}}\n"),
        format!("{original}\nlocals {{\n  peer = data.terraform_remote_state.previous.outputs.id\n}}\n"),
    ];
    let client = Client::start(&dir);
    let uri = terraci_lsp::uri_of_path(&real(dir.join(&rel).as_std_path()));
    client.notify(
        "textDocument/didOpen",
        serde_json::json!({"textDocument": {"uri": uri, "languageId": "terraform", "version": 0, "text": texts[0]}}),
    );
    assert_eq!(client.diagnostics_of(&uri), 1, "the typo is found");
    let mut version = 0;
    bencher.bench_local(|| {
        version += 1;
        let text = &texts[version % 2];
        client.notify(
            "textDocument/didChange",
            serde_json::json!({"textDocument": {"uri": uri, "version": version},
                               "contentChanges": [{"text": text}]}),
        );
        client.diagnostics_of(&uri)
    });
}
