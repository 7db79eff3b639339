//! Streams produced by async code run inside the task that polls them: the shape of every
//! watch (see [`super::watch`]).
//!
//! A watch used to be a task of its own handing frames to the connection's task through a
//! channel: two wake-ups and two queues per delivery, and a task, a channel and its first block
//! of slots for every idle watch. Here the watch's logic is a future owned by the stream; polling
//! the stream polls the future, which hands each item through a one-item slot and waits until
//! the stream has taken it. So the watch runs in the connection's task (one wake-up per
//! delivery, the connection's), is dropped with the connection, and costs, while idle, its
//! future and the slot.
//!
//! Owns the slot protocol only; what the items are and where they go is the caller's.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use parking_lot::Mutex;

/// The producing future, `None` once it has finished or was dropped by a [`Dropper`].
type Cell = Mutex<Option<Pin<Box<dyn Future<Output = ()> + Send>>>>;
type Producer = Arc<Cell>;

/// A stream whose items the future made by [`generate`] hands over through a [`Yielder`].
pub struct Generated<T> {
    producer: Producer,
    slot: Arc<Mutex<Option<T>>>,
}

impl<T> std::fmt::Debug for Generated<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Generated")
            .field("finished", &self.producer.lock().is_none())
            .finish()
    }
}

/// Ends a [`Generated`] stream's producer from outside, dropping it and what it holds, for a
/// consumer that stopped polling (a transport whose client stopped reading). Holds the producer
/// weakly: a stream dropped by its consumer is not kept alive by it.
#[derive(Clone)]
pub struct Dropper {
    producer: std::sync::Weak<Cell>,
}

impl std::fmt::Debug for Dropper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Dropper")
    }
}

impl Dropper {
    /// Drops the producer now (waiting for a poll in progress to end); the stream then ends
    /// after the item waiting, if any. Must not be called from the producer itself.
    pub fn drop_producer(&self) {
        if let Some(p) = self.producer.upgrade() {
            let fut = p.lock().take();
            drop(fut);
        }
    }
}

/// The producing side of a [`Generated`] stream.
pub struct Yielder<T> {
    slot: Arc<Mutex<Option<T>>>,
    dropper: Dropper,
}

/// A stream of the items `produce` hands to its [`Yielder`], in order; it ends when the future
/// `produce` returns completes. Nothing runs until the stream is polled.
pub fn generate<T, F, Fut>(produce: F) -> Generated<T>
where
    T: Send + 'static,
    F: FnOnce(Yielder<T>) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let slot = Arc::new(Mutex::new(None));
    let producer: Producer = Arc::new(Mutex::new(None));
    let fut = produce(Yielder {
        slot: slot.clone(),
        dropper: Dropper {
            producer: Arc::downgrade(&producer),
        },
    });
    *producer.lock() = Some(Box::pin(fut));
    Generated { producer, slot }
}

impl<T> Yielder<T> {
    /// What drops this producer from outside (see [`Dropper`]).
    pub fn dropper(&self) -> Dropper {
        self.dropper.clone()
    }

    /// Hands `item` to the stream; completes once the stream has taken it (so at most one item
    /// is ever waiting, and the producer runs no further ahead of its consumer).
    pub async fn send(&self, item: T) {
        *self.slot.lock() = Some(item);
        Taken { slot: &self.slot }.await
    }

    /// Leaves `item` for the stream if nothing is waiting already: a last word before the
    /// producer ends. Returns whether it was left.
    pub fn offer(&self, item: T) -> bool {
        let mut s = self.slot.lock();
        if s.is_some() {
            return false;
        }
        *s = Some(item);
        true
    }
}

/// Completes once the slot is empty. It registers no waker: the slot is emptied only by
/// [`Generated::poll_next`], which then returns the item, and polls the producer again the
/// next time it is polled itself.
struct Taken<'a, T> {
    slot: &'a Mutex<Option<T>>,
}

impl<T> Future for Taken<'_, T> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        if self.slot.lock().is_some() {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    }
}

impl<T> futures_util::Stream for Generated<T> {
    type Item = T;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let this = self.get_mut();
        if let Some(item) = this.slot.lock().take() {
            return Poll::Ready(Some(item));
        }
        let done = {
            let mut p = this.producer.lock();
            let Some(fut) = p.as_mut() else {
                drop(p);
                return Poll::Ready(this.slot.lock().take());
            };
            let done = fut.as_mut().poll(cx).is_ready();
            if done {
                // Dropped now: what it holds (a watcher's subscription) goes with it.
                *p = None;
            }
            done
        };
        match this.slot.lock().take() {
            Some(item) => Poll::Ready(Some(item)),
            None if done => Poll::Ready(None),
            None => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;

    #[tokio::test]
    async fn items_arrive_in_order_and_the_producer_waits_for_each() {
        let progress = Arc::new(Mutex::new(0));
        let p = progress.clone();
        let mut s = generate(move |y| async move {
            for i in 0..3 {
                y.send(i).await;
                *p.lock() = i + 1;
            }
            y.offer(99);
        });
        assert_eq!(*progress.lock(), 0, "nothing runs before the first poll");
        assert_eq!(s.next().await, Some(0));
        // The producer is still waiting for its first item to be taken.
        assert_eq!(*progress.lock(), 0);
        assert_eq!(s.next().await, Some(1));
        assert_eq!(*progress.lock(), 1);
        assert_eq!(s.next().await, Some(2));
        assert_eq!(s.next().await, Some(99), "the last word after the end");
        assert_eq!(s.next().await, None);
        assert_eq!(s.next().await, None);
    }

    #[tokio::test]
    async fn a_dropper_ends_the_producer_and_what_it_holds() {
        let held = Arc::new(());
        let h = held.clone();
        let (dropper_tx, mut dropper_rx) = tokio::sync::mpsc::unbounded_channel();
        let mut s = generate(move |y| async move {
            let _h = h;
            dropper_tx.send(y.dropper()).unwrap();
            y.send(1).await;
            std::future::pending::<()>().await;
        });
        assert_eq!(s.next().await, Some(1));
        let d = dropper_rx.recv().await.unwrap();
        assert_eq!(Arc::strong_count(&held), 2);
        d.drop_producer();
        assert_eq!(Arc::strong_count(&held), 1, "the producer's state is gone");
        assert_eq!(s.next().await, None);
        // A dropper outliving its stream does nothing.
        drop(s);
        d.drop_producer();
    }

    #[tokio::test]
    async fn a_producer_waiting_on_something_else_wakes_the_consumer() {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<u32>(1);
        let mut s = generate(move |y| async move {
            while let Some(v) = rx.recv().await {
                y.send(v * 2).await;
            }
        });
        let reader = tokio::spawn(async move { s.by_ref().collect::<Vec<_>>().await });
        for v in 1..=3 {
            tx.send(v).await.unwrap();
        }
        drop(tx);
        assert_eq!(reader.await.unwrap(), vec![2, 4, 6]);
    }
}
