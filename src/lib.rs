//! watchmux: a Kubernetes list/watch multiplexing reverse proxy.
//!
//! The path of one watch event, module by module (see `ARCHITECTURE.md`):
//!
//! ```text
//! upstream ──▶ reflector ──▶ cache (store, event log) ──▶ hub (watchers, dispatch index) ──▶ downstream (watch, websocket)
//! ```
//!
//! * [`upstream`]: the HTTP client to kube-apiserver (kubeconfig, TLS, credentials).
//! * [`reflector`]: one per cached resource: discover, list, watch, relist.
//! * [`cache`]: a resource's objects and its window of recent events; one writer (the
//!   reflector), many readers.
//! * [`hub`]: the registered watchers and the index that picks the ones an event concerns.
//! * [`downstream`]: the HTTP server: accepting connections (a trusted balancer's PROXY
//!   protocol header, TLS), routing, cached LIST and WATCH answers, websocket, health.
//! * [`passthrough`]: everything the cache does not answer, forwarded unchanged.
//! * [`app`]: what one running watchmux is, its life cycle and each cached kind's (started by
//!   its first read in on-demand mode, dropped when idle or for memory); [`drain`]: the paced
//!   end of the watches at a graceful shutdown; [`serve`]: running it as a process.
//! * [`auth`], [`tls`], [`config`], [`metrics`]: identities, TLS, configuration, Prometheus.
//! * [`error`]: the one mapping from the modules' typed errors to kube `Status` answers.
//!
//! The wire vocabulary shared with the simulator is the `kube-wire` crate; the simulator
//! (`kube-sim`) and the bench (`watchmux-bench`) are crates of their own that depend on this
//! one, never the other way round.

pub mod app;
pub mod auth;
pub mod cache;
pub mod config;
pub mod control;
pub mod downstream;
pub mod drain;
pub mod error;
pub mod hub;
pub mod metrics;
pub mod passthrough;
pub mod persist;
pub mod reflector;
pub mod serve;
pub mod tls;
pub mod upstream;

/// The allocator the `watchmux` binary runs on (and the bench's roles, so they measure it):
/// jemalloc. glibc's malloc hands freed memory back to the kernel and faults it in again: at a
/// fleet's cold start, zeroing fresh pages took 14 % of watchmux's CPU.
pub use tikv_jemallocator::Jemalloc as Allocator;
