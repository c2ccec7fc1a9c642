//! The attributes the server sets and the rules on the ones a client sets,
//! on each store, with raw TTLV over real TLS: Digest (checked with
//! Python's hashlib over the material Get returns, and over the TTLV of a
//! registered Transparent Symmetric Key), Fresh turning False once the key
//! is served, a REST key's Digest at its first KMIP read, Random Number
//! Generator, Original Creation Date, Sensitive
//! and Extractable (refusing Get) with Always Sensitive and Never
//! Extractable following them, the attributes KMIP 2.x adds (Short Unique
//! Identifier, Key Format Type), which attributes a client may add, modify
//! or delete; Locate leaving destroyed objects out unless the Storage
//! Status Mask asks, and a date given twice as a range; Log recorded in the
//! audit chain; Interop refused on a server not started for interop
//! testing; KMIP 2.x Set Attribute; and Query Operations listing exactly
//! what is dispatched.

use rampart_kmip::enums::{
    CryptographicAlgorithm, KeyFormatType, ObjectType, Operation, ResultReason, ResultStatus,
};
use rampart_kmip::message::{Attribute, ProtocolVersion, RequestMessage, ResponseBatchItem};
use rampart_kmip::tag::Tag;
use rampart_kmip::ttlv::{Fields, Item, Value};

use crate::common::Backend;
use crate::kmip_support as support;
use support::{attr, connect, exchange, reason, uid, uid_of, Deployment, Tls};

async fn run(
    tls: &mut Tls,
    version: ProtocolVersion,
    ops: Vec<(Operation, Vec<Item>)>,
) -> Vec<ResponseBatchItem> {
    exchange(tls, &RequestMessage::new(version, ops)).await.batch_items
}

async fn one(tls: &mut Tls, op: Operation, fields: Vec<Item>) -> ResponseBatchItem {
    run(tls, ProtocolVersion::V1_4, vec![(op, fields)]).await.remove(0)
}

fn ok(item: &ResponseBatchItem) -> Vec<Item> {
    assert_eq!(item.result_status, ResultStatus::SUCCESS, "{item:?}");
    item.payload.as_ref().map(|p| p.children().unwrap().to_vec()).unwrap_or_default()
}

/// The values of attribute `name` in a KMIP 1.x Get Attributes answer.
fn values(items: &[Item], name: &str) -> Vec<Item> {
    items
        .iter()
        .filter(|i| i.tag == Tag::ATTRIBUTE)
        .map(|i| Attribute::parse(i).unwrap())
        .filter(|a| a.name == name)
        .map(|a| a.value.unwrap())
        .collect()
}

fn single(items: &[Item], name: &str) -> Item {
    let mut v = values(items, name);
    assert_eq!(v.len(), 1, "{name}: {items:?}");
    v.remove(0)
}

fn create(name: &str) -> Vec<Item> {
    vec![
        Item::enumeration(Tag::OBJECT_TYPE, ObjectType::SYMMETRIC_KEY.0),
        Item::structure(
            Tag::TEMPLATE_ATTRIBUTE,
            vec![
                attr("Cryptographic Algorithm", Value::Enumeration(CryptographicAlgorithm::AES.0)),
                attr("Cryptographic Length", Value::Integer(256)),
                attr("Cryptographic Usage Mask", Value::Integer(0x0C)),
                attr(
                    "Name",
                    Value::Structure(vec![
                        Item::text(Tag::NAME_VALUE, name),
                        Item::enumeration(Tag::NAME_TYPE, 1),
                    ]),
                ),
            ],
        ),
    ]
}

/// SHA-256 by Python's hashlib, the independent peer.
fn sha256(data: &[u8]) -> Vec<u8> {
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import hashlib,sys;print(hashlib.sha256(bytes.fromhex(sys.argv[1])).hexdigest())",
        ])
        .arg(hex::encode(data))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    hex::decode(String::from_utf8(out.stdout).unwrap().trim()).unwrap()
}

fn get_fields(items: &[Item]) -> (u32, Item) {
    let key = items.iter().find(|i| i.tag == Tag::SYMMETRIC_KEY).unwrap();
    let block = Fields::of(key).unwrap().required(Tag::KEY_BLOCK).unwrap().clone();
    let f = Fields::of(&block).unwrap();
    let format = f.required(Tag::KEY_FORMAT_TYPE).unwrap().as_enum().unwrap();
    let material = Fields::of(f.required(Tag::KEY_VALUE).unwrap())
        .unwrap()
        .required(Tag::KEY_MATERIAL)
        .unwrap()
        .clone();
    (format, material)
}

