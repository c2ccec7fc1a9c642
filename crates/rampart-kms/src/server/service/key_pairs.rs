//! Key pairs: the one Create Key Pair under KMIP's operation and the REST
//! API's `POST /v1/keys` with an asymmetric `type`. A pair is a private
//! key and its public key, each its own key of the key manager (named by
//! its own name, version 1), created in one store transaction and linked
//! to each other by KMIP Private Key and Public Key Links (KMIP 1.4
//! §3.35). The private key is stored as PKCS#8, the public key as
//! SubjectPublicKeyInfo; both get the attributes the server sets on every
//! object it generates (Digest, Fresh...), so a KMIP client sees a pair
//! the REST API made exactly as one it made itself.
//!
//! Re-key Key Pair (KMIP 1.4 §4.5, 2.1 §6.1.47) replaces a pair as Re-key
//! replaces a symmetric key: each half gets a new version of its own key,
//! holding a new pair's half, linked to the version it replaces by the
//! Replaced and Replacement Object Links every version has, and to the
//! other new half by its Private or Public Key Link. The new versions
//! carry the old ones' client-set attributes and take their Names, and
//! both are added in one store transaction.

use rampart_crypto::{generate_key_pair, Curve, KeyAlg, KeyPairDer, SecretBytes};
use rampart_kmip::enums::{usage_mask, CryptographicAlgorithm, LinkType, NameType, ObjectType};
use rampart_kmip::payload::{Link, Name};
use rampart_kmip::tag::Tag;
use rampart_kmip::KmipError;

use crate::model::{now_ms, ClientInfo, Selector};
use crate::server::kmip_objects::{
    carried_rows, decode_value, encode_value, kms_error, new_kmip_key, new_kmip_version,
    single_valued, unique_identifier, NewObject,
};
use crate::server::state::State;
use crate::store::{KmipAttributeRow, KmipChanges, KmipObject, NewKmipVersion};

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

