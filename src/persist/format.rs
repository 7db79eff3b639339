//! The bytes of a resource's persisted log: what a record holds and how it is framed, so that
//! a torn or corrupted write is detected and never read as data. Pure: no I/O (the segment
//! files are [`super::segments`]'s).
//!
//! A segment file starts with [`MAGIC`] and then holds records, each framed as
//!
//! ```text
//! len: u32 LE | crc32: u32 LE (of the payload) | payload: len bytes
//! ```
//!
//! and the payload's first byte says what it is ([`Record`]). Integers are little-endian
//! `u64`s; an object is its JSON bytes as the cache stores them (the rest of the payload). A
//! record whose length runs past the end of the file is a torn write ([`Decoded::Torn`]); one
//! whose checksum or contents are wrong is corruption ([`Decoded::Corrupt`]): either way,
//! reading stops there.

use bytes::Bytes;
use kube_wire::event::EventType;

/// The first bytes of every segment file: the format and its version.
pub const MAGIC: &[u8; 8] = b"WMUXLOG1";

/// The largest payload read: a bound on what a corrupted length field can make the reader
/// allocate (an object is bounded by `cache.max_object_bytes`, 16 MiB by default, far below).
pub const MAX_PAYLOAD: usize = 1 << 30;

/// Bytes of a record's frame before its payload.
pub const FRAME_HEAD: usize = 8;

/// One record of a resource's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// A full state of the resource at `rv` begins: `count` [`Record::Object`]s follow, then
    /// [`Record::StateEnd`]. The history before it is no longer needed.
    StateBegin {
        /// The state's resourceVersion.
        rv: u64,
        /// Objects that follow.
        count: u64,
    },
    /// One object of a state.
    Object {
        /// Its JSON, as the cache stores it.
        body: Bytes,
    },
    /// The state begun at the same `rv` is complete (a state without its end is ignored).
    StateEnd {
        /// The state's resourceVersion.
        rv: u64,
    },
    /// An event of the cache's log (also a relist bridge's: those carry the resourceVersions
    /// watchers were sent).
    Event {
        /// ADDED, MODIFIED or DELETED.
        ty: EventType,
        /// The event's resourceVersion (the object's).
        rv: u64,
        /// The object's JSON, as the cache stores it.
        body: Bytes,
    },
    /// A relist from `old_rv` to `list_rv` was bridged: no watch starts strictly between.
    Gap {
        /// The cache's resourceVersion before.
        old_rv: u64,
        /// The list's.
        list_rv: u64,
    },
    /// The cache's resourceVersion advanced to `rv` without an event (a bookmark).
    Progress {
        /// The new resourceVersion.
        rv: u64,
    },
    /// The cache was known to follow the upstream at this wall-clock time (milliseconds since
    /// the Unix epoch): what a restart serves from disk is at most this old, plus the time
    /// since. Written now and then while the upstream watch is up, and once when it breaks.
    Fresh {
        /// Milliseconds since the Unix epoch.
        unix_ms: u64,
    },
}

const STATE_BEGIN: u8 = 1;
const OBJECT: u8 = 2;
const STATE_END: u8 = 3;
const EVENT: u8 = 4;
const GAP: u8 = 5;
const PROGRESS: u8 = 6;
const FRESH: u8 = 7;

