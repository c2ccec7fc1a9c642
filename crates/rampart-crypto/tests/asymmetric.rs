//! Public-key operations against pyca/cryptography (tests/asymmetric_reference.py)
//! both ways: keys generated here and there, signatures made by one side and
//! checked by the other, ciphertexts encrypted by one and decrypted by the
//! other; and the RFC 8032 Ed25519 vector.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use rampart_crypto::{
    generate_ec, generate_ed25519, generate_rsa, CryptoError, Curve, DigestAlg, KeyAlg, PrivateKey,
    PublicKey, RsaEncryption, SignatureScheme,
};
use serde_json::{json, Value};

struct Py {
    child: std::process::Child,
    reader: BufReader<std::process::ChildStdout>,
}

impl Py {
    fn start() -> Self {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/asymmetric_reference.py");
        let mut child = Command::new("python3")
            .arg(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 with pyca/cryptography");
        let reader = BufReader::new(child.stdout.take().unwrap());
        Self { child, reader }
    }

    fn ask(&mut self, request: &Value) -> Vec<u8> {
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "{request}").unwrap();
        stdin.flush().unwrap();
        let mut line = String::new();
        self.reader.read_line(&mut line).unwrap();
        assert!(!line.is_empty(), "asymmetric_reference.py exited on {request}");
        let answer: Value = serde_json::from_str(&line).unwrap();
        hex::decode(answer["out"].as_str().unwrap()).unwrap()
    }
}

impl Drop for Py {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn hash_name(d: DigestAlg) -> &'static str {
    match d {
        DigestAlg::Sha1 => "sha1",
        DigestAlg::Sha224 => "sha224",
        DigestAlg::Sha256 => "sha256",
        DigestAlg::Sha384 => "sha384",
        _ => "sha512",
    }
}

/// The reference's description of a scheme, on top of `base`.
fn describe(scheme: SignatureScheme, mut base: Value) -> Value {
    let m = base.as_object_mut().unwrap();
    match scheme {
        SignatureScheme::RsaPkcs1v15(d) | SignatureScheme::Ecdsa(d) => {
            m.insert("scheme".into(), json!("pkcs1"));
            m.insert("hash".into(), json!(hash_name(d)));
        }
        SignatureScheme::RsaPss { digest, mgf1, salt_len } => {
            m.insert("scheme".into(), json!("pss"));
            m.insert("hash".into(), json!(hash_name(digest)));
            m.insert("mgf1".into(), json!(hash_name(mgf1)));
            m.insert("salt".into(), json!(salt_len));
        }
        SignatureScheme::Ed25519 => {}
    }
    base
}

fn digest(alg: DigestAlg, data: &[u8]) -> Vec<u8> {
    let mut h = rampart_crypto::Hasher::new(alg);
    h.update(data);
    h.finish()
}

/// Signs with `private` here and there; each side verifies the other's
/// signature, and a flipped bit fails on both.
fn cross_check_signatures(py: &mut Py, private: &PrivateKey, scheme: SignatureScheme) {
    let pkcs8 = hex::encode(private.to_pkcs8().unwrap().expose());
    let spki = private.public_key_der().unwrap();
    let public = PublicKey::from_spki(&spki).unwrap();
    let spki = hex::encode(spki);
    let message = b"rampart signs this";
    let ours = private.sign(scheme, message).unwrap();
    let ask = json!({"op": "verify", "key": spki, "data": hex::encode(message), "sig": hex::encode(&ours)});
    assert_eq!(py.ask(&describe(scheme, ask)), [1], "{scheme:?}: pyca rejects our signature");
    let ask = json!({"op": "sign", "key": pkcs8, "data": hex::encode(message)});
    let theirs = py.ask(&describe(scheme, ask));
    assert!(public.verify(scheme, message, &theirs).unwrap(), "{scheme:?}: pyca's signature");
    let mut bad = theirs.clone();
    bad[3] ^= 0x10;
    assert!(!public.verify(scheme, message, &bad).unwrap(), "{scheme:?}: tampered signature");
    assert!(!public.verify(scheme, b"another message", &theirs).unwrap());
    let ask = json!({"op": "verify", "key": spki, "data": "00", "sig": hex::encode(&ours)});
    assert_eq!(py.ask(&describe(scheme, ask)), [0]);
    // The same over a digest the caller computed.
    if let Some(d) = scheme.digest() {
        let h = digest(d, message);
        let pre = private.sign_digest(scheme, &h).unwrap();
        assert!(public.verify(scheme, message, &pre).unwrap(), "{scheme:?}: pre-hashed signature");
        assert!(public.verify_digest(scheme, &h, &theirs).unwrap());
        let ask = json!({"op": "sign", "key": pkcs8, "data": hex::encode(&h), "prehashed": true});
        let theirs = py.ask(&describe(scheme, ask));
        assert!(public.verify_digest(scheme, &h, &theirs).unwrap());
        assert!(matches!(
            private.sign_digest(scheme, &h[1..]),
            Err(CryptoError::InvalidLength { .. })
        ));
    }
}

