//! The real machine.
#![allow(clippy::disallowed_methods)]

use std::io::{self, Read, Write};

use camino::{Utf8Path, Utf8PathBuf};

use super::{DirEntry, EntryKind, ReadError, ReadPolicy, Stamp, System};

/// What a file that is not a regular file or directory is, for messages.
fn special_kind(ft: &std::fs::FileType) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt as _;
    if ft.is_fifo() {
        Some("a FIFO")
    } else if ft.is_socket() {
        Some("a socket")
    } else if ft.is_char_device() {
        Some("a character device")
    } else if ft.is_block_device() {
        Some("a block device")
    } else {
        None
    }
}

/// Opens `path` for reading without following a symlink in its last component
/// (`ELOOP` then) and without blocking: a FIFO swapped in after the checks opens at once
/// and is refused by the caller's `fstat`.
fn open_no_follow(path: &Utf8Path) -> io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
}

/// Resolves every symlink of `path`, checks the result lies inside the policy's root and
/// is a regular file (by `stat`, before any open), then opens it.
fn open_resolved(path: &Utf8Path, policy: &ReadPolicy) -> Result<std::fs::File, ReadError> {
    if !policy.lexically_inside(path) {
        return Err(ReadError::Unsafe(format!(
            "`{path}` is outside `{}`",
            policy.root
        )));
    }
    let real = std::fs::canonicalize(path)?;
    if !real.starts_with(&policy.canonical_root) {
        return Err(ReadError::Unsafe(format!(
            "a symlink to `{}`, outside `{}`",
            crate::escape::printable(&real.to_string_lossy()),
            policy.root
        )));
    }
    // A link from the tree into the git directory (`main.tf -> ../.git/config`) is not
    // followed: a syntax error would show the line it starts with. The git directory's
    // own files (`.git/info/exclude`), named as such, are read.
    if let Some(real_utf8) = Utf8Path::from_path(&real) {
        if super::in_git_dir(&policy.canonical_root, real_utf8)
            && !super::in_git_dir(&policy.root, path)
        {
            return Err(ReadError::Unsafe(format!(
                "a symlink into the git directory (`{}`), which terraci does not read",
                crate::escape::printable(
                    real_utf8
                        .strip_prefix(&policy.canonical_root)
                        .unwrap_or(real_utf8)
                        .as_str()
                )
            )));
        }
    }
    let meta = std::fs::metadata(&real)?;
    if let Some(what) = special_kind(&meta.file_type()) {
        let link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
        return Err(ReadError::Unsafe(if link {
            format!("a symlink to {what}")
        } else {
            format!("not a regular file but {what}")
        }));
    }
    if meta.is_dir() {
        return Err(ReadError::Io(io::Error::other("a directory")));
    }
    let real = Utf8PathBuf::from_path_buf(real)
        .map_err(|p| ReadError::Unsafe(format!("a symlink to `{}`, not UTF-8", p.display())))?;
    Ok(open_no_follow(&real)?)
}

/// Reads an open file whole if it is a regular file within the policy's bound, counted
/// while reading.
fn read_bounded(
    file: &std::fs::File,
    policy: &ReadPolicy,
) -> Result<(Vec<u8>, Option<Stamp>), ReadError> {
    let meta = file.metadata()?;
    if let Some(what) = special_kind(&meta.file_type()) {
        return Err(ReadError::Unsafe(format!("not a regular file but {what}")));
    }
    policy.check_len(meta.len())?;
    // Bounded even if the file grows while it is read (or says 0 bytes, as /proc does).
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0) + 1);
    let mut limited = file.take(policy.max_len + 1);
    loop {
        match limited.read_to_end(&mut bytes) {
            Ok(_) => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    policy.check_len(bytes.len() as u64)?;
    Ok((bytes, Some(stamp_of(&meta))))
}

fn stamp_of(meta: &std::fs::Metadata) -> Stamp {
    use std::os::unix::fs::MetadataExt as _;
    let ns = |secs: i64, nanos: i64| secs.saturating_mul(1_000_000_000).saturating_add(nanos);
    Stamp {
        dev: meta.dev(),
        ino: meta.ino(),
        len: meta.size(),
        mtime_ns: ns(meta.mtime(), meta.mtime_nsec()),
        ctime_ns: ns(meta.ctime(), meta.ctime_nsec()),
    }
}

/// The running build's identity: the ELF build ID the linker wrote (a hash of the
/// linked binary: the same in every copy of one build, whatever file holds it, so a
/// cache written in one CI job is found by the next job's fresh copy of the binary),
/// else the executable's stamp (a copy of the binary then misses, never a rebuild
/// hits).
fn program_id() -> Option<Vec<u8>> {
    let exe = std::env::current_exe().ok()?;
    let mut file = std::fs::File::open(&exe).ok()?;
    if let Some(id) = elf_build_id(&mut file) {
        let mut out = b"build-id:".to_vec();
        out.extend_from_slice(&id);
        return Some(out);
    }
    let stamp = stamp_of(&file.metadata().ok()?);
    let mut out = b"stamp:".to_vec();
    for field in [stamp.dev, stamp.ino, stamp.len] {
        out.extend_from_slice(&field.to_le_bytes());
    }
    for time in [stamp.mtime_ns, stamp.ctime_ns] {
        out.extend_from_slice(&time.to_le_bytes());
    }
    Some(out)
}

/// The `NT_GNU_BUILD_ID` note of a 64-bit little-endian ELF file, from its program
/// headers' `PT_NOTE` segments; `None` for anything else.
fn elf_build_id(file: &mut (impl Read + std::io::Seek)) -> Option<Vec<u8>> {
    use std::io::SeekFrom;
    const PT_NOTE: u32 = 4;
    const NT_GNU_BUILD_ID: u32 = 3;
    let u16_at =
        |b: &[u8], at: usize| Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?));
    let u32_at =
        |b: &[u8], at: usize| Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?));
    let u64_at =
        |b: &[u8], at: usize| Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?));
    let mut read_at = |offset: u64, len: usize| -> Option<Vec<u8>> {
        let mut buf = vec![0; len];
        file.seek(SeekFrom::Start(offset)).ok()?;
        file.read_exact(&mut buf).ok()?;
        Some(buf)
    };
    let header = read_at(0, 64)?;
    // Magic, 64-bit class, little-endian data.
    if header[..4] != *b"\x7fELF" || header[4] != 2 || header[5] != 1 {
        return None;
    }
    let (phoff, phentsize, phnum) = (
        u64_at(&header, 0x20)?,
        usize::from(u16_at(&header, 0x36)?),
        usize::from(u16_at(&header, 0x38)?),
    );
    if phentsize < 56 || phnum > 256 {
        return None;
    }
    let table = read_at(phoff, phentsize * phnum)?;
    for ph in table.chunks_exact(phentsize) {
        if u32_at(ph, 0)? != PT_NOTE {
            continue;
        }
        let (offset, size) = (u64_at(ph, 8)?, u64_at(ph, 32)?);
        if size > 1 << 16 {
            continue;
        }
        let notes = read_at(offset, usize::try_from(size).ok()?)?;
        let mut at = 0;
        while at + 12 <= notes.len() {
            let namesz = u32_at(&notes, at)? as usize;
            let descsz = u32_at(&notes, at + 4)? as usize;
            let kind = u32_at(&notes, at + 8)?;
            let name = at + 12;
            let desc = name + namesz.div_ceil(4) * 4;
            let end = desc + descsz.div_ceil(4) * 4;
            if end > notes.len() {
                break;
            }
            if kind == NT_GNU_BUILD_ID && notes[name..name + namesz] == *b"GNU\0" && descsz > 0 {
                return Some(notes[desc..desc + descsz].to_vec());
            }
            at = end;
        }
    }
    None
}