impl Record {
    /// Appends the record, framed, to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(&[0; FRAME_HEAD]);
        match self {
            Record::StateBegin { rv, count } => {
                out.push(STATE_BEGIN);
                out.extend_from_slice(&rv.to_le_bytes());
                out.extend_from_slice(&count.to_le_bytes());
            }
            Record::Object { body } => {
                out.push(OBJECT);
                out.extend_from_slice(body);
            }
            Record::StateEnd { rv } => {
                out.push(STATE_END);
                out.extend_from_slice(&rv.to_le_bytes());
            }
            Record::Event { ty, rv, body } => {
                out.push(EVENT);
                out.push(*ty as u8);
                out.extend_from_slice(&rv.to_le_bytes());
                out.extend_from_slice(body);
            }
            Record::Gap { old_rv, list_rv } => {
                out.push(GAP);
                out.extend_from_slice(&old_rv.to_le_bytes());
                out.extend_from_slice(&list_rv.to_le_bytes());
            }
            Record::Progress { rv } => {
                out.push(PROGRESS);
                out.extend_from_slice(&rv.to_le_bytes());
            }
            Record::Fresh { unix_ms } => {
                out.push(FRESH);
                out.extend_from_slice(&unix_ms.to_le_bytes());
            }
        }
        let payload = &out[start + FRAME_HEAD..];
        let len = u32::try_from(payload.len()).expect("records are far below 4 GiB");
        let crc = crc32fast::hash(payload);
        out[start..start + 4].copy_from_slice(&len.to_le_bytes());
        out[start + 4..start + FRAME_HEAD].copy_from_slice(&crc.to_le_bytes());
    }

    /// The record's encoded size.
    pub fn encoded_len(&self) -> usize {
        FRAME_HEAD
            + 1
            + match self {
                Record::StateBegin { .. } | Record::Gap { .. } => 16,
                Record::Object { body } => body.len(),
                Record::StateEnd { .. } | Record::Progress { .. } | Record::Fresh { .. } => 8,
                Record::Event { body, .. } => 9 + body.len(),
            }
    }
}

/// What [`decode`] found at the start of a buffer.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded {
    /// A record, and the bytes it took.
    Record(Record, usize),
    /// The buffer is empty: a clean end.
    End,
    /// The buffer ends inside a record (its frame or its payload): a write that did not finish.
    Torn,
    /// The record is not one this format writes (why).
    Corrupt(String),
}

/// Decodes the record at the start of `buf` (a view of the file's bytes: payloads are
/// sliced from it without copying).
pub fn decode(buf: &Bytes) -> Decoded {
    if buf.is_empty() {
        return Decoded::End;
    }
    let Some(head) = buf.get(..FRAME_HEAD) else {
        return Decoded::Torn;
    };
    let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
    let crc = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
    if len == 0 || len > MAX_PAYLOAD {
        return Decoded::Corrupt(format!("record length {len}"));
    }
    let Some(end) = FRAME_HEAD.checked_add(len).filter(|&e| e <= buf.len()) else {
        return Decoded::Torn;
    };
    let payload = buf.slice(FRAME_HEAD..end);
    if crc32fast::hash(&payload) != crc {
        return Decoded::Corrupt("checksum mismatch".into());
    }
    match parse(payload) {
        Ok(r) => Decoded::Record(r, end),
        Err(why) => Decoded::Corrupt(why),
    }
}

fn u64_at(p: &[u8], at: usize) -> Option<u64> {
    let b: [u8; 8] = p.get(at..at + 8)?.try_into().ok()?;
    Some(u64::from_le_bytes(b))
}

