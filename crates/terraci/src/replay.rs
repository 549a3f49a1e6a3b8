//! Run replay: a repeat `generate` whose inputs are all unchanged prints and writes what
//! the last run did, without reading a single Terraform file.
//!
//! Input: the command line, the working directory, the environment variables `generate`
//! consults, the config file's and the `--var-file` files' stamps and bytes, the running
//! build's identity (together the run's *key*), and the walk of the project with a [`Stamp`] for
//! every file terraci would read. Output: `run.bin` in the cache directory, one record
//! of the last successful run (key, file stamps, output text, stderr text), and on a later
//! run with the same key and the same stamps, that run's output replayed byte for byte.
//!
//! Why this sits in front of the fact cache: with every fact cached, a run of 10,000
//! modules still reads 30,000 files, hashes them, and evaluates, resolves, plans and
//! renders everything again. A run whose inputs have not changed can only produce the
//! same bytes, and finding out that nothing changed costs one walk and one `stat` per
//! file, as `git status` does.
//!
//! Soundness: the key holds everything besides the files that the output depends on, in
//! full (not hashed); the files are compared by path and stamp. A stamp is recorded from
//! the open file before its bytes are read, and only if the file had last changed clearly
//! before the run began ([`Stamp::settled_before`]); a run with any unsettled file, or
//! whose evaluation read files with `file`/`fileset`, or which did not succeed, records
//! nothing (and removes no earlier record, which its
//! key or stamps no longer match). A `generate --changed-only` run also records the
//! change set it used and the repository's fingerprint taken before git computed it
//! ([`terraci_vcs::changed_files_unless`]): while the fingerprint is unchanged, git is not
//! asked and the project is not walked (the fingerprint covers every directory); when
//! it changed, git is asked and the run replays only if the answer is the recorded one.
//! The record ends in a checksum; a damaged one is ignored with a notice. The cache
//! notices a run prints are left out of its record: they are about that run.
//!
//! A fresh clone (CI) gives every file a new stamp: a recorded file also matches when
//! git's index holds it clean with the blob id the record holds for it
//! ([`crate::git_index`]), and the config and `--var-file`s are keyed by their bytes
//! alone (their stamps only make sure they did not change during the run). With
//! `TERRACI_CACHE_SECRET` set, a record must carry a MAC under it
//! ([`terraci_db::store::unseal`]).

use camino::{Utf8Path, Utf8PathBuf};
use rayon::prelude::*;

use terraci_db::store::{
    begin_file, open_file, put_blob, put_bytes, put_opt, put_stamp, put_str, put_u64, seal_parts,
    CacheSettings,
};
use terraci_db::system::{Stamp, System};
use terraci_engine::discover::{walk, Layout};

const MAGIC: &[u8; 16] = b"terraci-run\0\0\0\0\0";
/// Bump when the layout of the record changes.
const FORMAT: u64 = 7;
pub(crate) const FILE_NAME: &str = "run.bin";

/// The record file of `command`: one per command, so that a pre-commit hook's `validate`
/// and an editor's `generate` do not replace each other's record (`generate
/// --changed-only` is `generate-changed`, beside the full run's).
fn record_name(command: &str) -> String {
    if command == "generate" {
        FILE_NAME.to_owned()
    } else {
        format!("run-{command}.bin")
    }
}

/// Every environment variable that `generate` reads through the `System`: provider
/// selection, the CI variables that pick `--changed-only`'s base, and `NO_COLOR`. The
/// key holds each one's value; a test records the variables a run reads and requires
/// each of them to be here. (The git variables, `HOME` and `XDG_CONFIG_HOME`, which
/// decide what git reads, are in the repository's fingerprint instead, which a
/// `--changed-only` record holds and checks: [`terraci_vcs::Fingerprinting`].)
pub(crate) const ENV_VARS: [&str; 7] = [
    "TERRACI_PROVIDER",
    "GITHUB_ACTIONS",
    "GITLAB_CI",
    "CI_SERVER_URL",
    // `vcs::ENV_VARS` (a test keeps them the same).
    "CI_MERGE_REQUEST_DIFF_BASE_SHA",
    "GITHUB_BASE_REF",
    "NO_COLOR",
];

/// Everything a `generate` run depends on besides the project's files, in full.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RunKey {
    bytes: Vec<u8>,
    /// The key holds the id of the project's whole contents ([`System::contents_id`]).
    contents: bool,
    /// The config and `--var-file`s with their stamps when the key was made, which must
    /// have settled like the files and be the same when the run is recorded (the key
    /// holds their bytes, not their stamps: a fresh clone gives them new ones).
    inputs: Vec<(Utf8PathBuf, Stamp)>,
    root: Utf8PathBuf,
    record: Utf8PathBuf,
    /// Where writing the record starts following no symlink ([`CacheSettings::root`]).
    write_root: Utf8PathBuf,
}

/// A file a recorded run read: path, stamp, blob ([`Record::files`]).
pub(crate) type RecordedFile = (String, Option<Stamp>, Option<terraci_db::files::BlobId>);

/// The files a run read, with the blob git's index vouched for where it was read
/// ([`crate::git_index::LazyIndex::if_read`]): what a run record keeps.
pub(crate) type RunFiles = Vec<RecordedFile>;

