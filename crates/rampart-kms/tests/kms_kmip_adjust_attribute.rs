//! Adjust Attribute (KMIP 2.1 §6.1.3) on both stores: a vendor
//! attribute incremented from absent, by default and by a value,
//! decremented and negated, a Boolean negated; the Result Reasons of its
//! refusals (Numeric Range, Invalid Data Type, Missing Data, Multi Valued
//! Attribute, Attribute Read Only, Object Not Found, and a KMIP 1.4
//! client, to which the operation does not exist); the audit entries.

use rampart_kmip::enums::{CryptographicAlgorithm, ObjectType, Operation, ResultReason};
use rampart_kmip::message::{Attribute, ProtocolVersion, RequestMessage, ResponseBatchItem};
use rampart_kmip::tag::Tag;
use rampart_kmip::ttlv::{Item, Value};

use crate::common::Backend;
use crate::kmip_support as support;
use support::{connect, exchange, ok, one, reason, uid_of, Deployment, Tls};

async fn v21(tls: &mut Tls, op: Operation, fields: Vec<Item>) -> ResponseBatchItem {
    let request = RequestMessage::new(ProtocolVersion::V2_1, vec![(op, fields)]);
    exchange(tls, &request).await.batch_items.remove(0)
}

fn vendor_reference(name: &str) -> Item {
    Item::structure(
        Tag::ATTRIBUTE_REFERENCE,
        vec![Item::text(Tag::VENDOR_IDENTIFICATION, "x"), Item::text(Tag::ATTRIBUTE_NAME, name)],
    )
}

fn adjust(id: &str, reference: Item, kind: u32, value: Option<Value>) -> Vec<Item> {
    let mut fields = vec![
        Item::text(Tag::UNIQUE_IDENTIFIER, id),
        reference,
        Item::enumeration(Tag(0x42_0158), kind),
    ];
    if let Some(v) = value {
        fields.push(Item::new(Tag(0x42_0162), v));
    }
    fields
}

/// The values of custom attribute `name` (1.x Get Attributes).
async fn custom(tls: &mut Tls, id: &str, name: &str) -> Vec<Value> {
    let got = ok(&one(
        tls,
        Operation::GET_ATTRIBUTES,
        vec![Item::text(Tag::UNIQUE_IDENTIFIER, id), Item::text(Tag::ATTRIBUTE_NAME, name)],
    )
    .await);
    got.iter()
        .filter(|i| i.tag == Tag::ATTRIBUTE)
        .filter_map(|i| Attribute::parse(i).unwrap().value)
        .map(|v| v.value)
        .collect()
}

