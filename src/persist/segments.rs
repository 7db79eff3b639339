//! A resource's directory of segment files: loading what survived a crash, appending batches,
//! and starting over from a full state to keep the footprint bounded. Blocking file I/O: it
//! runs on a thread of its own, never on the runtime's workers.
//!
//! Files are `<sequence>.seg` (20 digits, so names sort as numbers). Each append is written
//! and `fdatasync`ed before the next is taken. A checkpoint writes the full state into a new
//! segment as `<sequence>.seg.tmp`, syncs it, renames it into place, syncs the directory, and
//! only then deletes the older segments: a crash at any point leaves either the old segments or
//! the new one complete (a `.tmp` is never read, and is removed at the next load).
//!
//! Loading reads the segments in order and keeps the last complete state and every record
//! after it. It stops at the first record that is torn or corrupt, or that does not follow
//! (a state's end without its beginning, an event whose resourceVersion does not increase).
//! Everything from there on is dropped: the rest of that file is cut off (so that appends
//! continue after good data) and later files are deleted. Each such finding is reported in
//! [`Loaded::dropped`] for the caller to log. At worst a crash loses the unflushed tail; it never
//! turns into data.

use std::fs::{self, File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};

use bytes::Bytes;

use super::format::{self, Decoded, MAGIC, Record};

/// An I/O failure, with the file it concerns.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {source}")]
pub struct IoError {
    /// The file or directory.
    pub path: PathBuf,
    /// What failed.
    #[source]
    pub source: std::io::Error,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> IoError + '_ {
    move |source| IoError {
        path: path.to_path_buf(),
        source,
    }
}

/// What a resource's directory held: its last complete state and the records after it.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Loaded {
    /// The state's resourceVersion (0: no complete state was found, and `tail` is empty).
    pub state_rv: u64,
    /// The state's objects.
    pub objects: Vec<Bytes>,
    /// The events, gaps and progress after the state, in order.
    pub tail: Vec<Record>,
    /// What was found damaged and dropped: one line per finding, naming the file and offset.
    pub dropped: Vec<String>,
    /// When the cache was last known to follow the upstream (milliseconds since the Unix
    /// epoch): the last [`Record::Fresh`], else the newest segment's modification time (`None`
    /// for an empty directory).
    pub fresh_ms: Option<u64>,
    /// Bytes of the segment up to the end of the state (its size on disk, about), after repair.
    pub state_bytes: u64,
    /// Bytes of records after the state (what the next checkpoint would free), after repair.
    pub tail_bytes: u64,
}

impl Loaded {
    /// The resourceVersion the log reaches: the last event's or progress's, else the state's.
    pub fn rv(&self) -> u64 {
        self.tail
            .iter()
            .rev()
            .find_map(|r| match r {
                Record::Event { rv, .. } | Record::Progress { rv } => Some(*rv),
                Record::Gap { list_rv, .. } => Some(*list_rv),
                _ => None,
            })
            .unwrap_or(self.state_rv)
    }
}

/// The segment files of `dir`, oldest first, with their sequence numbers.
fn segments(dir: &Path) -> Result<Vec<(u64, PathBuf)>, IoError> {
    let mut out = Vec::new();
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(io(dir)(e)),
    };
    for entry in entries {
        let entry = entry.map_err(io(dir))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(seq) = name
            .strip_suffix(".seg")
            .and_then(|s| s.parse::<u64>().ok())
        {
            out.push((seq, entry.path()));
        } else if name.ends_with(".seg.tmp") {
            // A checkpoint that did not finish: never complete, never read.
            let _ = fs::remove_file(entry.path());
        }
    }
    out.sort();
    Ok(out)
}

/// How much of a checkpoint is encoded before it is written out.
const CHECKPOINT_BUFFER: usize = 1 << 20;

fn segment_path(dir: &Path, seq: u64) -> PathBuf {
    dir.join(format!("{seq:020}.seg"))
}

