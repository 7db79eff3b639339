//! The reflector's side of the durable cache (`cache.persist_dir`): at start, the resource's
//! cache is rebuilt from its directory before discovery (so that it answers while the
//! upstream is unreachable), and every cache the reflector makes gets a writer thread that
//! keeps the directory current. The files themselves are `crate::persist`'s.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::cache::{CacheSettings, CacheWriter, ResourceCache, ResourceInfo};
use crate::config::ResourceSpec;
use crate::persist::resource::{self, DirLock, LockError};
use crate::persist::{segments, writer};

/// How long a start waits for the directory's lock (an earlier writer of the same process
/// finishing its last batch) before it runs without persistence.
const LOCK_WAIT: Duration = Duration::from_secs(10);

/// The resource's directory under `cache.persist_dir`, if persistence is on.
pub(super) fn dir_of(settings: &CacheSettings, spec: &ResourceSpec) -> Option<PathBuf> {
    let root = settings.persist_dir.as_ref()?;
    let group = if spec.group.is_empty() {
        "core"
    } else {
        &spec.group
    };
    Some(root.join(format!("{group}_{}_{}", spec.version, spec.resource)))
}

/// Takes `dir`, waiting up to [`LOCK_WAIT`] for a holder that is finishing; `None` (logged)
/// when it cannot: the resource then runs without persistence.
pub(super) async fn lock(dir: &Path, spec: &ResourceSpec) -> Option<DirLock> {
    let deadline = tokio::time::Instant::now() + LOCK_WAIT;
    loop {
        match resource::lock(dir) {
            Ok(l) => return Some(l),
            Err(LockError::Held(_)) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => {
                tracing::error!(resource = %spec, error = %e, "the cache is not persisted");
                return None;
            }
        }
    }
}

/// A cache filled from its directory, and what the directory holds (the bytes of its state
/// and of the records after it, for the writer's checkpoint bound).
pub(super) struct Restored {
    pub writer: CacheWriter,
    pub on_disk: (u64, u64),
}

/// Reads `dir` (repairing what a crash damaged, each finding logged) and fills a cache from it,
/// off the runtime (reading and decoding a large cache takes seconds). With type information
/// and a complete state, returns the cache; otherwise `None` (and [`attach`] empties the
/// directory for the fresh cache discovery makes).
pub(super) async fn restore(
    dir: &Path,
    spec: &ResourceSpec,
    settings: &CacheSettings,
) -> Option<Restored> {
    let mut info = match resource::load_info(dir) {
        Ok(Some(info)) => info,
        Ok(None) => return None,
        Err(line) => {
            tracing::warn!(resource = %spec, "persisted cache not used: {line}");
            return None;
        }
    };
    // Which fields are indexed is the configuration's, not the directory's: the index is
    // rebuilt from the objects either way.
    info.index_fields = spec.effective_index_fields();
    let d = dir.to_path_buf();
    let settings = settings.clone();
    let s = spec.clone();
    let done = tokio::task::spawn_blocking(move || {
        let loaded = match segments::load(&d) {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(resource = %s, error = %e, "persisted cache not used");
                return None;
            }
        };
        for line in &loaded.dropped {
            tracing::warn!(resource = %s, "persisted cache damaged: {line}");
        }
        if loaded.state_rv == 0 {
            return None;
        }
        let (_, writer) = ResourceCache::new(info, settings);
        match writer.restore(&loaded) {
            Ok(rv) => {
                tracing::info!(resource = %s, resource_version = rv, objects = loaded.objects.len(), events = loaded.tail.len(), "cache restored from disk");
                Some(Restored {
                    writer,
                    on_disk: (loaded.state_bytes, loaded.tail_bytes),
                })
            }
            Err(e) => {
                tracing::warn!(resource = %s, error = %e, "persisted cache not used: an object does not decode");
                None
            }
        }
    })
    .await;
    match done {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(resource = %spec, error = %e, "persisted cache not used");
            None
        }
    }
}

/// Starts the directory's writer for `writer`'s cache (`on_disk`: what the directory holds of
/// it, when it was restored from there); a fresh cache's directory is emptied and its type
/// saved first.
/// Returns the writer's thread, which ends once the cache's writer is dropped and the last
/// batch is on disk.
pub(super) fn attach(
    writer: &mut CacheWriter,
    dir: &Path,
    lock: DirLock,
    on_disk: Option<(u64, u64)>,
    spec: &ResourceSpec,
) -> Option<std::thread::JoinHandle<()>> {
    let started = (|| {
        if on_disk.is_none() {
            segments::clear(dir)?;
            resource::save_info(dir, writer.info())?;
        }
        let cache = writer.cache().clone();
        let fresh = writer.cache().clone();
        writer::Persister::spawn(
            dir.to_path_buf(),
            Some(lock),
            on_disk,
            Box::new(move || cache.persisted_state()),
            Box::new(move || fresh.persisted_freshness()),
            writer::Settings::default(),
        )
    })();
    match started {
        Ok((p, thread)) => {
            writer.persist_to(p);
            Some(thread)
        }
        Err(e) => {
            tracing::error!(resource = %spec, error = %e, "the cache is not persisted");
            None
        }
    }
}

/// Whether a restored cache's type is still the upstream's, as discovery describes it.
pub(super) fn same_type(restored: &ResourceInfo, discovered: &ResourceInfo) -> bool {
    resource::same_type(restored, discovered)
}

/// Reports a restored cache whose type the upstream no longer serves, found after it was
/// published (discovery was unreachable at start): it keeps serving as restored, its
/// directory is emptied so that the next start syncs afresh.
pub(super) fn type_changed_while_serving(dir: Option<&Path>, spec: &ResourceSpec) {
    tracing::error!(resource = %spec, "the persisted cache was made for another type (kind, scope or selectable fields) than the upstream now serves; it keeps serving until watchmux restarts, which syncs it afresh");
    if let Some(dir) = dir
        && let Err(e) = resource::forget(dir)
    {
        tracing::error!(resource = %spec, error = %e, "could not empty the persisted cache's directory");
    }
}
