//! The persisted cache's loader (`watchmux::persist::segments::load`) on any bytes a segment
//! file may hold after a crash, a disk error or a stray write. The input is one segment file:
//! its first byte says whether the format's header is put in front of the rest (so that most
//! inputs get past the header check).
//!
//! Invariants: loading never panics and never fails on content (only I/O fails); what it loads
//! is consistent (a tail only after a complete state, events and bookmarks in strictly
//! increasing resourceVersion order); it repairs the directory, so that a second load finds
//! nothing damaged and the same data, and appending after the repair loads back.

use watchmux::persist::format::{MAGIC, Record};
use watchmux::persist::segments::{SegmentWriter, load};

/// Checks the loader on `data` (see the module).
pub fn check(data: &[u8]) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (header, rest) = match data.split_first() {
        Some((b, rest)) => (b & 1 == 1, rest),
        None => (false, data),
    };
    let mut file = if header { MAGIC.to_vec() } else { Vec::new() };
    file.extend_from_slice(rest);
    std::fs::write(dir.path().join("00000000000000000001.seg"), &file).expect("write");

    let first = load(dir.path()).expect("loading fails only on I/O");
    if first.state_rv == 0 {
        assert!(
            first.objects.is_empty() && first.tail.is_empty(),
            "{first:?}"
        );
    }
    let mut last = first.state_rv;
    for r in &first.tail {
        match r {
            Record::Event { rv, .. } | Record::Progress { rv } => {
                assert!(*rv > last, "{rv} after {last}");
                last = *rv;
            }
            Record::Gap { old_rv, .. } => assert!(*old_rv <= last, "gap after {last}"),
            other => panic!("a state's record in the tail: {other:?}"),
        }
    }

    let again = load(dir.path()).expect("second load");
    assert!(
        again.dropped.is_empty(),
        "repaired, yet: {:?}",
        again.dropped
    );
    assert_eq!(
        (&again.state_rv, &again.objects, &again.tail),
        (&first.state_rv, &first.objects, &first.tail)
    );

    if first.state_rv != 0 {
        let next = first.rv() + 1;
        let mut w = SegmentWriter::open(dir.path()).expect("open");
        w.append(&[Record::Progress { rv: next }]).expect("append");
        let third = load(dir.path()).expect("third load");
        assert!(third.dropped.is_empty(), "{:?}", third.dropped);
        assert_eq!(third.rv(), next);
    }
}
