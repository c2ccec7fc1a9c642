#![allow(clippy::unwrap_used)]
//! Stock cryptsetup unlocking Rampart-bound volumes through Rampart's
//! token plugin (`libcryptsetup-token-rampart-kms.so`), against a real
//! `rampart kms serve`: `cryptsetup open --test-passphrase --token-only`
//! succeeds with the client bundle named in the token, `luksDump` shows
//! the binding through the plugin's dump, `token import` refuses a
//! malformed `rampart-kms` token through its validate, and unlocking is
//! refused once the key is revoked, the bundle belongs to a client the key
//! does not allow, the bundle is missing, or no key server answers.
//!
//! cryptsetup 2.6 loads plugins only from its compiled-in directory (the
//! `--external-tokens-path` option is 2.7's), so the test installs the
//! plugin of this build there. With `RAMPART_TOKEN_PLUGIN=installed`
//! (`scripts/test-package`, after installing the Debian package) it uses
//! the plugin already installed there instead.

use crate::helpers::kms_support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use kms_support::common::{describe, output_with, p, tool};
use kms_support::{
    built_token_plugin, free_port, issue_client, ok, token_plugin_dir, ServerProcess, TempDir,
    TOKEN_PLUGIN,
};

const PASSPHRASE: &[u8] = b"token plugin test passphrase";
const CHEAP_KDF: &[&str] = &["--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000"];
/// The symbols cryptsetup looks up, and all the plugin may export.
const ABI: &[&str] = &[
    "cryptsetup_token_buffer_free",
    "cryptsetup_token_dump",
    "cryptsetup_token_open",
    "cryptsetup_token_open_pin",
    "cryptsetup_token_validate",
    "cryptsetup_token_version",
];

fn cryptsetup(args: &[&str]) -> Output {
    let mut command = Command::new(tool("cryptsetup"));
    command.args(args);
    output_with(command, None)
}

fn cryptsetup_in(args: &[&str], stdin: &[u8]) -> Output {
    let mut command = Command::new(tool("cryptsetup"));
    command.args(args);
    output_with(command, Some(stdin))
}

/// The plugin cryptsetup will load: this build's, installed once per test
/// process (atomically: other tests' cryptsetup may be loading it), or
/// the installed package's.
fn plugin() -> &'static Path {
    static INSTALLED: OnceLock<PathBuf> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        let target = token_plugin_dir().join(TOKEN_PLUGIN);
        let Some(built) = built_token_plugin() else { return target };
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        let staging = target.with_extension(format!("so.{}.tmp", std::process::id()));
        std::fs::copy(&built, &staging).unwrap();
        std::fs::rename(&staging, &target).unwrap();
        target
    })
}

/// A key server, an admin bundle, host bundles `host` (label role=db) and
/// `other` (role=web), and key `disk` allowed for `label:role=db`.
struct Deployment {
    tmp: TempDir,
    server: ServerProcess,
    admin: PathBuf,
    host: PathBuf,
    other: PathBuf,
}

impl Deployment {
    fn start(tag: &str) -> Self {
        let tmp = TempDir::new(tag);
        let dir = tmp.join("kms");
        let port = free_port();
        ok(&["kms", "init", "--data-dir", p(&dir), "--endpoint", &format!("127.0.0.1:{port}")]);
        let server = ServerProcess::start(&dir, port, None);
        let admin = dir.join("admin.bundle");
        let (host, other) = (tmp.join("host.bundle"), tmp.join("other.bundle"));
        issue_client(p(&admin), "db-1", "role=db", p(&host));
        issue_client(p(&admin), "web-1", "role=web", p(&other));
        ok(&["kms", "key", "create", "disk", "--allow", "label:role=db", "--kms", p(&admin)]);
        Self { tmp, server, admin, host, other }
    }

