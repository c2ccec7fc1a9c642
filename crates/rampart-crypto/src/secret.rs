use zeroize::Zeroize;

use crate::ffi;

/// Secret bytes: a key, a passphrase, a derived key.
///
/// The bytes are locked in memory where the system allows it, wiped when the
/// value is dropped, never shown by `Debug`, and compared in constant time.
/// There is deliberately no `Clone`-by-accident path other than
/// [`SecretBytes::clone`], which makes a second locked, zeroizing copy.
pub struct SecretBytes {
    bytes: Box<[u8]>,
}

impl SecretBytes {
    /// Takes ownership of `bytes`; the caller's buffer moves in unchanged.
    #[must_use]
    pub fn new(bytes: Vec<u8>) -> Self {
        let bytes = into_exact_box(bytes);
        ffi::lock_memory(&bytes);
        Self { bytes }
    }

    /// Copies `bytes` into a new secret. The caller wipes its own copy.
    #[must_use]
    pub fn from_slice(bytes: &[u8]) -> Self {
        Self::new(bytes.to_vec())
    }

    /// A secret of `len` zero bytes, to be filled in place (by a KDF, an
    /// unwrap or the DRBG) so that the secret never exists outside it.
    #[must_use]
    pub fn zeroed(len: usize) -> Self {
        Self::new(vec![0u8; len])
    }

    #[must_use]
    pub fn expose(&self) -> &[u8] {
        &self.bytes
    }

    pub fn expose_mut(&mut self) -> &mut [u8] {
        &mut self.bytes
    }

    #[must_use]
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

/// Converting a Vec with spare capacity into a boxed slice reallocates and
/// would leave the old buffer unwiped, so wipe it ourselves in that case.
fn into_exact_box(mut bytes: Vec<u8>) -> Box<[u8]> {
    if bytes.len() == bytes.capacity() {
        return bytes.into_boxed_slice();
    }
    let exact: Box<[u8]> = bytes.as_slice().into();
    bytes.zeroize();
    exact
}

impl Clone for SecretBytes {
    fn clone(&self) -> Self {
        Self::from_slice(&self.bytes)
    }
}

impl Drop for SecretBytes {
    fn drop(&mut self) {
        self.bytes.zeroize();
        ffi::unlock_memory(&self.bytes);
    }
}

impl PartialEq for SecretBytes {
    fn eq(&self, other: &Self) -> bool {
        ffi::constant_time_eq(&self.bytes, &other.bytes)
    }
}

impl Eq for SecretBytes {}

impl std::fmt::Debug for SecretBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SecretBytes({} bytes, redacted)", self.bytes.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_bytes() {
        let s = SecretBytes::from_slice(b"hunter2hunter2");
        let shown = format!("{s:?}");
        assert_eq!(shown, "SecretBytes(14 bytes, redacted)");
        assert!(!shown.contains("hunter"));
    }

    #[test]
    fn equality_is_by_content() {
        let a = SecretBytes::from_slice(&[1, 2, 3]);
        assert_eq!(a, SecretBytes::from_slice(&[1, 2, 3]));
        assert_ne!(a, SecretBytes::from_slice(&[1, 2, 4]));
        assert_ne!(a, SecretBytes::from_slice(&[1, 2]));
    }

    #[test]
    fn vec_with_spare_capacity_is_kept_exact() {
        let mut v = Vec::with_capacity(64);
        v.extend_from_slice(b"key");
        let s = SecretBytes::new(v);
        assert_eq!(s.expose(), b"key");
    }
}
