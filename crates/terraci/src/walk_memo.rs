//! `--from-commit`'s memo of the walk (`walk.bin` in the cache dir): the project tree a
//! run walked, the module directories and files the walk found there, and each file's
//! object id.
//!
//! Why: in a merge request's pipeline the cache restored is the base branch's, and the
//! commit's tree is another: a run keyed on the tree id replays nothing, and walking the
//! commit reads every one of its trees (10,250 at 10,000 modules), then stamps every
//! file from them. A merge request changes a few files. When the diff of the memo's tree
//! against the commit's holds only changes of files' contents
//! ([`terraci_vcs::CommitSystem::modified_files_since`]), the walk of the commit is the
//! memo's, and every file's stamp is the memo's but for the files the diff names: the
//! run reads only the trees its own reads lead into. Anything else in the diff (a file
//! added, removed or turned into a link, a `.gitignore` changed), and the run walks.
//!
//! Written by a `--from-commit` run that walked (the memo was missing or did not apply),
//! only when the walk said nothing and every file it found is a regular file the trees
//! reach with no symlink on the way (a diff names a file by its own path only). Keyed on
//! the build and on the paths the run reads from the disk rather than the commit (the
//! cache dir, the output, `--config`, the `--var-file`s: the walk lists those from the
//! disk). Sealed, and signed with `TERRACI_CACHE_SECRET` when it is set, as the fact cache
//! is, and trusted as far as the fact cache is (`docs/security.md`).

use camino::Utf8PathBuf;

use terraci_db::store::{
    begin_file, binary_id, open_file, put_bytes, put_str, put_u64, seal_parts, CacheSettings,
};
use terraci_db::system::{Stamp, System};
use terraci_engine::discover::ModuleDirs;

const MAGIC: &[u8; 16] = b"terraci-walk\0\0\0\0";
/// Bump when the layout of the file changes.
const FORMAT: u64 = 1;

/// The stamp ([`Stamp::of_object`] of its id) of each file of a walk taken from the memo,
/// in the walk's order ([`terraci_engine::discover::Layout::files`]).
pub(crate) type Stamps = Vec<Stamp>;

/// A walk taken from the memo, for the commit the run reads.
pub(crate) struct Recalled {
    pub(crate) module_dirs: ModuleDirs,
    pub(crate) stamps: Stamps,
    /// The files whose contents the diff from the memo's tree changed.
    pub(crate) modified: usize,
}

/// What keys a memo besides the build: the paths the run reads from the disk.
fn key(disk: &[Utf8PathBuf]) -> Vec<u8> {
    let mut paths: Vec<&str> = disk.iter().map(|p| p.as_str()).collect();
    paths.sort_unstable();
    let mut out = Vec::new();
    put_u64(&mut out, paths.len() as u64);
    for path in paths {
        put_str(&mut out, path);
    }
    out
}

/// The walk of `system`'s commit from the memo in `settings`' dir, when there is one for
/// this build and these disk paths, and the diff from its tree to the commit's changes
/// only files' contents. `Ok(None)` otherwise: the run walks. `Err` is a notice: the
/// memo was there but damaged, written by another version, or not signed with the
/// secret.
pub(crate) fn recall(
    system: &terraci_vcs::CommitSystem,
    settings: &CacheSettings,
    disk: &[Utf8PathBuf],
) -> Result<Option<Recalled>, String> {
    let path = settings.dir.join(terraci_db::store::WALK_FILE_NAME);
    let Ok(blob) = system.read(&path) else {
        return Ok(None);
    };
    let notice = |why| format!("ignoring the walk memo `{path}` ({why}); walking the commit");
    let body = terraci_db::store::unseal(terraci_db::store::cache_key(system).as_ref(), &blob)
        .map_err(notice)?;
    let mut r =
        open_file(&blob[..body], MAGIC, FORMAT, "not a terraci walk memo").map_err(notice)?;
    Ok(read(system, &mut r, disk))
}

/// The body of a memo [`recall`] opened.
fn read(
    system: &terraci_vcs::CommitSystem,
    r: &mut terraci_db::store::Reader<'_, ()>,
    disk: &[Utf8PathBuf],
) -> Option<Recalled> {
    if r.bytes().ok()? != binary_id(system)?.as_slice() || r.bytes().ok()? != key(disk) {
        return None;
    }
    let tree = r.string().ok()?;
    // The diff on this thread (its handle of the repository is open), the memo's body
    // beside it.
    let (modified, body) = std::thread::scope(|scope| {
        let body = scope.spawn(|| {
            let module_dirs = crate::replay::read_layout(r).ok()?;
            let count = module_dirs.iter().map(|(_, files)| files.len()).sum();
            let stamps = (0..count)
                .map(|_| r.blob().map(|id| Stamp::of_object(&id.0)))
                .collect::<Result<Stamps, _>>()
                .ok()?;
            r.at_end().then_some((module_dirs, stamps))
        });
        let modified = system.modified_files_since(&tree);
        (modified, body.join().ok().flatten())
    });
    let (modified, (module_dirs, mut stamps)) = (modified?, body?);
    if !modified.is_empty() {
        // The walk's directories are sorted (a memo whose are not is not used), and a
        // file is listed in its own directory: each changed file is found through its
        // directory, without a map of every path.
        if !module_dirs.is_sorted_by(|a, b| a.0 < b.0) {
            return None;
        }
        let firsts = terraci_engine::discover::first_positions(&module_dirs);
        for (path, id) in &modified {
            let Some((dir, _)) = path.rsplit_once('/') else {
                continue;
            };
            let Ok(d) = module_dirs.binary_search_by(|(m, _)| m.as_str().cmp(dir)) else {
                continue;
            };
            if let Some(j) = module_dirs[d].1.iter().position(|(p, _)| p == path) {
                stamps[firsts[d] + j] = Stamp::of_object(id);
            }
        }
    }
    Some(Recalled {
        module_dirs,
        stamps,
        modified: modified.len(),
    })
}

/// Writes the memo of `module_dirs`, the walk of `system`'s commit, when every file in
/// it is a regular file its trees reach with no symlink on the way. A failure is not
/// the run's: the next run walks.
pub(crate) fn save(
    system: &terraci_vcs::CommitSystem,
    settings: &CacheSettings,
    disk: &[Utf8PathBuf],
    module_dirs: &ModuleDirs,
) {
    let paths = module_dirs
        .iter()
        .flat_map(|(_, files)| files.iter().map(|(path, _)| path.as_str()));
    let (Some(ids), Some(binary)) = (system.plain_file_ids(paths), binary_id(system)) else {
        return;
    };
    let mut out = begin_file(MAGIC, FORMAT, ids.len() * 80 + 64);
    put_bytes(&mut out, &binary);
    put_bytes(&mut out, &key(disk));
    put_str(&mut out, &system.tree());
    crate::replay::put_layout(&mut out, module_dirs);
    for id in &ids {
        out.extend_from_slice(id);
    }
    let sum = seal_parts(&[&out]);
    let mac = terraci_db::store::mac_trailer(
        terraci_db::store::cache_key(system).as_ref(),
        &[&out, &sum],
    );
    let _ = settings.replace_parts(
        system,
        terraci_db::store::WALK_FILE_NAME,
        &[&out, &sum, &mac],
    );
}
