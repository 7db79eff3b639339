//! The control runtime: a thread of its own for the work that keeps the caches current (the
//! reflectors, the discovery and CRD watches, the keeper of idle kinds and the freshness checks
//! of consistent reads), apart from the runtime that serves clients.
//!
//! Why: a fleet's cold start makes tens of thousands of client streams ready to write at once
//! (every kubelet's initial events). Tasks of one tokio runtime wait their turn in its run
//! queues, so on a saturated 2-core machine a freshness check's next step waited behind all of
//! them: a 50 ms timer fired up to 1.9 s late, checks that take about a second against the
//! upstream took over 3 s, and their readers got kube's `Too large resource version` (504)
//! instead of a proof. On a thread of its own the control work gets the operating system's
//! fair share of the CPU whatever the client load; clients still wait for the CPU to write
//! their bytes, but no longer for the proofs and events that decide what they are sent.
//!
//! Owns that thread and its life: it ends when the [`ControlRuntime`] is dropped or when the
//! runtime that created it shuts down (a test's runtime, the binary's at exit), whichever comes
//! first; the tasks still on it are dropped then, as a runtime's are at its shutdown.

use tokio::runtime::Handle;
use tokio_util::sync::CancellationToken;

/// The control runtime's thread (see the module doc).
#[derive(Debug)]
pub struct ControlRuntime {
    handle: Handle,
    stop: CancellationToken,
}

impl ControlRuntime {
    /// Starts the thread. Must be called from within a tokio runtime (the serving one): the
    /// control runtime ends with it. Where no thread can be started, the work runs on the
    /// calling runtime (logged).
    pub fn start() -> ControlRuntime {
        let stop = CancellationToken::new();
        // Dropped (and so cancelling) when the creating runtime drops its tasks at shutdown.
        let guard = stop.clone().drop_guard();
        tokio::spawn(async move {
            let _guard = guard;
            std::future::pending::<()>().await
        });
        let handle = match Self::spawn_thread(stop.clone()) {
            Ok(h) => h,
            Err(e) => {
                tracing::error!(error = %e, "no control thread: the caches' upkeep shares the serving runtime");
                Handle::current()
            }
        };
        ControlRuntime { handle, stop }
    }

    fn spawn_thread(stop: CancellationToken) -> std::io::Result<Handle> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let handle = rt.handle().clone();
        // The caller's log subscriber, also where it is a thread's own (a test capturing logs).
        let logs = tracing::dispatcher::get_default(|d| d.clone());
        std::thread::Builder::new()
            .name("watchmux-control".into())
            .spawn(move || {
                tracing::dispatcher::with_default(&logs, || rt.block_on(stop.cancelled()))
            })?;
        Ok(handle)
    }

    /// Where control tasks are spawned.
    pub fn handle(&self) -> &Handle {
        &self.handle
    }
}

impl Drop for ControlRuntime {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Control tasks run on their own thread, and keep running while the serving runtime's
    /// only thread is busy.
    #[tokio::test]
    #[allow(clippy::disallowed_methods)] // blocking the serving runtime is the point
    async fn control_tasks_run_while_the_serving_runtime_is_blocked() {
        let control = ControlRuntime::start();
        let (tx, rx) = std::sync::mpsc::channel();
        control.handle().spawn(async move {
            tokio::time::sleep(Duration::from_millis(10)).await;
            tx.send(std::thread::current().name().map(str::to_string))
                .unwrap();
        });
        // Blocks the test runtime's only thread: the task must still finish.
        let name = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(name.as_deref(), Some("watchmux-control"));
    }

    /// The thread ends when the runtime that started it shuts down.
    #[test]
    fn the_thread_ends_with_the_serving_runtime() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let (control, stopped) = rt.block_on(async {
            let control = ControlRuntime::start();
            let stop = control.stop.clone();
            (control, stop)
        });
        assert!(!stopped.is_cancelled());
        drop(rt);
        assert!(stopped.is_cancelled());
        drop(control);
    }
}
