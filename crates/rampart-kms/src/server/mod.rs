//! The key management server: HTTPS (TLS 1.3 only, AES-GCM suites, over
//! AWS-LC) with mandatory client certificates issued by the deployment CA.
//!
//! Client identity: the TLS layer accepts only certificates that chain to
//! the deployment CA and are within their validity; the server then looks
//! the certificate's SHA-256 fingerprint up in the store's client table,
//! which holds the name, labels and admin flag recorded when the CA issued
//! it. Labels thus cannot be forged or changed by the client, and a
//! CA-signed certificate that was never registered is refused.
//!
//! Revoked clients: the client verifier refuses a revoked certificate at
//! every TLS handshake (TLS alert `certificate_revoked`), from a set of
//! fingerprints kept in memory, updated at once by a revocation on this
//! server and reloaded from the store every [`CLIENT_REFRESH`] (so that
//! servers sharing one PostgreSQL database see each other's revocations
//! and relabellings); a request on a connection opened before the
//! revocation is refused as well (the identity lookup checks it).

mod api;
mod audit_log;
mod connection;
mod console;
mod key_cache;
pub mod kmip;
mod kmip_connection;
pub mod kmip_http;
mod kmip_objects;
mod limits;
mod metrics;
mod openapi;
mod paging;
mod service;
mod sinks;
mod state;
mod writes;

use std::collections::{HashMap, HashSet, VecDeque};
use std::future::poll_fn;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::task::Poll;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use rustls::server::WebPkiClientVerifier;
use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot, Notify};
use tokio_rustls::TlsAcceptor;

pub use self::api::{check_request_body, BODY_OPERATIONS};
pub use self::limits::Limits;
pub use self::metrics::Metrics;
pub use self::openapi::openapi_document;
pub use self::sinks::{SinkOptions, SYSLOG_SOCKET};
pub use self::state::{CLIENT_REFRESH, PRESENCE_INTERVAL};

use self::connection::{accept_loop, peer_fingerprint, tls_accept};
use self::state::{RevokedSet, State};
use crate::audit::ExportedEntry;
use crate::deployment::{files, read_unseal_key, SealConfig};
use crate::error::{KmsError, Result};
use crate::hsm::{read_pin_file, HsmConfig, META_AUDIT_KEY};
use crate::keys::RootKey;
use crate::model::{now_ms, AuditDraft};
use crate::pki::fingerprint;
use crate::store::{meta, Store, StoreFuture};

const AUDIT_BATCH: usize = 512;
/// How many times the audit writer lets other tasks run before it takes a
/// batch: requests already signing or encrypting then join it, so the
/// store runs fewer, larger appends (a statement's fixed cost is shared
/// by its entries).
const AUDIT_LINGER_YIELDS: usize = 2;
/// Announcements older than this are deleted.
const PRESENCE_FORGET_MS: i64 = 24 * 3600 * 1000;

/// The deployment CA's client verifier, refusing revoked certificates.
#[derive(Debug)]
struct RevocationVerifier {
    inner: Arc<dyn rustls::server::danger::ClientCertVerifier>,
    revoked: RevokedSet,
}

impl rustls::server::danger::ClientCertVerifier for RevocationVerifier {
    fn offer_client_auth(&self) -> bool {
        self.inner.offer_client_auth()
    }

    fn client_auth_mandatory(&self) -> bool {
        self.inner.client_auth_mandatory()
    }