/// Reads `dir` (a missing directory holds nothing), repairing it as the module says.
pub fn load(dir: &Path) -> Result<Loaded, IoError> {
    let files = segments(dir)?;
    // The state being read (rv, count, objects).
    let mut pending: Option<(u64, u64, Vec<Bytes>)> = None;
    let mut out = Loaded::default();
    let mut last_rv = 0u64;
    // Where the data read so far is consistent (file, offset): after a record read outside a
    // state being read. Damage cuts the directory back to there.
    let mut good = (0usize, MAGIC.len() as u64);
    let mut stop: Option<(usize, u64, String)> = None;
    // Where the last complete state ends (file, offset).
    let mut state_end: Option<(usize, u64)> = None;
    'files: for (i, (_, path)) in files.iter().enumerate() {
        let data = Bytes::from(fs::read(path).map_err(io(path))?);
        if data.get(..MAGIC.len()) != Some(&MAGIC[..]) {
            stop = Some((i, 0, "not a watchmux log segment (bad header)".into()));
            break;
        }
        if pending.is_none() {
            good = (i, MAGIC.len() as u64);
        }
        let mut at = MAGIC.len();
        loop {
            let start = at as u64;
            let r = match format::decode(&data.slice(at..)) {
                Decoded::End => break,
                Decoded::Record(r, n) => {
                    at += n;
                    r
                }
                Decoded::Torn => {
                    stop = Some((i, start, "torn record (a write that did not finish)".into()));
                    break 'files;
                }
                Decoded::Corrupt(why) => {
                    stop = Some((i, start, why));
                    break 'files;
                }
            };
            let why = match r {
                // ResourceVersion 0 means "no state" to the loader's callers (and a cache is
                // never persisted before its first list, whose resourceVersion is not 0).
                Record::StateBegin { rv: 0, .. } => Some("a state at resourceVersion 0".into()),
                Record::StateBegin { rv, count } => {
                    pending = Some((rv, count, Vec::new()));
                    None
                }
                Record::Object { body } => match &mut pending {
                    Some((_, count, objs)) if (objs.len() as u64) < *count => {
                        objs.push(body);
                        None
                    }
                    _ => Some("an object outside a state".to_string()),
                },
                Record::StateEnd { rv } => match pending.take() {
                    Some((begin, count, objects))
                        if begin == rv && objects.len() as u64 == count =>
                    {
                        out.state_rv = rv;
                        out.objects = objects;
                        out.tail.clear();
                        last_rv = rv;
                        state_end = Some((i, at as u64));
                        None
                    }
                    _ => Some(format!("the end of a state at {rv} that did not begin")),
                },
                Record::Event { rv, .. } | Record::Progress { rv } => {
                    if out.state_rv == 0 || pending.is_some() || rv <= last_rv {
                        Some(format!("a record at {rv} that does not follow {last_rv}"))
                    } else {
                        last_rv = rv;
                        out.tail.push(r);
                        None
                    }
                }
                Record::Gap { old_rv, list_rv } => {
                    if out.state_rv == 0 || pending.is_some() || old_rv > last_rv {
                        Some(format!("a gap ({old_rv}, {list_rv}) after {last_rv}"))
                    } else {
                        out.tail.push(r);
                        None
                    }
                }
                Record::Fresh { unix_ms } => {
                    if pending.is_some() {
                        Some("a freshness mark inside a state".to_string())
                    } else {
                        out.fresh_ms = Some(unix_ms);
                        None
                    }
                }
            };
            if let Some(why) = why {
                stop = Some((i, start, why));
                break 'files;
            }
            if pending.is_none() {
                good = (i, at as u64);
            }
        }
    }
    if out.fresh_ms.is_none()
        && let Some((_, newest)) = files.last()
    {
        out.fresh_ms = fs::metadata(newest)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| d.as_millis() as u64);
    }
    if stop.is_none() && pending.is_some() {
        // Checkpoints are renamed into place whole, so this is damage too.
        stop = Some((good.0, good.1, "a state without its end".into()));
    }
    if let Some((i, offset, why)) = stop {
        out.dropped.push(format!(
            "{}: {why} at byte {offset}; dropped from there",
            files[i].1.display()
        ));
        // Keep what was consistent: cut its file there, drop every later file.
        let (keep, len) = good;
        let path = &files[keep].1;
        let header_bad = offset == 0 && keep == i;
        let f = OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(io(path))?;
        f.set_len(len).map_err(io(path))?;
        if header_bad {
            // Not a segment at all: it becomes an empty one, so that it can be appended to.
            let mut f = &f;
            f.write_all(MAGIC).map_err(io(path))?;
        }
        f.sync_all().map_err(io(path))?;
        for (_, later) in &files[keep + 1..] {
            if later != &files[i].1 {
                out.dropped
                    .push(format!("{}: after damaged data; dropped", later.display()));
            }
            fs::remove_file(later).map_err(io(later))?;
        }
    }
    if let Some((i, end)) = state_end.filter(|_| out.state_rv != 0) {
        out.state_bytes = end;
        for (j, (_, path)) in files.iter().enumerate().skip(i) {
            let len = match fs::metadata(path) {
                Ok(m) => m.len(),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(io(path)(e)),
            };
            out.tail_bytes += if j == i { len.saturating_sub(end) } else { len };
        }
    }
    Ok(out)
}

