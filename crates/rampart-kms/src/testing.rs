//! A key server started in-process for tests (behind the `testing`
//! feature, not part of the server's API): a deployment initialised in a
//! directory the test owns, on SQLite there or on a PostgreSQL database,
//! served on 127.0.0.1 with real TLS, REST and optionally KMIP, until the
//! [`TestServer`] is dropped.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::oneshot;

use crate::deployment::{self, files, InitOptions, InitSeal};
use crate::server::{Server, ServerOptions};
use crate::shamir::Share;
use crate::store::Store;
use crate::Bundle;

/// How the test deployment is made.
#[derive(Debug, Default)]
pub struct TestDeployment<'a> {
    /// A postgres:// URL; `None`: SQLite in the data directory.
    pub store_url: Option<&'a str>,
    /// Split the root key `threshold`-of-`shares` instead of an unseal
    /// key file (the server then starts sealed).
    pub shamir: Option<(u8, u8)>,
    /// Serve KMIP too.
    pub kmip: bool,
}

/// A running in-process key server.
pub struct TestServer {
    pub data_dir: PathBuf,
    pub server: Server,
    pub store: Arc<dyn Store>,
    pub admin: Bundle,
    /// The REST listener, HOST:PORT (also the bundles' endpoint).
    pub endpoint: String,
    /// The KMIP listener, HOST:PORT, when asked for.
    pub kmip: Option<String>,
    /// The root key's shares, with [`TestDeployment::shamir`].
    pub shares: Vec<Share>,
    stops: Vec<oneshot::Sender<()>>,
}

impl std::fmt::Debug for TestServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestServer").field("endpoint", &self.endpoint).finish_non_exhaustive()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        for stop in self.stops.drain(..) {
            let _ = stop.send(());
        }
    }
}

impl TestServer {
    /// Initialises a deployment in `data_dir` (created) and serves it with
    /// the server options `configure` leaves.
    ///
    /// # Panics
    /// Whatever fails: a test's set-up.
    #[allow(clippy::unwrap_used)]
    pub async fn start(
        data_dir: &Path,
        how: &TestDeployment<'_>,
        configure: impl FnOnce(&mut ServerOptions),
    ) -> Self {
        std::fs::create_dir_all(data_dir).unwrap();
        let rest = crate::server::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("127.0.0.1:{}", rest.local_addr().unwrap().port());
        let store = crate::store::open(how.store_url, data_dir).await.unwrap();
        let opts = InitOptions {
            data_dir: data_dir.to_owned(),
            seal: match how.shamir {
                Some((shares, threshold)) => InitSeal::Shamir { shares, threshold },
                None => InitSeal::File(data_dir.join(files::UNSEAL_KEY)),
            },
            sans: Vec::new(),
            endpoints: vec![endpoint.clone()],
            days: 30,
        };
        let outcome = deployment::init(&opts, store.as_ref()).await.unwrap();
        let admin = Bundle::read(&outcome.admin_bundle).unwrap();
        let mut options = ServerOptions::new(data_dir.to_owned());
        configure(&mut options);
        let server = Server::new(&options, Arc::clone(&store)).await.unwrap();
        let mut stops = vec![Self::spawn(&server, rest, false)];
        let mut kmip = None;
        if how.kmip {
            let listener = crate::server::bind("127.0.0.1:0").await.unwrap();
            kmip = Some(format!("127.0.0.1:{}", listener.local_addr().unwrap().port()));
            stops.push(Self::spawn(&server, listener, true));
        }
        Self {
            data_dir: data_dir.to_owned(),
            server,
            store,
            admin,
            endpoint,
            kmip,
            shares: outcome.shares,
            stops,
        }
    }

    /// Another server of the same deployment, on the same store, on a
    /// listener of its own: returns its REST HOST:PORT and what stops it
    /// (dropping it stops it too).
    ///
    /// # Panics
    /// Whatever fails: a test's set-up.
    #[allow(clippy::unwrap_used)]
    pub async fn another_server(&self) -> (String, oneshot::Sender<()>) {
        let listener = crate::server::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("127.0.0.1:{}", listener.local_addr().unwrap().port());
        let server =
            Server::new(&ServerOptions::new(self.data_dir.clone()), Arc::clone(&self.store))
                .await
                .unwrap();
        (endpoint, Self::spawn(&server, listener, false))
    }

    /// Another server of the same deployment on `store`, a store of its
    /// own over the same database (as a server on another machine opens
    /// it): returns its REST HOST:PORT, or its KMIP one when `kmip`, and
    /// what stops it.
    ///
    /// # Panics
    /// Whatever fails: a test's set-up.
    #[allow(clippy::unwrap_used)]
    pub async fn another_server_on(
        &self,
        store: Arc<dyn Store>,
        kmip: bool,
    ) -> (String, oneshot::Sender<()>) {
        let listener = crate::server::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("127.0.0.1:{}", listener.local_addr().unwrap().port());
        let server = Server::new(&ServerOptions::new(self.data_dir.clone()), store).await.unwrap();
        (endpoint, Self::spawn(&server, listener, kmip))
    }

    /// Serves `listener` (KMIP when `kmip`) until the returned sender
    /// sends or is dropped.
    #[allow(clippy::unwrap_used)]
    fn spawn(
        server: &Server,
        listener: tokio::net::TcpListener,
        kmip: bool,
    ) -> oneshot::Sender<()> {
        let (stop, stopped) = oneshot::channel::<()>();
        let server = server.clone();
        tokio::spawn(async move {
            let shutdown = async {
                let _ = stopped.await;
            };
            if kmip {
                server.run_kmip(listener, shutdown).await.unwrap();
            } else {
                server.run(listener, shutdown).await.unwrap();
            }
        });
        stop
    }

    /// Stops the server's listeners.
    pub fn stop(&mut self) {
        for stop in self.stops.drain(..) {
            let _ = stop.send(());
        }
    }
}
