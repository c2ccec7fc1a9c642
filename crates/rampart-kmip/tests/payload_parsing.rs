//! Typed payloads of the profile operations: the OASIS test-case requests
//! (case ids in ttlv_conformance.rs) parsed into typed requests, both
//! attribute shapes (KMIP 1.x Template-Attribute, 2.x Attributes), and the
//! Key Block and version negotiation rules.
#![allow(clippy::unwrap_used)] // test helpers: a failure is the test failing

mod vectors;

use rampart_kmip::enums::{
    BlockCipherMode, CryptographicAlgorithm, KeyFormatType, LinkType, NameType, ObjectType,
    Operation, RevocationReasonCode, SecretDataType, WrappingMethod,
};
use rampart_kmip::message::{Attribute, ProtocolVersion, RequestMessage};
use rampart_kmip::payload::{
    attribute_name_of, attribute_tag_of, is_custom_attribute, negotiate_versions,
    parse_discover_versions, AttributeChangeRequest, AttributeSet, CreateRequest, CryptoRequest,
    GetRequest, KeyBlock, Link, LocateRequest, ManagedObject, Name, ObjectRequest, RegisterRequest,
    RevokeRequest,
};
use rampart_kmip::tag::Tag;
use rampart_kmip::ttlv::{self, Bytes, Fields, Item, Value};
use rampart_kmip::{KmipError, Limits};
use vectors::{spec, TC_1_1_3_1_1_CREATE, TC_1_1_3_1_3_LOCATE, TC_1_2_MAC};

fn first_payload(hex: &str) -> Item {
    let item = ttlv::decode(&spec(hex), &Limits::default()).unwrap();
    RequestMessage::parse(&item).unwrap().batch_items.remove(0).payload
}

fn payload(fields: Vec<Item>) -> Item {
    Item::structure(Tag::REQUEST_PAYLOAD, fields)
}

#[test]
fn create_from_the_test_case() {
    let create = CreateRequest::parse(&first_payload(TC_1_1_3_1_1_CREATE)).unwrap();
    assert_eq!(create.object_type, ObjectType::SYMMETRIC_KEY);
    let a = &create.attributes;
    assert_eq!(
        a.enum_value("Cryptographic Algorithm").unwrap(),
        Some(CryptographicAlgorithm::AES.0)
    );
    assert_eq!(a.int_value("Cryptographic Length").unwrap(), Some(128));
    assert_eq!(a.int_value("Cryptographic Usage Mask").unwrap(), Some(0x0C));
    assert!(a.names().unwrap().is_empty());
}

#[test]
fn locate_from_the_test_case() {
    let locate = LocateRequest::parse(&first_payload(TC_1_1_3_1_3_LOCATE)).unwrap();
    assert_eq!(locate.maximum_items, None);
    assert_eq!(
        locate.attributes.enum_value("Object Type").unwrap(),
        Some(ObjectType::SYMMETRIC_KEY.0)
    );
    assert_eq!(
        locate.attributes.names().unwrap(),
        vec![Name { value: "Key1".into(), name_type: NameType::UNINTERPRETED_TEXT_STRING }]
    );
}

#[test]
fn mac_from_the_test_case() {
    let mac = CryptoRequest::parse(&first_payload(TC_1_2_MAC)).unwrap();
    assert_eq!(mac.unique_identifier.as_deref(), Some("1"));
    assert_eq!(mac.data.as_slice(), (0u8..16).collect::<Vec<_>>());
    assert_eq!(
        mac.parameters.unwrap().cryptographic_algorithm,
        Some(CryptographicAlgorithm::HMAC_SHA512)
    );
}

