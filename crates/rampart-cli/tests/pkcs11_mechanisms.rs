//! The PKCS#11 module's mechanisms and return codes, driven through the
//! `cryptoki` crate (a PKCS#11 consumer) against a real `rampart kms
//! serve`: every answer that is deterministic is compared byte for byte
//! with an independent implementation holding the same key material —
//! SoftHSM2 (RSA PKCS#1 v1.5 and Ed25519 signatures, AES-GCM with a given
//! IV, the AES key wrap) and pyca/cryptography (GCM, CBC, CTR, both key
//! wraps, HMAC) — and every other result is checked by the other party
//! (OAEP, PSS, ECDSA and Ed25519 verified by the key manager and by
//! OpenSSL). The return
//! codes are PKCS#11's: a missing login, a wrong PIN, a wrong mechanism
//! or key, a bad tag or signature, a short buffer (the two-call
//! convention, through the raw C ABI), a revoked identity and a key
//! manager that went away. The mechanisms run on both stores (SQLite and
//! PostgreSQL). Sixteen threads sign and encrypt at once, a
//! search pages through more objects than one KMIP page, and each use is
//! in the key manager's audit log under the client's name.
//!
//! The module keeps one state per process, so the tests that load it
//! here take turns ([`LOADED`]); each has its own key manager.

use std::path::Path;
use std::process::Command;
use std::sync::{Mutex, MutexGuard};

use cryptoki::context::{CInitializeArgs, Pkcs11};
use cryptoki::error::{Error, RvError};
use cryptoki::mechanism::aead::GcmParams;
use cryptoki::mechanism::eddsa::{EddsaParams, EddsaSignatureScheme};
use cryptoki::mechanism::rsa::{PkcsMgfType, PkcsOaepParams, PkcsOaepSource, PkcsPssParams};
use cryptoki::mechanism::{Mechanism, MechanismType};
use cryptoki::object::{Attribute, AttributeType, KeyType, ObjectClass, ObjectHandle};
use cryptoki::session::{Session, UserType};
use cryptoki::types::AuthPin;

use crate::helpers::common::{random_bytes, tool};
use crate::helpers::kms_support::{ok, PgCluster, TempDir};
use crate::helpers::pkcs11_support::{Pkcs11Setup, PIN};

/// Held while this process has the module loaded.
static LOADED: Mutex<()> = Mutex::new(());

const SOFTHSM: &str = "/usr/lib/softhsm/libsofthsm2.so";

/// The module loaded with `setup`'s configuration, and a logged-in
/// read/write session.
struct Loaded {
    context: Pkcs11,
    session: Session,
    _turn: MutexGuard<'static, ()>,
}

fn load(setup: &Pkcs11Setup) -> Loaded {
    let turn = LOADED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    // The module reads its configuration at C_Initialize; the tests that
    // load it take turns, and the variable is only read by them.
    std::env::set_var("RAMPART_PKCS11_CONFIG", &setup.config);
    let context = Pkcs11::new(&setup.module).unwrap();
    context.initialize(CInitializeArgs::OsThreads).unwrap();
    let slot = context.get_slots_with_token().unwrap()[0];
    let session = context.open_rw_session(slot).unwrap();
    session.login(UserType::User, Some(&AuthPin::new(PIN.into()))).unwrap();
    Loaded { context, session, _turn: turn }
}