#[test]
fn rsa_signatures_agree_with_pyca_for_every_digest_and_padding() {
    let mut py = Py::start();
    let ours = PrivateKey::from_pkcs8(generate_rsa(2048).unwrap().private_pkcs8.expose()).unwrap();
    let theirs =
        PrivateKey::from_pkcs8(&py.ask(&json!({"op": "generate", "kind": "rsa", "bits": 3072})))
            .unwrap();
    assert_eq!((ours.alg(), ours.bits()), (KeyAlg::Rsa, 2048));
    assert_eq!(theirs.bits(), 3072);
    for key in [&ours, &theirs] {
        for d in [
            DigestAlg::Sha1,
            DigestAlg::Sha224,
            DigestAlg::Sha256,
            DigestAlg::Sha384,
            DigestAlg::Sha512,
        ] {
            cross_check_signatures(&mut py, key, SignatureScheme::RsaPkcs1v15(d));
            for salt_len in [None, Some(0), Some(20)] {
                cross_check_signatures(
                    &mut py,
                    key,
                    SignatureScheme::RsaPss { digest: d, mgf1: d, salt_len },
                );
            }
        }
        cross_check_signatures(
            &mut py,
            key,
            SignatureScheme::RsaPss {
                digest: DigestAlg::Sha384,
                mgf1: DigestAlg::Sha256,
                salt_len: Some(32),
            },
        );
    }
    // The longest salt a 2048-bit key takes with SHA-256: 256 - 32 - 2.
    let pss = |salt| SignatureScheme::RsaPss {
        digest: DigestAlg::Sha256,
        mgf1: DigestAlg::Sha256,
        salt_len: Some(salt),
    };
    cross_check_signatures(&mut py, &ours, pss(222));
    assert!(ours.sign(pss(223), b"x").is_err());
    // A PSS signature checked for a salt length it was not made with fails.
    let sig = ours.sign(pss(222), b"x").unwrap();
    assert!(!ours.public_key().unwrap().verify(pss(20), b"x", &sig).unwrap());
}

#[test]
fn ecdsa_and_ed25519_signatures_agree_with_pyca() {
    let mut py = Py::start();
    for (curve, kind, bits) in
        [(Curve::P256, "p256", 256), (Curve::P384, "p384", 384), (Curve::P521, "p521", 521)]
    {
        let ours =
            PrivateKey::from_pkcs8(generate_ec(curve).unwrap().private_pkcs8.expose()).unwrap();
        let theirs =
            PrivateKey::from_pkcs8(&py.ask(&json!({"op": "generate", "kind": kind}))).unwrap();
        for key in [&ours, &theirs] {
            assert_eq!((key.alg(), key.bits()), (KeyAlg::Ec(curve), bits));
            for d in [DigestAlg::Sha1, DigestAlg::Sha256, DigestAlg::Sha384, DigestAlg::Sha512] {
                cross_check_signatures(&mut py, key, SignatureScheme::Ecdsa(d));
            }
            assert!(matches!(
                key.sign(SignatureScheme::RsaPkcs1v15(DigestAlg::Sha256), b"x"),
                Err(CryptoError::InvalidParameter(_))
            ));
        }
    }
    let ours = PrivateKey::from_pkcs8(generate_ed25519().unwrap().private_pkcs8.expose()).unwrap();
    let theirs =
        PrivateKey::from_pkcs8(&py.ask(&json!({"op": "generate", "kind": "ed25519"}))).unwrap();
    for key in [&ours, &theirs] {
        assert_eq!(key.alg(), KeyAlg::Ed25519);
        cross_check_signatures(&mut py, key, SignatureScheme::Ed25519);
        assert!(key.sign_digest(SignatureScheme::Ed25519, &[0; 32]).is_err());
    }
}

