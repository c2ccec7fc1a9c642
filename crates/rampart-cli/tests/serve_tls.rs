#![allow(clippy::unwrap_used)]
//! `rampart serve` over TLS with real clients: a test CA, server and client
//! certificates made with the openssl CLI; libnbd (nbdinfo, `nbds://` with
//! `tls-certificates=DIR`) and qemu (`tls-creds-x509`) read the right bytes;
//! plain-text clients are refused under `--tls required`; with
//! `--tls-client-ca` only clients with a certificate from that CA get in;
//! `--tls on` serves both.

use crate::helpers::serve_support as support;

use std::path::{Path, PathBuf};

use support::*;

const SIZE: u64 = 4 * MIB;

struct Pki {
    server_cert: PathBuf,
    server_key: PathBuf,
    ca: PathBuf,
    /// Client directories in libnbd's and qemu's layout (ca-cert.pem,
    /// client-cert.pem, client-key.pem): a valid client certificate, none,
    /// and one from another CA.
    client: PathBuf,
    anonymous: PathBuf,
    rogue: PathBuf,
}

fn make_pki(dir: &TempDir) -> Pki {
    let d = dir.join("pki");
    std::fs::create_dir_all(&d).unwrap();
    issue_certificate(&d, "ca", "/CN=Rampart serve test CA", None, CA_EXTENSIONS);
    issue_certificate(&d, "rogueca", "/CN=Some other CA", None, CA_EXTENSIONS);
    issue_certificate(&d, "server", "/CN=localhost", Some("ca"), SERVER_EXTENSIONS);
    issue_certificate(&d, "client", "/CN=serve client", Some("ca"), CLIENT_EXTENSIONS);
    issue_certificate(&d, "rogue", "/CN=serve rogue client", Some("rogueca"), CLIENT_EXTENSIONS);

    let layout = |name: &str, client: Option<&str>| {
        let out = dir.join(name);
        std::fs::create_dir_all(&out).unwrap();
        std::fs::copy(d.join("ca-cert.pem"), out.join("ca-cert.pem")).unwrap();
        if let Some(client) = client {
            std::fs::copy(d.join(format!("{client}-cert.pem")), out.join("client-cert.pem"))
                .unwrap();
            std::fs::copy(d.join(format!("{client}-key.pem")), out.join("client-key.pem")).unwrap();
        }
        out
    };
    Pki {
        server_cert: d.join("server-cert.pem"),
        server_key: d.join("server-key.pem"),
        ca: d.join("ca-cert.pem"),
        client: layout("client", Some("client")),
        anonymous: layout("anonymous", None),
        rogue: layout("rogue", Some("rogue")),
    }
}

fn tcp_port(uri: &str, scheme: &str) -> u16 {
    uri.strip_prefix(&format!("{scheme}://127.0.0.1:"))
        .and_then(|rest| rest.strip_suffix('/'))
        .unwrap_or_else(|| panic!("unexpected URI {uri}"))
        .parse()
        .unwrap()
}

fn nbds(port: u16, certs: &Path) -> String {
    format!("nbds://localhost:{port}/?tls-certificates={}", certs.display())
}

/// nbdinfo --json over TLS; asserts TLS was used and the size.
#[track_caller]
fn nbdinfo_tls(uri: &str) {
    let out = ok(&format!("nbdinfo {uri}"), run("nbdinfo", &["--json", uri]));
    let info: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(info["TLS"], true, "{info}");
    assert_eq!(info["exports"][0]["export-size"], SIZE, "{info}");
}

#[track_caller]
fn refused(what: &str, server: &mut Serve, args: &[&str]) {
    let out = run("nbdinfo", args);
    assert!(!out.status.success(), "{}", describe(&format!("{what} should be refused"), &out));
    server.assert_alive(what);
}

fn qemu_tls_args(certs: &Path, port: u16) -> (String, String) {
    (
        format!("tls-creds-x509,id=tls0,dir={},endpoint=client", certs.display()),
        format!("driver=nbd,host=localhost,port={port},tls-creds=tls0"),
    )
}

