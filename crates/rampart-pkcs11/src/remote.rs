//! Every KMIP request the module sends, and the reading of its answer.
//! A failed batch item becomes its return code here ([`crate::rv`]).

use cryptoki_sys::*;
use rampart_kmip::enums::{
    usage_mask, CryptographicAlgorithm, KeyFormatType, ObjectType, Operation, ResultStatus,
    ValidityIndicator,
};
use rampart_kmip::message::{Attribute, ResponseBatchItem};
use rampart_kmip::tag::Tag;
use rampart_kmip::ttlv::{Item, Value};

use crate::connection::Remote;
use crate::objects::{custom_attribute, ObjectInfo, ID_ATTRIBUTE, LABEL_ATTRIBUTE};
use crate::rv::{from_client, from_reason, Context, Result, Rv};

/// Objects asked for per Locate page.
pub(crate) const PAGE: i32 = 64;

/// The payload fields of each batch item, or its return code.
fn payloads(items: Vec<ResponseBatchItem>, context: Context) -> Vec<Result<Vec<Item>>> {
    items
        .into_iter()
        .map(|item| {
            if item.result_status != ResultStatus::SUCCESS {
                return Err(from_reason(item.result_reason, context));
            }
            Ok(item
                .payload
                .and_then(|p| p.children().ok().map(<[Item]>::to_vec))
                .unwrap_or_default())
        })
        .collect()
}

/// Sends a batch; every item must succeed.
fn batch(
    r: Remote<'_>,
    operations: Vec<(Operation, Vec<Item>)>,
    context: Context,
) -> Result<Vec<Vec<Item>>> {
    let n = operations.len();
    let items = r.call(operations).map_err(|e| from_client(&e, context))?;
    if items.len() != n {
        return Err(Rv(CKR_DEVICE_ERROR));
    }
    payloads(items, context).into_iter().collect()
}

/// Sends one operation.
fn one(
    r: Remote<'_>,
    operation: Operation,
    fields: Vec<Item>,
    context: Context,
) -> Result<Vec<Item>> {
    batch(r, vec![(operation, fields)], context)?.pop().ok_or(Rv(CKR_DEVICE_ERROR))
}

/// The first item with `tag`, at any depth.
fn find_deep(items: &[Item], tag: Tag) -> Option<&Item> {
    items.iter().find_map(|item| {
        if item.tag == tag {
            return Some(item);
        }
        match &item.value {
            Value::Structure(children) => find_deep(children, tag),
            _ => None,
        }
    })
}

fn bytes_of(items: &[Item], tag: Tag) -> Result<Vec<u8>> {
    find_deep(items, tag)
        .and_then(|i| i.as_bytes().ok())
        .map(<[u8]>::to_vec)
        .ok_or(Rv(CKR_DEVICE_ERROR))
}

fn text_of(items: &[Item], tag: Tag) -> Result<String> {
    find_deep(items, tag)
        .and_then(|i| i.as_text().ok())
        .map(str::to_owned)
        .ok_or(Rv(CKR_DEVICE_ERROR))
}

/// A cheap request that the key manager answers only to an identity it
/// still accepts (`C_Login`).
pub(crate) fn check_identity(r: Remote<'_>) -> Result<()> {
    one(r, Operation::DISCOVER_VERSIONS, Vec::new(), Context::Objects).map(|_| ())
}

/// One page of the identity's objects (every type), from `offset`.
pub(crate) fn locate(r: Remote<'_>, offset: i32) -> Result<Vec<String>> {
    let fields = vec![Item::int(Tag::MAXIMUM_ITEMS, PAGE), Item::int(Tag::OFFSET_ITEMS, offset)];
    let found = one(r, Operation::LOCATE, fields, Context::Objects)?;
    Ok(found
        .iter()
        .filter(|i| i.tag == Tag::UNIQUE_IDENTIFIER)
        .filter_map(|i| i.as_text().ok().map(str::to_owned))
        .collect())
}

