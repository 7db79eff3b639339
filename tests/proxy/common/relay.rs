//! A TCP relay between two tiers, to cut the connections between them: what a load balancer
//! or a network partition does to a watchmux in front of another one, without restarting
//! either. Plain bytes both ways; [`Relay::cut`] aborts every connection open at that moment
//! (new ones are relayed again at once). With several targets ([`Relay::start_to_first`]) it
//! is a Service in front of replicas: a new connection goes to the first target that accepts
//! it, so a replica that stopped accepting (draining) gets none.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// A relay on 127.0.0.1 to one target address; stops (with its connections) when dropped.
pub struct Relay {
    /// `http://127.0.0.1:PORT`: where the tier in front points its upstream.
    pub url: String,
    /// Cancelled by [`Relay::cut`], then replaced: the connections of one generation.
    generation: Arc<parking_lot::Mutex<CancellationToken>>,
    /// Connections relayed so far.
    accepted: Arc<AtomicU64>,
    stop: CancellationToken,
}

impl Relay {
    /// Relays connections to `target` (`http://host:port`).
    pub async fn start(target: &str) -> Relay {
        Relay::start_to_first(&[target]).await
    }

    /// Relays each connection to the first of `targets` (`http://host:port`) that accepts it.
    pub async fn start_to_first(targets: &[&str]) -> Relay {
        let targets: Arc<Vec<String>> = Arc::new(
            targets
                .iter()
                .map(|t| {
                    t.strip_prefix("http://")
                        .expect("a plain HTTP URL")
                        .to_string()
                })
                .collect(),
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind relay");
        let url = format!("http://{}", listener.local_addr().expect("relay address"));
        let generation = Arc::new(parking_lot::Mutex::new(CancellationToken::new()));
        let accepted = Arc::new(AtomicU64::new(0));
        let stop = CancellationToken::new();
        let (g, n, s) = (generation.clone(), accepted.clone(), stop.clone());
        tokio::spawn(async move {
            loop {
                let (mut down, _) = tokio::select! {
                    _ = s.cancelled() => return,
                    c = listener.accept() => match c {
                        Ok(c) => c,
                        Err(_) => continue,
                    },
                };
                n.fetch_add(1, Ordering::SeqCst);
                let cut = g.lock().clone();
                let (targets, s) = (targets.clone(), s.clone());
                tokio::spawn(async move {
                    let mut up = None;
                    for t in targets.iter() {
                        if let Ok(c) = TcpStream::connect(t).await {
                            up = Some(c);
                            break;
                        }
                    }
                    let Some(mut up) = up else {
                        return;
                    };
                    let _ = (down.set_nodelay(true), up.set_nodelay(true));
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut down, &mut up) => {}
                        _ = cut.cancelled() => {}
                        _ = s.cancelled() => {}
                    }
                    // Dropped without a shutdown: both peers see the connection break (an RST
                    // once they write), as when a node or a middlebox goes away.
                    let _ = (down.set_zero_linger(), up.set_zero_linger());
                });
            }
        });
        Relay {
            url,
            generation,
            accepted,
            stop,
        }
    }

    /// Aborts every connection relayed so far.
    pub fn cut(&self) {
        let mut g = self.generation.lock();
        g.cancel();
        *g = CancellationToken::new();
    }

    /// Connections relayed so far.
    pub fn accepted(&self) -> u64 {
        self.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}
