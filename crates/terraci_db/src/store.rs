//! terraci's on-disk stores: where they live and the byte codec they share.
//!
//! Every store (the fact cache `facts.bin` and the summary cache `summaries.bin` of the
//! engine, the run records `run.bin` / `run-<command>.bin` of the binary, the repository
//! fingerprint inside a record) is a file of terraci's own: a 16-byte magic, its format
//! number and the terraci version ([`begin_file`]), entries written with the encoding
//! below (LEB128 integers, length-prefixed strings, one tag byte per variant, the
//! span-free syntax tree), and a CRC-32 of everything ([`seal_parts`]); [`open_file`]
//! checks all of it before a reader is handed out. [`CacheSettings`] says where the
//! cache directory is and refuses one that is not terraci's own.
//!
//! `docs/architecture.md` lists each store with its key and what invalidates it.

// The reader's error is `()`: a corrupt file is all there is to say (it is then ignored
// and rewritten), and its `len` reads a count, not a size.
#![allow(clippy::result_unit_err, clippy::len_without_is_empty)]

use camino::{Utf8Path, Utf8PathBuf};

use crate::diagnostic::{Diagnostic, ItemPath, Severity};
use crate::syntax::{
    BinaryOp, Expr, ExprKind, ForExpr, Name, NodeId, Num, ObjectKey, TemplatePart, Traverser,
    UnaryOp,
};
use crate::system::System;

pub const FACTS_FILE_NAME: &str = "facts.bin";
/// The summary cache `crate::resolve::summary` keeps beside the facts.
pub const SUMMARY_FILE_NAME: &str = "summaries.bin";
/// `--from-commit`'s memo of the walk (`terraci::walk_memo`).
pub const WALK_FILE_NAME: &str = "walk.bin";
/// The run record `terraci::replay` keeps beside the facts (its `FILE_NAME`; a test
/// checks the two agree).
pub const RUN_RECORD_FILE: &str = "run.bin";

/// Whether `name` is a run record's file name: `run.bin` (`generate`'s) or
/// `run-<command>.bin` (`terraci::replay` names them; a test checks the two agree).
pub fn is_record_name(name: &str) -> bool {
    name == RUN_RECORD_FILE
        || name
            .strip_prefix("run-")
            .and_then(|n| n.strip_suffix(".bin"))
            .is_some_and(|c| {
                !c.is_empty() && c.bytes().all(|b| b.is_ascii_lowercase() || b == b'-')
            })
}

/// Where the cache lives and whether to use it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheSettings {
    pub dir: Utf8PathBuf,
    /// Where writes into `dir` start following no symlink
    /// ([`crate::system::write_root`]): the project for a cache dir inside it, else
    /// `dir` itself.
    pub root: Utf8PathBuf,
}

impl CacheSettings {
    /// `None` with `--no-cache`; else `--cache-dir` or `<project>/.terraci/cache`.
    pub fn new(root: &Utf8Path, no_cache: bool, dir: Option<&Utf8Path>) -> Option<Self> {
        if no_cache {
            return None;
        }
        let dir = match dir {
            Some(d) if d.is_absolute() => d.to_owned(),
            Some(d) => root.join(d),
            None => root.join(".terraci/cache"),
        };
        Some(CacheSettings {
            root: crate::system::write_root(root, &dir),
            dir,
        })
    }

