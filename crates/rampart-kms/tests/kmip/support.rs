//! Shared by the KMIP test files: an in-process deployment (SQLite, REST
//! and KMIP listeners on 127.0.0.1) and TLS client connections with a
//! bundle's certificate.

use std::path::PathBuf;
use std::sync::Arc;

use rampart_kms::deployment::{self, files, InitOptions, InitSeal};
use rampart_kms::server::{Server, ServerOptions};
use rampart_kms::store::Store;
use rampart_kms::Bundle;

pub struct Deployment {
    pub dir: PathBuf,
    pub store: Arc<dyn Store>,
    pub kmip: String,
    pub admin: Bundle,
    stop: Vec<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for Deployment {
    fn drop(&mut self) {
        for stop in self.stop.drain(..) {
            let _ = stop.send(());
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Deployment {
    pub async fn new(tag: &str) -> Self {
        let mut random = [0u8; 8];
        rampart_crypto::fill_random(&mut random).unwrap();
        let dir = std::env::temp_dir().join(format!("rampart-kmip-{tag}-{}", hex::encode(random)));
        let data_dir = dir.join("data");
        std::fs::create_dir_all(&data_dir).unwrap();
        let rest = rampart_kms::server::bind("127.0.0.1:0").await.unwrap();
        let kmip = rampart_kms::server::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("127.0.0.1:{}", rest.local_addr().unwrap().port());
        let kmip_endpoint = format!("127.0.0.1:{}", kmip.local_addr().unwrap().port());
        let store = rampart_kms::store::open(None, &data_dir).await.unwrap();
        let opts = InitOptions {
            data_dir: data_dir.clone(),
            seal: InitSeal::File(data_dir.join(files::UNSEAL_KEY)),
            sans: Vec::new(),
            endpoints: vec![endpoint],
            days: 30,
        };
        let outcome = deployment::init(&opts, store.as_ref()).await.unwrap();
        let admin = Bundle::read(&outcome.admin_bundle).unwrap();
        let server = Server::new(&ServerOptions::new(data_dir), Arc::clone(&store)).await.unwrap();
        let mut stop = Vec::new();
        for (listener, is_kmip) in [(rest, false), (kmip, true)] {
            let (tx, rx) = tokio::sync::oneshot::channel::<()>();
            stop.push(tx);
            let server = server.clone();
            tokio::spawn(async move {
                let shutdown = async {
                    let _ = rx.await;
                };
                if is_kmip {
                    server.run_kmip(listener, shutdown).await.unwrap();
                } else {
                    server.run(listener, shutdown).await.unwrap();
                }
            });
        }
        Self { dir, store, kmip: kmip_endpoint, admin, stop }
    }

    pub async fn audit_ops(&self) -> Vec<(String, String, String)> {
        let entries = self.store.audit_page(0, None, 100_000).await.unwrap();
        entries.into_iter().map(|e| (e.client, e.operation, e.outcome)).collect()
    }
}

pub type Tls = tokio_rustls::client::TlsStream<tokio::net::TcpStream>;

pub fn client_config(
    bundle: &Bundle,
    version: &'static rustls::SupportedProtocolVersion,
) -> rustls::ClientConfig {
    use rustls_pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    let ca = &bundle.ca_cert;
    roots.add(rustls_pki_types::CertificateDer::from_pem_slice(ca.as_bytes()).unwrap()).unwrap();
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_protocol_versions(&[version])
    .unwrap()
    .with_root_certificates(roots);
    builder
        .with_client_auth_cert(
            vec![rustls_pki_types::CertificateDer::from_pem_slice(bundle.cert.as_bytes())
                .unwrap()
                .into_owned()],
            rustls_pki_types::PrivateKeyDer::from_pem_slice(bundle.key.expose()).unwrap(),
        )
        .unwrap()
}

pub async fn connect(
    bundle: &Bundle,
    endpoint: &str,
    version: &'static rustls::SupportedProtocolVersion,
) -> Tls {
    let config = client_config(bundle, version);
    let tcp = tokio::net::TcpStream::connect(endpoint).await.unwrap();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    connector.connect("127.0.0.1".try_into().unwrap(), tcp).await.unwrap()
}
