//! The key server end to end: in-process servers on 127.0.0.1 with real
//! TLS and a real store (no mocks), driven by the client library. Each
//! scenario runs on SQLite and again on PostgreSQL: a fresh database in
//! the cluster at `$RAMPART_TEST_PG_URL` (scripts/test starts one), or,
//! outside CI, in a throwaway cluster started by scripts/pg-test-cluster.
//! Under CI a missing `$RAMPART_TEST_PG_URL` fails the PostgreSQL tests.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::{fast, Backend, StoreDeployment};
use rampart_crypto::SecretBytes;
use rampart_kms::client::{ClientError, KmsClient};
use rampart_kms::deployment::{files, read_unseal_key};
use rampart_kms::keys::RootKey;
use rampart_kms::model::{now_ms, ClientInfo, Labels};
use rampart_kms::pki::{client_request, Authority};
use rampart_kms::server::{Limits, Server, ServerOptions};
use rampart_kms::shamir::Share;
use rampart_kms::store::meta;
use rampart_kms::Bundle;

/// A deployment of the tests below: the shared one, with their helpers.
struct Deployment(StoreDeployment);

impl std::ops::Deref for Deployment {
    type Target = StoreDeployment;

    fn deref(&self) -> &StoreDeployment {
        &self.0
    }
}

impl Deployment {
    async fn new(tag: &str, seal: Option<(u8, u8)>) -> Self {
        Self::on(Backend::Sqlite, tag, seal).await
    }

    async fn on(backend: Backend, tag: &str, seal: Option<(u8, u8)>) -> Self {
        Self::with_limits(backend, tag, seal, Limits::default()).await
    }

    async fn with_limits(
        backend: Backend,
        tag: &str,
        seal: Option<(u8, u8)>,
        limits: Limits,
    ) -> Self {
        Self(StoreDeployment::start(backend, tag, seal, |o| o.limits = limits).await)
    }

    fn admin(&self) -> KmsClient {
        KmsClient::with_policy(&self.admin, fast()).unwrap()
    }

    async fn issue(&self, name: &str, labels: &str) -> KmsClient {
        let bundle = self
            .admin()
            .issue_client(
                name,
                &Labels::parse_list(labels).unwrap(),
                false,
                Some(7),
                self.admin.endpoints.clone(),
            )
            .await
            .unwrap();
        assert_eq!(bundle.name, name);
        KmsClient::with_policy(&bundle, fast()).unwrap()
    }

    /// The CA, opened with the root key from the unseal key file (what an
    /// attacker holding the whole data directory could do).
    async fn authority(&self) -> Authority {
        let root =
            RootKey::new(&read_unseal_key(&self.data_dir().join(files::UNSEAL_KEY)).unwrap())
                .unwrap();
        let ca_pem =
            String::from_utf8(self.store.get_meta(meta::CA_CERT).await.unwrap().unwrap()).unwrap();
        let ca_key =
            root.open_ca_key(&self.store.get_meta(meta::CA_KEY).await.unwrap().unwrap()).unwrap();
        Authority::load(&ca_pem, &ca_key).unwrap()
    }

    async fn audit_ops(&self) -> Vec<(String, String, String)> {
        self.store
            .audit_page(0, None, 100_000)
            .await
            .unwrap()
            .into_iter()
            .map(|e| (e.client, e.operation, e.outcome))
            .collect()
    }
}

/// A TLS connection presenting `bundle`'s certificate, for raw HTTP.
async fn raw_tls(
    bundle: &Bundle,
    endpoint: &str,
) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    use rustls_pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls_pki_types::CertificateDer::from_pem_slice(bundle.ca_cert.as_bytes()).unwrap())
        .unwrap();
    let certs = vec![rustls_pki_types::CertificateDer::from_pem_slice(bundle.cert.as_bytes())
        .unwrap()
        .into_owned()];
    let key = rustls_pki_types::PrivateKeyDer::from_pem_slice(bundle.key.expose()).unwrap();
    let config =
        rustls::ClientConfig::builder_with_provider(rampart_kms::server::crypto_provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .with_root_certificates(roots)
            .with_client_auth_cert(certs, key)
            .unwrap();
    let tcp = tokio::net::TcpStream::connect(endpoint).await.unwrap();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    connector.connect("127.0.0.1".try_into().unwrap(), tcp).await.unwrap()
}

/// The value of the Prometheus counter `name`.
async fn counter(d: &Deployment, name: &str) -> u64 {
    let text = d.admin().metrics().await.unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|v| v.trim().parse().ok()))
        .unwrap_or_else(|| panic!("no {name} in the metrics:\n{text}"))
}

