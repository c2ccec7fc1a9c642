//! Typed payloads of the profile operations: the OASIS test-case requests
//! (case ids in ttlv_conformance.rs) parsed into typed requests, both
//! attribute shapes (KMIP 1.x Template-Attribute, 2.x Attributes), and the
//! Key Block and version negotiation rules.
#![allow(clippy::unwrap_used)] // test helpers: a failure is the test failing

use crate::vectors;

use rampart_kmip::enums::{
    BlockCipherMode, CryptographicAlgorithm, KeyFormatType, LinkType, NameType, ObjectType,
    Operation, RevocationReasonCode, SecretDataType, WrappingMethod,
};
use rampart_kmip::message::{Attribute, ProtocolVersion, RequestMessage};
use rampart_kmip::payload::{
    attribute_name_of, attribute_tag_of, is_custom_attribute, negotiate_versions,
    parse_discover_versions, AttributeChangeRequest, AttributeSet, CertifyRequest, CreateRequest,
    CryptoRequest, GetRequest, KeyBlock, Link, LocateRequest, ManagedObject, Name, ObjectRequest,
    ReKeyKeyPairRequest, RegisterRequest, RevokeRequest, MAX_CERTIFICATE_REQUEST,
};
use rampart_kmip::tag::Tag;
use rampart_kmip::ttlv::{self, Bytes, Fields, Item, TtlvError, Value};
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
    // A Template-Attribute names its Templates apart from its attributes.
    let named = AttributeSet::parse(&Item::structure(
        Tag::TEMPLATE_ATTRIBUTE,
        vec![
            Name { value: "t".into(), name_type: NameType::UNINTERPRETED_TEXT_STRING }
                .to_value(Tag::NAME),
            Attribute::new("Cryptographic Length", Value::Integer(128)).to_item(),
        ],
    ))
    .unwrap();
    assert_eq!(named.templates[0].value, "t");
    assert_eq!(named.attributes.len(), 1);
    // A repeated single-valued attribute is an invalid field.
    let twice = AttributeSet::of(vec![
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
        integers: Vec::new(),
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
    assert_eq!(req.object.key_block().unwrap().material.as_slice(), [0x11; 32]);
    assert_eq!(req.attributes.single("x-purpose").unwrap().unwrap().as_text().unwrap(), "db");

    let secret = ManagedObject::SecretData {
        data_type: SecretDataType::PASSWORD,
        block: KeyBlock {
            format: KeyFormatType::OPAQUE,
            material: Bytes::from(&b"hunter2"[..]),
            algorithm: None,
            length: None,
            integers: Vec::new(),
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

    // A Template: its Attribute items, at least one; an object type the
    // server does not keep; a missing object.
    let length = Attribute::new("Cryptographic Length", Value::Integer(128));
    let template = RegisterRequest::parse(&payload(vec![
        Item::enumeration(Tag::OBJECT_TYPE, ObjectType::TEMPLATE.0),
        Item::structure(Tag::TEMPLATE, vec![length.to_item()]),
    ]))
    .unwrap();
    assert_eq!(template.object, ManagedObject::Template(vec![length]));
    assert_eq!(template.object.to_item().tag, Tag::TEMPLATE);
    let empty = RegisterRequest::parse(&payload(vec![
        Item::enumeration(Tag::OBJECT_TYPE, ObjectType::TEMPLATE.0),
        Item::structure(Tag::TEMPLATE, vec![]),
    ]));
    assert!(empty.is_err());
    let pgp = RegisterRequest::parse(&payload(vec![Item::enumeration(
        Tag::OBJECT_TYPE,
        ObjectType::PGP_KEY.0,
    )]));
    assert!(matches!(pgp, Err(KmipError::FeatureNotSupported(_))));
    let none = RegisterRequest::parse(&payload(vec![Item::enumeration(
        Tag::OBJECT_TYPE,
        ObjectType::SYMMETRIC_KEY.0,
    )]));
    assert!(matches!(
        none,
        Err(KmipError::Ttlv(TtlvError::Missing { tag: Tag::SYMMETRIC_KEY, .. }))
    ));
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
        Err(KmipError::Ttlv(TtlvError::Missing { .. }))
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
    assert!(matches!(no_data, Err(KmipError::Ttlv(TtlvError::Missing { tag: Tag::DATA, .. }))));
    // The first part of a stream: Init Indicator, Data optional.
    let first = CryptoRequest::parse(&payload(vec![
        Item::bytes(Tag::DATA, &[0; 16]),
        Item::boolean(Tag::INIT_INDICATOR, true),
    ]))
    .unwrap();
    assert!(first.init && !first.last && first.is_streamed());
    let last = CryptoRequest::parse(&payload(vec![
        Item::bytes(Tag::CORRELATION_VALUE, &[7; 16]),
        Item::boolean(Tag::FINAL_INDICATOR, true),
    ]))
    .unwrap();
    assert!(last.last && last.is_streamed() && last.data.is_empty());
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

// KMIP 2.1 Vendor Attributes as the OASIS KMIP Profiles v2.1 mandatory
// test cases carry them: SASED-M-2-21 (Register with `x` Vendor
// Attributes inside Attributes) and SASED-M-3-21 step 1 (Get Attributes
// by a vendor Attribute Reference, answered with one Vendor Attribute).
// Those cases are published as XML; these are the same items in TTLV
// (tag, type, length, value padded to 8 bytes), the Unique Identifier
// `$UNIQUE_IDENTIFIER_0` replaced by `k/1`.
const SASED_M_3_21_REQUEST: &str = "
420079 01 00000040
  420094 07 00000003 6b2f310000000000
  42013B 01 00000028
    42009D 07 00000001 7800000000000000
    42000A 07 00000010 437573746f6d41747472696275746534";
const SASED_M_3_21_ANSWER_ATTRIBUTES: &str = "
420125 01 00000048
  420008 01 00000040
    42009D 07 00000001 7800000000000000
    42000A 07 00000010 437573746f6d41747472696275746534
    42000B 07 0000000C 437573746f6d56616c756534 00000000";

fn vendor(name: &str, value: &str) -> Item {
    Item::structure(
        Tag::ATTRIBUTE,
        vec![
            Item::text(Tag::VENDOR_IDENTIFICATION, "x"),
            Item::text(Tag::ATTRIBUTE_NAME, name),
            Item::text(Tag::ATTRIBUTE_VALUE, value),
        ],
    )
}

#[test]
fn kmip_2_1_vendor_attributes_round_trip_as_the_sased_test_cases_encode_them() {
    use rampart_kmip::payload::{
        attribute_reference, parse_vendor_attribute, split_custom_attribute, vendor_attribute_item,
        vendor_attribute_name,
    };
    // The answer's Attributes: one Vendor Attribute, the 1.x `x-` name.
    let bytes = spec(SASED_M_3_21_ANSWER_ATTRIBUTES);
    let item = ttlv::decode(&bytes, &Limits::default()).unwrap();
    let set = AttributeSet::parse(&item).unwrap();
    assert_eq!(set.attributes.len(), 1);
    assert_eq!(set.attributes[0].name, "x-CustomAttribute4");
    let value = set.attributes[0].value.clone().unwrap();
    assert_eq!(value.value, Value::TextString("CustomValue4".into()));
    // ... and the server's encoding of that attribute is the same bytes.
    let encoded = Item::structure(
        Tag::ATTRIBUTES,
        vec![vendor_attribute_item("x-CustomAttribute4", &value).unwrap()],
    );
    assert_eq!(encoded.encode().unwrap(), bytes);
    assert_eq!(parse_vendor_attribute(&vendor("a", "b")).unwrap().name, "x-a");

    // The request: a vendor Attribute Reference names `x-CustomAttribute4`.
    let bytes = spec(SASED_M_3_21_REQUEST);
    let request = ObjectRequest::parse(&ttlv::decode(&bytes, &Limits::default()).unwrap()).unwrap();
    assert_eq!(request.unique_identifier.as_deref(), Some("k/1"));
    assert_eq!(request.attribute_names, ["x-CustomAttribute4"]);
    let reference = attribute_reference("x-CustomAttribute4").unwrap();
    let payload = Item::structure(
        Tag::REQUEST_PAYLOAD,
        vec![Item::text(Tag::UNIQUE_IDENTIFIER, "k/1"), reference],
    );
    assert_eq!(payload.encode().unwrap(), bytes);
    // A standard attribute's reference is its tag, as an Enumeration.
    assert_eq!(
        attribute_reference("Object Group").unwrap(),
        Item::enumeration(Tag::ATTRIBUTE_REFERENCE, Tag::OBJECT_GROUP.0)
    );
    assert_eq!(split_custom_attribute("y-z"), Some(("y", "z")));
    assert_eq!(split_custom_attribute("Name"), None);
    // Only the vendors `x` and `y` (1.x custom attributes) are kept.
    assert!(matches!(
        vendor_attribute_name("acme.com", "a"),
        Err(KmipError::FeatureNotSupported(_))
    ));
    assert!(vendor_attribute_name("x", "").is_err());

    // SASED-M-2-21's Register template: Object Group, four Vendor
    // Attributes, Name, in order.
    let mut items = vec![Item::text(Tag::OBJECT_GROUP, "SASED-M-2-21-group")];
    for n in 1..=4 {
        items.push(vendor(&format!("CustomAttribute{n}"), &format!("CustomValue{n}")));
    }
    let set = AttributeSet::parse(&Item::structure(Tag::ATTRIBUTES, items)).unwrap();
    let names: Vec<_> = set.attributes.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "Object Group",
            "x-CustomAttribute1",
            "x-CustomAttribute2",
            "x-CustomAttribute3",
            "x-CustomAttribute4"
        ]
    );

    // Add (New Attribute), Modify (Current and New), Delete (Current
    // Attribute, or Attribute Reference) of a Vendor Attribute.
    let uid = || Item::text(Tag::UNIQUE_IDENTIFIER, "k/1");
    let add = AttributeChangeRequest::parse(&payload_of(vec![
        uid(),
        Item::structure(Tag::NEW_ATTRIBUTE, vec![vendor("a", "1")]),
    ]))
    .unwrap();
    assert_eq!(add.attribute.name, "x-a");
    assert_eq!(add.attribute.value.unwrap().value, Value::TextString("1".into()));
    let modify = AttributeChangeRequest::parse(&payload_of(vec![
        uid(),
        Item::structure(Tag::CURRENT_ATTRIBUTE, vec![vendor("a", "1")]),
        Item::structure(Tag::NEW_ATTRIBUTE, vec![vendor("a", "2")]),
    ]))
    .unwrap();
    assert_eq!(modify.current.unwrap().value, Value::TextString("1".into()));
    assert_eq!(modify.attribute.value.unwrap().value, Value::TextString("2".into()));
    let delete = AttributeChangeRequest::parse(&payload_of(vec![
        uid(),
        attribute_reference("x-a").unwrap(),
    ]))
    .unwrap();
    assert_eq!((delete.attribute.name.as_str(), delete.attribute.value), ("x-a", None));
}

fn payload_of(fields: Vec<Item>) -> Item {
    Item::structure(Tag::REQUEST_PAYLOAD, fields)
}

fn register(object: &ManagedObject) -> Result<RegisterRequest, KmipError> {
    RegisterRequest::parse(&payload(vec![
        Item::enumeration(Tag::OBJECT_TYPE, object.object_type().0),
        object.to_item(),
    ]))
}

#[test]
fn every_object_type_reads_back_as_it_was_written() {
    use rampart_kmip::enums::{CertificateType, SplitKeyMethod};
    use rampart_kmip::object_parts::{Certificate, OpaqueObject, SplitKeyFields};
    let block = |format, material: &[u8]| KeyBlock {
        format,
        material: Bytes::from(material),
        algorithm: Some(CryptographicAlgorithm::RSA),
        length: Some(2048),
        integers: Vec::new(),
        wrapping: None,
    };
    let transparent = KeyBlock {
        integers: vec![
            (Tag::MODULUS, Bytes::from(&[0xC1; 256][..])),
            (Tag::PUBLIC_EXPONENT, Bytes::from(&[1, 0, 1][..])),
        ],
        ..block(KeyFormatType::TRANSPARENT_RSA_PUBLIC_KEY, &[])
    };
    for object in [
        ManagedObject::PrivateKey(block(KeyFormatType::PKCS1, &[0x30, 0])),
        ManagedObject::PublicKey(block(KeyFormatType::X509, &[0x30, 0])),
        ManagedObject::PublicKey(transparent),
        ManagedObject::Certificate(Certificate {
            certificate_type: CertificateType::X509,
            value: Bytes::from(&[0x30, 0x00][..]),
        }),
        ManagedObject::OpaqueObject(OpaqueObject {
            data_type: 0x8000_0001,
            value: Bytes::from(&b"opaque"[..]),
        }),
        ManagedObject::SplitKey {
            fields: SplitKeyFields {
                parts: 3,
                key_part_identifier: 1,
                threshold: 2,
                method: SplitKeyMethod::XOR,
                prime_field_size: None,
            },
            block: aes_block(&[9; 32]),
        },
    ] {
        assert_eq!(register(&object).unwrap().object, object);
    }
}

#[test]
fn malformed_object_bodies_are_invalid_fields() {
    // A transparent RSA public key needs both integers, each a
    // non-negative Big Integer; no other field belongs in it.
    let material = |items| {
        Item::structure(
            Tag::PUBLIC_KEY,
            vec![Item::structure(
                Tag::KEY_BLOCK,
                vec![
                    Item::enumeration(
                        Tag::KEY_FORMAT_TYPE,
                        KeyFormatType::TRANSPARENT_RSA_PUBLIC_KEY.0,
                    ),
                    Item::structure(
                        Tag::KEY_VALUE,
                        vec![Item::structure(Tag::KEY_MATERIAL, items)],
                    ),
                ],
            )],
        )
    };
    let big = |tag, b: &[u8]| Item::new(tag, Value::BigInteger(b.to_vec()));
    let parse = |items| {
        RegisterRequest::parse(&payload(vec![
            Item::enumeration(Tag::OBJECT_TYPE, ObjectType::PUBLIC_KEY.0),
            material(items),
        ]))
    };
    assert!(matches!(
        parse(vec![big(Tag::PUBLIC_EXPONENT, &[0, 0, 0, 0, 0, 1, 0, 1])]),
        Err(KmipError::MissingData(_))
    ));
    assert!(matches!(
        parse(vec![big(Tag::MODULUS, &[0xFF; 8]), big(Tag::PUBLIC_EXPONENT, &[1; 8])]),
        Err(KmipError::InvalidField(_))
    ));
    assert!(matches!(
        parse(vec![big(Tag::MODULUS, &[1; 8]), big(Tag::P, &[1; 8])]),
        Err(KmipError::InvalidField(_))
    ));
    // An empty certificate.
    let cert = RegisterRequest::parse(&payload(vec![
        Item::enumeration(Tag::OBJECT_TYPE, ObjectType::CERTIFICATE.0),
        Item::structure(
            Tag::CERTIFICATE,
            vec![
                Item::enumeration(Tag::CERTIFICATE_TYPE, 1),
                Item::bytes(Tag::CERTIFICATE_VALUE, &[]),
            ],
        ),
    ]));
    assert!(matches!(cert, Err(KmipError::InvalidField(_))));
}

#[test]
fn re_key_key_pair_takes_both_attribute_shapes_and_an_offset() {
    let usage = |mask| Attribute::new("Cryptographic Usage Mask", Value::Integer(mask)).to_item();
    let request = ReKeyKeyPairRequest::parse(&payload(vec![
        Item::text(Tag::PRIVATE_KEY_UNIQUE_IDENTIFIER, "pair/1"),
        Item::new(Tag::OFFSET, Value::Interval(3600)),
        Item::structure(Tag::PRIVATE_KEY_TEMPLATE_ATTRIBUTE, vec![usage(1)]),
        Item::structure(
            Tag::PUBLIC_KEY_ATTRIBUTES,
            vec![Item::int(Tag::CRYPTOGRAPHIC_USAGE_MASK, 2)],
        ),
    ]))
    .unwrap();
    assert_eq!(request.private_key_unique_identifier.as_deref(), Some("pair/1"));
    assert_eq!(request.offset, Some(3600));
    assert_eq!(request.attributes.private.int_value("Cryptographic Usage Mask").unwrap(), Some(1));
    assert_eq!(request.attributes.public.int_value("Cryptographic Usage Mask").unwrap(), Some(2));
    assert!(request.attributes.common.attributes.is_empty());
    // The ID Placeholder; a Common Template-Attribute and Common Attributes at once is refused.
    let bare = ReKeyKeyPairRequest::parse(&payload(vec![])).unwrap();
    assert_eq!(bare.private_key_unique_identifier, None);
    let both = ReKeyKeyPairRequest::parse(&payload(vec![
        Item::structure(Tag::COMMON_TEMPLATE_ATTRIBUTE, vec![]),
        Item::structure(Tag::COMMON_ATTRIBUTES, vec![]),
    ]));
    assert!(matches!(both, Err(KmipError::InvalidField(_))), "{both:?}");
}

#[test]
fn certify_requests_carry_their_type_and_stay_bounded() {
    // KMIP 1.x: Certificate Request; 2.x: Certificate Request Value.
    for tag in [Tag::CERTIFICATE_REQUEST, Tag::CERTIFICATE_REQUEST_VALUE] {
        let request = CertifyRequest::parse(&payload(vec![
            Item::text(Tag::UNIQUE_IDENTIFIER, "pub/1"),
            Item::enumeration(Tag::CERTIFICATE_REQUEST_TYPE, 2),
            Item::bytes(tag, b"csr"),
        ]))
        .unwrap();
        let (kind, bytes) = request.request.unwrap();
        assert_eq!((kind.0, bytes.as_slice()), (2, &b"csr"[..]));
        assert_eq!(request.unique_identifier.as_deref(), Some("pub/1"));
    }
    let by_key = CertifyRequest::parse(&payload(vec![])).unwrap();
    assert!(by_key.request.is_none() && by_key.unique_identifier.is_none());
    // A request without its type, or a type without a request: Invalid Message.
    for fields in [
        vec![Item::bytes(Tag::CERTIFICATE_REQUEST, b"csr")],
        vec![Item::enumeration(Tag::CERTIFICATE_REQUEST_TYPE, 3)],
    ] {
        let got = CertifyRequest::parse(&payload(fields));
        assert!(matches!(got, Err(KmipError::InvalidMessage(_))), "{got:?}");
    }
    // Too large, empty, or given twice: Invalid Field.
    for fields in [
        vec![
            Item::enumeration(Tag::CERTIFICATE_REQUEST_TYPE, 2),
            Item::bytes(Tag::CERTIFICATE_REQUEST, &vec![0x30; MAX_CERTIFICATE_REQUEST + 1]),
        ],
        vec![
            Item::enumeration(Tag::CERTIFICATE_REQUEST_TYPE, 2),
            Item::bytes(Tag::CERTIFICATE_REQUEST, b""),
        ],
        vec![
            Item::enumeration(Tag::CERTIFICATE_REQUEST_TYPE, 2),
            Item::bytes(Tag::CERTIFICATE_REQUEST, b"a"),
            Item::bytes(Tag::CERTIFICATE_REQUEST_VALUE, b"b"),
        ],
    ] {
        let got = CertifyRequest::parse(&payload(fields));
        assert!(matches!(got, Err(KmipError::InvalidField(_))), "{got:?}");
    }
}

#[test]
fn split_key_adjust_and_template_name_payloads_are_typed_and_bounded() {
    use rampart_kmip::enums::{AdjustmentType, SplitKeyMethod};
    use rampart_kmip::payload::{
        AdjustAttributeRequest, CreateSplitKeyRequest, JoinSplitKeyRequest, MAX_TEMPLATE_NAMES,
    };
    let split = |parts: i32, threshold: i32| {
        CreateSplitKeyRequest::parse(&payload(vec![
            Item::enumeration(Tag::OBJECT_TYPE, ObjectType::SPLIT_KEY.0),
            Item::int(Tag::SPLIT_KEY_PARTS, parts),
            Item::int(Tag::SPLIT_KEY_THRESHOLD, threshold),
            Item::enumeration(Tag::SPLIT_KEY_METHOD, SplitKeyMethod::XOR.0),
            Item::structure(Tag::TEMPLATE_ATTRIBUTE, vec![]),
        ]))
    };
    let ok = split(3, 3).unwrap();
    assert_eq!((ok.parts, ok.threshold, ok.method), (3, 3, SplitKeyMethod::XOR));
    assert!(ok.unique_identifier.is_none() && ok.prime_field_size.is_none());
    for (parts, threshold) in [(0, 0), (256, 2), (3, 4), (3, 0)] {
        assert!(matches!(split(parts, threshold), Err(KmipError::InvalidField(_))));
    }

    let join = |n: usize| {
        let mut fields = vec![Item::enumeration(Tag::OBJECT_TYPE, ObjectType::SYMMETRIC_KEY.0)];
        fields.extend((0..n).map(|i| Item::text(Tag::UNIQUE_IDENTIFIER, format!("p/{i}"))));
        JoinSplitKeyRequest::parse(&payload(fields))
    };
    assert_eq!(join(3).unwrap().unique_identifiers.len(), 3);
    assert!(matches!(join(0), Err(KmipError::MissingData(_))));
    assert!(matches!(join(256), Err(KmipError::InvalidField(_))));

    let adjust = AdjustAttributeRequest::parse(&payload(vec![
        Item::enumeration(Tag::ATTRIBUTE_REFERENCE, Tag::CRYPTOGRAPHIC_LENGTH.0),
        Item::enumeration(Tag(0x42_0158), AdjustmentType::DECREMENT.0),
        Item::int(Tag(0x42_0162), 8),
    ]))
    .unwrap();
    assert_eq!(adjust.attribute, "Cryptographic Length");
    assert_eq!(adjust.adjustment, AdjustmentType::DECREMENT);
    assert_eq!(adjust.value.unwrap().value, Value::Integer(8));

    let names = |n: usize| {
        let items = (0..n)
            .map(|i| {
                Name { value: format!("t{i}"), name_type: NameType::UNINTERPRETED_TEXT_STRING }
                    .to_value(Tag::NAME)
            })
            .collect();
        AttributeSet::parse(&Item::structure(Tag::TEMPLATE_ATTRIBUTE, items))
    };
    assert_eq!(names(MAX_TEMPLATE_NAMES).unwrap().templates.len(), MAX_TEMPLATE_NAMES);
    assert!(matches!(names(MAX_TEMPLATE_NAMES + 1), Err(KmipError::InvalidField(_))));
}
