//! KMIP 1.x Templates (KMIP 1.4 §2.2.6, §2.1.8) over raw TTLV on both
//! stores: Register of a Template, Get, Get Attributes, Locate and Destroy
//! of it; Create, Register, Derive Key, Re-key and Create Key Pair naming
//! Templates take their attributes, the request's own and a later
//! Template's single-instance values overriding, multi-instance ones
//! united; the refusals (a Template that does not exist, a Template
//! holding a Name, a Template without one, a KMIP 2.1 client registering
//! one); Batch Error Continuation Undo removing a registered Template.

use rampart_kmip::enums::{
    usage_mask, BatchErrorContinuationOption, CryptographicAlgorithm, DerivationMethod,
    HashingAlgorithm, KeyFormatType, ObjectType, Operation, ResultReason, ResultStatus,
};
use rampart_kmip::message::{Attribute, ProtocolVersion, RequestMessage, ResponseBatchItem};
use rampart_kmip::tag::Tag;
use rampart_kmip::ttlv::{Fields, Item, Value};

use crate::common::Backend;
use crate::kmip_support as support;
use support::{attr, connect, exchange, ok, reason, uid_of, Deployment, Tls};

async fn batch(
    tls: &mut Tls,
    version: ProtocolVersion,
    ops: Vec<(Operation, Vec<Item>)>,
) -> Vec<ResponseBatchItem> {
    exchange(tls, &RequestMessage::new(version, ops)).await.batch_items
}

async fn one(tls: &mut Tls, op: Operation, fields: Vec<Item>) -> ResponseBatchItem {
    support::one(tls, op, fields).await
}

fn name_item(tag: Tag, s: &str) -> Item {
    Item::structure(tag, vec![Item::text(Tag::NAME_VALUE, s), Item::enumeration(Tag::NAME_TYPE, 1)])
}

fn name_attr(s: &str) -> Item {
    let Value::Structure(fields) = name_item(Tag::ATTRIBUTE_VALUE, s).value else { unreachable!() };
    attr("Name", Value::Structure(fields))
}

/// A Template-Attribute naming `templates` and giving `attributes`.
fn template_attribute(tag: Tag, templates: &[&str], attributes: Vec<Item>) -> Item {
    let mut items: Vec<Item> = templates.iter().map(|t| name_item(Tag::NAME, t)).collect();
    items.extend(attributes);
    Item::structure(tag, items)
}

/// Register of a Template named `name` giving `attributes`.
fn register_template(name: &str, attributes: Vec<Item>) -> Vec<Item> {
    vec![
        Item::enumeration(Tag::OBJECT_TYPE, ObjectType::TEMPLATE.0),
        template_attribute(Tag::TEMPLATE_ATTRIBUTE, &[], vec![name_attr(name)]),
        Item::structure(Tag::TEMPLATE, attributes),
    ]
}

fn alg(a: CryptographicAlgorithm) -> Item {
    attr("Cryptographic Algorithm", Value::Enumeration(a.0))
}

fn len(bits: i32) -> Item {
    attr("Cryptographic Length", Value::Integer(bits))
}

fn mask(m: i32) -> Item {
    attr("Cryptographic Usage Mask", Value::Integer(m))
}

fn group(g: &str) -> Item {
    attr("Object Group", Value::TextString(g.into()))
}

/// The 1.x Get Attributes answer of `uid`: every attribute's values.
async fn attributes(tls: &mut Tls, uid: &str) -> Vec<Attribute> {
    let got =
        ok(&one(tls, Operation::GET_ATTRIBUTES, vec![Item::text(Tag::UNIQUE_IDENTIFIER, uid)])
            .await);
    got.iter().filter(|i| i.tag == Tag::ATTRIBUTE).map(|i| Attribute::parse(i).unwrap()).collect()
}

fn values(attrs: &[Attribute], name: &str) -> Vec<Value> {
    attrs
        .iter()
        .filter(|a| a.name == name)
        .map(|a| a.value.as_ref().unwrap().value.clone())
        .collect()
}

fn texts(attrs: &[Attribute], name: &str) -> Vec<String> {
    let mut out: Vec<String> = values(attrs, name)
        .into_iter()
        .map(|v| match v {
            Value::TextString(s) => s,
            other => panic!("{name}: {other:?}"),
        })
        .collect();
    out.sort();
    out
}

