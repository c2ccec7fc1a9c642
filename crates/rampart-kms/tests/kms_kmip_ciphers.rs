//! Encrypt and Decrypt over KMIP in every mode the server serves (AES
//! ECB/CBC/CTR/GCM/XTS and key wraps, Triple DES ECB/CBC, ChaCha20,
//! ChaCha20-Poly1305), on SQLite and PostgreSQL: each ciphertext and tag
//! checked against Python's `cryptography` with the same key, IV and
//! additional data, and each reference ciphertext decrypted by the
//! server; defaults from the key's Cryptographic Parameters, a streamed
//! GCM encryption, Usage Limits, REST wrapping with non-AES-256 keys, and
//! the Result Reasons of the wrong combinations.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use rampart_kmip::enums::{
    BlockCipherMode, CryptographicAlgorithm, ObjectType, Operation, PaddingMethod, ResultReason,
};
use rampart_kmip::message::{ProtocolVersion, RequestMessage, ResponseBatchItem};
use rampart_kmip::tag::Tag;
use rampart_kmip::ttlv::{Item, Value};

use crate::common::Backend;
use crate::kmip_support::{attr, connect, exchange, ok, reason, Deployment, Tls};

async fn one(
    tls: &mut Tls,
    version: ProtocolVersion,
    op: Operation,
    fields: Vec<Item>,
) -> ResponseBatchItem {
    exchange(tls, &RequestMessage::new(version, vec![(op, fields)])).await.batch_items.remove(0)
}

fn find(items: &[Item], tag: Tag) -> Option<Vec<u8>> {
    items.iter().find(|i| i.tag == tag).map(|i| i.as_bytes().unwrap().to_vec())
}

fn now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64
}

fn random(len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    rampart_crypto::fill_random(&mut out).unwrap();
    out
}

/// An active encryption key registered with `material`, and optionally
/// its Cryptographic Parameters attribute.
async fn register(
    tls: &mut Tls,
    alg: CryptographicAlgorithm,
    bits: i32,
    material: &[u8],
    params: Option<Vec<Item>>,
) -> String {
    register_for(tls, 0x04 | 0x08, alg, bits, material, params).await
}

/// As [`register`], for the uses in `mask`.
async fn register_for(
    tls: &mut Tls,
    mask: i32,
    alg: CryptographicAlgorithm,
    bits: i32,
    material: &[u8],
    params: Option<Vec<Item>>,
) -> String {
    let mut attrs = vec![
        attr("Cryptographic Usage Mask", Value::Integer(mask)),
        attr("Activation Date", Value::DateTime(now() - 3600)),
    ];
    if let Some(p) = params {
        attrs.push(attr("Cryptographic Parameters", Value::Structure(p)));
    }
    let block = Item::structure(
        Tag::KEY_BLOCK,
        vec![
            Item::enumeration(Tag::KEY_FORMAT_TYPE, 0x01),
            Item::structure(Tag::KEY_VALUE, vec![Item::bytes(Tag::KEY_MATERIAL, material)]),
            Item::enumeration(Tag::CRYPTOGRAPHIC_ALGORITHM, alg.0),
            Item::int(Tag::CRYPTOGRAPHIC_LENGTH, bits),
        ],
    );
    let done = ok(&one(
        tls,
        ProtocolVersion::V1_4,
        Operation::REGISTER,
        vec![
            Item::enumeration(Tag::OBJECT_TYPE, ObjectType::SYMMETRIC_KEY.0),
            Item::structure(Tag::TEMPLATE_ATTRIBUTE, attrs),
            Item::structure(Tag::SYMMETRIC_KEY, vec![block]),
        ],
    )
    .await);
    done.iter().find(|i| i.tag == Tag::UNIQUE_IDENTIFIER).unwrap().as_text().unwrap().to_owned()
}

