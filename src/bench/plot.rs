//! PNG plots of bench results.
