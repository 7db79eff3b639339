//! watchmux: a Kubernetes list/watch multiplexing reverse proxy.
//!
//! The wire vocabulary it shares with its simulator lives in the `kube-wire` crate; the simulator
//! (`kube-sim`) and the bench (`watchmux-bench`) are crates of their own that depend on this one,
//! never the other way round. See `ARCHITECTURE.md` for the path of one watch event.

pub mod auth;
pub mod authz;
pub mod cache;
pub mod config;
pub mod kubeconfig;
pub mod metrics;
pub mod proxy;
pub mod reflector;
pub mod serve;
pub mod server;
pub mod tls;
pub mod upstream;