#[test]
fn tls_with_libnbd_and_qemu_and_client_certificates() {
    require(&["openssl", "nbdinfo", "qemu-img", "qemu-io"]);
    let dir = TempDir::new("tls");
    let pki = make_pki(&dir);
    let key = key_file(&dir);
    let vol = make_volume(&dir, "vol", SIZE);
    let data = random_bytes(7, SIZE as usize);
    let data_file = dir.file("data.bin", &data);
    ok("rampart import", rampart(&["import", p(&vol), p(&data_file), "--key-file", p(&key)]));
    let socket = dir.join("tls.sock");
    let tls_args = ["--tls-cert", p(&pki.server_cert), "--tls-key", p(&pki.server_key)];

    // --tls required is the default with a certificate.
    let mut args = vec![p(&vol), "--key-file", p(&key), "--listen", "127.0.0.1:0"];
    args.extend(["--socket", p(&socket)]);
    args.extend(tls_args);
    let mut server = Serve::start(&args, dir.join("serve1.log"), 2);
    assert_eq!(server.uris[0], format!("nbds+unix:///?socket={}", socket.display()));
    let port = tcp_port(&server.uris[1], "nbds");

    nbdinfo_tls(&nbds(port, &pki.client));
    nbdinfo_tls(&nbds(port, &pki.anonymous));
    nbdinfo_tls(&format!(
        "nbds+unix:///?socket={}&tls-certificates={}",
        socket.display(),
        pki.anonymous.display()
    ));

    // qemu-img reads the plaintext over TLS; qemu-io writes and reads back.
    let (object, image) = qemu_tls_args(&pki.client, port);
    let out_file = dir.join("out.raw");
    ok(
        "qemu-img convert over TLS",
        run(
            "qemu-img",
            &["convert", "--object", &object, "--image-opts", &image, "-O", "raw", p(&out_file)],
        ),
    );
    assert_same("qemu-img over TLS", &std::fs::read(&out_file).unwrap(), &data);
    let out = ok(
        "qemu-io over TLS",
        run(
            "qemu-io",
            &[
                "--object",
                &object,
                "--image-opts",
                &image,
                "-c",
                "write -P 0x7e 65536 65536",
                "-c",
                "flush",
                "-c",
                "read -P 0x7e 65536 65536",
            ],
        ),
    );
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(!said.contains("failed") && said.contains("read 65536/65536"), "{said}");

    // Plain text is refused, over TCP and the Unix socket.
    refused("plain-text nbdinfo", &mut server, &[&format!("nbd://127.0.0.1:{port}/")]);
    refused(
        "plain-text nbdinfo on the socket",
        &mut server,
        &[&format!("nbd+unix:///?socket={}", socket.display())],
    );
    let mut raw = RawClient::connect_flags(&socket);
    raw.option(OPT_GO, &info_payload(""));
    let reply = raw.option_reply();
    assert_eq!(reply.kind, (1 << 31) + 5, "GO before STARTTLS: {reply:?}");
    raw.option(OPT_EXPORT_NAME, b"");
    raw.expect_closed("EXPORT_NAME before STARTTLS");
    // STARTTLS accepted, then garbage instead of a ClientHello.
    let mut raw = RawClient::connect_flags(&socket);
    raw.option(5, &[]);
    assert_eq!(raw.option_reply().kind, REP_ACK);
    raw.send_lossy(&[0x55; 600]);
    raw.expect_closed("garbage after STARTTLS");
    server.assert_alive("TLS abuse");
    nbdinfo_tls(&nbds(port, &pki.client));

    let log = server.stop();
    assert!(!log.contains("panicked"), "{log}");
    std::fs::remove_file(&out_file).unwrap();
    let plain = export_range(&vol, &key, 0, SIZE);
    assert!(plain[65536..131072].iter().all(|&b| b == 0x7e), "qemu-io's write over TLS");
    assert_same("outside qemu-io's write", &plain[..65536], &data[..65536]);
    assert_same("outside qemu-io's write", &plain[131072..], &data[131072..]);

    // --tls-client-ca: a client certificate from that CA is required.
    let mut args = vec![p(&vol), "--key-file", p(&key), "--listen", "127.0.0.1:0"];
    args.extend(tls_args);
    args.extend(["--tls-client-ca", p(&pki.ca)]);
    let mut server = Serve::start(&args, dir.join("serve2.log"), 1);
    let port = tcp_port(server.uri(), "nbds");
    refused("a client without a certificate", &mut server, &[&nbds(port, &pki.anonymous)]);
    refused("a client certificate from another CA", &mut server, &[&nbds(port, &pki.rogue)]);
    refused("plain text", &mut server, &[&format!("nbd://127.0.0.1:{port}/")]);
    nbdinfo_tls(&nbds(port, &pki.client));
    let (object, image) = qemu_tls_args(&pki.client, port);
    ok(
        "qemu-img convert with a client certificate",
        run(
            "qemu-img",
            &["convert", "--object", &object, "--image-opts", &image, "-O", "raw", p(&out_file)],
        ),
    );
    assert_same("qemu-img with a client certificate", &std::fs::read(&out_file).unwrap(), &plain);
    let (object, image) = qemu_tls_args(&pki.anonymous, port);
    let out = run(
        "qemu-img",
        &["convert", "--object", &object, "--image-opts", &image, "-O", "raw", p(&out_file)],
    );
    assert!(!out.status.success(), "{}", describe("qemu-img without a client certificate", &out));
    server.assert_alive("client certificate checks");
    server.stop();

    // --tls on: both plain text and TLS are served; URIs are plain nbd://.
    let mut args = vec![p(&vol), "--key-file", p(&key), "--listen", "127.0.0.1:0"];
    args.extend(tls_args);
    args.extend(["--tls", "on"]);
    let mut server = Serve::start(&args, dir.join("serve3.log"), 1);
    let port = tcp_port(server.uri(), "nbd");
    let out = ok("plain nbdinfo with --tls on", run("nbdinfo", &["--json", server.uri()]));
    let info: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(info["TLS"], false, "{info}");
    nbdinfo_tls(&nbds(port, &pki.client));
    server.stop();
}

