//! Writing a file whole or not at all, the one way every tcc crate writes files it keeps (outputs
//! of `-o`, reports, cache exports, lockfiles, the tuner's reference files): into a temporary file
//! in the same folder, flushed to disk, then renamed over the target (contract §4). A failed
//! write never leaves a half-written file and never touches the file it would replace.

#![warn(missing_docs)]

use std::io::Write;
use std::path::Path;

/// Writes `bytes` to `path` whole or not at all. The file keeps the permissions of the file it
/// replaces; a new one gets a new file's usual permissions (0666 less the umask), not a
/// temporary file's private 0600.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_atomically_with(path, |out| out.write_all(bytes))
}

/// [`write_atomically`] for contents produced by `write` into a buffered writer (large files
/// need not be built in memory first).
pub fn write_atomically_with(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let replaced = std::fs::metadata(path).ok().map(|m| m.permissions());
    let mut builder = tempfile::Builder::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        builder.permissions(std::fs::Permissions::from_mode(0o666));
    }
    let tmp = builder.tempfile_in(dir)?;
    if let Some(perms) = replaced {
        tmp.as_file().set_permissions(perms)?;
    }
    {
        let mut out = std::io::BufWriter::new(tmp.as_file());
        write(&mut out)?;
        out.flush()?;
    }
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}