/// The entries of the directory `path`, sorted by name, each `wanted` says to stamp
/// stamped relative to the open directory (`statx` of the name, not of the whole path).
fn list_dir(
    path: &Utf8Path,
    wanted: &dyn Fn(&DirEntry) -> bool,
) -> io::Result<Vec<(DirEntry, Option<Stamp>)>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(path)? {
        let entry = entry?;
        let ft = entry.file_type()?;
        let name = match entry.file_name().into_string() {
            Ok(name) => name,
            Err(raw) => {
                let name = raw.to_string_lossy().into_owned();
                out.push((
                    DirEntry {
                        name,
                        kind: EntryKind::NotUtf8,
                    },
                    None,
                ));
                continue;
            }
        };
        let kind = if ft.is_symlink() {
            EntryKind::Symlink {
                to_dir: std::fs::metadata(entry.path()).is_ok_and(|m| m.is_dir()),
            }
        } else if ft.is_dir() {
            EntryKind::Dir
        } else if let Some(what) = special_kind(&ft) {
            EntryKind::Special { what }
        } else {
            EntryKind::File
        };
        let listed = DirEntry { name, kind };
        // `DirEntry::metadata` is an `lstat` relative to the directory.
        let stamp = if wanted(&listed) {
            entry.metadata().ok().map(|m| stamp_of(&m))
        } else {
            None
        };
        out.push((listed, stamp));
    }
    out.sort_by(|a, b| a.0.name.cmp(&b.0.name));
    Ok(out)
}

#[derive(Debug, Default, Clone, Copy)]
pub struct OsSystem;

impl System for OsSystem {
    fn shared(&self) -> std::sync::Arc<dyn System> {
        std::sync::Arc::new(OsSystem)
    }

    #[cfg(feature = "watch")]
    fn watch(
        &self,
        root: &Utf8Path,
        outside: &[Utf8PathBuf],
    ) -> io::Result<Box<dyn super::ChangeEvents>> {
        Ok(Box::new(super::NotifyEvents::start(root, outside)?))
    }

    fn read(&self, path: &Utf8Path) -> io::Result<Vec<u8>> {
        std::fs::read(path)
    }

    fn read_head(&self, path: &Utf8Path, len: usize) -> io::Result<Vec<u8>> {
        use std::io::Read as _;
        let mut bytes = Vec::with_capacity(len);
        std::fs::File::open(path)?
            .take(len as u64)
            .read_to_end(&mut bytes)?;
        Ok(bytes)
    }

    fn holds(&self, path: &Utf8Path, parts: &[&[u8]]) -> bool {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        // A link is replaced by a write, so it never holds what the write would make.
        let regular = std::fs::symlink_metadata(path)
            .is_ok_and(|meta| meta.is_file() && meta.len() == len as u64);
        regular && std::fs::File::open(path).is_ok_and(|mut file| holds(&mut file, parts))
    }

