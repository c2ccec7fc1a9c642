//! The key manager's objects beyond AES keys, for the REST API and the
//! web console: what kind of object a key is (and its algorithm and
//! links), Sign and Signature Verify by a key pair, a pair's public key,
//! X.509 certificates, and the export form of each type.
//!
//! Signing and verifying run KMIP Sign and Signature Verify themselves
//! (`kmip_objects::signing`, over the keys `asym_key` checks) for the
//! REST client, so the rules are the same on both front ends: the
//! client must match the key's allow rules, the key must be a private
//! key (to sign) or a public key (to verify), its Cryptographic Usage
//! Mask must allow the use, and its state and dates must too (a revoked
//! or destroyed key neither signs nor verifies; a deactivated one only
//! verifies).

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use rampart_crypto::SecretBytes;
use rampart_kmip::enums::{
    CertificateType, CryptographicAlgorithm, DigitalSignatureAlgorithm as Dsa, HashingAlgorithm,
    LinkType, ObjectType, PaddingMethod, ValidityIndicator,
};
use rampart_kmip::message::ProtocolVersion;
use rampart_kmip::object_parts::Certificate;
use rampart_kmip::payload::{CryptographicParameters, Link, SignRequest};
use rampart_kmip::tag::Tag;
use rampart_kmip::ttlv::{Bytes, Item};
use rampart_kmip::KmipError;
use zeroize::Zeroizing;

use super::access;
use super::key_pairs::{name_row, rest_type_name};
use super::keys::{get_key, type_name};
use crate::error::{KmsError, Result};
use crate::model::{check_name, now_ms, parse_policy, ClientInfo, KeyInfo, KeyView, ObjectInfo};
use crate::server::kmip_objects::{
    certificate_object, decode_value, new_kmip_key, unique_identifier, NewObject, Session, Streams,
};
use crate::server::state::State;
use crate::store::KmipObject;

/// Largest message (or digest) `sign` and `verify` take, decoded.
pub(crate) const MAX_SIGN_INPUT: usize = 128 * 1024;
/// Largest signature `verify` takes (an RSA-4096 signature is 512 bytes).
pub(crate) const MAX_SIGNATURE: usize = 1024;

/// A key manager error for a KMIP one, for the REST API: the object is
/// missing (404), refused to this client or in a state that forbids the
/// use (403), exists already (409), or the request does not fit the
/// object (400); a failure of the server's own is 500.
pub(crate) fn from_kmip(error: KmipError) -> KmsError {
    let text = error.to_string();
    match error {
        KmipError::ItemNotFound(m) | KmipError::ObjectNotFound(m) => KmsError::NotFound(m),
        KmipError::PermissionDenied(_)
        | KmipError::IncompatibleCryptographicUsageMask(_)
        | KmipError::WrongKeyLifecycleState(_)
        | KmipError::ObjectDestroyed(_)
        | KmipError::NotExtractable(_)
        | KmipError::Sensitive(_) => KmsError::Forbidden(text),
        KmipError::ObjectAlreadyExists(_) | KmipError::NonUniqueName(_) => KmsError::Conflict(text),
        KmipError::GeneralFailure(m) => KmsError::Crypto(m),
        _ => KmsError::InvalidRequest(text),
    }
}

fn curve_of(algorithm: Option<u32>, length: Option<i32>) -> Option<&'static str> {
    let ec = [CryptographicAlgorithm::EC.0, CryptographicAlgorithm::ECDSA.0];
    if !algorithm.is_some_and(|a| ec.contains(&a)) {
        return None;
    }
    match length? {
        256 => Some("P-256"),
        384 => Some("P-384"),
        521 => Some("P-521"),
        _ => None,
    }
}

/// The name a Unique Identifier (`NAME/VERSION`) names.
fn name_of(uid: &str) -> String {
    uid.rsplit_once('/').map_or(uid, |(name, _)| name).to_owned()
}

/// What kind of object `key` is (its newest version), with its algorithm
/// and the objects it is linked to.
pub(crate) async fn describe(state: &State, key: KeyInfo) -> Result<KeyView> {
    let object = match key.latest() {
        Some(latest) => state.store.kmip_object(key.name.clone(), latest.version).await?,
        None => None,
    };
    describe_with(state, key, object).await
}