async fn create(tls: &mut Tls, templates: &[&str], own: Vec<Item>) -> ResponseBatchItem {
    one(
        tls,
        Operation::CREATE,
        vec![
            Item::enumeration(Tag::OBJECT_TYPE, ObjectType::SYMMETRIC_KEY.0),
            template_attribute(Tag::TEMPLATE_ATTRIBUTE, templates, own),
        ],
    )
    .await
}

async fn templates_register_get_locate_and_are_used_by_create(backend: Backend) {
    let d = Deployment::on(backend, "tpl-create").await;
    let mut tls = connect(&d.admin, &d.kmip, &rustls::version::TLS13).await;
    let aes128 = vec![
        alg(CryptographicAlgorithm::AES),
        len(128),
        mask(usage_mask::ENCRYPT | usage_mask::DECRYPT),
        group("from-template"),
        attr("Object Type", Value::Enumeration(ObjectType::SYMMETRIC_KEY.0)),
    ];
    let registered =
        ok(&one(&mut tls, Operation::REGISTER, register_template("aes-128", aes128.clone())).await);
    let template = uid_of(&registered);

    // Get answers the Template structure as registered.
    let got =
        ok(&one(&mut tls, Operation::GET, vec![Item::text(Tag::UNIQUE_IDENTIFIER, &template)])
            .await);
    let object_type = got.iter().find(|i| i.tag == Tag::OBJECT_TYPE).unwrap().as_enum().unwrap();
    assert_eq!(object_type, ObjectType::TEMPLATE.0);
    let body = got.iter().find(|i| i.tag == Tag::TEMPLATE).unwrap();
    assert_eq!(body.children().unwrap(), aes128.as_slice());

    // Get Attributes: the Template's own (its Name, its type), no State
    // and nothing describing key material.
    let own = attributes(&mut tls, &template).await;
    assert_eq!(values(&own, "Object Type"), [Value::Enumeration(ObjectType::TEMPLATE.0)]);
    assert!(values(&own, "State").is_empty(), "{own:?}");
    assert!(values(&own, "Digest").is_empty(), "{own:?}");
    assert!(values(&own, "Cryptographic Algorithm").is_empty(), "{own:?}");
    assert_eq!(values(&own, "Name").len(), 1);

    // Locate finds it by Object Type and Name.
    let located = ok(&one(
        &mut tls,
        Operation::LOCATE,
        vec![attr("Object Type", Value::Enumeration(ObjectType::TEMPLATE.0)), name_attr("aes-128")],
    )
    .await);
    assert_eq!(uid_of(&located), template);

    // Create naming it takes its algorithm, length, mask and group.
    let key = uid_of(&ok(&create(&mut tls, &["aes-128"], vec![name_attr("k-plain")]).await));
    let a = attributes(&mut tls, &key).await;
    assert_eq!(values(&a, "Cryptographic Algorithm"), [Value::Enumeration(3)]);
    assert_eq!(values(&a, "Cryptographic Length"), [Value::Integer(128)]);
    assert_eq!(
        values(&a, "Cryptographic Usage Mask"),
        [Value::Integer(usage_mask::ENCRYPT | usage_mask::DECRYPT)]
    );
    assert_eq!(texts(&a, "Object Group"), ["from-template"]);
    assert_eq!(values(&a, "Object Type"), [Value::Enumeration(ObjectType::SYMMETRIC_KEY.0)]);

    // The request's own single-instance attributes override, its
    // multi-instance ones are added to the Template's.
    let key = uid_of(&ok(&create(
        &mut tls,
        &["aes-128"],
        vec![len(256), group("own"), name_attr("k-over")],
    )
    .await));
    let a = attributes(&mut tls, &key).await;
    assert_eq!(values(&a, "Cryptographic Length"), [Value::Integer(256)]);
    assert_eq!(texts(&a, "Object Group"), ["from-template", "own"]);

    // Two Templates: the later one's single-instance values win.
    let mac = vec![mask(usage_mask::MAC_GENERATE), group("second")];
    ok(&one(&mut tls, Operation::REGISTER, register_template("mac-mask", mac)).await);
    let key = uid_of(&ok(&create(&mut tls, &["aes-128", "mac-mask"], vec![]).await));
    let a = attributes(&mut tls, &key).await;
    assert_eq!(values(&a, "Cryptographic Usage Mask"), [Value::Integer(usage_mask::MAC_GENERATE)]);
    assert_eq!(values(&a, "Cryptographic Length"), [Value::Integer(128)]);
    assert_eq!(texts(&a, "Object Group"), ["from-template", "second"]);

    // A Template Name nothing holds: Item Not Found (KMIP 1.4 §11.1);
    // a key's Name is no Template either.
    let missing = create(&mut tls, &["no-such-template"], vec![]).await;
    assert_eq!(reason(&missing), ResultReason::ITEM_NOT_FOUND);
    let not_template = create(&mut tls, &["k-plain"], vec![]).await;
    assert_eq!(reason(&not_template), ResultReason::ITEM_NOT_FOUND);

    // Destroyed, it gives nothing any more.
    ok(&one(&mut tls, Operation::DESTROY, vec![Item::text(Tag::UNIQUE_IDENTIFIER, &template)])
        .await);
    let gone = create(&mut tls, &["aes-128"], vec![]).await;
    assert_eq!(reason(&gone), ResultReason::ITEM_NOT_FOUND);

    // Each operation is audited.
    let audit = d.audit_ops().await;
    let ok_count = |op: &str| audit.iter().filter(|(_, o, r)| o == op && r == "ok").count();
    assert_eq!(ok_count("kmip.register"), 2, "{audit:?}");
    assert_eq!(ok_count("kmip.create"), 3, "{audit:?}");
    assert_eq!(ok_count("kmip.destroy"), 1, "{audit:?}");
}
on_each_store!(templates_register_get_locate_and_are_used_by_create);

