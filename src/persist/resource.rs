//! A resource's persisted directory as a whole: the lock that gives one process the
//! directory, and the type information (`info.json`) that lets a restarted watchmux rebuild
//! the cache before the upstream's discovery answers.

use std::fs::{self, File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::segments::IoError;
use crate::cache::ResourceInfo;

/// Why a resource's directory could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another process (or an earlier writer of this one, still finishing) holds it.
    #[error("{0}: held by another watchmux (or one still finishing its writes)")]
    Held(PathBuf),
    /// The directory or its lock file could not be made or opened.
    #[error(transparent)]
    Io(#[from] IoError),
}

/// The exclusive lock of a resource's directory: held while it is read and written, released
/// when dropped (or when the process dies).
#[derive(Debug)]
pub struct DirLock {
    _file: File,
}

/// Takes `dir` (creating it) for this process, without waiting.
pub fn lock(dir: &Path) -> Result<DirLock, LockError> {
    let io = |source| IoError {
        path: dir.to_path_buf(),
        source,
    };
    fs::create_dir_all(dir).map_err(io)?;
    let path = dir.join("LOCK");
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(io)?;
    match file.try_lock() {
        Ok(()) => Ok(DirLock { _file: file }),
        Err(std::fs::TryLockError::WouldBlock) => Err(LockError::Held(dir.to_path_buf())),
        Err(std::fs::TryLockError::Error(e)) => Err(io(e).into()),
    }
}

/// What `info.json` holds: what discovery said of the resource.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
struct Info {
    group: String,
    version: String,
    resource: String,
    kind: String,
    namespaced: bool,
    selectable_fields: Vec<String>,
    index_fields: Vec<String>,
}

/// Writes `info` as the directory's type information (atomically: a crash leaves the old file
/// or the new one).
pub fn save_info(dir: &Path, info: &ResourceInfo) -> Result<(), IoError> {
    let i = Info {
        group: info.group.clone(),
        version: info.version.clone(),
        resource: info.resource.clone(),
        kind: info.kind.clone(),
        namespaced: info.namespaced,
        selectable_fields: info.selectable_fields.clone(),
        index_fields: info.index_fields.clone(),
    };
    let path = dir.join("info.json");
    let tmp = dir.join("info.json.tmp");
    let io = |p: &Path| {
        let p = p.to_path_buf();
        move |source| IoError { path: p, source }
    };
    let mut f = File::create(&tmp).map_err(io(&tmp))?;
    f.write_all(&serde_json::to_vec(&i).expect("plain data serialises"))
        .map_err(io(&tmp))?;
    f.sync_all().map_err(io(&tmp))?;
    fs::rename(&tmp, &path).map_err(io(&path))?;
    File::open(dir).and_then(|d| d.sync_all()).map_err(io(dir))
}

/// Removes the directory's type information, so that the next start does not use what the
/// directory holds (and empties it for a fresh cache). The segments may go on being written
/// meanwhile: without `info.json` nothing reads them.
pub fn forget(dir: &Path) -> Result<(), IoError> {
    let path = dir.join("info.json");
    match fs::remove_file(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => return Err(IoError { path, source }),
    }
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|source| IoError {
            path: dir.to_path_buf(),
            source,
        })
}

/// The directory's type information: `Ok(None)` when there is none, `Err` with a line naming
/// the file when it does not read (then the directory is not used).
pub fn load_info(dir: &Path) -> Result<Option<ResourceInfo>, String> {
    let path = dir.join("info.json");
    let bytes = match fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let i: Info = serde_json::from_slice(&bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut info = ResourceInfo::new(&i.group, &i.version, &i.resource, &i.kind, i.namespaced);
    info.selectable_fields = i.selectable_fields;
    info.index_fields = i.index_fields;
    Ok(Some(info))
}

/// Whether two descriptions of a resource agree on everything the cache's contents depend on.
pub fn same_type(a: &ResourceInfo, b: &ResourceInfo) -> bool {
    (
        &a.group,
        &a.version,
        &a.resource,
        &a.kind,
        a.namespaced,
        &a.selectable_fields,
        &a.index_fields,
    ) == (
        &b.group,
        &b.version,
        &b.resource,
        &b.kind,
        b.namespaced,
        &b.selectable_fields,
        &b.index_fields,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_round_trips_and_a_bad_file_is_an_error() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(load_info(d.path()), Ok(None));
        let mut info = ResourceInfo::new("apps", "v1", "deployments", "Deployment", true);
        info.index_fields = vec!["metadata.name".into()];
        save_info(d.path(), &info).unwrap();
        let back = load_info(d.path()).unwrap().unwrap();
        assert!(same_type(&back, &info));
        assert_eq!(back.type_prefix, info.type_prefix);
        fs::write(d.path().join("info.json"), b"{\"group\":").unwrap();
        let e = load_info(d.path()).unwrap_err();
        assert!(e.contains("info.json"), "{e}");
    }

    #[test]
    fn one_holder_at_a_time() {
        let d = tempfile::tempdir().unwrap();
        let held = lock(d.path()).unwrap();
        assert!(matches!(lock(d.path()), Err(LockError::Held(_))));
        drop(held);
        lock(d.path()).unwrap();
    }
}