fn digest_parts(digest: &Item) -> (u32, Vec<u8>, u32) {
    let f = Fields::of(digest).unwrap();
    let tag = |n| rampart_kmip::xml::tag_by_name(n).unwrap();
    (
        f.required(tag("Hashing Algorithm")).unwrap().as_enum().unwrap(),
        f.required(tag("Digest Value")).unwrap().as_bytes().unwrap().to_vec(),
        f.required(Tag::KEY_FORMAT_TYPE).unwrap().as_enum().unwrap(),
    )
}

async fn attributes(tls: &mut Tls, u: &str) -> Vec<Item> {
    ok(&one(tls, Operation::GET_ATTRIBUTES, vec![uid(u)]).await)
}

async fn server_attributes_are_set_at_creation_and_keep_their_rules(backend: Backend) {
    let d = Deployment::on(backend, "server-attrs").await;
    let mut tls = connect(&d.admin, &d.kmip, &rustls::version::TLS13).await;
    let u = uid_of(&ok(&one(&mut tls, Operation::CREATE, create("attrs-key")).await));
    let a = attributes(&mut tls, &u).await;
    assert!(single(&a, "Fresh").as_bool().unwrap());
    assert!(!single(&a, "Sensitive").as_bool().unwrap());
    assert!(!single(&a, "Always Sensitive").as_bool().unwrap());
    assert!(single(&a, "Extractable").as_bool().unwrap());
    assert!(!single(&a, "Never Extractable").as_bool().unwrap());
    assert_eq!(single(&a, "Lease Time").as_interval().unwrap(), 3600);
    // Obtain Lease answers the same lease and the Last Change Date.
    let lease = ok(&one(&mut tls, Operation::OBTAIN_LEASE, vec![uid(&u)]).await);
    let lease_time = lease.iter().find(|i| i.tag == Tag::LEASE_TIME).unwrap();
    assert_eq!(lease_time.as_interval().unwrap(), 3600);
    let changed = lease.iter().find(|i| i.tag == Tag::LAST_CHANGE_DATE).unwrap();
    assert_eq!(
        changed.as_date_time().unwrap(),
        single(&a, "Last Change Date").as_date_time().unwrap()
    );
    assert_eq!(
        single(&a, "Original Creation Date").as_date_time().unwrap(),
        single(&a, "Initial Date").as_date_time().unwrap()
    );
    let rng = single(&a, "Random Number Generator");
    assert!(!rng.children().unwrap().is_empty(), "{rng:?}");
    // KMIP 1.x shows none of the attributes 2.0 added.
    assert!(values(&a, "Short Unique Identifier").is_empty());

    // Get serves the key: the Digest is SHA-256 of its Raw material, and
    // the key is Fresh no more.
    let got = ok(&one(&mut tls, Operation::GET, vec![uid(&u)]).await);
    let (format, material) = get_fields(&got);
    assert_eq!(format, KeyFormatType::RAW.0);
    let (alg, value, kft) = digest_parts(&single(&a, "Digest"));
    assert_eq!((alg, kft), (rampart_kmip::enums::HashingAlgorithm::SHA256.0, KeyFormatType::RAW.0));
    assert_eq!(value, sha256(material.as_bytes().unwrap()));
    let a = attributes(&mut tls, &u).await;
    assert!(!single(&a, "Fresh").as_bool().unwrap());

    // What the server sets, a client cannot change.
    let modify = |name: &str, v: Value| {
        vec![
            uid(&u),
            Attribute {
                name: name.into(),
                index: Some(0),
                value: Some(Item::new(Tag::ATTRIBUTE_VALUE, v)),
            }
            .to_item(),
        ]
    };
    let r = one(&mut tls, Operation::MODIFY_ATTRIBUTE, modify("Fresh", Value::Boolean(true))).await;
    assert_eq!(reason(&r), ResultReason::ILLEGAL_OPERATION);
    let r = one(&mut tls, Operation::MODIFY_ATTRIBUTE, modify("Digest", Value::Structure(vec![])))
        .await;
    assert_eq!(reason(&r), ResultReason::INVALID_FIELD);
    let delete = |name: &str| vec![uid(&u), Item::text(Tag::ATTRIBUTE_NAME, name)];
    let r = one(&mut tls, Operation::DELETE_ATTRIBUTE, delete("Sensitive")).await;
    assert_eq!(reason(&r), ResultReason::ILLEGAL_OPERATION);

    // Sensitive: served wrapped only; Always Sensitive stays False (it was
    // not always True). Extractable False: not served at all, and Never
    // Extractable stays False.
    ok(&one(&mut tls, Operation::MODIFY_ATTRIBUTE, modify("Sensitive", Value::Boolean(true)))
        .await);
    let r = one(&mut tls, Operation::GET, vec![uid(&u)]).await;
    assert_eq!(reason(&r), ResultReason::SENSITIVE);
    ok(&one(&mut tls, Operation::MODIFY_ATTRIBUTE, modify("Sensitive", Value::Boolean(false)))
        .await);
    ok(&one(&mut tls, Operation::MODIFY_ATTRIBUTE, modify("Extractable", Value::Boolean(false)))
        .await);
    let r = one(&mut tls, Operation::GET, vec![uid(&u)]).await;
    assert_eq!(reason(&r), ResultReason::NOT_EXTRACTABLE);
    let a = attributes(&mut tls, &u).await;
    assert!(!single(&a, "Always Sensitive").as_bool().unwrap());
    assert!(!single(&a, "Never Extractable").as_bool().unwrap());

    // Alternative Name has many values, Description one; Original
    // Creation Date is the server's on a key it generated.
    let add = |name: &str, v: Value| vec![uid(&u), attr(name, v)];
    let alt = |s: &str| {
        Value::Structure(vec![
            Item::text(rampart_kmip::xml::tag_by_name("Alternative Name Value").unwrap(), s),
            Item::enumeration(rampart_kmip::xml::tag_by_name("Alternative Name Type").unwrap(), 1),
        ])
    };
    ok(&one(&mut tls, Operation::ADD_ATTRIBUTE, add("Alternative Name", alt("one"))).await);
    ok(&one(&mut tls, Operation::ADD_ATTRIBUTE, add("Alternative Name", alt("two"))).await);
    ok(&one(&mut tls, Operation::ADD_ATTRIBUTE, add("Description", Value::TextString("d".into())))
        .await);
    let r =
        one(&mut tls, Operation::ADD_ATTRIBUTE, add("Description", Value::TextString("e".into())))
            .await;
    assert_eq!(reason(&r), ResultReason::ILLEGAL_OPERATION);
    ok(&one(&mut tls, Operation::DELETE_ATTRIBUTE, delete("Description")).await);
    let a = attributes(&mut tls, &u).await;
    assert_eq!(values(&a, "Alternative Name").len(), 2);
    assert!(values(&a, "Description").is_empty());

    // KMIP 2.x: the Short Unique Identifier is SHA-256 of the Unique
    // Identifier, the Key Format Type the one Get serves by default.
    let refs = ["Short Unique Identifier", "Key Format Type", "Protection Storage Mask"];
    let mut fields = vec![uid(&u)];
    fields.extend(refs.iter().map(|n| rampart_kmip::payload::attribute_reference(n).unwrap()));
    let got = ok(&run(&mut tls, ProtocolVersion::V2_1, vec![(Operation::GET_ATTRIBUTES, fields)])
        .await
        .remove(0));
    let attrs = got.iter().find(|i| i.tag == Tag::ATTRIBUTES).unwrap().children().unwrap();
    let short = rampart_kmip::xml::tag_by_name("Short Unique Identifier").unwrap();
    let short = attrs.iter().find(|i| i.tag == short).unwrap();
    assert_eq!(short.as_bytes().unwrap(), sha256(u.as_bytes()).as_slice());
    let kft = attrs.iter().find(|i| i.tag == Tag::KEY_FORMAT_TYPE).unwrap();
    assert_eq!(kft.as_enum().unwrap(), KeyFormatType::RAW.0);
}
on_each_store!(server_attributes_are_set_at_creation_and_keep_their_rules);