    fn read_stamped(&self, path: &Utf8Path) -> io::Result<(Vec<u8>, Option<Stamp>)> {
        use std::io::Read as _;
        let mut file = std::fs::File::open(path)?;
        let meta = file.metadata()?;
        // Read until end of file into a buffer of the size just seen (one byte more, so
        // the usual case is one read and one empty read). `read_to_end` would ask the
        // size and position again: two system calls per file, 30,000 files in a large
        // project.
        let mut bytes = vec![0; usize::try_from(meta.len()).unwrap_or(0) + 1];
        let mut filled = 0;
        loop {
            if filled == bytes.len() {
                bytes.resize(bytes.len() * 2, 0);
            }
            match file.read(&mut bytes[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        bytes.truncate(filled);
        Ok((bytes, Some(stamp_of(&meta))))
    }

    fn read_confined(
        &self,
        path: &Utf8Path,
        policy: &ReadPolicy,
        walked: bool,
    ) -> Result<(Vec<u8>, Option<Stamp>), ReadError> {
        let file = if walked && policy.lexically_inside(path) {
            match open_no_follow(path) {
                Ok(file) => file,
                Err(e) if e.raw_os_error() == Some(libc::ELOOP) => open_resolved(path, policy)?,
                Err(e) => return Err(e.into()),
            }
        } else {
            open_resolved(path, policy)?
        };
        read_bounded(&file, policy)
    }

    fn read_regular(&self, path: &Utf8Path, max_len: u64) -> Result<Vec<u8>, ReadError> {
        use std::os::unix::fs::OpenOptionsExt as _;
        // Links followed (the runner named the file), but never blocking: a FIFO opens at
        // once and is refused by `fstat`.
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(path)?;
        if file.metadata()?.is_dir() {
            return Err(ReadError::Io(io::Error::other("a directory")));
        }
        let policy = ReadPolicy {
            root: path.to_owned(),
            canonical_root: path.to_owned(),
            max_len,
        };
        read_bounded(&file, &policy).map(|(bytes, _)| bytes)
    }

    fn canonicalize(&self, path: &Utf8Path) -> io::Result<Utf8PathBuf> {
        let real = std::fs::canonicalize(path)?;
        Utf8PathBuf::from_path_buf(real)
            .map_err(|p| io::Error::other(format!("not UTF-8: {}", p.display())))
    }

    fn stamp(&self, path: &Utf8Path) -> Option<Stamp> {
        std::fs::metadata(path).ok().map(|m| stamp_of(&m))
    }

    fn link_stamp(&self, path: &Utf8Path) -> Option<Stamp> {
        std::fs::symlink_metadata(path).ok().map(|m| stamp_of(&m))
    }

    fn program_id(&self) -> Option<Vec<u8>> {
        static ID: std::sync::OnceLock<Option<Vec<u8>>> = std::sync::OnceLock::new();
        ID.get_or_init(program_id).clone()
    }

    fn current_exe(&self) -> Option<String> {
        std::env::current_exe()
            .ok()
            .and_then(|p| p.into_os_string().into_string().ok())
    }

    fn now(&self) -> std::time::SystemTime {
        std::time::SystemTime::now()
    }

    fn read_dir(&self, path: &Utf8Path) -> io::Result<Vec<DirEntry>> {
        Ok(list_dir(path, &|_| false)?
            .into_iter()
            .map(|(entry, _)| entry)
            .collect())
    }

    fn read_dir_stamped(
        &self,
        path: &Utf8Path,
        wanted: &dyn Fn(&DirEntry) -> bool,
    ) -> io::Result<Vec<(DirEntry, Option<Stamp>)>> {
        list_dir(path, wanted)
    }

    fn is_file(&self, path: &Utf8Path) -> bool {
        path.is_file()
    }

    fn is_dir(&self, path: &Utf8Path) -> bool {
        path.is_dir()
    }

    fn env_var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok().filter(|v| !v.is_empty())
    }

    fn stderr_is_terminal(&self) -> bool {
        use std::io::IsTerminal;
        io::stderr().is_terminal()
    }

    fn interactive_stdin(&self) -> Option<Box<dyn io::BufRead + '_>> {
        use std::io::IsTerminal;
        let stdin = io::stdin();
        if !stdin.is_terminal() {
            return None;
        }
        Some(Box::new(stdin.lock()))
    }

    fn create_dir_all(&self, path: &Utf8Path) -> io::Result<()> {
        std::fs::create_dir_all(path)
    }

    fn make_private_dir(&self, path: &Utf8Path) -> io::Result<()> {
        use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
        let meta = std::fs::symlink_metadata(path)?;
        if meta.file_type().is_symlink() || !meta.is_dir() {
            return Err(io::Error::other(format!(
                "`{path}` is not a directory of its own (a symlink or a file)"
            )));
        }
        // SAFETY: geteuid has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        if meta.uid() != me {
            return Err(io::Error::other(format!(
                "`{path}` belongs to user {}, not to this user ({me})",
                meta.uid()
            )));
        }
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o022 != 0 {
            return Err(io::Error::other(format!(
                "other users may write in `{path}` (mode {mode:o}); make it 0700"
            )));
        }
        if mode != 0o700 {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700))?;
        }
        Ok(())
    }

    fn remove_file(&self, path: &Utf8Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn rename(&self, from: &Utf8Path, to: &Utf8Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    fn create_output_file(&self, path: &Utf8Path) -> io::Result<std::fs::File> {
        std::fs::File::create(path)
    }

    fn current_dir(&self) -> io::Result<Utf8PathBuf> {
        let dir = std::env::current_dir()?;
        Utf8PathBuf::from_path_buf(dir)
            .map_err(|p| io::Error::other(format!("current directory {p:?} is not UTF-8")))
    }

    fn replace(&self, path: &Utf8Path, bytes: &[u8]) -> io::Result<()> {
        self.replace_parts(path, &[bytes])
    }

    fn replace_parts(&self, path: &Utf8Path, parts: &[&[u8]]) -> io::Result<()> {
        replace_via_temp(path, |f| write_parts(f, parts))
    }

    fn replace_streamed(
        &self,
        path: &Utf8Path,
        write: &mut dyn FnMut(&mut super::Sink<'_>) -> io::Result<()>,
    ) -> io::Result<()> {
        replace_via_temp(path, |f| write(&mut |piece| f.write_all(piece)))
    }

    fn append(&self, path: &Utf8Path, bytes: &[u8]) -> io::Result<()> {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        file.write_all(bytes)
    }

    fn write_atomic_parts(&self, path: &Utf8Path, parts: &[&[u8]]) -> io::Result<bool> {
        // Through a symlink to its target: renaming over the link would replace the link.
        let resolved;
        let path = match std::fs::symlink_metadata(path) {
            Ok(meta) if meta.file_type().is_symlink() => {
                // A dangling link: its target, relative to the link's directory.
                let target = std::fs::canonicalize(path).or_else(|_| {
                    let target = std::fs::read_link(path)?;
                    Ok::<_, io::Error>(
                        path.parent()
                            .map_or(target.clone(), |p| p.as_std_path().join(&target)),
                    )
                })?;
                resolved = Utf8PathBuf::from_path_buf(target)
                    .map_err(|p| io::Error::other(format!("not UTF-8: {}", p.display())))?;
                resolved.as_path()
            }
            // `-o /dev/stdout`, a FIFO, a device: written in place; a rename would put a
            // regular file where the special file was.
            Ok(meta) if !meta.is_file() && !meta.is_dir() => {
                let mut f = std::fs::OpenOptions::new().write(true).open(path)?;
                write_parts(&mut f, parts)?;
                return Ok(true);
            }
            _ => path,
        };
        let (dir, name) = split(path);
        write_in(
            &super::at::open_dir(&dir, Utf8Path::new(""), true)?,
            name,
            parts,
        )
    }

    fn create_dir_beneath(&self, root: &Utf8Path, path: &Utf8Path) -> io::Result<()> {
        let rel = super::relative_beneath(root, path)?;
        super::at::open_dir(root, &rel, true).map(|_| ())
    }

    fn write_beneath(&self, root: &Utf8Path, path: &Utf8Path, parts: &[&[u8]]) -> io::Result<bool> {
        let (dir, name) = beneath(root, path, true)?;
        write_in(&dir, &name, parts)
    }

    fn replace_beneath(&self, root: &Utf8Path, path: &Utf8Path, parts: &[&[u8]]) -> io::Result<()> {
        let (dir, name) = beneath(root, path, true)?;
        dir.replace(&name, None, |f| write_parts(f, parts))
    }

    fn replace_streamed_beneath(
        &self,
        root: &Utf8Path,
        path: &Utf8Path,
        write: &mut dyn FnMut(&mut super::Sink<'_>) -> io::Result<()>,
    ) -> io::Result<()> {
        let (dir, name) = beneath(root, path, true)?;
        dir.replace(&name, None, |f| write(&mut |piece| f.write_all(piece)))
    }

    fn create_output_beneath(&self, root: &Utf8Path, path: &Utf8Path) -> io::Result<std::fs::File> {
        let (dir, name) = beneath(root, path, true)?;
        dir.create(&name)
    }

    fn remove_beneath(&self, root: &Utf8Path, path: &Utf8Path) -> io::Result<()> {
        let (dir, name) = beneath(root, path, false)?;
        dir.remove(&name)
    }

    fn refuse_links_beneath(&self, root: &Utf8Path, path: &Utf8Path) -> io::Result<()> {
        let rel = super::relative_beneath(root, path)?;
        match super::at::open_dir(root, &rel, false) {
            Err(e)
                if e.kind() != io::ErrorKind::NotFound
                    && e.kind() != io::ErrorKind::NotADirectory =>
            {
                Err(e)
            }
            _ => Ok(()),
        }
    }

    fn write_output(
        &self,
        project: &Utf8Path,
        path: &Utf8Path,
        parts: &[&[u8]],
    ) -> io::Result<bool> {
        let real_project = std::fs::canonicalize(project)
            .ok()
            .and_then(|p| Utf8PathBuf::from_path_buf(p).ok())
            .unwrap_or_else(|| project.to_owned());
        let root = if path.starts_with(project) {
            project
        } else if path.starts_with(&real_project) {
            &real_project
        } else {
            // Outside the project: the user's own path, links and all.
            return self.write_atomic_parts(path, parts);
        };
        // Where the write would land: a link's target (a dangling one too), every link
        // on the way resolved.
        let target = match std::fs::symlink_metadata(path) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let to = std::fs::read_link(path)?;
                path.parent()
                    .map_or(to.clone(), |p| p.as_std_path().join(&to))
            }
            _ => path.as_std_path().to_owned(),
        };
        if resolved(&target).starts_with(real_project.as_std_path()) {
            return self.write_atomic_parts(path, parts);
        }
        // A link out of the project: replaced, not followed (a linked directory on the
        // way is an error).
        self.write_beneath(root, path, parts)
    }
}

/// `path`'s directory (`.` for a bare name) and its last component.
fn split(path: &Utf8Path) -> (Utf8PathBuf, &str) {
    let dir = match path.parent() {
        Some(p) if !p.as_str().is_empty() => p.to_owned(),
        _ => Utf8PathBuf::from("."),
    };
    (dir, path.file_name().unwrap_or("output"))
}

/// The directory of `path` beneath `root` (opened, made when `create`, following no
/// link below `root`) and the file's name in it.
fn beneath(root: &Utf8Path, path: &Utf8Path, create: bool) -> io::Result<(super::at::Dir, String)> {
    let rel = super::relative_beneath(root, path)?;
    let name = super::file_name_of(&rel)?.to_owned();
    let parent = rel.parent().unwrap_or(Utf8Path::new(""));
    Ok((super::at::open_dir(root, parent, create)?, name))
}

/// `path` with every symlink resolved: its nearest existing ancestor made real, the
/// missing rest appended and `..` resolved lexically (a missing directory is no link).
fn resolved(path: &std::path::Path) -> std::path::PathBuf {
    let components: Vec<_> = path.components().collect();
    for keep in (1..=components.len()).rev() {
        let head: std::path::PathBuf = components[..keep].iter().collect();
        if let Ok(real) = std::fs::canonicalize(&head) {
            let joined = components[keep..].iter().fold(real, |p, c| p.join(c));
            return match Utf8PathBuf::from_path_buf(joined) {
                Ok(p) => super::normalize(&p).into_std_path_buf(),
                Err(p) => p,
            };
        }
    }
    path.to_owned()
}

/// Writes `parts` as `name` in `dir` (a new file renamed over it; a link there is
/// replaced) unless a regular file there holds exactly them: then `false`, untouched.
/// The new file keeps the old one's mode: a 0600 pipeline stays 0600.
fn write_in(dir: &super::at::Dir, name: &str, parts: &[&[u8]]) -> io::Result<bool> {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    // The file being replaced, held open across the rename: the kernel frees its pages
    // when the last handle closes, which for a large pipeline costs more than writing
    // the new one. That close happens on another thread, after the new file is in place.
    let mut replaced = None;
    let mut permissions = None;
    if let Some(mut existing) = dir.open_regular(name) {
        let meta = existing.metadata();
        permissions = meta.as_ref().ok().map(|m| m.permissions());
        // Same bytes only if the same length: a changed length needs no read.
        let same_len = meta.is_ok_and(|m| m.len() == len as u64);
        if same_len && holds(&mut existing, parts) {
            return Ok(false);
        }
        replaced = Some(existing);
    }
    // No fsync: the rename is what keeps readers from a half-written file, and syncing a
    // 13 MB pipeline cost more than generating it.
    let result = dir.replace(name, permissions, |f| write_parts(f, parts));
    if let Some(replaced) = replaced {
        // If no thread can be started, the handle is closed here, with the closure.
        let _ = std::thread::Builder::new().spawn(move || drop(replaced));
    }
    result.map(|()| true)
}

/// Whether `bytes` is the concatenation of `parts`.
fn holds(file: &mut std::fs::File, parts: &[&[u8]]) -> bool {
    // Compared a block at a time: reading a 20 MB pipeline whole to compare it doubled
    // the memory the run needed at its end.
    let mut block = vec![0u8; 1 << 16];
    let (mut filled, mut at) = (0, 0);
    for part in parts {
        let mut part = *part;
        while !part.is_empty() {
            if at == filled {
                match read_some(file, &mut block) {
                    Ok(0) | Err(_) => return false,
                    Ok(n) => (filled, at) = (n, 0),
                }
            }
            let n = part.len().min(filled - at);
            if block[at..at + n] != part[..n] {
                return false;
            }
            (part, at) = (&part[n..], at + n);
        }
    }
    at == filled && matches!(read_some(file, &mut block), Ok(0))
}

fn read_some(file: &mut std::fs::File, block: &mut [u8]) -> io::Result<usize> {
    loop {
        match file.read(block) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// Replaces `path` with what `write` writes to a temp file beside it (then renamed over
/// it), creating missing parent directories; on an error the temp file is removed and
/// `path` left as it was.
fn replace_via_temp(
    path: &Utf8Path,
    write: impl FnOnce(&mut std::fs::File) -> io::Result<()>,
) -> io::Result<()> {
    let (dir, name) = split(path);
    super::at::open_dir(&dir, Utf8Path::new(""), true)?.replace(name, None, write)
}

/// Writes `parts` in order with as few system calls as the kernel allows (`writev`), not
/// copying them into one buffer first.
fn write_parts(f: &mut std::fs::File, parts: &[&[u8]]) -> io::Result<()> {
    // The kernel takes at most 1024 pieces per call (IOV_MAX).
    const IOV_MAX: usize = 1024;
    let mut slices: Vec<io::IoSlice<'_>> = parts
        .iter()
        .filter(|p| !p.is_empty())
        .map(|p| io::IoSlice::new(p))
        .collect();
    let mut rest = &mut slices[..];
    while !rest.is_empty() {
        let n = rest.len().min(IOV_MAX);
        let written = f.write_vectored(&rest[..n])?;
        if written == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        io::IoSlice::advance_slices(&mut rest, written);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_home_is_made_private_and_a_shared_one_is_refused() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().expect("tempdir");
        let home = Utf8Path::from_path(dir.path())
            .expect("utf-8")
            .join("cache");
        std::fs::create_dir(&home).expect("mkdir");
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        OsSystem.make_private_dir(&home).expect("the user's own");
        let mode = std::fs::metadata(&home).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        let err = OsSystem
            .make_private_dir(&home)
            .expect_err("world-writable");
        assert!(err.to_string().contains("other users may write"), "{err}");
        let link = home.with_file_name("link");
        std::os::unix::fs::symlink(&home, &link).expect("symlink");
        let err = OsSystem.make_private_dir(&link).expect_err("a link");
        assert!(err.to_string().contains("symlink"), "{err}");
    }

    fn dir() -> (tempfile::TempDir, Utf8PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let path = Utf8PathBuf::from_path_buf(tmp.path().to_owned()).unwrap();
        (tmp, path)
    }

    #[test]
    fn read_stamped_returns_every_byte() {
        let (_tmp, dir) = dir();
        for len in [0usize, 1, 4095, 4096, 70_000] {
            let path = dir.join(format!("f{len}.tf"));
            let text: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
            std::fs::write(&path, &text).unwrap();
            let (bytes, stamp) = OsSystem.read_stamped(&path).unwrap();
            assert_eq!(bytes, text, "{len} bytes");
            assert!(stamp.is_some());
        }
        assert!(OsSystem.read_stamped(&dir.join("missing.tf")).is_err());
    }

    #[test]
    fn a_file_is_replaced_unless_it_holds_the_same_bytes() {
        let (_tmp, dir) = dir();
        let out = dir.join("out.yml");
        assert!(OsSystem.write_atomic(&out, b"a: 1\n").unwrap());
        // Someone reading the old file keeps reading the old file.
        let mut reader = std::fs::File::open(&out).unwrap();
        // Same length, other bytes: compared, then replaced.
        assert!(OsSystem.write_atomic(&out, b"a: 2\n").unwrap());
        assert!(!OsSystem.write_atomic(&out, b"a: 2\n").unwrap());
        // Another length: replaced without reading.
        assert!(OsSystem.write_atomic(&out, b"a: 10\n").unwrap());
        assert_eq!(OsSystem.read(&out).unwrap(), b"a: 10\n");
        let mut old = String::new();
        reader.read_to_string(&mut old).unwrap();
        assert_eq!(old, "a: 1\n");
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["out.yml"], "no temp file is left behind");
    }

    #[test]
    fn confined_reads_take_regular_files_inside_only() {
        let (_tmp, root) = dir();
        let (_out, outside) = dir();
        std::fs::write(outside.join("secret"), "s3cret").unwrap();
        std::fs::write(root.join("main.tf"), "inside").unwrap();
        std::fs::write(root.join("big.tf"), "x".repeat(100)).unwrap();
        std::os::unix::fs::symlink(root.join("main.tf"), root.join("link.tf")).unwrap();
        std::os::unix::fs::symlink(outside.join("secret"), root.join("out.tf")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", root.join("zero.tf")).unwrap();
        let fifo = std::ffi::CString::new(root.join("fifo.tf").as_str()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let policy = ReadPolicy::new(&OsSystem, &root, 50);
        let read = |name: &str, walked| OsSystem.read_confined(&root.join(name), &policy, walked);
        for walked in [true, false] {
            assert_eq!(read("main.tf", walked).unwrap().0, b"inside");
            assert_eq!(read("link.tf", walked).unwrap().0, b"inside");
            for name in ["out.tf", "zero.tf", "fifo.tf"] {
                let err = read(name, walked).unwrap_err();
                assert!(matches!(err, ReadError::Unsafe(_)), "{name}: {err}");
            }
            assert!(matches!(
                read("big.tf", walked),
                Err(ReadError::TooLarge { limit: 50 })
            ));
        }
        let err = OsSystem
            .read_confined(&outside.join("secret"), &policy, false)
            .unwrap_err();
        assert!(matches!(err, ReadError::Unsafe(_)), "{err}");
    }

    #[test]
    fn a_replaced_file_keeps_its_mode() {
        use std::os::unix::fs::PermissionsExt as _;
        let (_tmp, dir) = dir();
        let out = dir.join("out.yml");
        assert!(OsSystem.write_atomic(&out, b"a: 1\n").unwrap());
        std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(OsSystem.write_atomic(&out, b"a: 22\n").unwrap());
        let mode = std::fs::metadata(&out).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    #[test]
    fn pieces_are_written_in_order_past_the_kernels_limit_per_call() {
        let (_tmp, dir) = dir();
        let out = dir.join("out.yml");
        let texts: Vec<String> = (0..3000).map(|i| format!("job-{i}\n")).collect();
        let mut parts: Vec<&[u8]> = vec![b"head\n", b""];
        parts.extend(texts.iter().map(|t| t.as_bytes()));
        assert!(OsSystem.write_atomic_parts(&out, &parts).unwrap());
        assert_eq!(OsSystem.read(&out).unwrap(), parts.concat());
        assert!(!OsSystem.write_atomic_parts(&out, &parts).unwrap());
        // Same length, one byte moved between pieces: the same bytes, not rewritten.
        let (a, b) = (b"head\njob-0".as_slice(), b"\n".as_slice());
        let mut shifted = vec![a, b];
        shifted.extend(parts[3..].iter().copied());
        assert!(!OsSystem.write_atomic_parts(&out, &shifted).unwrap());
        // Same length, other bytes.
        let mut changed = parts.clone();
        changed[2] = b"jxb-0\n";
        assert!(OsSystem.write_atomic_parts(&out, &changed).unwrap());
        assert_eq!(OsSystem.read(&out).unwrap(), changed.concat());
    }

    #[test]
    fn writing_through_a_symlink_keeps_the_link_and_updates_its_target() {
        let (_tmp, dir) = dir();
        std::fs::create_dir(dir.join("real")).unwrap();
        std::os::unix::fs::symlink(dir.join("real/out.yml"), dir.join("out.yml")).unwrap();
        assert!(OsSystem
            .write_atomic(&dir.join("out.yml"), b"a: 1\n")
            .unwrap());
        let link = std::fs::symlink_metadata(dir.join("out.yml")).unwrap();
        assert!(link.file_type().is_symlink());
        assert_eq!(OsSystem.read(&dir.join("real/out.yml")).unwrap(), b"a: 1\n");
        assert!(!OsSystem
            .write_atomic(&dir.join("out.yml"), b"a: 1\n")
            .unwrap());
    }

    /// A project with a real `.terraci/`, and a directory outside it holding `victim`.
    fn project_and_victim() -> (
        tempfile::TempDir,
        Utf8PathBuf,
        tempfile::TempDir,
        Utf8PathBuf,
    ) {
        let (tmp, root) = dir();
        let (out, outside) = dir();
        std::fs::write(outside.join("victim"), "precious\n").unwrap();
        (tmp, root, out, outside)
    }

    fn is_link(path: &Utf8Path) -> bool {
        std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
    }

    #[test]
    fn writes_beneath_a_root_refuse_a_linked_directory_and_replace_a_linked_file() {
        let (_tmp, root, _out, outside) = project_and_victim();
        // A linked directory on the way, existing or to be made below it: refused.
        std::os::unix::fs::symlink(&outside, root.join("logs")).unwrap();
        for rel in ["logs/victim", "logs/new/file"] {
            let err = OsSystem
                .write_beneath(&root, Utf8Path::new(rel), &[b"evil\n"])
                .unwrap_err();
            let shown = format!(
                "`{root}/logs` is a symlink: terraci does not write through links in the project"
            );
            assert_eq!(err.to_string(), shown, "{rel}");
            let err = OsSystem
                .create_output_beneath(&root, Utf8Path::new(rel))
                .unwrap_err();
            assert_eq!(err.to_string(), shown, "{rel}");
            assert!(OsSystem.remove_beneath(&root, Utf8Path::new(rel)).is_err());
            assert!(OsSystem
                .replace_beneath(&root, Utf8Path::new(rel), &[b"evil\n"])
                .is_err());
            assert!(OsSystem
                .refuse_links_beneath(&root, &root.join(rel))
                .is_err());
        }
        assert!(OsSystem
            .create_dir_beneath(&root, Utf8Path::new("logs/x"))
            .is_err());
        assert!(OsSystem
            .refuse_links_beneath(&root, Utf8Path::new("logs"))
            .is_err());
        assert!(OsSystem
            .refuse_links_beneath(&root, Utf8Path::new("missing/dir"))
            .is_ok());
        // A linked file (dangling or not): replaced by a regular file, never followed.
        std::os::unix::fs::symlink(outside.join("victim"), root.join("plan.txt")).unwrap();
        std::os::unix::fs::symlink(outside.join("new"), root.join("dangling")).unwrap();
        std::os::unix::fs::symlink(outside.join("victim"), root.join("out.txt")).unwrap();
        assert!(OsSystem
            .write_beneath(&root, &root.join("plan.txt"), &[b"mine\n"])
            .unwrap());
        OsSystem
            .replace_beneath(&root, Utf8Path::new("dangling"), &[b"mine\n"])
            .unwrap();
        let mut file = OsSystem
            .create_output_beneath(&root, Utf8Path::new("out.txt"))
            .unwrap();
        file.write_all(b"mine\n").unwrap();
        for name in ["plan.txt", "dangling", "out.txt"] {
            assert!(!is_link(&root.join(name)), "{name} is still a link");
            assert_eq!(OsSystem.read(&root.join(name)).unwrap(), b"mine\n");
        }
        assert_eq!(
            OsSystem.read(&outside.join("victim")).unwrap(),
            b"precious\n"
        );
        assert!(!outside.join("new").as_std_path().exists());
        // Missing directories are made; the root itself may be reached through a link.
        let (_other, elsewhere) = dir();
        std::os::unix::fs::symlink(&root, elsewhere.join("root")).unwrap();
        assert!(OsSystem
            .write_beneath(&elsewhere.join("root"), Utf8Path::new("a/b/c.txt"), &[b"c"])
            .unwrap());
        assert_eq!(OsSystem.read(&root.join("a/b/c.txt")).unwrap(), b"c");
        assert!(!OsSystem
            .write_beneath(&root, Utf8Path::new("a/b/c.txt"), &[b"c"])
            .unwrap());
        // Nothing outside the root, and no `..`.
        for rel in ["../x", "/etc/x", ""] {
            assert!(
                OsSystem
                    .write_beneath(&root, Utf8Path::new(rel), &[b"x"])
                    .is_err(),
                "{rel}"
            );
        }
        OsSystem
            .remove_beneath(&root, Utf8Path::new("a/b/c.txt"))
            .unwrap();
        assert!(!root.join("a/b/c.txt").as_std_path().exists());
    }

    #[test]
    fn an_output_file_follows_links_inside_the_project_only() {
        let (_tmp, root, _out, outside) = project_and_victim();
        std::fs::create_dir(root.join("real")).unwrap();
        // A link inside the project: followed, as before.
        std::os::unix::fs::symlink(root.join("real/out.yml"), root.join("in.yml")).unwrap();
        assert!(OsSystem
            .write_output(&root, &root.join("in.yml"), &[b"a\n"])
            .unwrap());
        assert!(is_link(&root.join("in.yml")));
        assert_eq!(OsSystem.read(&root.join("real/out.yml")).unwrap(), b"a\n");
        // A link out of the project (dangling, or through `..` past a missing directory):
        // replaced.
        std::os::unix::fs::symlink(outside.join("victim"), root.join("out.yml")).unwrap();
        let sneaky = format!("missing/../../{}/sneaky", outside.file_name().unwrap());
        std::os::unix::fs::symlink(sneaky, root.join("sneaky.yml")).unwrap();
        for name in ["out.yml", "sneaky.yml"] {
            assert!(OsSystem
                .write_output(&root, &root.join(name), &[b"b\n"])
                .unwrap());
            assert!(!is_link(&root.join(name)), "{name}");
            assert_eq!(OsSystem.read(&root.join(name)).unwrap(), b"b\n");
        }
        assert_eq!(
            OsSystem.read(&outside.join("victim")).unwrap(),
            b"precious\n"
        );
        assert!(!outside.join("sneaky").as_std_path().exists());
        // A linked directory out of the project: refused.
        std::os::unix::fs::symlink(&outside, root.join("gen")).unwrap();
        assert!(OsSystem
            .write_output(&root, &root.join("gen/victim"), &[b"c\n"])
            .is_err());
        assert_eq!(
            OsSystem.read(&outside.join("victim")).unwrap(),
            b"precious\n"
        );
        // Outside the project: the user's own path, links followed.
        std::os::unix::fs::symlink(outside.join("victim"), outside.join("mine.yml")).unwrap();
        assert!(OsSystem
            .write_output(&root, &outside.join("mine.yml"), &[b"d\n"])
            .unwrap());
        assert_eq!(OsSystem.read(&outside.join("victim")).unwrap(), b"d\n");
    }

    #[test]
    fn a_regular_read_refuses_a_fifo_without_blocking() {
        let (_tmp, dir) = dir();
        let fifo = std::ffi::CString::new(dir.join("vars.tfvars").as_str()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let err = OsSystem
            .read_regular(&dir.join("vars.tfvars"), 100)
            .unwrap_err();
        assert_eq!(err.to_string(), "not a regular file but a FIFO");
        std::fs::write(dir.join("ok.tfvars"), "x = 1\n").unwrap();
        std::os::unix::fs::symlink(dir.join("ok.tfvars"), dir.join("link.tfvars")).unwrap();
        assert_eq!(
            OsSystem
                .read_regular(&dir.join("link.tfvars"), 100)
                .unwrap(),
            b"x = 1\n"
        );
        assert!(matches!(
            OsSystem.read_regular(&dir.join("ok.tfvars"), 3),
            Err(ReadError::TooLarge { limit: 3 })
        ));
    }

    #[test]
    fn a_fifo_is_written_in_place_not_replaced_by_a_regular_file() {
        use std::os::unix::fs::FileTypeExt;
        let (_tmp, dir) = dir();
        let fifo = dir.join("pipe");
        let c_path = std::ffi::CString::new(fifo.as_str()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || OsSystem.read(&fifo).unwrap())
        };
        OsSystem.write_atomic(&fifo, b"jobs\n").unwrap();
        assert_eq!(reader.join().unwrap(), b"jobs\n");
        let meta = std::fs::symlink_metadata(&fifo).unwrap();
        assert!(meta.file_type().is_fifo(), "the FIFO is still a FIFO");
    }

    /// A 64-bit little-endian ELF header with one program header, of type `kind`, over
    /// `notes` (which follow it).
    fn elf_with_notes(kind: u32, notes: &[u8]) -> Vec<u8> {
        let mut elf = vec![0u8; 64];
        elf[..6].copy_from_slice(b"\x7fELF\x02\x01");
        elf[0x20..0x28].copy_from_slice(&64u64.to_le_bytes());
        elf[0x36..0x38].copy_from_slice(&56u16.to_le_bytes());
        elf[0x38..0x3a].copy_from_slice(&1u16.to_le_bytes());
        let mut ph = vec![0u8; 56];
        ph[..4].copy_from_slice(&kind.to_le_bytes());
        ph[8..16].copy_from_slice(&120u64.to_le_bytes());
        ph[32..40].copy_from_slice(&(notes.len() as u64).to_le_bytes());
        elf.extend(ph);
        elf.extend_from_slice(notes);
        elf
    }

    fn note(name: &[u8], kind: u32, desc: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend((name.len() as u32).to_le_bytes());
        out.extend((desc.len() as u32).to_le_bytes());
        out.extend(kind.to_le_bytes());
        out.extend_from_slice(name);
        out.resize(out.len().next_multiple_of(4), 0);
        out.extend_from_slice(desc);
        out.resize(out.len().next_multiple_of(4), 0);
        out
    }

    #[test]
    fn the_build_id_is_the_gnu_note_of_the_elf_file_and_nothing_else_is() {
        let id = [0xab; 20];
        let mut notes = note(b"GNU\0", 1, &[0, 0, 0, 0, 3, 0, 0, 0]);
        notes.extend(note(b"GNU\0", 3, &id));
        let elf = elf_with_notes(4, &notes);
        let found = elf_build_id(&mut std::io::Cursor::new(&elf));
        assert_eq!(found.as_deref(), Some(&id[..]), "after the ABI tag note");
        // Not a note segment, another owner's note, not ELF, cut short.
        assert_eq!(
            elf_build_id(&mut std::io::Cursor::new(elf_with_notes(1, &notes))),
            None
        );
        let foreign = elf_with_notes(4, &note(b"Xen\0", 3, &id));
        assert_eq!(elf_build_id(&mut std::io::Cursor::new(foreign)), None);
        assert_eq!(
            elf_build_id(&mut std::io::Cursor::new(b"#!/bin/sh\n".repeat(20))),
            None
        );
        assert_eq!(elf_build_id(&mut std::io::Cursor::new(&elf[..130])), None);
    }

    #[test]
    fn the_running_program_is_identified_by_content_not_by_its_file() {
        let id = OsSystem
            .program_id()
            .expect("the test binary is identified");
        assert!(
            id.starts_with(b"build-id:"),
            "this toolchain's linker writes a build ID: {:?}",
            String::from_utf8_lossy(&id)
        );
    }
}