    /// Writes the cache file `name` (streamed, see [`System::replace_streamed`]) into
    /// the cache dir, following no symlink below [`CacheSettings::root`].
    pub fn replace_streamed(
        &self,
        system: &dyn System,
        name: &str,
        write: &mut dyn FnMut(&mut crate::system::Sink<'_>) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        system.replace_streamed_beneath(&self.root, &self.dir.join(name), write)
    }

    /// [`System::replace_parts`] of the cache file `name`, following no symlink below
    /// [`CacheSettings::root`].
    pub fn replace_parts(
        &self,
        system: &dyn System,
        name: &str,
        parts: &[&[u8]],
    ) -> std::io::Result<()> {
        system.replace_beneath(&self.root, &self.dir.join(name), parts)
    }

    /// [`System::write_atomic`] of the cache file `name`, following no symlink below
    /// [`CacheSettings::root`].
    pub fn write(&self, system: &dyn System, name: &str, bytes: &[u8]) -> std::io::Result<bool> {
        system.write_beneath(&self.root, &self.dir.join(name), &[bytes])
    }

    /// The fact cache's file.
    pub fn file(&self) -> Utf8PathBuf {
        self.dir.join(FACTS_FILE_NAME)
    }

    /// Refuses a cache dir that is not terraci's own: the project directory or one
    /// above it, or a directory holding anything terraci does not write there (the fact
    /// cache, the run record, their temp files and a `.gitignore` of `*`). Writing the
    /// cache replaces `.gitignore` with `*`: in the project dir that hid every module
    /// from later runs.
    pub fn check(&self, system: &dyn System, root: &Utf8Path) -> Result<(), CacheDirError> {
        let real = |p: &Utf8Path| system.canonicalize(p).unwrap_or_else(|_| p.to_owned());
        let (dir, project) = (real(&self.dir), real(root));
        if project.starts_with(&dir) {
            return Err(CacheDirError::HoldsProject(self.dir.clone()));
        }
        // A committed link (`.terraci/cache`, or `.terraci`, pointing anywhere) is not
        // followed: neither listed here nor read nor written.
        if let Err(e) = system.refuse_links_beneath(&self.root, &self.dir) {
            return Err(CacheDirError::Linked {
                dir: self.dir.clone(),
                why: e.to_string(),
            });
        }
        let Ok(entries) = system.read_dir(&self.dir) else {
            // Missing: created on the first write.
            return Ok(());
        };
        let ours = |name: &str| {
            let own = |f: &str| {
                [
                    FACTS_FILE_NAME,
                    SUMMARY_FILE_NAME,
                    WALK_FILE_NAME,
                    ".gitignore",
                ]
                .contains(&f)
                    || is_record_name(f)
            };
            // A temp file is `.<name>.<suffix>.tmp`.
            own(name)
                || name
                    .strip_prefix('.')
                    .and_then(|n| n.strip_suffix(".tmp"))
                    .is_some_and(|n| n.match_indices('.').any(|(i, _)| own(&n[..i])))
        };
        for entry in entries {
            let foreign = !ours(&entry.name)
                || !matches!(entry.kind, crate::system::EntryKind::File)
                || (entry.name == ".gitignore"
                    && system.read(&self.dir.join(".gitignore")).ok().as_deref() != Some(b"*\n"));
            if foreign {
                return Err(CacheDirError::Foreign {
                    dir: self.dir.clone(),
                    entry: crate::escape::printable(&entry.name).into_owned(),
                });
            }
        }
        Ok(())
    }
}

/// Why a cache dir is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CacheDirError {
    #[error(
        "the cache dir `{0}` is the project directory or holds it; \
         pick a directory of its own (default .terraci/cache)"
    )]
    HoldsProject(Utf8PathBuf),
    /// `entry` is printable (control characters escaped).
    #[error(
        "the cache dir `{dir}` holds `{entry}`, which terraci did not write; \
         pick a directory of its own (default .terraci/cache)"
    )]
    Foreign { dir: Utf8PathBuf, entry: String },
    /// A directory on the way to it (or itself) is a symlink.
    #[error("the cache dir `{dir}` cannot be used: {why}")]
    Linked { dir: Utf8PathBuf, why: String },
}

impl CacheDirError {
    /// The process exit code of a run that stops here.
    pub fn exit_code(&self) -> u8 {
        crate::exit::ERROR
    }
}

/// Starts a file of terraci's own (this cache, the run record of [`terraci::replay`]):
/// `magic`, the layout's `format` and the terraci version.
pub fn begin_file(magic: &[u8; 16], format: u64, capacity: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(capacity);
    out.extend_from_slice(magic);
    put_u64(&mut out, format);
    put_str(&mut out, env!("CARGO_PKG_VERSION"));
    out
}

/// Ends a file begun with [`begin_file`], written in pieces: the checksum of `parts` in
/// order (the same as of their concatenation), to write after them.
pub fn seal_parts(parts: &[&[u8]]) -> [u8; 8] {
    let mut sum = crc32fast::Hasher::new();
    for part in parts {
        sum.update(part);
    }
    sealed(sum)
}

/// The trailer of a file: its CRC-32 (a check against damage and truncation, not
/// against tampering: the cache directory is the user's), as eight bytes.
fn sealed(sum: crc32fast::Hasher) -> [u8; 8] {
    u64::from(sum.finalize()).to_le_bytes()
}

