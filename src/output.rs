//! Where `-o` writes, safely: standard output for `-`, otherwise a temporary file beside the
//! output that replaces it only when the whole run succeeded, and never the input file.
//!
//! - `-o -` (or a path naming this process's standard output, such as `/dev/stdout`) writes the
//!   pcap to standard output; the summary then goes to standard error. A terminal is refused.
//! - A regular file, or a new one, is written as a hidden temporary file in the same directory
//!   and renamed over the output at the end: a failed run leaves the old file as it was.
//!   Symbolic links are followed, so the file a link points to is replaced, not the link.
//! - An existing file that is not a regular file (`/dev/null`, a FIFO) is written in place.
//! - An output that is the input file (same device and inode: the same path, a symbolic link
//!   to it, or a hard link) is refused before anything is written.

use std::fmt;
use std::fs::{File, Metadata, Permissions};
use std::io::{self, IsTerminal, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// A problem with the output: it cannot be created or written, or it is refused (exit status
/// 4).
#[derive(Debug)]
pub(crate) struct OutputError(pub(crate) String);

impl fmt::Display for OutputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for OutputError {}

/// A file's identity: device and inode. Two names of one file (links, symbolic links, `..`
/// paths) have the same identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileId {
    dev: u64,
    ino: u64,
}

impl FileId {
    fn of(meta: &Metadata) -> Self {
        FileId {
            dev: meta.dev(),
            ino: meta.ino(),
        }
    }

    /// The identity of the file `path` names (symbolic links followed), if it exists.
    pub(crate) fn of_path(path: &Path) -> Option<Self> {
        std::fs::metadata(path).ok().map(|m| Self::of(&m))
    }

    /// The identity of the file behind standard input (a pipe, a terminal or a file).
    pub(crate) fn of_stdin() -> Option<Self> {
        let fd = io::stdin().as_fd().try_clone_to_owned().ok()?;
        File::from(fd).metadata().ok().map(|m| Self::of(&m))
    }

    fn of_stdout() -> Option<(Self, File)> {
        let fd = io::stdout().as_fd().try_clone_to_owned().ok()?;
        let file = File::from(fd);
        let meta = file.metadata().ok()?;
        Some((Self::of(&meta), file))
    }
}

/// Whether a path argument means standard input or output.
pub(crate) fn is_dash(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// Where the bytes go.
enum Dest {
    /// Standard output (a duplicate of its descriptor, unbuffered: the caller buffers).
    Stdout(File),
    /// A temporary file beside `target`, renamed over it by [`OutFile::commit`].
    Replace {
        tmp: tempfile::NamedTempFile,
        target: PathBuf,
        /// The replaced file's permissions, kept (a new file gets 0666 less the umask).
        permissions: Option<Permissions>,
    },
    /// An existing file that is not a regular file, written in place.
    InPlace(File),
}

/// An output opened for writing.
pub(crate) struct OutFile {
    /// The name as the user gave it (`-` shown as `stdout`).
    name: String,
    dest: Dest,
}

impl fmt::Debug for OutFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OutFile").field("name", &self.name).finish()
    }
}

