//! The transport to the key servers: mutual TLS to the servers of a
//! [`Bundle`], with kept-alive connections, and failover: a connection
//! error or a 5xx answer moves on to the next endpoint, for a bounded
//! number of rounds with exponential backoff between them. TLS refusals
//! (a certificate the server rejects, or a server the CA did not certify)
//! are not retried.
//!
//! [`Transport::unwrap`] is the one request unlocking makes; the key
//! manager's admin client (`rampart_kms::client::KmsClient`) builds every
//! other request on [`Transport::call_json`].

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
pub use hyper::Method;
use hyper::Request;
use hyper_util::rt::TokioIo;
use rampart_crypto::SecretBytes;
use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::bundle::{Bundle, Endpoint};
use crate::error::{ClientError, ConfigError};
use crate::wrapped::WrappedHeader;

/// The TLS configuration the key servers and their clients share: TLS
/// 1.3 only, AES-GCM cipher suites only, from AWS-LC.
#[must_use]
pub fn crypto_provider() -> Arc<rustls::crypto::CryptoProvider> {
    let mut provider = rustls::crypto::aws_lc_rs::default_provider();
    provider.cipher_suites = vec![
        rustls::crypto::aws_lc_rs::cipher_suite::TLS13_AES_256_GCM_SHA384,
        rustls::crypto::aws_lc_rs::cipher_suite::TLS13_AES_128_GCM_SHA256,
    ];
    Arc::new(provider)
}

/// The TLS configuration of KMIP, servers and clients: as
/// [`crypto_provider`], but TLS 1.2 is also accepted, with ECDHE and
/// AES-GCM only, because KMIP clients (PyKMIP, vSphere, MySQL's keyring)
/// still commonly speak it.
#[must_use]
pub fn kmip_crypto_provider() -> Arc<rustls::crypto::CryptoProvider> {
    use rustls::crypto::aws_lc_rs::cipher_suite as cs;
    let mut provider = rustls::crypto::aws_lc_rs::default_provider();
    provider.cipher_suites = vec![
        cs::TLS13_AES_256_GCM_SHA384,
        cs::TLS13_AES_128_GCM_SHA256,
        cs::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        cs::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        cs::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
        cs::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
    ];
    Arc::new(provider)
}

/// The TLS client configuration of `bundle`'s identity: its CA as the
/// only root, its certificate and key presented, `versions` offered.
pub(crate) fn client_tls(
    bundle: &Bundle,
    provider: Arc<rustls::crypto::CryptoProvider>,
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> Result<rustls::ClientConfig, ConfigError> {
    let cert_err = |e: &dyn std::fmt::Display| ConfigError::Certificate(format!("bundle: {e}"));
    let mut roots = RootCertStore::empty();
    let ca = CertificateDer::from_pem_slice(bundle.ca_cert.as_bytes()).map_err(|e| cert_err(&e))?;
    roots.add(ca).map_err(|e| cert_err(&e))?;
    let chain = CertificateDer::pem_slice_iter(bundle.cert.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| cert_err(&e))?;
    let key = PrivateKeyDer::from_pem_slice(bundle.key.expose()).map_err(|e| cert_err(&e))?;
    rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .map_err(|e| cert_err(&e))?
        .with_root_certificates(roots)
        .with_client_auth_cert(chain, key)
        .map_err(|e| cert_err(&e))
}

const MAX_RESPONSE: usize = 64 << 20;
const MAX_IDLE: usize = 64;

/// How hard the client tries.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    /// Rounds over all endpoints.
    pub rounds: u32,
    /// Wait before the second round; doubles each round.
    pub backoff: Duration,
    pub connect_timeout: Duration,
    /// Per request, per attempt.
    pub request_timeout: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            rounds: 4,
            backoff: Duration::from_millis(100),
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(30),
        }
    }
}

/// One kept-alive connection, and how its I/O task ended: in TLS 1.3 a
/// server's refusal of our certificate arrives after the handshake, so
/// the TLS alert is only seen by that task.
struct Conn {
    sender: SendRequest<Full<Bytes>>,
    ended: tokio::sync::watch::Receiver<Option<Option<String>>>,
}