/// Shell commands that open a TLS 1.3 session to the server on 127.0.0.1
/// port `port` with `openssl s_client` (through a relay that does the NBD
/// STARTTLS, `helpers/nbd_starttls_relay.py`), send a TLS KeyUpdate, then
/// a line that is not an NBD option. s_client's output lands in
/// `sclient.out`.
fn key_update_commands(port: u16, ca: &Path) -> String {
    let relay = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/helpers/nbd_starttls_relay.py");
    format!(
        r#"python3 {relay} {port} >relay.out 2>&1 &
relay=$!
for i in $(seq 100); do grep -q ready relay.out && break; sleep 0.1; done
relay_port=$(sed -n 's/^ready //p' relay.out)
(sleep 1; echo k; sleep 1; echo 'after the key update: not an NBD option'; sleep 1) |
  openssl s_client -connect "127.0.0.1:$relay_port" -tls1_3 -CAfile {ca} -servername localhost \
  >sclient.out 2>&1 || true
wait $relay || true
"#,
        relay = relay.display(),
        ca = ca.display(),
    )
}

/// Runs a guest script under the test kernel (`scripts/kernel-vm`) with
/// `module` loaded (`tls`) or refused (`!tls`); returns the server's log
/// (`serve.log`), failing with it and the console unless the script
/// exited 0.
fn serve_under_kernel(dir: &TempDir, script: &str, module: &str) -> String {
    let script_file = dir.file("guest.sh", script.as_bytes());
    let kernel_vm = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/kernel-vm");
    let out = run_limited(
        "bash",
        &[p(&kernel_vm), p(dir.path()), p(&script_file), module],
        std::time::Duration::from_secs(600),
    );
    let log = std::fs::read_to_string(dir.join("serve.log")).unwrap_or_default();
    let console = std::fs::read_to_string(dir.join("console.log")).unwrap_or_default();
    assert!(out.status.success(), "{}\n{console}\n{log}", describe("the script", &out));
    log
}