async fn a_registered_transparent_key_is_digested_and_served_as_registered(backend: Backend) {
    let d = Deployment::on(backend, "transparent").await;
    let mut tls = connect(&d.admin, &d.kmip, &rustls::version::TLS13).await;
    let key = [0x5Au8; 16];
    let material = Item::structure(Tag::KEY_MATERIAL, vec![Item::bytes(Tag::KEY, &key)]);
    let register = vec![
        Item::enumeration(Tag::OBJECT_TYPE, ObjectType::SYMMETRIC_KEY.0),
        Item::structure(
            Tag::TEMPLATE_ATTRIBUTE,
            vec![attr("Cryptographic Usage Mask", Value::Integer(0x0C))],
        ),
        Item::structure(
            Tag::SYMMETRIC_KEY,
            vec![Item::structure(
                Tag::KEY_BLOCK,
                vec![
                    Item::enumeration(
                        Tag::KEY_FORMAT_TYPE,
                        KeyFormatType::TRANSPARENT_SYMMETRIC_KEY.0,
                    ),
                    Item::structure(Tag::KEY_VALUE, vec![material.clone()]),
                    Item::enumeration(Tag::CRYPTOGRAPHIC_ALGORITHM, CryptographicAlgorithm::AES.0),
                    Item::int(Tag::CRYPTOGRAPHIC_LENGTH, 128),
                ],
            )],
        ),
    ];
    let u = uid_of(&ok(&one(&mut tls, Operation::REGISTER, register).await));
    let a = attributes(&mut tls, &u).await;
    // KMIP 1.4 §3.17: over the TTLV of a structured Key Material, in the
    // registered format; nothing generated, so no Random Number Generator.
    let (_, value, kft) = digest_parts(&single(&a, "Digest"));
    assert_eq!(kft, KeyFormatType::TRANSPARENT_SYMMETRIC_KEY.0);
    assert_eq!(value, sha256(&material.encode().unwrap()));
    assert!(values(&a, "Random Number Generator").is_empty());
    // Served as registered, or Raw when asked.
    let (format, got) = get_fields(&ok(&one(&mut tls, Operation::GET, vec![uid(&u)]).await));
    assert_eq!(format, KeyFormatType::TRANSPARENT_SYMMETRIC_KEY.0);
    assert_eq!(got, material);
    let raw = vec![uid(&u), Item::enumeration(Tag::KEY_FORMAT_TYPE, KeyFormatType::RAW.0)];
    let (format, got) = get_fields(&ok(&one(&mut tls, Operation::GET, raw).await));
    assert_eq!((format, got.as_bytes().unwrap()), (KeyFormatType::RAW.0, &key[..]));
}
on_each_store!(a_registered_transparent_key_is_digested_and_served_as_registered);

