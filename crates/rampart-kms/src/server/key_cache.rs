//! Private and public keys parsed from their stored material, kept
//! between requests.
//!
//! Why: parsing a PKCS#8 key costs more than the signature it then makes
//! (an EC key without its public point needs a scalar multiplication to
//! get it back; an RSA key builds its Montgomery contexts and blinding on
//! first use), so a Sign that parsed its key every time ran at a fraction
//! of the signature's own rate (BENCHMARKS.md, "KMIP public-key
//! operations").
//!
//! Coherence: an entry is found only by the sealed bytes it was parsed
//! from, which every request still reads from the store with the key's
//! state, policy and dates, checked as before. Sealing draws a fresh
//! nonce, so equal sealed bytes are the same key material; a destroyed
//! version has no material to match, and a key re-created under the same
//! name has other sealed bytes. The cache therefore never decides
//! anything a fresh read would decide otherwise; it only skips unsealing
//! and parsing what was parsed before.
//!
//! The parsed keys live in AWS-LC's memory, which it cleanses when they
//! are freed, in a process that is not dumpable, as every other key in
//! use here.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use rampart_crypto::{PrivateKey, PublicKey};

/// Most keys kept. A key in use has one entry; past this many the cache
/// starts again empty, so a burst of keys used once costs one parse each
/// and no memory beyond this bound.
const MAX_KEYS: usize = 4096;

/// A key's parsed material.
#[derive(Debug)]
pub(crate) enum AsymKey {
    Private(PrivateKey),
    Public(PublicKey),
}

struct Entry {
    sealed: Vec<u8>,
    key: Arc<AsymKey>,
}

/// Parsed keys by key name and version.
#[derive(Default)]
pub(crate) struct KeyCache {
    keys: Mutex<HashMap<(String, u32), Entry>>,
}

impl KeyCache {
    /// The key parsed from `sealed`, the material of `name`'s version
    /// `version` as the store holds it now; else `parse` run on it, and
    /// kept.
    pub(crate) fn get_or_parse<E>(
        &self,
        name: &str,
        version: u32,
        sealed: &[u8],
        parse: impl FnOnce() -> Result<AsymKey, E>,
    ) -> Result<Arc<AsymKey>, E> {
        let id = (name.to_owned(), version);
        if let Some(entry) = self.lock().get(&id) {
            if entry.sealed == sealed {
                return Ok(Arc::clone(&entry.key));
            }
        }
        let key = Arc::new(parse()?);
        let mut keys = self.lock();
        if keys.len() >= MAX_KEYS && !keys.contains_key(&id) {
            keys.clear();
        }
        keys.insert(id, Entry { sealed: sealed.to_vec(), key: Arc::clone(&key) });
        Ok(key)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, u32), Entry>> {
        self.keys.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl std::fmt::Debug for KeyCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KeyCache({} keys, redacted)", self.lock().len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rampart_crypto::{generate_key_pair, Curve, KeyAlg};

    fn pair() -> (PrivateKey, Vec<u8>) {
        let der = generate_key_pair(KeyAlg::Ec(Curve::P256), 256).unwrap();
        (PrivateKey::from_pkcs8(der.private_pkcs8.expose()).unwrap(), der.public_spki)
    }

    #[test]
    fn a_key_is_parsed_again_when_its_sealed_material_changes() {
        let cache = KeyCache::default();
        let mut parses = 0;
        let mut parse = || {
            parses += 1;
            Ok::<_, ()>(AsymKey::Private(pair().0))
        };
        let first = cache.get_or_parse("k", 1, b"sealed-a", &mut parse).unwrap();
        let again = cache.get_or_parse("k", 1, b"sealed-a", &mut parse).unwrap();
        assert!(Arc::ptr_eq(&first, &again), "the same sealed bytes reuse the parsed key");
        let other = cache.get_or_parse("k", 1, b"sealed-b", &mut parse).unwrap();
        assert!(!Arc::ptr_eq(&first, &other), "new material under the same name is parsed");
        let version = cache.get_or_parse("k", 2, b"sealed-b", &mut parse).unwrap();
        assert!(!Arc::ptr_eq(&other, &version), "each version has its own entry");
        assert_eq!(parses, 3);
    }

    #[test]
    fn a_failed_parse_is_not_kept() {
        let cache = KeyCache::default();
        let failed = cache.get_or_parse("k", 1, b"bad", || Err::<AsymKey, _>("does not parse"));
        assert_eq!(failed.unwrap_err(), "does not parse");
        let (_, public) = pair();
        let key = cache
            .get_or_parse("k", 1, b"bad", || {
                PublicKey::from_spki(&public).map(AsymKey::Public).map_err(|_| "spki")
            })
            .unwrap();
        assert!(matches!(*key, AsymKey::Public(_)));
    }

    #[test]
    fn the_cache_stays_within_its_bound() {
        let cache = KeyCache::default();
        let (_, public) = pair();
        for i in 0..(MAX_KEYS as u32 + 10) {
            cache
                .get_or_parse("k", i, b"s", || {
                    PublicKey::from_spki(&public).map(AsymKey::Public).map_err(|_| ())
                })
                .unwrap();
        }
        assert!(cache.lock().len() <= MAX_KEYS);
    }
}