    /// A LUKS2 volume with passphrase [`PASSPHRASE`] in keyslot 0, bound
    /// (keyslot 1, token 0) with the token naming `token_bundle`.
    fn bound_volume(&self, name: &str, token_bundle: &Path) -> PathBuf {
        let vol = self.tmp.join(name);
        let pass = self.tmp.file("pass", PASSPHRASE);
        let mut args = vec!["format", p(&vol), "--size", "20M", "--key-file", p(&pass), "-q"];
        args.extend_from_slice(CHEAP_KDF);
        ok(&args);
        let out = ok(&[
            "bind",
            p(&vol),
            "--key",
            "disk",
            "--kms",
            p(&self.host),
            "--key-file",
            p(&pass),
            "--token-bundle",
            p(token_bundle),
        ]);
        assert!(out.contains("token 0: keyslot 1 bound to key disk version 1"), "{out}");
        vol
    }
}

/// `cryptsetup open --test-passphrase --token-only -v VOL`.
fn open_by_token(vol: &Path) -> Output {
    plugin();
    cryptsetup(&["open", "--test-passphrase", "--token-only", "-v", p(vol)])
}

#[test]
fn plugin_exports_only_the_versioned_token_abi() {
    let out = output_with(
        {
            let mut c = Command::new(tool("readelf"));
            c.args(["--dyn-syms", "--wide", p(plugin())]);
            c
        },
        None,
    );
    assert!(out.status.success(), "{}", describe("readelf", &out));
    let mut exported: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // Num: Value Size Type Bind Vis Ndx Name; defined globals only.
            (fields.len() >= 8 && fields[4] == "GLOBAL" && fields[6] != "UND")
                .then(|| fields[7].to_owned())
        })
        .collect();
    exported.sort();
    let wanted: Vec<String> = ABI.iter().map(|s| format!("{s}@@CRYPTSETUP_TOKEN_1.0")).collect();
    assert_eq!(exported, wanted);
}

