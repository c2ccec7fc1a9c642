//! KMIP object operations PyKMIP's client cannot send, driven with raw
//! TTLV over real TLS against an in-process server on SQLite: vSphere's
//! custom `x-` attributes (Add, Modify, Delete, Locate) with ID
//! Placeholders across one batch; AES-GCM with additional data and the
//! tag checked (and the ciphertext opened with the key Get returned);
//! AES-192 CBC; Get wrapped with the default TTLV encoding; KMIP 2.1
//! Attributes and dates (an Activation Date in the past activates, a
//! Deactivation Date in the past stops encryption but not decryption);
//! KMIP 2.1 Vendor Attributes (the OASIS SASED-M-2-21 and SASED-M-3-21
//! cases, then Add, Modify, Delete and Locate); attributes per key version
//! (Re-key copies them and moves the Names; a REST rotation's version
//! inherits until changed; a per-key store migrates); Locate over
//! thousands of keys (walked a store page at a time, at most 10,000
//! identifiers an answer); and refusals with Result Reasons (a Check
//! against the usage mask with each version's).

use rampart_kmip::enums::{
    BlockCipherMode, CryptographicAlgorithm, LinkType, ObjectType, Operation, ResultReason,
    ResultStatus, State, WrappingMethod,
};
use rampart_kmip::message::{Attribute, ProtocolVersion, RequestMessage, ResponseBatchItem};
use rampart_kmip::tag::Tag;
use rampart_kmip::ttlv::{self, Fields, Item, Value};
use rampart_kmip::Limits;

use crate::kmip_support as support;
use support::{attr, name, ok, uid_of, uids};
use support::{connect, exchange, Deployment, Tls};

async fn batch(
    tls: &mut Tls,
    version: ProtocolVersion,
    ops: Vec<(Operation, Vec<Item>)>,
) -> Vec<ResponseBatchItem> {
    exchange(tls, &RequestMessage::new(version, ops)).await.batch_items
}

async fn one(tls: &mut Tls, op: Operation, fields: Vec<Item>) -> ResponseBatchItem {
    batch(tls, ProtocolVersion::V1_4, vec![(op, fields)]).await.remove(0)
}

fn reason(item: &ResponseBatchItem) -> Option<ResultReason> {
    assert_eq!(item.result_status, ResultStatus::OPERATION_FAILED, "{item:?}");
    item.result_reason
}

fn field(items: &[Item], tag: Tag) -> &Item {
    items.iter().find(|i| i.tag == tag).unwrap_or_else(|| panic!("{tag} missing: {items:?}"))
}

fn indexed(name: &str, index: i32, value: Option<Value>) -> Item {
    Attribute {
        name: name.into(),
        index: Some(index),
        value: value.map(|v| Item::new(Tag::ATTRIBUTE_VALUE, v)),
    }
    .to_item()
}

fn aes(bits: i32, extra: Vec<Item>) -> Vec<Item> {
    let mut attrs = vec![
        attr("Cryptographic Algorithm", Value::Enumeration(CryptographicAlgorithm::AES.0)),
        attr("Cryptographic Length", Value::Integer(bits)),
    ];
    attrs.extend(extra);
    vec![
        Item::enumeration(Tag::OBJECT_TYPE, ObjectType::SYMMETRIC_KEY.0),
        Item::structure(Tag::TEMPLATE_ATTRIBUTE, attrs),
    ]
}

fn text(s: &str) -> Value {
    Value::TextString(s.into())
}

/// A Name attribute's value (Uninterpreted Text String).
/// The values of attribute `name` in a 1.x Get Attributes answer.
fn values(items: &[Item], name: &str) -> Vec<Value> {
    items
        .iter()
        .filter(|i| i.tag == Tag::ATTRIBUTE)
        .map(|i| Attribute::parse(i).unwrap())
        .filter(|a| a.name == name)
        .map(|a| a.value.unwrap().value)
        .collect()
}

async fn create_active(tls: &mut Tls, bits: i32) -> String {
    let items = batch(
        tls,
        ProtocolVersion::V1_4,
        vec![(Operation::CREATE, aes(bits, vec![])), (Operation::ACTIVATE, vec![])],
    )
    .await;
    ok(&items[1]);
    uid_of(&ok(&items[0]))
}