/// [`describe`] of `key`, given the KMIP object its newest version shows.
async fn describe_with(state: &State, key: KeyInfo, object: Option<KmipObject>) -> Result<KeyView> {
    let Some(object) = object else {
        // A key of the REST API's own.
        let info = ObjectInfo {
            object_type: type_name(ObjectType::SYMMETRIC_KEY).into(),
            algorithm: Some("aes".into()),
            length: Some(256),
            key_type: Some("aes-256".into()),
            ..ObjectInfo::default()
        };
        return Ok(KeyView { key, object: info });
    };
    let object_type = ObjectType(object.object_type);
    let mut info = ObjectInfo {
        object_type: type_name(object_type).into(),
        algorithm: object
            .algorithm
            .map(|a| CryptographicAlgorithm(a).to_string().to_ascii_lowercase()),
        length: object.length,
        curve: curve_of(object.algorithm, object.length).map(str::to_owned),
        key_type: None,
        ..ObjectInfo::default()
    };
    if matches!(
        object_type,
        ObjectType::PRIVATE_KEY | ObjectType::PUBLIC_KEY | ObjectType::SYMMETRIC_KEY
    ) {
        info.key_type = object
            .algorithm
            .and_then(|a| rest_type_name(a, object.length))
            .filter(|t| (*t == "aes-256") == (object_type == ObjectType::SYMMETRIC_KEY))
            .map(str::to_owned);
    }
    if matches!(
        object_type,
        ObjectType::PRIVATE_KEY | ObjectType::PUBLIC_KEY | ObjectType::CERTIFICATE
    ) {
        for row in state.store.kmip_attributes(key.name.clone(), Some(object.version)).await? {
            if row.name != "Link" {
                continue;
            }
            let Some(link) = decode_value(&row.value).and_then(|i| Link::parse(&i).ok()) else {
                continue;
            };
            let to = Some(name_of(&link.linked_object));
            match link.link_type {
                LinkType::PUBLIC_KEY => info.public_key = to,
                LinkType::PRIVATE_KEY => info.private_key = to,
                LinkType::CERTIFICATE => info.certificate = to,
                _ => {}
            }
        }
    }
    Ok(KeyView { key, object: info })
}

/// [`describe`] of each key of a list page, their KMIP objects read
/// together.
pub(crate) async fn describe_all(state: &State, keys: Vec<KeyInfo>) -> Result<Vec<KeyView>> {
    let names = keys.iter().map(|k| k.name.clone()).collect();
    let objects = state.store.kmip_objects_of(names).await?;
    let mut by_key: std::collections::HashMap<&str, Vec<&KmipObject>> =
        std::collections::HashMap::new();
    for o in &objects {
        by_key.entry(o.key.as_str()).or_default().push(o);
    }
    let mut out = Vec::with_capacity(keys.len());
    for key in keys {
        // The object of the newest version, or of the newest one below it
        // (a REST rotation adds versions without objects).
        let latest = key.latest().map_or(0, |v| v.version);
        let object = by_key
            .get(key.name.as_str())
            .and_then(|own| own.iter().filter(|o| o.version <= latest).max_by_key(|o| o.version))
            .map(|o| (*o).clone());
        out.push(describe_with(state, key, object).await?);
    }
    Ok(out)
}

/// Key `name` as `client` (who must see it) finds it: the key, its newest
/// version's KMIP object and that version's number.
struct Visible {
    key: KeyInfo,
    object: Option<KmipObject>,
    version: u32,
}

impl Visible {
    /// The object's type (a REST key is a symmetric key).
    fn object_type(&self) -> ObjectType {
        self.object.as_ref().map_or(ObjectType::SYMMETRIC_KEY, |o| ObjectType(o.object_type))
    }
}

/// Key `name`, once `client` may see it; `version` and `known` are set for
/// the audit entry.
async fn visible(
    state: &State,
    client: &ClientInfo,
    name: &str,
    version: &mut Option<u32>,
    known: &mut bool,
) -> Result<Visible> {
    let key = get_key(state, name).await?;
    let latest = key.latest().map_or(1, |v| v.version);
    *version = Some(latest);
    *known = true;
    access::require_visible(client, name, &key.allow)?;
    let object = state.store.kmip_object(name.to_owned(), latest).await?;
    Ok(Visible { key, object, version: latest })
}

/// The signature algorithms of `sign` and `verify`, by their REST names.
pub(crate) const SIGNATURE_ALGORITHMS: [&str; 10] = [
    "ecdsa-sha256",
    "ecdsa-sha384",
    "ecdsa-sha512",
    "rsa-pss-sha256",
    "rsa-pss-sha384",
    "rsa-pss-sha512",
    "rsa-pkcs1-sha256",
    "rsa-pkcs1-sha384",
    "rsa-pkcs1-sha512",
    "ed25519",
];