/// The objects `uids` as the module presents them (those it does not
/// present, or that vanished meanwhile, are left out), with the public
/// key of each key of a pair and the DER of each certificate.
pub(crate) fn describe(r: Remote<'_>, uids: &[String]) -> Result<Vec<ObjectInfo>> {
    if uids.is_empty() {
        return Ok(Vec::new());
    }
    let requests = uids
        .iter()
        .map(|uid| (Operation::GET_ATTRIBUTES, vec![Item::text(Tag::UNIQUE_IDENTIFIER, uid)]))
        .collect();
    let answers = r.call(requests).map_err(|e| from_client(&e, Context::Objects))?;
    let mut infos = Vec::new();
    for (uid, answer) in uids.iter().zip(payloads(answers, Context::Objects)) {
        let Ok(fields) = answer else { continue };
        let attributes: Vec<Attribute> = fields
            .iter()
            .filter(|i| i.tag == Tag::ATTRIBUTE)
            .filter_map(|i| Attribute::parse(i).ok())
            .collect();
        if let Some(info) = ObjectInfo::from_attributes(uid, &attributes) {
            infos.push(info);
        }
    }
    // The public halves and certificates, in one more request.
    let mut wanted = Vec::new();
    for (i, info) in infos.iter().enumerate() {
        if let Some(source) = info.public_key_source() {
            wanted.push((
                i,
                (
                    Operation::GET,
                    vec![
                        Item::text(Tag::UNIQUE_IDENTIFIER, source),
                        Item::enumeration(Tag::KEY_FORMAT_TYPE, KeyFormatType::X509.0),
                    ],
                ),
            ));
        } else if info.class == CKO_CERTIFICATE {
            wanted.push((i, (Operation::GET, vec![Item::text(Tag::UNIQUE_IDENTIFIER, &info.uid)])));
        }
    }
    if !wanted.is_empty() {
        let (places, requests): (Vec<usize>, Vec<_>) = wanted.into_iter().unzip();
        let answers = r.call(requests).map_err(|e| from_client(&e, Context::Objects))?;
        for (i, answer) in places.into_iter().zip(payloads(answers, Context::Objects)) {
            let Ok(fields) = answer else { continue };
            let info = &mut infos[i];
            if info.class == CKO_CERTIFICATE {
                if let Ok(der) = bytes_of(&fields, Tag::CERTIFICATE_VALUE) {
                    info.set_certificate(der);
                }
            } else if let Ok(spki) = bytes_of(&fields, Tag::KEY_MATERIAL) {
                info.public = Some(spki);
            }
        }
    }
    Ok(infos)
}

/// One object, described afresh.
pub(crate) fn describe_one(r: Remote<'_>, uid: &str) -> Result<ObjectInfo> {
    describe(r, &[uid.to_owned()])?.pop().ok_or(Rv(CKR_OBJECT_HANDLE_INVALID))
}

/// The PKCS#11 label and ID as attributes of a new object.
pub(crate) fn naming(label: Option<&[u8]>, id: Option<&[u8]>) -> Result<Vec<Item>> {
    let mut attributes = Vec::new();
    if let Some(label) = label {
        let label = std::str::from_utf8(label).map_err(|_| Rv(CKR_ATTRIBUTE_VALUE_INVALID))?;
        attributes.push(custom_attribute(LABEL_ATTRIBUTE, Value::TextString(label.to_owned())));
    }
    if let Some(id) = id {
        attributes.push(custom_attribute(ID_ATTRIBUTE, Value::ByteString(id.into())));
    }
    Ok(attributes)
}

fn attribute(name: &str, value: Value) -> Item {
    Attribute::new(name, value).to_item()
}

/// Create (and Activate, in the same batch) of a symmetric key:
/// its Unique Identifier.
pub(crate) fn create_symmetric(
    r: Remote<'_>,
    algorithm: CryptographicAlgorithm,
    bits: i32,
    usage: i32,
    extractable: bool,
    mut naming: Vec<Item>,
) -> Result<String> {
    let mut attributes = vec![
        attribute("Cryptographic Algorithm", Value::Enumeration(algorithm.0)),
        attribute("Cryptographic Length", Value::Integer(bits)),
        attribute("Cryptographic Usage Mask", Value::Integer(usage)),
        attribute("Extractable", Value::Boolean(extractable)),
        attribute("Sensitive", Value::Boolean(true)),
    ];
    attributes.append(&mut naming);
    let created = batch(
        r,
        vec![
            (
                Operation::CREATE,
                vec![
                    Item::enumeration(Tag::OBJECT_TYPE, ObjectType::SYMMETRIC_KEY.0),
                    Item::structure(Tag::TEMPLATE_ATTRIBUTE, attributes),
                ],
            ),
            (Operation::ACTIVATE, Vec::new()),
        ],
        Context::Generate,
    )?;
    text_of(&created[0], Tag::UNIQUE_IDENTIFIER)
}

/// What a new key pair is.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PairSpec {
    pub algorithm: CryptographicAlgorithm,
    pub length: i32,
    pub private_usage: i32,
    pub public_usage: i32,
    pub extractable: bool,
}