async fn key_bytes(tls: &mut Tls, uid: &str) -> Vec<u8> {
    let got = ok(&one(tls, Operation::GET, vec![Item::text(Tag::UNIQUE_IDENTIFIER, uid)]).await);
    let key = Fields::of(field(&got, Tag::SYMMETRIC_KEY)).unwrap();
    let block = Fields::of(key.required(Tag::KEY_BLOCK).unwrap()).unwrap();
    let value = Fields::of(block.required(Tag::KEY_VALUE).unwrap()).unwrap();
    value.required(Tag::KEY_MATERIAL).unwrap().as_bytes().unwrap().to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vsphere_custom_attributes_are_added_modified_deleted_and_located() {
    let d = Deployment::new("xattrs").await;
    let mut tls = connect(&d.admin, &d.kmip, &rustls::version::TLS12).await;
    // One batch, as vSphere sends it: Create, then Add Attribute and
    // Activate on the ID Placeholder, then Get Attributes.
    let items = batch(
        &mut tls,
        ProtocolVersion::V1_4,
        vec![
            (
                Operation::CREATE,
                aes(
                    256,
                    vec![attr("x-Vendor-Id", text("vc-123")), attr("Name", text("vm-disk-1"))],
                ),
            ),
            (Operation::ADD_ATTRIBUTE, vec![attr("x-Vendor-Key", text("abc"))]),
            (Operation::ACTIVATE, vec![]),
            (Operation::GET_ATTRIBUTES, vec![]),
        ],
    )
    .await;
    let uid = uid_of(&ok(&items[0]));
    assert_eq!(uid, "vm-disk-1/1");
    let added = ok(&items[1]);
    assert_eq!(Attribute::parse(field(&added, Tag::ATTRIBUTE)).unwrap().index, Some(0));
    ok(&items[2]);
    let attrs = ok(&items[3]);
    assert_eq!(values(&attrs, "x-Vendor-Id"), [text("vc-123")]);
    assert_eq!(values(&attrs, "x-Vendor-Key"), [text("abc")]);
    assert_eq!(values(&attrs, "State"), [Value::Enumeration(State::ACTIVE.0)]);

    let id = || Item::text(Tag::UNIQUE_IDENTIFIER, uid.clone());
    let second =
        ok(&one(&mut tls, Operation::ADD_ATTRIBUTE, vec![id(), attr("x-Vendor-Key", text("def"))])
            .await);
    assert_eq!(Attribute::parse(field(&second, Tag::ATTRIBUTE)).unwrap().index, Some(1));
    ok(&one(
        &mut tls,
        Operation::MODIFY_ATTRIBUTE,
        vec![id(), indexed("x-Vendor-Key", 0, Some(text("ghi")))],
    )
    .await);
    let deleted = ok(&one(
        &mut tls,
        Operation::DELETE_ATTRIBUTE,
        vec![
            id(),
            Item::text(Tag::ATTRIBUTE_NAME, "x-Vendor-Key"),
            Item::int(Tag::ATTRIBUTE_INDEX, 1),
        ],
    )
    .await);
    let deleted = Attribute::parse(field(&deleted, Tag::ATTRIBUTE)).unwrap();
    assert_eq!(deleted.value.unwrap().value, text("def"));
    let got = ok(&one(&mut tls, Operation::GET_ATTRIBUTES, vec![id()]).await);
    assert_eq!(values(&got, "x-Vendor-Key"), [text("ghi")]);

    let locate = |value: &str| {
        vec![
            attr("x-Vendor-Key", text(value)),
            attr("Object Type", Value::Enumeration(ObjectType::SYMMETRIC_KEY.0)),
        ]
    };
    let found = ok(&one(&mut tls, Operation::LOCATE, locate("ghi")).await);
    let uids: Vec<&str> = found
        .iter()
        .filter(|i| i.tag == Tag::UNIQUE_IDENTIFIER)
        .map(|i| i.as_text().unwrap())
        .collect();
    assert_eq!(uids, [uid.as_str()]);
    assert_eq!(field(&found, Tag::LOCATED_ITEMS).as_int().unwrap(), 1);
    let none = ok(&one(&mut tls, Operation::LOCATE, locate("def")).await);
    assert!(none.iter().all(|i| i.tag != Tag::UNIQUE_IDENTIFIER), "{none:?}");

    // Server-set and unknown attributes are refused with a reason.
    let state = one(
        &mut tls,
        Operation::ADD_ATTRIBUTE,
        vec![id(), attr("State", Value::Enumeration(State::ACTIVE.0))],
    )
    .await;
    assert_eq!(reason(&state), Some(ResultReason::INVALID_FIELD));
    let unknown =
        one(&mut tls, Operation::ADD_ATTRIBUTE, vec![id(), attr("Frobnication", text("x"))]).await;
    assert_eq!(reason(&unknown), Some(ResultReason::FEATURE_NOT_SUPPORTED));
    let alloc = one(&mut tls, Operation::GET_USAGE_ALLOCATION, vec![id()]).await;
    assert_eq!(reason(&alloc), Some(ResultReason::OPERATION_NOT_SUPPORTED));
    // The key is an ordinary key of the key manager.
    let key = d.store.get_key("vm-disk-1".into()).await.unwrap().unwrap();
    assert_eq!(key.allow.iter().map(ToString::to_string).collect::<Vec<_>>(), ["client:admin"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gcm_with_additional_data_cbc_192_and_ttlv_wrapped_get() {
    let d = Deployment::new("crypto").await;
    let mut tls = connect(&d.admin, &d.kmip, &rustls::version::TLS13).await;
    let uid = create_active(&mut tls, 128).await;
    let key = key_bytes(&mut tls, &uid).await;
    assert_eq!(key.len(), 16);
    let params = |mode: BlockCipherMode| {
        Item::structure(
            Tag::CRYPTOGRAPHIC_PARAMETERS,
            vec![Item::enumeration(Tag::BLOCK_CIPHER_MODE, mode.0)],
        )
    };
    let id = || Item::text(Tag::UNIQUE_IDENTIFIER, uid.clone());
    let plain = b"sixty-four bytes of data for AES-GCM over KMIP, checked twice!!";
    let aad = b"volume 7";
    let enc = ok(&one(
        &mut tls,
        Operation::ENCRYPT,
        vec![
            id(),
            params(BlockCipherMode::GCM),
            Item::bytes(Tag::DATA, plain),
            Item::bytes(Tag::AUTHENTICATED_ENCRYPTION_ADDITIONAL_DATA, aad),
        ],
    )
    .await);
    let ct = field(&enc, Tag::DATA).as_bytes().unwrap().to_vec();
    let nonce: [u8; 12] =
        field(&enc, Tag::IV_COUNTER_NONCE).as_bytes().unwrap().try_into().unwrap();
    let tag: [u8; 16] =
        field(&enc, Tag::AUTHENTICATED_ENCRYPTION_TAG).as_bytes().unwrap().try_into().unwrap();
    // The ciphertext opens with the key Get returned.
    let mut opened = ct.clone();
    rampart_crypto::Gcm::new(&key).unwrap().open(&nonce, aad, &mut opened, &tag).unwrap();
    assert_eq!(opened, plain);
    let decrypt = |tag: [u8; 16]| {
        vec![
            id(),
            params(BlockCipherMode::GCM),
            Item::bytes(Tag::DATA, &ct),
            Item::bytes(Tag::IV_COUNTER_NONCE, &nonce),
            Item::bytes(Tag::AUTHENTICATED_ENCRYPTION_ADDITIONAL_DATA, aad),
            Item::bytes(Tag::AUTHENTICATED_ENCRYPTION_TAG, &tag),
        ]
    };
    let dec = ok(&one(&mut tls, Operation::DECRYPT, decrypt(tag)).await);
    assert_eq!(field(&dec, Tag::DATA).as_bytes().unwrap(), plain);
    let mut bad = tag;
    bad[0] ^= 1;
    let refused = one(&mut tls, Operation::DECRYPT, decrypt(bad)).await;
    assert_eq!(reason(&refused), Some(ResultReason::CRYPTOGRAPHIC_FAILURE));
    let short_iv = one(
        &mut tls,
        Operation::ENCRYPT,
        vec![
            id(),
            params(BlockCipherMode::GCM),
            Item::bytes(Tag::DATA, plain),
            Item::bytes(Tag::IV_COUNTER_NONCE, &[0; 5]),
        ],
    )
    .await;
    assert_eq!(reason(&short_iv), Some(ResultReason::INVALID_FIELD));
    let cfb = one(
        &mut tls,
        Operation::ENCRYPT,
        vec![id(), params(BlockCipherMode::CFB), Item::bytes(Tag::DATA, plain)],
    )
    .await;
    assert_eq!(reason(&cfb), Some(ResultReason::FEATURE_NOT_SUPPORTED));

    // AES-192 CBC round trip.
    let uid192 = create_active(&mut tls, 192).await;
    assert_eq!(key_bytes(&mut tls, &uid192).await.len(), 24);
    let id192 = || Item::text(Tag::UNIQUE_IDENTIFIER, uid192.clone());
    let enc = ok(&one(
        &mut tls,
        Operation::ENCRYPT,
        vec![id192(), params(BlockCipherMode::CBC), Item::bytes(Tag::DATA, b"odd-length")],
    )
    .await);
    let iv = field(&enc, Tag::IV_COUNTER_NONCE).as_bytes().unwrap().to_vec();
    let ct = field(&enc, Tag::DATA).as_bytes().unwrap().to_vec();
    assert_eq!(ct.len(), 16);
    let dec = ok(&one(
        &mut tls,
        Operation::DECRYPT,
        vec![
            id192(),
            params(BlockCipherMode::CBC),
            Item::bytes(Tag::DATA, &ct),
            Item::bytes(Tag::IV_COUNTER_NONCE, &iv),
        ],
    )
    .await);
    assert_eq!(field(&dec, Tag::DATA).as_bytes().unwrap(), b"odd-length");

    // Get wrapped, Encoding Option absent: the TTLV of the Key Value
    // structure, AES-key-wrapped, as a Byte String Key Value.
    let kek_uid = create_active(&mut tls, 256).await;
    let kek = key_bytes(&mut tls, &kek_uid).await;
    let got = ok(&one(
        &mut tls,
        Operation::GET,
        vec![
            id(),
            Item::structure(
                Tag::KEY_WRAPPING_SPECIFICATION,
                vec![
                    Item::enumeration(Tag::WRAPPING_METHOD, WrappingMethod::ENCRYPT.0),
                    Item::structure(
                        Tag::ENCRYPTION_KEY_INFORMATION,
                        vec![Item::text(Tag::UNIQUE_IDENTIFIER, kek_uid.clone())],
                    ),
                ],
            ),
        ],
    )
    .await);
    let block = Fields::of(
        Fields::of(field(&got, Tag::SYMMETRIC_KEY)).unwrap().required(Tag::KEY_BLOCK).unwrap(),
    )
    .unwrap();
    let wrapped = block.required(Tag::KEY_VALUE).unwrap().as_bytes().unwrap();
    let unwrapped = rampart_crypto::kw_unwrap(&kek, wrapped).unwrap();
    let value = ttlv::decode(unwrapped.expose(), &Limits::default()).unwrap();
    assert_eq!(value.tag, Tag::KEY_VALUE);
    assert_eq!(
        Fields::of(&value).unwrap().required(Tag::KEY_MATERIAL).unwrap().as_bytes().unwrap(),
        key
    );
    let info = Fields::of(block.required(Tag::KEY_WRAPPING_DATA).unwrap()).unwrap();
    assert_eq!(
        info.required(Tag::WRAPPING_METHOD).unwrap().as_enum().unwrap(),
        WrappingMethod::ENCRYPT.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kmip_2_1_attributes_and_dates_decide_the_state() {
    let d = Deployment::new("dates").await;
    let mut tls = connect(&d.admin, &d.kmip, &rustls::version::TLS13).await;
    let now = rampart_kms::model::now_ms() / 1000;
    // KMIP 2.1: an Attributes structure; an Activation Date in the past
    // makes the key Active at once.
    let created = ok(&batch(
        &mut tls,
        ProtocolVersion::V2_1,
        vec![(
            Operation::CREATE,
            vec![
                Item::enumeration(Tag::OBJECT_TYPE, ObjectType::SYMMETRIC_KEY.0),
                Item::structure(
                    Tag::ATTRIBUTES,
                    vec![
                        Item::enumeration(
                            Tag::CRYPTOGRAPHIC_ALGORITHM,
                            CryptographicAlgorithm::AES.0,
                        ),
                        Item::int(Tag::CRYPTOGRAPHIC_LENGTH, 256),
                        Item::date_time(Tag::ACTIVATION_DATE, now - 60),
                    ],
                ),
            ],
        )],
    )
    .await[0]);
    let uid = uid_of(&created);
    let id = || Item::text(Tag::UNIQUE_IDENTIFIER, uid.clone());
    let state = |items: &[Item]| {
        let attrs = Fields::of(field(items, Tag::ATTRIBUTES)).unwrap();
        attrs.required(Tag::STATE).unwrap().as_enum().unwrap()
    };
    let got =
        ok(&batch(&mut tls, ProtocolVersion::V2_1, vec![(Operation::GET_ATTRIBUTES, vec![id()])])
            .await[0]);
    assert_eq!(state(&got), State::ACTIVE.0);
    // A Deactivation Date in the past (2.x New Attribute): Deactivated;
    // encryption is refused, decryption still allowed.
    let plain = [7u8; 32];
    let cbc = || {
        Item::structure(
            Tag::CRYPTOGRAPHIC_PARAMETERS,
            vec![Item::enumeration(Tag::BLOCK_CIPHER_MODE, BlockCipherMode::CBC.0)],
        )
    };
    let enc =
        ok(&one(&mut tls, Operation::ENCRYPT, vec![id(), cbc(), Item::bytes(Tag::DATA, &plain)])
            .await);
    let ct = field(&enc, Tag::DATA).as_bytes().unwrap().to_vec();
    let iv = field(&enc, Tag::IV_COUNTER_NONCE).as_bytes().unwrap().to_vec();
    ok(&batch(
        &mut tls,
        ProtocolVersion::V2_1,
        vec![(
            Operation::ADD_ATTRIBUTE,
            vec![
                id(),
                Item::structure(
                    Tag::NEW_ATTRIBUTE,
                    vec![Item::date_time(Tag::DEACTIVATION_DATE, now - 1)],
                ),
            ],
        )],
    )
    .await[0]);
    let got =
        ok(&batch(&mut tls, ProtocolVersion::V2_1, vec![(Operation::GET_ATTRIBUTES, vec![id()])])
            .await[0]);
    assert_eq!(state(&got), State::DEACTIVATED.0);
    let refused =
        one(&mut tls, Operation::ENCRYPT, vec![id(), cbc(), Item::bytes(Tag::DATA, &plain)]).await;
    assert_eq!(reason(&refused), Some(ResultReason::ILLEGAL_OPERATION));
    let dec = ok(&one(
        &mut tls,
        Operation::DECRYPT,
        vec![id(), cbc(), Item::bytes(Tag::DATA, &ct), Item::bytes(Tag::IV_COUNTER_NONCE, &iv)],
    )
    .await);
    assert_eq!(field(&dec, Tag::DATA).as_bytes().unwrap(), plain);
    // A key cannot take an Activation Date once Active: Permission Denied
    // in KMIP 1.x (the profiles' SKLC-M-3-14), Wrong Key Lifecycle State
    // from 2.0.
    let late = one(
        &mut tls,
        Operation::MODIFY_ATTRIBUTE,
        vec![id(), indexed("Activation Date", 0, Some(Value::DateTime(now)))],
    )
    .await;
    assert_eq!(reason(&late), Some(ResultReason::PERMISSION_DENIED));

    // Re-key: a new version; the new object links back, the old forward.
    let new = uid_of(&ok(&one(&mut tls, Operation::RE_KEY, vec![id()]).await));
    let name = uid.rsplit_once('/').unwrap().0;
    assert_eq!(new, format!("{name}/2"));
    let link = |kind: LinkType, to: &str| {
        Value::Structure(vec![
            Item::enumeration(Tag::LINK_TYPE, kind.0),
            Item::text(Tag::LINKED_OBJECT_IDENTIFIER, to),
        ])
    };
    for (of, kind, to) in
        [(&new, LinkType::REPLACED_OBJECT, &uid), (&uid, LinkType::REPLACEMENT_OBJECT, &new)]
    {
        let got = ok(&one(
            &mut tls,
            Operation::GET_ATTRIBUTES,
            vec![
                Item::text(Tag::UNIQUE_IDENTIFIER, of.clone()),
                Item::text(Tag::ATTRIBUTE_NAME, "Link"),
            ],
        )
        .await);
        assert_eq!(values(&got, "Link"), [link(kind, to)], "{of}");
    }
    let versions = d.store.get_key(name.to_owned()).await.unwrap().unwrap().versions;
    assert_eq!(versions.len(), 2);
}

/// A KMIP 2.x Vendor Attribute (`x`), as the OASIS test cases carry it.
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

fn vendor_reference(name: &str) -> Item {
    Item::structure(
        Tag::ATTRIBUTE_REFERENCE,
        vec![Item::text(Tag::VENDOR_IDENTIFICATION, "x"), Item::text(Tag::ATTRIBUTE_NAME, name)],
    )
}

async fn v21(tls: &mut Tls, op: Operation, fields: Vec<Item>) -> ResponseBatchItem {
    batch(tls, ProtocolVersion::V2_1, vec![(op, fields)]).await.remove(0)
}

/// OASIS KMIP Profiles v2.1 SASED-M-2-21 and SASED-M-3-21 (Register a
/// Secret Data with Vendor Attributes; Get Attributes by a vendor
/// Attribute Reference), then the 2.x attribute operations on Vendor
/// Attributes, and the same attributes seen by a KMIP 1.4 client as `x-`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kmip_2_1_vendor_attributes_are_registered_read_changed_and_located() {
    let d = Deployment::new("vendor").await;
    let mut tls = connect(&d.admin, &d.kmip, &rustls::version::TLS13).await;
    let mut attributes = vec![Item::text(Tag::OBJECT_GROUP, "SASED-M-2-21-group")];
    for n in 1..=4 {
        attributes.push(vendor(&format!("CustomAttribute{n}"), &format!("CustomValue{n}")));
    }
    attributes.push(Item::structure(
        Tag::NAME,
        vec![
            Item::text(Tag::NAME_VALUE, "SASED-M-2-21-name"),
            Item::enumeration(Tag::NAME_TYPE, 1),
        ],
    ));
    let secret = Item::structure(
        Tag::SECRET_DATA,
        vec![
            Item::enumeration(Tag::SECRET_DATA_TYPE, 1),
            Item::structure(
                Tag::KEY_BLOCK,
                vec![
                    Item::enumeration(Tag::KEY_FORMAT_TYPE, 2),
                    Item::structure(
                        Tag::KEY_VALUE,
                        vec![Item::bytes(Tag::KEY_MATERIAL, &[0x2a; 32])],
                    ),
                ],
            ),
        ],
    );
    let registered = ok(&v21(
        &mut tls,
        Operation::REGISTER,
        vec![
            Item::enumeration(Tag::OBJECT_TYPE, ObjectType::SECRET_DATA.0),
            Item::structure(Tag::ATTRIBUTES, attributes),
            secret,
        ],
    )
    .await);
    let uid = uid_of(&registered);
    let id = || Item::text(Tag::UNIQUE_IDENTIFIER, uid.clone());

    // SASED-M-3-21 step 1: exactly the one Vendor Attribute comes back.
    let got = ok(&v21(
        &mut tls,
        Operation::GET_ATTRIBUTES,
        vec![id(), vendor_reference("CustomAttribute4")],
    )
    .await);
    assert_eq!(
        got,
        [id(), Item::structure(Tag::ATTRIBUTES, vec![vendor("CustomAttribute4", "CustomValue4")])]
    );
    // Without references: all four among the standard attributes.
    let all = ok(&v21(&mut tls, Operation::GET_ATTRIBUTES, vec![id()]).await);
    let all = field(&all, Tag::ATTRIBUTES).children().unwrap().to_vec();
    for n in 1..=4 {
        assert!(all.contains(&vendor(&format!("CustomAttribute{n}"), &format!("CustomValue{n}"))));
    }
    assert!(all.contains(&Item::text(Tag::OBJECT_GROUP, "SASED-M-2-21-group")));
    // Get Attribute List names them by vendor references.
    let list = ok(&v21(&mut tls, Operation::GET_ATTRIBUTE_LIST, vec![id()]).await);
    assert!(list.contains(&vendor_reference("CustomAttribute1")), "{list:?}");
    assert!(list.contains(&Item::enumeration(Tag::ATTRIBUTE_REFERENCE, Tag::OBJECT_GROUP.0)));

    // Locate by a Vendor Attribute.
    let locate = |value: &str| {
        vec![Item::structure(Tag::ATTRIBUTES, vec![vendor("CustomAttribute2", value)])]
    };
    let found = ok(&v21(&mut tls, Operation::LOCATE, locate("CustomValue2")).await);
    assert_eq!(uids(&found), [uid.as_str()]);
    let none = ok(&v21(&mut tls, Operation::LOCATE, locate("CustomValue9")).await);
    assert!(uids(&none).is_empty(), "{none:?}");

    // Add (New Attribute), Modify (Current and New), Delete (Attribute
    // Reference).
    ok(&v21(
        &mut tls,
        Operation::ADD_ATTRIBUTE,
        vec![id(), Item::structure(Tag::NEW_ATTRIBUTE, vec![vendor("CustomAttribute5", "five")])],
    )
    .await);
    ok(&v21(
        &mut tls,
        Operation::MODIFY_ATTRIBUTE,
        vec![
            id(),
            Item::structure(Tag::CURRENT_ATTRIBUTE, vec![vendor("CustomAttribute5", "five")]),
            Item::structure(Tag::NEW_ATTRIBUTE, vec![vendor("CustomAttribute5", "six")]),
        ],
    )
    .await);
    ok(&v21(
        &mut tls,
        Operation::DELETE_ATTRIBUTE,
        vec![id(), vendor_reference("CustomAttribute1")],
    )
    .await);
    // A KMIP 1.4 client sees the same attributes as `x-` ones.
    let old = ok(&one(&mut tls, Operation::GET_ATTRIBUTES, vec![id()]).await);
    assert_eq!(values(&old, "x-CustomAttribute5"), [text("six")]);
    assert_eq!(values(&old, "x-CustomAttribute2"), [text("CustomValue2")]);
    assert!(values(&old, "x-CustomAttribute1").is_empty());
    // Another vendor's attributes are refused with a reason.
    let acme = v21(
        &mut tls,
        Operation::ADD_ATTRIBUTE,
        vec![
            id(),
            Item::structure(
                Tag::NEW_ATTRIBUTE,
                vec![Item::structure(
                    Tag::ATTRIBUTE,
                    vec![
                        Item::text(Tag::VENDOR_IDENTIFICATION, "acme.example"),
                        Item::text(Tag::ATTRIBUTE_NAME, "a"),
                        Item::text(Tag::ATTRIBUTE_VALUE, "b"),
                    ],
                )],
            ),
        ],
    )
    .await;
    assert_eq!(reason(&acme), Some(ResultReason::FEATURE_NOT_SUPPORTED));
}

/// Each KMIP object (key version) has its own attributes: Re-key gives
/// the new one a copy and moves the Names; changes to one version leave
/// the other alone; Locate tells them apart. A store whose attributes
/// were kept per key (schema step 7) is migrated to the same state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_key_version_has_its_own_attributes_and_old_stores_migrate() {
    let d = Deployment::new("perversion").await;
    let mut tls = connect(&d.admin, &d.kmip, &rustls::version::TLS12).await;
    let items = batch(
        &mut tls,
        ProtocolVersion::V1_4,
        vec![
            (
                Operation::CREATE,
                aes(
                    256,
                    vec![
                        attr("Name", text("per-version")),
                        attr("Object Group", text("disks")),
                        attr("x-tier", text("gold")),
                    ],
                ),
            ),
            (Operation::ACTIVATE, vec![]),
            (Operation::RE_KEY, vec![]),
        ],
    )
    .await;
    let v1 = uid_of(&ok(&items[0]));
    let v2 = uid_of(&ok(&items[2]));
    assert_eq!((v1.as_str(), v2.as_str()), ("per-version/1", "per-version/2"));
    let get = |uid: &str| vec![Item::text(Tag::UNIQUE_IDENTIFIER, uid)];
    let check = |attrs: &[Item], named: bool, tier: &str| {
        assert_eq!(values(attrs, "x-tier"), [text(tier)]);
        assert_eq!(values(attrs, "Object Group"), [text("disks")]);
        let names = values(attrs, "Name");
        if named {
            assert_eq!(names, [name("per-version")]);
        } else {
            assert!(names.is_empty(), "{names:?}");
        }
    };
    let a1 = ok(&one(&mut tls, Operation::GET_ATTRIBUTES, get(&v1)).await);
    let a2 = ok(&one(&mut tls, Operation::GET_ATTRIBUTES, get(&v2)).await);
    check(&a1, false, "gold");
    check(&a2, true, "gold");

    // A change to the new version leaves the old one alone, and back.
    ok(&one(
        &mut tls,
        Operation::MODIFY_ATTRIBUTE,
        vec![
            Item::text(Tag::UNIQUE_IDENTIFIER, v2.clone()),
            indexed("x-tier", 0, Some(text("silver"))),
        ],
    )
    .await);
    ok(&one(
        &mut tls,
        Operation::ADD_ATTRIBUTE,
        vec![Item::text(Tag::UNIQUE_IDENTIFIER, v1.clone()), attr("x-retired", text("yes"))],
    )
    .await);
    let a1 = ok(&one(&mut tls, Operation::GET_ATTRIBUTES, get(&v1)).await);
    let a2 = ok(&one(&mut tls, Operation::GET_ATTRIBUTES, get(&v2)).await);
    check(&a1, false, "gold");
    check(&a2, true, "silver");
    assert_eq!(values(&a1, "x-retired"), [text("yes")]);
    assert!(values(&a2, "x-retired").is_empty());
    for (tier, uid) in [("gold", &v1), ("silver", &v2)] {
        let found = ok(&one(&mut tls, Operation::LOCATE, vec![attr("x-tier", text(tier))]).await);
        assert_eq!(uids(&found), [uid.as_str()], "{tier}");
    }
    // The Name stays with the newest version.
    let found =
        ok(&one(&mut tls, Operation::LOCATE, vec![attr("Name", name("per-version"))]).await);
    assert_eq!(uids(&found), [v2.as_str()]);

    // A version a REST rotation adds shows version 2's attributes (and
    // the Name) until a change gives it its own copy.
    let rest =
        rampart_kms::client::KmsClient::with_policy(&d.admin, crate::common::fast()).unwrap();
    rest.rotate_key("per-version").await.unwrap();
    let v3 = "per-version/3".to_owned();
    let a3 = ok(&one(&mut tls, Operation::GET_ATTRIBUTES, get(&v3)).await);
    check(&a3, true, "silver");
    ok(&one(
        &mut tls,
        Operation::MODIFY_ATTRIBUTE,
        vec![
            Item::text(Tag::UNIQUE_IDENTIFIER, v3.clone()),
            indexed("x-tier", 0, Some(text("bronze"))),
        ],
    )
    .await);
    let a2 = ok(&one(&mut tls, Operation::GET_ATTRIBUTES, get(&v2)).await);
    let a3 = ok(&one(&mut tls, Operation::GET_ATTRIBUTES, get(&v3)).await);
    check(&a2, false, "silver");
    check(&a3, true, "bronze");

    // An old store: the attributes kept per key (the client-set ones
    // version 3 has; such a store kept no Digest) in
    // `kms_kmip_attributes`, schema version 7. Opening it migrates them.
    let db = rusqlite::Connection::open(d.dir.join("data").join("kms.db")).unwrap();
    db.execute_batch(
        "BEGIN;
         INSERT INTO kms_kmip_attributes (key_name, name, position, value)
             SELECT key_name, name, position, value FROM kms_kmip_version_attributes
             WHERE version = 3 AND name IN ('Name', 'Object Group', 'x-tier');
         DELETE FROM kms_kmip_version_attributes;
         DELETE FROM kms_schema;
         INSERT INTO kms_schema VALUES (7);
         COMMIT;",
    )
    .unwrap();
    let store = rampart_kms::store::open(None, &d.dir.join("data")).await.unwrap();
    let old: i64 =
        db.query_row("SELECT count(*) FROM kms_kmip_attributes", [], |r| r.get(0)).unwrap();
    assert_eq!(old, 0);
    let rows = |version| {
        let store = std::sync::Arc::clone(&store);
        async move {
            let rows = store.kmip_attributes("per-version".into(), Some(version)).await.unwrap();
            let mut names: Vec<String> = rows.into_iter().map(|r| r.name).collect();
            names.sort();
            names
        }
    };
    assert_eq!(rows(1).await, ["Object Group", "x-tier"]);
    assert_eq!(rows(2).await, ["Object Group", "x-tier"]);
    assert_eq!(rows(3).await, ["Name", "Object Group", "x-tier"]);
    let a1 = ok(&one(&mut tls, Operation::GET_ATTRIBUTES, get(&v1)).await);
    check(&a1, false, "bronze");
}

/// A Locate item with the answer window.
fn locate_window(criteria: Vec<Item>, offset: Option<i32>, max: Option<i32>) -> Vec<Item> {
    let mut fields = Vec::new();
    if let Some(max) = max {
        fields.push(Item::int(Tag::MAXIMUM_ITEMS, max));
    }
    if let Some(offset) = offset {
        fields.push(Item::int(Tag::OFFSET_ITEMS, offset));
    }
    fields.extend(criteria);
    fields
}

/// Locate by an Object Group most keys share walks the keys holding it a
/// store page (1,000) at a time in key order, so the answer, and every
/// window of it across page boundaries, is the same as one sorted list;
/// on SQLite that walk is one range of the (name, value, key) index, with
/// no sort of every key holding the value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locate_by_a_shared_object_group_walks_its_keys_page_by_page() {
    let d = Deployment::new("locate_group").await;
    let mut tls = connect(&d.admin, &d.kmip, &rustls::version::TLS12).await;
    let group = |g: &str| attr("Object Group", text(g));
    let mut fleet = Vec::new();
    let mut other = Vec::new();
    for round in 0..9 {
        let (count, g) = if round < 7 { (300, "fleet") } else { (25, "other") };
        let ops = (0..count).map(|_| (Operation::CREATE, aes(256, vec![group(g)]))).collect();
        for item in batch(&mut tls, ProtocolVersion::V1_4, ops).await {
            let uid = uid_of(&ok(&item));
            if g == "fleet" {
                fleet.push(uid)
            } else {
                other.push(uid)
            }
        }
    }
    let named = uid_of(&ok(&one(
        &mut tls,
        Operation::CREATE,
        aes(256, vec![attr("Name", text("special")), group("fleet")]),
    )
    .await));
    fleet.push(named.clone());
    // Key order: the key name before the version.
    fleet.sort_by(|a, b| a.split('/').next().cmp(&b.split('/').next()));
    other.sort_by(|a, b| a.split('/').next().cmp(&b.split('/').next()));

    let all =
        ok(&one(&mut tls, Operation::LOCATE, locate_window(vec![group("fleet")], None, None))
            .await);
    assert_eq!(field(&all, Tag::LOCATED_ITEMS).as_int().unwrap(), 2101);
    assert_eq!(uids(&all), fleet);
    // A window crossing the store pages at the 1,000th and 2,000th key.
    let window = ok(&one(
        &mut tls,
        Operation::LOCATE,
        locate_window(vec![group("fleet")], Some(999), Some(1002)),
    )
    .await);
    assert_eq!(field(&window, Tag::LOCATED_ITEMS).as_int().unwrap(), 2101);
    assert_eq!(uids(&window), fleet[999..2001]);
    let tail = ok(&one(
        &mut tls,
        Operation::LOCATE,
        locate_window(vec![group("fleet")], Some(2100), None),
    )
    .await);
    assert_eq!(uids(&tail), fleet[2100..]);
    let both = ok(&one(
        &mut tls,
        Operation::LOCATE,
        locate_window(vec![group("fleet"), attr("Name", name("special"))], None, None),
    )
    .await);
    assert_eq!(uids(&both), std::slice::from_ref(&named));
    let elsewhere = ok(&one(
        &mut tls,
        Operation::LOCATE,
        locate_window(vec![group("other"), attr("Name", name("special"))], None, None),
    )
    .await);
    assert_eq!(uids(&elsewhere), Vec::<String>::new());
    let others =
        ok(&one(&mut tls, Operation::LOCATE, locate_window(vec![group("other")], None, None))
            .await);
    assert_eq!(uids(&others), other);
    // A Name taken in the group is still refused to a new object.
    let taken =
        one(&mut tls, Operation::CREATE, aes(256, vec![attr("Name", name("special"))])).await;
    assert_eq!(reason(&taken), Some(ResultReason::OBJECT_ALREADY_EXISTS));

    let db = rusqlite::Connection::open(d.dir.join("data").join("kms.db")).unwrap();
    let plan: Vec<String> = db
        .prepare(
            "EXPLAIN QUERY PLAN SELECT DISTINCT key_name FROM kms_kmip_version_attributes
             WHERE name = 'Object Group' AND value = 'x' AND key_name > '' ORDER BY key_name LIMIT 1000",
        )
        .unwrap()
        .query_map([], |r| r.get::<_, String>(3))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(plan.iter().any(|step| step.contains("kms_kmip_version_attributes_find")), "{plan:?}");
    assert!(plan.iter().all(|step| !step.contains("TEMP B-TREE")), "{plan:?}");
}

/// However many keys match, one Locate answers at most 10,000 identifiers
/// (a page of the REST lists); Located Items counts every match and
/// Offset Items walks on to the rest. Without Located Items (KMIP 1.2),
/// the walk ends with the window.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_locate_answers_at_most_ten_thousand_identifiers_and_counts_every_match() {
    let d = Deployment::new("locate_max").await;
    let unseal = rampart_kms::deployment::read_unseal_key(
        &d.dir.join("data").join(rampart_kms::deployment::files::UNSEAL_KEY),
    )
    .unwrap();
    let root = rampart_kms::keys::RootKey::new(&unseal).unwrap();
    let names = crate::common::fill_keys(d.store.as_ref(), &root, "bulk-", 10_050).await;
    let mut tls = connect(&d.admin, &d.kmip, &rustls::version::TLS12).await;
    let first = ok(&one(&mut tls, Operation::LOCATE, locate_window(Vec::new(), None, None)).await);
    assert_eq!(field(&first, Tag::LOCATED_ITEMS).as_int().unwrap(), 10_050);
    let first = uids(&first);
    assert_eq!(first.len(), 10_000);
    let rest =
        ok(&one(&mut tls, Operation::LOCATE, locate_window(Vec::new(), Some(10_000), None)).await);
    let mut all = first;
    all.extend(uids(&rest));
    let expected: Vec<String> = names.iter().map(|name| format!("{name}/1")).collect();
    assert_eq!(all, expected);
    // Maximum Items below the cap is kept.
    let few =
        ok(&one(&mut tls, Operation::LOCATE, locate_window(Vec::new(), Some(5), Some(3))).await);
    assert_eq!(uids(&few), expected[5..8]);
    // A KMIP 1.2 client gets no Located Items, and its walk ends with the
    // window: the same identifiers.
    for (offset, max, want) in
        [(Some(5), Some(3), &expected[5..8]), (None, None, &expected[..10_000])]
    {
        let locate = (Operation::LOCATE, locate_window(Vec::new(), offset, max));
        let found = ok(&batch(&mut tls, ProtocolVersion::V1_2, vec![locate]).await[0]);
        assert!(found.iter().all(|i| i.tag != Tag::LOCATED_ITEMS), "{:?}", &found[..1]);
        assert_eq!(uids(&found), want);
    }
}

/// A Check asking for a usage the key's Cryptographic Usage Mask does not
/// allow fails with the Result Reason each version's Check SHALL return:
/// Permission Denied in KMIP 1.4 (§11.11), Incompatible Cryptographic
/// Usage Mask in KMIP 2.1 (§6.1.7.1), as BL-M-3-21 expects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_against_the_usage_mask_fails_with_each_versions_result_reason() {
    let d = Deployment::new("check-mask").await;
    let mut tls = connect(&d.admin, &d.kmip, &rustls::version::TLS13).await;
    // Encrypt (0x04) only.
    let created = ok(&one(
        &mut tls,
        Operation::CREATE,
        aes(128, vec![attr("Cryptographic Usage Mask", Value::Integer(0x04))]),
    )
    .await);
    let uid = uid_of(&created);
    let check = |mask: i32| {
        vec![
            Item::text(Tag::UNIQUE_IDENTIFIER, uid.clone()),
            Item::int(Tag::CRYPTOGRAPHIC_USAGE_MASK, mask),
        ]
    };
    ok(&one(&mut tls, Operation::CHECK, check(0x04)).await);
    // Decrypt (0x08) is not allowed.
    let v14 = one(&mut tls, Operation::CHECK, check(0x08)).await;
    assert_eq!(reason(&v14), Some(ResultReason::PERMISSION_DENIED));
    let v21 = v21(&mut tls, Operation::CHECK, check(0x08)).await;
    assert_eq!(reason(&v21), Some(ResultReason::INCOMPATIBLE_CRYPTOGRAPHIC_USAGE_MASK));
}