/// One mode under test: the KMIP parameters and the reference's name for
/// them.
#[derive(Clone)]
struct Case {
    alg: CryptographicAlgorithm,
    bits: i32,
    key_len: usize,
    mode: Option<BlockCipherMode>,
    padding: Option<PaddingMethod>,
    iv_len: usize,
    aad: Vec<u8>,
    tag_len: Option<usize>,
    counter: Option<i32>,
    data_len: usize,
    /// The reference's alg and mode.
    python: (&'static str, &'static str),
}

impl Case {
    fn params(&self) -> Item {
        let mut p = Vec::new();
        if let Some(m) = self.mode {
            p.push(Item::enumeration(Tag::BLOCK_CIPHER_MODE, m.0));
        }
        if let Some(pad) = self.padding {
            p.push(Item::enumeration(Tag::PADDING_METHOD, pad.0));
        }
        if let Some(t) = self.tag_len {
            p.push(Item::int(Tag::TAG_LENGTH, i32::try_from(t).unwrap()));
        }
        if let Some(c) = self.counter {
            // Initial Counter Value (KMIP 2.1).
            p.push(Item::int(Tag(0x42_00D1), c));
        }
        Item::structure(Tag::CRYPTOGRAPHIC_PARAMETERS, p)
    }
}

fn case(
    alg: CryptographicAlgorithm,
    bits: i32,
    key_len: usize,
    mode: Option<BlockCipherMode>,
    iv_len: usize,
    data_len: usize,
    python: (&'static str, &'static str),
) -> Case {
    Case {
        alg,
        bits,
        key_len,
        mode,
        padding: None,
        iv_len,
        aad: Vec::new(),
        tag_len: None,
        counter: None,
        data_len,
        python,
    }
}

/// A case with its key, IV and data.
type Run = (Case, Vec<u8>, Vec<u8>, Vec<u8>);

/// The reference ciphertext and tag of each run.
fn reference(runs: &[Run]) -> Vec<(Vec<u8>, Vec<u8>)> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kmip/cipher_reference.py");
    let mut child = Command::new("python3")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 with cryptography (scripts/test installs it)");
    let mut input = String::new();
    for (c, key, iv, data) in runs {
        let line = serde_json::json!({
            "alg": c.python.0,
            "mode": c.python.1,
            "key": hex::encode(key),
            "iv": hex::encode(iv),
            "aad": hex::encode(&c.aad),
            "data": hex::encode(data),
            "pad": c.padding == Some(PaddingMethod::PKCS5),
            "tag_len": c.tag_len.unwrap_or(16),
            "counter": c.counter.unwrap_or(0),
        });
        input.push_str(&format!("{line}\n"));
    }
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "the cryptography reference failed");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let (ct, tag) = l.split_once(' ').unwrap();
            (
                hex::decode(ct).unwrap(),
                if tag == "-" { Vec::new() } else { hex::decode(tag).unwrap() },
            )
        })
        .collect()
}

