//! The deployment's certificates, made with rcgen (ECDSA P-256 over
//! AWS-LC): a CA, the servers' certificate, and client certificates issued
//! from certificate signing requests, so a client's private key never
//! leaves the machine that made it.

use std::net::IpAddr;

use rampart_crypto::{digest, fill_random, HashAlg, SecretBytes};
use rcgen::{
    BasicConstraints, CertificateParams, CertificateSigningRequestParams, DistinguishedName,
    DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose, SanType, SerialNumber,
    PKCS_ECDSA_P256_SHA256,
};
use time::{Duration, OffsetDateTime};

use crate::error::{KmsError, Result};

/// A certificate (PEM) and its private key (PKCS#8 PEM, secret).
#[derive(Debug)]
pub struct CertAndKey {
    pub cert_pem: String,
    pub key_pem: SecretBytes,
}

fn new_key() -> Result<KeyPair> {
    Ok(KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?)
}

fn key_pem(key: &KeyPair) -> SecretBytes {
    SecretBytes::new(key.serialize_pem().into_bytes())
}

fn random_serial() -> Result<SerialNumber> {
    let mut bytes = [0u8; 16];
    fill_random(&mut bytes)?;
    bytes[0] &= 0x7f; // positive
    bytes[0] |= 0x01; // and without a leading zero byte
    Ok(SerialNumber::from_slice(&bytes))
}

fn dn(common_name: &str) -> DistinguishedName {
    let mut name = DistinguishedName::new();
    name.push(DnType::OrganizationName, "Rampart KMS");
    name.push(DnType::CommonName, common_name);
    name
}

fn validity(params: &mut CertificateParams, days: i64) {
    let now = OffsetDateTime::now_utc();
    params.not_before = now - Duration::minutes(5);
    params.not_after = now + Duration::days(days);
}

/// SHA-256 of a certificate's DER, hex.
#[must_use]
pub fn fingerprint(der: &[u8]) -> String {
    hex::encode(digest(HashAlg::Sha256, der).expose())
}

/// The DER of the first certificate in `pem`.
pub fn pem_to_der(pem: &str) -> Result<Vec<u8>> {
    use rustls_pki_types::pem::PemObject;
    let der = rustls_pki_types::CertificateDer::from_pem_slice(pem.as_bytes())
        .map_err(|e| KmsError::Certificate(format!("not a PEM certificate: {e}")))?;
    Ok(der.to_vec())
}

/// The deployment certificate authority.
pub struct Authority {
    cert_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl std::fmt::Debug for Authority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authority").finish_non_exhaustive()
    }
}

impl Authority {
    /// A new CA valid for 10 years. Returns it and its private key's
    /// PKCS#8 DER (to be sealed under the root key).
    pub fn generate(deployment: &str) -> Result<(Self, SecretBytes)> {
        let key = new_key()?;
        let mut params = CertificateParams::default();
        params.distinguished_name = dn(&format!("Rampart KMS CA {deployment}"));
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        params.serial_number = Some(random_serial()?);
        validity(&mut params, 3650);
        let cert = params.self_signed(&key)?;
        let der = SecretBytes::from_slice(key.serialized_der());
        Ok((Self { cert_pem: cert.pem(), issuer: Issuer::new(params, key) }, der))
    }

    /// The CA from its certificate and private key DER.
    pub fn load(cert_pem: &str, key_der: &SecretBytes) -> Result<Self> {
        let key = KeyPair::try_from(key_der.expose())?;
        let issuer = Issuer::from_ca_cert_pem(cert_pem, key)?;
        Ok(Self { cert_pem: cert_pem.to_owned(), issuer })
    }