async fn a_rest_key_gets_its_digest_at_its_first_kmip_read(backend: Backend) {
    let d = Deployment::on(backend, "rest-digest").await;
    let rest =
        rampart_kms::client::KmsClient::with_policy(&d.admin, crate::common::fast()).unwrap();
    rest.create_key("rest-made", &["client:admin".into()], true).await.unwrap();
    rest.rotate_key("rest-made").await.unwrap();
    let mut tls = connect(&d.admin, &d.kmip, &rustls::version::TLS13).await;
    for u in ["rest-made/1", "rest-made/2", "rest-made/1"] {
        let a = attributes(&mut tls, u).await;
        let (format, material) =
            get_fields(&ok(&one(&mut tls, Operation::GET, vec![uid(u)]).await));
        assert_eq!(format, KeyFormatType::RAW.0);
        let (_, value, _) = digest_parts(&single(&a, "Digest"));
        assert_eq!(value, sha256(material.as_bytes().unwrap()), "{u}");
    }
    // The newest version is still named by the key's own name.
    let a = attributes(&mut tls, "rest-made/2").await;
    let name = single(&a, "Name");
    let name =
        Fields::of(&name).unwrap().required(Tag::NAME_VALUE).unwrap().as_text().unwrap().to_owned();
    assert_eq!(name, "rest-made");
}
on_each_store!(a_rest_key_gets_its_digest_at_its_first_kmip_read);

