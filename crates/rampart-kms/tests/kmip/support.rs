//! Shared by the KMIP test files: an in-process deployment (SQLite, REST
//! and KMIP listeners on 127.0.0.1) and TLS client connections with a
//! bundle's certificate.

use std::path::PathBuf;
use std::sync::Arc;

use rampart_kms::store::Store;
use rampart_kms::testing::{TestDeployment, TestServer};
use rampart_kms::Bundle;

use crate::common::{Backend, PgCluster, TempDir};
use rampart_kmip::enums::{
    CryptographicAlgorithm, DigitalSignatureAlgorithm, Operation, ResultReason, ResultStatus,
};
use rampart_kmip::message::{
    Attribute, ProtocolVersion, RequestMessage, ResponseBatchItem, ResponseMessage,
};
use rampart_kmip::tag::Tag;
use rampart_kmip::ttlv::{self, Item, Value};
use rampart_kmip::Limits;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

pub struct Deployment {
    pub dir: PathBuf,
    pub store: Arc<dyn Store>,
    pub kmip: String,
    pub admin: Bundle,
    /// The database URL on PostgreSQL.
    pub pg: Option<String>,
    // Dropped in this order: the server stops, then its directory and its
    // cluster go.
    _server: TestServer,
    _temp: TempDir,
    _cluster: Option<PgCluster>,
}

impl Deployment {
    pub async fn new(tag: &str) -> Self {
        Self::on(Backend::Sqlite, tag).await
    }

    /// A deployment on `backend` (PostgreSQL: a fresh database in the test
    /// cluster).
    pub async fn on(backend: Backend, tag: &str) -> Self {
        let temp = TempDir::new(&format!("kmip-{tag}"));
        let cluster = (backend == Backend::Postgres).then(PgCluster::get);
        let pg = cluster.as_ref().map(|c| c.database(&tag.replace('-', "_")));
        let how =
            TestDeployment { kmip: true, store_url: pg.as_deref(), ..TestDeployment::default() };
        let server = TestServer::start(&temp.path().join("data"), &how, |_| {}).await;
        Self {
            dir: temp.path().to_owned(),
            store: Arc::clone(&server.store),
            kmip: server.kmip.clone().unwrap(),
            admin: server.admin.clone(),
            pg,
            _server: server,
            _temp: temp,
            _cluster: cluster,
        }
    }

    /// A second KMIP server of this deployment with a store of its own
    /// over the same database, as on another machine: its HOST:PORT, and
    /// what stops it.
    pub async fn another_kmip_server(&self) -> (String, tokio::sync::oneshot::Sender<()>) {
        let store =
            rampart_kms::store::open(self.pg.as_deref(), &self.dir.join("data")).await.unwrap();
        self._server.another_server_on(store, true).await
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

/// Sends one encoded request and reads the response.
pub async fn exchange_bytes(tls: &mut Tls, bytes: &[u8]) -> ResponseMessage {
    tls.write_all(bytes).await.unwrap();
    let mut header = [0u8; 8];
    tls.read_exact(&mut header).await.unwrap();
    let len = ttlv::message_len(&header, &Limits::default()).unwrap();
    let mut message = vec![0u8; len];
    message[..8].copy_from_slice(&header);
    tls.read_exact(&mut message[8..]).await.unwrap();
    ResponseMessage::parse(&ttlv::decode(&message, &Limits::default()).unwrap()).unwrap()
}

/// Sends one request and reads the response.
pub async fn exchange(tls: &mut Tls, request: &RequestMessage) -> ResponseMessage {
    exchange_bytes(tls, &request.to_item().encode().unwrap()).await
}

/// One KMIP 1.4 request of one batch item; its answer.
pub async fn one(tls: &mut Tls, op: Operation, fields: Vec<Item>) -> ResponseBatchItem {
    let request = RequestMessage::new(ProtocolVersion::V1_4, vec![(op, fields)]);
    exchange(tls, &request).await.batch_items.remove(0)
}

/// A successful batch item's payload fields (the item, in the message).
pub fn ok(item: &ResponseBatchItem) -> Vec<rampart_kmip::ttlv::Item> {
    assert_eq!(
        item.result_status,
        ResultStatus::SUCCESS,
        "{:?}: {:?}",
        item.result_reason,
        item.result_message
    );
    item.payload.as_ref().unwrap().children().unwrap().to_vec()
}

/// A failed batch item's Result Reason.
pub fn reason(item: &ResponseBatchItem) -> ResultReason {
    assert_eq!(item.result_status, ResultStatus::OPERATION_FAILED, "{item:?}");
    item.result_reason.unwrap()
}

/// The bundle's certificate, key and CA as `cert.pem`, `key.pem` and
/// `ca.pem` in `dir`, as `rampart kms client pem` writes them.
pub fn write_pem_files(bundle: &Bundle, dir: &std::path::Path) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("cert.pem"), &bundle.cert).unwrap();
    std::fs::write(dir.join("key.pem"), bundle.key.expose()).unwrap();
    std::fs::write(dir.join("ca.pem"), &bundle.ca_cert).unwrap();
}