async fn templates_feed_register_derive_rekey_and_key_pairs(backend: Backend) {
    let d = Deployment::on(backend, "tpl-ops").await;
    let mut tls = connect(&d.admin, &d.kmip, &rustls::version::TLS13).await;
    let derive_base = vec![
        alg(CryptographicAlgorithm::HMAC_SHA256),
        len(256),
        mask(usage_mask::DERIVE_KEY),
        group("derivable"),
    ];
    ok(&one(&mut tls, Operation::REGISTER, register_template("derive-base", derive_base)).await);
    ok(&one(
        &mut tls,
        Operation::REGISTER,
        register_template("enc-only", vec![mask(usage_mask::ENCRYPT), group("enc")]),
    )
    .await);

    // Register of a symmetric key naming a Template.
    let material = [0x42u8; 32];
    let block = Item::structure(
        Tag::KEY_BLOCK,
        vec![
            Item::enumeration(Tag::KEY_FORMAT_TYPE, KeyFormatType::RAW.0),
            Item::structure(Tag::KEY_VALUE, vec![Item::bytes(Tag::KEY_MATERIAL, &material)]),
        ],
    );
    let base = uid_of(&ok(&one(
        &mut tls,
        Operation::REGISTER,
        vec![
            Item::enumeration(Tag::OBJECT_TYPE, ObjectType::SYMMETRIC_KEY.0),
            template_attribute(Tag::TEMPLATE_ATTRIBUTE, &["derive-base"], vec![]),
            Item::structure(Tag::SYMMETRIC_KEY, vec![block]),
        ],
    )
    .await));
    let a = attributes(&mut tls, &base).await;
    assert_eq!(
        values(&a, "Cryptographic Algorithm"),
        [Value::Enumeration(CryptographicAlgorithm::HMAC_SHA256.0)]
    );
    assert_eq!(texts(&a, "Object Group"), ["derivable"]);
    ok(&one(&mut tls, Operation::ACTIVATE, vec![Item::text(Tag::UNIQUE_IDENTIFIER, &base)]).await);

    // Derive Key naming a Template: the derived key's attributes.
    let derived = uid_of(&ok(&one(
        &mut tls,
        Operation::DERIVE_KEY,
        vec![
            Item::enumeration(Tag::OBJECT_TYPE, ObjectType::SYMMETRIC_KEY.0),
            Item::text(Tag::UNIQUE_IDENTIFIER, &base),
            Item::enumeration(Tag::DERIVATION_METHOD, DerivationMethod::HMAC.0),
            Item::structure(
                Tag::DERIVATION_PARAMETERS,
                vec![
                    Item::structure(
                        Tag::CRYPTOGRAPHIC_PARAMETERS,
                        vec![Item::enumeration(Tag::HASHING_ALGORITHM, HashingAlgorithm::SHA256.0)],
                    ),
                    Item::bytes(Tag::DERIVATION_DATA, b"context"),
                ],
            ),
            template_attribute(
                Tag::TEMPLATE_ATTRIBUTE,
                &["enc-only"],
                vec![alg(CryptographicAlgorithm::AES), len(128)],
            ),
        ],
    )
    .await));
    let a = attributes(&mut tls, &derived).await;
    assert_eq!(values(&a, "Cryptographic Usage Mask"), [Value::Integer(usage_mask::ENCRYPT)]);
    assert_eq!(texts(&a, "Object Group"), ["enc"]);

    // Re-key naming a Template: the new key takes the old one's
    // attributes, then the Template's, then the request's own.
    let old = uid_of(&ok(&create(
        &mut tls,
        &[],
        vec![alg(CryptographicAlgorithm::AES), len(256), name_attr("rekeyed"), group("old")],
    )
    .await));
    ok(&one(&mut tls, Operation::ACTIVATE, vec![Item::text(Tag::UNIQUE_IDENTIFIER, &old)]).await);
    let new = uid_of(&ok(&one(
        &mut tls,
        Operation::RE_KEY,
        vec![
            Item::text(Tag::UNIQUE_IDENTIFIER, &old),
            template_attribute(
                Tag::TEMPLATE_ATTRIBUTE,
                &["enc-only"],
                vec![attr("Contact Information", Value::TextString("ops".into()))],
            ),
        ],
    )
    .await));
    assert_ne!(new, old);
    let a = attributes(&mut tls, &new).await;
    assert_eq!(values(&a, "Cryptographic Usage Mask"), [Value::Integer(usage_mask::ENCRYPT)]);
    assert_eq!(texts(&a, "Object Group"), ["enc", "old"]);
    assert_eq!(texts(&a, "Contact Information"), ["ops"]);
    assert_eq!(values(&a, "Cryptographic Length"), [Value::Integer(256)]);
    assert_eq!(values(&a, "Name").len(), 1, "the Name moves to the new key");
    // Re-key keeps the algorithm and length: a Template changing them is
    // an invalid field.
    let aes128 = vec![alg(CryptographicAlgorithm::AES), len(128)];
    ok(&one(&mut tls, Operation::REGISTER, register_template("aes-128", aes128)).await);
    let refused = one(
        &mut tls,
        Operation::RE_KEY,
        vec![
            Item::text(Tag::UNIQUE_IDENTIFIER, &new),
            template_attribute(Tag::TEMPLATE_ATTRIBUTE, &["aes-128"], vec![]),
        ],
    )
    .await;
    assert_eq!(reason(&refused), ResultReason::INVALID_FIELD);

    // Create Key Pair: a common Template, and one per half.
    let ec = vec![alg(CryptographicAlgorithm::EC), len(256), group("pair")];
    ok(&one(&mut tls, Operation::REGISTER, register_template("p256", ec)).await);
    ok(&one(
        &mut tls,
        Operation::REGISTER,
        register_template("signing", vec![mask(usage_mask::SIGN)]),
    )
    .await);
    let pair = ok(&one(
        &mut tls,
        Operation::CREATE_KEY_PAIR,
        vec![
            template_attribute(Tag::COMMON_TEMPLATE_ATTRIBUTE, &["p256"], vec![]),
            template_attribute(Tag::PRIVATE_KEY_TEMPLATE_ATTRIBUTE, &["signing"], vec![]),
            template_attribute(
                Tag::PUBLIC_KEY_TEMPLATE_ATTRIBUTE,
                &[],
                vec![mask(usage_mask::VERIFY)],
            ),
        ],
    )
    .await);
    let private = pair
        .iter()
        .find(|i| i.tag == Tag::PRIVATE_KEY_UNIQUE_IDENTIFIER)
        .unwrap()
        .as_text()
        .unwrap()
        .to_owned();
    let public = pair
        .iter()
        .find(|i| i.tag == Tag::PUBLIC_KEY_UNIQUE_IDENTIFIER)
        .unwrap()
        .as_text()
        .unwrap()
        .to_owned();
    let a = attributes(&mut tls, &private).await;
    assert_eq!(values(&a, "Cryptographic Usage Mask"), [Value::Integer(usage_mask::SIGN)]);
    assert_eq!(values(&a, "Cryptographic Length"), [Value::Integer(256)]);
    assert_eq!(texts(&a, "Object Group"), ["pair"]);
    let a = attributes(&mut tls, &public).await;
    assert_eq!(values(&a, "Cryptographic Usage Mask"), [Value::Integer(usage_mask::VERIFY)]);
    assert_eq!(texts(&a, "Object Group"), ["pair"]);
}
on_each_store!(templates_feed_register_derive_rekey_and_key_pairs);