/// Checks a signature algorithm's name (see [`SIGNATURE_ALGORITHMS`]).
pub(crate) fn check_signature_algorithm(name: &str) -> Result<()> {
    if SIGNATURE_ALGORITHMS.contains(&name) {
        return Ok(());
    }
    let shown: String = name.chars().take(40).filter(|c| !c.is_control()).collect();
    Err(KmsError::invalid(format!(
        "unknown signature algorithm '{shown}' (one of {})",
        SIGNATURE_ALGORITHMS.join(", ")
    )))
}

/// The KMIP Cryptographic Parameters of a signature algorithm.
fn parameters(name: &str) -> Result<CryptographicParameters> {
    check_signature_algorithm(name)?;
    let mut p = CryptographicParameters::default();
    let hash = |suffix: &str| match suffix {
        "sha384" => HashingAlgorithm::SHA384,
        "sha512" => HashingAlgorithm::SHA512,
        _ => HashingAlgorithm::SHA256,
    };
    if let Some(h) = name.strip_prefix("ecdsa-") {
        p.digital_signature_algorithm = Some(match h {
            "sha384" => Dsa::ECDSA_WITH_SHA384,
            "sha512" => Dsa::ECDSA_WITH_SHA512,
            _ => Dsa::ECDSA_WITH_SHA256,
        });
    } else if let Some(h) = name.strip_prefix("rsa-pss-") {
        p.cryptographic_algorithm = Some(CryptographicAlgorithm::RSA);
        p.padding_method = Some(PaddingMethod::PSS);
        p.hashing_algorithm = Some(hash(h));
    } else if let Some(h) = name.strip_prefix("rsa-pkcs1-") {
        p.digital_signature_algorithm = Some(match h {
            "sha384" => Dsa::SHA384_WITH_RSA,
            "sha512" => Dsa::SHA512_WITH_RSA,
            _ => Dsa::SHA256_WITH_RSA,
        });
    } else {
        p.cryptographic_algorithm = Some(CryptographicAlgorithm::ED25519);
    }
    Ok(p)
}

/// The algorithm a key signs with when none is named: ECDSA with its
/// curve's hash, RSA-PSS with SHA-256, Ed25519.
fn default_algorithm(object: Option<&KmipObject>) -> &'static str {
    let algorithm = object.and_then(|o| o.algorithm).map(CryptographicAlgorithm);
    match (algorithm, object.and_then(|o| o.length)) {
        (Some(CryptographicAlgorithm::RSA), _) => "rsa-pss-sha256",
        (Some(CryptographicAlgorithm::ED25519), _) => "ed25519",
        (_, Some(384)) => "ecdsa-sha384",
        (_, Some(521)) => "ecdsa-sha512",
        _ => "ecdsa-sha256",
    }
}

/// What is signed or verified: the message, or the caller's digest of it.
pub(crate) enum SignInput {
    Message(Vec<u8>),
    Digest(Vec<u8>),
}

/// A signature made, or a verdict.
pub(crate) struct Signed {
    /// The version of the key that signed or verified (and for `verify`
    /// of a private key's name, the public key used, as `NAME/VERSION`).
    pub version: u32,
    pub used: String,
    pub algorithm: &'static str,
    pub signature: Vec<u8>,
    pub valid: bool,
}

fn sign_request(uid: String, params: CryptographicParameters, input: SignInput) -> SignRequest {
    let (data, digested_data) = match input {
        SignInput::Message(m) => (Some(Bytes::new(m)), None),
        SignInput::Digest(d) => (None, Some(Bytes::new(d))),
    };
    SignRequest {
        unique_identifier: Some(uid),
        parameters: Some(params),
        data,
        digested_data,
        signature: None,
    }
}

fn kmip_session<'a>(
    state: &'a State,
    client: &'a ClientInfo,
    streams: &'a mut Streams,
) -> Session<'a> {
    Session {
        state,
        client,
        version: ProtocolVersion::V2_1,
        placeholder: None,
        touched: None,
        note: None,
        streams,
        undo: None,
    }
}

fn find(items: &[Item], tag: Tag) -> Result<&Item> {
    items
        .iter()
        .find(|i| i.tag == tag)
        .ok_or_else(|| KmsError::Crypto(format!("the signing answer has no {tag:?}")))
}