    fn root_hint_subjects(&self) -> &[rustls::DistinguishedName] {
        self.inner.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: rustls_pki_types::UnixTime,
    ) -> std::result::Result<rustls::server::danger::ClientCertVerified, rustls::Error> {
        let verified = self.inner.verify_client_cert(end_entity, intermediates, now)?;
        let revoked = self.revoked.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        if !revoked.is_empty() && revoked.contains(&fingerprint(end_entity)) {
            return Err(rustls::Error::InvalidCertificate(rustls::CertificateError::Revoked));
        }
        Ok(verified)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> std::result::Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> std::result::Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// Where a server finds its deployment, its limits and its audit options.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    pub data_dir: PathBuf,
    /// The unseal key file for the file scheme (default `DIR/unseal.key`).
    pub unseal_key_file: Option<PathBuf>,
    /// With the root key in an HSM: the token's user PIN, to unseal at
    /// start (without it the server starts sealed and waits for the PIN
    /// through `POST /v1/sys/unseal`).
    pub hsm_pin_file: Option<PathBuf>,
    pub limits: Limits,
    pub audit: AuditOptions,
    /// Answer the KMIP Interop operation (KMIP 2.1 §6.1.26: for interop
    /// testing only, never on a production server).
    pub kmip_interop: bool,
}

impl ServerOptions {
    /// The deployment in `data_dir`, its default unseal key file, default
    /// limits and audit options.
    #[must_use]
    pub fn new(data_dir: PathBuf) -> Self {
        Self {
            data_dir,
            unseal_key_file: None,
            hsm_pin_file: None,
            limits: Limits::default(),
            audit: AuditOptions::default(),
            kmip_interop: false,
        }
    }
}

/// How the audit chain is checkpointed and streamed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditOptions {
    /// Verify the chain and write a checkpoint once this many entries were
    /// appended since the last one (0: only on the interval).
    pub checkpoint_entries: u64,
    /// ... or once this much time passed, when entries were appended.
    pub checkpoint_interval: Duration,
    /// Where the chained entries are streamed to.
    pub sinks: SinkOptions,
}

impl Default for AuditOptions {
    fn default() -> Self {
        Self {
            checkpoint_entries: 10_000,
            checkpoint_interval: Duration::from_secs(300),
            sinks: SinkOptions::default(),
        }
    }
}

/// The TLS configuration the server and its clients share (TLS 1.3
/// only, AES-GCM cipher suites only, from AWS-LC): the client crate's.
pub use rampart_kms_client::{crypto_provider, kmip_crypto_provider};

fn tls_error(e: impl std::fmt::Display) -> KmsError {
    KmsError::Certificate(e.to_string())
}

/// Which front end a TLS configuration is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FrontEnd {
    Rest,
    Kmip,
}

fn server_tls(
    ca_pem: &str,
    cert_path: &Path,
    key_path: &Path,
    front_end: FrontEnd,
    revoked: &RevokedSet,
) -> Result<Arc<rustls::ServerConfig>> {
    let (provider, versions): (_, &[&rustls::SupportedProtocolVersion]) = match front_end {
        FrontEnd::Rest => (crypto_provider(), &[&rustls::version::TLS13]),
        FrontEnd::Kmip => {
            (kmip_crypto_provider(), &[&rustls::version::TLS13, &rustls::version::TLS12])
        }
    };
    let mut roots = RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(ca_pem.as_bytes()).map_err(tls_error)?)
        .map_err(tls_error)?;
    let builder =
        WebPkiClientVerifier::builder_with_provider(Arc::new(roots), Arc::clone(&provider));
    // The REST listener also serves the web console to browsers, which
    // have no client certificate: the handshake lets them in, and every
    // request outside /ui/ without a verified certificate is refused
    // (serve_connection). A certificate that is presented is verified as
    // ever. KMIP always requires one.
    let builder =
        if front_end == FrontEnd::Rest { builder.allow_unauthenticated() } else { builder };
    let verifier = builder.build().map_err(tls_error)?;
    let verifier = Arc::new(RevocationVerifier { inner: verifier, revoked: Arc::clone(revoked) });
    let chain = CertificateDer::pem_file_iter(cert_path)
        .map_err(|e| KmsError::Config(format!("cannot read {}: {e}", cert_path.display())))?
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| {
            KmsError::Config(format!("bad certificate in {}: {e}", cert_path.display()))
        })?;
    let key = PrivateKeyDer::from_pem_file(key_path)
        .map_err(|e| KmsError::Config(format!("cannot read {}: {e}", key_path.display())))?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .map_err(tls_error)?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(tls_error)?;
    if front_end == FrontEnd::Rest {
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
    }
    Ok(Arc::new(config))
}

