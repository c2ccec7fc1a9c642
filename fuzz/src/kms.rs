//! The key manager's parsers of untrusted bytes: REST request bodies and
//! client bundle files.

use rampart_kms::server::{check_request_body, BODY_OPERATIONS};
use rampart_kms::Bundle;

/// The first byte picks the operation (modulo the number of operations
/// with a body); the rest is the request body, parsed and checked exactly
/// as the server's handler does before it touches the store.
pub fn kms_request(data: &[u8]) {
    let Some((&selector, body)) = data.split_first() else { return };
    let operation = BODY_OPERATIONS[usize::from(selector) % BODY_OPERATIONS.len()];
    let _ = check_request_body(operation, body);
}

/// A bundle file: parsed and checked as `Bundle::read` does, then, when it
/// parses, its endpoints resolved and a client built from it (PEM decoding
/// of the CA, the certificate chain and the private key; TLS
/// configuration). The error text must never contain the private key.
pub fn kms_bundle(data: &[u8]) {
    let Ok(bundle) = Bundle::parse(data, "fuzz.bundle") else { return };
    let _ = format!("{bundle:?}");
    let _ = bundle.endpoints();
    if let Err(error) = rampart_kms::client::KmsClient::new(&bundle) {
        let text = error.to_string();
        let key = bundle.key.expose();
        let shows = |text: &str| text.as_bytes().windows(key.len()).any(|w| w == key);
        if key.len() >= 16 && shows(&text) {
            // The key's text may also be in what the error quotes of
            // another field (corpus/kms_bundle/key-text-in-cert-error): it
            // leaks only if it goes away with a different key.
            let mut other = bundle.clone();
            other.key = rampart_crypto::SecretBytes::new(vec![b'#'; key.len()]);
            let without = rampart_kms::client::KmsClient::new(&other).err().map(|e| e.to_string());
            assert!(
                without.as_deref().is_some_and(shows),
                "a client error shows the bundle's private key"
            );
        }
    }
}

/// A `rampart-kms` LUKS2 token as cryptsetup hands it to the token plugin
/// (and `rampart` reads it from a header): `BoundToken::parse_text`, the
/// luksDump lines, and for a token that parses, a round trip through the
/// JSON it would write back.
pub fn kms_binding_token(data: &[u8]) {
    use rampart_kms::binding::BoundToken;
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(token) = BoundToken::parse_text(0, text) else { return };
    let _ = token.dump_lines();
    let again = BoundToken::parse_text(0, &token.to_json().to_string())
        .expect("a token written from a parsed one parses");
    assert_eq!(again, token, "a token changes through its own JSON");
}