/// What [`RunKey::lookup`] found.
#[derive(Debug)]
pub(crate) enum Lookup {
    /// The run to replay, if its change set (`--changed-only`) is the current one; the
    /// walk of the project if one was made, for discovery when it is not.
    Hit(Record, Option<Layout>),
    /// Nothing to replay; the walk of the project if one was made.
    Miss(Option<Layout>),
}

/// A recorded run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    /// Project-relative path of every file the run read, sorted by path, with its stamp
    /// (if it had settled) and the blob git's index vouched for (if it was read): at
    /// least one of them. None when the key names the project's whole contents and the
    /// run read only files of them ([`RunKey::save`]).
    pub files: Vec<RecordedFile>,
    /// `--changed-only`: the change set the run used ([`encode_changes`]); the run
    /// replays only when git gives the same one again.
    pub changes: Option<Vec<u8>>,
    /// `--changed-only`: the repository's fingerprint when git computed that change set
    /// ([`terraci_vcs::changed_files_unless`]); while it is unchanged, git is not asked.
    pub(crate) fingerprint: Option<Vec<u8>>,
    /// `--changed-only` with a fingerprint: the walk of the project the run used (no
    /// walk diagnostics), which is the walk again while the fingerprint check finds only
    /// files' contents changed ([`terraci_vcs::Moved`]).
    pub(crate) layout: Option<terraci_engine::discover::ModuleDirs>,
    pub(crate) output: String,
    pub(crate) stderr: Vec<u8>,
}

/// A change set's paths as a record holds them (what else the selection takes from the
/// change flags and the config is in the key).
pub(crate) fn encode_changes(files: &[String], submodules: &[String]) -> Vec<u8> {
    let mut out = Vec::new();
    for list in [files, submodules] {
        put_u64(&mut out, list.len() as u64);
        for path in list {
            put_str(&mut out, path);
        }
    }
    out
}

/// The paths [`encode_changes`] wrote: (files, submodules).
pub(crate) fn decode_changes(bytes: &[u8]) -> Option<(Vec<String>, Vec<String>)> {
    let mut r = terraci_db::store::Reader::over(bytes);
    let mut lists = [Vec::new(), Vec::new()];
    for list in &mut lists {
        let n = r.len().ok()?;
        for _ in 0..n {
            list.push(r.string().ok()?);
        }
    }
    let [files, submodules] = lists;
    r.at_end().then_some((files, submodules))
}