#[test]
fn kmip_2_attributes_become_named_attributes() {
    let attrs = Item::structure(
        Tag::ATTRIBUTES,
        vec![
            Item::enumeration(Tag::CRYPTOGRAPHIC_ALGORITHM, CryptographicAlgorithm::AES.0),
            Item::int(Tag::CRYPTOGRAPHIC_LENGTH, 256),
            Name { value: "vm-1".into(), name_type: NameType::UNINTERPRETED_TEXT_STRING }
                .to_value(Tag::NAME),
        ],
    );
    let create = CreateRequest::parse(&payload(vec![
        Item::enumeration(Tag::OBJECT_TYPE, ObjectType::SYMMETRIC_KEY.0),
        attrs,
    ]))
    .unwrap();
    assert_eq!(create.attributes.int_value("Cryptographic Length").unwrap(), Some(256));
    assert_eq!(create.attributes.names().unwrap()[0].value, "vm-1");
    assert_eq!(attribute_tag_of("Activation Date"), Some(Tag::ACTIVATION_DATE));
    assert_eq!(attribute_name_of(Tag::STATE), Some("State"));
    assert!(is_custom_attribute("x-vmware-key") && !is_custom_attribute("Name"));
    // An unknown 2.x attribute tag is refused as not supported.
    let unknown =
        AttributeSet::parse(&Item::structure(Tag::ATTRIBUTES, vec![Item::int(Tag(0x42_0999), 1)]));
    assert!(matches!(unknown, Err(KmipError::FeatureNotSupported(_))));
    // Named templates (deprecated in 1.3) are refused the same way.
    let named = AttributeSet::parse(&Item::structure(
        Tag::TEMPLATE_ATTRIBUTE,
        vec![Name { value: "t".into(), name_type: NameType::UNINTERPRETED_TEXT_STRING }
            .to_value(Tag::NAME)],
    ));
    assert!(matches!(named, Err(KmipError::FeatureNotSupported(_))));
    // A repeated single-valued attribute is an invalid field.
    let twice = AttributeSet(vec![
        Attribute::new("Cryptographic Length", Value::Integer(128)),
        Attribute::new("Cryptographic Length", Value::Integer(256)),
    ]);
    assert!(matches!(twice.int_value("Cryptographic Length"), Err(KmipError::InvalidField(_))));
}

fn aes_block(material: &[u8]) -> KeyBlock {
    KeyBlock {
        format: KeyFormatType::RAW,
        material: Bytes::from(material),
        algorithm: Some(CryptographicAlgorithm::AES),
        length: Some(i32::try_from(material.len() * 8).unwrap()),
        wrapping: None,
    }
}

#[test]
fn register_symmetric_key_and_secret_data() {
    let key = ManagedObject::SymmetricKey(aes_block(&[0x11; 32]));
    let req = RegisterRequest::parse(&payload(vec![
        Item::enumeration(Tag::OBJECT_TYPE, ObjectType::SYMMETRIC_KEY.0),
        Item::structure(
            Tag::TEMPLATE_ATTRIBUTE,
            vec![Attribute::new("x-purpose", Value::TextString("db".into())).to_item()],
        ),
        key.to_item(),
    ]))
    .unwrap();
    assert_eq!(req.object, key);
    assert_eq!(req.object.key_block().material.as_slice(), [0x11; 32]);
    assert_eq!(req.attributes.single("x-purpose").unwrap().unwrap().as_text().unwrap(), "db");

    let secret = ManagedObject::SecretData {
        data_type: SecretDataType::PASSWORD,
        block: KeyBlock {
            format: KeyFormatType::OPAQUE,
            material: Bytes::from(&b"hunter2"[..]),
            algorithm: None,
            length: None,
            wrapping: None,
        },
    };
    let req = RegisterRequest::parse(&payload(vec![
        Item::enumeration(Tag::OBJECT_TYPE, ObjectType::SECRET_DATA.0),
        secret.to_item(),
    ]))
    .unwrap();
    assert_eq!(req.object, secret);
    assert_eq!(req.object.object_type(), ObjectType::SECRET_DATA);

    // An object type the profiles do not serve, and a missing object.
    let cert = RegisterRequest::parse(&payload(vec![Item::enumeration(
        Tag::OBJECT_TYPE,
        ObjectType::CERTIFICATE.0,
    )]));
    assert!(matches!(cert, Err(KmipError::FeatureNotSupported(_))));
    let none = RegisterRequest::parse(&payload(vec![Item::enumeration(
        Tag::OBJECT_TYPE,
        ObjectType::SYMMETRIC_KEY.0,
    )]));
    assert!(matches!(none, Err(KmipError::Missing { tag: Tag::SYMMETRIC_KEY, .. })));
}

