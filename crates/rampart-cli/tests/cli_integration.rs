//! The `rampart` binary's integration tests (real peers: cryptsetup,
//! qemu, nbdkit, libnbd, fio, PostgreSQL, PyKMIP, Chromium), one module
//! per file beside this one, built as a single test binary: one link
//! (thin LTO) instead of one per file.
// A failed set-up step in a test or a helper should panic.
#![allow(clippy::unwrap_used)]

mod helpers {
    pub mod common;
    pub mod kernel_support;
    pub mod kms_support;
    pub mod luks_support;
    pub mod pkcs11_support;
    pub mod serve_support;
}

mod cli;
mod docs_pages;
mod file_encryption;
mod file_kms;
mod kernel_dm_crypt;
mod kernel_integrity_format;
mod kernel_integrity_volumes;
mod kernel_nbd_client;
mod kernel_online_reencrypt;
mod kernel_plain_mode;
mod kernel_token_unlock;
mod kms_audit_archive_cli;
mod kms_bind;
mod kms_cli;
mod kms_console;
mod kms_hsm;
mod kms_key_pairs_cli;
mod kms_kmip_failover;
mod kms_kmip_interop;
mod kms_list_streaming;
mod kms_populate_bench;
mod kms_postgres;
mod kms_reencrypt;
mod kms_schemathesis;
mod kms_token_plugin;
mod luks1_qemu_nbdkit;
mod luks_clone_wipe;
mod luks_cryptsetup_volumes;
mod luks_decrypt_attached;
mod luks_encrypt_decrypt;
mod luks_export_import;
mod luks_faults;
mod luks_header_backup;
mod luks_json_preservation;
mod luks_keys_tokens;
mod luks_locking;
mod luks_rampart_volumes;
mod luks_reencrypt;
mod luks_scripting;
mod man_pages_completions;
mod pkcs11_gnutls_p11kit;
mod pkcs11_java;
mod pkcs11_mechanisms;
mod pkcs11_nginx;
mod pkcs11_openssh;
mod pkcs11_tool;
mod plain_volumes;
mod prometheus_metrics;
mod secrets_stay_secret;
mod serve_bulk;
mod serve_clients;
mod serve_filesystem;
mod serve_kill_trials;
mod serve_limits;
mod serve_online_encrypt_decrypt;
mod serve_online_reencrypt;
mod serve_protocol;
mod serve_reencrypting;
mod serve_revocation;
mod serve_tls;
mod systemd_units;
