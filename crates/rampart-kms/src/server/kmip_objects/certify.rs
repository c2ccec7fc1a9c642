//! Certify and Re-certify (KMIP 1.4 §4.7, §4.8; 2.1 §6.1.6, §6.1.45): the
//! request's certificate request read and its self-signature checked, the
//! public key or certificate named loaded with the access checks every
//! operation makes; the certificate is issued, stored and linked by the
//! service (`service::certificates`).
//!
//! Certify takes a public key (by Unique Identifier or the ID
//! Placeholder), a PKCS#10 request (DER or PEM), or both, which must then
//! be for the same key; the request's subject, when there is one, is the
//! certificate's (it takes precedence over the attributes, §4.7), else
//! the public key's name is. Re-certify renews a certificate for the same
//! key, under the same subject unless a request gives another.

use rampart_kmip::enums::{CertificateRequestType, LinkType, ObjectType, State as KState};
use rampart_kmip::message::ProtocolVersion;
use rampart_kmip::payload::CertifyRequest;
use rampart_kmip::tag::Tag;
use rampart_kmip::ttlv::Item;
use rampart_kmip::KmipError;

use super::errors::R;
use super::lifecycle::replaceable;
use super::object::Obj;
use super::session::Session;
use crate::model::now_ms;
use crate::pki::{
    certificate_key, normalized_key, read_certificate_request, CertificateRequest, Subject,
};
use crate::server::service::certificates::{
    self, request_error, CertifiedKey, CertifySpec, RecertifySpec,
};
use crate::server::service::key_pairs::linked;

/// The PKCS#10 request a Certificate Request of `kind` carries, its
/// self-signature checked.
fn certificate_request(kind: CertificateRequestType, bytes: &[u8]) -> R<CertificateRequest> {
    let der = match kind {
        CertificateRequestType::PKCS10 => bytes.to_vec(),
        CertificateRequestType::PEM => {
            use rustls_pki_types::pem::PemObject;
            rustls_pki_types::CertificateSigningRequestDer::from_pem_slice(bytes)
                .map_err(|_| KmipError::InvalidCsr("not a PEM CERTIFICATE REQUEST block".into()))?
                .as_ref()
                .to_vec()
        }
        other => {
            return Err(KmipError::FeatureNotSupported(format!(
                "{other} certificate requests (PKCS#10 and PEM)"
            )))
        }
    };
    read_certificate_request(&der).map_err(request_error)
}

/// Refuses a request for another key than `spki`, the key certified.
fn check_same_key(request: &CertificateRequest, spki: &[u8], uid: &str) -> R<()> {
    if normalized_key(spki).map_err(request_error)? != request.spki {
        return Err(KmipError::InvalidCsr(format!(
            "the request is for another public key than object {uid}'s"
        )));
    }
    Ok(())
}

/// Refuses a Name among a replacement's attributes: the new object takes
/// the old one's (KMIP 1.4 §4.5, §4.8).
pub(super) fn refuse_names(names: usize, operation: &str) -> R<()> {
    if names > 0 {
        return Err(KmipError::FeatureNotSupported(format!(
            "a Name in {operation} (the new object takes the old one's Names)"
        )));
    }
    Ok(())
}