async fn adjust_attribute_moves_numbers_and_refuses_what_it_cannot(backend: Backend) {
    let d = Deployment::on(backend, "adjust").await;
    let mut tls = connect(&d.admin, &d.kmip, &rustls::version::TLS13).await;
    let created = ok(&v21(
        &mut tls,
        Operation::CREATE,
        vec![
            Item::enumeration(Tag::OBJECT_TYPE, ObjectType::SYMMETRIC_KEY.0),
            Item::structure(
                Tag::ATTRIBUTES,
                vec![
                    Item::enumeration(Tag::CRYPTOGRAPHIC_ALGORITHM, CryptographicAlgorithm::AES.0),
                    Item::int(Tag::CRYPTOGRAPHIC_LENGTH, 128),
                    Item::text(Tag::OBJECT_GROUP, "a"),
                    Item::text(Tag::OBJECT_GROUP, "b"),
                    Item::structure(
                        Tag::ATTRIBUTE,
                        vec![
                            Item::text(Tag::VENDOR_IDENTIFICATION, "x"),
                            Item::text(Tag::ATTRIBUTE_NAME, "label"),
                            Item::text(Tag::ATTRIBUTE_VALUE, "text"),
                        ],
                    ),
                    Item::structure(
                        Tag::ATTRIBUTE,
                        vec![
                            Item::text(Tag::VENDOR_IDENTIFICATION, "x"),
                            Item::text(Tag::ATTRIBUTE_NAME, "flag"),
                            Item::new(Tag::ATTRIBUTE_VALUE, Value::Boolean(false)),
                        ],
                    ),
                ],
            ),
        ],
    )
    .await);
    let id = uid_of(&created);
    let (inc, dec, neg) = (1, 2, 3);
    let steps = [
        (inc, Some(Value::Integer(5)), 5), // absent counts as 0
        (inc, None, 6),                    // by 1
        (dec, Some(Value::Integer(10)), -4),
        (neg, None, 4),
    ];
    for (kind, by, want) in steps {
        let done = ok(&v21(
            &mut tls,
            Operation::ADJUST_ATTRIBUTE,
            adjust(&id, vendor_reference("counter"), kind, by),
        )
        .await);
        assert_eq!(uid_of(&done), id);
        assert_eq!(custom(&mut tls, &id, "x-counter").await, [Value::Integer(want)]);
    }
    // A Boolean negates, without an Adjustment Value.
    let refused = v21(
        &mut tls,
        Operation::ADJUST_ATTRIBUTE,
        adjust(&id, vendor_reference("flag"), neg, Some(Value::Boolean(true))),
    )
    .await;
    assert_eq!(reason(&refused), ResultReason::INVALID_FIELD, "Negate takes no value");
    ok(&v21(
        &mut tls,
        Operation::ADJUST_ATTRIBUTE,
        adjust(&id, vendor_reference("flag"), neg, None),
    )
    .await);
    assert_eq!(custom(&mut tls, &id, "x-flag").await, [Value::Boolean(true)]);

    // Refusals, each with the reason KMIP 2.1 §6.1.3.1 names.
    ok(&v21(
        &mut tls,
        Operation::ADJUST_ATTRIBUTE,
        adjust(&id, vendor_reference("max"), inc, Some(Value::Integer(i32::MAX))),
    )
    .await);
    for (fields, want) in [
        (adjust(&id, vendor_reference("max"), inc, None), ResultReason::NUMERIC_RANGE),
        (adjust(&id, vendor_reference("untyped"), inc, None), ResultReason::MISSING_DATA),
        (adjust(&id, vendor_reference("label"), inc, None), ResultReason::INVALID_DATA_TYPE),
        (
            adjust(&id, vendor_reference("counter"), inc, Some(Value::LongInteger(1))),
            ResultReason::INVALID_DATA_TYPE,
        ),
        (
            adjust(
                &id,
                Item::enumeration(Tag::ATTRIBUTE_REFERENCE, Tag::OBJECT_GROUP.0),
                inc,
                None,
            ),
            ResultReason::MULTI_VALUED_ATTRIBUTE,
        ),
        (
            adjust(
                &id,
                Item::enumeration(Tag::ATTRIBUTE_REFERENCE, Tag::INITIAL_DATE.0),
                inc,
                None,
            ),
            ResultReason::ATTRIBUTE_READ_ONLY,
        ),
        (
            adjust("no-such/1", vendor_reference("counter"), inc, None),
            ResultReason::OBJECT_NOT_FOUND,
        ),
    ] {
        assert_eq!(reason(&v21(&mut tls, Operation::ADJUST_ATTRIBUTE, fields).await), want);
    }
    assert_eq!(custom(&mut tls, &id, "x-max").await, [Value::Integer(i32::MAX)]);
    // KMIP 1.4 has no Adjust Attribute.
    let old = one(
        &mut tls,
        Operation::ADJUST_ATTRIBUTE,
        adjust(&id, vendor_reference("counter"), inc, None),
    )
    .await;
    assert_eq!(reason(&old), ResultReason::OPERATION_NOT_SUPPORTED);
    let audit = d.audit_ops().await;
    assert_eq!(
        audit.iter().filter(|(_, o, r)| o == "kmip.adjust_attribute" && r == "ok").count(),
        6,
        "{audit:?}"
    );
}
on_each_store!(adjust_attribute_moves_numbers_and_refuses_what_it_cannot);
