//! A kube-rs reflector as a client of watchmux: the informer the kube and tier tests run.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::StreamExt;
use kube::api::{Api, ResourceExt};
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher::{self, Event};
use kube::{Client, Config};
use parking_lot::Mutex;
use tokio::task::JoinHandle;

/// A kube-rs reflector (watcher + store) of `K` at a server; its initial lists and errors are
/// counted. Stops when dropped.
pub struct Informer<K: kube::Resource<DynamicType = ()> + Clone + 'static> {
    pub store: Store<K>,
    /// Initial lists (`Event::Init`): 1 means it never relisted.
    pub inits: Arc<AtomicUsize>,
    /// The errors its watcher reported.
    pub errors: Arc<Mutex<Vec<String>>>,
    task: JoinHandle<()>,
}

impl<K> Informer<K>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    /// Starts one at `url` with `config`.
    pub fn start(url: &str, config: watcher::Config) -> Informer<K> {
        let client = Client::try_from(Config::new(url.parse().expect("url"))).expect("client");
        let (store, writer) = reflector::store();
        let inits = Arc::new(AtomicUsize::new(0));
        let errors = Arc::new(Mutex::new(Vec::new()));
        let (i, e) = (inits.clone(), errors.clone());
        let stream = watcher::watcher(Api::<K>::all(client), config).reflect(writer);
        let task = tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(item) = stream.next().await {
                match item {
                    Ok(Event::Init) => {
                        i.fetch_add(1, Ordering::SeqCst);
                    }
                    Ok(_) => {}
                    Err(err) => {
                        e.lock().push(err.to_string());
                        // kube-rs retries at once; do not spin while a tier is away.
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
        });
        Informer {
            store,
            inits,
            errors,
            task,
        }
    }

    /// `ns/name` → resourceVersion of what its store holds.
    pub fn state(&self) -> BTreeMap<String, String> {
        self.store
            .state()
            .iter()
            .map(|o| {
                (
                    format!("{}/{}", o.namespace().unwrap_or_default(), o.name_any()),
                    o.resource_version().unwrap_or_default(),
                )
            })
            .collect()
    }

    /// Waits for its initial list (30 s at most).
    pub async fn ready(&self) {
        tokio::time::timeout(Duration::from_secs(30), self.store.wait_until_ready())
            .await
            .expect("the informer's initial list within 30 s")
            .expect("informer alive");
    }
}

impl<K: kube::Resource<DynamicType = ()> + Clone + 'static> Drop for Informer<K> {
    fn drop(&mut self) {
        self.task.abort();
    }
}
