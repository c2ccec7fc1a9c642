//! Certificates the key manager issues: the deployment CA (loaded from the
//! store under the root key), and KMIP Certify and Re-certify (KMIP 1.4
//! §4.7, §4.8; 2.1 §6.1.6, §6.1.45). A certified key's certificate is
//! signed by the deployment CA and stored as a Certificate object exactly
//! as Register stores one (its attributes derived from its DER), linked
//! to the public key it certifies by a Public Key Link and from it by a
//! Certificate Link, in one store transaction. Re-certify adds a version
//! to the certificate's key, as Re-key adds one to a symmetric key, and
//! moves the public key's Certificate Link to it.

use rampart_kmip::enums::{CertificateType, KeyFormatType, LinkType, ObjectType};
use rampart_kmip::object_parts::Certificate;
use rampart_kmip::ttlv::Bytes;
use rampart_kmip::KmipError;

use crate::error::{KmsError, Result};
use crate::model::{now_ms, ClientInfo, Selector};
use crate::pki::{Authority, RequestError, Subject};
use crate::server::kmip_objects::{
    carried_rows, certificate_object, derived_from_certificate, kms_error, new_kmip_key,
    new_kmip_version, unique_identifier, NewObject,
};
use crate::server::service::key_pairs::{link, replacement_dates, with_asked};
use crate::server::state::State;
use crate::store::{meta, KmipAttributeRow, KmipAttributeValues, KmipChanges, KmipObject};

/// How long a certificate Certify or Re-certify issues is valid.
pub(crate) const CERTIFICATE_DAYS: i64 = 365;

/// The deployment CA and its certificate (PEM), its private key opened
/// under the root key for as long as the CA is held.
pub(crate) async fn authority(state: &State) -> Result<(Authority, String)> {
    let root = state.require_root()?;
    let missing = || KmsError::Corrupt("the store holds no CA".into());
    let ca_pem = String::from_utf8(state.store.get_meta(meta::CA_CERT).await?.ok_or_else(missing)?)
        .map_err(|_| KmsError::Corrupt("the CA certificate is not text".into()))?;
    let ca_key =
        root.open_ca_key(&state.store.get_meta(meta::CA_KEY).await?.ok_or_else(missing)?)?;
    let ca = Authority::load(&ca_pem, &ca_key)?;
    Ok((ca, ca_pem))
}

/// A refused certificate request or key as KMIP answers it: a request
/// that is not a signed one of its type is an Invalid CSR (KMIP 2.x; 1.x
/// clients get Invalid Field).
pub(crate) fn request_error(error: RequestError) -> KmipError {
    match error {
        RequestError::Invalid(why) => KmipError::InvalidCsr(why),
        RequestError::Unsupported(why) => KmipError::FeatureNotSupported(why),
        RequestError::Failed(why) => KmipError::GeneralFailure(why),
    }
}

/// The public key a certificate is issued for: its version, and its
/// stored Link values, to which the Certificate Link is added. A version
/// a REST rotation added shows an older one's attributes: `inherit` is
/// that version and this one's KMIP object, which it gets with its own
/// copy of them.
pub(crate) struct CertifiedKey {
    pub key: String,
    pub version: u32,
    pub links: Vec<String>,
    pub inherit: Option<(u32, KmipObject)>,
}

impl CertifiedKey {
    fn uid(&self) -> String {
        unique_identifier(&self.key, self.version)
    }

    /// Its Link values after a certificate change: the links to `replaced`
    /// (Re-certify's old certificate) go, a Certificate Link to `to` comes.
    fn relinked(
        &self,
        replaced: Option<&str>,
        to: &str,
    ) -> std::result::Result<KmipAttributeValues, KmipError> {
        let old = replaced.map(|uid| link(LinkType::CERTIFICATE, uid)).transpose()?;
        let mut values: Vec<String> = self
            .links
            .iter()
            .filter(|v| old.as_ref().is_none_or(|(_, o)| o != *v))
            .cloned()
            .collect();
        values.push(link(LinkType::CERTIFICATE, to)?.1);
        Ok(KmipAttributeValues {
            key: self.key.clone(),
            version: self.version,
            name: "Link".into(),
            values,
            inherit: self.inherit.clone(),
        })
    }
}

/// What Certify issues: the certificate's new key `name` with the
/// attributes the request gives it, for the public key `spki` under
/// `subject`, linked to the managed public key `public_key` when the
/// request names one.
pub(crate) struct CertifySpec {
    pub name: String,
    pub asked: NewObject,
    pub spki: Vec<u8>,
    pub subject: Subject,
    pub public_key: Option<CertifiedKey>,
}