/// `--ktls` under a kernel without the `tls` module (the test kernel with
/// `tls` refused, so this holds whatever the host's kernel has): the
/// first TLS connection logs once that TLS stays in user space, and every
/// connection is served as without the option: rustls follows a client's
/// KeyUpdate (that connection then ends at the bad option after it).
#[test]
fn kernel_tls_falls_back_to_user_space_without_the_tls_module() {
    require(&["openssl", "nbdinfo", "qemu-system-x86_64", "python3"]);
    let dir = TempDir::new("ktls-fallback");
    let pki = make_pki(&dir);
    let key = key_file(&dir);
    let vol = make_volume(&dir, "vol", SIZE);
    let uri = nbds(10809, &pki.client);
    let script = format!(
        r#"set -e
cd {dir}
cat /proc/sys/net/ipv4/tcp_available_ulp >ulps
RAMPART_LOG=debug {rampart} serve {vol} --key-file {key} --listen 127.0.0.1:10809 \
  --tls-cert {cert} --tls-key {server_key} --ktls --handshake-timeout 120s >serve.out 2>serve.log &
pid=$!
up=
for i in $(seq 120); do
  kill -0 $pid
  if nbdinfo --size '{uri}' >/dev/null 2>&1; then up=1; break; fi
  sleep 0.5
done
test -n "$up"
for i in 1 2 3; do nbdinfo --json '{uri}' >info-$i.json; done
{key_update}kill -TERM $pid
wait $pid
"#,
        dir = dir.path().display(),
        rampart = env!("CARGO_BIN_EXE_rampart"),
        vol = vol.display(),
        key = key.display(),
        cert = pki.server_cert.display(),
        server_key = pki.server_key.display(),
        key_update = key_update_commands(10809, &pki.ca),
    );
    let log = serve_under_kernel(&dir, &script, "!tls");
    let ulps = std::fs::read_to_string(dir.join("ulps")).unwrap();
    assert!(!ulps.split_whitespace().any(|ulp| ulp == "tls"), "the kernel has kTLS: {ulps}");
    for i in 1..=3 {
        let info = std::fs::read(dir.join(&format!("info-{i}.json"))).unwrap();
        let info: serde_json::Value = serde_json::from_slice(&info).unwrap();
        assert_eq!(info["TLS"], true, "{info}");
        assert_eq!(info["exports"][0]["export-size"], SIZE, "{info}");
    }
    let sclient = std::fs::read_to_string(dir.join("sclient.out")).unwrap();
    assert!(sclient.contains("KEYUPDATE"), "{sclient}");
    assert_eq!(log.matches("kernel TLS unavailable").count(), 1, "{log}");
    assert!(log.contains("TLS stays in user space"), "{log}");
    assert!(log.contains("connection ended: bad option magic"), "{log}");
    assert!(!log.contains("key update"), "{log}");
    assert!(log.contains("(1 ended by errors"), "{log}");
}

