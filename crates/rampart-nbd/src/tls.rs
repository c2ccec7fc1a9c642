use std::path::Path;
use std::sync::Arc;

use rustls::server::WebPkiClientVerifier;
use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

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