/// The text field `tag` of a payload.
pub fn text_of(items: &[Item], tag: Tag) -> String {
    items.iter().find(|i| i.tag == tag).unwrap().as_text().unwrap().to_owned()
}

/// The Unique Identifier a payload names.
pub fn uid_of(items: &[Item]) -> String {
    text_of(items, Tag::UNIQUE_IDENTIFIER)
}

/// Every Unique Identifier a payload names, in order.
pub fn uids(items: &[Item]) -> Vec<String> {
    items
        .iter()
        .filter(|i| i.tag == Tag::UNIQUE_IDENTIFIER)
        .map(|i| i.as_text().unwrap().to_owned())
        .collect()
}

/// An attribute as a request carries it.
pub fn attr(name: &str, value: Value) -> Item {
    Attribute::new(name, value).to_item()
}

/// A Unique Identifier field.
pub fn uid(uid: &str) -> Item {
    Item::text(Tag::UNIQUE_IDENTIFIER, uid)
}

/// A Name attribute's value (an uninterpreted text string).
pub fn name(n: &str) -> Value {
    Value::Structure(vec![Item::text(Tag::NAME_VALUE, n), Item::enumeration(Tag::NAME_TYPE, 1)])
}

/// An active EC P-256 key pair named `private` and `public`: their
/// Unique Identifiers.
pub async fn ec_pair(tls: &mut Tls, private: &str, public: &str) -> (String, String) {
    let request = vec![
        Item::structure(
            Tag::COMMON_TEMPLATE_ATTRIBUTE,
            vec![
                attr("Cryptographic Algorithm", Value::Enumeration(CryptographicAlgorithm::EC.0)),
                attr("Cryptographic Length", Value::Integer(256)),
            ],
        ),
        Item::structure(Tag::PRIVATE_KEY_TEMPLATE_ATTRIBUTE, vec![attr("Name", name(private))]),
        Item::structure(
            Tag::PUBLIC_KEY_TEMPLATE_ATTRIBUTE,
            vec![attr("Name", name(public)), attr("x-purpose", Value::TextString("test".into()))],
        ),
    ];
    let got = ok(&one(tls, Operation::CREATE_KEY_PAIR, request).await);
    let pair = (
        text_of(&got, Tag::PRIVATE_KEY_UNIQUE_IDENTIFIER),
        text_of(&got, Tag::PUBLIC_KEY_UNIQUE_IDENTIFIER),
    );
    for id in [&pair.0, &pair.1] {
        ok(&one(tls, Operation::ACTIVATE, vec![uid(id)]).await);
    }
    pair
}

/// Sign by the private key `id` with ECDSA-SHA256 over `message`: the
/// answer.
pub async fn sign_ecdsa(tls: &mut Tls, id: &str, message: &[u8]) -> ResponseBatchItem {
    let params = Item::structure(
        Tag::CRYPTOGRAPHIC_PARAMETERS,
        vec![Item::enumeration(
            Tag::DIGITAL_SIGNATURE_ALGORITHM,
            DigitalSignatureAlgorithm::ECDSA_WITH_SHA256.0,
        )],
    );
    one(tls, Operation::SIGN, vec![uid(id), params, Item::bytes(Tag::DATA, message)]).await
}
