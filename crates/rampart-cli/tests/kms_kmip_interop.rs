#![allow(clippy::unwrap_used)]
//! KMIP against a real `rampart kms serve --kmip-listen`, driven by
//! PyKMIP's client (the independent reference implementation, in the
//! virtual environment scripts/test makes; its interpreter is
//! `$RAMPART_PYKMIP_PYTHON`, default /opt/rampart-pykmip/bin/python) with
//! the PEM files `rampart kms client pem` writes from a client bundle:
//! every operation PyKMIP supports, with the results checked (Get returns
//! the registered bytes; Encrypt, MAC and wrapped Get are checked with
//! Python's `cryptography` and `hmac` using the key Get returned), on
//! SQLite and on PostgreSQL. Then the two front ends together: KMIP keys
//! are ordinary keys (`kms key list`, REST wrap and unwrap, Pre-Active
//! refused over REST too), a REST key is found over KMIP by its name, a
//! client outside a key's policy is refused over KMIP and audited, and
//! `kms audit verify` passes after the session.
//!
//! The cluster for the PostgreSQL run comes from `$RAMPART_TEST_PG_URL`
//! (scripts/test starts one) or is started here.

use crate::helpers::kms_support as support;

use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};
use support::{free_port, issue_client, json_lines, ok, rampart_in, ServerProcess, TempDir};

fn python() -> String {
    std::env::var("RAMPART_PYKMIP_PYTHON")
        .unwrap_or_else(|_| "/opt/rampart-pykmip/bin/python".into())
}

