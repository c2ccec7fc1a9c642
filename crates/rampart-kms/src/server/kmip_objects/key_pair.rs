//! Create Key Pair (KMIP 1.4 §4.2, 2.1 §6.1.4) and Re-key Key Pair
//! (§4.5, 2.1 §6.1.47): the templates parsed into the two keys' fields
//! and names, the pair to replace loaded with the checks Re-key makes;
//! the pair is made, linked and stored by the service
//! (`service::key_pairs`), which the REST API's key pairs share.

use rampart_kmip::enums::{CryptographicAlgorithm, LinkType, ObjectType};
use rampart_kmip::payload::{AttributeSet, CreateKeyPairRequest, ReKeyKeyPairRequest};
use rampart_kmip::tag::Tag;
use rampart_kmip::ttlv::Item;
use rampart_kmip::KmipError;

use super::certify::refuse_names;
use super::errors::R;
use super::lifecycle::replaceable;
use super::object::Obj;
use super::session::Session;
use crate::server::service::key_pairs::{self, PairReplacement, PairSpec, ReplacedHalf};

/// One half's attributes: the common ones, then its own (which override
/// the common Templates' as they override their own Templates').
fn merged(common: &AttributeSet, own: &AttributeSet) -> AttributeSet {
    AttributeSet {
        attributes: common.attributes.iter().chain(&own.attributes).cloned().collect(),
        templates: common.templates.iter().chain(&own.templates).cloned().collect(),
    }
}

/// One value of the two halves' attribute: they must agree.
fn agreed<T: PartialEq + Copy>(name: &str, a: Option<T>, b: Option<T>) -> R<Option<T>> {
    match (a, b) {
        (Some(x), Some(y)) if x != y => Err(KmipError::InvalidField(format!(
            "the private and public key templates give different {name}s"
        ))),
        (x, y) => Ok(x.or(y)),
    }
}

impl Session<'_> {
    pub(super) async fn create_key_pair(&mut self, request: &CreateKeyPairRequest) -> R<Vec<Item>> {
        let private = self
            .template(&merged(&request.common, &request.private), ObjectType::PRIVATE_KEY)
            .await?;
        let public = self
            .template(&merged(&request.common, &request.public), ObjectType::PUBLIC_KEY)
            .await?;
        let algorithm = agreed("Cryptographic Algorithm", private.algorithm, public.algorithm)?
            .map(CryptographicAlgorithm)
            .ok_or_else(|| {
                KmipError::MissingData("the Cryptographic Algorithm attribute".into())
            })?;
        let length = agreed("Cryptographic Length", private.length, public.length)?;
        // Refused before any name is drawn.
        key_pairs::pair_kind(algorithm, length)?;
        let private_name = self.key_name_for(&private.names).await?;
        let public_name = self.key_name_for(&public.names).await?;
        self.touched = Some((private_name.clone(), Some(1)));
        let (made_private, made_public) = (private_name.clone(), public_name.clone());
        let exportable = private.extractable();
        let spec = PairSpec {
            private_name,
            public_name,
            private,
            public,
            algorithm,
            length,
            allow: None,
            exportable,
        };
        let (private_uid, public_uid) =
            key_pairs::create_key_pair(self.state, self.client, spec).await?;
        self.made(&made_private);
        self.made(&made_public);
        // §4.2: the ID Placeholder is the private key's Unique Identifier.
        self.placeholder = Some(private_uid.clone());
        Ok(vec![
            Item::text(Tag::PRIVATE_KEY_UNIQUE_IDENTIFIER, private_uid),
            Item::text(Tag::PUBLIC_KEY_UNIQUE_IDENTIFIER, public_uid),
        ])
    }

    /// A half of the pair Re-key Key Pair replaces, with the checks Re-key
    /// makes: the client may change it, it is the newest version of its
    /// key, neither destroyed nor compromised.
    async fn replaced_half(&mut self, uid: &str, object_type: ObjectType) -> R<Obj> {
        let obj = self.load_with_attributes(uid).await?;
        self.require_manage(&obj)?;
        if obj.object_type() != object_type {
            return Err(KmipError::InvalidObjectType(format!(
                "object {uid} is a {}, not a {object_type}",
                obj.object_type()
            )));
        }
        replaceable(&obj, uid, "re-key")?;
        Ok(obj)
    }

    pub(super) async fn rekey_key_pair(&mut self, request: &ReKeyKeyPairRequest) -> R<Vec<Item>> {
        let uid = self.uid(request.private_key_unique_identifier.as_ref())?;
        let private = self.replaced_half(&uid, ObjectType::PRIVATE_KEY).await?;
        let public_uid =
            key_pairs::linked(&private.stored, LinkType::PUBLIC_KEY).ok_or_else(|| {
                KmipError::IllegalOperation(format!(
                    "private key {uid} has no Public Key Link: it is not half of a pair"
                ))
            })?;
        let public = self.replaced_half(&public_uid, ObjectType::PUBLIC_KEY).await?;
        let asked = &request.attributes;
        let private_asked =
            self.template(&merged(&asked.common, &asked.private), ObjectType::PRIVATE_KEY).await?;
        let public_asked =
            self.template(&merged(&asked.common, &asked.public), ObjectType::PUBLIC_KEY).await?;
        refuse_names(private_asked.names.len() + public_asked.names.len(), "Re-key Key Pair")?;
        let (private_old, public_old) = match (private.kmip.clone(), public.kmip.clone()) {
            (Some(p), Some(q)) => (p, q),
            _ => return Err(KmipError::GeneralFailure("a key pair without KMIP records".into())),
        };
        // The old pair's algorithm and length unless the request asks for
        // others (KMIP 1.4 §4.5: as Create Key Pair would).
        let algorithm =
            agreed("Cryptographic Algorithm", private_asked.algorithm, public_asked.algorithm)?;
        let length = agreed("Cryptographic Length", private_asked.length, public_asked.length)?;
        let same = algorithm.is_none_or(|a| Some(a) == private_old.algorithm);
        let length = length.or(if same { private_old.length } else { None });
        let algorithm =
            algorithm.or(private_old.algorithm).map(CryptographicAlgorithm).ok_or_else(|| {
                KmipError::MissingData("the Cryptographic Algorithm of the new pair".into())
            })?;
        // Refused before anything is generated.
        key_pairs::pair_kind(algorithm, length)?;
        self.touched = Some((private.key.name.clone(), Some(private.version.version + 1)));
        let replacement = PairReplacement {
            private: ReplacedHalf {
                key: private.key.name.clone(),
                object: private_old,
                rows: private.stored,
                asked: private_asked,
            },
            public: ReplacedHalf {
                key: public.key.name.clone(),
                object: public_old,
                rows: public.stored,
                asked: public_asked,
            },
            algorithm,
            length,
            offset: request.offset,
        };
        let (private_uid, public_uid) = key_pairs::rekey_key_pair(self.state, replacement).await?;
        // §4.5: the ID Placeholder is the new private key's Unique Identifier.
        self.placeholder = Some(private_uid.clone());
        Ok(vec![
            Item::text(Tag::PRIVATE_KEY_UNIQUE_IDENTIFIER, private_uid),
            Item::text(Tag::PUBLIC_KEY_UNIQUE_IDENTIFIER, public_uid),
        ])
    }
}
