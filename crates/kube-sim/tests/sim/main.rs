//! The simulator against kube-apiserver's observable behaviour, one test binary: raw HTTP,
//! kube-rs, kubectl and property tests. `cargo test -p kube-sim --test sim <module>::` runs one.

mod aggregated_discovery;
mod authz;
mod builtins;
mod cl2;
mod crds;
mod dry_run;
mod errors;
mod fleet;
mod kube;
mod kubectl;
mod kubectl_protobuf;
mod numbers;
mod props;
mod proto;
mod protobuf;
mod shard;
mod watch;
mod workloads;
