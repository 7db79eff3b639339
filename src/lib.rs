//! watchmux: a Kubernetes list/watch multiplexing reverse proxy.
//!
//! This crate also carries `sim`, a faithful built-in kube-apiserver simulator that the tests,
//! the demo and the benchmarks use as the upstream.

pub mod api;
pub mod auth;
pub mod authz;
pub mod bench;
pub mod cache;
pub mod config;
pub mod gofmt;
pub mod kubeconfig;
pub mod metrics;
pub mod proxy;
pub mod reflector;
pub mod respond;
pub mod selector;
pub mod server;
pub mod sim;
pub mod status;
pub mod tls;
pub mod upstream;