/// Group commit: entries that arrive while one batch is being written go
/// into the next, in one transaction. With a store that takes more than
/// one append at a time ([`Store::audit_appends_in_flight`]) the next
/// batch is sent while the one before commits. Committed entries then go
/// to the sinks, in chain order, before the requests they record are
/// answered.
async fn audit_writer(
    store: Arc<dyn Store>,
    root: Arc<RwLock<Option<Arc<RootKey>>>>,
    mut rx: mpsc::Receiver<(AuditDraft, AuditReply)>,
    sinks: Option<sinks::Sinks>,
    state: Weak<State>,
    (checkpoint_every, wake): (u64, Arc<Notify>),
    index_wake: Arc<Notify>,
) {
    let sinks = sinks.map(|s| Arc::new(Mutex::new(s)));
    let mut appended = 0u64;
    let depth = store.audit_appends_in_flight().max(1);
    let mut in_flight: VecDeque<InFlight<'_>> = VecDeque::new();
    let mut open = true;
    loop {
        let next = if open && in_flight.len() < depth {
            if in_flight.is_empty() {
                AuditStep::Received(rx.recv().await)
            } else {
                // The oldest append may finish before another entry comes.
                tokio::select! {
                    biased;
                    result = poll_fn(|cx| InFlight::poll_oldest(&mut in_flight, cx)) => {
                        AuditStep::Finished(result)
                    }
                    item = rx.recv() => AuditStep::Received(item),
                }
            }
        } else if in_flight.is_empty() {
            break;
        } else {
            AuditStep::Finished(poll_fn(|cx| InFlight::poll_oldest(&mut in_flight, cx)).await)
        };
        let result = match next {
            AuditStep::Received(None) => {
                open = false;
                continue;
            }
            AuditStep::Received(Some(first)) => {
                let mut batch = vec![first];
                for _ in 0..AUDIT_LINGER_YIELDS {
                    tokio::task::yield_now().await;
                }
                while batch.len() < AUDIT_BATCH {
                    match rx.try_recv() {
                        Ok(item) => batch.push(item),
                        Err(_) => break,
                    }
                }
                let key = root.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
                let (drafts, replies): (Vec<_>, Vec<_>) = batch.into_iter().unzip();
                let mut append = InFlight {
                    append: Some(store.append_audit_entries(drafts, key)),
                    result: None,
                    replies,
                };
                // Polled once now, so the store takes the batches in this
                // order.
                poll_fn(|cx| {
                    append.poll(cx);
                    Poll::Ready(())
                })
                .await;
                in_flight.push_back(append);
                continue;
            }
            AuditStep::Finished(result) => result,
        };
        let Some(InFlight { replies, .. }) = in_flight.pop_front() else { break };
        let result = match result {
            Ok(entries) => {
                if let Some(sinks) = &sinks {
                    let sinks = Arc::clone(sinks);
                    let failed = tokio::task::spawn_blocking(move || {
                        sinks
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .write(&entries)
                    })
                    .await
                    .unwrap_or(1);
                    if let Some(state) = state.upgrade() {
                        for _ in 0..failed {
                            state.metrics.sink_failed();
                        }
                    }
                }
                appended += replies.len() as u64;
                index_wake.notify_one();
                if checkpoint_every > 0 && appended >= checkpoint_every {
                    appended = 0;
                    wake.notify_one();
                }
                Ok(())
            }
            Err(error) => {
                tracing::error!("cannot append to the audit log: {error}");
                Err(error)
            }
        };
        for reply in replies {
            let _ = reply.send(result.clone());
        }
    }
}