#[test]
fn transparent_symmetric_keys_and_compression() {
    let block = Item::structure(
        Tag::KEY_BLOCK,
        vec![
            Item::enumeration(Tag::KEY_FORMAT_TYPE, KeyFormatType::TRANSPARENT_SYMMETRIC_KEY.0),
            Item::structure(
                Tag::KEY_VALUE,
                vec![Item::structure(Tag::KEY_MATERIAL, vec![Item::bytes(Tag::KEY, &[7; 16])])],
            ),
        ],
    );
    let parsed = KeyBlock::parse(&block).unwrap();
    assert_eq!(parsed.format, KeyFormatType::TRANSPARENT_SYMMETRIC_KEY);
    assert_eq!(parsed.material.as_slice(), [7; 16]);
    let mut compressed = block.clone();
    if let Value::Structure(items) = &mut compressed.value {
        items.push(Item::enumeration(Tag::KEY_COMPRESSION_TYPE, 1));
    }
    assert_eq!(KeyBlock::parse(&compressed), Err(KmipError::KeyCompressionTypeNotSupported));
}

#[test]
fn get_with_a_key_wrapping_specification() {
    let req = GetRequest::parse(&payload(vec![
        Item::text(Tag::UNIQUE_IDENTIFIER, "vm-key"),
        Item::structure(
            Tag::KEY_WRAPPING_SPECIFICATION,
            vec![
                Item::enumeration(Tag::WRAPPING_METHOD, WrappingMethod::ENCRYPT.0),
                Item::structure(
                    Tag::ENCRYPTION_KEY_INFORMATION,
                    vec![
                        Item::text(Tag::UNIQUE_IDENTIFIER, "kek"),
                        Item::structure(
                            Tag::CRYPTOGRAPHIC_PARAMETERS,
                            vec![Item::enumeration(
                                Tag::BLOCK_CIPHER_MODE,
                                BlockCipherMode::NIST_KEY_WRAP.0,
                            )],
                        ),
                    ],
                ),
            ],
        ),
    ]))
    .unwrap();
    assert_eq!(req.unique_identifier.as_deref(), Some("vm-key"));
    let w = req.wrapping.unwrap();
    assert_eq!(w.encryption_key, "kek");
    assert_eq!(w.parameters.unwrap().block_cipher_mode, Some(BlockCipherMode::NIST_KEY_WRAP));
    // No identifier: the ID Placeholder is meant.
    assert_eq!(GetRequest::parse(&payload(vec![])).unwrap().unique_identifier, None);
}

#[test]
fn attribute_changes_in_both_versions() {
    let add = AttributeChangeRequest::parse(&payload(vec![
        Item::text(Tag::UNIQUE_IDENTIFIER, "1"),
        Attribute::new("x-vm", Value::TextString("vm-7".into())).to_item(),
    ]))
    .unwrap();
    assert_eq!(add.attribute.name, "x-vm");
    let delete = AttributeChangeRequest::parse(&payload(vec![
        Item::text(Tag::UNIQUE_IDENTIFIER, "1"),
        Item::text(Tag::ATTRIBUTE_NAME, "x-vm"),
        Item::int(Tag::ATTRIBUTE_INDEX, 0),
    ]))
    .unwrap();
    assert_eq!(
        (delete.attribute.name.as_str(), delete.attribute.index, delete.attribute.value),
        ("x-vm", Some(0), None)
    );
    let modify_2x = AttributeChangeRequest::parse(&payload(vec![
        Item::structure(Tag::CURRENT_ATTRIBUTE, vec![Item::int(Tag::CRYPTOGRAPHIC_USAGE_MASK, 12)]),
        Item::structure(Tag::NEW_ATTRIBUTE, vec![Item::int(Tag::CRYPTOGRAPHIC_USAGE_MASK, 4)]),
    ]))
    .unwrap();
    assert_eq!(modify_2x.unique_identifier, None);
    assert_eq!(modify_2x.attribute.name, "Cryptographic Usage Mask");
    assert_eq!(modify_2x.current.unwrap().as_int().unwrap(), 12);
    assert!(matches!(
        AttributeChangeRequest::parse(&payload(vec![])),
        Err(KmipError::Missing { .. })
    ));
    let get_attrs = ObjectRequest::parse(&payload(vec![
        Item::text(Tag::UNIQUE_IDENTIFIER, "1"),
        Item::text(Tag::ATTRIBUTE_NAME, "State"),
        Item::enumeration(Tag::ATTRIBUTE_REFERENCE, Tag::CRYPTOGRAPHIC_LENGTH.0),
    ]))
    .unwrap();
    assert_eq!(get_attrs.attribute_names, ["State", "Cryptographic Length"]);
}