/// Signs with key `name` (a private key) as `client`: KMIP Sign.
pub(crate) async fn sign(
    state: &State,
    client: &ClientInfo,
    name: &str,
    algorithm: Option<&str>,
    input: SignInput,
    version: &mut Option<u32>,
    known: &mut bool,
) -> Result<Signed> {
    if let Some(a) = algorithm {
        check_signature_algorithm(a)?;
    }
    let Visible { object, version: v, .. } = visible(state, client, name, version, known).await?;
    let algorithm = match algorithm {
        Some(a) => SIGNATURE_ALGORITHMS.iter().copied().find(|x| *x == a).unwrap_or("ed25519"),
        None => default_algorithm(object.as_ref()),
    };
    let request = sign_request(unique_identifier(name, v), parameters(algorithm)?, input);
    let mut streams = Streams::default();
    let items =
        kmip_session(state, client, &mut streams).sign(&request).await.map_err(from_kmip)?;
    let signature = find(&items, Tag::SIGNATURE_DATA)?
        .as_bytes()
        .map_err(|e| KmsError::Crypto(e.to_string()))?
        .to_vec();
    Ok(Signed { version: v, used: unique_identifier(name, v), algorithm, signature, valid: true })
}

/// Checks `signature` with key `name` as `client`: KMIP Signature Verify
/// with the key itself when it is a public key, with its linked public
/// key when it is a private key.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn verify(
    state: &State,
    client: &ClientInfo,
    name: &str,
    algorithm: Option<&str>,
    input: SignInput,
    signature: Vec<u8>,
    version: &mut Option<u32>,
    known: &mut bool,
) -> Result<Signed> {
    if let Some(a) = algorithm {
        check_signature_algorithm(a)?;
    }
    let Visible { key, object, version: v } = visible(state, client, name, version, known).await?;
    let mut uid = unique_identifier(name, v);
    if object.as_ref().is_some_and(|o| o.object_type == ObjectType::PRIVATE_KEY.0) {
        let view = describe(state, key).await?;
        let public = view.object.public_key.ok_or_else(|| {
            KmsError::invalid(format!("private key {name} has no linked public key to verify with"))
        })?;
        let public_key = get_key(state, &public).await?;
        uid = unique_identifier(&public, public_key.latest().map_or(1, |v| v.version));
    }
    let algorithm = match algorithm {
        Some(a) => SIGNATURE_ALGORITHMS.iter().copied().find(|x| *x == a).unwrap_or("ed25519"),
        None => default_algorithm(object.as_ref()),
    };
    let mut request = sign_request(uid.clone(), parameters(algorithm)?, input);
    request.signature = Some(signature);
    let mut streams = Streams::default();
    let items = kmip_session(state, client, &mut streams)
        .signature_verify(&request)
        .await
        .map_err(from_kmip)?;
    let validity = find(&items, Tag::VALIDITY_INDICATOR)?
        .as_enum()
        .map_err(|e| KmsError::Crypto(e.to_string()))?;
    Ok(Signed {
        version: version.unwrap_or(1),
        used: uid,
        algorithm,
        signature: Vec::new(),
        valid: validity == ValidityIndicator::VALID.0,
    })
}

/// `der` as PEM with `label` (`PUBLIC KEY`, `CERTIFICATE`, `PRIVATE KEY`).
pub(crate) fn pem(label: &str, der: &[u8]) -> Zeroizing<String> {
    let encoded = Zeroizing::new(B64.encode(der));
    let mut out = Zeroizing::new(String::with_capacity(encoded.len() + encoded.len() / 64 + 64));
    out.push_str("-----BEGIN ");
    out.push_str(label);
    out.push_str("-----\n");
    for line in encoded.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).unwrap_or_default());
        out.push('\n');
    }
    out.push_str("-----END ");
    out.push_str(label);
    out.push_str("-----\n");
    out
}

/// The stored material of key `name` version `version` (the object's
/// stored form: PKCS#8, SubjectPublicKeyInfo, a certificate's DER...).
async fn material(state: &State, name: &str, version: u32) -> Result<SecretBytes> {
    let root = state.require_root()?;
    let row = state
        .store
        .key_material(name.to_owned(), Some(version))
        .await?
        .ok_or_else(|| KmsError::NotFound(format!("key {name} version {version}")))?;
    let blob = row
        .material
        .as_deref()
        .ok_or_else(|| KmsError::KeyDestroyed { name: name.to_owned(), version })?;
    root.open_material(name, version, blob)
}