    #[must_use]
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The servers' certificate: `localhost`, `127.0.0.1`, `::1` and `sans`
    /// (DNS names or IP addresses), valid for `days`.
    pub fn issue_server(&self, sans: &[String], days: i64) -> Result<CertAndKey> {
        let key = new_key()?;
        let mut params = CertificateParams::default();
        params.distinguished_name = dn("Rampart KMS server");
        let mut names: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
        for san in sans {
            if !names.contains(san) {
                names.push(san.clone());
            }
        }
        for name in &names {
            params.subject_alt_names.push(match name.parse::<IpAddr>() {
                Ok(ip) => SanType::IpAddress(ip),
                Err(_) => SanType::DnsName(name.clone().try_into().map_err(|_| {
                    KmsError::Config(format!("'{name}' is not a DNS name or IP address"))
                })?),
            });
        }
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.serial_number = Some(random_serial()?);
        params.use_authority_key_identifier_extension = true;
        validity(&mut params, days);
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(CertAndKey { cert_pem: cert.pem(), key_pem: key_pem(&key) })
    }

    /// Signs a client certificate for `name` over the public key of
    /// `csr_pem`. Only the CSR's key is used: the subject, validity and
    /// extensions are the CA's choice. The window is `not_before` to
    /// `not_after` (tests make expired certificates with it).
    pub fn issue_client(
        &self,
        csr_pem: &str,
        name: &str,
        not_before: OffsetDateTime,
        not_after: OffsetDateTime,
    ) -> Result<IssuedClient> {
        if csr_pem.len() > 16 * 1024 {
            return Err(KmsError::invalid("the CSR is too large"));
        }
        let mut csr = CertificateSigningRequestParams::from_pem(csr_pem)
            .map_err(|e| KmsError::invalid(format!("bad certificate signing request: {e}")))?;
        let mut params = CertificateParams::default();
        params.distinguished_name = dn(name);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let serial = random_serial()?;
        params.serial_number = Some(serial.clone());
        params.use_authority_key_identifier_extension = true;
        params.not_before = not_before;
        params.not_after = not_after;
        csr.params = params;
        let cert = csr.signed_by(&self.issuer)?;
        Ok(IssuedClient {
            cert_pem: cert.pem(),
            serial: hex::encode(serial.to_bytes()),
            fingerprint: fingerprint(cert.der()),
            not_after_ms: i64::try_from(not_after.unix_timestamp_nanos() / 1_000_000)
                .unwrap_or(i64::MAX),
        })
    }

    /// [`Authority::issue_client`] valid from now for `days`.
    pub fn issue_client_days(&self, csr_pem: &str, name: &str, days: i64) -> Result<IssuedClient> {
        let now = OffsetDateTime::now_utc();
        self.issue_client(csr_pem, name, now - Duration::minutes(5), now + Duration::days(days))
    }
}

/// A signed client certificate.
#[derive(Debug, Clone)]
pub struct IssuedClient {
    pub cert_pem: String,
    pub serial: String,
    pub fingerprint: String,
    pub not_after_ms: i64,
}

/// A new client key pair and a CSR for it (the client side of issuing).
pub fn client_request(name: &str) -> Result<(String, SecretBytes)> {
    let key = new_key()?;
    let mut params = CertificateParams::default();
    params.distinguished_name = dn(name);
    let csr = params.serialize_request(&key)?;
    Ok((csr.pem()?, key_pem(&key)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ca_issues_server_and_client_certificates() {
        let (ca, key_der) = Authority::generate("test").unwrap();
        let reloaded = Authority::load(ca.cert_pem(), &key_der).unwrap();
        let server = reloaded.issue_server(&["kms.example".into(), "10.0.0.1".into()], 30).unwrap();
        assert!(server.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        let (csr, client_key) = client_request("host-1").unwrap();
        let issued = reloaded.issue_client_days(&csr, "host-1", 30).unwrap();
        assert_eq!(issued.fingerprint, fingerprint(&pem_to_der(&issued.cert_pem).unwrap()));
        assert_eq!(issued.fingerprint.len(), 64);
        assert!(std::str::from_utf8(client_key.expose()).unwrap().contains("PRIVATE KEY"));
        assert!(ca.issue_client_days("garbage", "x", 1).is_err());
        assert!(!format!("{client_key:?}").contains("PRIVATE"));
    }
}
