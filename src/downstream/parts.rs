//! A large list body whose parts are made off the async runtime, several at once: the JSON LIST
//! of objects stored in protobuf, whose items are transcoded as the body is sent, and a Table
//! LIST, whose rows are printed as it is sent.
//!
//! Transcoding 100,000 pods takes about a CPU-second. Made in the task that writes the body, it
//! would hold a runtime worker (and every connection waiting on it) that long and use one core
//! while the others idle. Here each part ([`ListParts::part`], about [`PART_BYTES`]) is made
//! on a blocking thread, up to [`ahead`] parts at once, while earlier parts are written; parts
//! are sent in order, so the body is byte for byte the one a single writer would send. A
//! gzip-compressed answer compresses each part on the same thread ([`GzipPart`]) into one gzip
//! member; whether it is compressed follows kube's threshold on the body's length ([`Gzip`]). Memory stays bounded: a list holds at most [`ahead`] parts beyond the one being
//! written, and a client that stops reading stops the making (nothing is polled). A client that
//! goes away leaves at most the parts in flight to finish.
//!
//! It decides nothing about what a list holds (the router, [`super::list`] and
//! [`super::table`] do) and knows nothing of encodings: the item writer does the transcoding.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use futures_util::stream::{FuturesOrdered, Stream, StreamExt};
use http::Response;
use kube_wire::response::{Body, GzipJoin, GzipPart, ListParts, stream_made};
use tokio::task::JoinHandle;

/// About how many bytes each part of a list holds: large enough that the thread hops of a part
/// (its start on a blocking thread, the writer woken at its end) cost little beside its
/// transcoding (about 0.5 ms for 512 KiB of pods), small enough that a list holds little: at
/// most [`ahead`] + 1 parts. Measured on 100k pods, 2 cores: parts of 64 KiB took 1.13 CPU-s a
/// LIST, a quarter of it in the scheduler; 256 KiB 0.94; 512 KiB 0.88; 1 MiB 0.86.
pub const PART_BYTES: usize = 512 * 1024;

/// How many parts a list has being made at most, beyond the one being written: one per core (a
/// list alone uses the machine), at least two (one making while one is written), at most eight.
pub fn ahead() -> usize {
    // Asked once: on Linux the answer reads the cgroup's CPU quota from files.
    static AHEAD: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *AHEAD.get_or_init(|| std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 8)))
}

/// Whether a list's body is gzip-compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gzip {
    /// Not (the client does not accept it).
    Off,
    /// When the body is longer than this many bytes (kube-apiserver's threshold): the parts
    /// are made here until it is known, before the answer's headers say whether it is (the
    /// first part usually tells, a few milliseconds of work).
    Above(usize),
}

/// The answer whose body is `parts`, made [`ahead`] at once on blocking threads, compressed as
/// `gzip` says. Outside a tokio runtime (a test) the parts are made as they are sent.
pub fn response<T: Send + Sync + 'static>(parts: ListParts<T>, gzip: Gzip) -> Response<Body> {
    let parts = Arc::new(parts);
    let mut made = Vec::new();
    let compress = match gzip {
        Gzip::Off => false,
        Gzip::Above(limit) => {
            let mut len = 0;
            while made.len() < parts.len() && len <= limit {
                let part = parts.part(made.len());
                len += part.len();
                made.push(part);
            }
            len > limit
        }
    };
    let mut in_flight = FuturesOrdered::new();
    for (k, plain) in made.iter().enumerate() {
        let part = if compress {
            Part::Gzip(GzipPart::new(plain, k + 1 == parts.len()))
        } else {
            Part::Plain(plain.clone())
        };
        in_flight.push_back(Making::Ready(Some(part)));
    }
    let made = Made {
        next: made.len(),
        parts,
        in_flight,
        ahead: ahead(),
        gzip: compress.then(GzipJoin::default),
        failed: false,
    };
    stream_made(made, compress)
}

/// What a part's thread hands back: its bytes, plain or a compressed part.
enum Part {
    Plain(Bytes),
    Gzip(io::Result<GzipPart>),
}

/// The body's stream: the parts in flight, in order, and the next to start.
struct Made<T> {
    parts: Arc<ListParts<T>>,
    /// The next part to start.
    next: usize,
    in_flight: FuturesOrdered<Making<Part>>,
    ahead: usize,
    /// Joins the compressed parts, for a gzip answer.
    gzip: Option<GzipJoin>,
    /// A part failed: the body ends (with the error already given).
    failed: bool,
}

/// A part being made: on a blocking thread, or (outside a runtime) already made.
enum Making<P> {
    Thread(JoinHandle<P>),
    Ready(Option<P>),
}

impl<P: Send + Unpin + 'static> std::future::Future for Making<P> {
    type Output = io::Result<P>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            Making::Thread(handle) => Pin::new(handle).poll(cx).map_err(io::Error::other),
            Making::Ready(part) => {
                Poll::Ready(part.take().ok_or_else(|| io::Error::other("polled twice")))
            }
        }
    }
}

impl<T: Send + Sync + 'static> Made<T> {
    /// Starts parts until [`ahead`] are in flight or none is left.
    fn start(&mut self) {
        while self.in_flight.len() < self.ahead && self.next < self.parts.len() {
            let (parts, k, gzip) = (Arc::clone(&self.parts), self.next, self.gzip.is_some());
            let make = move || {
                let plain = parts.part(k);
                if gzip {
                    Part::Gzip(GzipPart::new(&plain, k + 1 == parts.len()))
                } else {
                    Part::Plain(plain)
                }
            };
            let making = match tokio::runtime::Handle::try_current() {
                Ok(rt) => Making::Thread(rt.spawn_blocking(make)),
                Err(_) => Making::Ready(Some(make())),
            };
            self.in_flight.push_back(making);
            self.next += 1;
        }
    }
}

impl<T: Send + Sync + 'static> Stream for Made<T> {
    type Item = io::Result<Bytes>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.failed {
            return Poll::Ready(None);
        }
        this.start();
        let Some(made) = ready!(this.in_flight.poll_next_unpin(cx)) else {
            return Poll::Ready(None);
        };
        // The next part starts before this one is written.
        this.start();
        let last = this.in_flight.is_empty() && this.next == this.parts.len();
        let bytes = match (made, this.gzip.as_mut()) {
            (Ok(Part::Plain(b)), _) => Ok(b),
            (Ok(Part::Gzip(Ok(part))), Some(join)) => Ok(join.push(part, last)),
            (Ok(Part::Gzip(Err(e))), _) | (Err(e), _) => Err(e),
            (Ok(Part::Gzip(Ok(_))), None) => Err(io::Error::other("a gzip part of a plain body")),
        };
        if bytes.is_err() {
            this.failed = true;
        }
        Poll::Ready(Some(bytes))
    }
}