/// Checks a file written by [`begin_file`] and [`seal_parts`]: magic (`what` names the kind of
/// file when it is wrong), checksum, format and terraci version. Returns a reader over
/// the body after the header (without the checksum).
pub fn open_file<'a>(
    blob: &'a [u8],
    magic: &[u8; 16],
    format: u64,
    what: &'static str,
) -> Result<Reader<'a, ()>, &'static str> {
    if blob.len() < magic.len() + 8 || &blob[..magic.len()] != magic {
        return Err(what);
    }
    let (body, sum) = blob.split_at(blob.len() - 8);
    let mut r = Reader {
        b: body,
        i: magic.len(),
        file: (),
    };
    // The format first: another layout may end in another kind of checksum.
    let format_found = r.u64().map_err(|_| "truncated")?;
    let version = r.string().map_err(|_| "truncated")?;
    if format_found != format || version != env!("CARGO_PKG_VERSION") {
        return Err("written by another version of terraci");
    }
    if seal_parts(&[body]) != sum {
        return Err("corrupt or truncated");
    }
    Ok(r)
}

/// The running binary, as the cache's key: facts are what this build's parser and
/// lowering make of a text, and a rebuilt binary (another lowering under the same version
/// and format number) must not read an older build's facts. The build's identity
/// ([`System::program_id`]: its ELF build ID, else the executable's stamp), as the run
/// record keys on it; `None` where it cannot be told (no cache is then read).
pub fn binary_id(system: &dyn System) -> Option<Vec<u8>> {
    system.program_id()
}

/// How many stale entries a cache may keep rather than be rewritten.
const STALE_LIMIT: usize = 32;

/// Whether a cache of `old` entries (`None`: there is none) is rewritten to hold `new`
/// entries, `stale` of which it does not hold as they are now. Not for a few: a
/// merge request's push changes a few files, and rewriting megabytes of cache for them
/// took longer than the next run spends reading and parsing those files again (which
/// is all a stale entry costs: it is never used for a file that does not match it).
/// Entries of files that are gone count as stale too (as many as the cache shrinks by).
pub fn worth_rewriting(old: Option<usize>, new: usize, stale: usize) -> bool {
    let Some(old) = old.filter(|&n| n > 0) else {
        return new > 0;
    };
    let gone = old.saturating_sub(new);
    stale + gone > STALE_LIMIT.min(old / 2)
}

/// The entries of a file of terraci's own: their count, then each as `entry` reads it
/// (given the entry before it).
pub fn read_entries<T>(
    r: &mut Reader<'_, ()>,
    mut entry: impl FnMut(&mut Reader<'_, ()>, Option<&T>) -> R<T>,
) -> Result<Vec<T>, &'static str> {
    let count = r.u64().map_err(|_| "truncated")? as usize;
    let mut entries = Vec::with_capacity(count.min(1 << 20));
    for _ in 0..count {
        let next = entry(r, entries.last()).map_err(|()| "corrupt entry")?;
        entries.push(next);
    }
    Ok(entries)
}

/// A file written as it is made, through a buffer of about a megabyte (an old entry's
/// bytes are copied into it too: writing them on their own took two `write` calls per
/// entry, 60,000 at 10,000 modules), the checksum of everything last.
pub struct Stream<'a> {
    emit: &'a mut crate::system::Sink<'a>,
    buffer: Vec<u8>,
    sum: crc32fast::Hasher,
    /// With a [`CacheKey`]: the MAC of everything emitted.
    mac: Option<ring::hmac::Context>,
}

impl<'a> Stream<'a> {
    const BUFFER: usize = 1 << 20;

    /// A stream that ends in a MAC under `key` too, when there is one ([`mac_trailer`]).
    pub fn new(emit: &'a mut crate::system::Sink<'a>, key: Option<&CacheKey>) -> Self {
        Stream {
            emit,
            buffer: Vec::with_capacity(Self::BUFFER + Self::BUFFER / 4),
            sum: crc32fast::Hasher::new(),
            mac: key.map(|k| ring::hmac::Context::with_key(&k.0)),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if !self.buffer.is_empty() {
            self.sum.update(&self.buffer);
            if let Some(mac) = &mut self.mac {
                mac.update(&self.buffer);
            }
            (self.emit)(&self.buffer)?;
            self.buffer.clear();
        }
        Ok(())
    }

    /// Appends what `write` writes.
    pub fn own(&mut self, write: impl FnOnce(&mut Vec<u8>)) -> std::io::Result<()> {
        write(&mut self.buffer);
        if self.buffer.len() >= Self::BUFFER {
            self.flush()?;
        }
        Ok(())
    }

    /// The rest of the buffer, then the checksum ([`seal_parts`] of all of it).
    pub fn finish(mut self) -> std::io::Result<()> {
        self.flush()?;
        let sum = sealed(self.sum);
        (self.emit)(&sum)?;
        if let Some(mut mac) = self.mac {
            mac.update(&sum);
            mac.update(MAC_MAGIC);
            (self.emit)(MAC_MAGIC)?;
            (self.emit)(mac.sign().as_ref())?;
        }
        Ok(())
    }
}

/// The environment variable holding the secret that cache files and run records are
/// signed with: when it is set, a file without a valid MAC under it is ignored (with a
/// notice) and rewritten. A protected CI variable: a merge request from a fork does not
/// get it, so what its pipeline wrote to a shared cache cannot reach a protected
/// pipeline (docs/security.md). Read through the `System`, never printed nor written.
pub const CACHE_SECRET_VAR: &str = "TERRACI_CACHE_SECRET";

/// Marks a MAC at the end of a file, after its checksum: 16 bytes, then the 32 of an
/// HMAC-SHA256 of everything before the MAC.
const MAC_MAGIC: &[u8; 16] = b"terraci-hmac-256";
const MAC_LEN: usize = 32;

/// The key of [`CACHE_SECRET_VAR`].
pub struct CacheKey(ring::hmac::Key);

impl std::fmt::Debug for CacheKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CacheKey(..)")
    }
}

