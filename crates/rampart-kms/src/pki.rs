//! The deployment's certificates, made with rcgen (ECDSA P-256 over
//! AWS-LC): a CA, the servers' certificate, and client certificates issued
//! from certificate signing requests, so a client's private key never
//! leaves the machine that made it; and the certificates KMIP Certify
//! issues for the public keys the key manager keeps or a PKCS#10 request
//! names, whose self-signature is checked here first.

use std::net::IpAddr;

use rampart_crypto::{
    digest, fill_random, Curve, DigestAlg, HashAlg, KeyAlg, PublicKey, SecretBytes, SignatureScheme,
};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, DnValue,
    ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose, PublicKeyData, SanType,
    SerialNumber, SignatureAlgorithm, PKCS_ECDSA_P256_SHA256, PKCS_ECDSA_P384_SHA384,
    PKCS_ECDSA_P521_SHA512, PKCS_ED25519, PKCS_RSA_SHA256,
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
        use rustls_pki_types::pem::PemObject;
        // Read by the same checked PKCS#10 reader as KMIP Certify: the
        // request's signature must be its key's, and only its key is used
        // (the name is the one the admin gave).
        let der =
            rustls_pki_types::CertificateSigningRequestDer::from_pem_slice(csr_pem.as_bytes())
                .map_err(|e| KmsError::invalid(format!("bad certificate signing request: {e}")))?;
        let request = read_certificate_request(der.as_ref())
            .map_err(|e| KmsError::invalid(format!("bad certificate signing request: {e}")))?;
        let key = SubjectKey::of(&request.spki)
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
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(IssuedClient {
            cert_pem: cert.pem(),
            serial: hex::encode(serial.to_bytes()),
            fingerprint: fingerprint(cert.der()),
            not_after_ms: i64::try_from(not_after.unix_timestamp_nanos() / 1_000_000)
                .unwrap_or(i64::MAX),
        })
    }

    /// A certificate for the public key `spki` (SubjectPublicKeyInfo DER)
    /// naming `subject`, valid from now for `days`: its DER. What KMIP
    /// Certify issues is never a CA, and its Extended Key Usage leaves out
    /// TLS server and client authentication, so a certified key cannot
    /// pose as the key manager or as one of its clients to a peer that
    /// trusts this CA.
    pub fn issue_for_key(
        &self,
        spki: &[u8],
        subject: &Subject,
        days: i64,
    ) -> std::result::Result<Vec<u8>, RequestError> {
        let key = SubjectKey::of(spki)?;
        let mut params = CertificateParams::default();
        params.distinguished_name = subject.0.clone();
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        if key.alg == &PKCS_RSA_SHA256 {
            params.key_usages.push(KeyUsagePurpose::KeyEncipherment);
        }
        params.extended_key_usages =
            vec![ExtendedKeyUsagePurpose::CodeSigning, ExtendedKeyUsagePurpose::EmailProtection];
        params.use_authority_key_identifier_extension = true;
        let failed = |e: KmsError| RequestError::Failed(e.to_string());
        params.serial_number = Some(random_serial().map_err(failed)?);
        validity(&mut params, days);
        let cert = params
            .signed_by(&key, &self.issuer)
            .map_err(|e| RequestError::Failed(format!("signing the certificate: {e}")))?;
        Ok(cert.der().to_vec())
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

/// Why a certificate request, or a key to certify, was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestError {
    /// Not a well-formed PKCS#10 request whose self-signature verifies.
    Invalid(String),
    /// A well-formed request, or a key, of a kind this CA does not certify.
    Unsupported(String),
    /// The CA could not sign.
    Failed(String),
}

impl std::fmt::Display for RequestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Invalid(why) | Self::Unsupported(why) | Self::Failed(why) => f.write_str(why),
        }
    }
}

/// A certificate's subject name.
#[derive(Debug, Clone)]
pub struct Subject(DistinguishedName);

impl Subject {
    /// `O=Rampart KMS, CN=common_name`, the subject of a key certified
    /// without a request.
    #[must_use]
    pub fn named(common_name: &str) -> Self {
        Self(dn(common_name))
    }