async fn locate_leaves_destroyed_objects_out_unless_asked_and_reads_date_ranges(backend: Backend) {
    let d = Deployment::on(backend, "locate-states").await;
    let mut tls = connect(&d.admin, &d.kmip, &rustls::version::TLS13).await;
    let dated = |name: &str, at: i64| {
        let mut c = create(name);
        if let Value::Structure(t) = &mut c[1].value {
            t.push(attr("Protect Stop Date", Value::DateTime(at)));
        }
        c
    };
    let early = uid_of(&ok(&one(&mut tls, Operation::CREATE, dated("early", 1_000_000)).await));
    let late = uid_of(&ok(&one(&mut tls, Operation::CREATE, dated("late", 3_000_000)).await));
    let locate = |extra: Vec<Item>| {
        let mut f = extra;
        f.push(attr("Object Type", Value::Enumeration(ObjectType::SYMMETRIC_KEY.0)));
        f
    };
    let found = |items: Vec<Item>| -> Vec<String> {
        let mut v: Vec<String> = items
            .iter()
            .filter(|i| i.tag == Tag::UNIQUE_IDENTIFIER)
            .map(|i| i.as_text().unwrap().to_owned())
            .collect();
        v.sort();
        v
    };
    let range = locate(vec![
        attr("Protect Stop Date", Value::DateTime(500_000)),
        attr("Protect Stop Date", Value::DateTime(2_000_000)),
    ]);
    assert_eq!(
        found(ok(&one(&mut tls, Operation::LOCATE, range).await)),
        std::slice::from_ref(&early)
    );
    ok(&one(&mut tls, Operation::DESTROY, vec![uid(&early)]).await);
    assert_eq!(
        found(ok(&one(&mut tls, Operation::LOCATE, locate(vec![])).await)),
        std::slice::from_ref(&late)
    );
    // KMIP 2.1: the Storage Status Mask asks for destroyed objects too.
    let mask = |m: i32| {
        vec![
            Item::int(Tag(0x42008E), m),
            Item::structure(
                Tag::ATTRIBUTES,
                vec![Item::enumeration(Tag::OBJECT_TYPE, ObjectType::SYMMETRIC_KEY.0)],
            ),
        ]
    };
    let both = run(&mut tls, ProtocolVersion::V2_1, vec![(Operation::LOCATE, mask(0x05))]).await;
    assert_eq!(found(ok(&both[0])), [early, late.clone()]);
    let online = run(&mut tls, ProtocolVersion::V2_1, vec![(Operation::LOCATE, mask(0x01))]).await;
    assert_eq!(found(ok(&online[0])), [late]);
}
on_each_store!(locate_leaves_destroyed_objects_out_unless_asked_and_reads_date_ranges);

async fn a_log_message_is_audited_and_interop_needs_interop_testing(backend: Backend) {
    let d = Deployment::on(backend, "log-interop").await;
    let mut tls = connect(&d.admin, &d.kmip, &rustls::version::TLS13).await;
    let log = vec![Item::text(Tag(0x420141), "backup run 42 started\nforged line")];
    ok(&run(&mut tls, ProtocolVersion::V2_1, vec![(Operation::LOG, log)]).await[0]);
    let entries = d.store.audit_page(0, None, 100_000).await.unwrap();
    let entry = entries.iter().find(|e| e.operation == "kmip.log").unwrap();
    assert_eq!(entry.outcome, "ok");
    // One line, as the client's message without its control characters.
    assert_eq!(entry.detail, "Log Message: backup run 42 startedforged line");
    // A KMIP 1.x client has no Log; and this server is no interop test bed.
    let log = vec![Item::text(Tag(0x420141), "x")];
    assert_eq!(
        reason(&one(&mut tls, Operation::LOG, log).await),
        ResultReason::OPERATION_NOT_SUPPORTED
    );
    let interop = vec![Item::enumeration(Tag(0x420160), 1), Item::text(Tag(0x420161), "T-1")];
    let r = run(&mut tls, ProtocolVersion::V2_1, vec![(Operation::INTEROP, interop)]).await;
    assert_eq!(reason(&r[0]), ResultReason::OPERATION_NOT_SUPPORTED);
}
on_each_store!(a_log_message_is_audited_and_interop_needs_interop_testing);

/// Every operation code KMIP 2.1 defines, sent with an empty payload, is
/// answered Operation Not Supported exactly when Query Operations does not
/// list it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn query_operations_lists_exactly_the_operations_served() {
    let d = Deployment::new("query-ops").await;
    let mut tls = connect(&d.admin, &d.kmip, &rustls::version::TLS13).await;
    for version in [ProtocolVersion::V1_4, ProtocolVersion::V2_1] {
        let query = vec![Item::enumeration(Tag::QUERY_FUNCTION, 1)];
        let listed: Vec<u32> =
            ok(&run(&mut tls, version, vec![(Operation::QUERY, query)]).await[0])
                .iter()
                .filter(|i| i.tag == Tag::OPERATION)
                .map(|i| i.as_enum().unwrap())
                .collect();
        assert!(listed.contains(&Operation::LOCATE.0), "{listed:?}");
        for code in 1..=0x37u32 {
            if code == Operation::QUERY.0 || code == Operation::DISCOVER_VERSIONS.0 {
                continue;
            }
            let r = run(&mut tls, version, vec![(Operation(code), vec![])]).await.remove(0);
            let unsupported = r.result_reason == Some(ResultReason::OPERATION_NOT_SUPPORTED);
            assert_eq!(
                !unsupported,
                listed.contains(&code),
                "{version} operation 0x{code:02X}: {r:?}"
            );
        }
    }
}