impl RunKey {
    /// The key of a run of `command` (`generate`, `validate`, ...), or `None` when the
    /// run cannot be replayed (the binary cannot be stamped, a `--var-file` cannot be
    /// read). `consumed` is the parsed command line that the run acts on, in full (flags
    /// set through the environment included); `argv` is the command line as typed, which
    /// the output's header shows. `extra`: what else the command's output depends on
    /// (the checked-out commit of a `local-exec --dry-run`).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        system: &dyn System,
        settings: &CacheSettings,
        command: &str,
        root: &Utf8Path,
        config_file: Option<&Utf8Path>,
        var_files: &[Utf8PathBuf],
        argv: &[String],
        consumed: &str,
        extra: &[String],
        max_file_size: u64,
    ) -> Option<RunKey> {
        let mut bytes = Vec::new();
        put_bytes(&mut bytes, &system.program_id()?);
        put_str(&mut bytes, command);
        put_u64(&mut bytes, extra.len() as u64);
        for e in extra {
            put_str(&mut bytes, e);
        }
        put_str(&mut bytes, system.current_dir().ok()?.as_str());
        put_str(&mut bytes, root.as_str());
        let contents = system.contents_id();
        put_opt(&mut bytes, &contents, |out, id| put_str(out, id));
        put_u64(&mut bytes, argv.len() as u64);
        for arg in argv {
            put_str(&mut bytes, arg);
        }
        put_str(&mut bytes, consumed);
        // `--color auto` colours the replayed stderr as the recorded run did only if
        // stderr is a terminal then too.
        bytes.push(u8::from(system.stderr_is_terminal()));
        for name in ENV_VARS {
            match system.env_var(name) {
                Some(v) => {
                    bytes.push(1);
                    put_str(&mut bytes, &v);
                }
                None => bytes.push(0),
            }
        }
        // The config and `--var-file`s are read again by the run itself: their stamps,
        // taken before these reads, must be theirs still when the run is recorded
        // ([`RunKey::save`]), so a run that read a newer version is never recorded
        // under this one. The key holds their bytes, in full.
        let mut inputs = Vec::new();
        let configs = config_file.into_iter().map(|p| (p, true));
        for (path, is_config) in configs.chain(var_files.iter().map(|p| (p.as_path(), false))) {
            put_str(&mut bytes, path.as_str());
            let abs = system.absolute(path).ok()?;
            let stamp = system.stamp(&abs)?;
            inputs.push((abs.clone(), stamp));
            // The config is the repository's: read only as the run itself will read it.
            let read = if is_config {
                terraci_db::config::read_config_bytes(system, &abs)
                    .map(|(bytes, _)| bytes)
                    .map_err(|_| ())
            } else {
                // As the run reads it: never blocking, never out of the repository.
                let repository = terraci_db::system::ReadPolicy::new(
                    system,
                    &terraci_vcs::repository_root(system, root),
                    max_file_size,
                );
                terraci_db::system::read_named_file(system, &repository, &abs).map_err(|_| ())
            };
            match read {
                Ok(content) => {
                    put_u64(&mut bytes, content.len() as u64);
                    bytes.extend_from_slice(&content);
                }
                Err(_) => return None,
            }
        }
        Some(RunKey {
            bytes,
            contents: contents.is_some(),
            inputs,
            root: root.to_owned(),
            record: settings.dir.join(record_name(command)),
            write_root: settings.root.clone(),
        })
    }

    /// git's index of the project, to read if stamps miss ([`RunKey::check`]).
    pub(crate) fn index(&self) -> std::sync::Arc<crate::git_index::LazyIndex> {
        crate::git_index::LazyIndex::new(&self.root)
    }

    /// Where the record is kept.
    pub(crate) fn record_path(&self) -> &Utf8Path {
        &self.record
    }

    /// The cache directory the record lives in.
    pub(crate) fn cache_dir(&self) -> &Utf8Path {
        self.record.parent().unwrap_or(&self.record)
    }

    /// The recorded run, if this key's run was recorded and no file terraci would read
    /// has changed since (stamps compared on all cores); otherwise the walk of the
    /// project when one was made, for discovery to reuse. `Err` is a notice: a record was
    /// there but damaged.
    pub(crate) fn lookup(
        &self,
        system: &dyn System,
        index: &crate::git_index::LazyIndex,
    ) -> Result<Lookup, String> {
        Ok(match self.read(system)? {
            Some(record) => self.check(system, record, index),
            None => Lookup::Miss(None),
        })
    }

    /// The recorded run of this key, if there is one, unchecked. `Err` is a notice: a
    /// record was there but damaged.
    pub(crate) fn read(&self, system: &dyn System) -> Result<Option<Record>, String> {
        // The key first: a record of another command line (a `--changed-only` run's
        // beside a full run's, each many megabytes) is not read whole. A head that
        // cannot be parsed is left to the whole read, which says what is wrong.
        let head_len = begin_file(MAGIC, FORMAT, 0).len() + 10 + self.bytes.len();
        let Ok(head) = system.read_head(&self.record, head_len) else {
            return Ok(None);
        };
        if holds_another_key(&head, &self.bytes) {
            return Ok(None);
        }
        let Ok(blob) = system.read(&self.record) else {
            return Ok(None);
        };
        let notice = |why| {
            format!(
                "ignoring the run record `{}` ({why}); rebuilding it",
                self.record
            )
        };
        let body = terraci_db::store::unseal(terraci_db::store::cache_key(system).as_ref(), &blob)
            .map_err(notice)?;
        let (key, record) = decode(&blob[..body]).map_err(notice)?;
        Ok((key == self.bytes).then_some(record))
    }

    /// [`RunKey::lookup`] of a record already read: walks the project and compares. A
    /// file whose stamp is not the recorded one is the recorded version still when git's
    /// index holds the recorded blob for it with its stamp now (a fresh clone); the index
    /// is read for that only when more than a few files missed ([`LazyIndex`]: after an
    /// edit in a kept working tree, the edit is why).
    ///
    /// [`LazyIndex`]: crate::git_index::LazyIndex
    pub(crate) fn check(
        &self,
        system: &dyn System,
        record: Record,
        index: &crate::git_index::LazyIndex,
    ) -> Lookup {
        // The key holds the id of every file the project holds, and the run read only
        // such files (their stamps are object ids): nothing to walk or compare.
        if self.contents
            && record
                .files
                .iter()
                .all(|(_, stamp, _)| stamp.is_some_and(|s| s.object().is_some()))
        {
            return Lookup::Hit(record, None);
        }
        let layout = walk(system, &self.root);
        if !layout.diagnostics.is_empty() {
            return Lookup::Miss(Some(layout));
        }
        let mut paths: Vec<&str> = layout.files().collect();
        if paths.len() != record.files.len() {
            return Lookup::Miss(Some(layout));
        }
        paths.sort_unstable();
        if paths
            .iter()
            .zip(&record.files)
            .any(|(path, (recorded, _, _))| path != recorded)
        {
            return Lookup::Miss(Some(layout));
        }
        let same = self.same_files(system, &record.files, index);
        if same {
            Lookup::Hit(record, Some(layout))
        } else {
            Lookup::Miss(Some(layout))
        }
    }

    /// Whether every file the recorded run read has its recorded stamp still (on all
    /// cores), without walking the project: enough when the repository's fingerprint
    /// ([`terraci_vcs::changed_files_unless`]), which covers every directory of the
    /// project, is unchanged too.
    pub(crate) fn files_unchanged(&self, system: &dyn System, record: &Record) -> bool {
        record
            .files
            .par_iter()
            .with_min_len(64)
            .all(|(path, stamp, _)| {
                stamp.is_some() && system.stamp(&self.root.join(path)).as_ref() == stamp.as_ref()
            })
    }

    /// Whether every recorded file is the version recorded: by its stamp, else by the
    /// blob git's index vouches for (see [`RunKey::check`]).
    fn same_files(
        &self,
        system: &dyn System,
        files: &[RecordedFile],
        index: &crate::git_index::LazyIndex,
    ) -> bool {
        let now: Vec<Option<Stamp>> = files
            .par_iter()
            .with_min_len(64)
            .map(|(path, _, _)| system.stamp(&self.root.join(path)))
            .collect();
        let missed: Vec<usize> = (0..files.len())
            .filter(|&i| now[i].is_none() || files[i].1 != now[i])
            .collect();
        if missed.is_empty() {
            return true;
        }
        if !index.worth_reading(missed.len(), files.len()) {
            return false;
        }
        missed.par_iter().all(|&i| {
            let (path, _, blob) = &files[i];
            match (blob, &now[i]) {
                (Some(blob), Some(now)) => index.clean_blob(path, now) == Some(*blob),
                _ => false,
            }
        })
    }

    /// Records a successful run. `files` are the project-relative paths the run read with
    /// their stamps and the blobs git's index vouched for; a run with a file that has
    /// neither a settled stamp nor a blob is not recorded, nor one whose config or
    /// `--var-file` changed since the key was made. `started` must precede every stamp:
    /// the moment before the key was made.
    pub(crate) fn save(
        &self,
        system: &dyn System,
        started: std::time::SystemTime,
        mut files: RunFiles,
        changes: Option<ChangedOnly<'_>>,
        output: &[&[u8]],
        stderr: &[u8],
    ) -> std::io::Result<bool> {
        // A run whose key names the project's whole contents, and which read only files
        // of those contents (each stamped with its object id), replays on its key alone
        // ([`RunKey::check`]): its files are not listed.
        if lists_no_files(self.contents, files.iter().map(|(_, stamp, _)| stamp)) {
            files = Vec::new();
        }
        let settled = |s: &Stamp| s.settled_before(started);
        for (_, stamp, _) in &mut files {
            *stamp = stamp.filter(settled);
        }
        let inputs_held = self
            .inputs
            .iter()
            .all(|(path, stamp)| settled(stamp) && system.stamp(path).as_ref() == Some(stamp));
        if !files.iter().all(|(_, s, b)| s.is_some() || b.is_some()) || !inputs_held {
            return Ok(false);
        }
        files.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let capacity = files.len() * 96 + self.bytes.len() + 64;
        let mut out = begin_file(MAGIC, FORMAT, capacity);
        put_bytes(&mut out, &self.bytes);
        put_u64(&mut out, files.len() as u64);
        for (path, stamp, blob) in &files {
            put_str(&mut out, path);
            put_opt(&mut out, stamp, put_stamp);
            put_opt(&mut out, blob, put_blob);
        }
        match changes {
            Some(ChangedOnly {
                changes,
                fingerprint,
                layout,
            }) => {
                out.push(1);
                put_bytes(&mut out, changes);
                put_opt(&mut out, &fingerprint, |out, f| put_bytes(out, f));
                let layout = fingerprint.and(layout);
                put_opt(&mut out, &layout, |out, dirs| put_layout(out, dirs));
            }
            None => out.push(0),
        }
        // The output is written from where it is, not copied into the record's buffer
        // (it is most of the record: 20 MB at 10,000 modules).
        put_u64(
            &mut out,
            output.iter().map(|p| p.len()).sum::<usize>() as u64,
        );
        let mut tail = Vec::with_capacity(stderr.len() + 24);
        put_bytes(&mut tail, stderr);
        let mut parts: Vec<&[u8]> = Vec::with_capacity(output.len() + 3);
        parts.push(&out);
        parts.extend_from_slice(output);
        parts.push(&tail);
        let sum = seal_parts(&parts);
        parts.push(&sum);
        let mac =
            terraci_db::store::mac_trailer(terraci_db::store::cache_key(system).as_ref(), &parts);
        parts.push(&mac);
        system.replace_beneath(&self.write_root, &self.record, &parts)?;
        Ok(true)
    }
}

