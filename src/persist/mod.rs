//! The durable cache (`cache.persist_dir`, opt-in; issue 16): each resource's objects and the
//! tail of its event log on disk, so that a restarted watchmux can answer reads before the
//! upstream does and let clients resume their watches by resourceVersion.
//!
//! This module owns the files only: their format ([`format`]) and a resource's directory of
//! segments ([`segments`]: crash-safe appends, checkpoints that bound the footprint, loading
//! that detects torn and corrupt data and never reads it as objects), and the thread that writes
//! behind the live path ([`writer`]). What is written, when, and
//! what a loaded state may serve is decided by the cache and the reflector.

pub mod format;
pub mod resource;
pub mod segments;
pub mod writer;
