//! Create Key Pair (KMIP 1.4 §4.2, 2.1 §6.1.4): the templates parsed
//! into the two keys' fields and names; the pair is made, linked and
//! stored by the service (`service::key_pairs`), which the REST API's
//! key pairs share.

use rampart_kmip::enums::{CryptographicAlgorithm, ObjectType};
use rampart_kmip::payload::{AttributeSet, CreateKeyPairRequest};
use rampart_kmip::tag::Tag;
use rampart_kmip::ttlv::Item;
use rampart_kmip::KmipError;

use super::errors::R;
use super::session::Session;
use crate::server::service::key_pairs::{self, PairSpec};

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
        let spec = PairSpec {
            private_name,
            public_name,
            private,
            public,
            algorithm,
            length,
            allow: None,
            exportable: true,
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
}
