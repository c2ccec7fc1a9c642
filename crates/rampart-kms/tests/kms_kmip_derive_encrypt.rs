//! Derive Key by ENCRYPT (KMIP 1.4 §4.6: the Derivation Data encrypted
//! under the base key) on both stores, checked against Python's
//! `cryptography`, with the request's Cryptographic Parameters and with
//! the key's; and its refusals with their Result Reasons.

use std::process::Command;

use rampart_kmip::enums::{
    usage_mask, BlockCipherMode, CryptographicAlgorithm, KeyFormatType, ObjectType, Operation,
    ResultReason,
};
use rampart_kmip::tag::Tag;
use rampart_kmip::ttlv::{Item, Value};

use crate::common::Backend;
use crate::kmip_support as support;
use support::{attr, connect, ok, one, reason, uid_of, Deployment, Tls};

fn mode(m: BlockCipherMode) -> Item {
    Item::structure(
        Tag::CRYPTOGRAPHIC_PARAMETERS,
        vec![Item::enumeration(Tag::BLOCK_CIPHER_MODE, m.0)],
    )
}

/// An active AES key of `material` that may derive, with `extra`
/// attributes.
async fn derivation_key(tls: &mut Tls, material: &[u8], extra: Vec<Item>) -> String {
    let block = Item::structure(
        Tag::KEY_BLOCK,
        vec![
            Item::enumeration(Tag::KEY_FORMAT_TYPE, KeyFormatType::RAW.0),
            Item::structure(Tag::KEY_VALUE, vec![Item::bytes(Tag::KEY_MATERIAL, material)]),
            Item::enumeration(Tag::CRYPTOGRAPHIC_ALGORITHM, CryptographicAlgorithm::AES.0),
            Item::int(Tag::CRYPTOGRAPHIC_LENGTH, i32::try_from(material.len() * 8).unwrap()),
        ],
    );
    let mut attributes =
        vec![attr("Cryptographic Usage Mask", Value::Integer(usage_mask::DERIVE_KEY))];
    attributes.extend(extra);
    let id = uid_of(&ok(&one(
        tls,
        Operation::REGISTER,
        vec![
            Item::enumeration(Tag::OBJECT_TYPE, ObjectType::SYMMETRIC_KEY.0),
            Item::structure(Tag::TEMPLATE_ATTRIBUTE, attributes),
            Item::structure(Tag::SYMMETRIC_KEY, vec![block]),
        ],
    )
    .await));
    ok(&one(tls, Operation::ACTIVATE, vec![Item::text(Tag::UNIQUE_IDENTIFIER, &id)]).await);
    id
}

fn derive_request(base: &str, parameters: Vec<Item>, object: ObjectType, bits: i32) -> Vec<Item> {
    let mut template = vec![attr("Cryptographic Length", Value::Integer(bits))];
    if object == ObjectType::SYMMETRIC_KEY {
        template.push(attr(
            "Cryptographic Algorithm",
            Value::Enumeration(CryptographicAlgorithm::AES.0),
        ));
    }
    vec![
        Item::enumeration(Tag::OBJECT_TYPE, object.0),
        Item::text(Tag::UNIQUE_IDENTIFIER, base),
        Item::enumeration(Tag::DERIVATION_METHOD, 4), // ENCRYPT
        Item::structure(Tag::DERIVATION_PARAMETERS, parameters),
        Item::structure(Tag::TEMPLATE_ATTRIBUTE, template),
    ]
}

async fn material(tls: &mut Tls, uid: &str) -> Vec<u8> {
    let got = ok(&one(tls, Operation::GET, vec![Item::text(Tag::UNIQUE_IDENTIFIER, uid)]).await);
    let object = got.iter().find(|i| [Tag::SYMMETRIC_KEY, Tag::SECRET_DATA].contains(&i.tag));
    let block = object.unwrap().children().unwrap();
    let block = block.iter().find(|i| i.tag == Tag::KEY_BLOCK).unwrap().children().unwrap();
    let value = block.iter().find(|i| i.tag == Tag::KEY_VALUE).unwrap().children().unwrap();
    value[0].as_bytes().unwrap().to_vec()
}