/// What a `--changed-only` run records besides what every run does.
#[derive(Debug, Clone, Copy)]
pub struct ChangedOnly<'a> {
    /// The change set ([`encode_changes`]).
    pub changes: &'a [u8],
    /// The repository's fingerprint that change set was taken with.
    pub(crate) fingerprint: Option<&'a [u8]>,
    /// The walk of the project (kept only with a fingerprint).
    pub(crate) layout: Option<&'a terraci_engine::discover::ModuleDirs>,
}

/// Each directory with its files' paths; a file's kind follows from its name.
pub(crate) fn put_layout(out: &mut Vec<u8>, dirs: &terraci_engine::discover::ModuleDirs) {
    put_u64(out, dirs.len() as u64);
    for (dir, files) in dirs {
        put_str(out, dir);
        put_u64(out, files.len() as u64);
        for (path, _) in files {
            put_str(out, path);
        }
    }
}

pub(crate) fn read_layout(
    r: &mut terraci_db::store::Reader<'_, ()>,
) -> terraci_db::store::R<terraci_engine::discover::ModuleDirs> {
    let n = r.len()?;
    let mut dirs = Vec::with_capacity(n);
    for _ in 0..n {
        let dir = r.string()?;
        let count = r.len()?;
        let mut files = Vec::with_capacity(count);
        for _ in 0..count {
            let path = r.string()?;
            let name = path.rsplit('/').next().unwrap_or(&path);
            let kind = terraci_db::files::FileKind::of(name).ok_or(())?;
            files.push((path, kind));
        }
        dirs.push((dir, files));
    }
    Ok(dirs)
}