/// `--ktls` under a kernel that has the `tls` module: Debian's stock
/// kernel in a virtual machine (`scripts/kernel-vm`), booted on this
/// machine's tree, running this machine's programs. nbdcopy (GnuTLS) writes the volume over TLS 1.3
/// and reads it back over TLS 1.3 with AES-128-GCM and with
/// ChaCha20-Poly1305 and over TLS 1.2; the kernel's own counters show the
/// sessions in its software TLS, the server's log each session's version
/// and cipher and no connection ended by an error (a client's close_notify
/// is the end of its stream), and what was written reads back on this
/// machine through `rampart export`. A client's TLS 1.3 KeyUpdate, which
/// this kernel cannot follow, ends that one connection with the reason
/// logged.
#[test]
fn kernel_tls_carries_the_sessions_under_a_kernel_with_the_tls_module() {
    require(&["openssl", "nbdcopy", "nbdinfo", "qemu-system-x86_64", "python3"]);
    let dir = TempDir::new("ktls-vm");
    let pki = make_pki(&dir);
    let key = key_file(&dir);
    let vol = make_volume(&dir, "vol", SIZE);
    let data = random_bytes(11, SIZE as usize);
    let data_file = dir.file("data.bin", &data);
    let priorities = [
        ("tls12", "[overrides]\ndisabled-version = tls1.3\n"),
        (
            "aes128",
            "[overrides]\ntls-disabled-cipher = aes-256-gcm\n\
             tls-disabled-cipher = chacha20-poly1305\n",
        ),
        (
            "chacha",
            "[overrides]\ntls-disabled-cipher = aes-256-gcm\ntls-disabled-cipher = aes-128-gcm\n",
        ),
    ];
    for (name, priority) in priorities {
        dir.file(&format!("{name}.priority"), priority.as_bytes());
    }
    let uri = nbds(10809, &pki.client);
    let script = format!(
        r#"set -e
cd {dir}
RAMPART_LOG=debug {rampart} serve {vol} --key-file {key} --listen 127.0.0.1:10809 \
  --tls-cert {cert} --tls-key {server_key} --ktls --handshake-timeout 120s \
  --metrics-listen 127.0.0.1:10810 \
  >serve.out 2>serve.log &
pid=$!
up=
for i in $(seq 120); do
  kill -0 $pid
  if nbdinfo --size '{uri}' >/dev/null 2>&1; then up=1; break; fi
  sleep 0.5
done
test -n "$up"
nbdcopy {data} '{uri}'
for p in tls12 aes128 chacha; do
  GNUTLS_SYSTEM_PRIORITY_FILE={dir}/$p.priority nbdcopy '{uri}' back-$p.raw
  cmp back-$p.raw {data}
done
{key_update}cat /proc/net/tls_stat >tls_stat
python3 -c 'import urllib.request as u; print(u.urlopen("http://127.0.0.1:10810/metrics").read().decode())' >metrics
kill -TERM $pid
wait $pid
"#,
        dir = dir.path().display(),
        rampart = env!("CARGO_BIN_EXE_rampart"),
        vol = vol.display(),
        key = key.display(),
        cert = pki.server_cert.display(),
        server_key = pki.server_key.display(),
        data = data_file.display(),
        key_update = key_update_commands(10809, &pki.ca),
    );
    let log = serve_under_kernel(&dir, &script, "tls");

    let stat = std::fs::read_to_string(dir.join("tls_stat")).unwrap();
    let counter = |name: &str| -> u64 {
        stat.lines()
            .find_map(|line| line.strip_prefix(name).map(|v| v.trim().parse().unwrap()))
            .unwrap_or_else(|| panic!("no {name} in {stat}"))
    };
    let handed = log.matches("TLS session handed to the kernel").count() as u64;
    // nbdinfo's probes, the write, the three reads and the KeyUpdate's.
    assert!(handed >= 6, "{log}");
    assert_eq!(counter("TlsTxSw"), handed, "{stat}");
    assert_eq!(counter("TlsRxSw"), handed, "{stat}");
    assert_eq!(counter("TlsDecryptError"), 0, "{stat}");
    let metrics = std::fs::read_to_string(dir.join("metrics")).unwrap();
    let offloaded =
        format!("rampart_nbd_kernel_tls_sessions_total{{result=\"offloaded\"}} {handed}\n");
    assert!(metrics.contains(&offloaded), "{offloaded} in {metrics}");
    assert!(
        metrics.contains("rampart_nbd_kernel_tls_sessions_total{result=\"user_space\"} 0\n"),
        "{metrics}"
    );
    for session in [
        "version=Tls13 cipher=Aes256Gcm",
        "version=Tls12 cipher=Aes256Gcm",
        "version=Tls13 cipher=Aes128Gcm",
        "version=Tls13 cipher=Chacha20Poly1305",
    ] {
        assert!(log.contains(session), "no session with {session}: {log}");
    }
    assert!(!log.contains("kernel TLS unavailable"), "{log}");
    let sclient = std::fs::read_to_string(dir.join("sclient.out")).unwrap();
    assert!(sclient.contains("KEYUPDATE"), "{sclient}");
    assert_eq!(log.matches("connection ended:").count(), 1, "{log}");
    assert!(log.contains("after the handshake (a key update?), which kernel TLS"), "{log}");
    assert!(log.contains("(1 ended by errors"), "{log}");
    assert_same("written over kernel TLS", &export_range(&vol, &key, 0, SIZE), &data);
}