/// Where a request waits for its audit entry to be committed.
type AuditReply = oneshot::Sender<Result<()>>;

/// An audit append the writer has sent: polled until it finishes (every
/// one in flight is, since each may hold what the oldest waits for), its
/// result then kept until the appends before it are answered.
struct InFlight<'a> {
    append: Option<StoreFuture<'a, Vec<ExportedEntry>>>,
    result: Option<Result<Vec<ExportedEntry>>>,
    replies: Vec<AuditReply>,
}

impl InFlight<'_> {
    fn poll(&mut self, cx: &mut std::task::Context<'_>) {
        if let Some(append) = self.append.as_mut() {
            if let Poll::Ready(result) = append.as_mut().poll(cx) {
                self.result = Some(result);
                self.append = None;
            }
        }
    }

    /// Polls every append in flight; ready with the oldest one's result
    /// once it has one.
    fn poll_oldest(
        in_flight: &mut VecDeque<Self>,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<Result<Vec<ExportedEntry>>> {
        for append in in_flight.iter_mut() {
            append.poll(cx);
        }
        match in_flight.front_mut().and_then(|oldest| oldest.result.take()) {
            Some(result) => Poll::Ready(result),
            None => Poll::Pending,
        }
    }
}

/// What the audit writer does next.
enum AuditStep {
    /// The oldest append in flight finished.
    Finished(Result<Vec<ExportedEntry>>),
    /// An entry came (`None`: no more will).
    Received(Option<(AuditDraft, AuditReply)>),
}

/// A configured server, ready to serve on listeners.
#[derive(Clone)]
pub struct Server {
    state: Arc<State>,
    tls: TlsAcceptor,
    kmip_tls: TlsAcceptor,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("state", &self.state).finish_non_exhaustive()
    }
}

