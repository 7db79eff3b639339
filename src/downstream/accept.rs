//! Accepting a downstream connection: the TLS handshake when serving TLS (with the verified
//! client certificate, if any), and the [`PeerAuth`] every request of the connection carries.
//!
//! Owns the connection's byte stream up to HTTP; it must not read requests (hyper does).

use std::io;
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use crate::auth::{AuthMode, PeerAuth};
use crate::config::ServerConfig;
use crate::tls::{ServerTls, TlsFileError};

/// A downstream connection's byte stream: plain TCP or TLS.
pub trait Io: AsyncRead + AsyncWrite + Unpin + Send + 'static {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + 'static> Io for T {}

/// How downstream connections are accepted: TLS or not, and the `server.auth` mode.
#[derive(Debug, Clone, Default)]
pub struct Acceptor {
    /// Serving TLS (`server.tls_cert_file`); `None` serves plain HTTP.
    pub tls: Option<Arc<ServerTls>>,
    /// `server.auth`, attached to every request as [`PeerAuth`].
    pub mode: AuthMode,
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
        })
    }

    /// `https` when serving TLS, else `http`.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() { "https" } else { "http" }
    }

    /// The TLS handshake if serving TLS, and what the requests of this connection carry.
    pub async fn accept(&self, tcp: TcpStream) -> io::Result<(Box<dyn Io>, PeerAuth)> {
        let Some(tls) = &self.tls else {
            return Ok((
                Box::new(tcp),
                PeerAuth {
                    mode: self.mode,
                    identity: None,
                },
            ));
        };
        let (stream, identity) = tls.accept(tcp).await?;
        Ok((
            Box::new(stream),
            PeerAuth {
                mode: self.mode,
                identity: identity.map(Arc::new),
            },
        ))
    }
}
