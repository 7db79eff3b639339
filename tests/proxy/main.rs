//! watchmux's integration tests, one test binary (linking is the expensive part of a test
//! build): watchmux in front of the simulator, driven over HTTP, by kube-rs, kubectl and
//! websocket clients. Each module is one area; `cargo test --test proxy <module>::` runs one.

mod common;
mod pki;

mod alloc;
mod authz;
mod builtin_kinds;
mod cache_props;
mod clients;
mod conformance;
mod consistency;
mod crd_tables;
mod deploy;
mod drain;
mod drift;
mod exec_plugin;
mod fleet;
mod kube;
mod kubeconfig;
mod kubectl;
mod limits;
mod memory;
mod observability;
mod oidc;
mod on_demand;
mod pagination;
mod passthrough;
mod path_props;
mod persist;
mod protobuf;
mod proxy_protocol;
mod rebalance;
mod resilience;
mod selectors;
mod shards;
mod startup_errors;
mod tables;
mod tiers;
mod tls_downstream;
mod tls_upstream;
mod upgrade;
mod warm_up;
mod websocket;