    /// The subject of a parsed certificate or request, part by part; a
    /// part that is not text is refused.
    fn of(name: &x509_parser::x509::X509Name<'_>) -> std::result::Result<Self, RequestError> {
        use x509_parser::der_parser::asn1_rs::Tag;
        let mut out = DistinguishedName::new();
        for part in name.iter_attributes() {
            let oid: Vec<u64> = part
                .attr_type()
                .iter()
                .ok_or_else(|| RequestError::Invalid("a subject part of an odd type".into()))?
                .collect();
            let value = part.attr_value();
            let text = || {
                std::str::from_utf8(value.data)
                    .map(str::to_owned)
                    .map_err(|_| RequestError::Invalid("a subject part that is not text".into()))
            };
            let value = match value.header.tag() {
                Tag::Utf8String => DnValue::Utf8String(text()?),
                Tag::PrintableString => DnValue::PrintableString(
                    text()?
                        .try_into()
                        .map_err(|_| RequestError::Invalid("a bad PrintableString".into()))?,
                ),
                Tag::Ia5String => DnValue::Ia5String(
                    text()?
                        .try_into()
                        .map_err(|_| RequestError::Invalid("a bad IA5String".into()))?,
                ),
                _ => {
                    return Err(RequestError::Unsupported(
                        "a subject part other than UTF8, Printable or IA5 text".into(),
                    ))
                }
            };
            out.push(DnType::from_oid(&oid), value);
        }
        Ok(Self(out))
    }

    /// The subject of the X.509 certificate `der` (what Re-certify keeps).
    pub fn of_certificate(der: &[u8]) -> std::result::Result<Self, RequestError> {
        let (_, cert) = x509_parser::parse_x509_certificate(der)
            .map_err(|e| RequestError::Invalid(format!("the X.509 certificate: {e}")))?;
        Self::of(&cert.tbs_certificate.subject)
    }
}

/// The SubjectPublicKeyInfo of the X.509 certificate `der`.
pub fn certificate_key(der: &[u8]) -> std::result::Result<Vec<u8>, RequestError> {
    let (_, cert) = x509_parser::parse_x509_certificate(der)
        .map_err(|e| RequestError::Invalid(format!("the X.509 certificate: {e}")))?;
    Ok(cert.tbs_certificate.subject_pki.raw.to_vec())
}

/// A public key as rcgen writes it into a certificate: its key bits under
/// the algorithm that names its kind (and curve).
struct SubjectKey {
    bits: Vec<u8>,
    alg: &'static SignatureAlgorithm,
}

impl SubjectKey {
    fn of(spki: &[u8]) -> std::result::Result<Self, RequestError> {
        use x509_parser::prelude::FromDer;
        let key = PublicKey::from_spki(spki).map_err(|_| {
            RequestError::Unsupported(
                "a key of a type this CA does not certify (RSA, EC P-256, P-384, P-521, Ed25519)"
                    .into(),
            )
        })?;
        let alg = match key.alg() {
            KeyAlg::Rsa => &PKCS_RSA_SHA256,
            KeyAlg::Ec(Curve::P256) => &PKCS_ECDSA_P256_SHA256,
            KeyAlg::Ec(Curve::P384) => &PKCS_ECDSA_P384_SHA384,
            KeyAlg::Ec(Curve::P521) => &PKCS_ECDSA_P521_SHA512,
            KeyAlg::Ed25519 => &PKCS_ED25519,
            KeyAlg::Dsa => return Err(RequestError::Unsupported("certifying a DSA key".into())),
        };
        let (_, info) = x509_parser::x509::SubjectPublicKeyInfo::from_der(spki)
            .map_err(|e| RequestError::Invalid(format!("the public key: {e}")))?;
        Ok(Self { bits: info.subject_public_key.data.to_vec(), alg })
    }
}

impl PublicKeyData for SubjectKey {
    fn der_bytes(&self) -> &[u8] {
        &self.bits
    }

    fn algorithm(&self) -> &'static SignatureAlgorithm {
        self.alg
    }
}

/// The same public key in one encoding (AWS-LC's), so that two
/// encodings of one key compare equal.
pub fn normalized_key(spki: &[u8]) -> std::result::Result<Vec<u8>, RequestError> {
    let unsupported = || {
        RequestError::Unsupported(
            "a key of a type this CA does not certify (RSA, EC P-256, P-384, P-521, Ed25519)"
                .into(),
        )
    };
    PublicKey::from_spki(spki).and_then(|k| k.to_spki()).map_err(|_| unsupported())
}

/// A PKCS#10 request whose self-signature verified: the key it is for
/// (normalized, see [`normalized_key`]) and the subject it asks for.
#[derive(Debug)]
pub struct CertificateRequest {
    pub spki: Vec<u8>,
    pub subject: Subject,
}

