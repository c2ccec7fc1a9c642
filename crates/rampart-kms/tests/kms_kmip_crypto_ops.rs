//! Hash, MAC (HMAC-SHA1 to HMAC-SHA512 keys and parameters), MAC Verify,
//! RNG Retrieve and RNG Seed, single-part and streamed, and the batch
//! options (Continue, Stop, Undo, Batch Order, Maximum Response Size),
//! driven with raw TTLV over mTLS against an in-process server on SQLite
//! and on PostgreSQL. Digests and MACs are checked against Python's
//! `cryptography` (and FIPS 180-4's "abc" vector); refusals by their
//! Result Reasons; every item by its audit entry.

use std::io::Write;
use std::process::{Command, Stdio};

use rampart_kmip::enums::{
    BatchErrorContinuationOption, CryptographicAlgorithm, HashingAlgorithm, ObjectType, Operation,
    QueryFunction, ResultReason, ResultStatus, ValidityIndicator,
};
use rampart_kmip::message::{
    Attribute, ProtocolVersion, RequestMessage, ResponseBatchItem, ResponseMessage,
};
use rampart_kmip::tag::Tag;
use rampart_kmip::ttlv::{Item, Value};
use rampart_kms::client::KmsClient;
use rampart_kms::model::Labels;

use crate::common::Backend;
use crate::kmip_support as support;
use support::{attr, ok, reason};
use support::{connect, exchange, Deployment, Tls};

async fn one_in(
    tls: &mut Tls,
    version: ProtocolVersion,
    op: Operation,
    fields: Vec<Item>,
) -> ResponseBatchItem {
    exchange(tls, &RequestMessage::new(version, vec![(op, fields)])).await.batch_items.remove(0)
}

async fn one(tls: &mut Tls, op: Operation, fields: Vec<Item>) -> ResponseBatchItem {
    one_in(tls, ProtocolVersion::V1_4, op, fields).await
}

fn field(items: &[Item], tag: Tag) -> &Item {
    items.iter().find(|i| i.tag == tag).unwrap_or_else(|| panic!("{tag} missing: {items:?}"))
}

fn bytes(items: &[Item], tag: Tag) -> Vec<u8> {
    field(items, tag).as_bytes().unwrap().to_vec()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// What Python's `cryptography` computes for each `(kind, algorithm, key,
/// data)`: `hash` or `hmac`, a `cryptography.hazmat.primitives.hashes`
/// class name, hex key and data; answers in hex, in order.
fn reference(cases: &[(&str, &str, Vec<u8>, Vec<u8>)]) -> Vec<String> {
    let script = r#"
import sys
from cryptography.hazmat.primitives import hashes, hmac
out = []
for line in sys.stdin.read().split("\n"):
    if not line:
        continue
    kind, alg, key, data = line.split(" ")
    algo = getattr(hashes, alg)()
    key, data = bytes.fromhex(key), bytes.fromhex(data)
    if kind == "hash":
        h = hashes.Hash(algo)
    else:
        h = hmac.HMAC(key, algo)
    h.update(data)
    out.append(h.finalize().hex())
print("\n".join(out))
"#;
    let mut child = Command::new("python3")
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 with cryptography (scripts/test installs it)");
    let mut input = String::new();
    for (kind, alg, key, data) in cases {
        input.push_str(&format!("{kind} {alg} {} {}\n", hex(key), hex(data)));
    }
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "python3 cryptography failed");
    String::from_utf8(out.stdout).unwrap().lines().map(str::to_owned).collect()
}

fn params(items: Vec<Item>) -> Item {
    Item::structure(Tag::CRYPTOGRAPHIC_PARAMETERS, items)
}

fn hashing(alg: HashingAlgorithm) -> Item {
    params(vec![Item::enumeration(Tag::HASHING_ALGORITHM, alg.0)])
}

async fn random(tls: &mut Tls, len: i32) -> Vec<u8> {
    let r = one(tls, Operation::RNG_RETRIEVE, vec![Item::int(Tag::DATA_LENGTH, len)]).await;
    bytes(&ok(&r), Tag::DATA)
}

/// An active HMAC key of `alg` (usage `mask`) and its material.
async fn hmac_key(tls: &mut Tls, alg: CryptographicAlgorithm, mask: i32) -> (String, Vec<u8>) {
    let created = ok(&one(
        tls,
        Operation::CREATE,
        vec![
            Item::enumeration(Tag::OBJECT_TYPE, ObjectType::SYMMETRIC_KEY.0),
            Item::structure(
                Tag::TEMPLATE_ATTRIBUTE,
                vec![
                    attr("Cryptographic Algorithm", Value::Enumeration(alg.0)),
                    attr("Cryptographic Length", Value::Integer(256)),
                    attr("Cryptographic Usage Mask", Value::Integer(mask)),
                ],
            ),
        ],
    )
    .await);
    let uid = field(&created, Tag::UNIQUE_IDENTIFIER).as_text().unwrap().to_owned();
    ok(&one(tls, Operation::ACTIVATE, vec![Item::text(Tag::UNIQUE_IDENTIFIER, &uid)]).await);
    let got = ok(&one(tls, Operation::GET, vec![Item::text(Tag::UNIQUE_IDENTIFIER, &uid)]).await);
    let block = field(&got, Tag::SYMMETRIC_KEY).children().unwrap()[0].children().unwrap().to_vec();
    assert_eq!(field(&block, Tag::CRYPTOGRAPHIC_ALGORITHM).as_enum().unwrap(), alg.0);
    let value = field(&block, Tag::KEY_VALUE).children().unwrap().to_vec();
    (uid, bytes(&value, Tag::KEY_MATERIAL))
}

const MAC_BOTH: i32 = 0x0080 | 0x0100;

