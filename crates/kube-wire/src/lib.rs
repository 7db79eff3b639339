//! The Kubernetes API vocabulary that watchmux and its simulator both speak, so the two can only
//! ever speak one dialect: what a request path addresses ([`path`]), `metav1.ListOptions` and the
//! resourceVersion rules ([`options`]), `continue` tokens ([`continue_token`]), label and field
//! selectors ([`selector`]), KEP-5866's `shardSelector` and its hash ([`shard`]), how an empty
//! list is written and read ([`list`]), watch-event frames and bookmarks ([`event`]),
//! `metav1.Status` ([`status`]), who asks for what ([`access`]), content negotiation
//! ([`negotiate`]), the HTTP answers built from them ([`response`]), server-side Table printing
//! and the metadata-only forms ([`table`]) with the JSONPath of CRD printer columns
//! ([`jsonpath`]), and Go's formatting where clients see it byte for byte ([`gofmt`]), and what a
//! watch's websocket reads from its client ([`websocket_in`], a parser fed the bytes a server
//! read).
//!
//! Pure functions and data only: nothing here opens a socket, reads a file or spawns a task.

pub mod access;
pub mod continue_token;
pub mod event;
pub mod gofmt;
pub mod goscan;
pub mod jsonpath;
pub mod list;
pub mod negotiate;
pub mod options;
pub mod path;
pub mod proto;
pub mod response;
pub mod selector;
pub mod shard;
pub mod status;
pub mod table;
pub mod websocket_in;