impl OutFile {
    /// Opens `path` for writing `what` (for messages: "a binary pcap"), refusing the input
    /// (`input`: its identity, `input_name`: its name for the message).
    pub(crate) fn open(
        path: &Path,
        input: Option<FileId>,
        input_name: &str,
        what: &str,
    ) -> Result<OutFile, OutputError> {
        let shown = path.display().to_string();
        let fail = |what: String| OutputError(format!("{shown}: {what}"));
        let stdout = FileId::of_stdout();
        if is_dash(path) {
            let (_, file) = stdout.ok_or_else(|| fail("standard output is closed".to_string()))?;
            return Self::stdout(file, "stdout".to_string(), input, input_name, what);
        }
        match std::fs::metadata(path) {
            Ok(meta) => {
                let id = FileId::of(&meta);
                if Some(id) == input {
                    return Err(fail(format!(
                        "this is the input file ({input_name}): refusing to overwrite it; choose another output"
                    )));
                }
                if let Some((out_id, file)) = stdout {
                    if out_id == id {
                        // `/dev/stdout`, `/proc/self/fd/1`, or the file stdout is redirected to.
                        return Self::stdout(file, shown, input, input_name, what);
                    }
                }
                let kind = meta.file_type();
                if kind.is_dir() {
                    return Err(fail("is a directory".to_string()));
                }
                let target = std::fs::canonicalize(path)
                    .map_err(|e| fail(format!("cannot resolve the path: {e}")))?;
                if kind.is_file() {
                    Self::replace(shown, target, Some(meta.permissions()))
                } else {
                    // A character device, a FIFO or a socket: no file to replace.
                    let file = File::options()
                        .write(true)
                        .open(&target)
                        .map_err(|e| fail(format!("cannot open for writing: {e}")))?;
                    Ok(OutFile {
                        name: shown,
                        dest: Dest::InPlace(file),
                    })
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if std::fs::symlink_metadata(path).is_ok() {
                    return Err(fail(
                        "a symbolic link to a file that does not exist (give the target path)"
                            .to_string(),
                    ));
                }
                // `Path::file_name` reads `dir/` as `dir`: a name ending in a slash names a
                // directory, which does not exist, not a file to create.
                if path.as_os_str().as_encoded_bytes().ends_with(b"/") {
                    return Err(fail("a directory that does not exist".to_string()));
                }
                let file_name = path
                    .file_name()
                    .ok_or_else(|| fail("not a file name".to_string()))?;
                let parent = match path.parent() {
                    Some(p) if !p.as_os_str().is_empty() => p,
                    _ => Path::new("."),
                };
                let dir = std::fs::canonicalize(parent).map_err(|e| {
                    fail(format!(
                        "cannot create: directory {} {}",
                        parent.display(),
                        if e.kind() == io::ErrorKind::NotFound {
                            "does not exist".to_string()
                        } else {
                            format!("cannot be read: {e}")
                        }
                    ))
                })?;
                Self::replace(shown, dir.join(file_name), None)
            }
            Err(e) => Err(fail(format!("cannot open: {e}"))),
        }
    }

    fn stdout(
        file: File,
        name: String,
        input: Option<FileId>,
        input_name: &str,
        what: &str,
    ) -> Result<OutFile, OutputError> {
        if io::stdout().is_terminal() {
            return Err(OutputError(format!(
                "{name}: refusing to write {what} to a terminal; redirect standard output or name a file"
            )));
        }
        let meta = file
            .metadata()
            .map_err(|e| OutputError(format!("{name}: {e}")))?;
        if meta.file_type().is_file() && Some(FileId::of(&meta)) == input {
            return Err(OutputError(format!(
                "{name}: standard output is the input file ({input_name}): refusing to overwrite it"
            )));
        }
        Ok(OutFile {
            name,
            dest: Dest::Stdout(file),
        })
    }

    fn replace(
        name: String,
        target: PathBuf,
        permissions: Option<Permissions>,
    ) -> Result<OutFile, OutputError> {
        let dir = target.parent().unwrap_or(Path::new("."));
        let stem = target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let tmp = tempfile::Builder::new()
            .prefix(&format!(".{stem}."))
            .suffix(".lro-tmp")
            // Like File::create: read and write for everyone the umask allows.
            .permissions(Permissions::from_mode(0o666))
            .tempfile_in(dir)
            .map_err(|e| {
                OutputError(format!(
                    "{name}: cannot create a temporary file in {}: {e}",
                    dir.display()
                ))
            })?;
        Ok(OutFile {
            name,
            dest: Dest::Replace {
                tmp,
                target,
                permissions,
            },
        })
    }

    /// The output's name for messages and the summary.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Whether the output is standard output (the summary must then go to standard error).
    pub(crate) fn is_stdout(&self) -> bool {
        matches!(self.dest, Dest::Stdout(_))
    }

    /// Makes the written bytes the output: syncs and renames a temporary file over the target.
    /// Dropping an output without committing it removes the temporary file.
    pub(crate) fn commit(self) -> Result<(), OutputError> {
        let name = self.name;
        let fail = |what: &str, e: &dyn fmt::Display| OutputError(format!("{name}: {what}: {e}"));
        match self.dest {
            Dest::Stdout(mut f) | Dest::InPlace(mut f) => {
                f.flush().map_err(|e| fail("cannot write", &e))
            }
            Dest::Replace {
                tmp,
                target,
                permissions,
            } => {
                tmp.as_file()
                    .sync_all()
                    .map_err(|e| fail("cannot write", &e))?;
                if let Some(p) = permissions {
                    tmp.as_file()
                        .set_permissions(p)
                        .map_err(|e| fail("cannot set permissions", &e))?;
                }
                tmp.persist(&target)
                    .map_err(|e| fail("cannot replace the file", &e.error))?;
                Ok(())
            }
        }
    }
}

impl Write for OutFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &mut self.dest {
            Dest::Stdout(f) | Dest::InPlace(f) => f.write(buf),
            Dest::Replace { tmp, .. } => tmp.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.dest {
            Dest::Stdout(f) | Dest::InPlace(f) => f.flush(),
            Dest::Replace { tmp, .. } => tmp.flush(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory for one test, removed when dropped: at the end of the test and also
    /// when it fails.
    fn dir(test: &str) -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix(&format!("lro-output-{test}-"))
            .tempdir()
            .expect("temp dir")
    }

    #[test]
    fn a_failed_run_leaves_the_old_file_and_no_temporary() {
        let tmp = dir("keep");
        let d = tmp.path();
        let path = d.join("out.pcap");
        std::fs::write(&path, b"old").unwrap();
        let mut out = OutFile::open(&path, None, "in", "x").expect("opens");
        out.write_all(b"new, half written").unwrap();
        drop(out);
        assert_eq!(std::fs::read(&path).unwrap(), b"old");
        assert_eq!(
            std::fs::read_dir(d).unwrap().count(),
            1,
            "temporary removed"
        );
        let mut out = OutFile::open(&path, None, "in", "x").expect("opens");
        out.write_all(b"new").unwrap();
        out.commit().expect("commits");
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        assert_eq!(std::fs::read_dir(d).unwrap().count(), 1);
    }

    #[test]
    fn the_input_is_refused_by_any_name() {
        let tmp = dir("same");
        let d = tmp.path();
        let input = d.join("in.pcap");
        std::fs::write(&input, b"input").unwrap();
        let hard = d.join("hard.pcap");
        std::fs::hard_link(&input, &hard).unwrap();
        let soft = d.join("soft.pcap");
        std::os::unix::fs::symlink(&input, &soft).unwrap();
        let dotted = d.join(".").join("in.pcap");
        let id = FileId::of_path(&input);
        for name in [&input, &hard, &soft, &dotted] {
            let e = OutFile::open(name, id, "in.pcap", "x").expect_err("refused");
            assert!(e.0.contains("input file"), "{e}");
        }
        assert_eq!(std::fs::read(&input).unwrap(), b"input");
        // Another file is fine, and a symbolic link's target is replaced, not the link.
        let other = d.join("other.pcap");
        std::fs::write(&other, b"x").unwrap();
        let link = d.join("link.pcap");
        std::os::unix::fs::symlink(&other, &link).unwrap();
        let mut out = OutFile::open(&link, id, "in.pcap", "x").expect("opens");
        out.write_all(b"written").unwrap();
        out.commit().unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read(&other).unwrap(), b"written");
    }