/// AES-`mode` of `data` under `key` (IV `iv`), by `cryptography`.
fn aes_by_cryptography(mode: &str, key: &[u8], iv: &[u8], data: &[u8]) -> Vec<u8> {
    let script = r#"
import sys
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
mode, key, iv, data = sys.argv[1], *(bytes.fromhex(a) for a in sys.argv[2:5])
m = {"cbc": lambda: modes.CBC(iv), "ecb": lambda: modes.ECB(), "ctr": lambda: modes.CTR(iv)}[mode]()
e = Cipher(algorithms.AES(key), m).encryptor()
print((e.update(data) + e.finalize()).hex())
"#;
    let out = Command::new("python3")
        .args(["-c", script, mode, &hex::encode(key), &hex::encode(iv), &hex::encode(data)])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    hex::decode(String::from_utf8(out.stdout).unwrap().trim()).unwrap()
}

async fn derive_key_by_encrypt_matches_cryptography(backend: Backend) {
    let d = Deployment::on(backend, "derive-encrypt").await;
    let mut tls = connect(&d.admin, &d.kmip, &rustls::version::TLS13).await;
    let key: Vec<u8> = (0u8..32).map(|i| i ^ 0x5A).collect();
    let base = derivation_key(&mut tls, &key, vec![]).await;
    let iv: Vec<u8> = (100u8..116).collect();
    let data: Vec<u8> = (0u8..32).map(|i| i.wrapping_mul(7)).collect();
    let iv_item = || Item::bytes(Tag::INITIALIZATION_VECTOR, &iv);
    let data_item = || Item::bytes(Tag::DERIVATION_DATA, &data);

    // CBC: an AES-128 key, the first 16 bytes of the ciphertext.
    let cbc = aes_by_cryptography("cbc", &key, &iv, &data);
    let made = ok(&one(
        &mut tls,
        Operation::DERIVE_KEY,
        derive_request(
            &base,
            vec![mode(BlockCipherMode::CBC), iv_item(), data_item()],
            ObjectType::SYMMETRIC_KEY,
            128,
        ),
    )
    .await);
    assert_eq!(material(&mut tls, &uid_of(&made)).await, cbc[..16]);
    // CTR: Secret Data of the whole 32 bytes.
    let ctr = aes_by_cryptography("ctr", &key, &iv, &data);
    let made = ok(&one(
        &mut tls,
        Operation::DERIVE_KEY,
        derive_request(
            &base,
            vec![mode(BlockCipherMode::CTR), iv_item(), data_item()],
            ObjectType::SECRET_DATA,
            256,
        ),
    )
    .await);
    assert_eq!(material(&mut tls, &uid_of(&made)).await, ctr);
    // No Cryptographic Parameters: the key's (ECB here, no IV).
    let ecb_key = derivation_key(
        &mut tls,
        &key,
        vec![attr(
            "Cryptographic Parameters",
            Value::Structure(vec![Item::enumeration(
                Tag::BLOCK_CIPHER_MODE,
                BlockCipherMode::ECB.0,
            )]),
        )],
    )
    .await;
    let ecb = aes_by_cryptography("ecb", &key, &[], &data);
    let made = ok(&one(
        &mut tls,
        Operation::DERIVE_KEY,
        derive_request(&ecb_key, vec![data_item()], ObjectType::SYMMETRIC_KEY, 256),
    )
    .await);
    assert_eq!(material(&mut tls, &uid_of(&made)).await, ecb);

    // Refused: CBC without the IV (a drawn one would make the key
    // unrepeatable), no mode at all, more than the ciphertext gives, no
    // Derivation Data.
    for (parameters, bits, want) in [
        (vec![mode(BlockCipherMode::CBC), data_item()], 128, ResultReason::MISSING_DATA),
        (vec![iv_item(), data_item()], 128, ResultReason::MISSING_DATA),
        (
            vec![mode(BlockCipherMode::CTR), iv_item(), data_item()],
            512,
            ResultReason::INVALID_FIELD,
        ),
        (vec![mode(BlockCipherMode::CBC), iv_item()], 128, ResultReason::MISSING_DATA),
    ] {
        let refused = one(
            &mut tls,
            Operation::DERIVE_KEY,
            derive_request(&base, parameters, ObjectType::SECRET_DATA, bits),
        )
        .await;
        assert_eq!(reason(&refused), want);
    }
}
on_each_store!(derive_key_by_encrypt_matches_cryptography);