/// Raw signatures (PKCS#11's `CKM_RSA_PKCS` and `CKM_ECDSA`): pyca
/// recovers exactly the RSA input, unpadded by DigestInfo; an ECDSA input
/// of any length is the hash value SEC 1 takes, so pyca checks it as a
/// SHA-256 digest left-padded with zeros (shorter) or cut to the order's
/// 32 bytes (longer).
#[test]
fn raw_signatures_agree_with_pyca() {
    let mut py = Py::start();
    let pair = |der: rampart_crypto::KeyPairDer| {
        let public = PublicKey::from_spki(&der.public_spki).unwrap();
        (
            PrivateKey::from_pkcs8(der.private_pkcs8.expose()).unwrap(),
            public,
            hex::encode(&der.public_spki),
        )
    };
    let (rsa, rsa_public, spki) = pair(generate_rsa(2048).unwrap());
    for input in [&b"x"[..], &[0x5a; 245], b"not a DigestInfo at all"] {
        let sig = rsa.sign_raw(input).unwrap();
        let ask = json!({"op": "recover", "key": spki, "sig": hex::encode(&sig)});
        assert_eq!(py.ask(&ask), input, "pyca recovers the raw input");
        assert!(rsa_public.verify_raw(input, &sig).unwrap());
        assert!(!rsa_public.verify_raw(b"another", &sig).unwrap());
    }
    assert!(matches!(rsa.sign_raw(&[0; 246]), Err(CryptoError::InvalidLength { .. })));
    // Over a DigestInfo it is the PKCS#1 v1.5 signature of that digest.
    let h = digest(DigestAlg::Sha256, b"message");
    let mut info = hex::decode("3031300d060960864801650304020105000420").unwrap();
    info.extend_from_slice(&h);
    let sig = rsa.sign_raw(&info).unwrap();
    assert!(rsa_public
        .verify_digest(SignatureScheme::RsaPkcs1v15(DigestAlg::Sha256), &h, &sig)
        .unwrap());

    let (ec, ec_public, spki) = pair(generate_ec(Curve::P256).unwrap());
    for len in [1, 17, 32, 40, 64] {
        let input = random_input(len);
        let sig = ec.sign_raw(&input).unwrap();
        let as_digest = if len < 32 {
            [vec![0; 32 - len], input.clone()].concat()
        } else {
            input[..32].to_vec()
        };
        let ask = json!({"op": "verify", "key": spki, "data": hex::encode(&as_digest),
            "sig": hex::encode(&sig), "hash": "sha256", "prehashed": true});
        assert_eq!(py.ask(&ask), [1], "pyca checks a raw ECDSA signature of {len} bytes");
        assert!(ec_public.verify_raw(&input, &sig).unwrap());
        let mut other = input.clone();
        other[0] ^= 1;
        assert!(!ec_public.verify_raw(&other, &sig).unwrap());
    }
    assert!(matches!(ec.sign_raw(&[]), Err(CryptoError::InvalidLength { .. })));
    let (ed, _, _) = pair(generate_ed25519().unwrap());
    assert!(matches!(ed.sign_raw(b"x"), Err(CryptoError::InvalidParameter(_))));
}

fn random_input(len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    rampart_crypto::fill_random(&mut v).unwrap();
    v
}

#[test]
fn generated_public_halves_match_pyca_derivation() {
    let mut py = Py::start();
    for pair in [
        generate_rsa(2048).unwrap(),
        generate_ec(Curve::P384).unwrap(),
        generate_ed25519().unwrap(),
    ] {
        let derived =
            py.ask(&json!({"op": "public", "key": hex::encode(pair.private_pkcs8.expose())}));
        assert_eq!(derived, pair.public_spki);
        let key = PrivateKey::from_pkcs8(pair.private_pkcs8.expose()).unwrap();
        assert_eq!(key.public_key_der().unwrap(), pair.public_spki);
        assert_eq!(PublicKey::from_spki(&pair.public_spki).unwrap().alg(), key.alg());
    }
    assert!(generate_rsa(1024).is_err());
    assert!(generate_rsa(2047).is_err());
}

/// RFC 8032 §7.1, TEST 1: the empty message.
#[test]
fn ed25519_rfc8032_test_1() {
    let seed = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";
    let public = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a";
    let signature = "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e06522490155\
                     5fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b";
    let pkcs8 = hex::decode(format!("302e020100300506032b657004220420{seed}")).unwrap();
    let spki = hex::decode(format!("302a300506032b6570032100{public}")).unwrap();
    let key = PrivateKey::from_pkcs8(&pkcs8).unwrap();
    assert_eq!(key.public_key_der().unwrap(), spki);
    let sig = key.sign(SignatureScheme::Ed25519, b"").unwrap();
    assert_eq!(hex::encode(&sig), signature);
    let public = PublicKey::from_spki(&spki).unwrap();
    assert!(public.verify(SignatureScheme::Ed25519, b"", &sig).unwrap());
}