#[test]
fn revoke_links_and_crypto_requests() {
    let revoke = RevokeRequest::parse(&payload(vec![
        Item::text(Tag::UNIQUE_IDENTIFIER, "1"),
        Item::structure(
            Tag::REVOCATION_REASON,
            vec![
                Item::enumeration(
                    Tag::REVOCATION_REASON_CODE,
                    RevocationReasonCode::KEY_COMPROMISE.0,
                ),
                Item::text(Tag::REVOCATION_MESSAGE, "laptop lost"),
            ],
        ),
        Item::date_time(Tag::COMPROMISE_OCCURRENCE_DATE, 1_205_495_800),
    ]))
    .unwrap();
    assert_eq!(revoke.reason, RevocationReasonCode::KEY_COMPROMISE);
    assert_eq!(revoke.message.as_deref(), Some("laptop lost"));
    assert_eq!(revoke.compromise_occurrence_date, Some(1_205_495_800));

    let link = Link { link_type: LinkType::REPLACEMENT_OBJECT, linked_object: "2".into() };
    assert_eq!(Link::parse(&link.to_value(Tag::ATTRIBUTE_VALUE)).unwrap(), link);

    let enc = CryptoRequest::parse(&payload(vec![
        Item::text(Tag::UNIQUE_IDENTIFIER, "1"),
        Item::bytes(Tag::DATA, &[0; 64]),
        Item::bytes(Tag::IV_COUNTER_NONCE, &[1; 12]),
        Item::bytes(Tag::AUTHENTICATED_ENCRYPTION_ADDITIONAL_DATA, b"aad"),
    ]))
    .unwrap();
    assert_eq!(
        (enc.data.len(), enc.iv_counter_nonce.unwrap().len(), enc.aad.unwrap()),
        (64, 12, b"aad".to_vec())
    );
    let no_data = CryptoRequest::parse(&payload(vec![Item::text(Tag::UNIQUE_IDENTIFIER, "1")]));
    assert!(matches!(no_data, Err(KmipError::Missing { tag: Tag::DATA, .. })));
    // Streaming (Correlation Value / Init / Final Indicator) is refused.
    let streaming = CryptoRequest::parse(&payload(vec![
        Item::bytes(Tag::DATA, &[0; 16]),
        Item::boolean(Tag(0x42_00D7), true),
    ]));
    assert!(matches!(streaming, Err(KmipError::FeatureNotSupported(_))));
}

#[test]
fn discover_versions_negotiation() {
    let server = [
        ProtocolVersion::V2_1,
        ProtocolVersion::V2_0,
        ProtocolVersion::V1_4,
        ProtocolVersion::V1_3,
    ];
    let req = payload(vec![
        ProtocolVersion::V1_2.to_item(),
        ProtocolVersion::V1_4.to_item(),
        ProtocolVersion::V2_0.to_item(),
    ]);
    let client = parse_discover_versions(&req).unwrap();
    assert_eq!(
        negotiate_versions(&client, &server),
        [ProtocolVersion::V2_0, ProtocolVersion::V1_4]
    );
    assert_eq!(negotiate_versions(&[], &server), server);
    assert!(negotiate_versions(&[ProtocolVersion::new(3, 0)], &server).is_empty());
    let _ = (Operation::DISCOVER_VERSIONS, Fields::of(&req).unwrap());
}