/// Whether the server closes `tcp` within `limit` (end of file or reset).
async fn closed_within(tcp: &mut tokio::net::TcpStream, limit: Duration) -> bool {
    use tokio::io::AsyncReadExt;
    let mut buf = [0u8; 4096];
    tokio::time::timeout(limit, async {
        loop {
            match tcp.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await
    .is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_over_its_rate_gets_429_while_other_identities_are_served() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let limits = Limits { rate: 5.0, burst: 5, ..Limits::default() };
    let d = Deployment::with_limits(Backend::Sqlite, "rate", None, limits).await;
    let bundle = d
        .admin()
        .issue_client("flooder", &Labels::default(), false, Some(7), d.admin.endpoints.clone())
        .await
        .unwrap();
    let flooder = KmsClient::with_policy(&bundle, fast()).unwrap();
    let other = d.issue("neighbour", "").await;
    let mut limited = 0;
    for i in 0..40 {
        match flooder.whoami().await {
            Ok(_) => {}
            Err(e) => {
                assert_eq!(e.status(), Some(429), "{e}");
                assert_eq!(e.code(), Some("rate_limited"), "{e}");
                limited += 1;
            }
        }
        // Another identity is served all along (under its own 5/s).
        if i % 8 == 0 {
            assert_eq!(other.whoami().await.unwrap().name, "neighbour");
        }
    }
    assert!(limited >= 30, "only {limited} of 40 requests over a 5/s limit were refused");
    // The answer says when to come back.
    let mut tls = raw_tls(&bundle, &d.endpoint).await;
    tls.write_all(b"GET /v1/whoami HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    let mut head = vec![0u8; 4096];
    let n = tls.read(&mut head).await.unwrap();
    let head = String::from_utf8_lossy(&head[..n]).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 429"), "{head}");
    assert!(head.contains("retry-after: 1\r\n"), "{head}");
    assert!(counter(&d, "rampart_kms_rate_limited_total").await >= 31);
    // Only the first refusal of a run is audited.
    let audited = d
        .audit_ops()
        .await
        .into_iter()
        .filter(|(client, _, outcome)| client == "flooder" && outcome == "limited")
        .count();
    assert!((1..=10).contains(&audited), "{audited} refusals audited");
    // The rate recovers.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(flooder.whoami().await.unwrap().name, "flooder");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_and_stalled_handshakes_are_dropped_and_a_connection_flood_refused() {
    use tokio::io::AsyncWriteExt;
    let limits = Limits {
        max_connections: 4,
        handshake_timeout: Duration::from_secs(1),
        ..Limits::default()
    };
    let d = Deployment::with_limits(Backend::Sqlite, "conns", None, limits).await;
    assert_eq!(d.admin().whoami().await.unwrap().name, "admin");
    // Two clients that connect and send nothing, one that stalls in the
    // middle of its ClientHello.
    let mut held = Vec::new();
    for _ in 0..2 {
        held.push(tokio::net::TcpStream::connect(&d.endpoint).await.unwrap());
    }
    let mut partial = tokio::net::TcpStream::connect(&d.endpoint).await.unwrap();
    partial.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01]).await.unwrap();
    held.push(partial);
    tokio::time::sleep(Duration::from_millis(100)).await;
    // A flood: one takes the last slot, the rest are closed at once.
    let mut flood = Vec::new();
    for _ in 0..10 {
        flood.push(tokio::net::TcpStream::connect(&d.endpoint).await.unwrap());
    }
    let mut refused = 0;
    for tcp in &mut flood {
        if closed_within(tcp, Duration::from_millis(300)).await {
            refused += 1;
        }
    }
    assert!(refused >= 9, "only {refused} of 10 connections past the limit were closed at once");
    drop(flood);
    // The silent and stalled handshakes are dropped within the timeout...
    for (i, tcp) in held.iter_mut().enumerate() {
        assert!(closed_within(tcp, Duration::from_secs(3)).await, "held connection {i} kept");
    }
    // ...and a well-behaved client is served again.
    assert_eq!(d.admin().whoami().await.unwrap().name, "admin");
    assert!(counter(&d, "rampart_kms_connections_refused_total").await >= 9);
    // The server drops the connection as its handshake times out and counts
    // the timeout just after, so the count may trail the close by a moment.
    let mut timeouts = 0;
    for _ in 0..50 {
        timeouts = counter(&d, "rampart_kms_handshake_timeouts_total").await;
        if timeouts >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(timeouts >= 3, "{timeouts} handshake timeouts counted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_headers_are_refused_431_and_other_clients_served() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let limits = Limits { max_header_bytes: 8192, max_headers: 20, ..Limits::default() };
    let d = Deployment::with_limits(Backend::Sqlite, "headers", None, limits).await;
    let big = format!("X-Big: {}\r\n", "a".repeat(20_000));
    let many: String = (0..30).map(|i| format!("X-{i}: y\r\n")).collect();
    for (what, extra) in [("a 20 KB header", big), ("30 headers", many)] {
        let mut tls = raw_tls(&d.admin, &d.endpoint).await;
        let head = format!("GET /v1/whoami HTTP/1.1\r\nHost: x\r\n{extra}\r\n");
        let _ = tls.write_all(head.as_bytes()).await;
        let mut answer = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), tls.read_to_end(&mut answer)).await;
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 431"), "{what}: {answer}");
        assert_eq!(d.admin().whoami().await.unwrap().name, "admin", "after {what}");
    }
    assert!(counter(&d, "rampart_kms_oversized_headers_total").await >= 2);
}

fn api_code(result: Result<impl std::fmt::Debug, ClientError>) -> String {
    match result {
        Err(e) => e.code().map_or_else(|| format!("not an API error: {e}"), str::to_owned),
        Ok(v) => format!("unexpectedly succeeded: {v:?}"),
    }
}

on_each_store!(refuses_missing_foreign_expired_and_unregistered_certificates);

async fn refuses_missing_foreign_expired_and_unregistered_certificates(backend: Backend) {
    let d = Deployment::on(backend, "refuse", None).await;
    assert_eq!(d.admin().whoami().await.unwrap().name, "admin");

    // No client certificate: the handshake completes (browsers reach the
    // web console under /ui/ without one), but the API answers nothing
    // but 401 certificate_required.
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls_pki_types::pem::PemObject::from_pem_slice(d.admin.ca_cert.as_bytes()).unwrap())
        .unwrap();
    let config =
        rustls::ClientConfig::builder_with_provider(rampart_kms::server::crypto_provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(&d.endpoint).await.unwrap();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let refused = async {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut tls = connector.connect("127.0.0.1".try_into().unwrap(), tcp).await?;
        tls.write_all(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n").await?;
        // Up to the server's close (with or without close_notify).
        let mut answer = Vec::new();
        let mut buf = [0u8; 1024];
        while let Ok(n @ 1..) = tls.read(&mut buf).await {
            answer.extend_from_slice(&buf[..n]);
        }
        Ok::<String, std::io::Error>(String::from_utf8_lossy(&answer).into_owned())
    }
    .await
    .unwrap();
    assert!(refused.starts_with("HTTP/1.1 401"), "{refused}");
    assert!(refused.contains("\"certificate_required\""), "{refused}");
    assert!(!refused.contains("\"status\""), "a certificate-less client got an answer: {refused}");

    // A certificate from another CA.
    let (foreign_ca, _) = Authority::generate("foreign").unwrap();
    let (csr, key) = client_request("intruder").unwrap();
    let foreign = foreign_ca.issue_client_days(&csr, "intruder", 1).unwrap();
    let mut bundle = d.admin.clone();
    bundle.cert = foreign.cert_pem;
    bundle.key = key;
    let err = KmsClient::with_policy(&bundle, fast()).unwrap().whoami().await.unwrap_err();
    assert!(matches!(err, ClientError::Tls { .. }), "{err}");

    // An expired certificate from the deployment CA, even though registered.
    let ca = d.authority().await;
    let (csr, key) = client_request("stale").unwrap();
    let now = time::OffsetDateTime::now_utc();
    let expired = ca
        .issue_client(&csr, "stale", now - time::Duration::days(30), now - time::Duration::days(1))
        .unwrap();
    d.store
        .add_client(ClientInfo {
            name: "stale".into(),
            labels: Labels::default(),
            admin: true,
            serial: expired.serial.clone(),
            fingerprint: expired.fingerprint.clone(),
            created_ms: now_ms(),
            not_after_ms: expired.not_after_ms,
            revoked: None,
        })
        .await
        .unwrap();
    let mut bundle = d.admin.clone();
    bundle.cert = expired.cert_pem;
    bundle.key = key;
    let err = KmsClient::with_policy(&bundle, fast()).unwrap().list_keys().await.unwrap_err();
    assert!(
        matches!(err, ClientError::Tls { ref message, .. } if message.contains("xpired")),
        "{err}"
    );

    // Signed by the deployment CA but never registered: 401.
    let (csr, key) = client_request("rogue").unwrap();
    let rogue = ca.issue_client_days(&csr, "rogue", 1).unwrap();
    let mut bundle = d.admin.clone();
    bundle.cert = rogue.cert_pem;
    bundle.key = key;
    let rogue = KmsClient::with_policy(&bundle, fast()).unwrap();
    assert_eq!(api_code(rogue.list_keys().await), "unknown_client");

    // A registered client without admin rights.
    let host = d.issue("host-1", "region=eu").await;
    assert_eq!(api_code(host.create_key("k", &[], false).await), "forbidden");
    assert_eq!(api_code(host.list_keys().await), "forbidden");

    // Every refusal is in the audit log.
    let ops = d.audit_ops().await;
    let handshakes =
        ops.iter().filter(|(c, o, r)| c == "-" && o == "tls.handshake" && r == "denied").count();
    assert!(handshakes >= 3, "refused handshakes audited: {ops:?}");
    assert!(ops.iter().any(|(c, o, r)| c.starts_with("cert:") && o == "key.list" && r == "denied"));
    assert!(ops.iter().any(|(c, o, r)| c == "host-1" && o == "key.create" && r == "denied"));
    let metrics = d.admin().metrics().await.unwrap();
    assert!(metrics.contains("rampart_kms_tls_handshakes_refused_total"), "{metrics}");
    assert!(!d.server.is_sealed());
}

on_each_store!(geo_fenced_key_unwraps_only_for_its_region);

async fn geo_fenced_key_unwraps_only_for_its_region(backend: Backend) {
    let d = Deployment::on(backend, "geo", None).await;
    let admin = d.admin();
    admin.create_key("eu-data", &["label:region=eu".into()], false).await.unwrap();
    let eu = d.issue("host-eu", "region=eu,role=host").await;
    let us = d.issue("host-us", "region=us,role=host").await;

    let ciphertext = eu.wrap("eu-data", b"volume passphrase", b"vol-1").await.unwrap();
    assert!(ciphertext.starts_with("rampart:v1:eu-data:1:"));
    assert_eq!(eu.unwrap(&ciphertext, b"vol-1").await.unwrap().expose(), b"volume passphrase");
    assert_eq!(api_code(us.unwrap(&ciphertext, b"vol-1").await), "forbidden");
    assert_eq!(api_code(us.wrap("eu-data", b"x", b"").await), "forbidden");
    // The context is bound: another context does not unwrap.
    assert_eq!(api_code(eu.unwrap(&ciphertext, b"vol-2").await), "unwrap_failed");
    // Admins are not implicitly allowed to use keys.
    assert_eq!(api_code(admin.unwrap(&ciphertext, b"vol-1").await), "forbidden");

    // A client: selector.
    admin.create_key("us-only", &["client:host-us".into()], false).await.unwrap();
    let c = us.wrap("us-only", b"abc", b"").await.unwrap();
    assert_eq!(us.unwrap(&c, b"").await.unwrap().expose(), b"abc");
    assert_eq!(api_code(eu.wrap("us-only", b"abc", b"").await), "forbidden");

    let ops = d.audit_ops().await;
    assert!(ops.iter().any(|(c, o, r)| c == "host-us" && o == "key.unwrap" && r == "denied"));
    assert!(ops.iter().any(|(c, o, r)| c == "host-eu" && o == "key.unwrap" && r == "ok"));
}

on_each_store!(rotation_keeps_old_ciphertexts_and_revoke_and_destroy_stop_them);

async fn rotation_keeps_old_ciphertexts_and_revoke_and_destroy_stop_them(backend: Backend) {
    let d = Deployment::on(backend, "lifecycle", None).await;
    let admin = d.admin();
    admin.create_key("vol", &["label:role=host".into()], false).await.unwrap();
    let host = d.issue("h", "role=host").await;

    let old = host.wrap("vol", b"one", b"").await.unwrap();
    let key = admin.rotate_key("vol").await.unwrap();
    assert_eq!(key.versions.len(), 2);
    let new = host.wrap("vol", b"two", b"").await.unwrap();
    assert!(old.starts_with("rampart:v1:vol:1:") && new.starts_with("rampart:v1:vol:2:"));
    assert_eq!(host.unwrap(&old, b"").await.unwrap().expose(), b"one");
    assert_eq!(host.unwrap(&new, b"").await.unwrap().expose(), b"two");
    // A ciphertext relabelled to the other version does not open.
    let forged = old.replace(":vol:1:", ":vol:2:");
    assert_eq!(api_code(host.unwrap(&forged, b"").await), "unwrap_failed");

    // Revoking version 1 stops it alone; then revoking all stops everything.
    let key = admin.revoke_key("vol", "host decommissioned", Some(1)).await.unwrap();
    assert_eq!(key.versions[0].state.reason(), Some("host decommissioned"));
    assert_eq!(api_code(host.unwrap(&old, b"").await), "key_revoked");
    assert_eq!(host.unwrap(&new, b"").await.unwrap().expose(), b"two");
    admin.revoke_key("vol", "compromised", None).await.unwrap();
    assert_eq!(api_code(host.unwrap(&new, b"").await), "key_revoked");
    assert_eq!(api_code(host.wrap("vol", b"x", b"").await), "key_revoked");

    // Destroy erases the material; nothing brings it back.
    let key = admin.destroy_key("vol", None).await.unwrap();
    assert!(key.versions.iter().all(|v| v.state.name() == "destroyed"));
    assert_eq!(api_code(host.unwrap(&old, b"").await), "key_destroyed");
    assert_eq!(api_code(host.unwrap(&new, b"").await), "key_destroyed");
    assert_eq!(
        api_code(admin.revoke_key("vol", "again", None).await.map(|k| k.versions.len())),
        "unexpectedly succeeded: 2"
    );
    let left = d
        .sql("SELECT count(*) FROM kms_key_versions WHERE name = 'vol' AND material IS NOT NULL")
        .unwrap();
    assert_eq!(left, "0");
    // A rotation after destruction makes a new version; the old
    // ciphertexts stay unreadable.
    admin.rotate_key("vol").await.unwrap();
    let third = host.wrap("vol", b"three", b"").await.unwrap();
    assert!(third.starts_with("rampart:v1:vol:3:"));
    assert_eq!(api_code(host.unwrap(&new, b"").await), "key_destroyed");

    // Export only for exportable keys.
    assert_eq!(api_code(host.export_key("vol", None).await), "forbidden");
    admin.create_key("exp", &["client:h".into()], true).await.unwrap();
    let (version, material) = host.export_key("exp", None).await.unwrap();
    assert_eq!((version, material.len()), (1, 32));
    let c = host.wrap("exp", b"hello", b"ctx").await.unwrap();
    let header = rampart_kms::keys::WrappedHeader::parse(&c).unwrap();
    let plain = rampart_kms::keys::unwrap(&header, &material, b"ctx").unwrap();
    assert_eq!(plain.expose(), b"hello");

    // Listing and showing.
    let names: Vec<String> = admin.list_keys().await.unwrap().into_iter().map(|k| k.name).collect();
    assert_eq!(names, vec!["exp".to_owned(), "vol".to_owned()]);
    assert_eq!(api_code(admin.get_key("nope").await), "not_found");
    assert_eq!(api_code(admin.create_key("exp", &[], false).await), "conflict");
    assert_eq!(api_code(admin.create_key("bad name", &[], false).await), "invalid_request");
}

on_each_store!(a_state_change_holds_for_every_request_after_it_returns);

/// The data path's rows are kept between writes (`MaterialCache`): hosts unwrapping as fast as they can while the admin
/// rotates, revokes and destroys must see each change in every request
/// they start after the change returned, never a row from before it.
async fn a_state_change_holds_for_every_request_after_it_returns(backend: Backend) {
    // No rate limit: the hosts ask as fast as the server answers.
    let limits = Limits { rate: 0.0, ..Limits::default() };
    let d = Deployment::with_limits(backend, "changes_under_load", None, limits).await;
    every_request_after_a_change_sees_it(&d, &d.admin()).await;
}

/// As above with the changes made through a second server, with a store
/// of its own, on the same PostgreSQL database: the first server's kept
/// rows (`store/postgres_changes.rs`) must not outlive a change it did
/// not make.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_made_through_another_server_holds_for_every_request_after_it_on_postgres() {
    let limits = Limits { rate: 0.0, ..Limits::default() };
    let d = Deployment::with_limits(Backend::Postgres, "changes_elsewhere", None, limits).await;
    let store = rampart_kms::store::open(d.pg.as_deref(), &d.data_dir()).await.unwrap();
    let (second, _stop) = d.another_server_on(store, false).await;
    let mut bundle = d.admin.clone();
    bundle.endpoints = vec![second];
    let admin = KmsClient::with_policy(&bundle, fast()).unwrap();
    every_request_after_a_change_sees_it(&d, &admin).await;
}

/// Hosts of `d` unwrap as fast as they can while `admin` rotates, revokes
/// and destroys their key: no request started after a change returned
/// may see the key as it was before.
async fn every_request_after_a_change_sees_it(d: &Deployment, admin: &KmsClient) {
    admin.create_key("busy", &["label:role=host".into()], false).await.unwrap();
    let host = d.issue("h", "role=host").await;
    let first = host.wrap("busy", b"one", b"").await.unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Each worker records (started after change N, outcome).
    let changes = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..4 {
        let (host, first, stop, changes) =
            (host.clone(), first.clone(), Arc::clone(&stop), Arc::clone(&changes));
        workers.spawn(async move {
            let mut seen = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let before = changes.load(std::sync::atomic::Ordering::SeqCst);
                let outcome = match host.unwrap(&first, b"").await {
                    Ok(plain) => {
                        assert_eq!(plain.expose(), b"one");
                        "ok".to_owned()
                    }
                    Err(e) => api_code(Err::<(), _>(e)),
                };
                seen.push((before, outcome));
            }
            seen
        });
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    // 1: a rotation; version 1 still unwraps, and a wrap takes version 2
    // at once (the newest version was read, and kept, before).
    admin.rotate_key("busy").await.unwrap();
    changes.store(1, std::sync::atomic::Ordering::SeqCst);
    let second = host.wrap("busy", b"two", b"").await.unwrap();
    assert!(second.starts_with("rampart:v1:busy:2:"), "{second}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    // 2: version 1 revoked.
    admin.revoke_key("busy", "rotated away", Some(1)).await.unwrap();
    changes.store(2, std::sync::atomic::Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(300)).await;
    // 3: every version destroyed.
    admin.destroy_key("busy", None).await.unwrap();
    changes.store(3, std::sync::atomic::Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut counts = [0usize; 4];
    while let Some(seen) = workers.join_next().await {
        for (after, outcome) in seen.unwrap() {
            counts[after] += 1;
            // The latest change each outcome is possible after (a request
            // may also see a change made while it was in flight).
            let newest = match outcome.as_str() {
                "ok" => 1,
                "key_revoked" => 2,
                "key_destroyed" => 3,
                other => panic!("unexpected outcome {other}"),
            };
            assert!(newest >= after, "a request started after change {after} got {outcome}");
        }
    }
    assert!(counts.iter().all(|&n| n > 0), "requests in every phase: {counts:?}");
    assert_eq!(api_code(host.unwrap(&second, b"").await), "key_destroyed");
}

on_each_store!(audit_verify_catches_edited_removed_and_reordered_rows);

async fn audit_verify_catches_edited_removed_and_reordered_rows(backend: Backend) {
    let d = Deployment::on(backend, "audit", None).await;
    let admin = d.admin();
    admin.create_key("k", &["client:h".into()], false).await.unwrap();
    let host = d.issue("h", "").await;
    for _ in 0..3 {
        let c = host.wrap("k", b"x", b"").await.unwrap();
        host.unwrap(&c, b"").await.unwrap();
    }
    let report = admin.audit_verify().await.unwrap();
    assert!(report.ok, "{report:?}");
    assert!(report.entries >= 8);
    let entries = admin.audit(None).await.unwrap();
    assert!(entries.iter().all(|e| e.mac.is_some()));
    assert!(admin.audit(Some(now_ms() + 3_600_000)).await.unwrap().is_empty());

    // The log refuses edits through SQL...
    assert!(d.sql("UPDATE kms_audit SET outcome = 'ok' WHERE seq = 3").is_err());
    assert!(d.sql("DELETE FROM kms_audit WHERE seq = 3").is_err());
    // ...so an attacker drops the guard first.
    d.drop_audit_guard();
    let original = d.sql("SELECT client FROM kms_audit WHERE seq = 4").unwrap();
    d.sql("UPDATE kms_audit SET client = 'someone-else' WHERE seq = 4").unwrap();
    let report = admin.audit_verify().await.unwrap();
    assert!(!report.ok);
    assert_eq!(report.first_bad_seq, Some(4), "{report:?}");

    // Restore it: intact again. Then remove a row.
    d.sql(&format!("UPDATE kms_audit SET client = '{original}' WHERE seq = 4")).unwrap();
    assert!(admin.audit_verify().await.unwrap().ok);
    d.sql("DELETE FROM kms_audit WHERE seq = 5").unwrap();
    let report = admin.audit_verify().await.unwrap();
    assert_eq!(report.first_bad_seq, Some(6), "{report:?}");

    // Reordering: swap two entries' sequence numbers.
    let d2 = Deployment::on(backend, "audit2", None).await;
    let admin2 = d2.admin();
    for _ in 0..4 {
        admin2.list_keys().await.unwrap();
    }
    d2.drop_audit_guard();
    d2.sql("UPDATE kms_audit SET seq = 1000 WHERE seq = 2").unwrap();
    d2.sql("UPDATE kms_audit SET seq = 2 WHERE seq = 3").unwrap();
    d2.sql("UPDATE kms_audit SET seq = 3 WHERE seq = 1000").unwrap();
    let report = admin2.audit_verify().await.unwrap();
    assert_eq!(report.first_bad_seq, Some(2), "{report:?}");
}

on_each_store!(audit_verify_over_many_pages_finds_the_first_bad_entry);

/// The walk reads pages of 10,000 entries ahead of the one it checks,
/// each asked for where the one before should end: a damaged entry in a
/// later page, and a row removed at the end of a page (the next page then
/// overlaps it), are still reported at the right entry.
async fn audit_verify_over_many_pages_finds_the_first_bad_entry(backend: Backend) {
    let d = Deployment::on(backend, "audit_pages", None).await;
    let admin = d.admin();
    let root =
        RootKey::new(&read_unseal_key(&d.data_dir().join(files::UNSEAL_KEY)).unwrap()).unwrap();
    common::fill_audit(d.store.as_ref(), &Arc::new(root), 34_500).await;
    let report = admin.audit_verify().await.unwrap();
    assert!(report.ok, "{report:?}");
    assert!(report.entries >= 34_500, "{report:?}");
    let head = report.head_seq;

    d.drop_audit_guard();
    let original = d.sql("SELECT detail FROM kms_audit WHERE seq = 31000").unwrap();
    d.sql("UPDATE kms_audit SET detail = 'forged' WHERE seq = 31000").unwrap();
    let report = admin.audit_verify().await.unwrap();
    assert_eq!(report.first_bad_seq, Some(31_000), "{report:?}");
    assert_eq!(report.entries, 30_999, "{report:?}");
    let quoted = original.replace('\'', "''");
    d.sql(&format!("UPDATE kms_audit SET detail = '{quoted}' WHERE seq = 31000")).unwrap();
    let report = admin.audit_verify().await.unwrap();
    assert!(report.ok && report.head_seq >= head, "{report:?}");

    d.sql("DELETE FROM kms_audit WHERE seq = 20000").unwrap();
    let report = admin.audit_verify().await.unwrap();
    assert!(!report.ok);
    assert_eq!(report.first_bad_seq, Some(20_001), "{report:?}");
    assert_eq!(report.entries, 19_999, "{report:?}");
}

on_each_store!(sealed_server_refuses_key_operations_until_k_shares);

async fn sealed_server_refuses_key_operations_until_k_shares(backend: Backend) {
    let d = Deployment::on(backend, "sealed", Some((5, 3))).await;
    assert!(d.server.is_sealed());
    assert_eq!(d.shares.len(), 5);
    assert!(!d.data_dir().join(files::UNSEAL_KEY).exists());
    let admin = d.admin();
    assert_eq!(api_code(admin.list_keys().await), "sealed");
    assert_eq!(api_code(admin.health().await), "http_error");
    let status = admin.seal_status().await.unwrap();
    assert_eq!((status["sealed"].as_bool(), status["threshold"].as_u64()), (Some(true), Some(3)));

    let hex = |s: &Share| SecretBytes::from_slice(s.to_hex().expose());
    // K-1 shares do not unseal.
    admin.unseal(&hex(&d.shares[4])).await.unwrap();
    let status = admin.unseal(&hex(&d.shares[1])).await.unwrap();
    assert_eq!((status["sealed"].as_bool(), status["progress"].as_u64()), (Some(true), Some(2)));
    assert!(d.server.is_sealed());
    assert_eq!(api_code(admin.create_key("k", &[], false).await), "sealed");
    // The same share twice counts once.
    assert_eq!(api_code(admin.unseal(&hex(&d.shares[1])).await), "invalid_request");
    // A share of another split makes the set fail and start over.
    let other = rampart_kms::shamir::split(&[7u8; 32], 3, 5).unwrap();
    assert_eq!(api_code(admin.unseal(&hex(&other[0])).await), "unseal_failed");
    assert!(d.server.is_sealed());
    assert_eq!(admin.seal_status().await.unwrap()["progress"].as_u64(), Some(0));

    // Any K shares unseal.
    admin.unseal(&hex(&d.shares[0])).await.unwrap();
    admin.unseal(&hex(&d.shares[2])).await.unwrap();
    let status = admin.unseal(&hex(&d.shares[3])).await.unwrap();
    assert_eq!(status["sealed"].as_bool(), Some(false));
    assert!(!d.server.is_sealed());
    admin.create_key("k", &[], false).await.unwrap();
    assert_eq!(admin.health().await.unwrap()["status"], "ok");

    // A non-admin client may not give shares.
    let host = d.issue("h", "").await;
    assert_eq!(api_code(host.unseal(&hex(&d.shares[0])).await), "forbidden");
    // Sealed-time requests are audited without MAC; the chain verifies.
    let report = admin.audit_verify().await.unwrap();
    assert!(report.ok && report.unauthenticated > 0, "{report:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openapi_metrics_and_failover_across_endpoints() {
    let d = Deployment::new("misc", None).await;
    let admin = d.admin();
    let doc = admin.openapi().await.unwrap();
    assert_eq!(doc["openapi"], "3.0.3");
    for path in [
        "/v1/health",
        "/v1/openapi.json",
        "/metrics",
        "/v1/sys/unseal",
        "/v1/sys/seal-status",
        "/v1/keys",
        "/v1/keys/{name}",
        "/v1/keys/{name}/rotate",
        "/v1/keys/{name}/revoke",
        "/v1/keys/{name}/destroy",
        "/v1/keys/{name}/wrap",
        "/v1/keys/{name}/unwrap",
        "/v1/keys/{name}/export",
        "/v1/clients",
        "/v1/audit",
        "/v1/audit/verify",
        "/v1/whoami",
        "/v1/heartbeat",
        "/v1/clients/{name}/revoke",
        "/v1/clients/{name}/labels",
    ] {
        assert!(doc["paths"][path].is_object(), "{path} undocumented");
    }
    // Every $ref resolves.
    let text = doc.to_string();
    for piece in text.split("\"#/components/schemas/").skip(1) {
        let name = &piece[..piece.find('"').unwrap()];
        assert!(doc["components"]["schemas"][name].is_object(), "dangling $ref {name}");
    }

    admin.create_key("k", &["client:admin".into()], false).await.unwrap();
    let c = admin.wrap("k", b"x", b"").await.unwrap();
    admin.unwrap(&c, b"").await.unwrap();
    let metrics = admin.metrics().await.unwrap();
    assert!(
        metrics.contains("rampart_kms_requests_total{operation=\"key.unwrap\",outcome=\"ok\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains(
        "rampart_kms_request_duration_seconds_bucket{operation=\"key.wrap\",le=\"+Inf\"} 1"
    ));

    // A bundle whose first endpoint is down fails over to the second.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_port = dead.local_addr().unwrap().port();
    drop(dead);
    let mut bundle = d.admin.clone();
    bundle.endpoints =
        vec![format!("https://127.0.0.1:{dead_port}"), format!("https://{}", d.endpoint)];
    let client = KmsClient::with_policy(&bundle, fast()).unwrap();
    for _ in 0..3 {
        assert_eq!(client.unwrap(&c, b"").await.unwrap().expose(), b"x");
    }
    // All endpoints down: a bounded failure, not a hang.
    bundle.endpoints = vec![format!("https://127.0.0.1:{dead_port}")];
    let client = KmsClient::with_policy(&bundle, fast()).unwrap();
    assert!(matches!(client.whoami().await, Err(ClientError::Unavailable(_))));
    // Unknown endpoints and methods are answered, not dropped.
    assert_eq!(api_code(admin.get_key("k").await.map(|k| k.name)), "unexpectedly succeeded: \"k\"");
}

/// A request body over the limit is read to its end and answered 413 on a
/// connection that stays usable (found by schemathesis: the server used
/// to answer and close while the client was still sending, so the
/// client's kernel saw a reset and the client never read the 413).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_body_is_answered_413_and_the_connection_stays_usable() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let d = Deployment::new("big", None).await;
    d.admin().create_key("k", &["client:admin".into()], false).await.unwrap();
    let mut tls = raw_tls(&d.admin, &d.endpoint).await;

    // Reads one response (Content-Length framed): status and body.
    async fn response<S: tokio::io::AsyncRead + Unpin>(
        s: &mut S,
        buf: &mut Vec<u8>,
    ) -> (u16, String) {
        loop {
            if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8(buf[..end].to_vec()).unwrap();
                let length: usize = head
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("content-length:")
                            .map(|v| v.trim().parse().unwrap())
                    })
                    .unwrap();
                while buf.len() < end + 4 + length {
                    let mut chunk = [0u8; 4096];
                    let n = s.read(&mut chunk).await.unwrap();
                    assert!(n > 0, "connection closed mid-response");
                    buf.extend_from_slice(&chunk[..n]);
                }
                let body = String::from_utf8(buf[end + 4..end + 4 + length].to_vec()).unwrap();
                let status = head[9..12].parse().unwrap();
                buf.drain(..end + 4 + length);
                return (status, body);
            }
            let mut chunk = [0u8; 4096];
            let n = s.read(&mut chunk).await.unwrap();
            assert!(
                n > 0,
                "connection closed before a response: {:?}",
                String::from_utf8_lossy(buf)
            );
            buf.extend_from_slice(&chunk[..n]);
        }
    }

    let mut buf = Vec::new();
    // Over the limit; and under it, to a route refused before the body
    // matters (no such key, a name that is not a name).
    for (path, size, want, code) in [
        ("/v1/keys/k/wrap", 600_000usize, 413, "payload_too_large"),
        ("/v1/keys/k/wrap", 256 * 1024 + 1, 413, "payload_too_large"),
        ("/v1/no-such-endpoint", 200_000, 404, "no_route"),
        ("/v1/keys/%C2%B7/wrap", 200_000, 400, "invalid_request"),
    ] {
        let body = format!("{{\"plaintext\":\"{}\"}}", "A".repeat(size));
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        tls.write_all(head.as_bytes()).await.unwrap();
        tls.write_all(body.as_bytes()).await.unwrap();
        let (status, text) = response(&mut tls, &mut buf).await;
        assert_eq!(status, want, "{path}: {text}");
        assert!(text.contains(code), "{path}: {text}");
    }
    // The same connection still serves.
    let body = r#"{"plaintext":"aGVsbG8="}"#;
    let head = format!(
        "POST /v1/keys/k/wrap HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    tls.write_all(head.as_bytes()).await.unwrap();
    tls.write_all(body.as_bytes()).await.unwrap();
    let (status, text) = response(&mut tls, &mut buf).await;
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("rampart:v1:k:1:"), "{text}");
}

/// Issues a client bundle (not only a client of it).
async fn issue_bundle(d: &Deployment, name: &str, labels: &str) -> Bundle {
    d.admin()
        .issue_client(
            name,
            &Labels::parse_list(labels).unwrap(),
            false,
            Some(7),
            d.admin.endpoints.clone(),
        )
        .await
        .unwrap()
}

on_each_store!(heartbeats_follow_relabelling_and_client_revocation);

async fn heartbeats_follow_relabelling_and_client_revocation(backend: Backend) {
    use rampart_kms::model::HeldKey;
    let d = Deployment::on(backend, "heartbeat", None).await;
    let admin = d.admin();
    admin.create_key("disk", &["label:region=eu".into()], false).await.unwrap();
    let bundle = issue_bundle(&d, "host", "region=eu").await;
    let host = KmsClient::with_policy(&bundle, fast()).unwrap();
    let disk = HeldKey { name: "disk".into(), version: 1 };
    let held = [disk.clone(), HeldKey { name: "nope".into(), version: 1 }];
    let verdicts = host.heartbeat(&held).await.unwrap();
    assert!(verdicts[0].allowed && verdicts[0].reason.is_none(), "{verdicts:?}");
    assert!(!verdicts[1].allowed);
    assert!(verdicts[1].reason.as_deref().unwrap().contains("does not exist"));

    // Relabelled out of the allow rule: refused at once, data operations too.
    let changed = admin.relabel_client("host", &Labels::parse_list("region=us").unwrap()).await;
    assert_eq!(changed.unwrap().labels.get("region"), Some("us"));
    let verdicts = host.heartbeat(std::slice::from_ref(&disk)).await.unwrap();
    assert!(!verdicts[0].allowed);
    assert!(verdicts[0].reason.as_deref().unwrap().contains("no longer allowed"), "{verdicts:?}");
    assert_eq!(api_code(host.wrap("disk", b"x", b"").await), "forbidden");
    admin.relabel_client("host", &Labels::parse_list("region=eu").unwrap()).await.unwrap();
    assert!(host.heartbeat(std::slice::from_ref(&disk)).await.unwrap()[0].allowed);

    // A second server on the same store learns of the revocation from it.
    let (second, stop_other) = d.another_server().await;
    let mut via_second = bundle.clone();
    via_second.endpoints = vec![format!("https://{second}")];
    assert_eq!(
        KmsClient::with_policy(&via_second, fast()).unwrap().whoami().await.unwrap().name,
        "host"
    );

    // Revoked: the kept-alive connection's requests and heartbeats are
    // refused, and every new TLS handshake.
    assert_eq!(api_code(admin.revoke_client("admin", "oops").await), "conflict");
    assert_eq!(api_code(admin.revoke_client("ghost", "x").await), "not_found");
    assert_eq!(api_code(host.revoke_client("host", "x").await), "forbidden");
    let revoked = admin.revoke_client("host", "lost in transit").await.unwrap();
    assert_eq!(revoked.revoked.as_ref().unwrap().reason, "lost in transit");
    let again = admin.revoke_client("host", "second time").await.unwrap();
    assert_eq!(again.revoked, revoked.revoked, "the first revocation stays");
    assert_eq!(api_code(host.heartbeat(std::slice::from_ref(&disk)).await), "client_revoked");
    let fresh = KmsClient::with_policy(&bundle, fast()).unwrap();
    match fresh.whoami().await {
        Err(ClientError::Tls { message, .. }) => {
            assert!(message.contains("CertificateRevoked"), "{message}")
        }
        other => panic!("a revoked certificate got through: {other:?}"),
    }
    let deadline = std::time::Instant::now() + rampart_kms::server::CLIENT_REFRESH * 3;
    loop {
        let fresh = KmsClient::with_policy(&via_second, fast()).unwrap();
        match fresh.whoami().await {
            Err(ClientError::Tls { message, .. }) if message.contains("CertificateRevoked") => {
                break
            }
            other => assert!(
                std::time::Instant::now() < deadline,
                "the second server still accepts the revoked certificate: {other:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let _ = stop_other.send(());

    let ops = d.audit_ops().await;
    for op in ["client.revoke", "client.relabel"] {
        assert!(ops.iter().any(|(c, o, r)| c == "admin" && o == op && r == "ok"), "{op}");
    }
    assert!(ops.iter().any(|(c, o, r)| c == "host" && o == "heartbeat" && r == "denied"));
    assert!(ops.iter().any(|(c, o, r)| c == "-" && o == "tls.handshake" && r == "denied"));
    let metrics = admin.metrics().await.unwrap();
    assert!(
        metrics.contains("rampart_kms_heartbeats_total{client=\"host\",verdict=\"refused\"} 2"),
        "{metrics}"
    );
    assert!(metrics.contains("rampart_kms_heartbeat_allowed{client=\"host\"} 1"), "{metrics}");
}

on_each_store!(a_version_1_store_is_migrated);

/// A store written before clients could be revoked (and before KMIP)
/// opens and gains the revocation columns and the KMIP tables.
async fn a_version_1_store_is_migrated(backend: Backend) {
    let d = Deployment::on(backend, "migrate", None).await;
    d.issue("host", "region=eu").await;
    for sql in [
        "ALTER TABLE kms_clients DROP COLUMN revoked_ms",
        "ALTER TABLE kms_clients DROP COLUMN revoked_reason",
        "DROP TABLE kms_kmip_attributes",
        "DROP TABLE kms_kmip_objects",
        "DELETE FROM kms_schema",
        "INSERT INTO kms_schema VALUES (1)",
    ] {
        d.sql(sql).unwrap();
    }
    let store = rampart_kms::store::open(d.pg.as_deref(), &d.data_dir()).await.unwrap();
    assert_eq!(
        d.sql("SELECT max(version) FROM kms_schema").unwrap(),
        rampart_kms::store::SCHEMA_VERSION.to_string()
    );
    // Every step ran: the KMIP tables are back.
    assert_eq!(d.sql("SELECT count(*) FROM kms_kmip_objects").unwrap(), "0");
    let clients = store
        .client_page(String::new(), rampart_kms::store::ClientFilter::default(), 100)
        .await
        .unwrap();
    assert_eq!(clients.len(), 2);
    assert!(clients.iter().all(|c| c.revoked.is_none()));
    let revoked = store.revoke_client("host".into(), "migrated".into(), now_ms()).await.unwrap();
    assert_eq!(revoked.revoked.unwrap().reason, "migrated");
}

/// Servers sharing a PostgreSQL store announce themselves in it, so each
/// can list its peers (the console's Health page reads this list).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_sharing_a_store_list_each_other_on_postgres() {
    let d = Deployment::on(Backend::Postgres, "peers", None).await;
    let store = rampart_kms::store::open(d.pg.as_deref(), &d.data_dir()).await.unwrap();
    let second = Server::new(&ServerOptions::new(d.data_dir()), store).await.unwrap();
    let listener = rampart_kms::server::bind("127.0.0.1:0").await.unwrap();
    let second_address = listener.local_addr().unwrap().to_string();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(async move {
        second
            .run(listener, async {
                let _ = stopped.await;
            })
            .await
    });
    let mut servers = Vec::new();
    for _ in 0..100 {
        servers = d.store.servers_seen(0).await.unwrap();
        if servers.len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut addresses: Vec<&str> = servers.iter().map(|s| s.address.as_str()).collect();
    addresses.sort_unstable();
    let mut expected = vec![d.endpoint.as_str(), second_address.as_str()];
    expected.sort_unstable();
    assert_eq!(addresses, expected, "{servers:?}");
    assert_ne!(servers[0].id, servers[1].id);
    for server in &servers {
        assert_eq!(server.version, env!("CARGO_PKG_VERSION"));
        assert!(server.seen_ms >= server.started_ms, "{server:?}");
    }
    // A server that stopped is no longer heard from; its row stays until
    // it is a day old, and the Health page shows only recent ones.
    stop.send(()).unwrap();
    running.await.unwrap().unwrap();
    let now = rampart_kms::model::now_ms();
    let recent = d.store.servers_seen(now + 1).await.unwrap();
    assert!(recent.is_empty(), "{recent:?}");
}