/// Runs a PyKMIP helper script with a client's PEM files; its JSON.
fn pykmip(script: &str, kmip: &str, pem: &Path, args: &[&str]) -> Value {
    let (host, port) = kmip.rsplit_once(':').unwrap();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/helpers").join(script);
    let python = python();
    let out = Command::new(&python)
        .arg(path)
        .args([host, port])
        .args(["cert.pem", "key.pem", "ca.pem"].map(|f| pem.join(f)))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {python} (scripts/test installs PyKMIP): {e}"));
    assert!(
        out.status.success(),
        "{script} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn failed(reason: &str) -> Value {
    json!(["OPERATION_FAILED", reason])
}

/// What PyKMIP's run of every operation must have seen.
fn check_operations(v: &Value) {
    assert_eq!(v["create_uid"], "interop-aes/1", "{v}");
    assert_eq!(v["created_state"], json!(["PRE_ACTIVE"]), "{v}");
    assert_eq!(v["encrypt_pre_active"], failed("ILLEGAL_OPERATION"), "{v}");
    assert_eq!(v["activated_state"], json!(["ACTIVE"]), "{v}");
    assert_eq!(v["activate_again"], failed("ILLEGAL_OPERATION"), "{v}");
    assert_eq!(v["key_len"], 32, "{v}");
    let a = &v["attributes"];
    assert_eq!(a["Name"], json!(["interop-aes"]), "{v}");
    assert_eq!(a["Unique Identifier"], json!(["interop-aes/1"]), "{v}");
    assert_eq!(a["Object Type"], json!(["SYMMETRIC_KEY"]), "{v}");
    assert_eq!(a["Cryptographic Algorithm"], json!(["AES"]), "{v}");
    assert_eq!(a["Cryptographic Length"], json!([256]), "{v}");
    // Encrypt | Decrypt | Wrap | Unwrap | MAC Generate.
    assert_eq!(a["Cryptographic Usage Mask"], json!([0x04 | 0x08 | 0x10 | 0x20 | 0x80]), "{v}");
    assert_eq!(a["State"], json!(["ACTIVE"]), "{v}");
    assert_eq!(v["has_dates"], true, "{v}");
    // What the server sets, read by PyKMIP: the Digest is SHA-256 of the
    // key Get returned (which made it Fresh no more).
    let digest = json!([["SHA_256", v["digest_of_key"], "RAW"]]);
    assert_eq!(v["digest"], digest, "{v}");
    let served = &v["served_attributes"];
    assert_eq!(served["Fresh"], json!([false]), "{v}");
    assert_eq!(served["Sensitive"], json!([false]), "{v}");
    assert_eq!(served["Extractable"], json!([true]), "{v}");
    assert_eq!(served["Lease Time"], json!([3600]), "{v}");
    assert_eq!(v["original_is_initial"], true, "{v}");
    let list = v["attribute_list"].as_array().unwrap();
    for name in ["Name", "State", "Unique Identifier", "Activation Date", "Cryptographic Length"] {
        assert!(list.contains(&json!(name)), "{name} missing from {list:?}");
    }
    for check in [
        "register_get_matches",
        "secret_get_matches",
        "locate_name",
        "locate_secret_data",
        "locate_pre_active",
        "locate_paging",
        "locate_renamed",
        "cbc_matches_cryptography",
        "cbc_round_trip",
        "ctr_matches_cryptography",
        "ctr_round_trip",
        "mac_matches",
        "hmac_keys_match",
        "wrapped_unwraps",
        "check",
        "locate_after_rekey",
        "rekey_links",
        "rekey_new_key_differs",
    ] {
        assert_eq!(v[check], true, "{check}: {v}");
    }
    assert_eq!(v["secret_type"], "PASSWORD", "{v}");
    assert_eq!(v["duplicate_name"], failed("OBJECT_ALREADY_EXISTS"), "{v}");
    assert_eq!(v["modified_name"], json!(["interop-renamed"]), "{v}");
    assert_eq!(v["deleted_name"], "interop-renamed", "{v}");
    assert_eq!(v["name_after_delete"], Value::Null, "{v}");
    assert_eq!(v["delete_out_of_bounds"], failed("INDEX_OUT_OF_BOUNDS"), "{v}");
    assert_eq!(v["ctr_counter_len"], 16, "{v}");
    assert_eq!(v["bad_padding"], failed("CRYPTOGRAPHIC_FAILURE"), "{v}");
    assert_eq!(v["rekey_uid"], "interop-aes/2", "{v}");
    // The state forbids it: Permission Denied in KMIP 1.x.
    assert_eq!(v["destroy_active"], failed("PERMISSION_DENIED"), "{v}");
    assert_eq!(v["revoked_state"], json!(["DEACTIVATED"]), "{v}");
    assert_eq!(v["encrypt_revoked"], failed("ILLEGAL_OPERATION"), "{v}");
    assert_eq!(v["destroyed_state"], json!(["DESTROYED"]), "{v}");
    assert_eq!(v["get_destroyed"], failed("ILLEGAL_OPERATION"), "{v}");
    assert_eq!(v["compromised_state"], json!(["COMPROMISED"]), "{v}");
    assert_eq!(v["get_unknown"], failed("ITEM_NOT_FOUND"), "{v}");
    assert_eq!(v["key_pair_signature_verified"], true, "{v}");
    assert_eq!(v["key_pair"], json!(["interop-rsa-public/1", "interop-rsa-private/1"]), "{v}");
    assert_eq!(v["derived_matches_cryptography"], true, "{v}");
    // A KMIP 1.4 connection: no Log, Set Attribute or Adjust Attribute
    // (2.x), no Interop (interop testing only).
    let mut served: Vec<String> = rampart_kms::server::kmip::OPERATIONS
        .iter()
        .filter(|op| {
            !matches!(op.name(), Some("Log" | "Interop" | "Set Attribute" | "Adjust Attribute"))
        })
        .map(|op| op.name().unwrap().to_ascii_uppercase().replace([' ', '-'], "_"))
        // PyKMIP spells Re-key and Re-certify without the underscore.
        .map(|n| n.replace("RE_KEY", "REKEY").replace("RE_CERTIFY", "RECERTIFY"))
        .collect();
    served.sort();
    assert_eq!(v["query_operations"], json!(served), "{v}");
    // Every type Create, Create Key Pair and Register make (PyKMIP names
    // an Opaque Object OPAQUE_DATA), and to this 1.4 client Templates.
    assert_eq!(rampart_kms::server::kmip::OBJECT_TYPES.len(), 7);
    let objects = [
        "CERTIFICATE",
        "OPAQUE_DATA",
        "PRIVATE_KEY",
        "PUBLIC_KEY",
        "SECRET_DATA",
        "SPLIT_KEY",
        "SYMMETRIC_KEY",
        "TEMPLATE",
    ];
    assert_eq!(v["query_objects"], json!(objects), "{v}");
    assert_eq!(
        v["versions"],
        json!([[2, 1], [2, 0], [1, 4], [1, 3], [1, 2], [1, 1], [1, 0]]),
        "{v}"
    );
}

support::on_each_store!(pykmip_drives_every_operation_and_mixes_with_rest, "kmip");

fn pykmip_drives_every_operation_and_mixes_with_rest(store: Option<&str>) {
    let tmp = TempDir::new(if store.is_some() { "kmip-pg" } else { "kmip-sqlite" });
    let dir = tmp.join("data");
    let dir_s = dir.display().to_string();
    let port = free_port();
    let endpoint = format!("127.0.0.1:{port}");
    let mut init = vec!["kms", "init", "--data-dir", &dir_s, "--endpoint", &endpoint];
    if let Some(store) = store {
        init.extend(["--store", store]);
    }
    ok(&init);
    let server = ServerProcess::start_kmip(&dir, port, free_port(), store);
    let kmip = server.kmip.clone().unwrap();
    let admin = dir.join("admin.bundle").display().to_string();
    let app = tmp.join("app.bundle").display().to_string();
    let other = tmp.join("other.bundle").display().to_string();
    issue_client(&admin, "kmip-app", "role=app", &app);
    issue_client(&admin, "other", "role=other", &other);
    // A bundle's certificate, key and CA as the PEM files KMIP clients take.
    let (app_pem, other_pem) = (tmp.join("app-pem"), tmp.join("other-pem"));
    for (bundle, pem) in [(&app, &app_pem), (&other, &other_pem)] {
        ok(&["kms", "client", "pem", "--out-dir", &pem.display().to_string(), "--kms", bundle]);
    }
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(app_pem.join("key.pem")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    let v = pykmip("pykmip_operations.py", &kmip, &app_pem, &["interop"]);
    check_operations(&v);

    // KMIP keys are ordinary keys: listed, allowed to their creator, with
    // the versions Re-key, Revoke and Destroy made.
    let list: Value = json_lines(ok(&["kms", "key", "list", "--json", "--kms", &admin]));
    let keys = list.as_array().or_else(|| list["keys"].as_array()).unwrap().clone();
    let key = |name: &str| keys.iter().find(|k| k["name"] == name).cloned().unwrap_or_default();
    let aes = key("interop-aes");
    assert_eq!(aes["allow"], json!(["client:kmip-app"]), "{aes}");
    let states: Vec<&Value> =
        aes["versions"].as_array().unwrap().iter().map(|x| &x["state"]).collect();
    assert_eq!(states, [&json!("destroyed"), &json!("active")], "{aes}");
    for name in ["interop-kek", "interop-registered", "interop-secret"] {
        assert_eq!(key(name)["name"], name, "{name} is not in kms key list: {list}");
    }

    // A key created over KMIP wraps and unwraps over REST.
    let wrapped = rampart_in(&["kms", "key", "wrap", "interop-kek", "--kms", &app], b"mixed");
    assert!(wrapped.status.success(), "{}", String::from_utf8_lossy(&wrapped.stderr));
    let ciphertext = String::from_utf8(wrapped.stdout).unwrap();
    let plain = ok(&["kms", "key", "unwrap", ciphertext.trim(), "--kms", &app]);
    assert_eq!(plain, "mixed");
    // A Pre-Active key is refused over REST as over KMIP.
    let refused = rampart_in(&["kms", "key", "wrap", "interop-registered", "--kms", &app], b"x");
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("Pre-Active"), "{refused:?}");

    // A REST key is reachable over KMIP by its name (and, not exportable,
    // is used but not handed out).
    ok(&["kms", "key", "create", "rest-key", "--allow", "client:kmip-app", "--kms", &admin]);
    let probe = pykmip(
        "pykmip_probe.py",
        &kmip,
        &app_pem,
        &["locate-name:rest-key", "encrypt-cbc:rest-key/1", "get:rest-key/1"],
    );
    assert_eq!(probe["locate-name:rest-key"], json!(["rest-key/1"]), "{probe}");
    assert_eq!(probe["encrypt-cbc:rest-key/1"], 32, "{probe}");
    assert_eq!(probe["get:rest-key/1"], failed("NOT_EXTRACTABLE"), "{probe}");

    // A client outside a key's policy is refused over KMIP (and does not
    // even find it), and the refusal is audited.
    let kek = v["ids"]["kek"].as_str().unwrap().to_owned();
    let probe = pykmip(
        "pykmip_probe.py",
        &kmip,
        &other_pem,
        &[&format!("get:{kek}"), "locate-name:interop-kek", &format!("activate:{kek}")],
    );
    assert_eq!(probe[format!("get:{kek}")], failed("PERMISSION_DENIED"), "{probe}");
    assert_eq!(probe["locate-name:interop-kek"], json!([]), "{probe}");
    assert_eq!(probe[format!("activate:{kek}")], failed("PERMISSION_DENIED"), "{probe}");
    let audit: Value = json_lines(ok(&["kms", "audit", "--json", "--kms", &admin]));
    let entries = audit.as_array().unwrap();
    let has = |client: &str, op: &str, key: &str, outcome: &str| {
        entries.iter().any(|e| {
            e["client"] == client
                && e["operation"] == op
                && e["key"] == key
                && e["outcome"] == outcome
        })
    };
    assert!(has("other", "kmip.get", "interop-kek", "denied"), "{audit}");
    assert!(has("kmip-app", "kmip.create", "interop-aes", "ok"), "{audit}");
    assert!(has("kmip-app", "kmip.re_key", "interop-aes", "ok"), "{audit}");
    assert!(has("kmip-app", "kmip.encrypt", "interop-aes", "invalid"), "{audit}");
    assert!(has("kmip-app", "key.wrap", "interop-kek", "ok"), "{audit}");
    let verify = ok(&["kms", "audit", "verify", "--kms", &admin]);
    assert!(verify.contains("intact"), "{verify}");
    drop(server);
}
