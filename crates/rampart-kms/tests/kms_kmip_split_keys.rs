//! Create Split Key and Join Split Key (KMIP 1.4 §4.38, §4.39) over raw
//! TTLV on both stores, each split checked by an independent computation
//! in Python: XOR of the parts, Lagrange interpolation over GF(2^8) (the
//! AES field) and over a prime field, giving back the key split; Join
//! forming the key again from any threshold of parts; the Links between
//! the parts and the key split; the refusals (too few parts, parts of
//! two splits, a method not supported, XOR with a threshold below the
//! parts, a Prime Field Size that is no prime or too small); Batch Error
//! Continuation Undo removing the parts.

use std::process::Command;

use rampart_kmip::enums::{
    usage_mask, BatchErrorContinuationOption, CryptographicAlgorithm, KeyFormatType, LinkType,
    ObjectType, Operation, ResultReason, ResultStatus, SecretDataType, SplitKeyMethod,
};
use rampart_kmip::message::{Attribute, ProtocolVersion, RequestMessage};
use rampart_kmip::tag::Tag;
use rampart_kmip::ttlv::{Item, Value};

use crate::common::Backend;
use crate::kmip_support as support;
use support::{attr, connect, exchange, ok, one, reason, uid_of, uids, Deployment, Tls};

/// An AES key registered with `material`, usable, its Unique Identifier.
async fn registered_aes(tls: &mut Tls, material: &[u8]) -> String {
    let block = Item::structure(
        Tag::KEY_BLOCK,
        vec![
            Item::enumeration(Tag::KEY_FORMAT_TYPE, KeyFormatType::RAW.0),
            Item::structure(Tag::KEY_VALUE, vec![Item::bytes(Tag::KEY_MATERIAL, material)]),
            Item::enumeration(Tag::CRYPTOGRAPHIC_ALGORITHM, CryptographicAlgorithm::AES.0),
            Item::int(Tag::CRYPTOGRAPHIC_LENGTH, i32::try_from(material.len() * 8).unwrap()),
        ],
    );
    let mask = usage_mask::ENCRYPT | usage_mask::DECRYPT;
    uid_of(&ok(&one(
        tls,
        Operation::REGISTER,
        vec![
            Item::enumeration(Tag::OBJECT_TYPE, ObjectType::SYMMETRIC_KEY.0),
            Item::structure(
                Tag::TEMPLATE_ATTRIBUTE,
                vec![attr("Cryptographic Usage Mask", Value::Integer(mask))],
            ),
            Item::structure(Tag::SYMMETRIC_KEY, vec![block]),
        ],
    )
    .await))
}

/// Create Split Key's request fields.
fn split_request(
    of: Option<&str>,
    parts: i32,
    threshold: i32,
    method: SplitKeyMethod,
    prime: Option<Vec<u8>>,
    attributes: Vec<Item>,
) -> Vec<Item> {
    let mut fields = vec![Item::enumeration(Tag::OBJECT_TYPE, ObjectType::SPLIT_KEY.0)];
    if let Some(of) = of {
        fields.push(Item::text(Tag::UNIQUE_IDENTIFIER, of));
    }
    fields.push(Item::int(Tag::SPLIT_KEY_PARTS, parts));
    fields.push(Item::int(Tag::SPLIT_KEY_THRESHOLD, threshold));
    fields.push(Item::enumeration(Tag::SPLIT_KEY_METHOD, method.0));
    if let Some(p) = prime {
        fields.push(Item::new(Tag::PRIME_FIELD_SIZE, Value::BigInteger(p)));
    }
    fields.push(Item::structure(Tag::TEMPLATE_ATTRIBUTE, attributes));
    fields
}