/// Deletes every segment of `dir` (a fresh start: the directory's history is of another cache).
pub fn clear(dir: &Path) -> Result<(), IoError> {
    for (_, p) in segments(dir)? {
        fs::remove_file(&p).map_err(io(&p))?;
    }
    Ok(())
}

/// Appends to a resource's newest segment, and starts new ones from full states.
#[derive(Debug)]
pub struct SegmentWriter {
    dir: PathBuf,
    seq: u64,
    file: File,
    /// Bytes of every segment in the directory.
    disk_bytes: u64,
    /// Bytes appended since the last full state.
    since_state: u64,
    /// Bytes of the last full state written (or found by [`load`]).
    state_bytes: u64,
}

impl SegmentWriter {
    /// Opens `dir` for appending (after [`load`] repaired it), creating it if needed.
    pub fn open(dir: &Path) -> Result<SegmentWriter, IoError> {
        fs::create_dir_all(dir).map_err(io(dir))?;
        let files = segments(dir)?;
        let mut disk_bytes = 0;
        for (_, p) in &files {
            disk_bytes += fs::metadata(p).map_err(io(p))?.len();
        }
        let (seq, path) = match files.last() {
            Some((seq, p)) => (*seq, p.clone()),
            None => {
                let p = segment_path(dir, 1);
                let mut f = File::create(&p).map_err(io(&p))?;
                f.write_all(MAGIC).map_err(io(&p))?;
                f.sync_all().map_err(io(&p))?;
                sync_dir(dir)?;
                disk_bytes += MAGIC.len() as u64;
                (1, p)
            }
        };
        let file = OpenOptions::new()
            .append(true)
            .open(&path)
            .map_err(io(&path))?;
        Ok(SegmentWriter {
            dir: dir.to_path_buf(),
            seq,
            file,
            disk_bytes,
            since_state: 0,
            state_bytes: 0,
        })
    }

    /// Takes over what [`load`] found of the directory's last state and the records after it,
    /// so that the checkpoint bound counts from the state, not from this start.
    pub fn resume_after(&mut self, state_bytes: u64, tail_bytes: u64) {
        self.state_bytes = state_bytes;
        self.since_state = tail_bytes;
    }

    /// Appends `records` and waits until they are on disk; returns the bytes written.
    pub fn append(&mut self, records: &[Record]) -> Result<u64, IoError> {
        let mut buf = Vec::with_capacity(records.iter().map(Record::encoded_len).sum());
        for r in records {
            r.encode(&mut buf);
        }
        let path = segment_path(&self.dir, self.seq);
        self.file.write_all(&buf).map_err(io(&path))?;
        self.file.sync_data().map_err(io(&path))?;
        self.disk_bytes += buf.len() as u64;
        self.since_state += buf.len() as u64;
        Ok(buf.len() as u64)
    }

    /// Writes the full state (`objects` at `rv`) as a new segment and deletes the older ones:
    /// the directory then holds this state only.
    pub fn checkpoint<'a>(
        &mut self,
        rv: u64,
        objects: impl ExactSizeIterator<Item = &'a Bytes>,
    ) -> Result<(), IoError> {
        let seq = self.seq + 1;
        let path = segment_path(&self.dir, seq);
        let tmp = path.with_extension("seg.tmp");
        // Encoded through a small buffer, written whenever it fills: a state of any size costs
        // this much memory, not its own size.
        let mut f = File::create(&tmp).map_err(io(&tmp))?;
        let mut buf = Vec::with_capacity(CHECKPOINT_BUFFER + (64 << 10));
        let mut written = 0u64;
        let mut flush = |buf: &mut Vec<u8>, f: &mut File| -> Result<(), IoError> {
            f.write_all(buf).map_err(io(&tmp))?;
            written += buf.len() as u64;
            buf.clear();
            Ok(())
        };
        buf.extend_from_slice(MAGIC);
        Record::StateBegin {
            rv,
            count: objects.len() as u64,
        }
        .encode(&mut buf);
        for body in objects {
            Record::Object { body: body.clone() }.encode(&mut buf);
            if buf.len() >= CHECKPOINT_BUFFER {
                flush(&mut buf, &mut f)?;
            }
        }
        Record::StateEnd { rv }.encode(&mut buf);
        flush(&mut buf, &mut f)?;
        f.sync_all().map_err(io(&tmp))?;
        drop(f);
        fs::rename(&tmp, &path).map_err(io(&path))?;
        sync_dir(&self.dir)?;
        for (old, p) in segments(&self.dir)? {
            if old < seq {
                fs::remove_file(&p).map_err(io(&p))?;
            }
        }
        self.file = OpenOptions::new()
            .append(true)
            .open(&path)
            .map_err(io(&path))?;
        self.seq = seq;
        self.disk_bytes = written;
        self.state_bytes = written;
        self.since_state = 0;
        Ok(())
    }

    /// Bytes of the directory's segments.
    pub fn disk_bytes(&self) -> u64 {
        self.disk_bytes
    }

    /// Bytes appended since the last full state (what a checkpoint would free).
    pub fn since_state(&self) -> u64 {
        self.since_state
    }

    /// Bytes of the last full state.
    pub fn state_bytes(&self) -> u64 {
        self.state_bytes
    }
}