/// The SubjectPublicKeyInfo of a certificate's DER.
fn certificate_spki(der: &[u8]) -> Result<Vec<u8>> {
    let (_, cert) = x509_parser::parse_x509_certificate(der)
        .map_err(|_| KmsError::Corrupt("a stored certificate does not parse".into()))?;
    Ok(cert.tbs_certificate.subject_pki.raw.to_vec())
}

/// A public key, as `GET /v1/keys/{name}/public` answers it.
pub(crate) struct PublicKeyPem {
    /// The object that holds it (`NAME/VERSION`).
    pub object: String,
    pub pem: String,
}

/// The public key of key `name` for `client` (who must see it): its own
/// material for a public key, the linked public key's for a private key,
/// the certified key for a certificate.
pub(crate) async fn public_key(
    state: &State,
    client: &ClientInfo,
    name: &str,
    version: &mut Option<u32>,
    known: &mut bool,
) -> Result<PublicKeyPem> {
    let found = visible(state, client, name, version, known).await?;
    let object_type = found.object_type();
    let Visible { key, version: v, .. } = found;
    match object_type {
        ObjectType::PUBLIC_KEY => {
            let spki = material(state, name, v).await?;
            Ok(PublicKeyPem { object: unique_identifier(name, v), pem: pem("PUBLIC KEY", spki.expose()).to_string() })
        }
        ObjectType::CERTIFICATE => {
            let der = material(state, name, v).await?;
            let spki = certificate_spki(der.expose())?;
            Ok(PublicKeyPem { object: unique_identifier(name, v), pem: pem("PUBLIC KEY", &spki).to_string() })
        }
        ObjectType::PRIVATE_KEY => {
            let view = describe(state, key).await?;
            let public = view.object.public_key.ok_or_else(|| {
                KmsError::invalid(format!("private key {name} has no linked public key"))
            })?;
            let public_key = get_key(state, &public).await?;
            access::require_visible(client, &public, &public_key.allow)?;
            let pv = public_key.latest().map_or(1, |v| v.version);
            let spki = material(state, &public, pv).await?;
            Ok(PublicKeyPem { object: unique_identifier(&public, pv), pem: pem("PUBLIC KEY", spki.expose()).to_string() })
        }
        other => Err(KmsError::invalid(format!(
            "key {name} is a {}: only a private key, a public key or a certificate has a public key",
            type_name(other)
        ))),
    }
}

/// A certificate's DER from the text a client sent: PEM
/// (`-----BEGIN CERTIFICATE-----`) or base64 of the DER.
pub(crate) fn certificate_der(text: &str) -> Result<Vec<u8>> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(KmsError::invalid("the certificate is empty"));
    }
    if trimmed.starts_with("-----BEGIN") {
        use rustls_pki_types::pem::PemObject;
        let der = rustls_pki_types::CertificateDer::from_pem_slice(trimmed.as_bytes())
            .map_err(|_| KmsError::invalid("the certificate is not a PEM CERTIFICATE"))?;
        return Ok(der.to_vec());
    }
    B64.decode(trimmed.as_bytes())
        .map_err(|_| KmsError::invalid("the certificate is neither PEM nor base64 DER"))
}

/// Registers an X.509 certificate as key `name` (a KMIP Certificate
/// object, active from now), allowed to `allow`: `None` for the name
/// draws one (`cert-` and random hex).
pub(crate) async fn register_certificate(
    state: &State,
    client: &ClientInfo,
    name: Option<String>,
    der: Vec<u8>,
    allow: &[String],
) -> Result<KeyView> {
    let name = match name {
        Some(name) => {
            check_name("certificate name", &name)?;
            name
        }
        None => {
            let mut random = [0u8; 8];
            rampart_crypto::fill_random(&mut random)
                .map_err(|e| KmsError::Crypto(e.to_string()))?;
            format!("cert-{}", hex::encode(random))
        }
    };
    let allow = parse_policy(allow)?;
    let mut new = NewObject { activation_ms: Some(now_ms()), ..NewObject::default() };
    new.stored.push(name_row(&name).map_err(from_kmip)?);
    new.registered_format = Some(rampart_kmip::enums::KeyFormatType::X509);
    let cert = Certificate { certificate_type: CertificateType::X509, value: Bytes::new(der) };
    let material = certificate_object(&cert, &mut new).map_err(from_kmip)?;
    let made =
        new_kmip_key(state, client, &name, ObjectType::CERTIFICATE, new, &material, allow, true)
            .map_err(from_kmip)?;
    state.store.kmip_create_key(made.key, made.material, made.object, made.attributes).await?;
    describe(state, get_key(state, &name).await?).await
}