/// Create Key Pair, then Activate of both keys: (private, public).
pub(crate) fn create_key_pair(
    r: Remote<'_>,
    spec: PairSpec,
    mut private_naming: Vec<Item>,
    mut public_naming: Vec<Item>,
) -> Result<(String, String)> {
    let common = vec![
        attribute("Cryptographic Algorithm", Value::Enumeration(spec.algorithm.0)),
        attribute("Cryptographic Length", Value::Integer(spec.length)),
    ];
    let mut private = vec![
        attribute("Cryptographic Usage Mask", Value::Integer(spec.private_usage)),
        attribute("Extractable", Value::Boolean(spec.extractable)),
        attribute("Sensitive", Value::Boolean(true)),
    ];
    private.append(&mut private_naming);
    let mut public = vec![attribute("Cryptographic Usage Mask", Value::Integer(spec.public_usage))];
    public.append(&mut public_naming);
    let created = batch(
        r,
        vec![
            (
                Operation::CREATE_KEY_PAIR,
                vec![
                    Item::structure(Tag::COMMON_TEMPLATE_ATTRIBUTE, common),
                    Item::structure(Tag::PRIVATE_KEY_TEMPLATE_ATTRIBUTE, private),
                    Item::structure(Tag::PUBLIC_KEY_TEMPLATE_ATTRIBUTE, public),
                ],
            ),
            // The ID Placeholder is the private key.
            (Operation::ACTIVATE, Vec::new()),
        ],
        Context::Generate,
    )?;
    let private_key = text_of(&created[0], Tag::PRIVATE_KEY_UNIQUE_IDENTIFIER)?;
    let public_key = text_of(&created[0], Tag::PUBLIC_KEY_UNIQUE_IDENTIFIER)?;
    one(
        r,
        Operation::ACTIVATE,
        vec![Item::text(Tag::UNIQUE_IDENTIFIER, &public_key)],
        Context::Generate,
    )?;
    Ok((private_key, public_key))
}

/// An Encrypt or Decrypt request's inputs.
#[derive(Debug, Default)]
pub(crate) struct CryptInput<'a> {
    pub parameters: Vec<Item>,
    pub data: &'a [u8],
    pub iv: Option<&'a [u8]>,
    pub aad: Option<&'a [u8]>,
    /// The tag to check (AEAD decryption).
    pub tag: Option<&'a [u8]>,
}

/// Encrypt (`encrypt`) or Decrypt under key `uid`: the output data and,
/// from an AEAD encryption, the tag.
pub(crate) fn crypt(
    r: Remote<'_>,
    encrypt: bool,
    uid: &str,
    input: &CryptInput<'_>,
) -> Result<(Vec<u8>, Option<Vec<u8>>)> {
    let context = if encrypt { Context::Encrypt } else { Context::Decrypt };
    let mut fields = vec![
        Item::text(Tag::UNIQUE_IDENTIFIER, uid),
        Item::structure(Tag::CRYPTOGRAPHIC_PARAMETERS, input.parameters.clone()),
        Item::bytes(Tag::DATA, input.data),
    ];
    if let Some(iv) = input.iv {
        fields.push(Item::bytes(Tag::IV_COUNTER_NONCE, iv));
    }
    if let Some(aad) = input.aad.filter(|a| !a.is_empty()) {
        fields.push(Item::bytes(Tag::AUTHENTICATED_ENCRYPTION_ADDITIONAL_DATA, aad));
    }
    if let Some(tag) = input.tag {
        fields.push(Item::bytes(Tag::AUTHENTICATED_ENCRYPTION_TAG, tag));
    }
    let operation = if encrypt { Operation::ENCRYPT } else { Operation::DECRYPT };
    let answer = one(r, operation, fields, context)?;
    let data = find_deep(&answer, Tag::DATA)
        .and_then(|i| i.as_bytes().ok())
        .map(<[u8]>::to_vec)
        .unwrap_or_default();
    let tag = find_deep(&answer, Tag::AUTHENTICATED_ENCRYPTION_TAG)
        .and_then(|i| i.as_bytes().ok())
        .map(<[u8]>::to_vec);
    Ok((data, tag))
}