    #[test]
    fn a_replaced_file_keeps_its_mode_and_a_new_one_gets_file_creates() {
        let tmp = dir("mode");
        let d = tmp.path();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        let old = d.join("old.pcap");
        std::fs::write(&old, b"old").unwrap();
        std::fs::set_permissions(&old, Permissions::from_mode(0o640)).unwrap();
        let mut out = OutFile::open(&old, None, "in", "x").expect("opens");
        out.write_all(b"new").unwrap();
        out.commit().expect("commits");
        assert_eq!(mode(&old), 0o640, "the replaced file's mode is kept");
        // A new file: what `File::create` gives under the same umask, not the temporary
        // file's private 0600.
        let reference = d.join("reference");
        File::create(&reference).unwrap();
        let new = d.join("new.pcap");
        let mut out = OutFile::open(&new, None, "in", "x").expect("opens");
        out.write_all(b"new").unwrap();
        out.commit().expect("commits");
        assert_eq!(mode(&new), mode(&reference));
    }

    #[test]
    fn a_dangling_symbolic_link_is_refused_and_kept() {
        let tmp = dir("dangling");
        let d = tmp.path();
        let link = d.join("link.pcap");
        std::os::unix::fs::symlink(d.join("gone.pcap"), &link).unwrap();
        let e = OutFile::open(&link, None, "in", "x").expect_err("refused");
        assert!(
            e.0.contains("symbolic link to a file that does not exist"),
            "{e}"
        );
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert!(!d.join("gone.pcap").exists());
    }

    #[test]
    fn missing_directories_and_directories_are_errors() {
        let tmp = dir("dirs");
        let d = tmp.path();
        let e = OutFile::open(&d.join("no/such/dir/out.pcap"), None, "in", "x").expect_err("error");
        assert!(e.0.contains("does not exist"), "{e}");
        // Refused as such, not opened for writing (which fails with the system's message).
        let e = OutFile::open(d, None, "in", "x").expect_err("error");
        assert_eq!(e.0, format!("{}: is a directory", d.display()));
    }
}
