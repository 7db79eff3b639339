//! The benchmark suite (`watchmux bench`): watchmux against the simulator, side by side with the
//! baselines a user would otherwise deploy (the simulator directly, nginx as a streaming reverse
//! proxy) and with the limit (a minimal program writing the same bytes to the same sockets).
//!
//! Every process under test runs as its own child process so its CPU time and RSS can be read
//! from `/proc`; the clients run in the bench process itself.

pub mod limit;
pub mod nginx;
pub mod plot;