fn rv(error: Error) -> RvError {
    match error {
        Error::Pkcs11(rv, _) => rv,
        other => panic!("not a PKCS#11 return code: {other}"),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Runs a pyca/cryptography snippet; `args` are hex strings in
/// `sys.argv[1:]`, the printed hex is returned as bytes.
fn python(script: &str, args: &[&[u8]]) -> Vec<u8> {
    let mut command = Command::new(tool("python3"));
    command.arg("-c").arg(format!(
        "import sys\nfrom binascii import unhexlify as u, hexlify as h\na=[u(x) for x in sys.argv[1:]]\n{script}"
    ));
    for arg in args {
        command.arg(hex(arg));
    }
    let out = command.output().unwrap();
    assert!(out.status.success(), "python: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    (0..text.trim().len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text.trim()[i..i + 2], 16).unwrap())
        .collect()
}

fn aes_key_template(value: &[u8], label: &str, extra: &[Attribute]) -> Vec<Attribute> {
    let mut template = vec![
        Attribute::Class(ObjectClass::SECRET_KEY),
        Attribute::KeyType(KeyType::AES),
        Attribute::Token(true),
        Attribute::Sensitive(true),
        Attribute::Value(value.to_vec()),
        Attribute::Label(label.as_bytes().to_vec()),
    ];
    template.extend_from_slice(extra);
    template
}

#[test]
fn aes_modes_and_key_wraps_match_an_independent_implementation_on_sqlite() {
    aes_modes_and_key_wraps(None);
}

#[test]
fn aes_modes_and_key_wraps_match_an_independent_implementation_on_postgres() {
    let cluster = PgCluster::get();
    aes_modes_and_key_wraps(Some(&cluster.database("p11aes")));
}

fn aes_modes_and_key_wraps(store: Option<&str>) {
    let setup = Pkcs11Setup::start(store);
    let loaded = load(&setup);
    let s = &loaded.session;
    let key_bytes = [0x11u8; 32];
    let key = s
        .create_object(&aes_key_template(
            &key_bytes,
            "aes",
            &[Attribute::Encrypt(true), Attribute::Decrypt(true)],
        ))
        .unwrap();
    let plaintext: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();

    // AES-GCM with the caller's IV and AAD: pyca/cryptography's output.
    let mut iv = [0x42u8; 12];
    let aad = b"header".to_vec();
    let sealed = s
        .encrypt(
            &Mechanism::AesGcm(GcmParams::new(&mut iv, &aad, 128.into()).unwrap()),
            key,
            &plaintext,
        )
        .unwrap();
    let expected = python(
        "from cryptography.hazmat.primitives.ciphers.aead import AESGCM\nprint(h(AESGCM(a[0]).encrypt(a[1], a[2], a[3])).decode())",
        &[&key_bytes, &iv, &plaintext, &aad],
    );
    assert_eq!(sealed, expected, "AES-GCM");
    let opened = s
        .decrypt(
            &Mechanism::AesGcm(GcmParams::new(&mut iv, &aad, 128.into()).unwrap()),
            key,
            &sealed,
        )
        .unwrap();
    assert_eq!(opened, plaintext);
    let mut tampered = sealed.clone();
    tampered[5] ^= 1;
    let refused = s
        .decrypt(
            &Mechanism::AesGcm(GcmParams::new(&mut iv, &aad, 128.into()).unwrap()),
            key,
            &tampered,
        )
        .unwrap_err();
    assert_eq!(rv(refused), RvError::EncryptedDataInvalid, "a flipped ciphertext bit");

    // Multi-part GCM gives the single-part answer.
    s.encrypt_init(&Mechanism::AesGcm(GcmParams::new(&mut iv, &aad, 128.into()).unwrap()), key)
        .unwrap();
    let mut parts = Vec::new();
    for chunk in plaintext.chunks(333) {
        parts.extend(s.encrypt_update(chunk).unwrap());
    }
    parts.extend(s.encrypt_final().unwrap());
    assert_eq!(parts, sealed, "multi-part AES-GCM");

    // CBC with PKCS#7 padding, single- and multi-part (odd chunks).
    let cbc_iv = [0x24u8; 16];
    let cbc = s.encrypt(&Mechanism::AesCbcPad(cbc_iv), key, &plaintext).unwrap();
    let expected = python(
        "from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes\nfrom cryptography.hazmat.primitives import padding\np=padding.PKCS7(128).padder()\nd=p.update(a[2])+p.finalize()\ne=Cipher(algorithms.AES(a[0]),modes.CBC(a[1])).encryptor()\nprint(h(e.update(d)+e.finalize()).decode())",
        &[&key_bytes, &cbc_iv, &plaintext],
    );
    assert_eq!(cbc, expected, "AES-CBC-PAD");
    s.decrypt_init(&Mechanism::AesCbcPad(cbc_iv), key).unwrap();
    let mut back = Vec::new();
    for chunk in cbc.chunks(37) {
        back.extend(s.decrypt_update(chunk).unwrap());
    }
    back.extend(s.decrypt_final().unwrap());
    assert_eq!(back, plaintext, "multi-part CBC decryption");

    // CTR: the counter carries across updates of any size.
    let counter = [0xFEu8; 16];
    let ctr_params = CtrParams { counter_bits: 128, block: counter };
    let ctr_mechanism =
        Mechanism::VendorDefined(cryptoki::mechanism::vendor_defined::VendorDefinedMechanism::new(
            MechanismType::AES_CTR,
            Some(&ctr_params),
        ));
    s.encrypt_init(&ctr_mechanism, key).unwrap();
    let mut ctr = Vec::new();
    for chunk in plaintext.chunks(100) {
        ctr.extend(s.encrypt_update(chunk).unwrap());
    }
    ctr.extend(s.encrypt_final().unwrap());
    let expected = python(
        "from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes\ne=Cipher(algorithms.AES(a[0]),modes.CTR(a[1])).encryptor()\nprint(h(e.update(a[2])+e.finalize()).decode())",
        &[&key_bytes, &counter, &plaintext],
    );
    assert_eq!(ctr, expected, "AES-CTR");

    // The AES key wrap of an extractable key by a key-wrapping key.
    let kek_bytes = [0x5Au8; 32];
    let kek = s
        .create_object(&aes_key_template(
            &kek_bytes,
            "kek",
            &[Attribute::Wrap(true), Attribute::Unwrap(true)],
        ))
        .unwrap();
    let payload = [0x77u8; 24];
    let wrapped_key = s
        .create_object(&aes_key_template(
            &payload,
            "payload",
            &[Attribute::Extractable(true), Attribute::Encrypt(true)],
        ))
        .unwrap();
    let wrapped = s.wrap_key(&Mechanism::AesKeyWrap, kek, wrapped_key).unwrap();
    let expected = python(
        "from cryptography.hazmat.primitives.keywrap import aes_key_wrap\nprint(h(aes_key_wrap(a[0], a[1])).decode())",
        &[&kek_bytes, &payload],
    );
    assert_eq!(wrapped, expected, "RFC 3394 key wrap");
    assert_eq!(
        rv(s.wrap_key(&Mechanism::AesKeyWrap, kek, key).unwrap_err()),
        RvError::KeyUnextractable,
        "a key the key manager may not export"
    );
    let unwrapped = s
        .unwrap_key(
            &Mechanism::AesKeyWrap,
            kek,
            &wrapped,
            &[
                Attribute::Class(ObjectClass::SECRET_KEY),
                Attribute::KeyType(KeyType::AES),
                Attribute::Encrypt(true),
                Attribute::Label(b"unwrapped".to_vec()),
            ],
        )
        .unwrap();
    let a = s.encrypt(&Mechanism::AesCbcPad(cbc_iv), unwrapped, b"same key?").unwrap();
    let b = s.encrypt(&Mechanism::AesCbcPad(cbc_iv), wrapped_key, b"same key?").unwrap();
    assert_eq!(a, b, "the unwrapped key is the wrapped one");

    // HMAC-SHA256 with a generic secret the key manager holds.
    let mac_key = [0x33u8; 32];
    let hmac = s
        .create_object(&[
            Attribute::Class(ObjectClass::SECRET_KEY),
            Attribute::KeyType(KeyType::GENERIC_SECRET),
            Attribute::Token(true),
            Attribute::Sensitive(true),
            Attribute::Sign(true),
            Attribute::Verify(true),
            Attribute::Value(mac_key.to_vec()),
        ])
        .unwrap();
    let mac = s.sign(&Mechanism::Sha256Hmac, hmac, &plaintext).unwrap();
    let expected = python(
        "import hmac, hashlib\nprint(hmac.new(a[0], a[1], hashlib.sha256).hexdigest())",
        &[&mac_key, &plaintext],
    );
    assert_eq!(mac, expected, "HMAC-SHA256");
    s.verify(&Mechanism::Sha256Hmac, hmac, &plaintext, &mac).unwrap();
    let mut bad = mac.clone();
    bad[0] ^= 1;
    assert_eq!(
        rv(s.verify(&Mechanism::Sha256Hmac, hmac, &plaintext, &bad).unwrap_err()),
        RvError::SignatureInvalid
    );
}

/// CK_AES_CTR_PARAMS.
#[repr(C)]
struct CtrParams {
    counter_bits: std::ffi::c_ulong,
    block: [u8; 16],
}

/// A SoftHSM2 token of its own, loaded, with a logged-in session (and the
/// turn at loading SoftHSM2 in this process, held while they live).
fn softhsm(dir: &TempDir) -> (Pkcs11, Session, std::sync::MutexGuard<'static, ()>) {
    let turn = crate::helpers::pkcs11_support::softhsm_turn();
    let tokens = dir.join("softhsm-tokens");
    std::fs::create_dir_all(&tokens).unwrap();
    let conf = dir.join("softhsm2.conf");
    std::fs::write(
        &conf,
        format!("directories.tokendir = {}\nobjectstore.backend = file\n", tokens.display()),
    )
    .unwrap();
    let out = Command::new(tool("softhsm2-util"))
        .args([
            "--init-token",
            "--free",
            "--label",
            "reference",
            "--pin",
            PIN,
            "--so-pin",
            "so-pin",
        ])
        .env("SOFTHSM2_CONF", &conf)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    std::env::set_var("SOFTHSM2_CONF", &conf);
    let context = Pkcs11::new(SOFTHSM).unwrap();
    context.initialize(CInitializeArgs::OsThreads).unwrap();
    let slot = context
        .get_slots_with_token()
        .unwrap()
        .into_iter()
        .find(|s| context.get_token_info(*s).unwrap().label().trim_end() == "reference")
        .unwrap();
    let session = context.open_rw_session(slot).unwrap();
    session.login(UserType::User, Some(&AuthPin::new(PIN.into()))).unwrap();
    (context, session, turn)
}

/// The template of a private key from its PKCS#8 (RSA components, or an
/// EdDSA seed).
fn private_template(pkcs8: &[u8], kind: rampart_crypto::KeyAlg) -> Vec<Attribute> {
    let mut template = vec![
        Attribute::Class(ObjectClass::PRIVATE_KEY),
        Attribute::Token(true),
        Attribute::Sensitive(true),
        Attribute::Sign(true),
        Attribute::Label(b"same".to_vec()),
    ];
    match kind {
        rampart_crypto::KeyAlg::Rsa => {
            let parts = rampart_crypto::key_formats::rsa_private_parts(pkcs8).unwrap();
            template.extend([
                Attribute::KeyType(KeyType::RSA),
                Attribute::Modulus(parts.modulus.clone()),
                Attribute::PublicExponent(parts.public_exponent.clone()),
                Attribute::PrivateExponent(parts.private_exponent.expose().to_vec()),
                Attribute::Prime1(parts.p.expose().to_vec()),
                Attribute::Prime2(parts.q.expose().to_vec()),
                Attribute::Exponent1(parts.prime_exponent_p.expose().to_vec()),
                Attribute::Exponent2(parts.prime_exponent_q.expose().to_vec()),
                Attribute::Coefficient(parts.crt_coefficient.expose().to_vec()),
            ]);
        }
        _ => {
            // RFC 8410: the seed is the OCTET STRING inside the last
            // OCTET STRING of the PKCS#8.
            let seed = pkcs8[pkcs8.len() - 32..].to_vec();
            template.extend([
                Attribute::KeyType(KeyType::EC_EDWARDS),
                Attribute::EcParams(vec![0x06, 0x03, 0x2B, 0x65, 0x70]),
                Attribute::Value(seed),
            ]);
        }
    }
    template
}

/// The DER OID of P-256, as `CKA_EC_PARAMS`.
const P256: [u8; 10] = [0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07];

/// An ECDSA P-256 pair made in the key manager: (public, private), token
/// objects when `token`.
fn p256_pair(s: &Session, token: bool) -> (ObjectHandle, ObjectHandle) {
    s.generate_key_pair(
        &Mechanism::EccKeyPairGen,
        &[Attribute::EcParams(P256.to_vec()), Attribute::Verify(true), Attribute::Token(token)],
        &[Attribute::Sign(true), Attribute::Sensitive(true), Attribute::Token(token)],
    )
    .unwrap()
}

#[test]
fn deterministic_answers_equal_softhsm2_holding_the_same_keys() {
    let setup = Pkcs11Setup::start(None);
    let loaded = load(&setup);
    let (reference_context, reference, turn) = softhsm(&setup.dir);
    let message = b"the same message, signed twice".to_vec();
    for kind in [rampart_crypto::KeyAlg::Rsa, rampart_crypto::KeyAlg::Ed25519] {
        let pair = rampart_crypto::generate_key_pair(kind, 2048).unwrap();
        let template = private_template(pair.private_pkcs8.expose(), kind);
        let ours = loaded.session.create_object(&template).unwrap();
        let theirs = reference.create_object(&template).unwrap();
        let mechanism = match kind {
            rampart_crypto::KeyAlg::Rsa => Mechanism::Sha256RsaPkcs,
            _ => Mechanism::Eddsa(EddsaParams::new(EddsaSignatureScheme::Pure)),
        };
        let a = loaded.session.sign(&mechanism, ours, &message).unwrap();
        let b = reference.sign(&mechanism, theirs, &message).unwrap();
        assert_eq!(a, b, "{kind:?} signatures of the same key");
        if kind == rampart_crypto::KeyAlg::Rsa {
            // CKM_RSA_PKCS pads whatever it is given, up to k − 11 bytes.
            for input in [b"not a DigestInfo".to_vec(), vec![0x5A; 245]] {
                let a = loaded.session.sign(&Mechanism::RsaPkcs, ours, &input).unwrap();
                let b = reference.sign(&Mechanism::RsaPkcs, theirs, &input).unwrap();
                assert_eq!(a, b, "raw CKM_RSA_PKCS of {} bytes", input.len());
            }
            let too_long = loaded.session.sign(&Mechanism::RsaPkcs, ours, &[0; 246]);
            assert_eq!(rv(too_long.unwrap_err()), RvError::DataLenRange);
        }
    }
    // CKM_ECDSA takes an input of any length as the hash value: SoftHSM2,
    // holding the public key, checks signatures of short and long ones.
    let (public, private) = p256_pair(&loaded.session, false);
    let point = loaded.session.get_attributes(public, &[AttributeType::EcPoint]).unwrap();
    let Some(Attribute::EcPoint(point)) = point.first() else { panic!("{point:?}") };
    let their_public = reference
        .create_object(&[
            Attribute::Class(ObjectClass::PUBLIC_KEY),
            Attribute::KeyType(KeyType::EC),
            Attribute::EcParams(P256.to_vec()),
            Attribute::EcPoint(point.clone()),
            Attribute::Verify(true),
        ])
        .unwrap();
    for len in [1, 17, 32, 40, 66] {
        let input = random_bytes(len as u64, len);
        let signature = loaded.session.sign(&Mechanism::Ecdsa, private, &input).unwrap();
        reference.verify(&Mechanism::Ecdsa, their_public, &input, &signature).unwrap_or_else(|e| {
            panic!("SoftHSM2 rejects a CKM_ECDSA signature of {len} bytes: {e}")
        });
        loaded.session.verify(&Mechanism::Ecdsa, public, &input, &signature).unwrap();
    }
    let empty = loaded.session.sign(&Mechanism::Ecdsa, private, &[]);
    assert_eq!(rv(empty.unwrap_err()), RvError::DataLenRange);
    // AES-GCM with a given IV, and the AES key wrap.
    let key_bytes = [0x0Fu8; 32];
    let template = aes_key_template(
        &key_bytes,
        "same",
        &[Attribute::Encrypt(true), Attribute::Wrap(true), Attribute::Unwrap(true)],
    );
    let ours = loaded.session.create_object(&template).unwrap();
    let theirs = reference.create_object(&template).unwrap();
    let iv = [3u8; 12];
    let gcm = |s: &Session, key: ObjectHandle| {
        let mut iv = iv;
        s.encrypt(
            &Mechanism::AesGcm(GcmParams::new(&mut iv, b"aad", 128.into()).unwrap()),
            key,
            b"data",
        )
        .unwrap()
    };
    assert_eq!(gcm(&loaded.session, ours), gcm(&reference, theirs), "AES-GCM");
    let inner = [0x66u8; 16];
    let inner_template = aes_key_template(
        &inner,
        "inner",
        &[Attribute::Extractable(true), Attribute::Encrypt(true)],
    );
    let inner_ours = loaded.session.create_object(&inner_template).unwrap();
    let inner_theirs = reference.create_object(&inner_template).unwrap();
    assert_eq!(
        loaded.session.wrap_key(&Mechanism::AesKeyWrap, ours, inner_ours).unwrap(),
        reference.wrap_key(&Mechanism::AesKeyWrap, theirs, inner_theirs).unwrap(),
        "AES key wrap"
    );
    // SoftHSM2 is finalized before the next test may load it.
    drop(reference);
    drop(reference_context);
    drop(turn);
}

/// The public key of `private`'s pair as a PEM file for OpenSSL.
fn public_pem(s: &Session, public: ObjectHandle, dir: &Path) -> std::path::PathBuf {
    let info = s.get_attributes(public, &[AttributeType::PublicKeyInfo]).unwrap();
    let Some(Attribute::PublicKeyInfo(spki)) = info.first() else { panic!("{info:?}") };
    let der = dir.join("public.der");
    std::fs::write(&der, spki).unwrap();
    der
}

fn openssl_verifies(
    dir: &Path,
    public_der: &Path,
    message: &[u8],
    signature: &[u8],
    extra: &[&str],
) -> bool {
    let msg = dir.join("message");
    let sig = dir.join("signature");
    std::fs::write(&msg, message).unwrap();
    std::fs::write(&sig, signature).unwrap();
    let out = Command::new(tool("openssl"))
        .args(["dgst", "-sha256", "-keyform", "DER", "-verify"])
        .arg(public_der)
        .args(extra)
        .arg("-signature")
        .arg(&sig)
        .arg(&msg)
        .output()
        .unwrap();
    out.status.success()
}

/// An ECDSA signature `r || s` as DER, for OpenSSL.
fn ecdsa_der(raw: &[u8]) -> Vec<u8> {
    let int = |v: &[u8]| {
        let v = &v[v.iter().take_while(|b| **b == 0).count()..];
        let mut out = vec![0x02];
        let pad = v.first().is_some_and(|b| b & 0x80 != 0);
        out.push((v.len() + usize::from(pad)) as u8);
        if pad {
            out.push(0);
        }
        out.extend_from_slice(v);
        out
    };
    let (r, s) = raw.split_at(raw.len() / 2);
    let body = [int(r), int(s)].concat();
    [vec![0x30, body.len() as u8], body].concat()
}

#[test]
fn key_pairs_made_in_the_key_manager_sign_and_decrypt_for_openssl_on_sqlite() {
    key_pairs_sign_and_decrypt(None);
}

#[test]
fn key_pairs_made_in_the_key_manager_sign_and_decrypt_for_openssl_on_postgres() {
    let cluster = PgCluster::get();
    key_pairs_sign_and_decrypt(Some(&cluster.database("p11pairs")));
}

fn key_pairs_sign_and_decrypt(store: Option<&str>) {
    let setup = Pkcs11Setup::start(store);
    let loaded = load(&setup);
    let s = &loaded.session;
    let message = b"signed through PKCS#11".to_vec();
    // ECDSA P-256.
    let (public, private) = p256_pair(s, true);
    let signature = s.sign(&Mechanism::EcdsaSha256, private, &message).unwrap();
    assert_eq!(signature.len(), 64, "r || s");
    s.verify(&Mechanism::EcdsaSha256, public, &message, &signature).unwrap();
    let der = public_pem(s, public, setup.dir.path());
    assert!(openssl_verifies(setup.dir.path(), &der, &message, &ecdsa_der(&signature), &[]));
    // CKM_ECDSA signs a digest made here.
    let digest = s.digest(&Mechanism::Sha256, &message).unwrap();
    let raw = s.sign(&Mechanism::Ecdsa, private, &digest).unwrap();
    assert!(openssl_verifies(setup.dir.path(), &der, &message, &ecdsa_der(&raw), &[]));
    assert_eq!(
        rv(s.verify(&Mechanism::EcdsaSha256, public, b"another message", &signature).unwrap_err()),
        RvError::SignatureInvalid
    );

    // Ed25519: verified by the key manager and by OpenSSL.
    let (public, private) = s
        .generate_key_pair(
            &Mechanism::EccEdwardsKeyPairGen,
            &[Attribute::EcParams(vec![0x06, 0x03, 0x2B, 0x65, 0x70]), Attribute::Verify(true)],
            &[Attribute::Sign(true), Attribute::Sensitive(true)],
        )
        .unwrap();
    let eddsa = Mechanism::Eddsa(EddsaParams::new(EddsaSignatureScheme::Pure));
    let signature = s.sign(&eddsa, private, &message).unwrap();
    assert_eq!(signature.len(), 64);
    s.verify(&eddsa, public, &message, &signature).unwrap();
    let der = public_pem(s, public, setup.dir.path());
    let (msg, sig) = (setup.dir.join("ed-message"), setup.dir.join("ed-signature"));
    std::fs::write(&msg, &message).unwrap();
    std::fs::write(&sig, &signature).unwrap();
    let out = Command::new(tool("openssl"))
        .args(["pkeyutl", "-verify", "-pubin", "-keyform", "DER", "-rawin", "-inkey"])
        .arg(&der)
        .arg("-sigfile")
        .arg(&sig)
        .arg("-in")
        .arg(&msg)
        .output()
        .unwrap();
    assert!(out.status.success(), "Ed25519: {}", String::from_utf8_lossy(&out.stderr));

    // RSA-2048: PSS checked by OpenSSL, OAEP round trip through
    // OpenSSL's encryption.
    let (public, private) = s
        .generate_key_pair(
            &Mechanism::RsaPkcsKeyPairGen,
            &[
                Attribute::ModulusBits(2048.into()),
                Attribute::Verify(true),
                Attribute::Encrypt(true),
            ],
            &[Attribute::Sign(true), Attribute::Decrypt(true), Attribute::Sensitive(true)],
        )
        .unwrap();
    let pss = PkcsPssParams {
        hash_alg: MechanismType::SHA256,
        mgf: PkcsMgfType::MGF1_SHA256,
        s_len: 32.into(),
    };
    let signature = s.sign(&Mechanism::Sha256RsaPkcsPss(pss), private, &message).unwrap();
    let der = public_pem(s, public, setup.dir.path());
    assert!(openssl_verifies(
        setup.dir.path(),
        &der,
        &message,
        &signature,
        &["-sigopt", "rsa_padding_mode:pss", "-sigopt", "rsa_pss_saltlen:32"]
    ));
    let secret = b"a secret for OAEP";
    std::fs::write(setup.dir.join("secret"), secret).unwrap();
    let out = Command::new(tool("openssl"))
        .args(["pkeyutl", "-encrypt", "-pubin", "-keyform", "DER", "-inkey"])
        .arg(&der)
        .args([
            "-pkeyopt",
            "rsa_padding_mode:oaep",
            "-pkeyopt",
            "rsa_oaep_md:sha256",
            "-pkeyopt",
            "rsa_mgf1_md:sha256",
            "-in",
        ])
        .arg(setup.dir.join("secret"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let oaep = PkcsOaepParams::new(
        MechanismType::SHA256,
        PkcsMgfType::MGF1_SHA256,
        PkcsOaepSource::empty(),
    );
    let opened = s.decrypt(&Mechanism::RsaPkcsOaep(oaep), private, &out.stdout).unwrap();
    assert_eq!(opened, secret);
    // PKCS#1 v1.5: SHA-256 hash-and-sign for `openssl dgst`; CKM_RSA_PKCS
    // over bytes that are no DigestInfo, which `openssl pkeyutl -verify`
    // checks as they are; and decryption of OpenSSL's PKCS#1 v1.5.
    let signature = s.sign(&Mechanism::Sha256RsaPkcs, private, &message).unwrap();
    assert!(openssl_verifies(setup.dir.path(), &der, &message, &signature, &[]));
    s.verify(&Mechanism::Sha256RsaPkcs, public, &message, &signature).unwrap();
    let raw_input = b"not a DigestInfo, signed as it is";
    let signature = s.sign(&Mechanism::RsaPkcs, private, raw_input).unwrap();
    s.verify(&Mechanism::RsaPkcs, public, raw_input, &signature).unwrap();
    let (input, sig) = (setup.dir.join("raw-input"), setup.dir.join("raw-signature"));
    std::fs::write(&input, raw_input).unwrap();
    std::fs::write(&sig, &signature).unwrap();
    let out = Command::new(tool("openssl"))
        .args(["pkeyutl", "-verify", "-pubin", "-keyform", "DER", "-inkey"])
        .arg(&der)
        .args(["-pkeyopt", "rsa_padding_mode:pkcs1", "-in"])
        .arg(&input)
        .arg("-sigfile")
        .arg(&sig)
        .output()
        .unwrap();
    assert!(out.status.success(), "raw CKM_RSA_PKCS: {}", String::from_utf8_lossy(&out.stderr));
    let out = Command::new(tool("openssl"))
        .args(["pkeyutl", "-encrypt", "-pubin", "-keyform", "DER", "-inkey"])
        .arg(&der)
        .args(["-pkeyopt", "rsa_padding_mode:pkcs1", "-in"])
        .arg(setup.dir.join("secret"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(s.decrypt(&Mechanism::RsaPkcs, private, &out.stdout).unwrap(), secret);

    // The private keys are not extractable, so no front end exports
    // them: not KMIP's Get, not the REST API's export.
    let keys = ok(&["kms", "key", "list", "--json", "--kms", &setup.admin]);
    let private: Vec<serde_json::Value> = keys
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .filter(|key| key["type"] == "private-key")
        .collect();
    assert_eq!(private.len(), 3, "{keys}");
    for key in private {
        assert_eq!(key["exportable"], false, "{key}");
        let name = key["name"].as_str().unwrap();
        let export = crate::helpers::kms_support::rampart(&[
            "kms",
            "key",
            "export",
            name,
            "--kms",
            &setup.bundle,
        ]);
        assert!(!export.status.success(), "{name} was exported");
    }

    // Every use is in the audit log under the client's name.
    let audit = ok(&["kms", "audit", "--by", "app", "--json", "--kms", &setup.admin]);
    for operation in ["kmip.sign", "kmip.decrypt", "kmip.create_key_pair"] {
        assert!(audit.contains(operation), "no {operation} by app in the audit log:\n{audit}");
    }
}

#[test]
fn failures_have_the_return_codes_pkcs11_names() {
    let mut setup = Pkcs11Setup::start(None);
    let loaded = load(&setup);
    let s = &loaded.session;
    let slot = s.get_session_info().unwrap().slot_id();
    let key = s
        .generate_key(
            &Mechanism::AesKeyGen,
            &[Attribute::ValueLen(32.into()), Attribute::Encrypt(true), Attribute::Sensitive(true)],
        )
        .unwrap();

    // Wrong mechanism, wrong key, wrong parameters.
    assert_eq!(
        rv(s.encrypt(&Mechanism::Des3Ecb, key, b"x").unwrap_err()),
        RvError::MechanismInvalid
    );
    assert_eq!(
        rv(s.sign(&Mechanism::EcdsaSha256, key, b"x").unwrap_err()),
        RvError::KeyTypeInconsistent
    );
    let mut short_iv = [0u8; 4];
    assert_eq!(
        rv(s.encrypt(
            &Mechanism::AesGcm(GcmParams::new(&mut short_iv, b"", 128.into()).unwrap()),
            key,
            b"x"
        )
        .unwrap_err()),
        RvError::MechanismParamInvalid
    );
    // A second session sees the key; without login it sees no private
    // objects and may not use them.
    let other = loaded.context.open_ro_session(slot).unwrap();
    s.logout().unwrap();
    assert_eq!(
        rv(other.encrypt(&Mechanism::AesCbcPad([0; 16]), key, b"x").unwrap_err()),
        RvError::UserNotLoggedIn
    );
    assert!(other.find_objects(&[Attribute::Class(ObjectClass::SECRET_KEY)]).unwrap().is_empty());
    assert_eq!(
        rv(s.login(UserType::User, Some(&AuthPin::new("wrong".into()))).unwrap_err()),
        RvError::PinIncorrect
    );
    s.login(UserType::User, Some(&AuthPin::new(PIN.into()))).unwrap();
    assert_eq!(other.find_objects(&[Attribute::Class(ObjectClass::SECRET_KEY)]).unwrap(), [key]);

    // The key manager owns the objects: not modifiable, not copyable, and
    // the token is not initialized through PKCS#11.
    let label = [Attribute::Label(b"renamed".to_vec())];
    assert_eq!(rv(s.update_attributes(key, &label).unwrap_err()), RvError::ActionProhibited);
    assert_eq!(rv(s.copy_object(key, &label).unwrap_err()), RvError::ActionProhibited);
    assert_eq!(
        rv(loaded.context.init_token(slot, &AuthPin::new("so".into()), "x").unwrap_err()),
        RvError::FunctionNotSupported
    );
    // A session object goes when its session closes, a token object when
    // destroyed; in the key manager, neither is active any more.
    let rw = loaded.context.open_rw_session(slot).unwrap();
    let made = |label: &[u8], token: bool| {
        let template = [
            Attribute::ValueLen(16.into()),
            Attribute::Token(token),
            Attribute::Label(label.to_vec()),
        ];
        rw.generate_key(&Mechanism::AesKeyGen, &template).unwrap()
    };
    let transient = made(b"transient", false);
    let kept = made(b"kept", true);
    let find = |label: &[u8]| s.find_objects(&[Attribute::Label(label.to_vec())]).unwrap();
    assert_eq!(find(b"transient"), [transient]);
    drop(rw);
    assert!(find(b"transient").is_empty(), "a session object outlived its session");
    assert_eq!(find(b"kept"), [kept]);
    s.destroy_object(kept).unwrap();
    assert!(find(b"kept").is_empty());
    let keys = ok(&["kms", "key", "list", "--json", "--kms", &setup.admin]);
    let short: Vec<&str> = keys.lines().filter(|k| k.contains("\"length\":128")).collect();
    assert_eq!(short.len(), 2, "{keys}");
    assert!(short.iter().all(|k| !k.contains("\"active\"")), "{short:?}");

    // The two-call convention, and CKM_AES_KEY_WRAP_KWP (which the
    // cryptoki crate does not name), through the raw C ABI.
    let kek_bytes = [0x6Eu8; 32];
    let kek = s
        .create_object(&aes_key_template(
            &kek_bytes,
            "kwp",
            &[Attribute::Encrypt(true), Attribute::Decrypt(true)],
        ))
        .unwrap();
    let kek_handle: u64 = kek.to_string().parse().unwrap();
    let wrapped =
        two_calls(&setup.module, s.get_session_info().unwrap().slot_id().id(), kek_handle);
    let expected = python(
        "from cryptography.hazmat.primitives.keywrap import aes_key_wrap_with_padding\nprint(h(aes_key_wrap_with_padding(a[0], a[1])).decode())",
        &[&kek_bytes, &[0x5Cu8; 20]],
    );
    assert_eq!(wrapped, expected, "RFC 5649 key wrap with padding");

    // The key manager stops: the device is gone; it comes back: the
    // module reconnects by itself.
    let data = setup.dir.path().join("kms");
    let port: u16 = setup.server.url.rsplit(':').next().unwrap().parse().unwrap();
    let kmip_port: u16 =
        setup.server.kmip.as_deref().unwrap().rsplit(':').next().unwrap().parse().unwrap();
    setup.server.kill();
    assert_eq!(
        rv(s.encrypt(&Mechanism::AesCbcPad([0; 16]), key, b"x").unwrap_err()),
        RvError::DeviceError
    );
    setup.server =
        crate::helpers::kms_support::ServerProcess::start_kmip(&data, port, kmip_port, None);
    s.encrypt(&Mechanism::AesCbcPad([0; 16]), key, b"back").unwrap();

    // The identity is revoked: logging in again is refused.
    ok(&["kms", "client", "revoke", "app", "--kms", &setup.admin]);
    s.logout().unwrap();
    let refused = s.login(UserType::User, Some(&AuthPin::new(PIN.into()))).unwrap_err();
    assert_eq!(rv(refused), RvError::PinLocked, "a revoked client certificate");
}

/// A slot configured with two key managers on one PostgreSQL database
/// keeps working when the one it uses is killed: the same session's next
/// calls go to the other, with the keys made before, and a key made after
/// is an ordinary key of the deployment. With both gone, the device is.
fn gcm(iv: &mut [u8; 12]) -> Mechanism<'_> {
    Mechanism::AesGcm(GcmParams::new(iv, b"", 128.into()).unwrap())
}

#[test]
fn a_slot_fails_over_to_the_next_key_manager_when_one_is_killed() {
    let cluster = PgCluster::get();
    let (mut setup, mut second) = Pkcs11Setup::start_two_servers(&cluster.database("p11failover"));
    let loaded = load(&setup);
    let s = &loaded.session;
    let key = s
        .generate_key(
            &Mechanism::AesKeyGen,
            &[
                Attribute::ValueLen(32.into()),
                Attribute::Encrypt(true),
                Attribute::Decrypt(true),
                Attribute::Token(true),
                Attribute::Label(b"before".to_vec()),
            ],
        )
        .unwrap();
    let (public, private) = p256_pair(s, true);
    let mut iv = [7u8; 12];
    let sealed = s.encrypt(&gcm(&mut iv), key, b"written before the failover").unwrap();
    let signature = s.sign(&Mechanism::EcdsaSha256, private, b"before").unwrap();

    setup.server.kill();

    let mut iv = [7u8; 12];
    assert_eq!(s.decrypt(&gcm(&mut iv), key, &sealed).unwrap(), b"written before the failover");
    s.verify(&Mechanism::EcdsaSha256, public, b"before", &signature).unwrap();
    let signature = s.sign(&Mechanism::EcdsaSha256, private, b"after").unwrap();
    s.verify(&Mechanism::EcdsaSha256, public, b"after", &signature).unwrap();
    assert_eq!(s.find_objects(&[Attribute::Label(b"before".to_vec())]).unwrap(), vec![key]);
    s.generate_key(
        &Mechanism::AesKeyGen,
        &[
            Attribute::ValueLen(16.into()),
            Attribute::Token(true),
            Attribute::Label(b"after".to_vec()),
        ],
    )
    .unwrap();
    let keys = ok(&["kms", "key", "list", "--json", "--kms", &setup.admin]);
    assert!(
        keys.lines().any(|k| k.contains("\"symmetric-key\"") && k.contains("\"length\":128")),
        "the key made through the second server: {keys}"
    );
    let audit = ok(&["kms", "audit", "--by", "app", "--json", "--kms", &setup.admin]);
    assert!(audit.matches("kmip.sign").count() >= 2, "{audit}");

    second.kill();
    let mut iv = [8u8; 12];
    assert_eq!(rv(s.encrypt(&gcm(&mut iv), key, b"x").unwrap_err()), RvError::DeviceError);
}

/// C_Digest and C_GetMechanismList with NULL and short buffers: the
/// length is given, `CKR_BUFFER_TOO_SMALL` keeps the operation going, and
/// the right buffer gets the answer. Then CKM_AES_KEY_WRAP_KWP of 20
/// bytes 0x5C with key `kwp_key`, decrypted back: the wrapped bytes.
#[allow(unsafe_code)]
fn two_calls(module: &Path, slot: u64, kwp_key: u64) -> Vec<u8> {
    use cryptoki_sys::*;
    // SAFETY: the module is a PKCS#11 library; every pointer passed below
    // is valid for the length given beside it.
    unsafe {
        let p = cryptoki_sys::Pkcs11::new(module).unwrap();
        // Already initialized by `cryptoki` in this process.
        let mut session: CK_SESSION_HANDLE = 0;
        assert_eq!(
            p.C_OpenSession(slot, CKF_SERIAL_SESSION, std::ptr::null_mut(), None, &mut session),
            CKR_OK
        );
        let mut mechanism = CK_MECHANISM {
            mechanism: CKM_SHA256,
            pParameter: std::ptr::null_mut(),
            ulParameterLen: 0,
        };
        assert_eq!(p.C_DigestInit(session, &mut mechanism), CKR_OK);
        let mut data = *b"abc";
        let mut len: CK_ULONG = 0;
        assert_eq!(
            p.C_Digest(session, data.as_mut_ptr(), 3, std::ptr::null_mut(), &mut len),
            CKR_OK
        );
        assert_eq!(len, 32);
        let mut out = [0u8; 32];
        len = 16;
        assert_eq!(
            p.C_Digest(session, data.as_mut_ptr(), 3, out.as_mut_ptr(), &mut len),
            CKR_BUFFER_TOO_SMALL
        );
        assert_eq!(len, 32);
        assert_eq!(p.C_Digest(session, data.as_mut_ptr(), 3, out.as_mut_ptr(), &mut len), CKR_OK);
        assert_eq!(hex(&out), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert_eq!(
            p.C_Digest(session, data.as_mut_ptr(), 3, out.as_mut_ptr(), &mut len),
            CKR_OPERATION_NOT_INITIALIZED
        );
        let mut count: CK_ULONG = 0;
        assert_eq!(p.C_GetMechanismList(slot, std::ptr::null_mut(), &mut count), CKR_OK);
        let mut list = vec![0 as CK_MECHANISM_TYPE; 1];
        let mut short: CK_ULONG = 1;
        assert_eq!(p.C_GetMechanismList(slot, list.as_mut_ptr(), &mut short), CKR_BUFFER_TOO_SMALL);
        assert_eq!(short, count);
        assert_eq!(
            p.C_OpenSession(
                slot,
                CKF_SERIAL_SESSION,
                std::ptr::null_mut(),
                None,
                std::ptr::null_mut()
            ),
            CKR_ARGUMENTS_BAD
        );
        assert_eq!(
            p.C_OpenSession(slot, 0, std::ptr::null_mut(), None, &mut session),
            CKR_SESSION_PARALLEL_NOT_SUPPORTED
        );
        assert_eq!(p.C_CloseSession(0xDEAD), CKR_SESSION_HANDLE_INVALID);

        let mut kwp = CK_MECHANISM {
            mechanism: CKM_AES_KEY_WRAP_KWP,
            pParameter: std::ptr::null_mut(),
            ulParameterLen: 0,
        };
        let mut plain = [0x5Cu8; 20];
        assert_eq!(p.C_EncryptInit(session, &mut kwp, kwp_key), CKR_OK);
        let mut wrapped = [0u8; 32];
        let mut len: CK_ULONG = 32;
        assert_eq!(
            p.C_Encrypt(session, plain.as_mut_ptr(), 20, wrapped.as_mut_ptr(), &mut len),
            CKR_OK
        );
        assert_eq!(len, 32);
        assert_eq!(p.C_DecryptInit(session, &mut kwp, kwp_key), CKR_OK);
        let mut back = [0u8; 32];
        let mut back_len: CK_ULONG = 32;
        assert_eq!(
            p.C_Decrypt(session, wrapped.as_mut_ptr(), 32, back.as_mut_ptr(), &mut back_len),
            CKR_OK
        );
        assert_eq!(&back[..back_len as usize], &plain[..]);
        wrapped.to_vec()
    }
}

#[test]
fn sixteen_threads_sign_and_encrypt_at_once() {
    let setup = Pkcs11Setup::start(None);
    let loaded = load(&setup);
    let s = &loaded.session;
    let slot = s.get_session_info().unwrap().slot_id();
    let (public, private) = p256_pair(s, false);
    let aes = s
        .generate_key(
            &Mechanism::AesKeyGen,
            &[
                Attribute::ValueLen(32.into()),
                Attribute::Encrypt(true),
                Attribute::Decrypt(true),
                Attribute::Sensitive(true),
            ],
        )
        .unwrap();
    std::thread::scope(|scope| {
        for t in 0..16u8 {
            let context = &loaded.context;
            scope.spawn(move || {
                let session = context.open_ro_session(slot).unwrap();
                for i in 0..20u8 {
                    let message = [t, i];
                    let signature =
                        session.sign(&Mechanism::EcdsaSha256, private, &message).unwrap();
                    session.verify(&Mechanism::EcdsaSha256, public, &message, &signature).unwrap();
                    let mut iv = [t; 12];
                    iv[0] = i;
                    let sealed = session
                        .encrypt(
                            &Mechanism::AesGcm(GcmParams::new(&mut iv, &[], 128.into()).unwrap()),
                            aes,
                            &message,
                        )
                        .unwrap();
                    let opened = session
                        .decrypt(
                            &Mechanism::AesGcm(GcmParams::new(&mut iv, &[], 128.into()).unwrap()),
                            aes,
                            &sealed,
                        )
                        .unwrap();
                    assert_eq!(opened, message);
                }
            });
        }
    });
}

#[test]
fn a_search_pages_through_more_objects_than_one_kmip_page() {
    let setup = Pkcs11Setup::start(None);
    let loaded = load(&setup);
    let s = &loaded.session;
    let made: Vec<ObjectHandle> = (0..150)
        .map(|i| {
            s.generate_key(
                &Mechanism::AesKeyGen,
                &[
                    Attribute::ValueLen(16.into()),
                    Attribute::Sensitive(true),
                    Attribute::Label(format!("many-{i}").into_bytes()),
                ],
            )
            .unwrap()
        })
        .collect();
    let mut found: Vec<ObjectHandle> = s
        .iter_objects_with_cache_size(
            &[Attribute::Class(ObjectClass::SECRET_KEY)],
            7.try_into().unwrap(),
        )
        .unwrap()
        .map(Result::unwrap)
        .collect();
    found.sort_by_key(|h| h.to_string().parse::<u64>().unwrap());
    let mut expected = made.clone();
    expected.sort_by_key(|h| h.to_string().parse::<u64>().unwrap());
    assert_eq!(found, expected);
    let one = s.find_objects(&[Attribute::Label(b"many-149".to_vec())]).unwrap();
    assert_eq!(one, [made[149]]);
}