/// The key cache files are signed with, when [`CACHE_SECRET_VAR`] is set and not empty.
pub fn cache_key(system: &dyn System) -> Option<CacheKey> {
    let secret = system.env_var(CACHE_SECRET_VAR).filter(|s| !s.is_empty())?;
    Some(CacheKey(ring::hmac::Key::new(
        ring::hmac::HMAC_SHA256,
        secret.as_bytes(),
    )))
}

/// What to write after `parts` (a whole file, checksum included) to sign it with `key`:
/// nothing without one.
pub fn mac_trailer(key: Option<&CacheKey>, parts: &[&[u8]]) -> Vec<u8> {
    let Some(key) = key else {
        return Vec::new();
    };
    let mut mac = ring::hmac::Context::with_key(&key.0);
    for part in parts {
        mac.update(part);
    }
    mac.update(MAC_MAGIC);
    let mut out = MAC_MAGIC.to_vec();
    out.extend_from_slice(mac.sign().as_ref());
    out
}

/// The length of a cache file's bytes without its MAC, checked against `key`: with a
/// key, the file must end in a MAC under it; without one, a MAC is dropped unchecked
/// (the checksum still is). `Err` says why the file is not used.
pub fn unseal(key: Option<&CacheKey>, blob: &[u8]) -> Result<usize, &'static str> {
    let n = blob.len();
    let signed = n >= MAC_MAGIC.len() + MAC_LEN
        && &blob[n - MAC_LEN - MAC_MAGIC.len()..n - MAC_LEN] == MAC_MAGIC;
    let body = if signed {
        n - MAC_LEN - MAC_MAGIC.len()
    } else {
        n
    };
    match key {
        None => Ok(body),
        Some(_) if !signed => Err("not signed with the secret in TERRACI_CACHE_SECRET"),
        Some(key) => ring::hmac::verify(&key.0, &blob[..n - MAC_LEN], &blob[n - MAC_LEN..])
            .map(|()| body)
            .map_err(|_| {
                "its signature does not match the secret in TERRACI_CACHE_SECRET: \
                 written without it, or changed since"
            }),
    }
}

/// SipHash with fixed keys: deterministic across runs of one build. A different hash in
/// another build only turns hits into misses; the format version guards the rest.
pub use crate::files::content_hash;

// ---- encoding: LEB128 integers, length-prefixed strings, one tag byte per variant ----

pub fn put_u64(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

pub fn put_str(out: &mut Vec<u8>, s: &str) {
    put_bytes(out, s.as_bytes());
}

/// Length-prefixed bytes.
pub fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_u64(out, b.len() as u64);
    out.extend_from_slice(b);
}

pub fn put_strs(out: &mut Vec<u8>, items: &[Name]) {
    put_u64(out, items.len() as u64);
    for s in items {
        put_str(out, s);
    }
}

/// A file's stamp, as the run record and the repository's fingerprint hold it.
/// A [`crate::files::BlobId`], as [`Reader::blob`] reads it.
pub fn put_blob(out: &mut Vec<u8>, b: &crate::files::BlobId) {
    out.extend_from_slice(&b.0);
}

pub fn put_stamp(out: &mut Vec<u8>, s: &crate::system::Stamp) {
    for v in [s.dev, s.ino, s.len, s.mtime_ns as u64, s.ctime_ns as u64] {
        put_u64(out, v);
    }
}