impl Server {
    /// Loads the deployment from the store and the data directory; with an
    /// unseal key file, unseals at once. Must run inside a Tokio runtime.
    pub async fn new(opts: &ServerOptions, store: Arc<dyn Store>) -> Result<Self> {
        opts.limits.validate().map_err(|e| KmsError::Config(format!("invalid limits: {e}")))?;
        let not_initialised = || {
            KmsError::Config("the store holds no deployment: run `rampart kms init` first".into())
        };
        let seal: SealConfig =
            serde_json::from_slice(&store.get_meta(meta::SEAL).await?.ok_or_else(not_initialised)?)
                .map_err(|e| KmsError::Corrupt(format!("seal configuration: {e}")))?;
        let root_check = store.get_meta(meta::ROOT_CHECK).await?.ok_or_else(not_initialised)?;
        let ca_pem =
            String::from_utf8(store.get_meta(meta::CA_CERT).await?.ok_or_else(not_initialised)?)
                .map_err(|_| KmsError::Corrupt("the CA certificate is not text".into()))?;
        let cert = opts.data_dir.join(files::SERVER_CERT);
        let key = opts.data_dir.join(files::SERVER_KEY);
        let revoked: RevokedSet = Arc::new(RwLock::new(HashSet::new()));
        let tls = server_tls(&ca_pem, &cert, &key, FrontEnd::Rest, &revoked)?;
        let kmip_tls = server_tls(&ca_pem, &cert, &key, FrontEnd::Kmip, &revoked)?;
        let hsm = if seal == SealConfig::Hsm {
            let config = HsmConfig::read(&opts.data_dir)?;
            let sealed_audit_key = store.get_meta(META_AUDIT_KEY).await?.ok_or_else(|| {
                KmsError::Corrupt("the HSM deployment's sealed audit key is missing".into())
            })?;
            Some((config, sealed_audit_key))
        } else {
            None
        };
        let root = Arc::new(RwLock::new(None));
        let (tx, rx) = mpsc::channel(4 * AUDIT_BATCH);
        let sinks = sinks::Sinks::open(&opts.audit.sinks)?;
        let sinks = (!sinks.is_empty()).then_some(sinks);
        let sink_reopen = sinks.as_ref().map(sinks::Sinks::reopen_flag);
        let checkpoint_wake = Arc::new(Notify::new());
        let index_wake = Arc::new(Notify::new());
        let state = Arc::new(State {
            store,
            seal,
            root_check,
            root,
            shares: Mutex::new(Vec::new()),
            hsm,
            hsm_login: tokio::sync::Mutex::new(()),
            clients: Mutex::new(HashMap::new()),
            revoked,
            auditor: tx,
            metrics: Metrics::default(),
            rate: limits::RateLimiter::new(&opts.limits),
            limits: opts.limits.clone(),
            kmip_interop: opts.kmip_interop,
            heartbeat_answers: Mutex::new(HashMap::new()),
            checkpoint_wake: Arc::clone(&checkpoint_wake),
            sink_reopen,
            console: console::sessions::Console::default(),
            server_cert_pem: std::fs::read_to_string(&cert).unwrap_or_default(),
            key_cache: key_cache::KeyCache::default(),
            server_id: {
                let mut id = [0u8; 8];
                rampart_crypto::fill_random(&mut id)?;
                hex::encode(id)
            },
        });
        tokio::spawn(audit_writer(
            Arc::clone(&state.store),
            Arc::clone(&state.root),
            rx,
            sinks,
            Arc::downgrade(&state),
            (opts.audit.checkpoint_entries, checkpoint_wake),
            Arc::clone(&index_wake),
        ));
        tokio::spawn(audit_log::indexer(Arc::downgrade(&state), index_wake));
        tokio::spawn(audit_log::checkpointer(
            Arc::downgrade(&state),
            opts.audit.checkpoint_interval,
        ));
        if seal == SealConfig::File {
            let path = opts
                .unseal_key_file
                .clone()
                .unwrap_or_else(|| opts.data_dir.join(files::UNSEAL_KEY));
            let key = read_unseal_key(&path)?;
            state.unseal_with(&key)?;
        }
        if let (SealConfig::Hsm, Some(path)) = (seal, &opts.hsm_pin_file) {
            state.unseal_with_pin(read_pin_file(path)?).await?;
        }
        state.refresh_clients().await?;
        // Weak: the refresher ends with the server's state.
        let weak = Arc::downgrade(&state);
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(CLIENT_REFRESH);
            ticks.tick().await;
            loop {
                ticks.tick().await;
                let Some(state) = weak.upgrade() else { break };
                if let Err(error) = state.refresh_clients().await {
                    tracing::warn!("cannot reload the revoked clients: {error}");
                }
            }
        });
        Ok(Self { state, tls: TlsAcceptor::from(tls), kmip_tls: TlsAcceptor::from(kmip_tls) })
    }

    /// Makes the audit file sink reopen its file before its next write
    /// (after logrotate renamed it; `kms serve` calls this on SIGHUP).
    pub fn reopen_audit_file(&self) {
        if let Some(flag) = &self.state.sink_reopen {
            flag.store(true, Ordering::Release);
        }
    }

    /// Verifies the audit chain since the last checkpoint and, when it
    /// holds, writes a checkpoint at its head now (as the server does every
    /// `checkpoint_entries` entries or `checkpoint_interval`). Returns the
    /// checkpoint written, if any.
    pub async fn checkpoint_audit(&self) -> Result<Option<crate::audit::Mark>> {
        audit_log::checkpoint_once(&self.state).await
    }

    /// Whether the server holds the root key.
    #[must_use]
    pub fn is_sealed(&self) -> bool {
        self.state.root().is_none()
    }

    /// Serves KMIP (binary TTLV over TLS 1.2/1.3, [`kmip`]) on `listener`
    /// until `shutdown` resolves, beside [`Server::run`]: the same state,
    /// identities, limits and audit chain.
    pub async fn run_kmip(
        &self,
        listener: TcpListener,
        shutdown: impl std::future::Future<Output = ()>,
    ) -> Result<()> {
        let acceptor = self.kmip_tls.clone();
        accept_loop(&self.state, listener, shutdown, move |state, tcp, peer| {
            kmip_connection::serve_connection(state, acceptor.clone(), tcp, peer)
        })
        .await;
        Ok(())
    }

    /// Serves connections from `listener` until `shutdown` resolves.
    pub async fn run(
        &self,
        listener: TcpListener,
        shutdown: impl std::future::Future<Output = ()>,
    ) -> Result<()> {
        let acceptor = self.tls.clone();
        let address = listener.local_addr().map_or_else(|_| "?".into(), |a| a.to_string());
        let presence = tokio::spawn(announce(Arc::downgrade(&self.state), address));
        accept_loop(&self.state, listener, shutdown, move |state, tcp, peer| {
            serve_connection(state, acceptor.clone(), tcp, peer)
        })
        .await;
        presence.abort();
        Ok(())
    }
}