fn cases() -> Vec<Case> {
    use BlockCipherMode as M;
    use CryptographicAlgorithm as A;
    let out = vec![
        case(A::AES, 128, 16, Some(M::ECB), 0, 32, ("aes", "ecb")),
        Case {
            padding: Some(PaddingMethod::PKCS5),
            ..case(A::AES, 256, 32, Some(M::ECB), 0, 21, ("aes", "ecb"))
        },
        Case {
            padding: Some(PaddingMethod::NONE),
            ..case(A::AES, 192, 24, Some(M::CBC), 16, 48, ("aes", "cbc"))
        },
        Case {
            padding: Some(PaddingMethod::PKCS5),
            ..case(A::AES, 128, 16, Some(M::CBC), 16, 33, ("aes", "cbc"))
        },
        case(A::AES, 256, 32, Some(M::CTR), 16, 70, ("aes", "ctr")),
        Case {
            aad: b"volume 9".to_vec(),
            tag_len: Some(12),
            ..case(A::AES, 128, 16, Some(M::GCM), 60, 45, ("aes", "gcm"))
        },
        Case { aad: b"hdr".to_vec(), ..case(A::AES, 256, 32, Some(M::GCM), 8, 64, ("aes", "gcm")) },
        case(A::AES, 512, 64, Some(M::XTS), 16, 40, ("aes", "xts")),
        case(A::AES, 256, 32, Some(M::XTS), 16, 4096, ("aes", "xts")),
        case(A::AES, 256, 32, Some(M::NIST_KEY_WRAP), 0, 32, ("aes", "kw")),
        case(A::AES, 128, 16, Some(M::AES_KEY_WRAP_PADDING), 0, 21, ("aes", "kwp")),
        Case {
            padding: Some(PaddingMethod::PKCS5),
            ..case(A::TRIPLE_DES, 168, 24, Some(M::ECB), 0, 13, ("3des", "ecb"))
        },
        Case {
            padding: Some(PaddingMethod::NONE),
            ..case(A::TRIPLE_DES, 192, 24, Some(M::CBC), 8, 24, ("3des", "cbc"))
        },
        Case {
            padding: Some(PaddingMethod::PKCS5),
            ..case(A::TRIPLE_DES, 112, 16, Some(M::CBC), 8, 30, ("3des", "cbc"))
        },
        Case {
            counter: Some(5),
            ..case(A::CHACHA20, 256, 32, None, 12, 150, ("chacha20", "none"))
        },
        case(A::CHACHA20, 256, 32, None, 8, 64, ("chacha20", "none")),
        Case {
            aad: b"associated".to_vec(),
            ..case(
                A::CHACHA20_POLY1305,
                256,
                32,
                Some(M::AEAD),
                12,
                114,
                ("chacha20poly1305", "none"),
            )
        },
    ];
    out
}

async fn every_mode_matches_pyca_both_ways(backend: Backend) {
    let d = Deployment::on(backend, "ciphers").await;
    let mut tls = connect(&d.admin, &d.kmip, &rustls::version::TLS13).await;
    let mut runs = Vec::new();
    let mut ids = Vec::new();
    for c in cases() {
        let mut key = random(c.key_len);
        if c.python.1 == "xts" {
            // Distinct halves (IEEE 1619 refuses equal ones); random ones are.
            assert_ne!(key[..c.key_len / 2], key[c.key_len / 2..]);
        }
        if c.alg == CryptographicAlgorithm::TRIPLE_DES {
            for b in &mut key {
                *b = (*b & 0xFE) | u8::from((*b >> 1).count_ones() % 2 == 0);
            }
        }
        let uid = register(&mut tls, c.alg, c.bits, &key, None).await;
        let iv = random(c.iv_len);
        let data = random(c.data_len);
        let reference_key = if c.alg == CryptographicAlgorithm::TRIPLE_DES && c.key_len == 16 {
            [&key[..], &key[..8]].concat()
        } else {
            key.clone()
        };
        runs.push((c, reference_key, iv, data));
        ids.push(uid);
    }
    let expected = reference(&runs);
    for ((c, _, iv, data), (uid, (ct, tag))) in runs.iter().zip(ids.iter().zip(expected)) {
        let what = format!("{} {:?} {}-byte key", c.alg, c.mode, c.key_len);
        let version =
            if c.counter.is_some() { ProtocolVersion::V2_1 } else { ProtocolVersion::V1_4 };
        let id = || Item::text(Tag::UNIQUE_IDENTIFIER, uid.clone());
        let mut fields = vec![id(), c.params(), Item::bytes(Tag::DATA, data)];
        if !iv.is_empty() {
            fields.push(Item::bytes(Tag::IV_COUNTER_NONCE, iv));
        }
        if !c.aad.is_empty() {
            fields.push(Item::bytes(Tag::AUTHENTICATED_ENCRYPTION_ADDITIONAL_DATA, &c.aad));
        }
        let enc = ok(&one(&mut tls, version, Operation::ENCRYPT, fields).await);
        assert_eq!(find(&enc, Tag::DATA).unwrap(), ct, "{what}: ciphertext");
        assert_eq!(
            find(&enc, Tag::AUTHENTICATED_ENCRYPTION_TAG).unwrap_or_default(),
            tag,
            "{what}: tag"
        );
        assert_eq!(find(&enc, Tag::IV_COUNTER_NONCE), None, "{what}: a given IV is not echoed");

        let mut fields = vec![id(), c.params(), Item::bytes(Tag::DATA, &ct)];
        if !iv.is_empty() {
            fields.push(Item::bytes(Tag::IV_COUNTER_NONCE, iv));
        }
        if !c.aad.is_empty() {
            fields.push(Item::bytes(Tag::AUTHENTICATED_ENCRYPTION_ADDITIONAL_DATA, &c.aad));
        }
        if !tag.is_empty() {
            fields.push(Item::bytes(Tag::AUTHENTICATED_ENCRYPTION_TAG, &tag));
        }
        let dec = ok(&one(&mut tls, version, Operation::DECRYPT, fields.clone()).await);
        assert_eq!(&find(&dec, Tag::DATA).unwrap(), data, "{what}: decryption");
        if !tag.is_empty() {
            // A changed ciphertext byte does not authenticate.
            fields[2] = Item::bytes(Tag::DATA, &[&[ct[0] ^ 1][..], &ct[1..]].concat());
            let refused = one(&mut tls, version, Operation::DECRYPT, fields).await;
            assert_eq!(reason(&refused), ResultReason::CRYPTOGRAPHIC_FAILURE, "{what}");
        }
    }
}

