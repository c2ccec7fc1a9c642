use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rustls::server::WebPkiClientVerifier;
use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

use super::{ktls, BoxStream};
use crate::metrics::ServerMetrics;
use crate::NbdError;

/// A rustls server configuration from PEM files: the server's certificate
/// chain and key, and optionally the CA that client certificates must chain
/// to (then a client certificate is required). TLS 1.3 is preferred, 1.2 is
/// allowed as the NBD specification requires; all crypto is AWS-LC's.
pub fn tls_config(
    cert: &Path,
    key: &Path,
    client_ca: Option<&Path>,
) -> Result<Arc<rustls::ServerConfig>, NbdError> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| {
            NbdError::Tls(format!("cannot read certificates from {}: {e}", cert.display()))
        })?
        .collect::<Result<_, _>>()
        .map_err(|e| NbdError::Tls(format!("bad certificate in {}: {e}", cert.display())))?;
    if chain.is_empty() {
        return Err(NbdError::Tls(format!("{} holds no certificate", cert.display())));
    }
    let private_key = PrivateKeyDer::from_pem_file(key).map_err(|e| {
        NbdError::Tls(format!("cannot read a private key from {}: {e}", key.display()))
    })?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| NbdError::Tls(e.to_string()))?;
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = RootCertStore::empty();
            for certificate in CertificateDer::pem_file_iter(ca).map_err(|e| {
                NbdError::Tls(format!("cannot read CA certificates from {}: {e}", ca.display()))
            })? {
                let certificate = certificate.map_err(|e| {
                    NbdError::Tls(format!("bad CA certificate in {}: {e}", ca.display()))
                })?;
                roots.add(certificate).map_err(|e| {
                    NbdError::Tls(format!("unusable CA certificate in {}: {e}", ca.display()))
                })?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| NbdError::Tls(format!("client verification: {e}")))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let config = builder.with_single_cert(chain, private_key).map_err(|e| {
        NbdError::Tls(format!("certificate and key do not form a usable pair: {e}"))
    })?;
    Ok(Arc::new(config))
}

/// The upgrade `NBD_OPT_STARTTLS` asks for: the TLS handshake, and on TCP
/// with kernel TLS asked for, the session handed to the kernel where it
/// has the `tls` module.
pub(crate) struct TlsUpgrade {
    acceptor: TlsAcceptor,
    kernel_tls: bool,
    /// Set once the kernel has refused kernel TLS (logged once).
    kernel_refusal_logged: AtomicBool,
}

impl TlsUpgrade {
    pub(crate) fn new(config: Arc<rustls::ServerConfig>, kernel_tls: bool) -> Self {
        let acceptor = if kernel_tls {
            // The kernel needs the session's traffic keys.
            let mut config = (*config).clone();
            config.enable_secret_extraction = true;
            TlsAcceptor::from(Arc::new(config))
        } else {
            TlsAcceptor::from(config)
        };
        Self { acceptor, kernel_tls, kernel_refusal_logged: AtomicBool::new(false) }
    }

    /// Runs the TLS handshake over `stream`; counts it, and where the
    /// session went, in `metrics`.
    pub(crate) async fn upgrade(
        &self,
        stream: BoxStream,
        metrics: &ServerMetrics,
    ) -> io::Result<BoxStream> {
        let upgraded = self.handshake(stream, metrics).await;
        let counter = if upgraded.is_ok() { &metrics.tls_ok } else { &metrics.tls_failed };
        counter.fetch_add(1, Ordering::Relaxed);
        upgraded
    }

    async fn handshake(&self, stream: BoxStream, metrics: &ServerMetrics) -> io::Result<BoxStream> {
        let stream = match (self.kernel_tls, stream.into_tcp()) {
            (true, Ok(tcp)) => match ktls::accept(&self.acceptor, tcp).await? {
                Ok(offloaded) => {
                    metrics.kernel_tls_offloaded.fetch_add(1, Ordering::Relaxed);
                    return Ok(offloaded);
                }
                Err((tcp, reason)) => {
                    metrics.kernel_tls_refused.fetch_add(1, Ordering::Relaxed);
                    if !self.kernel_refusal_logged.swap(true, Ordering::Relaxed) {
                        tracing::warn!(
                            "kernel TLS unavailable ({reason}); TLS stays in user space"
                        );
                    }
                    Box::new(tcp) as BoxStream
                }
            },
            (_, Ok(tcp)) => Box::new(tcp),
            (_, Err(other)) => other,
        };
        Ok(Box::new(self.acceptor.accept(stream).await?))
    }
}