impl Session<'_> {
    /// A key the client may use, of `object_type`, that is neither
    /// destroyed nor compromised.
    async fn usable(&mut self, uid: &str, object_type: ObjectType, operation: &str) -> R<Obj> {
        let obj = self.load_with_attributes(uid).await?;
        self.require_use(&obj)?;
        if obj.object_type() != object_type {
            return Err(KmipError::InvalidObjectType(format!(
                "object {uid} is a {}, not a {object_type}: {operation} cannot take it",
                obj.object_type()
            )));
        }
        match obj.state(now_ms()) {
            KState::DESTROYED | KState::DESTROYED_COMPROMISED => {
                Err(KmipError::ObjectDestroyed(format!("object {uid}")))
            }
            KState::COMPROMISED => {
                Err(KmipError::WrongKeyLifecycleState(format!("object {uid} is compromised")))
            }
            _ => Ok(obj),
        }
    }

    /// The public key `obj` as the certificate service links it.
    fn certified_key(obj: &Obj) -> CertifiedKey {
        let version = obj.version.version;
        CertifiedKey {
            key: obj.key.name.clone(),
            version,
            links: obj
                .stored
                .iter()
                .filter(|r| r.name == "Link")
                .map(|r| r.value.clone())
                .collect(),
            // A version showing an older one's attributes gets its own.
            inherit: obj.source.filter(|s| *s != version).zip(obj.kmip.clone()),
        }
    }

    pub(super) async fn certify(&mut self, request: &CertifyRequest) -> R<Vec<Item>> {
        if request.offset.is_some() {
            return Err(KmipError::InvalidField(
                "an Offset in Certify (Re-certify takes one)".into(),
            ));
        }
        let csr = request.request.as_ref().map(|(k, b)| certificate_request(*k, b.as_slice()));
        let csr = csr.transpose()?;
        // KMIP 2.1 §6.1.6: with a request and no Unique Identifier, the
        // request alone is certified; KMIP 1.4 §4.7 names the placeholder.
        let from_placeholder = request.unique_identifier.is_none();
        let named = match &request.unique_identifier {
            Some(uid) => Some(uid.clone()),
            None if csr.is_none() || self.version < ProtocolVersion::V2_0 => {
                self.placeholder.clone()
            }
            None => None,
        };
        let public = match named {
            Some(mut uid) => {
                // After Create Key Pair the placeholder is the private key
                // (§4.2): its public key is the one to certify.
                if from_placeholder {
                    let obj = self.load_with_attributes(&uid).await?;
                    if obj.object_type() == ObjectType::PRIVATE_KEY {
                        if let Some(public) = linked(&obj.stored, LinkType::PUBLIC_KEY) {
                            uid = public;
                        }
                    }
                }
                Some(self.usable(&uid, ObjectType::PUBLIC_KEY, "Certify").await?)
            }
            None => None,
        };
        let asked = self.template(&request.attributes, ObjectType::CERTIFICATE).await?;
        let (spki, subject) = match (&public, csr) {
            (Some(obj), csr) => {
                let spki = self.material(obj).await?;
                let spki = normalized_key(spki.expose()).map_err(request_error)?;
                match csr {
                    Some(csr) => {
                        check_same_key(&csr, &spki, &obj.uid())?;
                        (spki, csr.subject)
                    }
                    None => (spki, Subject::named(&obj.key.name)),
                }
            }
            (None, Some(csr)) => (csr.spki, csr.subject),
            (None, None) => {
                return Err(KmipError::MissingData(
                    "the public key's Unique Identifier or a Certificate Request".into(),
                ))
            }
        };
        let name = self.key_name_for(&asked.names).await?;
        self.touched = Some((name.clone(), Some(1)));
        let spec = CertifySpec {
            name: name.clone(),
            asked,
            spki,
            subject,
            public_key: public.as_ref().map(Self::certified_key),
        };
        let uid = certificates::certify(self.state, self.client, spec).await?;
        self.made(&name);
        Ok(vec![Item::text(Tag::UNIQUE_IDENTIFIER, uid)])
    }

    pub(super) async fn recertify(&mut self, request: &CertifyRequest) -> R<Vec<Item>> {
        let uid = self.uid(request.unique_identifier.as_ref())?;
        let obj = self.load_with_attributes(&uid).await?;
        self.require_manage(&obj)?;
        if obj.object_type() != ObjectType::CERTIFICATE {
            return Err(KmipError::InvalidObjectType(format!(
                "object {uid} is a {}, not a Certificate",
                obj.object_type()
            )));
        }
        replaceable(&obj, &uid, "re-certify")?;
        let csr = request.request.as_ref().map(|(k, b)| certificate_request(*k, b.as_slice()));
        let csr = csr.transpose()?;
        let asked = self.template(&request.attributes, ObjectType::CERTIFICATE).await?;
        refuse_names(asked.names.len(), "Re-certify")?;
        let der = self.material(&obj).await?;
        let spki = certificate_key(der.expose()).map_err(request_error)?;
        let spki = normalized_key(&spki).map_err(request_error)?;
        let subject = match csr {
            Some(csr) => {
                check_same_key(&csr, &spki, &uid)?;
                csr.subject
            }
            None => Subject::of_certificate(der.expose()).map_err(request_error)?,
        };
        drop(der);
        // The public key the old certificate is linked to, when it is
        // still there, has its Certificate Link moved to the new one.
        let public = match linked(&obj.stored, LinkType::PUBLIC_KEY) {
            Some(public) => {
                match self.usable(&public, ObjectType::PUBLIC_KEY, "Re-certify").await {
                    Ok(key) => Some(Self::certified_key(&key)),
                    Err(
                        KmipError::ObjectNotFound(_)
                        | KmipError::ItemNotFound(_)
                        | KmipError::ObjectDestroyed(_),
                    ) => None,
                    Err(other) => return Err(other),
                }
            }
            None => None,
        };
        let template = obj.kmip.clone().ok_or_else(|| {
            KmipError::GeneralFailure("a certificate without a KMIP record".into())
        })?;
        let version = obj.version.version + 1;
        self.touched = Some((obj.key.name.clone(), Some(version)));
        let spec = RecertifySpec {
            key: obj.key.name.clone(),
            object: template,
            rows: obj.stored,
            asked,
            offset: request.offset,
            spki,
            subject,
            public_key: public,
        };
        let new_uid = certificates::recertify(self.state, spec).await?;
        Ok(vec![Item::text(Tag::UNIQUE_IDENTIFIER, new_uid)])
    }
}