/// Announces this server in the store every [`PRESENCE_INTERVAL`] while
/// it serves, so that the servers sharing a store can list each other.
async fn announce(state: std::sync::Weak<State>, address: String) {
    // The kernel's name for this host (the REST address may be 0.0.0.0).
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_default();
    let mut ticks = tokio::time::interval(PRESENCE_INTERVAL);
    loop {
        ticks.tick().await;
        let Some(state) = state.upgrade() else { break };
        let now = now_ms();
        let me = crate::store::ServerPresence {
            id: state.server_id.clone(),
            host: host.clone(),
            address: address.clone(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            started_ms: state.console.started_ms(),
            seen_ms: now,
        };
        if let Err(error) = state.store.server_checkin(me, now - PRESENCE_FORGET_MS).await {
            tracing::warn!("cannot announce this server in the store: {error}");
        }
    }
}

async fn serve_connection(
    state: Arc<State>,
    acceptor: TlsAcceptor,
    tcp: tokio::net::TcpStream,
    peer: SocketAddr,
) {
    let limits = state.limits.clone();
    let Some(stream) = tls_accept(&state, &acceptor, tcp, peer, "tls.handshake").await else {
        return;
    };
    let fp: Option<Arc<str>> = peer_fingerprint(&stream).map(Into::into);
    let mut http = http1::Builder::new();
    // hyper waits for the next request's head under the header timeout,
    // so it is also the keep-alive idle timeout.
    http.timer(TokioTimer::new())
        .keep_alive(true)
        .header_read_timeout(limits.idle_timeout)
        .max_header_size(limits.max_header_bytes);
    if limits.max_headers != limits::HYPER_MAX_HEADERS {
        http.max_headers(limits.max_headers);
    }
    let stream = writes::StallGuard::new(stream, limits.idle_timeout);
    let shared = Arc::clone(&state);
    let service = hyper::service::service_fn(move |request| {
        let state = Arc::clone(&state);
        let fp = fp.clone();
        async move {
            let response = if console::is_console_path(request.uri().path()) {
                console::handle(&state, peer, request).await
            } else if let Some(fp) = fp {
                api::handle(&state, &fp, request).await
            } else {
                console::refuse_without_certificate(&state, peer, request).await
            };
            Ok::<_, std::convert::Infallible>(response)
        }
    });
    let result = http.serve_connection(TokioIo::new(stream), service).await;
    if let Err(error) = result {
        if error.is_parse_too_large() {
            shared.metrics.oversized_headers();
        }
        tracing::debug!("connection from {peer} ended: {error}");
    }
}

/// Binds `address` (e.g. `127.0.0.1:8443`, port 0 for any).
pub async fn bind(address: &str) -> Result<TcpListener> {
    TcpListener::bind(address)
        .await
        .map_err(|e| KmsError::Config(format!("cannot listen on {address}: {e}")))
}
