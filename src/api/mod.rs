//! The kube-apiserver request grammar shared by the simulator and the proxy: URL paths,
//! list/watch query parameters with their validation rules, and `continue` tokens.

pub mod continue_token;
pub mod event;
pub mod options;
pub mod path;