/// A stored Link attribute of `link_type` to object `to`.
pub(crate) fn link(link_type: LinkType, to: &str) -> Result<(String, String), KmipError> {
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
    let KeyPairDer { private_pkcs8: pkcs8, public_spki: spki } = generate(kind, bits).await?;
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

/// The stored Link attribute `value` (`None`: not a Link).
fn stored_link(value: &str) -> Option<Link> {
    Link::parse(&decode_value(value)?).ok()
}

/// The type of the stored Link attribute `value` (`None`: not a Link).
pub(crate) fn link_type_of(value: &str) -> Option<LinkType> {
    Some(stored_link(value)?.link_type)
}

/// The object the first stored Link of `link_type` among `rows` names.
pub(crate) fn linked(rows: &[KmipAttributeRow], link_type: LinkType) -> Option<String> {
    rows.iter()
        .filter(|r| r.name == "Link")
        .filter_map(|r| stored_link(&r.value))
        .find(|l| l.link_type == link_type)
        .map(|l| l.linked_object)
}

/// The Activation and Deactivation Dates of an object replacing one
/// dated `old` (Re-key Key Pair, Re-certify; KMIP 1.4 §4.5, §4.8): with
/// an Offset, active that many seconds after now and deactivated as long
/// after its activation as the old one was; without, the old one's dates,
/// or those the request's attributes give. An Offset with either date in
/// the attributes is an Invalid Message (§11.6, §11.9).
pub(crate) fn replacement_dates(
    old: &KmipObject,
    asked: &NewObject,
    offset: Option<u32>,
    now: i64,
) -> Result<(Option<i64>, Option<i64>), KmipError> {
    let dated = asked.activation_ms.is_some() || asked.deactivation_ms.is_some();
    match offset {
        Some(_) if dated => Err(KmipError::InvalidMessage(
            "an Offset with an Activation or Deactivation Date".into(),
        )),
        Some(seconds) => {
            let activation = now.saturating_add(i64::from(seconds).saturating_mul(1000));
            let deactivation = match (old.activation_ms, old.deactivation_ms) {
                (Some(at), Some(dt)) => Some(dt.saturating_add(activation.saturating_sub(at))),
                _ => None,
            };
            Ok((Some(activation), deactivation))
        }
        None => Ok((
            asked.activation_ms.or(old.activation_ms),
            asked.deactivation_ms.or(old.deactivation_ms),
        )),
    }
}

/// `kept` rows with the client-set attributes of a request's template
/// put in: one that takes one value replaces the old one's, any other is
/// added unless it is there already.
pub(crate) fn with_asked(
    mut kept: Vec<(String, String)>,
    asked: Vec<(String, String)>,
) -> Vec<(String, String)> {
    for (name, value) in asked {
        if single_valued(&name) {
            kept.retain(|(n, _)| *n != name);
        } else if kept.iter().any(|(n, v)| *n == name && *v == value) {
            continue;
        }
        kept.push((name, value));
    }
    kept
}

/// One half of the pair Re-key Key Pair replaces: its key, the version
/// replaced with its KMIP object and stored attributes, and what the
/// request asks of the new half instead (usage mask, dates, client-set
/// attributes).
pub(crate) struct ReplacedHalf {
    pub key: String,
    pub object: KmipObject,
    pub rows: Vec<KmipAttributeRow>,
    pub asked: NewObject,
}

/// The pair Re-key Key Pair replaces and the new pair's algorithm,
/// length and Offset.
pub(crate) struct PairReplacement {
    pub private: ReplacedHalf,
    pub public: ReplacedHalf,
    pub algorithm: CryptographicAlgorithm,
    pub length: Option<i32>,
    pub offset: Option<u32>,
}

/// The version replacing `half`: dated `dates`, holding `material`,
/// linked to the other new half by `link_to`, of the new pair's
/// (algorithm, length) made at `now`.
fn new_half(
    state: &State,
    half: ReplacedHalf,
    (activation, deactivation): (Option<i64>, Option<i64>),
    material: &SecretBytes,
    link_to: (LinkType, &str),
    (algorithm, length, now): (CryptographicAlgorithm, i32, i64),
) -> Result<NewKmipVersion, KmipError> {
    let ReplacedHalf { key, object: old, rows, asked } = half;
    // The old half's links to its other half and to its certificates are
    // not the new half's: the new halves link to each other.
    let kept = carried_rows(&rows)
        .into_iter()
        .filter(|(name, value)| {
            name != "Link"
                || !matches!(
                    link_type_of(value),
                    Some(LinkType::PUBLIC_KEY | LinkType::PRIVATE_KEY | LinkType::CERTIFICATE)
                )
        })
        .collect();
    let mut kept = with_asked(kept, asked.stored);
    kept.push(link(link_to.0, link_to.1)?);
    let object = KmipObject {
        key,
        version: old.version + 1,
        object_type: old.object_type,
        algorithm: Some(algorithm.0),
        length: Some(length),
        usage_mask: asked.usage_mask.or(old.usage_mask),
        // Get answers in PKCS#8 and X.509 (the stored forms).
        secret_type: None,
        owner: old.owner,
        activation_ms: activation,
        deactivation_ms: deactivation,
        compromise_occurrence_ms: None,
        compromised: false,
    };
    new_kmip_version(state, object, kept, material, None, now)
}

/// Generates the pair replacing `pair` and stores it, each half a new
/// version of its key: the Unique Identifiers of the new private and
/// public key.
pub(crate) async fn rekey_key_pair(
    state: &State,
    pair: PairReplacement,
) -> Result<(String, String), KmipError> {
    let PairReplacement { private, public, algorithm, length, offset } = pair;
    let (kind, bits) = pair_kind(algorithm, length)?;
    let now = now_ms();
    let private_uid = unique_identifier(&private.key, private.object.version + 1);
    let public_uid = unique_identifier(&public.key, public.object.version + 1);
    // Checked before the (slow) generation.
    let dates = [
        replacement_dates(&private.object, &private.asked, offset, now)?,
        replacement_dates(&public.object, &public.asked, offset, now)?,
    ];
    let KeyPairDer { private_pkcs8: pkcs8, public_spki: spki } = generate(kind, bits).await?;
    let spki = SecretBytes::new(spki);
    let length = i32::try_from(bits).unwrap_or(i32::MAX);
    let [private_dates, public_dates] = dates;
    let new = (algorithm, length, now);
    let versions = vec![
        new_half(state, private, private_dates, &pkcs8, (LinkType::PUBLIC_KEY, &public_uid), new)?,
        new_half(state, public, public_dates, &spki, (LinkType::PRIVATE_KEY, &private_uid), new)?,
    ];
    let changes = KmipChanges { versions, ..KmipChanges::default() };
    state.store.kmip_apply(changes).await.map_err(kms_error)?;
    Ok((private_uid, public_uid))
}

/// A new key pair, made off the connection's thread (RSA generation takes
/// a while).
async fn generate(kind: KeyAlg, bits: u32) -> Result<KeyPairDer, KmipError> {
    tokio::task::spawn_blocking(move || generate_key_pair(kind, bits))
        .await
        .map_err(|_| KmipError::GeneralFailure("key pair generation stopped".into()))?
        .map_err(|e| KmipError::CryptographicFailure(e.to_string()))
}