impl Conn {
    /// The TLS error that ended the connection, if that is what happened.
    async fn tls_failure(&mut self) -> Option<String> {
        let ended =
            tokio::time::timeout(Duration::from_millis(500), self.ended.wait_for(Option::is_some))
                .await;
        match ended {
            Ok(Ok(value)) => value.clone().flatten(),
            _ => None,
        }
    }
}

struct Target {
    endpoint: Endpoint,
    name: ServerName<'static>,
    idle: Mutex<Vec<Conn>>,
}

/// The HTTPS client of the key servers named in a bundle. Cheap to
/// clone; clones share connections.
#[derive(Clone)]
pub struct Transport {
    targets: Arc<Vec<Target>>,
    connector: TlsConnector,
    preferred: Arc<AtomicUsize>,
    policy: RetryPolicy,
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transport").field("endpoints", &self.endpoints()).finish_non_exhaustive()
    }
}

enum Attempt {
    /// Try the next endpoint.
    Retry(String),
    Fatal(ClientError),
}

/// A rustls error somewhere in an error's chain.
fn tls_cause(error: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = current {
        if let Some(tls) = e.downcast_ref::<rustls::Error>() {
            return Some(tls.to_string());
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            if let Some(tls) = io.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>())
            {
                return Some(tls.to_string());
            }
        }
        current = e.source();
    }
    None
}

/// A request body.
#[derive(Debug, Clone)]
pub enum Body {
    None,
    Json(Bytes),
}

impl Transport {
    /// A client for `bundle`'s endpoints, with its certificate.
    pub fn new(bundle: &Bundle) -> Result<Self, ClientError> {
        Self::with_policy(bundle, RetryPolicy::default())
    }

    /// A client that talks only to `endpoint` (for unsealing one server).
    pub fn for_endpoint(bundle: &Bundle, endpoint: &str) -> Result<Self, ClientError> {
        let mut one = bundle.clone();
        one.endpoints = vec![Endpoint::parse(endpoint)?.url()];
        Self::new(&one)
    }

    /// A client for `bundle`'s endpoints, trying as hard as `policy` says.
    pub fn with_policy(bundle: &Bundle, policy: RetryPolicy) -> Result<Self, ClientError> {
        let mut config = client_tls(bundle, crypto_provider(), &[&rustls::version::TLS13])?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let mut targets = Vec::new();
        for endpoint in bundle.endpoints()? {
            let name = ServerName::try_from(endpoint.host.clone()).map_err(|e| {
                ConfigError::Config(format!("endpoint host '{}': {e}", endpoint.host))
            })?;
            targets.push(Target { endpoint, name, idle: Mutex::new(Vec::new()) });
        }
        Ok(Self {
            targets: Arc::new(targets),
            connector: TlsConnector::from(Arc::new(config)),
            preferred: Arc::new(AtomicUsize::new(0)),
            policy,
        })
    }

    async fn connect(&self, target: &Target) -> Result<Conn, Attempt> {
        let url = target.endpoint.url();
        let timeout = self.policy.connect_timeout;
        let address = (target.endpoint.host.as_str(), target.endpoint.port);
        let tcp = match tokio::time::timeout(timeout, TcpStream::connect(address)).await {
            Ok(Ok(tcp)) => tcp,
            Ok(Err(e)) => return Err(Attempt::Retry(format!("{url}: {e}"))),
            Err(_) => return Err(Attempt::Retry(format!("{url}: connection timed out"))),
        };
        let _ = tcp.set_nodelay(true);
        let tls =
            match tokio::time::timeout(timeout, self.connector.connect(target.name.clone(), tcp))
                .await
            {
                Ok(Ok(tls)) => tls,
                Ok(Err(e)) => {
                    return Err(match tls_cause(&e) {
                        Some(message) => {
                            Attempt::Fatal(ClientError::Tls { endpoint: url, message })
                        }
                        None => Attempt::Retry(format!("{url}: {e}")),
                    })
                }
                Err(_) => return Err(Attempt::Retry(format!("{url}: TLS handshake timed out"))),
            };
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .map_err(|e| Attempt::Retry(format!("{url}: {e}")))?;
        let (report, ended) = tokio::sync::watch::channel(None);
        tokio::spawn(async move {
            let failure = connection.await.err().and_then(|e| tls_cause(&e));
            let _ = report.send(Some(failure));
        });
        Ok(Conn { sender, ended })
    }