/// A part's Get: its Key Part Identifier and Key Material.
async fn part(tls: &mut Tls, uid: &str) -> (i32, Vec<u8>) {
    let got = ok(&one(tls, Operation::GET, vec![Item::text(Tag::UNIQUE_IDENTIFIER, uid)]).await);
    let split = got.iter().find(|i| i.tag == Tag::SPLIT_KEY).unwrap().children().unwrap();
    let field = |tag| split.iter().find(|i| i.tag == tag).unwrap();
    let id = field(Tag::KEY_PART_IDENTIFIER).as_int().unwrap();
    let block = field(Tag::KEY_BLOCK).children().unwrap();
    let value = block.iter().find(|i| i.tag == Tag::KEY_VALUE).unwrap().children().unwrap();
    (id, value[0].as_bytes().unwrap().to_vec())
}

/// The material of a Symmetric Key or Secret Data.
async fn material(tls: &mut Tls, uid: &str) -> Vec<u8> {
    let got = ok(&one(tls, Operation::GET, vec![Item::text(Tag::UNIQUE_IDENTIFIER, uid)]).await);
    let object = got.iter().find(|i| [Tag::SYMMETRIC_KEY, Tag::SECRET_DATA].contains(&i.tag));
    let block = object.unwrap().children().unwrap();
    let block = block.iter().find(|i| i.tag == Tag::KEY_BLOCK).unwrap().children().unwrap();
    let value = block.iter().find(|i| i.tag == Tag::KEY_VALUE).unwrap().children().unwrap();
    value[0].as_bytes().unwrap().to_vec()
}

fn join_request(object: ObjectType, parts: &[&String], extra: Vec<Item>) -> Vec<Item> {
    let mut fields = vec![Item::enumeration(Tag::OBJECT_TYPE, object.0)];
    fields.extend(parts.iter().map(|p| Item::text(Tag::UNIQUE_IDENTIFIER, p.as_str())));
    fields.extend(extra);
    fields
}