/// A certificate, as `GET /v1/certificates/{name}` answers it.
pub(crate) struct CertificatePem {
    pub view: KeyView,
    pub pem: String,
    pub subject: String,
    pub issuer: String,
    pub not_after: String,
}

/// Certificate `name` for `client` (who must see it).
pub(crate) async fn certificate(
    state: &State,
    client: &ClientInfo,
    name: &str,
    version: &mut Option<u32>,
    known: &mut bool,
) -> Result<CertificatePem> {
    let found = visible(state, client, name, version, known).await?;
    let object_type = found.object_type();
    let Visible { key, version: v, .. } = found;
    if object_type != ObjectType::CERTIFICATE {
        return Err(KmsError::invalid(format!(
            "key {name} is a {}, not a certificate",
            type_name(object_type)
        )));
    }
    let der = material(state, name, v).await?;
    let (_, cert) = x509_parser::parse_x509_certificate(der.expose())
        .map_err(|_| KmsError::Corrupt("a stored certificate does not parse".into()))?;
    let tbs = &cert.tbs_certificate;
    let (subject, issuer) = (tbs.subject.to_string(), tbs.issuer.to_string());
    let not_after = tbs.validity.not_after.to_string();
    Ok(CertificatePem {
        view: describe(state, key).await?,
        pem: pem("CERTIFICATE", der.expose()).to_string(),
        subject,
        issuer,
        not_after,
    })
}

/// The label and form of an exported object's material: PEM for a
/// private key (PKCS#8), a public key (SubjectPublicKeyInfo) and a
/// certificate; the raw bytes for the rest.
pub(crate) fn export_form(object_type: Option<u32>) -> (&'static str, Option<&'static str>) {
    match object_type.map(ObjectType) {
        Some(ObjectType::PRIVATE_KEY) => ("pkcs8", Some("PRIVATE KEY")),
        Some(ObjectType::PUBLIC_KEY) => ("spki", Some("PUBLIC KEY")),
        Some(ObjectType::CERTIFICATE) => ("x509", Some("CERTIFICATE")),
        _ => ("raw", None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pem_wraps_base64_at_64_columns() {
        let text = pem("PUBLIC KEY", &[7u8; 100]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "-----BEGIN PUBLIC KEY-----");
        assert_eq!(lines[1].len(), 64);
        assert_eq!(lines.last().copied(), Some("-----END PUBLIC KEY-----"));
        let body: String = lines[1..lines.len() - 1].concat();
        assert_eq!(B64.decode(body).unwrap(), vec![7u8; 100]);
    }

    #[test]
    fn every_signature_algorithm_has_kmip_parameters() {
        for name in SIGNATURE_ALGORITHMS {
            let p = parameters(name).unwrap();
            let named =
                p.digital_signature_algorithm.is_some() || p.cryptographic_algorithm.is_some();
            assert!(named, "{name}");
        }
        let pss = parameters("rsa-pss-sha384").unwrap();
        assert_eq!(pss.padding_method, Some(PaddingMethod::PSS));
        assert_eq!(pss.hashing_algorithm, Some(HashingAlgorithm::SHA384));
        assert_eq!(
            parameters("ecdsa-sha512").unwrap().digital_signature_algorithm,
            Some(Dsa::ECDSA_WITH_SHA512)
        );
        assert_eq!(parameters("nope").unwrap_err().status(), 400);
    }

    #[test]
    fn kmip_errors_become_client_errors_not_server_errors() {
        let cases = [
            (KmipError::ItemNotFound("x".into()), 404),
            (KmipError::PermissionDenied("x".into()), 403),
            (KmipError::WrongKeyLifecycleState("x".into()), 403),
            (KmipError::IncompatibleCryptographicUsageMask("x".into()), 403),
            (KmipError::InvalidObjectType("x".into()), 400),
            (KmipError::InvalidField("x".into()), 400),
            (KmipError::CryptographicFailure("x".into()), 400),
            (KmipError::NonUniqueName("x".into()), 409),
        ];
        for (error, status) in cases {
            let text = error.to_string();
            assert_eq!(from_kmip(error).status(), status, "{text}");
        }
    }
}