/// Issues and stores the certificate `spec` describes, made by `client`
/// (allowed to it, as every object KMIP makes): its Unique Identifier.
pub(crate) async fn certify(
    state: &State,
    client: &ClientInfo,
    spec: CertifySpec,
) -> std::result::Result<String, KmipError> {
    let CertifySpec { name, mut asked, spki, subject, public_key } = spec;
    let (ca, _) = authority(state).await.map_err(kms_error)?;
    let der = ca.issue_for_key(&spki, &subject, CERTIFICATE_DAYS).map_err(request_error)?;
    drop(ca);
    let cert = Certificate { certificate_type: CertificateType::X509, value: Bytes::new(der) };
    let material = certificate_object(&cert, &mut asked)?;
    // Stored as Register stores a certificate: its Digest over the DER.
    asked.registered_format = Some(KeyFormatType::X509);
    let uid = unique_identifier(&name, 1);
    let mut changes = KmipChanges::default();
    if let Some(key) = &public_key {
        asked.stored.push(link(LinkType::PUBLIC_KEY, &key.uid())?);
        changes.attributes.push(key.relinked(None, &uid)?);
    }
    let allow = vec![Selector::Client(client.name.clone())];
    changes.keys.push(new_kmip_key(
        state,
        client,
        &name,
        ObjectType::CERTIFICATE,
        asked,
        &material,
        allow,
        true,
    )?);
    state.store.kmip_apply(changes).await.map_err(kms_error)?;
    Ok(uid)
}

/// What Re-certify replaces and issues: the certificate's key, the
/// version replaced with its KMIP object and stored attributes, what the
/// request asks of the new one, the key certified and its subject, and
/// the managed public key the old certificate is linked to.
pub(crate) struct RecertifySpec {
    pub key: String,
    pub object: KmipObject,
    pub rows: Vec<KmipAttributeRow>,
    pub asked: NewObject,
    pub offset: Option<u32>,
    pub spki: Vec<u8>,
    pub subject: Subject,
    pub public_key: Option<CertifiedKey>,
}

/// Issues the certificate replacing `spec`'s and stores it as the next
/// version of its key, the public key's Certificate Link moved to it:
/// its Unique Identifier.
pub(crate) async fn recertify(
    state: &State,
    spec: RecertifySpec,
) -> std::result::Result<String, KmipError> {
    let RecertifySpec { key, object: old, rows, asked, offset, spki, subject, public_key } = spec;
    let now = now_ms();
    let (activation, deactivation) = replacement_dates(&old, &asked, offset, now)?;
    let (ca, _) = authority(state).await.map_err(kms_error)?;
    let der = ca.issue_for_key(&spki, &subject, CERTIFICATE_DAYS).map_err(request_error)?;
    drop(ca);
    let cert = Certificate { certificate_type: CertificateType::X509, value: Bytes::new(der) };
    let mut derived =
        NewObject { certificate_type: asked.certificate_type, ..NewObject::default() };
    let material = certificate_object(&cert, &mut derived)?;
    let version = old.version + 1;
    let old_uid = unique_identifier(&key, old.version);
    let uid = unique_identifier(&key, version);
    // KMIP 1.4 §4.8: the new certificate keeps the old one's attributes
    // but those its own DER gives it.
    let kept = carried_rows(&rows)
        .into_iter()
        .filter(|(name, _)| !derived_from_certificate(name))
        .chain(derived.stored)
        .collect();
    let kept = with_asked(kept, asked.stored);
    let object = KmipObject {
        key,
        version,
        object_type: ObjectType::CERTIFICATE.0,
        algorithm: derived.algorithm,
        length: derived.length,
        usage_mask: asked.usage_mask.or(old.usage_mask),
        secret_type: Some(CertificateType::X509.0),
        owner: old.owner,
        activation_ms: activation,
        deactivation_ms: deactivation,
        compromise_occurrence_ms: None,
        compromised: false,
    };
    let mut changes = KmipChanges::default();
    changes.versions.push(new_kmip_version(
        state,
        object,
        kept,
        &material,
        Some(KeyFormatType::X509),
        now,
    )?);
    if let Some(key) = &public_key {
        changes.attributes.push(key.relinked(Some(&old_uid), &uid)?);
    }
    state.store.kmip_apply(changes).await.map_err(kms_error)?;
    Ok(uid)
}