async fn bad_templates_are_refused_with_the_reasons_the_spec_names(backend: Backend) {
    let d = Deployment::on(backend, "tpl-bad").await;
    let mut tls = connect(&d.admin, &d.kmip, &rustls::version::TLS13).await;
    // A Template holding a Name would name every object it makes alike.
    let named = one(
        &mut tls,
        Operation::REGISTER,
        register_template("t1", vec![len(128), name_attr("every-key")]),
    )
    .await;
    assert_eq!(reason(&named), ResultReason::INVALID_FIELD);
    // A Template nobody can name.
    let nameless = one(
        &mut tls,
        Operation::REGISTER,
        vec![
            Item::enumeration(Tag::OBJECT_TYPE, ObjectType::TEMPLATE.0),
            template_attribute(Tag::TEMPLATE_ATTRIBUTE, &[], vec![]),
            Item::structure(Tag::TEMPLATE, vec![len(128)]),
        ],
    )
    .await;
    assert_eq!(reason(&nameless), ResultReason::MISSING_DATA);
    // An attribute only the server sets.
    let server_set = one(
        &mut tls,
        Operation::REGISTER,
        register_template("t2", vec![attr("State", Value::Enumeration(2))]),
    )
    .await;
    assert_eq!(reason(&server_set), ResultReason::INVALID_FIELD);
    // An empty Template structure (§2.2.6: at least one Attribute).
    let empty = one(&mut tls, Operation::REGISTER, register_template("t3", vec![])).await;
    assert_eq!(empty.result_status, ResultStatus::OPERATION_FAILED);
    // Two Templates of one Name are no more possible than two keys.
    ok(&one(&mut tls, Operation::REGISTER, register_template("t4", vec![len(128)])).await);
    let twice = one(&mut tls, Operation::REGISTER, register_template("t4", vec![len(256)])).await;
    assert_eq!(twice.result_status, ResultStatus::OPERATION_FAILED);

    // KMIP 2.1 has no Template object: Invalid Object Type.
    let v21 = batch(
        &mut tls,
        ProtocolVersion::V2_1,
        vec![(
            Operation::REGISTER,
            vec![
                Item::enumeration(Tag::OBJECT_TYPE, ObjectType::TEMPLATE.0),
                Item::structure(Tag::ATTRIBUTES, vec![]),
                Item::structure(Tag::TEMPLATE, vec![len(128)]),
            ],
        )],
    )
    .await;
    assert_eq!(reason(&v21[0]), ResultReason::INVALID_OBJECT_TYPE);

    // Under Batch Error Continuation Undo, a registered Template goes
    // again when a later item fails.
    let mut request = RequestMessage::new(
        ProtocolVersion::V1_4,
        vec![
            (Operation::REGISTER, register_template("undone", vec![len(128)])),
            (Operation::GET, vec![Item::text(Tag::UNIQUE_IDENTIFIER, "no-such/1")]),
        ],
    );
    request.header.batch_error_continuation = BatchErrorContinuationOption::UNDO;
    let items = exchange(&mut tls, &request).await.batch_items;
    assert_eq!(items[0].result_status, ResultStatus::OPERATION_UNDONE);
    let after = create(&mut tls, &["undone"], vec![]).await;
    assert_eq!(reason(&after), ResultReason::ITEM_NOT_FOUND);
    let located = ok(&one(&mut tls, Operation::LOCATE, vec![name_attr("undone")]).await);
    assert!(!located.iter().any(|i| i.tag == Tag::UNIQUE_IDENTIFIER), "{located:?}");
    let _ = Fields::of;
}
on_each_store!(bad_templates_are_refused_with_the_reasons_the_spec_names);
