//! The key manager's integration tests, one module per file beside this
//! one, built as a single test binary: one link of the whole server (thin
//! LTO) instead of one per file.
// A failed set-up step in a test or a helper should panic.
#![allow(clippy::unwrap_used)]

#[macro_use]
mod common;
#[path = "kmip/support.rs"]
mod kmip_support;

mod kmip_conformance;
mod kms_audit_archive;
mod kms_audit_filters;
mod kms_audit_group_commit;
mod kms_kmip_adjust_attribute;
mod kms_kmip_attributes;
mod kms_kmip_certify;
mod kms_kmip_ciphers;
mod kms_kmip_crypto_ops;
mod kms_kmip_derive_encrypt;
mod kms_kmip_key_pairs;
mod kms_kmip_objects;
mod kms_kmip_pykmip;
mod kms_kmip_server;
mod kms_kmip_split_keys;
mod kms_kmip_templates;
mod kms_paging;
mod kms_rest_key_pairs;
mod kms_server;
mod store_rules;