/// Whether a record lists no files: its key names the project's whole contents
/// (`contents`) and every file read (`stamps`) is stamped with its object id, so the key
/// alone replays it ([`RunKey::save`], [`RunKey::check`]).
pub(crate) fn lists_no_files<'a>(
    contents: bool,
    mut stamps: impl Iterator<Item = &'a Option<Stamp>>,
) -> bool {
    contents && stamps.all(|stamp| stamp.is_some_and(|s| s.object().is_some()))
}

/// The key bytes and the record, from a whole `run.bin`.
/// Whether the first bytes of a record hold a key other than `key` under this build's
/// header; `false` when that cannot be told (the whole read then says what is wrong).
fn holds_another_key(head: &[u8], key: &[u8]) -> bool {
    let mut expected = begin_file(MAGIC, FORMAT, key.len() + 64);
    let header = expected.len();
    put_bytes(&mut expected, key);
    head.len() >= expected.len()
        && head[..header] == expected[..header]
        && head[..expected.len()] != expected[..]
}

fn decode(blob: &[u8]) -> Result<(Vec<u8>, Record), &'static str> {
    let mut r = open_file(blob, MAGIC, FORMAT, "not a terraci run record")?;
    let body = (|| -> terraci_db::store::R<(Vec<u8>, Record)> {
        let key = r.bytes()?.to_vec();
        // Each entry takes at least six bytes, so `len` bounds the count by the rest.
        let n = r.len()?;
        let mut files = Vec::with_capacity(n);
        for _ in 0..n {
            let path = r.string()?;
            let stamp = r.opt_with(terraci_db::store::Reader::stamp)?;
            let blob = r.opt_with(terraci_db::store::Reader::blob)?;
            if stamp.is_none() && blob.is_none() {
                return Err(());
            }
            files.push((path, stamp, blob));
        }
        let (changes, fingerprint, layout) = match r.u8()? {
            0 => (None, None, None),
            1 => {
                let changes = r.bytes()?.to_vec();
                let fingerprint = r.opt_with(|r| Ok(r.bytes()?.to_vec()))?;
                let layout = r.opt_with(read_layout)?;
                (Some(changes), fingerprint, layout)
            }
            _ => return Err(()),
        };
        let output = r.string()?;
        let stderr = r.bytes()?.to_vec();
        Ok((
            key,
            Record {
                files,
                changes,
                fingerprint,
                layout,
                output,
                stderr,
            },
        ))
    })();
    match body {
        Ok(decoded) if r.at_end() => Ok(decoded),
        _ => Err("corrupt entry"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn run_record_name_is_the_cache_s() {
        assert_eq!(terraci_db::store::RUN_RECORD_FILE, super::FILE_NAME);
    }

    use super::*;

    fn stamp(ino: u64) -> Stamp {
        Stamp {
            dev: 1,
            ino,
            len: 10,
            mtime_ns: 5,
            ctime_ns: 6,
        }
    }

    /// The key of a `generate` in `/p` with the command line `argv`.
    fn generate_key(fs: &dyn System, settings: &CacheSettings, argv: &[String]) -> RunKey {
        RunKey::new(
            fs,
            settings,
            "generate",
            "/p".into(),
            None,
            &[],
            argv,
            "",
            &[],
            terraci_db::system::DEFAULT_MAX_FILE_SIZE,
        )
        .expect("the memory system stamps its program")
    }

    #[test]
    fn a_record_survives_the_round_trip_and_damage_is_refused() {
        let fs = terraci_db::system::MemorySystem::new();
        let settings = CacheSettings {
            dir: "/p/.terraci/cache".into(),
            root: "/p".into(),
        };
        let key = generate_key(&fs, &settings, &["terraci".into()]);
        let blob_id = terraci_db::files::BlobId([7; 20]);
        let files = vec![
            ("b/main.tf".to_owned(), Some(stamp(2)), None),
            ("a/main.tf".to_owned(), Some(stamp(1)), Some(blob_id)),
        ];
        let layout = vec![
            (
                "a".to_owned(),
                vec![
                    ("a/main.tf".to_owned(), terraci_db::files::FileKind::Native),
                    (
                        "a/terraform.tfvars".to_owned(),
                        terraci_db::files::FileKind::VarsNative,
                    ),
                ],
            ),
            (
                "b".to_owned(),
                vec![(
                    "b/main.tf.json".to_owned(),
                    terraci_db::files::FileKind::Json,
                )],
            ),
        ];
        assert!(key
            .save(
                &fs,
                fs.now(),
                files,
                Some(ChangedOnly {
                    changes: b"changes",
                    fingerprint: Some(b"fingerprint"),
                    layout: Some(&layout),
                }),
                &[b"jobs: ", b"{}\n"],
                b"warning\n"
            )
            .unwrap());
        let blob = fs.read(&settings.dir.join(FILE_NAME)).unwrap();
        let (k, record) = decode(&blob).unwrap();
        assert_eq!(k, key.bytes);
        assert_eq!(
            record,
            Record {
                files: vec![
                    ("a/main.tf".to_owned(), Some(stamp(1)), Some(blob_id)),
                    ("b/main.tf".to_owned(), Some(stamp(2)), None),
                ],
                changes: Some(b"changes".to_vec()),
                fingerprint: Some(b"fingerprint".to_vec()),
                layout: Some(layout),
                output: "jobs: {}\n".to_owned(),
                stderr: b"warning\n".to_vec(),
            }
        );
        for cut in [0, 10, 20, blob.len() / 2, blob.len() - 1] {
            assert!(decode(&blob[..cut]).is_err(), "cut at {cut}");
        }
        let mut flipped = blob.clone();
        flipped[40] ^= 1;
        assert!(decode(&flipped).is_err());
    }

    #[test]
    fn a_run_with_an_unsettled_or_unstamped_file_is_not_recorded() {
        let fs = terraci_db::system::MemorySystem::new();
        let settings = CacheSettings {
            dir: "/c".into(),
            root: "/c".into(),
        };
        let key = generate_key(&fs, &settings, &[]);
        let fresh = Stamp {
            ctime_ns: 1_000_000_000 * 1_000_000_000 - 1_000,
            ..stamp(1)
        };
        let saved = key
            .save(
                &fs,
                fs.now(),
                vec![("a.tf".into(), Some(fresh), None)],
                None,
                &[],
                b"",
            )
            .unwrap();
        assert!(!saved, "changed a microsecond before the run began");
        let saved = key
            .save(
                &fs,
                fs.now(),
                vec![("a.tf".into(), None, None)],
                None,
                &[],
                b"",
            )
            .unwrap();
        assert!(!saved, "no stamp");
        assert!(!fs.is_file("/c/run.bin".into()));
    }

    mod runs {
        use clap::Parser as _;

        use terraci_db::system::{MemorySystem, System as _};

        const CONFIG: &str = "structure:\n  pattern: \"{env}/{module}\"\n";
        const VPC: &str = "terraform {\n  backend \"s3\" {\n    bucket = \"b\"\n    key    = \"stage/vpc/terraform.tfstate\"\n  }\n}\n";
        const DNS: &str = "terraform {\n  backend \"s3\" {\n    bucket = \"b\"\n    key    = \"stage/dns/terraform.tfstate\"\n  }\n}\n";
        const EKS: &str = "data \"terraform_remote_state\" \"net\" {\n  backend = \"s3\"\n  config = {\n    bucket = \"b\"\n    key    = \"stage/vpc/terraform.tfstate\"\n  }\n}\n";

        fn project() -> MemorySystem {
            crate::testing::memory_project(&[
                (".terraci.yaml", CONFIG),
                ("stage/vpc/main.tf", VPC),
                ("stage/dns/main.tf", DNS),
                ("stage/eks/main.tf", EKS),
            ])
        }

        struct Run {
            code: u8,
            file: String,
            stderr: String,
            /// Whether the run was not replayed: it read a Terraform file or the fact
            /// cache (a run after an edit reads only the files the cache does not know by
            /// their stamps, so reading none of them is not a replay).
            ran: bool,
            /// The Terraform files read, in order.
            terraform_reads: Vec<String>,
        }

        fn generate(fs: &MemorySystem, extra: &[&str]) -> Run {
            run(
                fs,
                &[&["generate", "-d", "/p", "-o", "/out.yml"], extra].concat(),
            )
        }

        /// A command line; `file` is `/out.yml` (for `-o /out.yml`), else stdout.
        fn run(fs: &MemorySystem, args: &[&str]) -> Run {
            let argv: Vec<String> = std::iter::once("terraci")
                .chain(args.iter().copied())
                .map(|s| s.to_owned())
                .collect();
            let cli = crate::cli::Cli::try_parse_from(&argv).expect("valid command line");
            let (mut out, mut err) = (Vec::new(), Vec::new());
            fs.take_reads();
            let code = crate::commands::run(
                cli,
                &mut crate::commands::Io {
                    system: fs,
                    stdout: &mut out,
                    stderr: &mut err,
                    argv,
                },
            );
            let reads = fs.take_reads();
            let read_cache = reads.iter().any(|p| p.as_str().ends_with("/facts.bin"));
            let terraform_reads: Vec<String> = reads
                .into_iter()
                .filter(|p| p.as_str().ends_with(".tf"))
                .map(String::from)
                .collect();
            let ran = read_cache || !terraform_reads.is_empty();
            let file = if args.contains(&"/out.yml") {
                fs.read("/out.yml".into()).unwrap_or_default()
            } else {
                out
            };
            Run {
                code,
                file: String::from_utf8(file).unwrap(),
                stderr: String::from_utf8(err).unwrap(),
                ran,
                terraform_reads,
            }
        }

        /// What a run without any cache writes, its header's command line aside.
        fn fresh(fs: &MemorySystem, extra: &[&str]) -> String {
            let run = generate(fs, &[extra, &["--no-cache"]].concat());
            assert_eq!(run.code, 0, "{}", run.stderr);
            run.file.replace(" --no-cache", "")
        }

        #[test]
        fn a_repeat_generate_reads_no_terraform_file_and_writes_the_same_bytes() {
            let fs = project();
            let first = generate(&fs, &[]);
            assert_eq!(first.code, 0, "{}", first.stderr);
            assert!(first.ran);
            assert!(fs.is_file("/p/.terraci/cache/run.bin".into()));
            fs.remove_file("/out.yml");
            let again = generate(&fs, &[]);
            assert_eq!(again.code, 0);
            assert!(!again.ran, "replayed without reading a module");
            assert_eq!(again.file, first.file);
            assert_eq!(again.stderr, first.stderr);
            assert_eq!(again.file, fresh(&fs, &[]));
        }

        #[test]
        fn after_an_edit_a_file_the_fact_cache_knows_by_its_stamp_is_not_read() {
            let fs = project();
            // A warning with a source line in a file that will not be edited.
            let warned = EKS.replace("\"stage/vpc/terraform.tfstate\"", "nosuch(\"x\")");
            fs.write_file("/p/stage/dns/main.tf", format!("{DNS}{warned}"));
            let first = generate(&fs, &[]);
            assert_eq!(first.code, 0, "{}", first.stderr);
            assert!(
                first.stderr.contains("stage/dns/main.tf:11:"),
                "{}",
                first.stderr
            );
            fs.write_file("/p/stage/vpc/main.tf", format!("{VPC}# edited\n"));
            let again = generate(&fs, &[]);
            assert_eq!(again.code, 0, "{}", again.stderr);
            // The edited file, and the warned one for its diagnostic's source line only.
            let mut reads = again.terraform_reads.clone();
            reads.sort();
            reads.dedup();
            assert_eq!(reads, ["/p/stage/dns/main.tf", "/p/stage/vpc/main.tf"]);
            assert_eq!(again.stderr, first.stderr);
            assert_eq!(again.file, fresh(&fs, &[]));
            // A same-length edit gives the file another stamp: read, and its new facts used.
            fs.write_file("/p/stage/eks/main.tf", EKS.replace("/vpc/", "/dns/"));
            let edited = generate(&fs, &[]);
            assert!(edited
                .terraform_reads
                .iter()
                .any(|p| p == "/p/stage/eks/main.tf"));
            assert_ne!(edited.file, again.file, "the edge moved");
            assert_eq!(edited.file, fresh(&fs, &[]));
        }

        #[test]
        fn a_read_text_is_let_go_of_after_the_load_and_read_again_for_a_source_line() {
            let fs = project();
            let warned = EKS.replace("\"stage/vpc/terraform.tfstate\"", "nosuch(\"x\")");
            fs.write_file("/p/stage/dns/main.tf", format!("{DNS}{warned}"));
            let count =
                |run: &Run, path: &str| run.terraform_reads.iter().filter(|p| *p == path).count();
            let cold = generate(&fs, &["--no-cache"]);
            assert_eq!(cold.code, 0, "{}", cold.stderr);
            // Discovery reads each file once; the load lets go of the texts, so the
            // warning's source line is read anew.
            assert_eq!(count(&cold, "/p/stage/vpc/main.tf"), 1);
            assert_eq!(count(&cold, "/p/stage/eks/main.tf"), 1);
            assert_eq!(count(&cold, "/p/stage/dns/main.tf"), 2, "{}", cold.stderr);
            assert!(
                cold.stderr.contains("stage/dns/main.tf:11:")
                    && cold.stderr.contains("key    = nosuch(\"x\")"),
                "{}",
                cold.stderr
            );
            // The JSON graph keeps them: it locates every edge's source in its file.
            let graph = run(
                &fs,
                &["--no-cache", "graph", "-d", "/p", "--format", "json"],
            );
            assert_eq!(graph.code, 0, "{}", graph.stderr);
            assert_eq!(count(&graph, "/p/stage/eks/main.tf"), 1);
            assert!(
                graph
                    .file
                    .contains("\"file\": \"stage/eks/main.tf\",\n          \"line\": 5"),
                "{}",
                graph.file
            );
        }

        #[test]
        fn any_change_to_what_the_output_depends_on_reruns_it() {
            let fs = project();
            assert_eq!(generate(&fs, &[]).code, 0);
            type Change<'a> = (&'a str, &'a dyn Fn(&MemorySystem));
            let changes: [Change; 7] = [
                ("the same bytes written again", &|fs| {
                    fs.write_file("/p/stage/vpc/main.tf", VPC)
                }),
                ("an edge moved", &|fs| {
                    fs.write_file("/p/stage/eks/main.tf", EKS.replace("/vpc/", "/dns/"))
                }),
                ("a new module", &|fs| {
                    fs.write_file("/p/stage/rds/main.tf", DNS)
                }),
                ("a deleted module", &|fs| {
                    fs.remove_file("/p/stage/rds/main.tf")
                }),
                ("a changed config", &|fs| {
                    fs.write_file(
                        "/p/.terraci.yaml",
                        format!("{CONFIG}extensions:\n  gitlab:\n    image: alpine\n"),
                    )
                }),
                ("a provider from the environment", &|fs| {
                    fs.set_env("TERRACI_PROVIDER", "github")
                }),
                ("a .gitignore hiding a module", &|fs| {
                    fs.write_file("/p/.gitignore", "stage/dns/\n")
                }),
            ];
            for (what, change) in changes {
                let before = generate(&fs, &[]);
                assert!(!before.ran, "{what}: replayed before the change");
                change(&fs);
                let after = generate(&fs, &[]);
                assert_eq!(after.code, 0, "{what}: {}", after.stderr);
                assert!(after.ran, "{what}: replayed, but it must run again");
                assert_eq!(after.file, fresh(&fs, &[]), "{what}");
            }
            let other = generate(&fs, &["--plan-only"]);
            assert!(other.ran, "another command line is another run");
            assert_eq!(other.file, fresh(&fs, &["--plan-only"]));
            // The key holds the config's bytes, not its stamp (a fresh clone gives it
            // a new one): the same bytes written again are the same run.
            assert!(generate(&fs, &[]).ran, "the record is --plan-only's");
            let same = fs.read("/p/.terraci.yaml".into()).unwrap();
            fs.write_file("/p/.terraci.yaml", same);
            let rewritten = generate(&fs, &[]);
            assert!(!rewritten.ran, "the config rewritten with the same bytes");
            assert_eq!(rewritten.file, fresh(&fs, &[]));
        }

        #[test]
        fn every_read_only_command_is_replayed_and_reruns_after_an_edit() {
            let commands: [&[&str]; 7] = [
                &["validate"],
                &["validate", "--format", "json"],
                &["graph"],
                &["graph", "--format", "json"],
                &["graph", "--stats", "-m", "stage/vpc", "--dependents"],
                &["generate", "--dry-run"],
                &["local-exec", "plan", "--dry-run"],
            ];
            let fs = project();
            for command in commands {
                let args = [&["-d", "/p"], command].concat();
                let cold = run(&fs, &[&["--no-cache"], &args[..]].concat());
                assert_eq!(cold.code, 0, "{command:?}: {}", cold.stderr);
                let first = run(&fs, &args);
                assert!(first.ran, "{command:?}");
                let again = run(&fs, &args);
                assert!(!again.ran, "{command:?}: replayed");
                assert_eq!(again.code, 0);
                assert_eq!(again.file, cold.file, "{command:?}");
                assert_eq!(again.stderr, first.stderr, "{command:?}");
            }
            // Each command keeps its own record (of its last run): the later `generate`
            // and `local-exec` did not replace `validate`'s.
            assert!(!run(&fs, &["-d", "/p", "validate", "--format", "json"]).ran);
            fs.write_file("/p/stage/eks/main.tf", EKS.replace("/vpc/", "/dns/"));
            for command in commands {
                let args = [&["-d", "/p"], command].concat();
                let after = run(&fs, &args);
                assert!(after.ran, "{command:?}: must run again");
                let cold = run(&fs, &[&["--no-cache"], &args[..]].concat());
                assert_eq!(after.file, cold.file, "{command:?}");
            }
        }

        #[test]
        fn the_cache_dir_check_knows_every_record_name() {
            for command in [
                "generate",
                "generate-changed",
                "validate",
                "graph",
                "local-exec",
            ] {
                assert!(terraci_db::store::is_record_name(
                    &crate::replay::record_name(command)
                ));
            }
        }

        #[test]
        fn a_failed_validate_is_not_recorded() {
            let fs = project();
            fs.write_file("/p/stage/dns/main.tf", "terraform {\n");
            let first = run(&fs, &["-d", "/p", "validate"]);
            assert_ne!(first.code, 0);
            assert!(!fs.is_file("/p/.terraci/cache/run-validate.bin".into()));
            let again = run(&fs, &["-d", "/p", "validate"]);
            assert!(again.ran);
            assert_eq!(again.code, first.code);
        }

        #[test]
        fn a_damaged_record_is_ignored_with_a_notice_and_rewritten() {
            let fs = project();
            let first = generate(&fs, &[]);
            let record = fs.read("/p/.terraci/cache/run.bin".into()).unwrap();
            fs.write_file("/p/.terraci/cache/run.bin", &record[..record.len() - 3]);
            let damaged = generate(&fs, &[]);
            assert!(damaged.ran);
            assert_eq!(damaged.file, first.file);
            assert!(
                damaged.stderr.contains("notice: ignoring the run record"),
                "{}",
                damaged.stderr
            );
            let again = generate(&fs, &[]);
            assert!(!again.ran);
            assert_eq!(again.stderr, first.stderr, "the notice is not replayed");
        }

        #[test]
        fn a_changed_only_run_that_fails_in_git_is_not_recorded() {
            // The memory system holds no git repository: change detection fails.
            let fs = project();
            let run = generate(&fs, &["--changed-only"]);
            assert_ne!(run.code, 0);
            assert!(
                run.stderr.contains("not inside a git repository"),
                "{}",
                run.stderr
            );
            assert!(!fs.is_file("/p/.terraci/cache/run.bin".into()));
        }

        #[test]
        fn every_environment_variable_a_run_reads_is_in_its_key() {
            // The cache secret decides which records are trusted, never what a run
            // writes, and must never be written: it is not in the key.
            let not_in_key = [terraci_db::store::CACHE_SECRET_VAR];
            for name in terraci_vcs::ENV_VARS {
                assert!(super::super::ENV_VARS.contains(&name), "{name}");
            }
            let fs = project();
            for extra in [
                &[][..],
                &["--changed-only", "--base-ref", "main"],
                &["--color", "auto"],
            ] {
                fs.take_env_reads();
                generate(&fs, extra);
                let read = fs.take_env_reads();
                assert!(
                    !read.is_empty(),
                    "{extra:?}: the provider is chosen from the environment"
                );
                for name in read
                    .into_iter()
                    .filter(|n| !not_in_key.contains(&n.as_str()))
                {
                    assert!(
                        super::super::ENV_VARS.contains(&name.as_str()),
                        "{extra:?}: `{name}` is read but is not in the replay key"
                    );
                }
            }
        }
    }
}
