//! The bodies of Rampart's fuzz targets, one function per target, called
//! by the libFuzzer binaries in `fuzz_targets/` (`xts_engine` keeps its
//! body there).
//!
//! Each function takes the raw input and must never panic, hang or
//! allocate by an untrusted length: libFuzzer reports any of these.

mod audit;
mod file;
mod integrity;
mod kmip;
mod kms;
mod luks;
mod nbd;
mod pkcs11;

pub use audit::kms_audit_archive;
pub use file::{file_format, openssl_enc};
pub use kmip::{kmip_text, kmip_ttlv};
pub use kms::{kms_binding_token, kms_bundle, kms_request};
pub use nbd::nbd_server;
pub use pkcs11::pkcs11_module;

/// `Luks::load` on the input as given (LUKS1 or LUKS2 detection, both LUKS2
/// copies, the search for a secondary copy), then with LUKS2 checksums
/// recomputed.
pub fn luks_header(data: &[u8]) {
    luks::exercise(data.to_vec());
    let mut fixed = data.to_vec();
    if luks::fix_checksums(&mut fixed) {
        luks::exercise(fixed);
    }
}

/// The LUKS1 parser: the input with the LUKS magic and version 1 forced
/// into its first 8 bytes, so that every mutation reaches the LUKS1 phdr,
/// keyslot and digest code.
pub fn luks1_header(data: &[u8]) {
    let Some(mut data) = with_version(data, 1) else { return };
    luks::exercise(std::mem::take(&mut data));
}

/// The LUKS2 parser: the input with the primary magic and version 2 forced,
/// as given and with the binary headers' checksums recomputed, so that
/// mutations reach the binary header fields, the JSON parser and the
/// metadata validator.
pub fn luks2_header(data: &[u8]) {
    let Some(data) = with_version(data, 2) else { return };
    let mut fixed = data.clone();
    luks::exercise(data);
    if luks::fix_checksums(&mut fixed) {
        luks::exercise(fixed);
    }
}

/// The dm-integrity metadata parsers: a superblock area and the journal
/// sections after it (see `integrity.rs` and fuzz/README.md).
pub fn integrity_metadata(data: &[u8]) {
    integrity::exercise(data);
}

fn with_version(data: &[u8], version: u8) -> Option<Vec<u8>> {
    let mut data = data.to_vec();
    let head = data.get_mut(..8)?;
    head[..6].copy_from_slice(luks::MAGIC_1ST);
    head[6..8].copy_from_slice(&[0, version]);
    Some(data)
}