#[test]
fn rsa_encryption_agrees_with_pyca_for_oaep_and_pkcs1() {
    let mut py = Py::start();
    let pair = generate_rsa(2048).unwrap();
    let private = PrivateKey::from_pkcs8(pair.private_pkcs8.expose()).unwrap();
    let public = PublicKey::from_spki(&pair.public_spki).unwrap();
    let pkcs8 = hex::encode(pair.private_pkcs8.expose());
    let spki = hex::encode(&pair.public_spki);
    let plain = b"a data key, say 32 bytes of it..";
    let mut paddings = vec![(RsaEncryption::Pkcs1v15, json!({"padding": "pkcs1"}))];
    for (d, m) in [
        (DigestAlg::Sha1, DigestAlg::Sha1),
        (DigestAlg::Sha256, DigestAlg::Sha256),
        (DigestAlg::Sha384, DigestAlg::Sha384),
        (DigestAlg::Sha512, DigestAlg::Sha512),
        (DigestAlg::Sha384, DigestAlg::Sha256),
        (DigestAlg::Sha256, DigestAlg::Sha1),
    ] {
        paddings.push((
            RsaEncryption::Oaep { digest: d, mgf1: m, label: &[] },
            json!({"padding": "oaep", "hash": hash_name(d), "mgf1": hash_name(m)}),
        ));
    }
    for (padding, desc) in paddings {
        let with = |op: &str, key: &str, data: &[u8]| {
            let mut v = desc.clone();
            let o = v.as_object_mut().unwrap();
            o.insert("op".into(), json!(op));
            o.insert("key".into(), json!(key));
            o.insert("data".into(), json!(hex::encode(data)));
            v
        };
        let ours = public.encrypt(padding, plain).unwrap();
        assert_eq!(ours.len(), 256);
        assert_eq!(py.ask(&with("decrypt", &pkcs8, &ours)), plain, "{padding:?}");
        let theirs = py.ask(&with("encrypt", &spki, plain));
        assert_eq!(private.decrypt(padding, &theirs).unwrap().expose(), plain, "{padding:?}");
        let mut bad = theirs.clone();
        bad[100] ^= 1;
        assert_eq!(private.decrypt(padding, &bad).unwrap_err(), CryptoError::AuthenticationFailed);
        assert_eq!(
            private.decrypt(padding, &theirs[1..]).unwrap_err(),
            CryptoError::AuthenticationFailed
        );
    }
    // OAEP-SHA512 on a 2048-bit key carries at most 256 - 2*64 - 2 bytes.
    let oaep512 =
        RsaEncryption::Oaep { digest: DigestAlg::Sha512, mgf1: DigestAlg::Sha512, label: &[] };
    assert!(public.encrypt(oaep512, &[7; 126]).is_ok());
    assert!(matches!(public.encrypt(oaep512, &[7; 127]), Err(CryptoError::InvalidLength { .. })));
    let ec = PublicKey::from_spki(&generate_ec(Curve::P256).unwrap().public_spki).unwrap();
    assert!(matches!(
        ec.encrypt(RsaEncryption::Pkcs1v15, b"x"),
        Err(CryptoError::InvalidParameter(_))
    ));
}

#[test]
fn malformed_der_is_rejected_not_panicked_on() {
    let pair = generate_ec(Curve::P256).unwrap();
    let der = pair.private_pkcs8.expose();
    for cut in [0, 1, 10, der.len() - 1] {
        assert!(PrivateKey::from_pkcs8(&der[..cut]).is_err());
    }
    let mut trailing = der.to_vec();
    trailing.push(0);
    assert!(PrivateKey::from_pkcs8(&trailing).is_err());
    // A public key is not a private key, nor the other way round.
    assert!(PrivateKey::from_pkcs8(&pair.public_spki).is_err());
    assert!(PublicKey::from_spki(der).is_err());
    assert!(PublicKey::from_spki(&[0x30, 0x82, 0xff, 0xff]).is_err());
    let shown = format!("{:?}", PrivateKey::from_pkcs8(der).unwrap());
    assert!(!shown.contains(&hex::encode(&der[36..44])), "{shown}");
}
