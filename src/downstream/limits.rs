//! Request limits: the URL length of every request, and on what the cache serves, concurrent
//! watches per client, concurrent LISTs overall and the memory budget's last step (no new cached
//! LIST or WATCH while it is full). A granted [`Permit`] travels with the
//! response body (or the websocket pump) and frees its slot when dropped: when the watch ends,
//! the list body has been sent, or the client went away (hyper drops the body with the
//! connection or the HTTP/2 stream).
//!
//! A refusal is a [`LimitError`] (`crate::error` makes it kube's 429 or 414). This module must
//! not decide what is served nor build answers; header-size and header-time limits are hyper's
//! (set by the accept loop in [`super`]).

use std::collections::HashMap;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body as HttpBody, Frame, SizeHint};
use http_body_util::BodyExt;
use parking_lot::Mutex;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::cache::budget::{MemoryBudget, Pressure};
use kube_wire::response::Body;

/// The client's IP address, put into every request's extensions by the server: the peer's, or
/// the source a trusted balancer's PROXY header names; an IPv4-mapped IPv6 address as the IPv4
/// address it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAddr(pub IpAddr);

/// A request refused by a limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitError {
    /// The request URL (path and query) is longer than `server.max_url_bytes`.
    #[error("the request URL is {length} bytes long, more than the {limit} allowed")]
    UrlTooLong {
        /// The URL's length in bytes.
        length: usize,
        /// `server.max_url_bytes`.
        limit: usize,
    },
    /// The client has `server.max_watches_per_client` cached watches open already.
    #[error("too many watches from this client (limit {limit}), please try again later")]
    TooManyWatches {
        /// `server.max_watches_per_client`.
        limit: usize,
    },
    /// `server.max_concurrent_lists` cached LISTs are being served already.
    #[error("too many concurrent LIST requests (limit {limit}), please try again later")]
    TooManyLists {
        /// `server.max_concurrent_lists`.
        limit: usize,
    },
    /// The caches hold `cache.memory_limit` bytes already ([`Pressure::Full`]): no new cached
    /// LIST or WATCH until they hold less.
    #[error("the watch cache is at its memory limit ({limit} bytes), please try again later")]
    OverMemory {
        /// `cache.memory_limit`.
        limit: u64,
    },
}

/// Refuses a new cached LIST or WATCH while the memory budget is full (see
/// [`crate::cache::budget`]), counting the refusal.
pub fn check_memory(budget: &MemoryBudget) -> Result<(), LimitError> {
    if budget.pressure() < Pressure::Full {
        return Ok(());
    }
    budget.shed.requests.fetch_add(1, Ordering::Relaxed);
    Err(LimitError::OverMemory {
        limit: budget.limit(),
    })
}

/// Refuses a request URL (path and query) of `length` bytes when it is over `limit`.
pub fn check_url_length(length: usize, limit: usize) -> Result<(), LimitError> {
    if length > limit {
        return Err(LimitError::UrlTooLong { length, limit });
    }
    Ok(())
}

/// The limits and what is in use.
#[derive(Debug)]
pub struct Limits {
    max_watches_per_client: usize,
    max_lists: usize,
    watches: Mutex<HashMap<String, usize>>,
    lists: Arc<Semaphore>,
}

/// A slot held; freed on drop.
#[derive(Debug)]
pub struct Permit(Held);

#[derive(Debug)]
enum Held {
    Watch(Arc<Limits>, String),
    List(#[allow(dead_code)] OwnedSemaphorePermit),
}

impl Drop for Permit {
    fn drop(&mut self) {
        if let Held::Watch(limits, client) = &self.0 {
            let mut w = limits.watches.lock();
            if let Some(n) = w.get_mut(client) {
                *n -= 1;
                if *n == 0 {
                    w.remove(client);
                }
            }
        }
    }
}

impl Limits {
    /// Limits from `server.max_watches_per_client` and `server.max_concurrent_lists`.
    pub fn new(max_watches_per_client: u64, max_concurrent_lists: u64) -> Arc<Limits> {
        let max_lists = usize::try_from(max_concurrent_lists)
            .unwrap_or(usize::MAX)
            .min(Semaphore::MAX_PERMITS);
        Arc::new(Limits {
            max_watches_per_client: usize::try_from(max_watches_per_client).unwrap_or(usize::MAX),
            max_lists,
            watches: Mutex::new(HashMap::new()),
            lists: Arc::new(Semaphore::new(max_lists)),
        })
    }

    /// A watch slot for `client`, or why there is none.
    pub fn acquire_watch(self: &Arc<Self>, client: &str) -> Result<Permit, LimitError> {
        let mut w = self.watches.lock();
        let n = w.entry(client.to_string()).or_insert(0);
        if *n >= self.max_watches_per_client {
            return Err(LimitError::TooManyWatches {
                limit: self.max_watches_per_client,
            });
        }
        *n += 1;
        Ok(Permit(Held::Watch(self.clone(), client.to_string())))
    }

    /// A LIST slot, or why there is none.
    pub fn acquire_list(&self) -> Result<Permit, LimitError> {
        match self.lists.clone().try_acquire_owned() {
            Ok(p) => Ok(Permit(Held::List(p))),
            Err(_) => Err(LimitError::TooManyLists {
                limit: self.max_lists,
            }),
        }
    }

    /// Watches `client` has open.
    pub fn watches_of(&self, client: &str) -> usize {
        self.watches.lock().get(client).copied().unwrap_or(0)
    }

    /// Clients with at least one open watch.
    pub fn watching_clients(&self) -> usize {
        self.watches.lock().len()
    }

    /// LISTs being served.
    pub fn lists_in_flight(&self) -> usize {
        self.max_lists - self.lists.available_permits()
    }
}

/// A body that holds `permit` until it is dropped.
struct Guarded {
    inner: Body,
    _permit: Permit,
}

impl HttpBody for Guarded {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// `resp` with `permit` held by its body.
pub fn hold(resp: http::Response<Body>, permit: Permit) -> http::Response<Body> {
    resp.map(|inner| {
        Guarded {
            inner,
            _permit: permit,
        }
        .boxed()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube_wire::status::Status;

    #[test]
    fn slots_are_counted_and_freed() {
        let l = Limits::new(2, 1);
        let a = l.acquire_watch("u").unwrap();
        let _b = l.acquire_watch("u").unwrap();
        let e = Status::from(l.acquire_watch("u").unwrap_err());
        assert_eq!(e.code, 429);
        assert_eq!(e.retry_after(), Some(1));
        let _c = l.acquire_watch("v").unwrap();
        drop(a);
        let _d = l.acquire_watch("u").unwrap();
        assert_eq!(l.watches_of("u"), 2);
        let x = l.acquire_list().unwrap();
        assert_eq!(Status::from(l.acquire_list().unwrap_err()).code, 429);
        assert_eq!(l.lists_in_flight(), 1);
        drop(x);
        assert_eq!(l.lists_in_flight(), 0);
        drop((_b, _c, _d));
        assert_eq!(l.watching_clients(), 0);
    }
}
