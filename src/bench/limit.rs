//! The limit baseline: a minimal server that writes the upstream's pre-encoded bytes to the same
//! sockets, with no cache, selectors or HTTP framework.