fn sync_dir(dir: &Path) -> Result<(), IoError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(io(dir))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube_wire::event::EventType;

    fn obj(name: &str, rv: u64) -> Bytes {
        Bytes::from(format!(
            r#"{{"metadata":{{"name":"{name}","resourceVersion":"{rv}"}}}}"#
        ))
    }

    fn event(ty: EventType, name: &str, rv: u64) -> Record {
        Record::Event {
            ty,
            rv,
            body: obj(name, rv),
        }
    }

    /// A directory with a state at 10 (a, b) and five records after it.
    fn written(dir: &Path) -> (Vec<Bytes>, Vec<Record>) {
        let objects = vec![obj("a", 3), obj("b", 10)];
        let tail = vec![
            event(EventType::Added, "c", 11),
            event(EventType::Modified, "a", 12),
            Record::Progress { rv: 14 },
            Record::Gap {
                old_rv: 14,
                list_rv: 20,
            },
            event(EventType::Deleted, "b", 17),
        ];
        let mut w = SegmentWriter::open(dir).unwrap();
        w.checkpoint(10, objects.iter()).unwrap();
        w.append(&tail[..2]).unwrap();
        w.append(&tail[2..]).unwrap();
        (objects, tail)
    }

    #[test]
    fn what_was_written_is_loaded() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(load(d.path()).unwrap(), Loaded::default(), "empty");
        let (objects, tail) = written(d.path());
        let got = load(d.path()).unwrap();
        assert_eq!(
            (got.state_rv, &got.objects, &got.tail),
            (10, &objects, &tail)
        );
        assert!(got.dropped.is_empty(), "{:?}", got.dropped);
        assert_eq!(got.rv(), 17);
        // Appending after a load continues the same history.
        let mut w = SegmentWriter::open(d.path()).unwrap();
        w.append(&[event(EventType::Added, "d", 21)]).unwrap();
        assert_eq!(load(d.path()).unwrap().tail.len(), 6);
    }

    /// A load says how large the state is and how much follows it, so that a writer started
    /// on the directory counts its checkpoint bound from the state, not from its own start.
    #[test]
    fn a_load_measures_the_state_and_its_tail() {
        let d = tempfile::tempdir().unwrap();
        let (_, tail) = written(d.path());
        let got = load(d.path()).unwrap();
        let tail_len: usize = tail.iter().map(Record::encoded_len).sum();
        assert_eq!(got.tail_bytes, tail_len as u64);
        let file = fs::metadata(segments(d.path()).unwrap().pop().unwrap().1)
            .unwrap()
            .len();
        assert_eq!(got.state_bytes + got.tail_bytes, file);
        let mut w = SegmentWriter::open(d.path()).unwrap();
        w.resume_after(got.state_bytes, got.tail_bytes);
        assert_eq!(
            (w.state_bytes(), w.since_state()),
            (got.state_bytes, got.tail_bytes)
        );
        // A checkpoint measures its own state.
        w.checkpoint(30, [obj("a", 30)].iter()).unwrap();
        assert_eq!((w.state_bytes(), w.since_state()), (w.disk_bytes(), 0));
        assert_eq!(load(d.path()).unwrap().state_bytes, w.disk_bytes());
    }

    #[test]
    fn a_checkpoint_replaces_the_history_and_bounds_the_disk() {
        let d = tempfile::tempdir().unwrap();
        written(d.path());
        let mut w = SegmentWriter::open(d.path()).unwrap();
        let before = w.disk_bytes();
        let now = vec![obj("a", 12), obj("c", 11)];
        w.checkpoint(20, now.iter()).unwrap();
        assert!(w.disk_bytes() < before);
        assert_eq!(segments(d.path()).unwrap().len(), 1);
        let got = load(d.path()).unwrap();
        assert_eq!((got.state_rv, got.objects, got.tail), (20, now, vec![]));
        // An unfinished checkpoint file is never read and is cleaned up.
        fs::write(d.path().join("00000000000000000009.seg.tmp"), b"junk").unwrap();
        assert_eq!(load(d.path()).unwrap().state_rv, 20);
        assert_eq!(fs::read_dir(d.path()).unwrap().count(), 1);
    }

    /// Every prefix of the file (a crash while writing) loads as a prefix of what was written:
    /// the state or nothing, and then some of the records in order, never anything else.
    #[test]
    fn a_truncated_segment_loads_a_prefix_and_is_repaired() {
        let d = tempfile::tempdir().unwrap();
        let (objects, tail) = written(d.path());
        let (_, path) = segments(d.path()).unwrap().pop().unwrap();
        let full = fs::read(&path).unwrap();
        for cut in 0..full.len() {
            fs::write(&path, &full[..cut]).unwrap();
            let got = load(d.path()).unwrap();
            if got.state_rv == 0 {
                assert!(got.objects.is_empty() && got.tail.is_empty(), "cut {cut}");
            } else {
                assert_eq!(got.objects, objects, "cut {cut}");
                assert_eq!(got.tail[..], tail[..got.tail.len()], "cut {cut}");
            }
            // The damaged end was cut off: appending after it and loading again works.
            let mut w = SegmentWriter::open(d.path()).unwrap();
            if got.state_rv != 0 {
                w.append(&[Record::Progress { rv: 1000 }]).unwrap();
            }
            let again = load(d.path()).unwrap();
            assert!(again.dropped.is_empty(), "cut {cut}: {:?}", again.dropped);
            assert_eq!(again.state_rv, got.state_rv, "cut {cut}");
            if again.state_rv != 0 {
                assert_eq!(again.tail.last(), Some(&Record::Progress { rv: 1000 }));
            }
        }
    }

    /// A flipped byte anywhere is found: what loads is a prefix of what was written.
    #[test]
    fn a_flipped_byte_is_never_loaded_as_data() {
        let d = tempfile::tempdir().unwrap();
        let (objects, tail) = written(d.path());
        let (_, path) = segments(d.path()).unwrap().pop().unwrap();
        let full = fs::read(&path).unwrap();
        for i in 0..full.len() {
            let mut b = full.clone();
            b[i] ^= 0x5a;
            fs::write(&path, &b).unwrap();
            let got = load(d.path()).unwrap();
            assert!(!got.dropped.is_empty(), "byte {i}: the damage is reported");
            if got.state_rv != 0 {
                assert_eq!(got.objects, objects, "byte {i}");
                assert_eq!(got.tail[..], tail[..got.tail.len()], "byte {i}");
            }
        }
    }

    /// Found by the `persist` fuzz target: a well-framed state at resourceVersion 0 loaded its
    /// objects while `state_rv` 0 says there is no state.
    #[test]
    fn a_state_at_resource_version_zero_is_damage() {
        let d = tempfile::tempdir().unwrap();
        let mut w = SegmentWriter::open(d.path()).unwrap();
        w.append(&[
            Record::StateBegin { rv: 0, count: 1 },
            Record::Object { body: obj("a", 0) },
            Record::StateEnd { rv: 0 },
        ])
        .unwrap();
        let got = load(d.path()).unwrap();
        assert_eq!((got.state_rv, got.objects.len()), (0, 0));
        assert_eq!(got.dropped.len(), 1, "{:?}", got.dropped);
    }

    #[test]
    fn later_segments_after_damage_are_dropped() {
        let d = tempfile::tempdir().unwrap();
        written(d.path());
        let mut w = SegmentWriter::open(d.path()).unwrap();
        w.checkpoint(30, [obj("z", 30)].iter()).unwrap();
        // An older segment comes back damaged (restored from a backup, say) before the new one.
        let old = segment_path(d.path(), 1);
        fs::write(&old, b"WMUXLOG1\x05\x00\x00\x00garbage").unwrap();
        let got = load(d.path()).unwrap();
        assert_eq!(got.state_rv, 0);
        assert_eq!(got.dropped.len(), 2, "{:?}", got.dropped);
        assert_eq!(segments(d.path()).unwrap().len(), 1);
    }
}