fn parse(p: Bytes) -> Result<Record, String> {
    let exact = |n: usize| {
        if p.len() == n {
            Ok(())
        } else {
            Err(format!("record kind {} of {} bytes", p[0], p.len()))
        }
    };
    let short = || format!("record kind {} too short ({} bytes)", p[0], p.len());
    match p[0] {
        STATE_BEGIN => {
            exact(17)?;
            Ok(Record::StateBegin {
                rv: u64_at(&p, 1).ok_or_else(short)?,
                count: u64_at(&p, 9).ok_or_else(short)?,
            })
        }
        OBJECT => Ok(Record::Object { body: p.slice(1..) }),
        STATE_END => {
            exact(9)?;
            Ok(Record::StateEnd {
                rv: u64_at(&p, 1).ok_or_else(short)?,
            })
        }
        EVENT => {
            let ty = match p.get(1) {
                Some(0) => EventType::Added,
                Some(1) => EventType::Modified,
                Some(2) => EventType::Deleted,
                Some(t) => return Err(format!("event type {t}")),
                None => return Err(short()),
            };
            let rv = u64_at(&p, 2).ok_or_else(short)?;
            Ok(Record::Event {
                ty,
                rv,
                body: p.slice(10..),
            })
        }
        GAP => {
            exact(17)?;
            Ok(Record::Gap {
                old_rv: u64_at(&p, 1).ok_or_else(short)?,
                list_rv: u64_at(&p, 9).ok_or_else(short)?,
            })
        }
        PROGRESS => {
            exact(9)?;
            Ok(Record::Progress {
                rv: u64_at(&p, 1).ok_or_else(short)?,
            })
        }
        FRESH => {
            exact(9)?;
            Ok(Record::Fresh {
                unix_ms: u64_at(&p, 1).ok_or_else(short)?,
            })
        }
        k => Err(format!("record kind {k}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn every_kind() -> Vec<Record> {
        vec![
            Record::StateBegin { rv: 7, count: 2 },
            Record::Object {
                body: Bytes::from_static(br#"{"metadata":{"name":"a"}}"#),
            },
            Record::Object {
                body: Bytes::from_static(b"{}"),
            },
            Record::StateEnd { rv: 7 },
            Record::Event {
                ty: EventType::Modified,
                rv: 9,
                body: Bytes::from_static(br#"{"metadata":{"name":"a","resourceVersion":"9"}}"#),
            },
            Record::Event {
                ty: EventType::Deleted,
                rv: u64::MAX,
                body: Bytes::new(),
            },
            Record::Gap {
                old_rv: 9,
                list_rv: 12,
            },
            Record::Progress { rv: 13 },
            Record::Fresh {
                unix_ms: 1_790_000_000_000,
            },
        ]
    }

    #[test]
    fn every_kind_round_trips_and_knows_its_size() {
        let mut buf = Vec::new();
        for r in every_kind() {
            let before = buf.len();
            r.encode(&mut buf);
            assert_eq!(buf.len() - before, r.encoded_len(), "{r:?}");
        }
        let mut rest = Bytes::from(buf);
        for want in every_kind() {
            match decode(&rest) {
                Decoded::Record(got, n) => {
                    assert_eq!(got, want);
                    rest = rest.slice(n..);
                }
                other => panic!("{want:?}: {other:?}"),
            }
        }
        assert_eq!(decode(&rest), Decoded::End);
    }

    #[test]
    fn a_cut_record_is_torn_and_a_changed_one_corrupt() {
        let mut buf = Vec::new();
        Record::Event {
            ty: EventType::Added,
            rv: 5,
            body: Bytes::from_static(b"{\"a\":1}"),
        }
        .encode(&mut buf);
        for cut in 1..buf.len() {
            assert_eq!(decode(&Bytes::copy_from_slice(&buf[..cut])), Decoded::Torn);
        }
        // Any flipped bit: the checksum, the length or the contents no longer agree.
        for i in 0..buf.len() {
            for bit in 0..8 {
                let mut b = buf.clone();
                b[i] ^= 1 << bit;
                match decode(&Bytes::from(b)) {
                    Decoded::Corrupt(_) | Decoded::Torn => {}
                    other => panic!("byte {i} bit {bit}: {other:?}"),
                }
            }
        }
        // A length past the bound is refused before anything is read.
        let mut huge = buf.clone();
        huge[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(decode(&Bytes::from(huge)), Decoded::Corrupt(_)));
    }

    #[test]
    fn well_framed_nonsense_is_corrupt() {
        let frame = |payload: &[u8]| {
            let mut b = (payload.len() as u32).to_le_bytes().to_vec();
            b.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
            b.extend_from_slice(payload);
            Bytes::from(b)
        };
        for payload in [
            &[99u8][..],
            &[STATE_BEGIN, 1, 2],
            &[STATE_END; 12],
            &[EVENT, 7, 0, 0, 0, 0, 0, 0, 0, 0],
            &[EVENT, 0, 1],
            &[PROGRESS],
        ] {
            assert!(
                matches!(decode(&frame(payload)), Decoded::Corrupt(_)),
                "{payload:?}"
            );
        }
    }
}