pub fn put_opt<T>(out: &mut Vec<u8>, v: &Option<T>, f: impl FnOnce(&mut Vec<u8>, &T)) {
    match v {
        None => out.push(0),
        Some(x) => {
            out.push(1);
            f(out, x);
        }
    }
}

/// A diagnostic up to its message: severity, code, module, file, line, column, message.
pub fn write_diagnostic_head(out: &mut Vec<u8>, d: &Diagnostic) {
    out.push(match d.severity {
        Severity::Error => 0,
        Severity::Warning => 1,
        Severity::Info => 2,
    });
    put_str(out, d.code.as_str());
    put_opt(out, &d.module, |o, s| put_str(o, s));
    put_opt(out, &d.file, |o, s| put_str(o, s));
    put_opt(out, &d.line, |o, &n| put_u64(o, n.into()));
    put_opt(out, &d.column, |o, &n| put_u64(o, n.into()));
    put_str(out, &d.message);
}

pub fn write_item(out: &mut Vec<u8>, item: &ItemPath) {
    put_strs(out, &item.block);
    put_strs(out, &item.attr);
}

pub fn write_expr(out: &mut Vec<u8>, e: &Expr) {
    put_u64(out, e.id.0.into());
    match &e.kind {
        ExprKind::Null => out.push(0),
        ExprKind::Bool(b) => out.push(if *b { 2 } else { 1 }),
        ExprKind::Number(n) => {
            out.push(3);
            out.extend_from_slice(&n.get().to_bits().to_le_bytes());
        }
        ExprKind::String(s) => {
            out.push(4);
            put_str(out, s);
        }
        ExprKind::Template(parts) => {
            out.push(5);
            write_parts(out, parts);
        }
        ExprKind::Array(items) => {
            out.push(6);
            write_exprs(out, items);
        }
        ExprKind::Object(entries) => {
            out.push(7);
            put_u64(out, entries.len() as u64);
            for (k, v) in entries {
                match k {
                    ObjectKey::Ident(s) => {
                        out.push(0);
                        put_str(out, s);
                    }
                    ObjectKey::Expr(k) => {
                        out.push(1);
                        write_expr(out, k);
                    }
                }
                write_expr(out, v);
            }
        }
        ExprKind::Variable(s) => {
            out.push(8);
            put_str(out, s);
        }
        ExprKind::Traversal(root, ops) => {
            out.push(9);
            write_expr(out, root);
            put_u64(out, ops.len() as u64);
            for op in ops {
                match op {
                    Traverser::Attr(s) => {
                        out.push(0);
                        put_str(out, s);
                    }
                    Traverser::Index(i) => {
                        out.push(1);
                        write_expr(out, i);
                    }
                    Traverser::LegacyIndex(n) => {
                        out.push(2);
                        put_u64(out, *n);
                    }
                    Traverser::AttrSplat => out.push(3),
                    Traverser::FullSplat => out.push(4),
                }
            }
        }
        ExprKind::FuncCall(call) => {
            out.push(10);
            put_str(out, &call.name);
            write_exprs(out, &call.args);
            out.push(u8::from(call.expand_final));
        }
        ExprKind::Conditional(c, t, f) => {
            out.push(11);
            write_expr(out, c);
            write_expr(out, t);
            write_expr(out, f);
        }
        ExprKind::Unary(op, x) => {
            out.push(12);
            out.push(match op {
                UnaryOp::Neg => 0,
                UnaryOp::Not => 1,
            });
            write_expr(out, x);
        }
        ExprKind::Binary(op, l, r) => {
            out.push(13);
            out.push(BINARY.iter().position(|b| b == op).expect("listed") as u8);
            write_expr(out, l);
            write_expr(out, r);
        }
        ExprKind::For(f) => {
            out.push(14);
            put_opt(out, &f.key_var, |o, s| put_str(o, s));
            put_str(out, &f.value_var);
            write_expr(out, &f.collection);
            put_opt(out, &f.key_expr, write_expr);
            write_expr(out, &f.value_expr);
            put_opt(out, &f.cond, write_expr);
            out.push(u8::from(f.grouping));
        }
        ExprKind::Paren(x) => {
            out.push(15);
            write_expr(out, x);
        }
    }
}

const BINARY: [BinaryOp; 13] = [
    BinaryOp::Eq,
    BinaryOp::NotEq,
    BinaryOp::LessEq,
    BinaryOp::GreaterEq,
    BinaryOp::Less,
    BinaryOp::Greater,
    BinaryOp::Plus,
    BinaryOp::Minus,
    BinaryOp::Mul,
    BinaryOp::Div,
    BinaryOp::Mod,
    BinaryOp::And,
    BinaryOp::Or,
];

