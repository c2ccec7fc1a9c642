//! Create Key Pair (KMIP 1.4 §4.2, 2.1 §6.1.4): a private key and its
//! public key, each its own object (a key of the key manager, named by
//! its own Name), created in one store transaction and linked to each
//! other by Private Key and Public Key Links (§3.35). The private key is
//! stored as PKCS#8, the public key as SubjectPublicKeyInfo; Get answers
//! in PKCS#8 and X.509 unless another format is asked for.

use rampart_crypto::{generate_key_pair, Curve, KeyAlg, KeyPairDer};
use rampart_kmip::enums::{usage_mask, CryptographicAlgorithm, LinkType, ObjectType};
use rampart_kmip::payload::{AttributeSet, CreateKeyPairRequest, Link};
use rampart_kmip::tag::Tag;
use rampart_kmip::ttlv::Item;
use rampart_kmip::KmipError;

use super::errors::{crypto, kms, R};
use super::object::{encode_value, unique_identifier};
use super::session::Session;

/// The key pairs Create Key Pair makes: RSA of 2048 to 4096 bits (larger
/// ones take too long to generate in a request), EC on P-256, P-384 and
/// P-521, and Ed25519.
fn key_kind(algorithm: CryptographicAlgorithm, length: Option<i32>) -> R<(KeyAlg, u32)> {
    let unsupported = || {
        KmipError::InvalidField(format!(
            "no {algorithm} key pair of {} bits (RSA: 2048, 3072, 4096; EC: 256, 384, 521; \
             Ed25519)",
            length.map_or_else(|| "unspecified".to_owned(), |l| l.to_string())
        ))
    };
    match algorithm {
        CryptographicAlgorithm::RSA => match length {
            Some(l @ (2048 | 3072 | 4096)) => Ok((KeyAlg::Rsa, l.unsigned_abs())),
            None => Err(KmipError::MissingData("the Cryptographic Length of the RSA key".into())),
            _ => Err(unsupported()),
        },
        CryptographicAlgorithm::EC | CryptographicAlgorithm::ECDSA => match length {
            Some(256) => Ok((KeyAlg::Ec(Curve::P256), 256)),
            Some(384) => Ok((KeyAlg::Ec(Curve::P384), 384)),
            Some(521) => Ok((KeyAlg::Ec(Curve::P521), 521)),
            None => Err(KmipError::MissingData("the Cryptographic Length of the EC key".into())),
            _ => Err(unsupported()),
        },
        CryptographicAlgorithm::ED25519 => match length {
            None | Some(255 | 256) => Ok((KeyAlg::Ed25519, 256)),
            _ => Err(unsupported()),
        },
        other => Err(KmipError::InvalidField(format!("Create Key Pair of {other} keys"))),
    }
}

fn merged(common: &AttributeSet, own: &AttributeSet) -> AttributeSet {
    AttributeSet(common.0.iter().chain(&own.0).cloned().collect())
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

fn link(link_type: LinkType, to: &str) -> R<(String, String)> {
    let value = Link { link_type, linked_object: to.to_owned() }.to_value(Tag::ATTRIBUTE_VALUE);
    Ok(("Link".to_owned(), encode_value("Link", &value)?))
}

impl Session<'_> {
    pub(super) async fn create_key_pair(&mut self, request: &CreateKeyPairRequest) -> R<Vec<Item>> {
        let mut private = self
            .template(&merged(&request.common, &request.private), ObjectType::PRIVATE_KEY)
            .await?;
        let mut public = self
            .template(&merged(&request.common, &request.public), ObjectType::PUBLIC_KEY)
            .await?;
        let algorithm = agreed("Cryptographic Algorithm", private.algorithm, public.algorithm)?
            .map(CryptographicAlgorithm)
            .ok_or_else(|| {
                KmipError::MissingData("the Cryptographic Algorithm attribute".into())
            })?;
        let length = agreed("Cryptographic Length", private.length, public.length)?;
        let (kind, bits) = key_kind(algorithm, length)?;
        for (new, mask) in [(&mut private, usage_mask::SIGN), (&mut public, usage_mask::VERIFY)] {
            new.algorithm = Some(algorithm.0);
            new.length = Some(i32::try_from(bits).unwrap_or(i32::MAX));
            new.usage_mask.get_or_insert(mask);
        }
        let private_name = self.key_name_for(&private.names).await?;
        let public_name = self.key_name_for(&public.names).await?;
        if private_name == public_name {
            return Err(KmipError::NonUniqueName(format!(
                "both keys of the pair are named {private_name}"
            )));
        }
        let private_uid = unique_identifier(&private_name, 1);
        let public_uid = unique_identifier(&public_name, 1);
        private.stored.push(link(LinkType::PUBLIC_KEY, &public_uid)?);
        public.stored.push(link(LinkType::PRIVATE_KEY, &private_uid)?);
        // RSA generation takes a while: off the connection's thread.
        let KeyPairDer { private_pkcs8: pkcs8, public_spki: spki } =
            tokio::task::spawn_blocking(move || generate_key_pair(kind, bits))
                .await
                .map_err(|_| KmipError::GeneralFailure("key pair generation stopped".into()))?
                .map_err(crypto)?;
        // Get answers in PKCS#8 and X.509 (the stored forms).
        private.secret_type = None;
        public.secret_type = None;
        let spki = rampart_crypto::SecretBytes::new(spki);
        let keys = vec![
            self.new_key(&private_name, ObjectType::PRIVATE_KEY, private, &pkcs8)?,
            self.new_key(&public_name, ObjectType::PUBLIC_KEY, public, &spki)?,
        ];
        self.state.store.kmip_create_keys(keys).await.map_err(kms)?;
        self.made(&private_name);
        self.made(&public_name);
        self.touched = Some((private_name, Some(1)));
        // §4.2: the ID Placeholder is the private key's Unique Identifier.
        self.placeholder = Some(private_uid.clone());
        Ok(vec![
            Item::text(Tag::PRIVATE_KEY_UNIQUE_IDENTIFIER, private_uid),
            Item::text(Tag::PUBLIC_KEY_UNIQUE_IDENTIFIER, public_uid),
        ])
    }
}
