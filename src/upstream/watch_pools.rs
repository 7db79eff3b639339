//! The reflectors' upstream connections, with a bounded number of watches on each.
//!
//! Over HTTP/2 every request of one pool shares one connection, and a server caps the streams
//! a connection may have open at once: kube-apiserver advertises 100
//! (`--http2-max-streams-per-connection`'s default). A watch holds its stream for as long as it
//! lasts, and hyper's client queues a request beyond the cap until a stream ends, so on one
//! connection the 101st cached kind's reflector (a cluster with a few dozen CRDs has that many
//! kinds) would never start, and the freshness checks of consistent reads would wait behind
//! watches that never end. So each reflector takes a [`Lease`] on a pool that has fewer than
//! [`WATCHES_PER_CONNECTION`] holders, and a new pool (a new connection) is made when none has.
//! A holder has at most one watch open, and beside it at most a LIST page or a freshness check:
//! the streams of a connection stay within kube's cap.
//!
//! Owns which pool a reflector gets; it must not send requests (the `Upstream` handle does).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;

/// Reflectors (each with one watch, and at most one more short request beside it) per pool:
/// half kube-apiserver's 100 streams per connection.
pub const WATCHES_PER_CONNECTION: usize = 50;

/// The pools made so far, and how to make one more.
pub struct WatchPools<P> {
    build: Box<dyn Fn() -> P + Send + Sync>,
    pools: Mutex<Vec<(P, Arc<AtomicUsize>)>>,
}

impl<P> std::fmt::Debug for WatchPools<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let holders: Vec<usize> = self
            .pools
            .lock()
            .iter()
            .map(|(_, n)| n.load(Ordering::Relaxed))
            .collect();
        f.debug_struct("WatchPools")
            .field("holders", &holders)
            .finish_non_exhaustive()
    }
}

/// A reflector's hold on one pool: released when the last clone of its handle is dropped.
#[derive(Debug)]
pub struct Lease {
    holders: Arc<AtomicUsize>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.holders.fetch_sub(1, Ordering::Relaxed);
    }
}

impl<P: Clone> WatchPools<P> {
    /// No pool yet; `build` makes each (each its own connection).
    pub fn new(build: impl Fn() -> P + Send + Sync + 'static) -> Self {
        WatchPools {
            build: Box::new(build),
            pools: Mutex::new(Vec::new()),
        }
    }

    /// A pool with room for one more holder (a new one if none has), and the lease on it.
    pub fn lease(&self) -> (P, Lease) {
        let mut pools = self.pools.lock();
        let slot = match pools
            .iter()
            .position(|(_, n)| n.load(Ordering::Relaxed) < WATCHES_PER_CONNECTION)
        {
            Some(i) => i,
            None => {
                pools.push(((self.build)(), Arc::new(AtomicUsize::new(0))));
                pools.len() - 1
            }
        };
        let (pool, holders) = &pools[slot];
        holders.fetch_add(1, Ordering::Relaxed);
        (
            pool.clone(),
            Lease {
                holders: holders.clone(),
            },
        )
    }

    /// Holders per pool, in the order the pools were made.
    pub fn holders(&self) -> Vec<usize> {
        self.pools
            .lock()
            .iter()
            .map(|(_, n)| n.load(Ordering::Relaxed))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pool_takes_at_most_its_share_of_watches_and_freed_room_is_reused() {
        let made = Arc::new(AtomicUsize::new(0));
        let m = made.clone();
        let pools = WatchPools::new(move || m.fetch_add(1, Ordering::Relaxed));
        let mut leases: Vec<(usize, Lease)> = (0..WATCHES_PER_CONNECTION * 2 + 1)
            .map(|_| pools.lease())
            .collect();
        assert_eq!(made.load(Ordering::Relaxed), 3);
        assert_eq!(
            pools.holders(),
            [WATCHES_PER_CONNECTION, WATCHES_PER_CONNECTION, 1]
        );
        assert!(
            leases[..WATCHES_PER_CONNECTION]
                .iter()
                .all(|(p, _)| *p == 0)
        );
        // A reflector of the first pool stops: the next one takes its room, no new pool.
        leases.swap_remove(3);
        assert_eq!(pools.holders()[0], WATCHES_PER_CONNECTION - 1);
        let (p, _l) = pools.lease();
        assert_eq!(p, 0);
        assert_eq!(made.load(Ordering::Relaxed), 3);
    }
}