on_each_store!(every_mode_matches_pyca_both_ways);

async fn defaults_random_ivs_streams_and_refusals(backend: Backend) {
    use BlockCipherMode as M;
    use CryptographicAlgorithm as A;
    let d = Deployment::on(backend, "cipherrules").await;
    let mut tls = connect(&d.admin, &d.kmip, &rustls::version::TLS13).await;
    let v14 = ProtocolVersion::V1_4;
    let key = random(16);
    let mode = |m: M| Item::enumeration(Tag::BLOCK_CIPHER_MODE, m.0);

    // The key's Cryptographic Parameters (CBC, PKCS5, Random IV) serve a
    // request without any: the server draws the IV and returns it.
    let uid = register(
        &mut tls,
        A::AES,
        128,
        &key,
        Some(vec![
            mode(M::CBC),
            Item::enumeration(Tag::PADDING_METHOD, PaddingMethod::PKCS5.0),
            Item::boolean(Tag::RANDOM_IV, true),
        ]),
    )
    .await;
    let id = || Item::text(Tag::UNIQUE_IDENTIFIER, uid.clone());
    let data = random(20);
    let enc =
        ok(&one(&mut tls, v14, Operation::ENCRYPT, vec![id(), Item::bytes(Tag::DATA, &data)])
            .await);
    let iv = find(&enc, Tag::IV_COUNTER_NONCE).expect("the drawn IV");
    let ct = find(&enc, Tag::DATA).unwrap();
    let c = Case {
        padding: Some(PaddingMethod::PKCS5),
        ..case(A::AES, 128, 16, Some(M::CBC), 16, 20, ("aes", "cbc"))
    };
    let expected = reference(&[(c, key.clone(), iv.clone(), data.clone())]);
    assert_eq!(ct, expected[0].0);
    // Decrypt without the IV: Invalid Message (KMIP 1.4 §11.1).
    let missing =
        one(&mut tls, v14, Operation::DECRYPT, vec![id(), Item::bytes(Tag::DATA, &ct)]).await;
    assert_eq!(reason(&missing), ResultReason::INVALID_MESSAGE);
    let dec = ok(&one(
        &mut tls,
        v14,
        Operation::DECRYPT,
        vec![id(), Item::bytes(Tag::DATA, &ct), Item::bytes(Tag::IV_COUNTER_NONCE, &iv)],
    )
    .await);
    assert_eq!(find(&dec, Tag::DATA).unwrap(), data);
    // A request's field overrides the key's: no padding, whole blocks.
    let no_pad = Item::structure(
        Tag::CRYPTOGRAPHIC_PARAMETERS,
        vec![Item::enumeration(Tag::PADDING_METHOD, PaddingMethod::NONE.0)],
    );
    let odd = one(
        &mut tls,
        v14,
        Operation::ENCRYPT,
        vec![id(), no_pad.clone(), Item::bytes(Tag::DATA, &data)],
    )
    .await;
    assert_eq!(reason(&odd), ResultReason::INVALID_FIELD);
    let whole = ok(&one(
        &mut tls,
        v14,
        Operation::ENCRYPT,
        vec![id(), no_pad, Item::bytes(Tag::DATA, &[1; 32])],
    )
    .await);
    assert_eq!(find(&whole, Tag::DATA).unwrap().len(), 32);

    // A key without parameters and a request without a mode: Missing Data.
    let plain_uid = register(&mut tls, A::AES, 128, &key, None).await;
    let pid = || Item::text(Tag::UNIQUE_IDENTIFIER, plain_uid.clone());
    let no_mode =
        one(&mut tls, v14, Operation::ENCRYPT, vec![pid(), Item::bytes(Tag::DATA, &data)]).await;
    assert_eq!(reason(&no_mode), ResultReason::MISSING_DATA);
    let params = |items: Vec<Item>| Item::structure(Tag::CRYPTOGRAPHIC_PARAMETERS, items);
    let refusals = [
        // A CBC IV of the wrong length.
        (
            vec![params(vec![mode(M::CBC)]), Item::bytes(Tag::IV_COUNTER_NONCE, &[0; 5])],
            ResultReason::INVALID_FIELD,
        ),
        // GCM tags outside SP 800-38D's lengths, as the profiles answer.
        (
            vec![params(vec![mode(M::GCM), Item::int(Tag::TAG_LENGTH, 3)])],
            ResultReason::GENERAL_FAILURE,
        ),
        (
            vec![params(vec![mode(M::GCM), Item::int(Tag::TAG_LENGTH, 17)])],
            ResultReason::GENERAL_FAILURE,
        ),
        // A GCM IV under 8 bytes.
        (
            vec![params(vec![mode(M::GCM)]), Item::bytes(Tag::IV_COUNTER_NONCE, &[0; 4])],
            ResultReason::INVALID_FIELD,
        ),
        // ECB takes no IV; modes not served.
        (
            vec![params(vec![mode(M::ECB)]), Item::bytes(Tag::IV_COUNTER_NONCE, &[0; 16])],
            ResultReason::INVALID_FIELD,
        ),
        (vec![params(vec![mode(M::OFB)])], ResultReason::FEATURE_NOT_SUPPORTED),
        // Parameters naming another algorithm than the key's.
        (
            vec![params(vec![
                mode(M::ECB),
                Item::enumeration(Tag::CRYPTOGRAPHIC_ALGORITHM, A::TRIPLE_DES.0),
            ])],
            ResultReason::INVALID_FIELD,
        ),
        // XTS under a 128-bit key (XTS needs two).
        (
            vec![params(vec![mode(M::XTS)]), Item::bytes(Tag::IV_COUNTER_NONCE, &[0; 16])],
            ResultReason::INVALID_FIELD,
        ),
    ];
    for (extra, want) in refusals {
        let mut fields = vec![pid(), Item::bytes(Tag::DATA, &[0; 32])];
        fields.extend(extra.clone());
        let got = one(&mut tls, v14, Operation::ENCRYPT, fields).await;
        assert_eq!(reason(&got), want, "{extra:?}");
    }
    // A GCM decryption without its tag, and a bad padding on decryption.
    let no_tag = one(
        &mut tls,
        v14,
        Operation::DECRYPT,
        vec![
            pid(),
            params(vec![mode(M::GCM)]),
            Item::bytes(Tag::DATA, &[0; 16]),
            Item::bytes(Tag::IV_COUNTER_NONCE, &[0; 12]),
        ],
    )
    .await;
    assert_eq!(reason(&no_tag), ResultReason::INVALID_MESSAGE);
    // (A block of zeros, encrypted unpadded, decrypts to a last byte of 0:
    // never a valid PKCS#5 padding, whatever the key.)
    let zeros = ok(&one(
        &mut tls,
        v14,
        Operation::ENCRYPT,
        vec![
            pid(),
            params(vec![
                mode(M::ECB),
                Item::enumeration(Tag::PADDING_METHOD, PaddingMethod::NONE.0),
            ]),
            Item::bytes(Tag::DATA, &[0; 16]),
        ],
    )
    .await);
    let bad_pad = one(
        &mut tls,
        v14,
        Operation::DECRYPT,
        vec![
            pid(),
            params(vec![
                mode(M::ECB),
                Item::enumeration(Tag::PADDING_METHOD, PaddingMethod::PKCS5.0),
            ]),
            Item::bytes(Tag::DATA, &find(&zeros, Tag::DATA).unwrap()),
        ],
    )
    .await;
    assert_eq!(reason(&bad_pad), ResultReason::CRYPTOGRAPHIC_FAILURE);

    // Triple DES and ChaCha20 keys refuse modes they have no use for; key
    // lengths are checked on Register.
    let des = register(&mut tls, A::TRIPLE_DES, 168, &random(24), None).await;
    let gcm_des = one(
        &mut tls,
        v14,
        Operation::ENCRYPT,
        vec![
            Item::text(Tag::UNIQUE_IDENTIFIER, des.clone()),
            params(vec![mode(M::GCM)]),
            Item::bytes(Tag::DATA, &[0; 16]),
        ],
    )
    .await;
    assert_eq!(reason(&gcm_des), ResultReason::INVALID_FIELD);
    // Nor does a Triple DES key wrap keys for Get (the key wraps are AES's),
    // even one whose usage mask says Wrap Key.
    let des = register_for(&mut tls, 0x10, A::TRIPLE_DES, 192, &random(24), None).await;
    let wrapped_by_des = one(
        &mut tls,
        v14,
        Operation::GET,
        vec![
            pid(),
            Item::structure(
                Tag::KEY_WRAPPING_SPECIFICATION,
                vec![
                    Item::enumeration(Tag::WRAPPING_METHOD, 0x01),
                    Item::structure(
                        Tag::ENCRYPTION_KEY_INFORMATION,
                        vec![Item::text(Tag::UNIQUE_IDENTIFIER, des)],
                    ),
                ],
            ),
        ],
    )
    .await;
    assert_eq!(reason(&wrapped_by_des), ResultReason::PERMISSION_DENIED);
    let chacha = register(&mut tls, A::CHACHA20, 256, &random(32), None).await;
    let ctr_chacha = one(
        &mut tls,
        ProtocolVersion::V2_1,
        Operation::ENCRYPT,
        vec![
            Item::text(Tag::UNIQUE_IDENTIFIER, chacha),
            params(vec![mode(M::CTR)]),
            Item::bytes(Tag::DATA, &[0; 16]),
        ],
    )
    .await;
    assert_eq!(reason(&ctr_chacha), ResultReason::INVALID_FIELD);
    for (alg, bits, len) in [(A::AES, 100, 13), (A::TRIPLE_DES, 168, 16), (A::CHACHA20, 128, 16)] {
        let block = Item::structure(
            Tag::KEY_BLOCK,
            vec![
                Item::enumeration(Tag::KEY_FORMAT_TYPE, 0x01),
                Item::structure(Tag::KEY_VALUE, vec![Item::bytes(Tag::KEY_MATERIAL, &random(len))]),
                Item::enumeration(Tag::CRYPTOGRAPHIC_ALGORITHM, alg.0),
                Item::int(Tag::CRYPTOGRAPHIC_LENGTH, bits),
            ],
        );
        let refused = one(
            &mut tls,
            v14,
            Operation::REGISTER,
            vec![
                Item::enumeration(Tag::OBJECT_TYPE, ObjectType::SYMMETRIC_KEY.0),
                Item::structure(Tag::TEMPLATE_ATTRIBUTE, vec![]),
                Item::structure(Tag::SYMMETRIC_KEY, vec![block]),
            ],
        )
        .await;
        assert_eq!(reason(&refused), ResultReason::INVALID_FIELD, "{alg} {bits}");
    }

    // A streamed GCM encryption in three parts is the one-shot ciphertext.
    let gcm_key = random(32);
    let gcm_uid = register(&mut tls, A::AES, 256, &gcm_key, Some(vec![mode(M::GCM)])).await;
    let gid = || Item::text(Tag::UNIQUE_IDENTIFIER, gcm_uid.clone());
    let (iv, aad, data) = (random(12), b"stream aad".to_vec(), random(100));
    let first = ok(&one(
        &mut tls,
        v14,
        Operation::ENCRYPT,
        vec![
            gid(),
            Item::bytes(Tag::DATA, &data[..30]),
            Item::bytes(Tag::IV_COUNTER_NONCE, &iv),
            Item::bytes(Tag::AUTHENTICATED_ENCRYPTION_ADDITIONAL_DATA, &aad),
            Item::boolean(Tag::INIT_INDICATOR, true),
        ],
    )
    .await);
    let corr = find(&first, Tag::CORRELATION_VALUE).unwrap();
    let mut ct = find(&first, Tag::DATA).unwrap();
    let middle = ok(&one(
        &mut tls,
        v14,
        Operation::ENCRYPT,
        vec![
            gid(),
            Item::bytes(Tag::DATA, &data[30..61]),
            Item::bytes(Tag::CORRELATION_VALUE, &corr),
        ],
    )
    .await);
    ct.extend(find(&middle, Tag::DATA).unwrap());
    let last = ok(&one(
        &mut tls,
        v14,
        Operation::ENCRYPT,
        vec![
            gid(),
            Item::bytes(Tag::DATA, &data[61..]),
            Item::bytes(Tag::CORRELATION_VALUE, &corr),
            Item::boolean(Tag::FINAL_INDICATOR, true),
        ],
    )
    .await);
    ct.extend(find(&last, Tag::DATA).unwrap());
    let c =
        Case { aad: aad.clone(), ..case(A::AES, 256, 32, Some(M::GCM), 12, 100, ("aes", "gcm")) };
    let expected = reference(&[(c, gcm_key, iv.clone(), data)]);
    assert_eq!((ct, find(&last, Tag::AUTHENTICATED_ENCRYPTION_TAG).unwrap()), expected[0]);
    // The stream is closed; a streamed decryption is refused.
    let closed = one(
        &mut tls,
        v14,
        Operation::ENCRYPT,
        vec![gid(), Item::bytes(Tag::DATA, &[0; 4]), Item::bytes(Tag::CORRELATION_VALUE, &corr)],
    )
    .await;
    assert_eq!(reason(&closed), ResultReason::ITEM_NOT_FOUND);
    let streamed_open = one(
        &mut tls,
        v14,
        Operation::DECRYPT,
        vec![
            gid(),
            Item::bytes(Tag::DATA, &[0; 16]),
            Item::bytes(Tag::IV_COUNTER_NONCE, &iv),
            Item::boolean(Tag::INIT_INDICATOR, true),
        ],
    )
    .await;
    assert_eq!(reason(&streamed_open), ResultReason::FEATURE_NOT_SUPPORTED);
}