#[test]
fn cryptsetup_unlocks_through_the_plugin_until_the_key_is_revoked() {
    let d = Deployment::start("plugin-open");
    let vol = d.bound_volume("vol", &d.host);

    // cryptsetup alone, no passphrase: the token opens keyslot 1.
    let out = open_by_token(&vol);
    assert!(out.status.success(), "{}", describe("cryptsetup open --token-only", &out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        format!("{stdout}{stderr}").contains("Key slot 1 unlocked"),
        "{}",
        describe("cryptsetup open --token-only", &out)
    );

    // The passphrase it used is the one `rampart unlock` derives: that one
    // opens exactly keyslot 1 too (and a wrong one does not).
    let printed =
        kms_support::rampart(&["unlock", p(&vol), "--print-passphrase", "--kms", p(&d.host)]);
    assert!(printed.status.success(), "{}", describe("rampart unlock", &printed));
    let same = cryptsetup_in(
        &["open", "--test-passphrase", "--key-file", "-", "--key-slot", "1", p(&vol)],
        &printed.stdout,
    );
    assert!(same.status.success(), "{}", describe("cryptsetup --key-slot 1", &same));

    // luksDump shows the binding through the plugin's dump, not the wrap.
    let dump = cryptsetup(&["luksDump", p(&vol)]);
    assert!(dump.status.success(), "{}", describe("luksDump", &dump));
    let text = String::from_utf8_lossy(&dump.stdout);
    assert!(text.contains("rampart-kms"), "{text}");
    assert!(text.contains("Key:        disk"), "{text}");
    assert!(text.contains("Version:    1"), "{text}");
    assert!(text.contains(&format!("Bundle:     {}", p(&d.host))), "{text}");
    let token: serde_json::Value =
        serde_json::from_str(&ok(&["token", "export", p(&vol), "--token-id", "0"])).unwrap();
    let wrapped = token["wrapped"].as_str().unwrap();
    assert!(!text.contains(wrapped.rsplit(':').next().unwrap()), "the wrap is dumped: {text}");

    // Revoked: the plugin is refused, cryptsetup says why (no secret).
    ok(&["kms", "key", "revoke", "disk", "--reason", "decommissioned", "--kms", p(&d.admin)]);
    let out = open_by_token(&vol);
    assert!(!out.status.success(), "{}", describe("open after revoke", &out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("revoked"), "{}", describe("open after revoke", &out));
    assert!(!stderr.contains(wrapped), "{stderr}");
    // The passphrase keyslot still opens it.
    let pass =
        cryptsetup_in(&["open", "--test-passphrase", "--key-file", "-", p(&vol)], PASSPHRASE);
    assert!(pass.status.success(), "{}", describe("passphrase after revoke", &pass));
    drop(d.server);
}

#[test]
fn unlock_is_refused_for_other_clients_missing_bundles_and_absent_servers() {
    let mut d = Deployment::start("plugin-refuse");
    let bundle = d.tmp.join("boot.bundle");
    std::fs::copy(&d.host, &bundle).unwrap();
    let vol = d.bound_volume("vol", &bundle);
    let out = open_by_token(&vol);
    assert!(out.status.success(), "{}", describe("open with the host bundle", &out));

    // A client the key does not allow (its bundle in the token's place).
    std::fs::copy(&d.other, &bundle).unwrap();
    let out = open_by_token(&vol);
    assert!(!out.status.success(), "{}", describe("open as another client", &out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("forbidden") || stderr.contains("HTTP 403"), "{stderr}");

    // No bundle at all.
    std::fs::remove_file(&bundle).unwrap();
    let out = open_by_token(&vol);
    assert!(!out.status.success(), "{}", describe("open without a bundle", &out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("boot.bundle"), "{out:?}");

    // The right bundle again, but no key server answering.
    std::fs::copy(&d.host, &bundle).unwrap();
    assert!(open_by_token(&vol).status.success());
    d.server.kill();
    let out = open_by_token(&vol);
    assert!(!out.status.success(), "{}", describe("open with the server down", &out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no key server answered"),
        "{}",
        describe("open with the server down", &out)
    );
}

#[test]
fn token_import_is_validated_by_the_plugin() {
    plugin();
    let tmp = TempDir::new("plugin-import");
    let vol = tmp.join("vol");
    let pass = tmp.file("pass", PASSPHRASE);
    let mut args = vec!["format", p(&vol), "--size", "20M", "--key-file", p(&pass), "-q"];
    args.extend_from_slice(CHEAP_KDF);
    ok(&args);
    let wrapped = "rampart:v1:disk:1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
    for (bad, why) in [
        (serde_json::json!({"type": "rampart-kms", "keyslots": ["0"], "format": 1}), "\"wrapped\""),
        (
            serde_json::json!({"type": "rampart-kms", "keyslots": ["0"], "wrapped": "garbage"}),
            "\"wrapped\"",
        ),
        (
            serde_json::json!({"type": "rampart-kms", "keyslots": ["0"], "wrapped": wrapped,
                "bundle": "relative/path"}),
            "absolute",
        ),
        (
            serde_json::json!({"type": "rampart-kms", "keyslots": ["0"], "wrapped": wrapped,
                "format": 9}),
            "format",
        ),
    ] {
        let file = tmp.file("token.json", bad.to_string().as_bytes());
        let out = cryptsetup(&["token", "import", "--json-file", p(&file), p(&vol)]);
        assert!(!out.status.success(), "{}", describe(&format!("import {bad}"), &out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("Invalid rampart-kms token") && stderr.contains(why), "{stderr}");
    }
    let dump = cryptsetup(&["luksDump", p(&vol)]);
    assert!(!String::from_utf8_lossy(&dump.stdout).contains("rampart-kms"));

    // A well-formed one is accepted and dumped by the plugin.
    let good = serde_json::json!({"type": "rampart-kms", "keyslots": ["0"], "format": 1,
        "key": "disk", "key_version": 1, "wrapped": wrapped, "bundle": "/srv/boot.bundle"});
    let file = tmp.file("token.json", good.to_string().as_bytes());
    let out = cryptsetup(&["token", "import", "--json-file", p(&file), p(&vol)]);
    assert!(out.status.success(), "{}", describe("import a valid token", &out));
    let dump = cryptsetup(&["luksDump", p(&vol)]);
    let text = String::from_utf8_lossy(&dump.stdout);
    assert!(text.contains("Bundle:     /srv/boot.bundle"), "{text}");
    // ... and rampart reads it as the binding it is.
    let token: serde_json::Value =
        serde_json::from_str(&ok(&["token", "export", p(&vol), "--token-id", "0"])).unwrap();
    assert_eq!(token, good);
}