/// The signature scheme of a PKCS#10 request's signature algorithm.
fn request_scheme(oid: &str) -> Option<SignatureScheme> {
    Some(match oid {
        "1.2.840.113549.1.1.11" => SignatureScheme::RsaPkcs1v15(DigestAlg::Sha256),
        "1.2.840.113549.1.1.12" => SignatureScheme::RsaPkcs1v15(DigestAlg::Sha384),
        "1.2.840.113549.1.1.13" => SignatureScheme::RsaPkcs1v15(DigestAlg::Sha512),
        "1.2.840.10045.4.3.2" => SignatureScheme::Ecdsa(DigestAlg::Sha256),
        "1.2.840.10045.4.3.3" => SignatureScheme::Ecdsa(DigestAlg::Sha384),
        "1.2.840.10045.4.3.4" => SignatureScheme::Ecdsa(DigestAlg::Sha512),
        "1.3.101.112" => SignatureScheme::Ed25519,
        _ => return None,
    })
}

/// Reads a PKCS#10 certificate request (DER, nothing after it) and checks
/// that it is signed by the private key of the public key it carries.
pub fn read_certificate_request(
    der: &[u8],
) -> std::result::Result<CertificateRequest, RequestError> {
    use x509_parser::certification_request::X509CertificationRequest;
    use x509_parser::prelude::FromDer;
    let (rest, csr) = X509CertificationRequest::from_der(der)
        .map_err(|e| RequestError::Invalid(format!("not a PKCS#10 request: {e}")))?;
    if !rest.is_empty() {
        return Err(RequestError::Invalid("bytes after the PKCS#10 request".into()));
    }
    let info = &csr.certification_request_info;
    let algorithm = csr.signature_algorithm.algorithm.to_id_string();
    let scheme = request_scheme(&algorithm).ok_or_else(|| {
        RequestError::Unsupported(format!(
            "a request signed with {algorithm} (RSA PKCS#1 v1.5 or ECDSA with SHA-2, Ed25519)"
        ))
    })?;
    let key = PublicKey::from_spki(info.subject_pki.raw).map_err(|_| {
        RequestError::Unsupported(
            "a key of a type this CA does not certify (RSA, EC P-256, P-384, P-521, Ed25519)"
                .into(),
        )
    })?;
    if csr.signature_value.unused_bits != 0 {
        return Err(RequestError::Invalid("a signature that is not whole bytes".into()));
    }
    let signature: &[u8] = &csr.signature_value.data;
    match key.verify(scheme, info.raw, signature) {
        Ok(true) => {}
        Ok(false) => {
            return Err(RequestError::Invalid(
                "its signature is not its key's (the request was changed after signing)".into(),
            ))
        }
        Err(_) => {
            return Err(RequestError::Invalid(
                "its signature algorithm does not fit its key".into(),
            ))
        }
    }
    let spki = key
        .to_spki()
        .map_err(|e| RequestError::Failed(format!("encoding the request's key: {e}")))?;
    Ok(CertificateRequest { spki, subject: Subject::of(&info.subject)? })
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

    #[test]
    fn a_client_request_is_issued_only_when_its_signature_is_its_keys() {
        use base64::Engine as _;
        use rustls_pki_types::pem::PemObject;
        let (ca, _) = Authority::generate("test").unwrap();
        let (csr, _) = client_request("host-1").unwrap();
        let der = rustls_pki_types::CertificateSigningRequestDer::from_pem_slice(csr.as_bytes())
            .unwrap()
            .as_ref()
            .to_vec();
        let pem = |der: &[u8]| {
            let body = base64::engine::general_purpose::STANDARD.encode(der);
            format!(
                "-----BEGIN CERTIFICATE REQUEST-----\n{body}\n-----END CERTIFICATE REQUEST-----\n"
            )
        };
        assert!(ca.issue_client_days(&pem(&der), "host-1", 1).is_ok());
        // The subject changed after signing, bytes after the request, a
        // request cut short: each refused with one line, none a panic.
        let mut changed = der.clone();
        let at = changed.windows(6).position(|w| w == b"host-1").unwrap();
        changed[at] = b'H';
        let mut trailing = der.clone();
        trailing.push(0);
        for bad in [changed, trailing, der[..der.len() / 2].to_vec(), Vec::new()] {
            let error = ca.issue_client_days(&pem(&bad), "host-1", 1).unwrap_err().to_string();
            assert!(error.contains("certificate signing request"), "{error}");
            assert!(!error.contains('\n'), "{error}");
        }
    }
}