pub fn write_exprs(out: &mut Vec<u8>, items: &[Expr]) {
    put_u64(out, items.len() as u64);
    for e in items {
        write_expr(out, e);
    }
}

pub fn write_parts(out: &mut Vec<u8>, parts: &[TemplatePart]) {
    put_u64(out, parts.len() as u64);
    for p in parts {
        match p {
            TemplatePart::Literal(s) => {
                out.push(0);
                put_str(out, s);
            }
            TemplatePart::Interpolation(e) => {
                out.push(1);
                write_expr(out, e);
            }
            TemplatePart::If {
                cond,
                then,
                otherwise,
            } => {
                out.push(2);
                write_expr(out, cond);
                write_parts(out, then);
                write_parts(out, otherwise);
            }
            TemplatePart::For {
                key_var,
                value_var,
                collection,
                body,
            } => {
                out.push(3);
                put_opt(out, key_var, |o, s| put_str(o, s));
                put_str(out, value_var);
                write_expr(out, collection);
                write_parts(out, body);
            }
        }
    }
}

/// Decoding; `F` is the file the facts are rebuilt for (`()` while reading the index).
pub struct Reader<'a, F> {
    b: &'a [u8],
    i: usize,
    file: F,
}

pub type R<T> = Result<T, ()>;

impl<'a, F: Copy> Reader<'a, F> {
    /// A reader over one entry's bytes that rebuilds values bound to `file`.
    pub fn with_file(b: &'a [u8], file: F) -> Reader<'a, F> {
        Reader { b, i: 0, file }
    }

    /// The file values are rebuilt for.
    pub fn file(&self) -> F {
        self.file
    }
}

impl<'a> Reader<'a, ()> {
    /// A reader over bytes of terraci's own encoding (no file header).
    pub fn over(b: &'a [u8]) -> Reader<'a, ()> {
        Reader { b, i: 0, file: () }
    }

    /// What [`put_stamp`] wrote.
    pub fn stamp(&mut self) -> R<crate::system::Stamp> {
        Ok(crate::system::Stamp {
            dev: self.u64()?,
            ino: self.u64()?,
            len: self.u64()?,
            mtime_ns: self.u64()? as i64,
            ctime_ns: self.u64()? as i64,
        })
    }

    /// What [`put_opt`] wrote.
    pub fn opt_with<T>(&mut self, f: impl FnOnce(&mut Self) -> R<T>) -> R<Option<T>> {
        match self.u8()? {
            0 => Ok(None),
            1 => f(self).map(Some),
            _ => Err(()),
        }
    }
}

/// Nesting bound while decoding: a corrupt entry must not recurse without end.
const MAX_DEPTH: u32 = 512;

impl<F> Reader<'_, F> {
    pub fn u8(&mut self) -> R<u8> {
        let b = *self.b.get(self.i).ok_or(())?;
        self.i += 1;
        Ok(b)
    }

    pub fn u64(&mut self) -> R<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(())
    }

    pub fn u32(&mut self) -> R<u32> {
        u32::try_from(self.u64()?).map_err(|_| ())
    }

    /// What [`put_blob`] wrote.
    pub fn blob(&mut self) -> R<crate::files::BlobId> {
        let bytes = self.b.get(self.i..self.i + 20).ok_or(())?;
        self.i += 20;
        Ok(crate::files::BlobId(bytes.try_into().map_err(|_| ())?))
    }

    pub fn fixed_u64(&mut self) -> R<u64> {
        let bytes = self.b.get(self.i..self.i + 8).ok_or(())?;
        self.i += 8;
        Ok(u64::from_le_bytes(bytes.try_into().map_err(|_| ())?))
    }

    pub fn len(&mut self) -> R<usize> {
        let n = self.u64()? as usize;
        // Every item takes at least one byte: a count beyond the rest is corrupt.
        if n > self.b.len() - self.i {
            return Err(());
        }
        Ok(n)
    }

    /// Where the bytes [`put_bytes`] wrote are (offsets into the reader's bytes), skipped.
    pub fn range(&mut self) -> R<std::ops::Range<usize>> {
        let n = self.u64()? as usize;
        let start = self.i;
        let end = start
            .checked_add(n)
            .filter(|&e| e <= self.b.len())
            .ok_or(())?;
        self.i = end;
        Ok(start..end)
    }