    async fn attempt(
        &self,
        target: &Target,
        method: &Method,
        path: &str,
        body: &Body,
    ) -> Result<(u16, Bytes), Attempt> {
        let url = target.endpoint.url();
        let idle = {
            let mut idle = target.idle.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let mut found = None;
            while let Some(conn) = idle.pop() {
                if !conn.sender.is_closed() {
                    found = Some(conn);
                    break;
                }
            }
            found
        };
        // A pooled connection the server closed meanwhile gets one quiet
        // retry on a fresh connection.
        let reused = idle.is_some();
        let mut conn = match idle {
            Some(conn) => conn,
            None => self.connect(target).await?,
        };
        let mut result = self.exchange(&mut conn, &url, target, method, path, body).await;
        if let Err(Attempt::Retry(_)) = &result {
            if reused {
                conn = self.connect(target).await?;
                result = self.exchange(&mut conn, &url, target, method, path, body).await;
            }
        }
        if let Err(Attempt::Retry(_)) = &result {
            if let Some(message) = conn.tls_failure().await {
                return Err(Attempt::Fatal(ClientError::Tls { endpoint: url, message }));
            }
        }
        if result.is_ok() && !conn.sender.is_closed() {
            let mut idle = target.idle.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if idle.len() < MAX_IDLE {
                idle.push(conn);
            }
        }
        result
    }

    async fn exchange(
        &self,
        conn: &mut Conn,
        url: &str,
        target: &Target,
        method: &Method,
        path: &str,
        body: &Body,
    ) -> Result<(u16, Bytes), Attempt> {
        let sender = &mut conn.sender;
        let work = async {
            sender.ready().await.map_err(|e| Attempt::Retry(format!("{url}: {e}")))?;
            let host = if target.endpoint.host.contains(':') {
                format!("[{}]:{}", target.endpoint.host, target.endpoint.port)
            } else {
                format!("{}:{}", target.endpoint.host, target.endpoint.port)
            };
            let builder = Request::builder()
                .method(method.clone())
                .uri(path)
                .header(hyper::header::HOST, host);
            let request = match body {
                Body::None => builder.body(Full::new(Bytes::new())),
                Body::Json(bytes) => builder
                    .header(hyper::header::CONTENT_TYPE, "application/json")
                    .body(Full::new(bytes.clone())),
            }
            .map_err(|e| {
                Attempt::Fatal(ClientError::Protocol {
                    endpoint: url.to_owned(),
                    message: e.to_string(),
                })
            })?;
            let response = sender.send_request(request).await.map_err(|e| match tls_cause(&e) {
                Some(message) => {
                    Attempt::Fatal(ClientError::Tls { endpoint: url.to_owned(), message })
                }
                None => Attempt::Retry(format!("{url}: {e}")),
            })?;
            let status = response.status().as_u16();
            let bytes = http_body_util::Limited::new(response.into_body(), MAX_RESPONSE)
                .collect()
                .await
                .map_err(|e| Attempt::Retry(format!("{url}: {e}")))?
                .to_bytes();
            Ok((status, bytes))
        };
        match tokio::time::timeout(self.policy.request_timeout, work).await {
            Ok(result) => result,
            Err(_) => Err(Attempt::Retry(format!("{url}: request timed out"))),
        }
    }

    /// The URLs of the endpoints, in the bundle's order.
    #[must_use]
    pub fn endpoints(&self) -> Vec<String> {
        self.targets.iter().map(|t| t.endpoint.url()).collect()
    }

