//! `write_atomically`: whole files only, and the permissions a user expects.

use std::os::unix::fs::PermissionsExt;

use tcc_files::write_atomically as write_file_atomically;

fn mode(path: &std::path::Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn a_new_file_gets_a_new_files_permissions_not_0600() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.md");
    write_file_atomically(&path, b"hello").unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"hello");
    // The umask may remove bits, but group/other read stays unless the umask says otherwise,
    // and a plain created file shows what the umask allows.
    let plain = dir.path().join("plain");
    std::fs::write(&plain, b"").unwrap();
    assert_eq!(mode(&path), mode(&plain));
}

#[test]
fn a_replaced_file_keeps_its_permissions() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.jsonl");
    std::fs::write(&path, b"old").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
    write_file_atomically(&path, b"new contents").unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"new contents");
    assert_eq!(mode(&path), 0o640);
}

#[test]
fn an_unwritable_folder_is_an_error_and_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("file");
    std::fs::write(&blocker, b"x").unwrap();
    let err = write_file_atomically(&blocker.join("out.md"), b"data").unwrap_err();
    assert!(!err.to_string().is_empty());
    let entries: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(entries.len(), 1, "only the blocking file is there");
}