async fn only_keys_of_256_bits_are_made_quantum_safe(backend: Backend) {
    let d = Deployment::on(backend, "quantum-safe").await;
    let mut tls = connect(&d.admin, &d.kmip, &rustls::version::TLS13).await;
    let quantum_safe = |name: &str, bits: i32| {
        let mut c = create(name);
        if let Value::Structure(t) = &mut c[1].value {
            t.retain(|a| !format!("{a:?}").contains("Cryptographic Length"));
            t.push(attr("Cryptographic Length", Value::Integer(bits)));
            t.push(attr("Quantum Safe", Value::Boolean(true)));
            t.push(attr("Protection Level", Value::Enumeration(1)));
        }
        c
    };
    let made = uid_of(&ok(&one(&mut tls, Operation::CREATE, quantum_safe("qs-256", 256)).await));
    let fields = vec![uid(&made)];
    let got =
        ok(&run(&mut tls, ProtocolVersion::V2_1, vec![(Operation::GET_ATTRIBUTES, fields)]).await
            [0]);
    let shown = format!("{got:?}");
    assert!(shown.contains("0x420147, value: Boolean(true)"), "{shown}");
    // AES-128 is not quantum safe: General Failure, as the profiles' QS-M-2.
    let refused = one(&mut tls, Operation::CREATE, quantum_safe("qs-128", 128)).await;
    assert_eq!(reason(&refused), ResultReason::GENERAL_FAILURE);
    // A 1.x client is not shown the 2.x attributes.
    let old = format!("{:?}", attributes(&mut tls, &made).await);
    assert!(!old.contains("Quantum Safe") && !old.contains("0x420147"), "{old}");
}
on_each_store!(only_keys_of_256_bits_are_made_quantum_safe);

async fn set_2_1(tls: &mut Tls, fields: Vec<Item>) -> ResponseBatchItem {
    run(tls, ProtocolVersion::V2_1, vec![(Operation::SET_ATTRIBUTE, fields)]).await.remove(0)
}

/// KMIP 2.x Set Attribute: adds an attribute the object lacks, replaces the
/// one value it has, and refuses one with several values and a read-only
/// one; a KMIP 1.x client is not served it.
async fn set_attribute_adds_or_replaces_a_single_value(backend: Backend) {
    let d = Deployment::on(backend, "set-attribute").await;
    let mut tls = connect(&d.admin, &d.kmip, &rustls::version::TLS13).await;
    let made = uid_of(&ok(&one(&mut tls, Operation::CREATE, create("set-attr")).await));
    let set = |value: Item| vec![uid(&made), Item::structure(Tag::NEW_ATTRIBUTE, vec![value])];
    for contact in ["ops@example.com", "security@example.com"] {
        let answer =
            ok(&set_2_1(&mut tls, set(Item::text(Tag::CONTACT_INFORMATION, contact))).await);
        assert_eq!(uid_of(&answer), made);
        let shown = single(&attributes(&mut tls, &made).await, "Contact Information");
        assert_eq!(shown.as_text().unwrap(), contact, "added, then replaced");
    }
    // Two Object Groups: Set cannot tell which to replace.
    for group in ["a", "b"] {
        let fields = vec![uid(&made), attr("Object Group", Value::TextString(group.into()))];
        ok(&one(&mut tls, Operation::ADD_ATTRIBUTE, fields).await);
    }
    let several = set_2_1(&mut tls, set(Item::text(Tag::OBJECT_GROUP, "c"))).await;
    assert_eq!(reason(&several), ResultReason::MULTI_VALUED_ATTRIBUTE);
    assert_eq!(values(&attributes(&mut tls, &made).await, "Object Group").len(), 2);
    let state = set_2_1(&mut tls, set(Item::enumeration(Tag::STATE, 2))).await;
    assert_eq!(reason(&state), ResultReason::ATTRIBUTE_READ_ONLY);
    let fields = set(Item::text(Tag::CONTACT_INFORMATION, "x"));
    let old = run(&mut tls, ProtocolVersion::V1_4, vec![(Operation::SET_ATTRIBUTE, fields)]).await;
    assert_eq!(reason(&old[0]), ResultReason::OPERATION_NOT_SUPPORTED);
}
on_each_store!(set_attribute_adds_or_replaces_a_single_value);