    /// One request with failover: the first endpoint that answers below
    /// 500 gives the answer (its body when below 400, else its error).
    pub async fn call(&self, method: Method, path: &str, body: Body) -> Result<Bytes, ClientError> {
        let n = self.targets.len();
        let mut failures: Vec<String> = Vec::new();
        let mut last_api: Option<ClientError> = None;
        for round in 0..self.policy.rounds.max(1) {
            if round > 0 {
                let factor = 1u32 << (round - 1).min(10);
                tokio::time::sleep(self.policy.backoff * factor).await;
            }
            let start = self.preferred.load(Ordering::Relaxed);
            for offset in 0..n {
                let index = (start + offset) % n;
                let target = &self.targets[index];
                match self.attempt(target, &method, path, &body).await {
                    Ok((status, bytes)) if status < 500 => {
                        self.preferred.store(index, Ordering::Relaxed);
                        return if status < 400 {
                            Ok(bytes)
                        } else {
                            Err(api_error(status, &bytes))
                        };
                    }
                    Ok((status, bytes)) => {
                        let error = api_error(status, &bytes);
                        failures.push(format!("{}: {error}", target.endpoint.url()));
                        last_api = Some(error);
                    }
                    Err(Attempt::Fatal(error)) => return Err(error),
                    Err(Attempt::Retry(message)) => failures.push(message),
                }
            }
        }
        // Every endpoint answered 5xx (or was down): report the server's
        // own error when there is one (a sealed server says so).
        if let Some(error) = last_api {
            return Err(error);
        }
        failures.dedup();
        let tail = failures.len().saturating_sub(3);
        Err(ClientError::Unavailable(failures[tail..].join("; ")))
    }

    /// [`Self::call`] with a JSON body (if any) and a JSON answer.
    pub async fn call_json<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<T, ClientError> {
        let body = match body {
            Some(value) => Body::Json(Bytes::from(value.to_string())),
            None => Body::None,
        };
        let bytes = self.call(method, path, body).await?;
        serde_json::from_slice(&bytes).map_err(|e| ClientError::Protocol {
            endpoint: path.to_owned(),
            message: format!("unexpected JSON: {e}"),
        })
    }

    /// A GET of any API path (with its query), as JSON.
    pub async fn get_json(&self, path_and_query: &str) -> Result<Value, ClientError> {
        self.call_json(Method::GET, path_and_query, None).await
    }

    /// Unwraps a ciphertext of `wrap` (the key name is read from it).
    pub async fn unwrap(
        &self,
        ciphertext: &str,
        context: &[u8],
    ) -> Result<SecretBytes, ClientError> {
        let header = WrappedHeader::parse(ciphertext)?;
        let path = format!("/v1/keys/{}/unwrap", header.name);
        let body = json!({ "ciphertext": ciphertext.trim(), "context": B64.encode(context) });
        let bytes =
            self.call(Method::POST, &path, Body::Json(Bytes::from(body.to_string()))).await?;
        decode_secret_field(&bytes, "plaintext", &path)
    }
}

fn api_error(status: u16, bytes: &[u8]) -> ClientError {
    let value: Value = serde_json::from_slice(bytes).unwrap_or(Value::Null);
    let code = value["error"]["code"].as_str().unwrap_or("http_error").to_owned();
    let message =
        value["error"]["message"].as_str().map_or_else(|| format!("HTTP {status}"), str::to_owned);
    ClientError::Api { status, code, message }
}

/// Reads the base64 secret `field` (`plaintext` or `material`) of an
/// answer to `path`.
pub fn decode_secret_field(
    bytes: &[u8],
    field: &str,
    path: &str,
) -> Result<SecretBytes, ClientError> {
    // The base64 text itself is secret: it is read straight into a
    // zeroizing buffer rather than a `String`.
    #[derive(Deserialize)]
    struct Plaintext {
        #[serde(with = "crate::bundle::secret_text")]
        plaintext: SecretBytes,
    }
    #[derive(Deserialize)]
    struct Material {
        #[serde(with = "crate::bundle::secret_text")]
        material: SecretBytes,
    }
    let bad = |m: &str| ClientError::Protocol { endpoint: path.to_owned(), message: m.to_owned() };
    let text = match field {
        "plaintext" => serde_json::from_slice::<Plaintext>(bytes).map(|p| p.plaintext),
        _ => serde_json::from_slice::<Material>(bytes).map(|m| m.material),
    }
    .map_err(|e| bad(&e.to_string()))?;
    Ok(SecretBytes::new(B64.decode(text.expose()).map_err(|_| bad("field is not base64"))?))
}
