//! Accepting a downstream connection: the PROXY protocol header of a trusted load balancer
//! (`server.proxy_protocol_trusted`, read by [`super::proxy_protocol`]), which names the client
//! behind it, then the TLS handshake when serving TLS (with the verified client certificate, if
//! any), and what every request of the connection carries: the [`PeerAuth`] and the client's
//! address.
//!
//! Owns the connection's byte stream up to HTTP; it must not read requests (hyper does), nor log
//! or count a refusal (the accept loop in [`super`] does, from the [`AcceptError`]).

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use super::proxy_protocol::{self, Rejection, TrustedSources};
use crate::auth::{AuthMode, PeerAuth};
use crate::config::ServerConfig;
use crate::tls::{ServerTls, TlsFileError};

/// A downstream connection's byte stream: plain TCP or TLS.
pub trait Io: AsyncRead + AsyncWrite + Unpin + Send + 'static {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + 'static> Io for T {}

/// How downstream connections are accepted: the PROXY protocol's trusted sources, TLS or not,
/// and the `server.auth` mode.
#[derive(Debug, Clone, Default)]
pub struct Acceptor {
    /// Serving TLS (`server.tls_cert_file`); `None` serves plain HTTP.
    pub tls: Option<Arc<ServerTls>>,
    /// `server.auth`, attached to every request as [`PeerAuth`].
    pub mode: AuthMode,
    /// `server.proxy_protocol_trusted`: the sources whose connections start with a PROXY
    /// header. Empty: the PROXY protocol is off.
    pub proxy_trusted: TrustedSources,
}

/// Why a connection was closed before HTTP.
#[derive(Debug, thiserror::Error)]
pub enum AcceptError {
    /// A source not trusted to send a PROXY header started with one: only the balancers of
    /// `server.proxy_protocol_trusted` may name another client.
    #[error(
        "the connection starts with a PROXY protocol header, from a source not in \
         server.proxy_protocol_trusted"
    )]
    UntrustedProxyHeader,
    /// A trusted source's PROXY header could not be read (its text is in this error's).
    #[error("{0}")]
    ProxyHeader(proxy_protocol::ReadError),
    /// A trusted source's PROXY header was not whole within `server.header_read_timeout_secs`.
    #[error("the PROXY protocol header did not arrive within {0:?}")]
    ProxyHeaderTimeout(Duration),
    /// The TLS handshake failed.
    #[error("TLS handshake with {client} failed: {error}")]
    Tls {
        /// The client (named by the PROXY header, if there was one).
        client: SocketAddr,
        /// Why (its text is in this error's; not a `source()`).
        error: io::Error,
    },
    /// The connection's first bytes could not be looked at (its text is in this error's).
    #[error("reading the connection: {0}")]
    Io(io::Error),
}

impl AcceptError {
    /// The PROXY protocol refusal this is (`watchmux_proxy_protocol_rejected_total{reason}`),
    /// if it is one.
    pub fn proxy_rejection(&self) -> Option<Rejection> {
        match self {
            AcceptError::UntrustedProxyHeader => Some(Rejection::Untrusted),
            AcceptError::ProxyHeader(e) => Some(e.rejection()),
            AcceptError::ProxyHeaderTimeout(_) => Some(Rejection::Incomplete),
            AcceptError::Tls { .. } | AcceptError::Io(_) => None,
        }
    }
}

impl Acceptor {
    /// From `[server]`: loads the TLS files (an error names the key at fault).
    pub fn from_config(server: &ServerConfig) -> Result<Acceptor, TlsFileError> {
        let tls = match (&server.tls_cert_file, &server.tls_key_file) {
            (Some(cert), Some(key)) => Some(Arc::new(ServerTls::load(
                cert,
                key,
                server.client_ca_file.as_deref(),
            )?)),
            _ => None,
        };
        Ok(Acceptor {
            tls,
            mode: server.auth_mode(),
            proxy_trusted: TrustedSources::new(server.proxy_protocol_trusted.clone()),
        })
    }

    /// `https` when serving TLS, else `http`.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() { "https" } else { "http" }
    }

    /// The client's address: from a trusted `peer`, the one its PROXY header names (read
    /// within `header_timeout`, and not a byte further); from any other, `peer` itself, unless
    /// the connection starts with a header. The connection has sent something already (the
    /// accept loop waited for it).
    pub async fn client_addr(
        &self,
        tcp: &mut TcpStream,
        peer: SocketAddr,
        header_timeout: Duration,
    ) -> Result<SocketAddr, AcceptError> {
        if self.proxy_trusted.contains(peer.ip()) {
            let read = proxy_protocol::read_header(tcp);
            let header = tokio::time::timeout(header_timeout, read)
                .await
                .map_err(|_| AcceptError::ProxyHeaderTimeout(header_timeout))?
                .map_err(AcceptError::ProxyHeader)?;
            return Ok(header.addresses.map_or(peer, |a| a.source));
        }
        // Peeked, not read: what is there stays for TLS or HTTP. The accept loop saw a byte
        // arrive, so this does not wait.
        let mut first = [0u8; 8];
        let n = tcp.peek(&mut first).await.map_err(AcceptError::Io)?;
        if proxy_protocol::begins_like_header(&first[..n]) {
            return Err(AcceptError::UntrustedProxyHeader);
        }
        Ok(peer)
    }

    /// The TLS handshake if serving TLS, and what the requests of this connection carry;
    /// `client` (from [`Acceptor::client_addr`]) names the client in errors.
    pub async fn accept(
        &self,
        tcp: TcpStream,
        client: SocketAddr,
    ) -> Result<(Box<dyn Io>, PeerAuth), AcceptError> {
        let Some(tls) = &self.tls else {
            return Ok((
                Box::new(tcp),
                PeerAuth {
                    mode: self.mode,
                    identity: None,
                },
            ));
        };
        let (stream, identity) = tls
            .accept(tcp)
            .await
            .map_err(|error| AcceptError::Tls { client, error })?;
        Ok((
            Box::new(stream),
            PeerAuth {
                mode: self.mode,
                identity: identity.map(Arc::new),
            },
        ))
    }
}