on_each_store!(defaults_random_ivs_streams_and_refusals);

async fn rest_wrap_takes_aes_256_keys_only(backend: Backend) {
    use CryptographicAlgorithm as A;
    let d = Deployment::on(backend, "restwrapalg").await;
    let mut tls = connect(&d.admin, &d.kmip, &rustls::version::TLS13).await;
    let admin = rampart_kms::client::KmsClient::new(&d.admin).unwrap();
    let aes256 = register(&mut tls, A::AES, 256, &random(32), None).await;
    let name = |uid: &str| uid.split('/').next().unwrap().to_owned();
    let wrapped = admin.wrap(&name(&aes256), b"data key", b"ctx").await.unwrap();
    assert!(wrapped.starts_with("rampart:v1:"));
    for (alg, bits, len) in
        [(A::AES, 128, 16), (A::AES, 192, 24), (A::TRIPLE_DES, 192, 24), (A::CHACHA20, 256, 32)]
    {
        let uid = register(&mut tls, alg, bits, &random(len), None).await;
        let refused = admin.wrap(&name(&uid), b"data key", b"ctx").await.unwrap_err();
        assert!(refused.to_string().contains("AES-256"), "{alg} {bits}: {refused}");
    }
}

on_each_store!(rest_wrap_takes_aes_256_keys_only);