    pub fn string(&mut self) -> R<String> {
        let s = std::str::from_utf8(self.bytes()?).map_err(|_| ())?;
        Ok(s.to_owned())
    }

    /// Length-prefixed bytes.
    pub fn bytes(&mut self) -> R<&[u8]> {
        let n = self.len()?;
        let b = &self.b[self.i..self.i + n];
        self.i += n;
        Ok(b)
    }

    /// Where the UTF-8 key of an entry is, which must sort after the key at `previous`
    /// (a file's entries are in key order, so a key is found by binary search).
    pub fn sorted_key(
        &mut self,
        previous: Option<&std::ops::Range<usize>>,
    ) -> R<std::ops::Range<usize>> {
        let key = self.range()?;
        std::str::from_utf8(&self.b[key.clone()]).map_err(|_| ())?;
        if previous.is_some_and(|p| self.b[p.clone()] >= self.b[key.clone()]) {
            return Err(());
        }
        Ok(key)
    }

    /// Whether every byte was read.
    pub fn at_end(&self) -> bool {
        self.i == self.b.len()
    }

    /// What [`put_str`] wrote, as a [`Name`] (inline when short: no heap block).
    pub fn name(&mut self) -> R<Name> {
        let s = std::str::from_utf8(self.bytes()?).map_err(|_| ())?;
        Ok(Name::from(s))
    }

    pub fn names(&mut self) -> R<Vec<Name>> {
        let n = self.len()?;
        exactly(n, || self.name())
    }

    pub fn bool(&mut self) -> R<bool> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(()),
        }
    }

    pub fn opt<T>(&mut self, f: impl FnOnce(&mut Self) -> R<T>) -> R<Option<T>> {
        if self.bool()? {
            f(self).map(Some)
        } else {
            Ok(None)
        }
    }

    /// What [`write_diagnostic_head`] wrote.
    pub fn diagnostic_head(&mut self) -> R<Diagnostic> {
        let severity = match self.u8()? {
            0 => Severity::Error,
            1 => Severity::Warning,
            2 => Severity::Info,
            _ => return Err(()),
        };
        let code = self.string()?;
        // An unknown code means another terraci wrote this.
        let code = crate::diagnostic::Code::named(&code).ok_or(())?;
        let mut d = Diagnostic::new(severity, code, String::new());
        d.module = self.opt(|r| r.string())?;
        d.file = self.opt(|r| r.string())?;
        d.line = self.opt(|r| r.u32())?;
        d.column = self.opt(|r| r.u32())?;
        d.message = self.string()?;
        Ok(d)
    }

    pub fn item(&mut self) -> R<ItemPath> {
        Ok(ItemPath {
            block: self.names()?,
            attr: self.names()?,
        })
    }

    pub fn expr(&mut self, depth: u32) -> R<Expr> {
        if depth > MAX_DEPTH {
            return Err(());
        }
        let d = depth + 1;
        let id = NodeId(self.u32()?);
        let kind = match self.u8()? {
            0 => ExprKind::Null,
            1 => ExprKind::Bool(false),
            2 => ExprKind::Bool(true),
            3 => ExprKind::Number(Num::new(f64::from_bits(self.fixed_u64()?))),
            4 => ExprKind::String(self.name()?),
            5 => ExprKind::Template(self.parts(d)?),
            6 => ExprKind::Array(self.exprs(d)?),
            7 => {
                let n = self.len()?;
                let mut entries = Vec::with_capacity(n);
                for _ in 0..n {
                    let key = match self.u8()? {
                        0 => ObjectKey::Ident(self.name()?),
                        1 => ObjectKey::Expr(self.expr(d)?),
                        _ => return Err(()),
                    };
                    entries.push((key, self.expr(d)?));
                }
                ExprKind::Object(entries)
            }
            8 => ExprKind::Variable(self.name()?),
            9 => {
                let root = self.expr(d)?;
                let n = self.len()?;
                let mut ops = Vec::with_capacity(n);
                for _ in 0..n {
                    ops.push(match self.u8()? {
                        0 => Traverser::Attr(self.name()?),
                        1 => Traverser::Index(self.expr(d)?),
                        2 => Traverser::LegacyIndex(self.u64()?),
                        3 => Traverser::AttrSplat,
                        4 => Traverser::FullSplat,
                        _ => return Err(()),
                    });
                }
                ExprKind::Traversal(Box::new(root), ops)
            }
            10 => crate::syntax::Call::kind(self.name()?, self.exprs(d)?, self.bool()?),
            11 => ExprKind::Conditional(
                Box::new(self.expr(d)?),
                Box::new(self.expr(d)?),
                Box::new(self.expr(d)?),
            ),
            12 => {
                let op = match self.u8()? {
                    0 => UnaryOp::Neg,
                    1 => UnaryOp::Not,
                    _ => return Err(()),
                };
                ExprKind::Unary(op, Box::new(self.expr(d)?))
            }
            13 => {
                let op = *BINARY.get(self.u8()? as usize).ok_or(())?;
                ExprKind::Binary(op, Box::new(self.expr(d)?), Box::new(self.expr(d)?))
            }
            14 => ExprKind::For(Box::new(ForExpr {
                key_var: self.opt(|r| r.name())?,
                value_var: self.name()?,
                collection: self.expr(d)?,
                key_expr: self.opt(|r| r.expr(d))?,
                value_expr: self.expr(d)?,
                cond: self.opt(|r| r.expr(d))?,
                grouping: self.bool()?,
            })),
            15 => ExprKind::Paren(Box::new(self.expr(d)?)),
            _ => return Err(()),
        };
        Ok(Expr { id, kind })
    }

    pub fn exprs(&mut self, depth: u32) -> R<Vec<Expr>> {
        let n = self.len()?;
        exactly(n, || self.expr(depth))
    }

    pub fn parts(&mut self, depth: u32) -> R<Vec<TemplatePart>> {
        if depth > MAX_DEPTH {
            return Err(());
        }
        let d = depth + 1;
        let n = self.len()?;
        let mut parts = Vec::with_capacity(n);
        for _ in 0..n {
            parts.push(match self.u8()? {
                0 => TemplatePart::Literal(self.name()?),
                1 => TemplatePart::Interpolation(self.expr(d)?),
                2 => TemplatePart::If {
                    cond: self.expr(d)?,
                    then: self.parts(d)?,
                    otherwise: self.parts(d)?,
                },
                3 => TemplatePart::For {
                    key_var: self.opt(|r| r.name())?,
                    value_var: self.name()?,
                    collection: self.expr(d)?,
                    body: self.parts(d)?,
                },
                _ => return Err(()),
            });
        }
        Ok(parts)
    }
}