/// What a signature or MAC covers.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Signed<'a> {
    /// The message (the key manager hashes it, or EdDSA signs it whole).
    Data(&'a [u8]),
    /// Its digest, made here.
    Digest(&'a [u8]),
}

fn signed_field(signed: Signed<'_>) -> Item {
    match signed {
        Signed::Data(data) => Item::bytes(Tag::DATA, data),
        Signed::Digest(digest) => Item::bytes(Tag::DIGESTED_DATA, digest),
    }
}

/// Sign by private key `uid`: the signature as the key manager gives it
/// (DER for ECDSA).
pub(crate) fn sign(
    r: Remote<'_>,
    uid: &str,
    parameters: Vec<Item>,
    signed: Signed<'_>,
) -> Result<Vec<u8>> {
    let fields = vec![
        Item::text(Tag::UNIQUE_IDENTIFIER, uid),
        Item::structure(Tag::CRYPTOGRAPHIC_PARAMETERS, parameters),
        signed_field(signed),
    ];
    let answer = one(r, Operation::SIGN, fields, Context::Sign)?;
    bytes_of(&answer, Tag::SIGNATURE_DATA)
}

/// Signature Verify by public key `uid`.
pub(crate) fn verify(
    r: Remote<'_>,
    uid: &str,
    parameters: Vec<Item>,
    signed: Signed<'_>,
    signature: &[u8],
) -> Result<bool> {
    let fields = vec![
        Item::text(Tag::UNIQUE_IDENTIFIER, uid),
        Item::structure(Tag::CRYPTOGRAPHIC_PARAMETERS, parameters),
        signed_field(signed),
        Item::bytes(Tag::SIGNATURE_DATA, signature),
    ];
    let answer = one(r, Operation::SIGNATURE_VERIFY, fields, Context::Verify)?;
    validity(&answer)
}

fn validity(answer: &[Item]) -> Result<bool> {
    match find_deep(answer, Tag::VALIDITY_INDICATOR).and_then(|i| i.as_enum().ok()) {
        Some(v) if v == ValidityIndicator::VALID.0 => Ok(true),
        Some(_) => Ok(false),
        None => Err(Rv(CKR_DEVICE_ERROR)),
    }
}

/// MAC by key `uid` with `algorithm` (an HMAC).
pub(crate) fn mac(
    r: Remote<'_>,
    uid: &str,
    algorithm: CryptographicAlgorithm,
    data: &[u8],
) -> Result<Vec<u8>> {
    let fields = vec![
        Item::text(Tag::UNIQUE_IDENTIFIER, uid),
        Item::structure(
            Tag::CRYPTOGRAPHIC_PARAMETERS,
            vec![Item::enumeration(Tag::CRYPTOGRAPHIC_ALGORITHM, algorithm.0)],
        ),
        Item::bytes(Tag::DATA, data),
    ];
    let answer = one(r, Operation::MAC, fields, Context::Sign)?;
    bytes_of(&answer, Tag::MAC_DATA)
}

/// MAC Verify by key `uid`.
pub(crate) fn mac_verify(
    r: Remote<'_>,
    uid: &str,
    algorithm: CryptographicAlgorithm,
    data: &[u8],
    mac: &[u8],
) -> Result<bool> {
    let fields = vec![
        Item::text(Tag::UNIQUE_IDENTIFIER, uid),
        Item::structure(
            Tag::CRYPTOGRAPHIC_PARAMETERS,
            vec![Item::enumeration(Tag::CRYPTOGRAPHIC_ALGORITHM, algorithm.0)],
        ),
        Item::bytes(Tag::DATA, data),
        Item::bytes(Tag::MAC_DATA, mac),
    ];
    let answer = one(r, Operation::MAC_VERIFY, fields, Context::Verify)?;
    validity(&answer)
}

/// Revoke (when active) and Destroy of `uid`.
pub(crate) fn destroy(r: Remote<'_>, info: &ObjectInfo) -> Result<()> {
    let uid = || vec![Item::text(Tag::UNIQUE_IDENTIFIER, &info.uid)];
    if info.state == Some(rampart_kmip::enums::State::ACTIVE) {
        let mut revoke = uid();
        revoke.push(Item::structure(
            Tag::REVOCATION_REASON,
            // Cessation of Operation (KMIP 1.4 §9.1.3.2.19).
            vec![Item::enumeration(Tag::REVOCATION_REASON_CODE, 0x05)],
        ));
        one(r, Operation::REVOKE, revoke, Context::Objects)?;
    }
    one(r, Operation::DESTROY, uid(), Context::Objects).map(|_| ())
}

/// The usage mask of a new key from what its template asks for.
pub(crate) fn usage_from(flags: &[(CK_ATTRIBUTE_TYPE, bool)]) -> i32 {
    flags.iter().filter(|(_, on)| *on).fold(0, |mask, (kind, _)| {
        mask | match *kind {
            CKA_ENCRYPT => usage_mask::ENCRYPT,
            CKA_DECRYPT => usage_mask::DECRYPT,
            CKA_SIGN => usage_mask::SIGN | usage_mask::MAC_GENERATE,
            CKA_VERIFY => usage_mask::VERIFY | usage_mask::MAC_VERIFY,
            CKA_WRAP => usage_mask::WRAP_KEY,
            CKA_UNWRAP => usage_mask::UNWRAP_KEY,
            CKA_DERIVE => usage_mask::DERIVE_KEY,
            _ => 0,
        }
    })
}

/// The fields of Key Wrapping Data or a Key Wrapping Specification: key
/// `uid` encrypts with `mode`.
fn encrypted_by(uid: &str, mode: rampart_kmip::enums::BlockCipherMode) -> Vec<Item> {
    vec![
        Item::enumeration(Tag::WRAPPING_METHOD, rampart_kmip::enums::WrappingMethod::ENCRYPT.0),
        Item::structure(
            Tag::ENCRYPTION_KEY_INFORMATION,
            vec![
                Item::text(Tag::UNIQUE_IDENTIFIER, uid),
                Item::structure(
                    Tag::CRYPTOGRAPHIC_PARAMETERS,
                    vec![Item::enumeration(Tag::BLOCK_CIPHER_MODE, mode.0)],
                ),
            ],
        ),
    ]
}

/// A Key Block structure: material in `format`, with its algorithm and
/// length when known.
pub(crate) fn key_block(
    format: KeyFormatType,
    material: &[u8],
    algorithm: Option<CryptographicAlgorithm>,
    length: Option<i32>,
    wrapped_by: Option<(&str, rampart_kmip::enums::BlockCipherMode)>,
) -> Item {
    let mut fields = vec![
        Item::enumeration(Tag::KEY_FORMAT_TYPE, format.0),
        Item::structure(Tag::KEY_VALUE, vec![Item::bytes(Tag::KEY_MATERIAL, material)]),
    ];
    if let Some(a) = algorithm {
        fields.push(Item::enumeration(Tag::CRYPTOGRAPHIC_ALGORITHM, a.0));
    }
    if let Some(l) = length {
        fields.push(Item::int(Tag::CRYPTOGRAPHIC_LENGTH, l));
    }
    if let Some((uid, mode)) = wrapped_by {
        fields.push(Item::structure(Tag::KEY_WRAPPING_DATA, encrypted_by(uid, mode)));
    }
    Item::structure(Tag::KEY_BLOCK, fields)
}

/// Register of `object` (the managed object's item) of `object_type`
/// with `attributes`, activated when it is a key: its Unique Identifier.
pub(crate) fn register(
    r: Remote<'_>,
    object_type: ObjectType,
    object: Item,
    attributes: Vec<Item>,
    context: Context,
) -> Result<String> {
    let mut operations = vec![(
        Operation::REGISTER,
        vec![
            Item::enumeration(Tag::OBJECT_TYPE, object_type.0),
            Item::structure(Tag::TEMPLATE_ATTRIBUTE, attributes),
            object,
        ],
    )];
    if matches!(
        object_type,
        ObjectType::SYMMETRIC_KEY | ObjectType::PRIVATE_KEY | ObjectType::PUBLIC_KEY
    ) {
        operations.push((Operation::ACTIVATE, Vec::new()));
    }
    let registered = batch(r, operations, context)?;
    text_of(&registered[0], Tag::UNIQUE_IDENTIFIER)
}

/// The key `uid`'s material wrapped by key `wrapping` with `mode` (Get
/// with a Key Wrapping Specification, No Encoding: the material alone).
pub(crate) fn wrap(
    r: Remote<'_>,
    uid: &str,
    wrapping: &str,
    mode: rampart_kmip::enums::BlockCipherMode,
) -> Result<Vec<u8>> {
    /// KMIP 1.4 §9.1.3.2.49 Encoding Option: No Encoding.
    const NO_ENCODING: u32 = 0x01;
    const TAG_ENCODING_OPTION: Tag = Tag(0x42_00A3);
    let fields = vec![
        Item::text(Tag::UNIQUE_IDENTIFIER, uid),
        Item::structure(Tag::KEY_WRAPPING_SPECIFICATION, {
            let mut spec = encrypted_by(wrapping, mode);
            spec.push(Item::enumeration(TAG_ENCODING_OPTION, NO_ENCODING));
            spec
        }),
    ];
    let answer = one(r, Operation::GET, fields, Context::Encrypt)?;
    bytes_of(&answer, Tag::KEY_MATERIAL)
}
