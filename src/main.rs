//! The `watchmux` command line: `serve` (the proxy) and `probe` (an exec health probe).
//! The simulated cluster of the demo is `cargo run --release --example demo`; the simulator and
//! the benchmarks are binaries of their own crates (`kube-sim`, `watchmux-bench run`).
//!
//! Owns the arguments and the exit status (errors are printed with their causes); it must not
//! hold any of the proxy's logic, which `watchmux::serve::run` starts.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use watchmux::config::Config;

#[global_allocator]
static ALLOCATOR: watchmux::Allocator = watchmux::Allocator;

#[derive(Parser, Debug)]
#[command(
    name = "watchmux",
    version,
    about = "Kubernetes list/watch multiplexer"
)]
struct Cli {
    /// Log filter (tracing EnvFilter syntax), e.g. `info` or `watchmux=debug`; overrides the
    /// config's `log.level` (default `info`).
    #[arg(long, env = "WATCHMUX_LOG", global = true)]
    log: Option<String>,
    /// Log format, `text` or `json`; overrides the config's `log.format` (default `text`).
    #[arg(long, env = "WATCHMUX_LOG_FORMAT", global = true, value_parser = ["text", "json"])]
    log_format: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the proxy in front of an upstream kube-apiserver.
    Serve(ServeArgs),
    /// GET a health URL (e.g. http://127.0.0.1:8080/readyz): exit 0 on 2xx, else print the
    /// answer and exit 1. For exec probes of a watchmux that listens on localhost only.
    Probe(ProbeArgs),
}

#[derive(clap::Args, Debug)]
struct ProbeArgs {
    /// The URL to GET.
    url: String,
    /// Give up after this many milliseconds.
    #[arg(long, default_value_t = 2000)]
    timeout_ms: u64,
}

#[derive(clap::Args, Debug)]
struct ServeArgs {
    /// Configuration file (see config.toml).
    #[arg(long, short)]
    config: std::path::PathBuf,
    /// Overrides `server.listen`.
    #[arg(long)]
    listen: Option<SocketAddr>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(a) => run_serve(a, cli.log, cli.log_format).await,
        Command::Probe(a) => run_probe(a).await,
    }
}

async fn run_probe(a: ProbeArgs) -> anyhow::Result<()> {
    use http_body_util::{BodyExt, Empty};
    let uri: http::Uri = a.url.parse().context("probe URL")?;
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<Empty<bytes::Bytes>>();
    let exchange = async {
        let resp = client.get(uri).await?;
        let code = resp.status();
        let body = resp.into_body().collect().await?.to_bytes();
        anyhow::Ok((code, body))
    };
    let (code, body) = tokio::time::timeout(Duration::from_millis(a.timeout_ms), exchange)
        .await
        .with_context(|| format!("{}: no answer within {} ms", a.url, a.timeout_ms))??;
    if code.is_success() {
        return Ok(());
    }
    print!("{}", String::from_utf8_lossy(&body));
    anyhow::bail!("{}: {code}", a.url)
}

async fn run_serve(
    a: ServeArgs,
    log: Option<String>,
    log_format: Option<String>,
) -> anyhow::Result<()> {
    let mut config = Config::from_file(&a.config)?;
    if let Some(l) = a.listen {
        config.server.listen = l;
    }
    config.validate()?;
    watchmux::serve::init_logging(log.as_deref(), log_format.as_deref(), &config.log)?;
    Ok(watchmux::serve::run(config).await?)
}