/// The key Python reconstructs from `parts` ((x, y) pairs) by `method`:
/// `xor`, `gf256` (Lagrange at 0 over GF(2^8), FIPS 197's field) or
/// `prime:P` (Lagrange at 0 modulo P, the key `len` bytes big-endian).
fn python_join(method: &str, parts: &[(i32, Vec<u8>)], len: usize) -> Vec<u8> {
    let script = r#"
import sys
method, length = sys.argv[1], int(sys.argv[2])
parts = [(int(a.split(":")[0]), bytes.fromhex(a.split(":")[1])) for a in sys.argv[3:]]
def gmul(a, b):
    p = 0
    for _ in range(8):
        if b & 1: p ^= a
        a = ((a << 1) ^ 0x11B) if a & 0x80 else a << 1
        b >>= 1
    return p
def ginv(a):
    return next(b for b in range(1, 256) if gmul(a, b) == 1)
if method == "xor":
    out = bytes(length)
    for _, y in parts: out = bytes(a ^ b for a, b in zip(out, y))
elif method == "gf256":
    out = bytearray(length)
    for i, (xi, yi) in enumerate(parts):
        num, den = 1, 1
        for j, (xj, _) in enumerate(parts):
            if i != j: num, den = gmul(num, xj), gmul(den, xi ^ xj)
        basis = gmul(num, ginv(den))
        for k in range(length): out[k] ^= gmul(yi[k], basis)
    out = bytes(out)
else:
    p = int(method.split(":")[1])
    s = 0
    for i, (xi, yi) in enumerate(parts):
        num, den = 1, 1
        for j, (xj, _) in enumerate(parts):
            if i != j: num, den = num * xj % p, den * (xj - xi) % p
        s = (s + int.from_bytes(yi, "big") * num * pow(den, -1, p)) % p
    out = s.to_bytes(length, "big")
print(out.hex())
"#;
    let args: Vec<String> = parts.iter().map(|(x, y)| format!("{x}:{}", hex::encode(y))).collect();
    let out = Command::new("python3")
        .args(["-c", script, method, &len.to_string()])
        .args(&args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    hex::decode(String::from_utf8(out.stdout).unwrap().trim()).unwrap()
}

/// The Link values (type, linked object) of `uid`.
async fn links(tls: &mut Tls, uid: &str) -> Vec<(u32, String)> {
    let got = ok(&one(
        tls,
        Operation::GET_ATTRIBUTES,
        vec![Item::text(Tag::UNIQUE_IDENTIFIER, uid), Item::text(Tag::ATTRIBUTE_NAME, "Link")],
    )
    .await);
    got.iter()
        .filter(|i| i.tag == Tag::ATTRIBUTE)
        .filter_map(|i| Attribute::parse(i).unwrap().value)
        .map(|v| {
            let f = v.children().unwrap().to_vec();
            (f[0].as_enum().unwrap(), f[1].as_text().unwrap().to_owned())
        })
        .collect()
}

async fn xor_split_keys_join_back_and_link_to_the_key_split(backend: Backend) {
    let d = Deployment::on(backend, "split-xor").await;
    let mut tls = connect(&d.admin, &d.kmip, &rustls::version::TLS13).await;
    let key: Vec<u8> = (0u8..32).map(|i| i.wrapping_mul(37).wrapping_add(11)).collect();
    let base = registered_aes(&mut tls, &key).await;
    let made = ok(&one(
        &mut tls,
        Operation::CREATE_SPLIT_KEY,
        split_request(Some(&base), 3, 3, SplitKeyMethod::XOR, None, vec![]),
    )
    .await);
    let parts = uids(&made);
    assert_eq!(parts.len(), 3);
    let mut got = Vec::new();
    for (i, p) in parts.iter().enumerate() {
        let (id, bytes) = part(&mut tls, p).await;
        assert_eq!(id, i32::try_from(i + 1).unwrap());
        assert_eq!(bytes.len(), 32);
        assert_ne!(bytes, key, "a part is not the key");
        got.push((id, bytes));
    }
    assert_eq!(python_join("xor", &got, 32), key);

    // The parts link to the key split and to one another, the key to them.
    let first = links(&mut tls, &parts[0]).await;
    assert!(first.contains(&(LinkType::PARENT.0, base.clone())), "{first:?}");
    assert!(first.contains(&(LinkType::NEXT.0, parts[1].clone())), "{first:?}");
    let middle = links(&mut tls, &parts[1]).await;
    assert!(middle.contains(&(LinkType::PREVIOUS.0, parts[0].clone())), "{middle:?}");
    let children = links(&mut tls, &base).await;
    for p in &parts {
        assert!(children.contains(&(LinkType::CHILD.0, p.clone())), "{children:?}");
    }

    // Join forms a new key of the same material, algorithm and length;
    // two of three XOR parts are too few (KMIP 1.4 §11.40).
    let joined = uid_of(&ok(&one(
        &mut tls,
        Operation::JOIN_SPLIT_KEY,
        join_request(ObjectType::SYMMETRIC_KEY, &parts.iter().collect::<Vec<_>>(), vec![]),
    )
    .await));
    assert_ne!(joined, base);
    assert_eq!(material(&mut tls, &joined).await, key);
    let too_few = one(
        &mut tls,
        Operation::JOIN_SPLIT_KEY,
        join_request(ObjectType::SYMMETRIC_KEY, &[&parts[0], &parts[2]], vec![]),
    )
    .await;
    assert_eq!(reason(&too_few), ResultReason::CRYPTOGRAPHIC_FAILURE);
    // XOR needs every part.
    let loose = one(
        &mut tls,
        Operation::CREATE_SPLIT_KEY,
        split_request(Some(&base), 3, 2, SplitKeyMethod::XOR, None, vec![]),
    )
    .await;
    assert_eq!(reason(&loose), ResultReason::INVALID_FIELD);
    // GF(2^16) is not served: Invalid Field (§11.39).
    let gf16 = one(
        &mut tls,
        Operation::CREATE_SPLIT_KEY,
        split_request(Some(&base), 3, 2, SplitKeyMethod::POLYNOMIAL_SHARING_GF_2_16, None, vec![]),
    )
    .await;
    assert_eq!(reason(&gf16), ResultReason::INVALID_FIELD);
    let audit = d.audit_ops().await;
    assert!(audit.iter().any(|(_, o, r)| o == "kmip.create_split_key" && r == "ok"), "{audit:?}");
    assert!(audit.iter().any(|(_, o, r)| o == "kmip.join_split_key" && r == "ok"), "{audit:?}");
}
on_each_store!(xor_split_keys_join_back_and_link_to_the_key_split);

async fn polynomial_split_keys_join_from_any_threshold_of_parts(backend: Backend) {
    let d = Deployment::on(backend, "split-poly").await;
    let mut tls = connect(&d.admin, &d.kmip, &rustls::version::TLS13).await;
    // GF(2^8), of a key the server draws (an AES-128 key named by the
    // attributes): any 3 of 5 parts give it, in Python and in Join alike.
    let made = ok(&one(
        &mut tls,
        Operation::CREATE_SPLIT_KEY,
        split_request(
            None,
            5,
            3,
            SplitKeyMethod::POLYNOMIAL_SHARING_GF_2_8,
            None,
            vec![
                attr("Cryptographic Algorithm", Value::Enumeration(CryptographicAlgorithm::AES.0)),
                attr("Cryptographic Length", Value::Integer(128)),
            ],
        ),
    )
    .await);
    let gf_parts = uids(&made);
    assert_eq!(gf_parts.len(), 5);
    let mut got = Vec::new();
    for p in &gf_parts {
        got.push(part(&mut tls, p).await);
    }
    let key = python_join("gf256", &[got[0].clone(), got[2].clone(), got[4].clone()], 16);
    assert_eq!(python_join("gf256", &got[1..4], 16), key);
    assert_ne!(python_join("gf256", &got[..2], 16), key, "two parts say nothing");
    for chosen in [[0, 2, 4], [1, 2, 3], [4, 0, 3]] {
        let ids: Vec<&String> = chosen.iter().map(|i| &gf_parts[*i]).collect();
        let joined = uid_of(&ok(&one(
            &mut tls,
            Operation::JOIN_SPLIT_KEY,
            join_request(ObjectType::SYMMETRIC_KEY, &ids, vec![]),
        )
        .await));
        assert_eq!(material(&mut tls, &joined).await, key, "{chosen:?}");
    }
    // Joined as Secret Data of the type asked.
    let secret = uid_of(&ok(&one(
        &mut tls,
        Operation::JOIN_SPLIT_KEY,
        join_request(
            ObjectType::SECRET_DATA,
            &[&gf_parts[0], &gf_parts[1], &gf_parts[2]],
            vec![Item::enumeration(Tag::SECRET_DATA_TYPE, SecretDataType::PASSWORD.0)],
        ),
    )
    .await));
    assert_eq!(material(&mut tls, &secret).await, key);
    let got_secret =
        ok(&one(&mut tls, Operation::GET, vec![Item::text(Tag::UNIQUE_IDENTIFIER, &secret)]).await);
    let data = got_secret.iter().find(|i| i.tag == Tag::SECRET_DATA).unwrap().children().unwrap();
    let data_type = data.iter().find(|i| i.tag == Tag::SECRET_DATA_TYPE).unwrap();
    assert_eq!(data_type.as_enum().unwrap(), SecretDataType::PASSWORD.0);

    // A prime field: 2^521 - 1, for an AES-256 key registered here.
    let key256: Vec<u8> = (0u8..32).map(|i| 255 - i).collect();
    let base = registered_aes(&mut tls, &key256).await;
    let mut prime = vec![0u8; 6];
    prime.push(0x01);
    prime.extend([0xFF; 65]);
    assert_eq!(prime.len(), 72);
    let made = ok(&one(
        &mut tls,
        Operation::CREATE_SPLIT_KEY,
        split_request(
            Some(&base),
            4,
            2,
            SplitKeyMethod::POLYNOMIAL_SHARING_PRIME_FIELD,
            Some(prime.clone()),
            vec![],
        ),
    )
    .await);
    let parts = uids(&made);
    let mut got = Vec::new();
    for p in &parts {
        let (id, y) = part(&mut tls, p).await;
        assert_eq!(y.len(), 66, "a part is as long as the prime");
        got.push((id, y));
    }
    let p521 = "6864797660130609714981900799081393217269435300143305409394463459185543183397656052122559640661454554977296311391480858037121987999716643812574028291115057151";
    assert_eq!(python_join(&format!("prime:{p521}"), &got[2..], 32), key256);
    assert_eq!(
        python_join(&format!("prime:{p521}"), &[got[0].clone(), got[3].clone()], 32),
        key256
    );
    let joined = uid_of(&ok(&one(
        &mut tls,
        Operation::JOIN_SPLIT_KEY,
        join_request(ObjectType::SYMMETRIC_KEY, &[&parts[3], &parts[1]], vec![]),
    )
    .await));
    assert_eq!(material(&mut tls, &joined).await, key256);
    // A length the prime cannot hold is refused, not allocated.
    let huge = one(
        &mut tls,
        Operation::JOIN_SPLIT_KEY,
        join_request(
            ObjectType::SECRET_DATA,
            &[&parts[0], &parts[1]],
            vec![Item::structure(
                Tag::TEMPLATE_ATTRIBUTE,
                vec![attr("Cryptographic Length", Value::Integer(1 << 30))],
            )],
        ),
    )
    .await;
    assert_eq!(reason(&huge), ResultReason::INVALID_FIELD);

    // Parts of two splits do not join; a Prime Field Size that is not a
    // prime, or not above 2^256, is refused.
    let mixed = one(
        &mut tls,
        Operation::JOIN_SPLIT_KEY,
        join_request(ObjectType::SYMMETRIC_KEY, &[&parts[0], &gf_parts[1]], vec![]),
    )
    .await;
    assert_eq!(reason(&mixed), ResultReason::INVALID_FIELD);
    // 2^521 + 1, a multiple of 3; 101, a prime below 2^256.
    let mut composite = vec![0u8; 6];
    composite.push(0x02);
    composite.extend([0u8; 64]);
    composite.push(0x01);
    for bad in [composite, vec![0, 0, 0, 0, 0, 0, 0, 0x65]] {
        let refused = one(
            &mut tls,
            Operation::CREATE_SPLIT_KEY,
            split_request(
                Some(&base),
                3,
                2,
                SplitKeyMethod::POLYNOMIAL_SHARING_PRIME_FIELD,
                Some(bad),
                vec![],
            ),
        )
        .await;
        assert_eq!(reason(&refused), ResultReason::INVALID_FIELD);
    }
}
on_each_store!(polynomial_split_keys_join_from_any_threshold_of_parts);

async fn undo_removes_the_parts_a_create_split_key_made(backend: Backend) {
    let d = Deployment::on(backend, "split-undo").await;
    let mut tls = connect(&d.admin, &d.kmip, &rustls::version::TLS13).await;
    let mut request = RequestMessage::new(
        ProtocolVersion::V1_4,
        vec![
            (
                Operation::CREATE_SPLIT_KEY,
                split_request(
                    None,
                    3,
                    2,
                    SplitKeyMethod::POLYNOMIAL_SHARING_GF_2_8,
                    None,
                    vec![
                        attr(
                            "Cryptographic Algorithm",
                            Value::Enumeration(CryptographicAlgorithm::AES.0),
                        ),
                        attr("Cryptographic Length", Value::Integer(256)),
                    ],
                ),
            ),
            (Operation::GET, vec![Item::text(Tag::UNIQUE_IDENTIFIER, "no-such/1")]),
        ],
    );
    request.header.batch_error_continuation = BatchErrorContinuationOption::UNDO;
    let items = exchange(&mut tls, &request).await.batch_items;
    assert_eq!(items[0].result_status, ResultStatus::OPERATION_UNDONE);
    let located = ok(&one(
        &mut tls,
        Operation::LOCATE,
        vec![attr("Object Type", Value::Enumeration(ObjectType::SPLIT_KEY.0))],
    )
    .await);
    assert!(uids(&located).is_empty(), "{located:?}");
}
on_each_store!(undo_removes_the_parts_a_create_split_key_made);
