//! Key pairs: the one Create Key Pair under KMIP's operation and the REST
//! API's `POST /v1/keys` with an asymmetric `type`. A pair is a private
//! key and its public key, each its own key of the key manager (named by
//! its own name, version 1), created in one store transaction and linked
//! to each other by KMIP Private Key and Public Key Links (KMIP 1.4
//! §3.35). The private key is stored as PKCS#8, the public key as
//! SubjectPublicKeyInfo; both get the attributes the server sets on every
//! object it generates (Digest, Fresh...), so a KMIP client sees a pair
//! the REST API made exactly as one it made itself.

use rampart_crypto::{generate_key_pair, Curve, KeyAlg, KeyPairDer, SecretBytes};
use rampart_kmip::enums::{usage_mask, CryptographicAlgorithm, LinkType, NameType, ObjectType};
use rampart_kmip::payload::{Link, Name};
use rampart_kmip::tag::Tag;
use rampart_kmip::KmipError;

use crate::model::{ClientInfo, Selector};
use crate::server::kmip_objects::{encode_value, new_kmip_key, unique_identifier, NewObject};
use crate::server::state::State;

/// The key pairs this server makes: RSA of 2048 to 4096 bits (larger
/// ones take too long to generate in a request), EC on P-256, P-384 and
/// P-521, and Ed25519; `length` as a KMIP template gives it.
pub(crate) fn pair_kind(
    algorithm: CryptographicAlgorithm,
    length: Option<i32>,
) -> Result<(KeyAlg, u32), KmipError> {
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

/// The key types `POST /v1/keys` takes, by their REST names.
pub(crate) const KEY_TYPES: [&str; 8] =
    ["aes-256", "rsa-2048", "rsa-3072", "rsa-4096", "ec-p256", "ec-p384", "ec-p521", "ed25519"];

/// The KMIP algorithm and length of a REST key type; `None` for
/// `aes-256` (a symmetric key of the REST API's own).
pub(crate) fn rest_key_type(
    name: &str,
) -> crate::error::Result<Option<(CryptographicAlgorithm, i32)>> {
    Ok(Some(match name {
        "aes-256" => return Ok(None),
        "rsa-2048" => (CryptographicAlgorithm::RSA, 2048),
        "rsa-3072" => (CryptographicAlgorithm::RSA, 3072),
        "rsa-4096" => (CryptographicAlgorithm::RSA, 4096),
        "ec-p256" => (CryptographicAlgorithm::EC, 256),
        "ec-p384" => (CryptographicAlgorithm::EC, 384),
        "ec-p521" => (CryptographicAlgorithm::EC, 521),
        "ed25519" => (CryptographicAlgorithm::ED25519, 256),
        other => {
            let shown: String = other.chars().take(40).filter(|c| !c.is_control()).collect();
            return Err(crate::error::KmsError::invalid(format!(
                "unknown key type '{shown}' (one of {})",
                KEY_TYPES.join(", ")
            )));
        }
    }))
}

/// The REST name of a key pair's type (see [`KEY_TYPES`]).
pub(crate) fn rest_type_name(algorithm: u32, length: Option<i32>) -> Option<&'static str> {
    Some(match (CryptographicAlgorithm(algorithm), length?) {
        (CryptographicAlgorithm::RSA, 2048) => "rsa-2048",
        (CryptographicAlgorithm::RSA, 3072) => "rsa-3072",
        (CryptographicAlgorithm::RSA, 4096) => "rsa-4096",
        (CryptographicAlgorithm::EC | CryptographicAlgorithm::ECDSA, 256) => "ec-p256",
        (CryptographicAlgorithm::EC | CryptographicAlgorithm::ECDSA, 384) => "ec-p384",
        (CryptographicAlgorithm::EC | CryptographicAlgorithm::ECDSA, 521) => "ec-p521",
        (CryptographicAlgorithm::ED25519, _) => "ed25519",
        (CryptographicAlgorithm::AES, 256) => "aes-256",
        _ => return None,
    })
}

/// The name the REST API gives the public key of pair `name`.
pub(crate) fn public_name(name: &str) -> String {
    format!("{name}.pub")
}

/// A pair to create: the two keys' names and template fields, the
/// algorithm and length asked for, and the policy (`None`: allowed to
/// the creating client only, as every object KMIP makes). `exportable`
/// is the private key's; the public key is always exportable.
pub(crate) struct PairSpec {
    pub private_name: String,
    pub public_name: String,
    pub private: NewObject,
    pub public: NewObject,
    pub algorithm: CryptographicAlgorithm,
    pub length: Option<i32>,
    pub allow: Option<Vec<Selector>>,
    pub exportable: bool,
}

fn link(link_type: LinkType, to: &str) -> Result<(String, String), KmipError> {
    let value = Link { link_type, linked_object: to.to_owned() }.to_value(Tag::ATTRIBUTE_VALUE);
    Ok(("Link".to_owned(), encode_value("Link", &value)?))
}

/// A stored Name attribute (an uninterpreted text string).
pub(crate) fn name_row(name: &str) -> Result<(String, String), KmipError> {
    let value = Name { value: name.to_owned(), name_type: NameType::UNINTERPRETED_TEXT_STRING }
        .to_value(Tag::ATTRIBUTE_VALUE);
    Ok(("Name".to_owned(), encode_value("Name", &value)?))
}

/// Generates and stores the pair `spec` describes, made by `client`: the
/// Unique Identifiers of the private and the public key.
pub(crate) async fn create_key_pair(
    state: &State,
    client: &ClientInfo,
    spec: PairSpec,
) -> Result<(String, String), KmipError> {
    let PairSpec {
        private_name,
        public_name,
        mut private,
        mut public,
        algorithm,
        length,
        allow,
        exportable,
    } = spec;
    let (kind, bits) = pair_kind(algorithm, length)?;
    if private_name == public_name {
        return Err(KmipError::NonUniqueName(format!(
            "both keys of the pair are named {private_name}"
        )));
    }
    for (new, mask) in [(&mut private, usage_mask::SIGN), (&mut public, usage_mask::VERIFY)] {
        new.algorithm = Some(algorithm.0);
        new.length = Some(i32::try_from(bits).unwrap_or(i32::MAX));
        new.usage_mask.get_or_insert(mask);
        // Get answers in PKCS#8 and X.509 (the stored forms).
        new.secret_type = None;
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
            .map_err(|e| KmipError::CryptographicFailure(e.to_string()))?;
    let spki = SecretBytes::new(spki);
    let allow = allow.unwrap_or_else(|| vec![Selector::Client(client.name.clone())]);
    let keys = vec![
        new_kmip_key(
            state,
            client,
            &private_name,
            ObjectType::PRIVATE_KEY,
            private,
            &pkcs8,
            allow.clone(),
            exportable,
        )?,
        new_kmip_key(
            state,
            client,
            &public_name,
            ObjectType::PUBLIC_KEY,
            public,
            &spki,
            allow,
            // A public key is public: Get and export give it whatever
            // the private key's policy (KMIP Extractable).
            true,
        )?,
    ];
    state.store.kmip_create_keys(keys).await.map_err(crate::server::kmip_objects::kms_error)?;
    Ok((private_uid, public_uid))
}