async fn hash_mac_and_rng(backend: Backend) {
    let d = Deployment::on(backend, "cryptoops").await;
    let mut tls = connect(&d.admin, &d.kmip, &rustls::version::TLS13).await;

    // Hash: FIPS 180-4's "abc" example, then every digest over random data
    // against cryptography, in KMIP 1.4 and 2.1.
    let abc = ok(&one(
        &mut tls,
        Operation::HASH,
        vec![hashing(HashingAlgorithm::SHA256), Item::bytes(Tag::DATA, b"abc")],
    )
    .await);
    assert_eq!(
        hex(&bytes(&abc, Tag::DATA)),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    let data = random(&mut tls, 3000).await;
    assert_eq!(data.len(), 3000);
    let digests = [
        (HashingAlgorithm::SHA1, "SHA1"),
        (HashingAlgorithm::SHA224, "SHA224"),
        (HashingAlgorithm::SHA256, "SHA256"),
        (HashingAlgorithm::SHA384, "SHA384"),
        (HashingAlgorithm::SHA512, "SHA512"),
        (HashingAlgorithm::SHA512_256, "SHA512_256"),
        (HashingAlgorithm::SHA3_256, "SHA3_256"),
        (HashingAlgorithm::SHA3_384, "SHA3_384"),
        (HashingAlgorithm::SHA3_512, "SHA3_512"),
    ];
    let want = reference(
        &digests.iter().map(|(_, n)| ("hash", *n, Vec::new(), data.clone())).collect::<Vec<_>>(),
    );
    for ((alg, name), want) in digests.iter().zip(&want) {
        for version in [ProtocolVersion::V1_4, ProtocolVersion::V2_1] {
            let got = ok(&one_in(
                &mut tls,
                version,
                Operation::HASH,
                vec![hashing(*alg), Item::bytes(Tag::DATA, &data)],
            )
            .await);
            assert_eq!(&hex(&bytes(&got, Tag::DATA)), want, "{name} in {version}");
        }
    }

    // Hash streamed in three parts, and a finished stream's Correlation
    // Value is no longer open.
    let first = ok(&one(
        &mut tls,
        Operation::HASH,
        vec![
            hashing(HashingAlgorithm::SHA3_512),
            Item::bytes(Tag::DATA, &data[..1000]),
            Item::boolean(Tag::INIT_INDICATOR, true),
        ],
    )
    .await);
    assert!(first.iter().all(|i| i.tag != Tag::DATA), "{first:?}");
    let cv = bytes(&first, Tag::CORRELATION_VALUE);
    let middle = ok(&one(
        &mut tls,
        Operation::HASH,
        vec![Item::bytes(Tag::CORRELATION_VALUE, &cv), Item::bytes(Tag::DATA, &data[1000..2000])],
    )
    .await);
    assert_eq!(bytes(&middle, Tag::CORRELATION_VALUE), cv);
    let last = ok(&one(
        &mut tls,
        Operation::HASH,
        vec![
            Item::bytes(Tag::CORRELATION_VALUE, &cv),
            Item::bytes(Tag::DATA, &data[2000..]),
            Item::boolean(Tag::FINAL_INDICATOR, true),
        ],
    )
    .await);
    assert_eq!(hex(&bytes(&last, Tag::DATA)), want[8], "streamed SHA3-512");
    let again = one(
        &mut tls,
        Operation::HASH,
        vec![Item::bytes(Tag::CORRELATION_VALUE, &cv), Item::bytes(Tag::DATA, b"x")],
    )
    .await;
    // KMIP 1.4 §11.38: no outstanding operation with the Correlation Value.
    assert_eq!(reason(&again), ResultReason::ITEM_NOT_FOUND);

    // Hash refusals.
    let refusals = [
        (vec![Item::bytes(Tag::DATA, b"x")], ResultReason::MISSING_DATA),
        (vec![hashing(HashingAlgorithm::SHA256)], ResultReason::MISSING_DATA),
        (
            vec![hashing(HashingAlgorithm::MD5), Item::bytes(Tag::DATA, b"x")],
            ResultReason::FEATURE_NOT_SUPPORTED,
        ),
        (
            vec![hashing(HashingAlgorithm::SHA3_224), Item::bytes(Tag::DATA, b"x")],
            ResultReason::FEATURE_NOT_SUPPORTED,
        ),
        (
            vec![hashing(HashingAlgorithm::SHA256), Item::text(Tag::DATA, "not bytes")],
            ResultReason::INVALID_FIELD,
        ),
        (
            vec![hashing(HashingAlgorithm::SHA256), Item::bytes(Tag::DATA, &vec![0; 600 * 1024])],
            ResultReason::INVALID_FIELD,
        ),
        (
            vec![Item::bytes(Tag::CORRELATION_VALUE, b"nope"), Item::bytes(Tag::DATA, b"x")],
            ResultReason::ITEM_NOT_FOUND,
        ),
    ];
    for (fields, want) in refusals {
        assert_eq!(reason(&one(&mut tls, Operation::HASH, fields).await), want);
    }

    // MAC with keys of every HMAC algorithm: by the key's own algorithm,
    // and with the Cryptographic Parameters the OASIS test cases send.
    let macs = [
        (CryptographicAlgorithm::HMAC_SHA1, "SHA1"),
        (CryptographicAlgorithm::HMAC_SHA224, "SHA224"),
        (CryptographicAlgorithm::HMAC_SHA256, "SHA256"),
        (CryptographicAlgorithm::HMAC_SHA384, "SHA384"),
        (CryptographicAlgorithm::HMAC_SHA512, "SHA512"),
    ];
    let mut keys = Vec::new();
    for (alg, _) in macs {
        keys.push(hmac_key(&mut tls, alg, MAC_BOTH).await);
    }
    let want = reference(
        &macs
            .iter()
            .zip(&keys)
            .map(|((_, n), (_, k))| ("hmac", *n, k.clone(), data.clone()))
            .collect::<Vec<_>>(),
    );
    for (((alg, name), (uid, _)), want) in macs.iter().zip(&keys).zip(&want) {
        let by_key = ok(&one(
            &mut tls,
            Operation::MAC,
            vec![Item::text(Tag::UNIQUE_IDENTIFIER, uid), Item::bytes(Tag::DATA, &data)],
        )
        .await);
        assert_eq!(&hex(&bytes(&by_key, Tag::MAC_DATA)), want, "{name} by the key");
        let by_params = ok(&one_in(
            &mut tls,
            ProtocolVersion::V2_1,
            Operation::MAC,
            vec![
                Item::text(Tag::UNIQUE_IDENTIFIER, uid),
                params(vec![Item::enumeration(Tag::CRYPTOGRAPHIC_ALGORITHM, alg.0)]),
                Item::bytes(Tag::DATA, &data),
            ],
        )
        .await);
        assert_eq!(&hex(&bytes(&by_params, Tag::MAC_DATA)), want, "{name} by parameters");
        let verified = ok(&one(
            &mut tls,
            Operation::MAC_VERIFY,
            vec![
                Item::text(Tag::UNIQUE_IDENTIFIER, uid),
                Item::bytes(Tag::DATA, &data),
                Item::bytes(Tag::MAC_DATA, &bytes(&by_key, Tag::MAC_DATA)),
            ],
        )
        .await);
        assert_eq!(
            field(&verified, Tag::VALIDITY_INDICATOR).as_enum().unwrap(),
            ValidityIndicator::VALID.0
        );
        let mut forged = bytes(&by_key, Tag::MAC_DATA);
        forged[0] ^= 1;
        for tag in [forged, Vec::new()] {
            let refused = ok(&one(
                &mut tls,
                Operation::MAC_VERIFY,
                vec![
                    Item::text(Tag::UNIQUE_IDENTIFIER, uid),
                    Item::bytes(Tag::DATA, &data),
                    Item::bytes(Tag::MAC_DATA, &tag),
                ],
            )
            .await);
            assert_eq!(
                field(&refused, Tag::VALIDITY_INDICATOR).as_enum().unwrap(),
                ValidityIndicator::INVALID.0
            );
        }
    }

    // MAC and MAC Verify streamed: two parts, under the HMAC-SHA384 key.
    let (uid, _) = &keys[3];
    let first = ok(&one(
        &mut tls,
        Operation::MAC,
        vec![
            Item::text(Tag::UNIQUE_IDENTIFIER, uid),
            Item::bytes(Tag::DATA, &data[..1500]),
            Item::boolean(Tag::INIT_INDICATOR, true),
        ],
    )
    .await);
    assert!(first.iter().all(|i| i.tag != Tag::MAC_DATA));
    let cv = bytes(&first, Tag::CORRELATION_VALUE);
    let last = ok(&one(
        &mut tls,
        Operation::MAC,
        vec![
            Item::bytes(Tag::CORRELATION_VALUE, &cv),
            Item::bytes(Tag::DATA, &data[1500..]),
            Item::boolean(Tag::FINAL_INDICATOR, true),
        ],
    )
    .await);
    assert_eq!(hex(&bytes(&last, Tag::MAC_DATA)), want[3], "streamed HMAC-SHA384");
    let first = ok(&one(
        &mut tls,
        Operation::MAC_VERIFY,
        vec![
            Item::text(Tag::UNIQUE_IDENTIFIER, uid),
            Item::bytes(Tag::DATA, &data[..10]),
            Item::boolean(Tag::INIT_INDICATOR, true),
        ],
    )
    .await);
    assert_eq!(
        field(&first, Tag::VALIDITY_INDICATOR).as_enum().unwrap(),
        ValidityIndicator::UNKNOWN.0
    );
    let cv = bytes(&first, Tag::CORRELATION_VALUE);
    // A MAC stream's Correlation Value is not a MAC Verify one's.
    let wrong = one(
        &mut tls,
        Operation::MAC,
        vec![Item::bytes(Tag::CORRELATION_VALUE, &cv), Item::bytes(Tag::DATA, b"")],
    )
    .await;
    assert_eq!(reason(&wrong), ResultReason::INVALID_FIELD);
    let last = ok(&one(
        &mut tls,
        Operation::MAC_VERIFY,
        vec![
            Item::bytes(Tag::CORRELATION_VALUE, &cv),
            Item::bytes(Tag::DATA, &data[10..]),
            Item::bytes(Tag::MAC_DATA, &hex_decode(&want[3])),
            Item::boolean(Tag::FINAL_INDICATOR, true),
        ],
    )
    .await);
    assert_eq!(
        field(&last, Tag::VALIDITY_INDICATOR).as_enum().unwrap(),
        ValidityIndicator::VALID.0
    );

    // A streamed MAC re-checks its key on each part: revoked between two
    // parts, the key no longer MACs.
    let (revoked, _) = hmac_key(&mut tls, CryptographicAlgorithm::HMAC_SHA256, MAC_BOTH).await;
    let first = ok(&one(
        &mut tls,
        Operation::MAC,
        vec![
            Item::text(Tag::UNIQUE_IDENTIFIER, &revoked),
            Item::bytes(Tag::DATA, b"part"),
            Item::boolean(Tag::INIT_INDICATOR, true),
        ],
    )
    .await);
    let cv = bytes(&first, Tag::CORRELATION_VALUE);
    ok(&one(
        &mut tls,
        Operation::REVOKE,
        vec![
            Item::text(Tag::UNIQUE_IDENTIFIER, &revoked),
            Item::structure(
                Tag::REVOCATION_REASON,
                vec![Item::enumeration(Tag::REVOCATION_REASON_CODE, 0x05)],
            ),
        ],
    )
    .await);
    let after = one(
        &mut tls,
        Operation::MAC,
        vec![
            Item::bytes(Tag::CORRELATION_VALUE, &cv),
            Item::bytes(Tag::DATA, b"more"),
            Item::boolean(Tag::FINAL_INDICATOR, true),
        ],
    )
    .await;
    assert_eq!(reason(&after), ResultReason::ILLEGAL_OPERATION);
    // Wrongly typed stream fields are Invalid Field.
    let typed = one(
        &mut tls,
        Operation::MAC,
        vec![
            Item::text(Tag::UNIQUE_IDENTIFIER, &keys[2].0),
            Item::bytes(Tag::DATA, b"x"),
            Item::int(Tag::INIT_INDICATOR, 1),
        ],
    )
    .await;
    assert_eq!(reason(&typed), ResultReason::INVALID_FIELD);

    // MAC refusals: a key that may only generate cannot verify, and the
    // reverse; a client the key's rule does not allow; no parameters on a
    // key that names no HMAC; MAC Verify without MAC Data.
    let (gen_only, _) = hmac_key(&mut tls, CryptographicAlgorithm::HMAC_SHA256, 0x0080).await;
    let (verify_only, _) = hmac_key(&mut tls, CryptographicAlgorithm::HMAC_SHA256, 0x0100).await;
    let uid_data =
        |uid: &str| vec![Item::text(Tag::UNIQUE_IDENTIFIER, uid), Item::bytes(Tag::DATA, b"m")];
    let mut with_mac = uid_data(&gen_only);
    with_mac.push(Item::bytes(Tag::MAC_DATA, &[0; 32]));
    assert_eq!(
        reason(&one(&mut tls, Operation::MAC_VERIFY, with_mac).await),
        ResultReason::PERMISSION_DENIED
    );
    assert_eq!(
        reason(&one(&mut tls, Operation::MAC, uid_data(&verify_only)).await),
        ResultReason::PERMISSION_DENIED
    );
    assert_eq!(
        reason(&one(&mut tls, Operation::MAC_VERIFY, uid_data(&keys[2].0)).await),
        ResultReason::MISSING_DATA
    );
    let aes = ok(&one(
        &mut tls,
        Operation::CREATE,
        vec![
            Item::enumeration(Tag::OBJECT_TYPE, ObjectType::SYMMETRIC_KEY.0),
            Item::structure(
                Tag::TEMPLATE_ATTRIBUTE,
                vec![
                    attr(
                        "Cryptographic Algorithm",
                        Value::Enumeration(CryptographicAlgorithm::AES.0),
                    ),
                    attr("Cryptographic Length", Value::Integer(256)),
                    attr("Cryptographic Usage Mask", Value::Integer(MAC_BOTH)),
                ],
            ),
        ],
    )
    .await);
    let aes = field(&aes, Tag::UNIQUE_IDENTIFIER).as_text().unwrap().to_owned();
    ok(&one(&mut tls, Operation::ACTIVATE, vec![Item::text(Tag::UNIQUE_IDENTIFIER, &aes)]).await);
    assert_eq!(
        reason(&one(&mut tls, Operation::MAC, uid_data(&aes)).await),
        ResultReason::MISSING_DATA
    );
    let mut md5 = uid_data(&keys[0].0);
    md5.push(params(vec![Item::enumeration(
        Tag::CRYPTOGRAPHIC_ALGORITHM,
        CryptographicAlgorithm::HMAC_MD5.0,
    )]));
    assert_eq!(
        reason(&one(&mut tls, Operation::MAC, md5).await),
        ResultReason::FEATURE_NOT_SUPPORTED
    );
    let admin = KmsClient::new(&d.admin).unwrap();
    let other = admin
        .issue_client("stranger", &Labels::parse_list("role=none").unwrap(), false, Some(1), vec![])
        .await
        .unwrap();
    let mut stranger = connect(&other, &d.kmip, &rustls::version::TLS13).await;
    assert_eq!(
        reason(&one(&mut stranger, Operation::MAC, uid_data(&keys[2].0)).await),
        ResultReason::PERMISSION_DENIED
    );
    // Hash and RNG need no key: any registered client may use them.
    ok(&one(
        &mut stranger,
        Operation::HASH,
        vec![hashing(HashingAlgorithm::SHA1), Item::bytes(Tag::DATA, b"")],
    )
    .await);

    // RNG Retrieve: fresh bytes of the length asked, and a bounded length.
    let (a, b) = (random(&mut tls, 32).await, random(&mut tls, 32).await);
    assert_eq!((a.len(), b.len()), (32, 32));
    assert_ne!(a, b);
    assert_eq!(random(&mut tls, 65536).await.len(), 65536);
    for (fields, want) in [
        (vec![Item::int(Tag::DATA_LENGTH, 0)], ResultReason::INVALID_FIELD),
        (vec![Item::int(Tag::DATA_LENGTH, -5)], ResultReason::INVALID_FIELD),
        (vec![Item::int(Tag::DATA_LENGTH, 65537)], ResultReason::INVALID_FIELD),
        (vec![Item::int(Tag::DATA_LENGTH, i32::MAX)], ResultReason::INVALID_FIELD),
        (vec![Item::text(Tag::DATA_LENGTH, "32")], ResultReason::INVALID_FIELD),
        (vec![], ResultReason::MISSING_DATA),
    ] {
        assert_eq!(reason(&one(&mut tls, Operation::RNG_RETRIEVE, fields).await), want);
    }
    // RNG Seed: accepted, and the answer says none of it was mixed in.
    let seeded =
        ok(&one(&mut tls, Operation::RNG_SEED, vec![Item::bytes(Tag::DATA, &[7; 64])]).await);
    assert_eq!(field(&seeded, Tag::DATA_LENGTH).as_int().unwrap(), 0);
    assert_eq!(
        reason(&one(&mut tls, Operation::RNG_SEED, vec![]).await),
        ResultReason::MISSING_DATA
    );

    // Query lists exactly what is served, the new operations among them.
    let q = ok(&one(
        &mut tls,
        Operation::QUERY,
        vec![Item::enumeration(Tag::QUERY_FUNCTION, QueryFunction::OPERATIONS.0)],
    )
    .await);
    let listed: Vec<u32> = q.iter().map(|i| i.as_enum().unwrap()).collect();
    // Neither Interop (off but for interop testing) nor, to a KMIP 1.x
    // client, Log, Set Attribute and Adjust Attribute.
    let not_1x =
        [Operation::INTEROP, Operation::LOG, Operation::SET_ATTRIBUTE, Operation::ADJUST_ATTRIBUTE];
    let served: Vec<u32> = rampart_kms::server::kmip::OPERATIONS
        .iter()
        .filter(|o| !not_1x.contains(o))
        .map(|o| o.0)
        .collect();
    assert_eq!(listed, served);
    for op in [Operation::HASH, Operation::MAC_VERIFY, Operation::RNG_RETRIEVE, Operation::RNG_SEED]
    {
        assert!(listed.contains(&op.0), "{op}");
    }
    for op in [Operation::ARCHIVE, Operation::GET_USAGE_ALLOCATION] {
        assert!(!listed.contains(&op.0), "{op}");
    }

    // Every item is audited; MACs name their key.
    let audit = d.audit_ops().await;
    for (op, outcome) in [
        ("kmip.hash", "ok"),
        ("kmip.hash", "invalid"),
        ("kmip.mac", "ok"),
        ("kmip.mac", "denied"),
        ("kmip.mac_verify", "ok"),
        ("kmip.mac_verify", "denied"),
        ("kmip.rng_retrieve", "ok"),
        ("kmip.rng_retrieve", "invalid"),
        ("kmip.rng_seed", "ok"),
    ] {
        assert!(audit.iter().any(|(_, o, r)| o == op && r == outcome), "{op} {outcome}");
    }
    assert!(audit.iter().any(|(c, o, r)| c == "stranger" && o == "kmip.mac" && r == "denied"));
    assert!(admin.audit_verify().await.unwrap().ok);
}

on_each_store!(hash_mac_and_rng);

fn hex_decode(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

fn statuses(r: &ResponseMessage) -> Vec<(ResultStatus, Option<ResultReason>)> {
    r.batch_items.iter().map(|b| (b.result_status, b.result_reason)).collect()
}

async fn batch_options(backend: Backend) {
    let d = Deployment::on(backend, "batchopts").await;
    let mut tls = connect(&d.admin, &d.kmip, &rustls::version::TLS12).await;
    let rng = || (Operation::RNG_RETRIEVE, vec![Item::int(Tag::DATA_LENGTH, 16)]);
    let hash = || {
        (Operation::HASH, vec![hashing(HashingAlgorithm::SHA256), Item::bytes(Tag::DATA, b"abc")])
    };
    let missing = || (Operation::GET, vec![Item::text(Tag::UNIQUE_IDENTIFIER, "nothing/1")]);
    let create = || {
        (
            Operation::CREATE,
            vec![
                Item::enumeration(Tag::OBJECT_TYPE, ObjectType::SYMMETRIC_KEY.0),
                Item::structure(
                    Tag::TEMPLATE_ATTRIBUTE,
                    vec![
                        attr(
                            "Cryptographic Algorithm",
                            Value::Enumeration(CryptographicAlgorithm::AES.0),
                        ),
                        attr("Cryptographic Length", Value::Integer(128)),
                    ],
                ),
            ],
        )
    };
    let request = |ops, option| {
        let mut r = RequestMessage::new(ProtocolVersion::V1_4, ops);
        r.header.batch_error_continuation = option;
        r
    };
    let s = ResultStatus::SUCCESS;
    let f = ResultStatus::OPERATION_FAILED;
    let u = ResultStatus::OPERATION_UNDONE;
    let not_found = Some(ResultReason::ITEM_NOT_FOUND);
    let canceled = Some(ResultReason::OPERATION_CANCELED_BY_REQUESTER);

    // Stop and Continue around a failing item.
    let stop = exchange(
        &mut tls,
        &request(vec![rng(), missing(), hash()], BatchErrorContinuationOption::STOP),
    )
    .await;
    assert_eq!(statuses(&stop), [(s, None), (f, not_found), (f, canceled)]);
    let cont = exchange(
        &mut tls,
        &request(vec![rng(), missing(), hash()], BatchErrorContinuationOption::CONTINUE),
    )
    .await;
    assert_eq!(statuses(&cont), [(s, None), (f, not_found), (s, None)]);

    // Undo: the items before the failure are undone, the rest not run.
    let undo = exchange(
        &mut tls,
        &request(vec![rng(), hash(), missing(), rng()], BatchErrorContinuationOption::UNDO),
    )
    .await;
    assert_eq!(statuses(&undo), [(u, None), (u, None), (f, not_found), (f, canceled)]);
    assert!(undo.batch_items[0].payload.is_none(), "an undone item keeps no answer");
    let fine =
        exchange(&mut tls, &request(vec![rng(), hash()], BatchErrorContinuationOption::UNDO)).await;
    assert_eq!(statuses(&fine), [(s, None), (s, None)]);
    // Undo after a Create: the key it made is gone again.
    let before = key_count(&d).await;
    let undone =
        exchange(&mut tls, &request(vec![create(), missing()], BatchErrorContinuationOption::UNDO))
            .await;
    assert_eq!(statuses(&undone), [(u, None), (f, not_found)]);
    assert_eq!(key_count(&d).await, before, "the created key was undone");
    let nope = Some(ResultReason::FEATURE_NOT_SUPPORTED);

    // Undo with a part of a stream: refused whole too.
    let stream = (
        Operation::HASH,
        vec![
            hashing(HashingAlgorithm::SHA256),
            Item::bytes(Tag::DATA, b"abc"),
            Item::boolean(Tag::INIT_INDICATOR, true),
        ],
    );
    let refused =
        exchange(&mut tls, &request(vec![hash(), stream], BatchErrorContinuationOption::UNDO))
            .await;
    assert_eq!(statuses(&refused), [(f, nope), (f, nope)]);
    // So is the first part of a streamed Encrypt, which opens a stream.
    let encrypt_stream = (
        Operation::ENCRYPT,
        vec![
            Item::text(Tag::UNIQUE_IDENTIFIER, "any/1"),
            Item::bytes(Tag::DATA, b"abc"),
            Item::boolean(Tag::INIT_INDICATOR, true),
        ],
    );
    let refused = exchange(
        &mut tls,
        &request(vec![hash(), encrypt_stream], BatchErrorContinuationOption::UNDO),
    )
    .await;
    assert_eq!(statuses(&refused), [(f, nope), (f, nope)]);

    // Batch Order Option, either way: the items run and answer in order.
    for order in [true, false] {
        let mut r = RequestMessage::new(ProtocolVersion::V1_4, vec![create(), hash()]);
        r.header.batch_order_option = Some(order);
        for (i, item) in r.batch_items.iter_mut().enumerate() {
            item.unique_batch_item_id = Some(vec![u8::try_from(i).unwrap()]);
        }
        let answer = exchange(&mut tls, &r).await;
        assert_eq!(statuses(&answer), [(s, None), (s, None)]);
        let ids: Vec<_> =
            answer.batch_items.iter().map(|b| b.unique_batch_item_id.clone().unwrap()).collect();
        assert_eq!(ids, [vec![0], vec![1]]);
        assert_eq!(answer.batch_items[1].operation, Some(Operation::HASH));
    }

    // Maximum Response Size: Response Too Large when the answer would be
    // larger, the answer itself when it fits.
    let big = || (Operation::RNG_RETRIEVE, vec![Item::int(Tag::DATA_LENGTH, 4096)]);
    let mut r = RequestMessage::new(ProtocolVersion::V1_4, vec![big()]);
    r.header.maximum_response_size = Some(1000);
    let small = exchange(&mut tls, &r).await;
    assert_eq!(statuses(&small), [(f, Some(ResultReason::RESPONSE_TOO_LARGE))]);
    r.header.maximum_response_size = Some(8192);
    let fits = exchange(&mut tls, &r).await;
    assert_eq!(bytes(&ok(&fits.batch_items[0]), Tag::DATA).len(), 4096);

    let audit = d.audit_ops().await;
    assert!(audit.iter().any(|(_, o, r)| o == "kmip.rng_retrieve" && r == "invalid"));
    let admin = KmsClient::new(&d.admin).unwrap();
    assert!(admin.audit_verify().await.unwrap().ok);
}

on_each_store!(batch_options);

/// The Key Material of a symmetric key Get returned.
fn key_material(got: Vec<Item>) -> Vec<u8> {
    let key = field(&got, Tag::SYMMETRIC_KEY).children().unwrap();
    let block = field(key, Tag::KEY_BLOCK).children().unwrap();
    bytes(field(block, Tag::KEY_VALUE).children().unwrap(), Tag::KEY_MATERIAL)
}

/// The State, Names and client attributes of undo-kept/1.
async fn shown(tls: &mut Tls) -> Vec<String> {
    let request = vec![Item::text(Tag::UNIQUE_IDENTIFIER, "undo-kept/1")];
    let attrs = ok(&one(tls, Operation::GET_ATTRIBUTES, request).await);
    let mut seen: Vec<String> = attrs
        .iter()
        .filter(|i| i.tag == Tag::ATTRIBUTE)
        .map(|i| Attribute::parse(i).unwrap())
        .filter(|a| matches!(a.name.as_str(), "State" | "Name" | "x-note"))
        .map(|a| format!("{}={:?}", a.name, a.value.unwrap().value))
        .collect();
    seen.sort();
    seen
}

/// Batch Error Continuation Undo over items that change objects: what a
/// batch made is gone and what it changed is as it was once a later item
/// fails (a revocation and a destruction among them); a batch with an item
/// that cannot be put back is refused whole.
async fn undo_puts_back_what_a_failed_batch_changed(backend: Backend) {
    let d = Deployment::on(backend, "undo").await;
    let mut tls = connect(&d.admin, &d.kmip, &rustls::version::TLS12).await;
    let plain = |ops| RequestMessage::new(ProtocolVersion::V1_4, ops);
    let undo = |ops| {
        let mut r = plain(ops);
        r.header.batch_error_continuation = BatchErrorContinuationOption::UNDO;
        r
    };
    let name = |n: &str| {
        Value::Structure(vec![Item::text(Tag::NAME_VALUE, n), Item::enumeration(Tag::NAME_TYPE, 1)])
    };
    let uid = |u: &str| vec![Item::text(Tag::UNIQUE_IDENTIFIER, u)];
    let create = |n: &str| {
        let template = vec![
            attr("Cryptographic Algorithm", Value::Enumeration(CryptographicAlgorithm::AES.0)),
            attr("Cryptographic Length", Value::Integer(256)),
            attr("Cryptographic Usage Mask", Value::Integer(0x0C)),
            attr("Name", name(n)),
        ];
        (
            Operation::CREATE,
            vec![
                Item::enumeration(Tag::OBJECT_TYPE, ObjectType::SYMMETRIC_KEY.0),
                Item::structure(Tag::TEMPLATE_ATTRIBUTE, template),
            ],
        )
    };
    let pair = (
        Operation::CREATE_KEY_PAIR,
        vec![
            Item::structure(
                Tag::COMMON_TEMPLATE_ATTRIBUTE,
                vec![
                    attr(
                        "Cryptographic Algorithm",
                        Value::Enumeration(CryptographicAlgorithm::EC.0),
                    ),
                    attr("Cryptographic Length", Value::Integer(256)),
                ],
            ),
            Item::structure(
                Tag::PRIVATE_KEY_TEMPLATE_ATTRIBUTE,
                vec![attr("Name", name("undo-private"))],
            ),
            Item::structure(
                Tag::PUBLIC_KEY_TEMPLATE_ATTRIBUTE,
                vec![attr("Name", name("undo-public"))],
            ),
        ],
    );
    let note = |u: &str, text: &str| {
        let mut fields = uid(u);
        fields.push(attr("x-note", Value::TextString(text.into())));
        (Operation::ADD_ATTRIBUTE, fields)
    };
    let missing = || (Operation::GET, uid("nothing/1"));
    let s = ResultStatus::SUCCESS;
    let u = ResultStatus::OPERATION_UNDONE;
    let f = ResultStatus::OPERATION_FAILED;
    let not_found = Some(ResultReason::ITEM_NOT_FOUND);
    let key_names = || async {
        let filter = rampart_kms::store::KeyFilter::default();
        let keys = d.store.key_page(String::new(), filter, 10_000).await.unwrap();
        keys.into_iter().map(|k| k.name).collect::<Vec<_>>()
    };

    // Made, activated, read, annotated, then a failure: none of it stays.
    let before = key_names().await;
    let batch = undo(vec![
        create("undo-made"),
        (Operation::ACTIVATE, vec![]),
        (Operation::GET, vec![]),
        note("undo-made/1", "kept?"),
        pair.clone(),
        missing(),
    ]);
    let answer = exchange(&mut tls, &batch).await;
    assert_eq!(
        statuses(&answer),
        [(u, None), (u, None), (u, None), (u, None), (u, None), (f, not_found)]
    );
    let get = answer.batch_items[2].payload.as_ref().unwrap().children().unwrap().to_vec();
    assert_eq!(get, [Item::text(Tag::UNIQUE_IDENTIFIER, "undo-made/1")], "no key material");
    assert_eq!(key_names().await, before, "the created key and key pair were undone");
    let gone = one(&mut tls, Operation::GET, uid("undo-made/1")).await;
    assert_eq!(reason(&gone), ResultReason::ITEM_NOT_FOUND);

    // An existing key: its activation, attribute and Re-key are put back.
    let made = ok(&exchange(&mut tls, &plain(vec![create("undo-kept")])).await.batch_items[0]);
    assert_eq!(field(&made, Tag::UNIQUE_IDENTIFIER).as_text().unwrap(), "undo-kept/1");
    let material = key_material(ok(&one(&mut tls, Operation::GET, uid("undo-kept/1")).await));
    let earlier = shown(&mut tls).await;
    assert!(earlier.iter().any(|a| a == "State=Enumeration(1)"), "Pre-Active: {earlier:?}");
    let batch = undo(vec![
        (Operation::ACTIVATE, uid("undo-kept/1")),
        note("undo-kept/1", "undone"),
        (Operation::RE_KEY, uid("undo-kept/1")),
        missing(),
    ]);
    let answer = exchange(&mut tls, &batch).await;
    assert_eq!(statuses(&answer), [(u, None), (u, None), (u, None), (f, not_found)]);
    assert_eq!(shown(&mut tls).await, earlier, "the key is as the batch found it");
    let key = d.store.get_key("undo-kept".into()).await.unwrap().unwrap();
    assert_eq!(key.versions.len(), 1, "the Re-key's version was undone");
    let again = key_material(ok(&one(&mut tls, Operation::GET, uid("undo-kept/1")).await));
    assert_eq!(again, material);
    // The same batch without the failure stands.
    let batch = undo(vec![(Operation::ACTIVATE, uid("undo-kept/1")), note("undo-kept/1", "stays")]);
    assert_eq!(statuses(&exchange(&mut tls, &batch).await), [(s, None), (s, None)]);
    let stands = shown(&mut tls).await;
    assert!(stands.iter().any(|a| a == "State=Enumeration(2)"), "Active: {stands:?}");

    // Revoke and Destroy are put back too: the material is there again.
    let revoke = vec![
        Item::text(Tag::UNIQUE_IDENTIFIER, "undo-kept/1"),
        Item::structure(
            Tag::REVOCATION_REASON,
            vec![Item::enumeration(Tag::REVOCATION_REASON_CODE, 1)],
        ),
    ];
    let batch = undo(vec![
        (Operation::REVOKE, revoke),
        (Operation::DESTROY, uid("undo-kept/1")),
        missing(),
    ]);
    let answer = exchange(&mut tls, &batch).await;
    assert_eq!(statuses(&answer), [(u, None), (u, None), (f, not_found)]);
    assert_eq!(shown(&mut tls).await, stands, "active again");
    let again = key_material(ok(&one(&mut tls, Operation::GET, uid("undo-kept/1")).await));
    assert_eq!(again, material, "the destroyed material is back");
    let key = d.store.get_key("undo-kept".into()).await.unwrap().unwrap();
    assert_eq!(key.versions[0].state, rampart_kms::model::KeyState::Active);

    // A Log entry cannot be taken back: such a batch is refused whole.
    let nope = Some(ResultReason::FEATURE_NOT_SUPPORTED);
    let log = (Operation::LOG, vec![Item::text(Tag(0x42_0141), "kept")]); // Log Message
    let batch = undo(vec![note("undo-kept/1", "never"), log]);
    let mut two_one = batch.clone();
    two_one.header.protocol_version = ProtocolVersion::V2_1;
    assert_eq!(statuses(&exchange(&mut tls, &two_one).await), [(f, nope), (f, nope)]);
    assert_eq!(shown(&mut tls).await, stands, "nothing of a refused batch ran");

    let audit = d.audit_ops().await;
    assert!(audit.iter().any(|(_, o, r)| o == "kmip.create" && r == "ok"));
    assert!(audit.iter().any(|(_, o, r)| o == "kmip.re_key" && r == "invalid"), "undone, audited");
    let admin = KmsClient::new(&d.admin).unwrap();
    assert!(admin.audit_verify().await.unwrap().ok);
}

on_each_store!(undo_puts_back_what_a_failed_batch_changed);

/// One connection keeps at most 16 streams open; another has its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_streams_are_bounded_per_connection() {
    let d = Deployment::new("streams").await;
    let mut tls = connect(&d.admin, &d.kmip, &rustls::version::TLS13).await;
    let open = || {
        vec![
            hashing(HashingAlgorithm::SHA256),
            Item::bytes(Tag::DATA, b"part"),
            Item::boolean(Tag::INIT_INDICATOR, true),
        ]
    };
    let mut cvs = Vec::new();
    for _ in 0..16 {
        cvs.push(bytes(&ok(&one(&mut tls, Operation::HASH, open()).await), Tag::CORRELATION_VALUE));
    }
    assert_eq!(
        reason(&one(&mut tls, Operation::HASH, open()).await),
        ResultReason::ILLEGAL_OPERATION
    );
    let mut other = connect(&d.admin, &d.kmip, &rustls::version::TLS13).await;
    ok(&one(&mut other, Operation::HASH, open()).await);
    // The first connection's streams are its own.
    let foreign = one(
        &mut other,
        Operation::HASH,
        vec![
            Item::bytes(Tag::CORRELATION_VALUE, &cvs[0]),
            Item::boolean(Tag::FINAL_INDICATOR, true),
        ],
    )
    .await;
    assert_eq!(reason(&foreign), ResultReason::ITEM_NOT_FOUND);
    // Finishing one makes room again.
    let done = ok(&one(
        &mut tls,
        Operation::HASH,
        vec![
            Item::bytes(Tag::CORRELATION_VALUE, &cvs[0]),
            Item::boolean(Tag::FINAL_INDICATOR, true),
        ],
    )
    .await);
    assert_eq!(
        hex(&bytes(&done, Tag::DATA)),
        reference(&[("hash", "SHA256", Vec::new(), b"part".to_vec())])[0]
    );
    ok(&one(&mut tls, Operation::HASH, open()).await);
}

async fn key_count(d: &Deployment) -> usize {
    let filter = rampart_kms::store::KeyFilter::default();
    d.store.key_page(String::new(), filter, 10_000).await.unwrap().len()
}

/// What Python's `cryptography` derives from `key`: PBKDF2-HMAC-SHA256
/// (salt `salt-1`, 1,000 iterations, 32 bytes), SHA-512 (the first 32
/// bytes), HMAC-SHA256 of `context data` (the first 16 bytes) and SP
/// 800-108 counter mode with HMAC-SHA256 (label `label`, context
/// `context`, 48 bytes); in hex, in that order.
fn derived_by_cryptography(key: &[u8]) -> Vec<Vec<u8>> {
    let script = r#"
import sys
from cryptography.hazmat.primitives import hashes, hmac
from cryptography.hazmat.primitives.kdf.pbkdf2 import PBKDF2HMAC
from cryptography.hazmat.primitives.kdf.kbkdf import KBKDFHMAC, Mode, CounterLocation
k = bytes.fromhex(sys.argv[1])
print(PBKDF2HMAC(hashes.SHA256(), 32, b"salt-1", 1000).derive(k).hex())
h = hashes.Hash(hashes.SHA512()); h.update(k); print(h.finalize()[:32].hex())
m = hmac.HMAC(k, hashes.SHA256()); m.update(b"context data"); print(m.finalize()[:16].hex())
print(KBKDFHMAC(hashes.SHA256(), Mode.CounterMode, 48, 4, 4, CounterLocation.BeforeFixed,
                b"label", b"context", None).derive(k).hex())
# SP 800-108r1 feedback (4.2) and double-pipeline (4.3) modes, HMAC-SHA256,
# a 32-bit counter, fixed input Label || 0x00 || Context || [L]_32.
import hashlib, hmac as H
prf = lambda *parts: H.new(k, b"".join(parts), hashlib.sha256).digest()
fixed = b"label\0context" + (48 * 8).to_bytes(4, "big")
out, prev = b"", bytes(range(16))
for i in range(1, 3):
    prev = prf(prev, i.to_bytes(4, "big"), fixed); out += prev
print(out[:48].hex())
out, a = b"", fixed
for i in range(1, 3):
    a = prf(a); out += prf(a, i.to_bytes(4, "big"), fixed)
print(out[:48].hex())
"#;
    let out = Command::new("python3").args(["-c", script, &hex(key)]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().lines().map(hex_decode).collect()
}

/// The material of the Symmetric Key or Secret Data `uid`.
async fn object_material(tls: &mut Tls, uid: &str) -> Vec<u8> {
    let got = ok(&one(tls, Operation::GET, vec![Item::text(Tag::UNIQUE_IDENTIFIER, uid)]).await);
    let object = got.iter().find(|i| [Tag::SYMMETRIC_KEY, Tag::SECRET_DATA].contains(&i.tag));
    let block = field(object.unwrap().children().unwrap(), Tag::KEY_BLOCK).children().unwrap();
    bytes(field(block, Tag::KEY_VALUE).children().unwrap(), Tag::KEY_MATERIAL)
}

/// Derive Key by PBKDF2, HASH, HMAC and SP 800-108 counter mode, each
/// equal to what Python's `cryptography` derives from the same key, and
/// SP 800-108 feedback and double-pipeline modes, equal to a computation
/// with Python's `hmac` as SP 800-108r1 §4.2 and §4.3 write them; the
/// derived object and its base linked both ways; and the refusals.
async fn derive_key_matches_cryptography(backend: Backend) {
    let d = Deployment::on(backend, "derive").await;
    let mut tls = connect(&d.admin, &d.kmip, &rustls::version::TLS13).await;
    const DERIVE: i32 = 0x0200;
    let (base, key) = hmac_key(&mut tls, CryptographicAlgorithm::HMAC_SHA256, DERIVE).await;
    let expected = derived_by_cryptography(&key);
    let request = |base: &str, method: u32, parameters: Vec<Item>, object: ObjectType, bits| {
        let mut template = vec![attr("Cryptographic Length", Value::Integer(bits))];
        if object == ObjectType::SYMMETRIC_KEY {
            let aes = Value::Enumeration(CryptographicAlgorithm::AES.0);
            template.push(attr("Cryptographic Algorithm", aes));
        }
        vec![
            Item::enumeration(Tag::OBJECT_TYPE, object.0),
            Item::text(Tag::UNIQUE_IDENTIFIER, base),
            Item::enumeration(Tag::DERIVATION_METHOD, method),
            Item::structure(Tag::DERIVATION_PARAMETERS, parameters),
            Item::structure(Tag::TEMPLATE_ATTRIBUTE, template),
        ]
    };
    let sha256 = || hashing(HashingAlgorithm::SHA256);
    let cases = [
        (
            1, // PBKDF2
            vec![
                sha256(),
                Item::bytes(Tag::SALT, b"salt-1"),
                Item::int(Tag::ITERATION_COUNT, 1000),
            ],
            ObjectType::SYMMETRIC_KEY,
            256,
        ),
        (2, vec![hashing(HashingAlgorithm::SHA512)], ObjectType::SYMMETRIC_KEY, 256), // HASH
        (
            3,
            vec![Item::bytes(Tag::DERIVATION_DATA, b"context data")],
            ObjectType::SYMMETRIC_KEY,
            128,
        ), // HMAC
        (
            5, // NIST800-108-C
            vec![sha256(), Item::bytes(Tag::DERIVATION_DATA, b"label\0context")],
            ObjectType::SECRET_DATA,
            384,
        ),
        (
            6, // NIST800-108-F, the IV the first block's feedback
            vec![
                sha256(),
                Item::bytes(Tag::INITIALIZATION_VECTOR, &(0u8..16).collect::<Vec<_>>()),
                Item::bytes(Tag::DERIVATION_DATA, b"label\0context"),
            ],
            ObjectType::SECRET_DATA,
            384,
        ),
        (
            7, // NIST800-108-DPI
            vec![sha256(), Item::bytes(Tag::DERIVATION_DATA, b"label\0context")],
            ObjectType::SECRET_DATA,
            384,
        ),
    ];
    let mut derived = Vec::new();
    for ((method, parameters, object, bits), want) in cases.into_iter().zip(&expected) {
        let made = ok(&one(
            &mut tls,
            Operation::DERIVE_KEY,
            request(&base, method, parameters, object, bits),
        )
        .await);
        let uid = field(&made, Tag::UNIQUE_IDENTIFIER).as_text().unwrap().to_owned();
        assert_eq!(&object_material(&mut tls, &uid).await, want, "method {method}");
        derived.push(uid);
    }
    // Each derived object names its base, and the base each of them.
    let links = |items: Vec<Item>| format!("{items:?}");
    let base_attrs = links(ok(&one(
        &mut tls,
        Operation::GET_ATTRIBUTES,
        vec![Item::text(Tag::UNIQUE_IDENTIFIER, &base)],
    )
    .await));
    for uid in &derived {
        assert!(base_attrs.contains(&format!("TextString({uid:?})")), "{base_attrs}");
        let own = links(ok(&one(
            &mut tls,
            Operation::GET_ATTRIBUTES,
            vec![Item::text(Tag::UNIQUE_IDENTIFIER, uid)],
        )
        .await));
        assert!(
            own.contains("Enumeration(260)") && own.contains(&format!("TextString({base:?})")),
            "{own}"
        );
    }
    assert_eq!(base_attrs.matches("Enumeration(261)").count(), derived.len(), "{base_attrs}");

    // Refused: a key not made for derivation, an output longer than the
    // method gives, an Iteration Count of 0, ENCRYPT with an HMAC key, a
    // double-pipeline derivation given an IV.
    let (mac_only, _) = hmac_key(&mut tls, CryptographicAlgorithm::HMAC_SHA256, MAC_BOTH).await;
    let data = || Item::bytes(Tag::DERIVATION_DATA, b"x");
    for (base, method, parameters, bits, want) in [
        (&mac_only, 3, vec![data()], 128, ResultReason::PERMISSION_DENIED),
        (&base, 3, vec![data()], 512, ResultReason::INVALID_FIELD),
        (
            &base,
            1,
            vec![sha256(), Item::bytes(Tag::SALT, b"s"), Item::int(Tag::ITERATION_COUNT, 0)],
            128,
            ResultReason::INVALID_FIELD,
        ),
        (&base, 4, vec![data()], 128, ResultReason::INVALID_FIELD),
        (
            &base,
            7,
            vec![sha256(), Item::bytes(Tag::INITIALIZATION_VECTOR, b"iv"), data()],
            128,
            ResultReason::INVALID_FIELD,
        ),
    ] {
        let fields = request(base, method, parameters, ObjectType::SYMMETRIC_KEY, bits);
        assert_eq!(
            reason(&one(&mut tls, Operation::DERIVE_KEY, fields).await),
            want,
            "method {method}"
        );
    }
    let audit = d.audit_ops().await;
    assert_eq!(audit.iter().filter(|(_, o, r)| o == "kmip.derive_key" && r == "ok").count(), 6);
}

on_each_store!(derive_key_matches_cryptography);