/// `n` items read one after the other, in a vector of exactly `n` (collecting `Result`s
/// does not know the length, and its growth slack was a third of the decoded facts).
pub fn exactly<T>(n: usize, mut item: impl FnMut() -> R<T>) -> R<Vec<T>> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(item()?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::system::MemorySystem;

    fn key(secret: &str) -> Option<CacheKey> {
        let fs = MemorySystem::new();
        fs.set_env(CACHE_SECRET_VAR, secret);
        cache_key(&fs)
    }

    /// A file as the writers make one: body, checksum, and a MAC under `key` if any.
    fn sealed_file(body: &[u8], key: Option<&CacheKey>) -> Vec<u8> {
        let sum = seal_parts(&[body]);
        let mut file = [body, &sum[..]].concat();
        let mac = mac_trailer(key, &[body, &sum]);
        file.extend_from_slice(&mac);
        file
    }

    #[test]
    fn a_signed_file_is_used_only_under_its_secret_and_unchanged() {
        assert!(key("").is_none(), "an empty secret is no secret");
        let (ours, theirs) = (key("protected"), key("fork"));
        let signed = sealed_file(b"facts", ours.as_ref());
        let plain = sealed_file(b"facts", None);
        assert_eq!(signed.len(), plain.len() + 48);
        // Without a secret, a signature is dropped unchecked; a plain file is as it is.
        assert_eq!(unseal(None, &signed), Ok(plain.len()));
        assert_eq!(unseal(None, &plain), Ok(plain.len()));
        assert_eq!(unseal(ours.as_ref(), &signed), Ok(plain.len()));
        assert_eq!(
            unseal(ours.as_ref(), &plain),
            Err("not signed with the secret in TERRACI_CACHE_SECRET")
        );
        let wrong = "its signature does not match the secret in TERRACI_CACHE_SECRET: \
                     written without it, or changed since";
        assert_eq!(unseal(theirs.as_ref(), &signed), Err(wrong));
        for at in [0, 5, plain.len() + 3, signed.len() - 1] {
            let mut changed = signed.clone();
            changed[at] ^= 1;
            assert!(unseal(ours.as_ref(), &changed).is_err(), "byte {at}");
        }
        assert_eq!(format!("{:?}", ours.expect("a key")), "CacheKey(..)");
    }
}
