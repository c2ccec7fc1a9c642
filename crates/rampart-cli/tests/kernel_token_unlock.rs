//! Boot unlock end to end under a real kernel: a key server (`rampart kms
//! serve`) in the guest, a volume bound to one of its keys, and stock
//! `cryptsetup open --token-only` loading Rampart's token plugin to map
//! the volume in kernel dm-crypt with no passphrase, until the host's
//! client identity is revoked.
//!
//! cryptsetup 2.6 loads token plugins only from its compiled-in directory
//! (no `--external-tokens-path`): the guest copies this build's plugin
//! there (its writes stay in the guest), so the host's directory is left
//! alone. With
//! `RAMPART_TOKEN_PLUGIN=installed` (`scripts/test-package`) the plugin
//! the package installed there is used instead.

use crate::helpers::kernel_support::*;
use crate::helpers::kms_support::{
    self, built_token_plugin, free_port, issue_client, json_lines, token_plugin_dir, ServerProcess,
    TOKEN_PLUGIN,
};

use std::time::Duration;

const PASSPHRASE: &[u8] = b"kernel token unlock passphrase";
const PBKDF2: &[&str] = &["--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000"];
/// The plaintext of the volume: 32 MiB, 16 of them header.
const DATA: usize = 16 << 20;

/// Stock cryptsetup, with Rampart's token plugin and a key server running
/// in the guest, activates a bound volume in kernel dm-crypt without a
/// passphrase (the mapping reads back what Rampart wrote on the host); once
/// the host's client is revoked the same open is refused and maps nothing,
/// while the passphrase keyslot still opens it.
#[test]
fn cryptsetup_maps_a_bound_volume_through_the_token_plugin_until_the_client_is_revoked() {
    tool("qemu-system-x86_64");
    tool("cryptsetup");
    let dir = TempDir::new("ktoken");
    let kms = dir.join("kms");
    let port = free_port();
    let endpoint = format!("127.0.0.1:{port}");
    kms_support::ok(&["kms", "init", "--data-dir", p(&kms), "--endpoint", &endpoint]);
    let admin = kms.join("admin.bundle");
    let host = dir.join("host.bundle");
    let pass = dir.file("pass", PASSPHRASE);
    let vol = dir.join("vol");
    let data = random_bytes(41, DATA);
    let data_file = dir.file("data.bin", &data);
    let before_guest;
    {
        // On the host: the client, the key, the bound volume and its data.
        let _server = ServerProcess::start(&kms, port, None);
        issue_client(p(&admin), "db-1", "role=db", p(&host));
        kms_support::ok(&[
            "kms",
            "key",
            "create",
            "disk",
            "--allow",
            "label:role=db",
            "--kms",
            p(&admin),
        ]);
        let mut format = vec!["format", p(&vol), "--size", "32M", "--key-file", p(&pass), "-q"];
        format.extend_from_slice(PBKDF2);
        kms_support::ok(&format);
        let bound = kms_support::ok(&[
            "bind",
            p(&vol),
            "--key",
            "disk",
            "--kms",
            p(&host),
            "--key-file",
            p(&pass),
            "--token-bundle",
            p(&host),
        ]);
        assert!(bound.contains("token 0: keyslot 1 bound to key disk version 1"), "{bound}");
        kms_support::ok(&["import", p(&vol), p(&data_file), "--token-only", "--kms", p(&host)]);
        before_guest = json_lines(kms_support::ok(&["kms", "audit", "--json", "--kms", p(&admin)]));
        // Stopped here; the guest serves the same data directory on the
        // same port (its network is its own).
    }
    let last_host_seq = before_guest.as_array().unwrap().last().unwrap()["seq"].as_u64().unwrap();

    let install = match built_token_plugin() {
        Some(built) => format!(
            "cp {built} {plugins}/{TOKEN_PLUGIN}",
            plugins = p(&token_plugin_dir()),
            built = p(&built),
        ),
        None => format!("test -f {}/{TOKEN_PLUGIN}", p(&token_plugin_dir())),
    };
    let script = format!(
        r#"{STEP}
# The key server, on a guest-private copy of its data directory.
cp -a {kms} /tmp/kms
{rampart} kms serve --data-dir /tmp/kms --listen {endpoint} --rate-limit 0 >serve.out 2>serve.log &
server=$!
{install}
up=
for i in $(seq 120); do
  kill -0 $server
  if grep -q '^https://' serve.out; then up=1; break; fi
  sleep 0.5
done
test -n "$up"
loop=$(losetup -f --show {vol})
step open cryptsetup open --token-only -v $loop boot
step table dmsetup table boot
step status cryptsetup status boot
step read dd if=/dev/mapper/boot of=mapped.bin bs=1M
step close cryptsetup close boot
ls /dev/mapper >mapper-after-close
step revoke {rampart} kms client revoke db-1 --reason 'host decommissioned' --kms {admin}
step refused cryptsetup open --token-only -v $loop boot
ls /dev/mapper >mapper-after-refusal
step passphrase cryptsetup open --key-file {pass} $loop boot
step close2 cryptsetup close boot
step audit {rampart} kms audit --json --kms {admin}
kill $server
wait $server || true
losetup -d $loop
"#,
        kms = p(&kms),
        rampart = rampart_bin(),
        vol = p(&vol),
        admin = p(&admin),
        pass = p(&pass),
    );
    let guest = run_in_kernel(&dir, &script, &[], Duration::from_secs(600));
    guest.assert_ok("the token unlock script");
    let serve_log = std::fs::read_to_string(dir.join("serve.log")).unwrap_or_default();

    // Activated by the token alone, through the plugin, in kernel dm-crypt.
    let (rc, out) = step(&dir, "open");
    assert_eq!(
        rc, 0,
        "cryptsetup open --token-only failed:\n{out}\n--- kms serve ---\n{serve_log}"
    );
    assert!(
        out.contains("token 0 (key disk version 1, keyslot 1): passphrase unwrapped")
            && out.contains("Key slot 1 unlocked"),
        "the plugin did not unlock keyslot 1:\n{out}"
    );
    let (rc, table) = step(&dir, "table");
    assert_eq!(rc, 0, "dmsetup table: {table}");
    assert!(table.starts_with("0 32768 crypt aes-xts-plain64 "), "not a dm-crypt mapping: {table}");
    let (rc, status) = step(&dir, "status");
    assert!(rc == 0 && status.contains("type:    LUKS2"), "cryptsetup status: {status}");
    let (rc, out) = step(&dir, "read");
    assert_eq!(rc, 0, "reading /dev/mapper/boot: {out}");
    assert_same("the mapped device", &std::fs::read(dir.join("mapped.bin")).unwrap(), &data);
    let (rc, out) = step(&dir, "close");
    assert_eq!(rc, 0, "cryptsetup close: {out}");
    let mapper = std::fs::read_to_string(dir.join("mapper-after-close")).unwrap();
    assert_eq!(mapper.trim(), "control", "left in /dev/mapper after close");

    // Revoked: the same open is refused and maps nothing.
    let (rc, out) = step(&dir, "revoke");
    assert!(rc == 0 && out.contains("client db-1 revoked"), "revoke: {out}");
    let (rc, out) = step(&dir, "refused");
    assert_ne!(rc, 0, "cryptsetup open --token-only succeeded for a revoked client:\n{out}");
    assert!(
        out.contains("rampart-kms token 0") && out.to_lowercase().contains("revoked"),
        "the refusal does not say the certificate is revoked:\n{out}"
    );
    assert!(out.contains("No usable token is available."), "{out}");
    let mapper = std::fs::read_to_string(dir.join("mapper-after-refusal")).unwrap();
    assert_eq!(mapper.trim(), "control", "a refused open left a mapping");
    // The refusal is the token's: the passphrase keyslot still opens it.
    let (rc, out) = step(&dir, "passphrase");
    assert_eq!(rc, 0, "the passphrase no longer opens the volume: {out}");
    let (rc, out) = step(&dir, "close2");
    assert_eq!(rc, 0, "cryptsetup close: {out}");

    // The server saw one unwrap by db-1, the revocation, then only refused
    // handshakes.
    let (rc, audit) = step(&dir, "audit");
    assert_eq!(rc, 0, "kms audit: {audit}");
    let audit = json_lines(&audit);
    let new: Vec<(String, String, String)> = audit
        .as_array()
        .unwrap()
        .iter()
        // (Listing the log is audited too: the host's listing, above.)
        .filter(|e| e["seq"].as_u64().unwrap() > last_host_seq && e["operation"] != "audit.list")
        .map(|e| {
            let field = |name: &str| e[name].as_str().unwrap_or("-").to_owned();
            (field("operation"), field("outcome"), field("client"))
        })
        .collect();
    let entry = |op: &str, outcome: &str, client: &str| {
        (op.to_owned(), outcome.to_owned(), client.to_owned())
    };
    assert!(new.len() >= 3, "audit entries of the guest: {new:?}");
    assert_eq!(new[0], entry("key.unwrap", "ok", "db-1"), "audit entries of the guest: {new:?}");
    assert_eq!(
        new[1],
        entry("client.revoke", "ok", "admin"),
        "audit entries of the guest: {new:?}"
    );
    assert!(
        new[2..].iter().all(|(op, outcome, _)| op == "tls.handshake" && outcome == "denied"),
        "after the revocation: {new:?}"
    );
}