async fn usage_limits_are_spent_once_across_connections(backend: Backend) {
    use BlockCipherMode as M;
    let d = Deployment::on(backend, "usagelimits").await;
    let mut tls = connect(&d.admin, &d.kmip, &rustls::version::TLS13).await;
    let mut second = connect(&d.admin, &d.kmip, &rustls::version::TLS13).await;
    let v14 = ProtocolVersion::V1_4;
    let material = Item::structure(
        Tag::KEY_BLOCK,
        vec![
            Item::enumeration(Tag::KEY_FORMAT_TYPE, 0x01),
            Item::structure(Tag::KEY_VALUE, vec![Item::bytes(Tag::KEY_MATERIAL, &random(16))]),
            Item::enumeration(Tag::CRYPTOGRAPHIC_ALGORITHM, CryptographicAlgorithm::AES.0),
            Item::int(Tag::CRYPTOGRAPHIC_LENGTH, 128),
        ],
    );
    // 48 bytes of Usage Limits (Unit Byte).
    let limits = Value::Structure(vec![
        Item::long(Tag(0x42_0097), 48),
        Item::enumeration(Tag(0x42_0098), 0x01),
    ]);
    let registered = ok(&one(
        &mut tls,
        v14,
        Operation::REGISTER,
        vec![
            Item::enumeration(Tag::OBJECT_TYPE, ObjectType::SYMMETRIC_KEY.0),
            Item::structure(
                Tag::TEMPLATE_ATTRIBUTE,
                vec![
                    attr("Activation Date", Value::DateTime(now() - 60)),
                    attr("Usage Limits", limits),
                    attr(
                        "Cryptographic Parameters",
                        Value::Structure(vec![Item::enumeration(Tag::BLOCK_CIPHER_MODE, M::ECB.0)]),
                    ),
                ],
            ),
            Item::structure(Tag::SYMMETRIC_KEY, vec![material]),
        ],
    )
    .await);
    let uid = registered.iter().find(|i| i.tag == Tag::UNIQUE_IDENTIFIER).unwrap();
    let encrypt = |len: usize| vec![uid.clone(), Item::bytes(Tag::DATA, &vec![0; len])];
    // A refused encryption (not whole blocks) spends nothing.
    assert_eq!(
        reason(&one(&mut tls, v14, Operation::ENCRYPT, encrypt(7)).await),
        ResultReason::INVALID_FIELD
    );
    ok(&one(&mut tls, v14, Operation::ENCRYPT, encrypt(32)).await);
    // The other connection sees what is left: 16 bytes, not 32.
    let over = one(&mut second, v14, Operation::ENCRYPT, encrypt(32)).await;
    assert_eq!(reason(&over), ResultReason::PERMISSION_DENIED);
    ok(&one(&mut second, v14, Operation::ENCRYPT, encrypt(16)).await);
    let spent = one(&mut tls, v14, Operation::ENCRYPT, encrypt(16)).await;
    assert_eq!(reason(&spent), ResultReason::PERMISSION_DENIED);
    // Decryption is not limited.
    ok(&one(&mut tls, v14, Operation::DECRYPT, encrypt(16)).await);
}

on_each_store!(usage_limits_are_spent_once_across_connections);
