//! watchmux as a process: logging set up from the config and the command line, the upstream
//! client, the listener, and the graceful shutdown on SIGTERM/SIGINT. The `watchmux` binary, the
//! demo and the bench's target process all run the proxy through [`run`], so they stop alike.
//!
//! Owns nothing of the request path: it builds the [`App`] and hands it the listener. Its
//! failures are [`ServeError`]s for the binary to print; it must not answer requests.

use std::net::SocketAddr;

use crate::app::App;
use crate::config::{Config, LogConfig, LogFormat};
use crate::downstream;
use crate::upstream::{Upstream, UpstreamError};

/// Why watchmux could not start or keep running. Each text says its causes once: a cause whose
/// text is written into the error's is not also its `source()` (the binary prints both).
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The log filter does not parse.
    #[error("invalid log filter {filter:?}: {error}")]
    LogFilter {
        /// The filter as given.
        filter: String,
        /// Why it does not parse.
        error: tracing_subscriber::filter::ParseError,
    },
    /// The upstream client could not be built from `[upstream]`.
    #[error("upstream client: {0}")]
    Upstream(UpstreamError),
    /// The downstream TLS files could not be loaded.
    #[error(transparent)]
    DownstreamTls(#[from] crate::tls::TlsFileError),
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {error}")]
    Listen {
        /// `server.listen`.
        addr: SocketAddr,
        /// The bind error.
        error: std::io::Error,
    },
    /// A signal handler could not be installed.
    #[error("installing a signal handler: {0}")]
    Signal(std::io::Error),
}

impl From<UpstreamError> for ServeError {
    fn from(e: UpstreamError) -> ServeError {
        ServeError::Upstream(e)
    }
}

/// Installs the global log subscriber: `filter` and `format` (command line or environment) over
/// the config's `[log]`.
pub fn init_logging(
    filter: Option<&str>,
    format: Option<&str>,
    config: &LogConfig,
) -> Result<(), ServeError> {
    let filter = filter.unwrap_or(&config.level);
    let env_filter =
        tracing_subscriber::EnvFilter::try_new(filter).map_err(|error| ServeError::LogFilter {
            filter: filter.to_string(),
            error,
        })?;
    let json = match format {
        Some(f) => f == "json",
        None => config.format == LogFormat::Json,
    };
    let b = tracing_subscriber::fmt().with_env_filter(env_filter);
    if json {
        b.json().flatten_event(true).init();
    } else {
        b.init();
    }
    Ok(())
}

/// The first SIGTERM or SIGINT (Ctrl-C).
pub async fn terminated() -> Result<&'static str, ServeError> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate()).map_err(ServeError::Signal)?;
        tokio::select! {
            r = tokio::signal::ctrl_c() => r.map(|_| "SIGINT").map_err(ServeError::Signal),
            _ = term.recv() => Ok("SIGTERM"),
        }
    }
    #[cfg(not(unix))]
    {
        tokio::signal::ctrl_c().await.map_err(ServeError::Signal)?;
        Ok("Ctrl-C")
    }
}

/// Serves `config` (already validated) until SIGTERM/SIGINT, then shuts down gracefully within
/// `server.shutdown_delay` + `server.shutdown_timeout`; a second signal exits at once.
pub async fn run(config: Config) -> Result<(), ServeError> {
    let upstream = Upstream::new(&config.upstream)?;
    let acceptor = downstream::Acceptor::from_config(&config.server)?;
    let app = App::start(&config, upstream);
    let addr = downstream::bind_and_serve_with(app.clone(), config.server.listen, acceptor)
        .await
        .map_err(|error| ServeError::Listen {
            addr: config.server.listen,
            error,
        })?;
    tracing::info!(listen = %addr, upstream = %app.upstream.url(), mode = ?config.cache.mode, listed = config.cache.resources.len(), authz = %config.server.authz_mode(), "watchmux serving");
    let signal = terminated().await?;
    let s = &config.server;
    tracing::info!(
        signal,
        delay = ?s.shutdown_delay,
        timeout = ?s.shutdown_timeout,
        "shutting down: /readyz fails, then watches end and connections drain"
    );
    tokio::select! {
        clean = app.shutdown_within(s.shutdown_delay, s.shutdown_timeout) => {
            if clean {
                tracing::info!("shut down cleanly");
            } else {
                tracing::warn!("shutdown bound reached; remaining connections dropped");
            }
        }
        r = terminated() => {
            tracing::warn!(signal = ?r.ok(), "second signal: exiting now");
        }
    }
    Ok(())
}
