//! Writes beneath a directory that follow no symlink below it (the real machine's side of
//! [`System::write_beneath`](super::System::write_beneath)): the root is opened as named,
//! every directory below it with `openat(O_DIRECTORY | O_NOFOLLOW)` from the one above
//! (`mkdirat` when missing), files are made with `O_CREAT | O_EXCL | O_NOFOLLOW` and put
//! in place with `renameat`, which replaces a link instead of following it.
#![allow(clippy::disallowed_methods)]

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
use std::os::unix::fs::OpenOptionsExt as _;

use camino::{Utf8Component, Utf8Path, Utf8PathBuf};

/// An open directory, and its path as named (for messages).
pub(super) struct Dir {
    fd: OwnedFd,
    path: Utf8PathBuf,
}

fn c_name(name: &str) -> io::Result<CString> {
    CString::new(name).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("`{}` holds a NUL byte", crate::escape::printable(name)),
        )
    })
}

fn last_error() -> io::Error {
    io::Error::last_os_error()
}

/// Takes ownership of a descriptor a successful call returned.
fn owned(fd: libc::c_int) -> io::Result<OwnedFd> {
    if fd < 0 {
        return Err(last_error());
    }
    // SAFETY: `fd` was just returned open by the kernel and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The directory `rel` beneath `root`: `root` opened as named (links followed: the
/// caller chose it), each component of `rel` without following a link. With `create`,
/// missing directories (`root` too) are made.
pub(super) fn open_dir(root: &Utf8Path, rel: &Utf8Path, create: bool) -> io::Result<Dir> {
    if create {
        std::fs::create_dir_all(root)?;
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(root)?;
    let mut dir = Dir {
        fd: file.into(),
        path: root.to_owned(),
    };
    for component in rel.components() {
        match component {
            Utf8Component::Normal(name) => dir = dir.child(name, create)?,
            Utf8Component::CurDir => {}
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("`{rel}` leaves `{root}`"),
                ))
            }
        }
    }
    Ok(dir)
}

impl Dir {
    fn raw(&self) -> libc::c_int {
        self.fd.as_raw_fd()
    }

    /// The directory `name` in this one, never through a link.
    fn child(&self, name: &str, create: bool) -> io::Result<Dir> {
        let c = c_name(name)?;
        let path = self.path.join(name);
        let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: `c` is a NUL-terminated name, `self.fd` an open directory.
        let open = || unsafe { libc::openat(self.raw(), c.as_ptr(), flags) };
        let mut fd = open();
        if fd < 0 && create && last_error().raw_os_error() == Some(libc::ENOENT) {
            // SAFETY: as above.
            let made = unsafe { libc::mkdirat(self.raw(), c.as_ptr(), 0o777) };
            if made < 0 && last_error().raw_os_error() != Some(libc::EEXIST) {
                return Err(last_error());
            }
            fd = open();
        }
        if fd < 0 {
            let error = last_error();
            if self.is_link(&c) {
                return Err(super::link_refused(&path));
            }
            return Err(error);
        }
        Ok(Dir {
            fd: owned(fd)?,
            path,
        })
    }

    /// The kind (`S_IFMT` bits) of the entry `name` here, a link's own (not followed).
    fn kind(&self, name: &CString) -> Option<libc::mode_t> {
        let mut stat = std::mem::MaybeUninit::<libc::stat>::uninit();
        // SAFETY: `name` is NUL-terminated and `stat` has room for the result, which is
        // read only when the call succeeded.
        unsafe {
            let found = libc::fstatat(
                self.raw(),
                name.as_ptr(),
                stat.as_mut_ptr(),
                libc::AT_SYMLINK_NOFOLLOW,
            ) == 0;
            found.then(|| stat.assume_init().st_mode & libc::S_IFMT)
        }
    }

    /// Whether the entry `name` here is a symlink (not followed).
    fn is_link(&self, name: &CString) -> bool {
        self.kind(name) == Some(libc::S_IFLNK)
    }

    /// The regular file `name` here, open for reading; `None` when it is missing, a link
    /// (never followed) or anything but a regular file.
    pub(super) fn open_regular(&self, name: &str) -> Option<File> {
        let c = c_name(name).ok()?;
        // Only a regular file is opened: opening a device can do something.
        if self.kind(&c) != Some(libc::S_IFREG) {
            return None;
        }
        let flags =
            libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC;
        // SAFETY: `c` is NUL-terminated, `self.fd` an open directory.
        let file = File::from(owned(unsafe { libc::openat(self.raw(), c.as_ptr(), flags) }).ok()?);
        file.metadata().ok()?.is_file().then_some(file)
    }

    /// Replaces `name` here with what `write` writes to a new temp file beside it (then
    /// renamed over `name`, which replaces a link there instead of following it), with
    /// `permissions` when given; on an error the temp file is removed and `name` left as
    /// it was.
    pub(super) fn replace(
        &self,
        name: &str,
        permissions: Option<std::fs::Permissions>,
        write: impl FnOnce(&mut File) -> io::Result<()>,
    ) -> io::Result<()> {
        let target = c_name(name)?;
        // Unique per process and thread: concurrent writers never share a temp file.
        let tmp = c_name(&format!(
            ".{name}.{}.{:?}.tmp",
            std::process::id(),
            std::thread::current().id()
        ))?;
        let flags =
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: `tmp` is NUL-terminated, `self.fd` an open directory; the mode is the
        // variadic argument O_CREAT reads.
        let fd = unsafe { libc::openat(self.raw(), tmp.as_ptr(), flags, 0o666 as libc::c_uint) };
        let mut file = File::from(owned(fd)?);
        let result = (|| {
            if let Some(permissions) = permissions {
                file.set_permissions(permissions)?;
            }
            write(&mut file)?;
            // SAFETY: both names are NUL-terminated, in the same open directory.
            let renamed =
                unsafe { libc::renameat(self.raw(), tmp.as_ptr(), self.raw(), target.as_ptr()) };
            if renamed < 0 {
                return Err(last_error());
            }
            Ok(())
        })();
        if result.is_err() {
            // SAFETY: as above; a failure leaves nothing worse than a temp file.
            unsafe { libc::unlinkat(self.raw(), tmp.as_ptr(), 0) };
        }
        result
    }

    /// A new empty file `name` here, open for reading and writing: whatever was there
    /// (a file, a link: not followed) is removed first.
    pub(super) fn create(&self, name: &str) -> io::Result<File> {
        match self.remove(name) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let c = c_name(name)?;
        let flags =
            libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: `c` is NUL-terminated, `self.fd` an open directory; the mode is the
        // variadic argument O_CREAT reads.
        let fd = unsafe { libc::openat(self.raw(), c.as_ptr(), flags, 0o666 as libc::c_uint) };
        Ok(File::from(owned(fd)?))
    }

    /// Removes the entry `name` here (a link itself, not its target).
    pub(super) fn remove(&self, name: &str) -> io::Result<()> {
        let c = c_name(name)?;
        // SAFETY: `c` is NUL-terminated, `self.fd` an open directory.
        if unsafe { libc::unlinkat(self.raw(), c.as_ptr(), 0) } < 0 {
            return Err(last_error());
        }
        Ok(())
    }
}
