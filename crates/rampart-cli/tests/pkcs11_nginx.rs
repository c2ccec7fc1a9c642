#![allow(clippy::unwrap_used)]
//! nginx serving HTTPS with its private key held in the key manager,
//! through OpenSSL's pkcs11 engine (libp11) and `librampart_pkcs11.so`:
//! the key pair is generated in the key manager with `pkcs11-tool`, its
//! self-signed certificate is signed through the engine (`openssl req
//! -engine pkcs11 -keyform engine`), and nginx (root master, `www-data`
//! worker forked after the key is loaded, so the module is initialized
//! again in the worker) answers `curl`, which verifies the chain against
//! that certificate, over TLS 1.3 and TLS 1.2. A certificate request
//! (CSR) signed through the engine verifies. Covered for an EC P-256
//! key (ECDSA) and an RSA-2048 key (RSA-PSS in TLS 1.3 and 1.2, and
//! PKCS #1 v1.5 when the client offers only that); the certificate nginx
//! serves carries the key manager's public key; a worker killed and
//! respawned, and a reload (SIGHUP: the master loads the key again and
//! forks new workers), still serve.
//!
//! The commands and configuration are those of docs/src/pkcs11/nginx.md.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use crate::helpers::kms_support::{self, free_port, wait_until};
use crate::helpers::pkcs11_support::{Pkcs11Setup, PIN};

use kms_support::common::{describe, output, output_with, p, text, tool};

const BODY: &str = "served with a key held by the key manager\n";
/// The user nginx's workers run as (Debian's).
const WORKER_USER: &str = "www-data";

/// The RFC 7512 URI of the private key labelled `label`, with the PIN.
fn key_uri(label: &str) -> String {
    format!("pkcs11:token=rampart;object={label};type=private;pin-value={PIN}")
}

/// A command with the engine pointed at this build's module and the
/// module at the setup's configuration.
fn with_module(setup: &Pkcs11Setup, program: &str) -> Command {
    let mut command = Command::new(tool(program));
    command.env("PKCS11_MODULE_PATH", &setup.module).env("RAMPART_PKCS11_CONFIG", &setup.config);
    command
}

#[track_caller]
fn succeeded(what: &str, out: Output) -> Output {
    assert!(out.status.success(), "{}", describe(what, &out));
    out
}

/// Generates a key pair labelled `label` in the key manager, through the
/// module, and a self-signed certificate for `localhost` signed with it
/// through the engine; returns the certificate's path.
fn key_and_certificate(setup: &Pkcs11Setup, key_type: &str, label: &str, id: &str) -> PathBuf {
    let mut keygen = setup.pkcs11_tool();
    keygen.args([
        "--login",
        "--pin",
        PIN,
        "--keypairgen",
        "--key-type",
        key_type,
        "--label",
        label,
        "--id",
        id,
        "--usage-sign",
        "--sensitive",
    ]);
    succeeded("pkcs11-tool --keypairgen", output(keygen));
    let cert = setup.dir.join(&format!("{label}.pem"));
    let mut req = with_module(setup, "openssl");
    req.args(["req", "-new", "-x509", "-engine", "pkcs11", "-keyform", "engine", "-key"])
        .arg(key_uri(label))
        .args(["-subj", "/CN=localhost", "-days", "30"])
        .args(["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-out", p(&cert)]);
    succeeded("openssl req -engine pkcs11", output(req));
    cert
}

/// The key manager's public key (PEM) of the one key pair of algorithm
/// `algorithm` (`ec`, `rsa`), as `rampart kms key public` prints it.
fn key_manager_public_key(setup: &Pkcs11Setup, algorithm: &str) -> String {
    let list = kms_support::ok(&["kms", "key", "list", "--json", "--kms", &setup.admin]);
    let keys = kms_support::json_lines(&list);
    let private: Vec<&str> = keys
        .as_array()
        .unwrap()
        .iter()
        .filter(|k| k["type"] == "private-key" && k["algorithm"] == algorithm)
        .map(|k| k["name"].as_str().unwrap())
        .collect();
    assert_eq!(private.len(), 1, "one {algorithm} private key expected: {list}");
    kms_support::ok(&["kms", "key", "public", private[0], "--kms", &setup.bundle])
}

/// The public key (PEM) of the certificate in `pem`.
fn public_key_of(pem: &[u8]) -> String {
    let mut x509 = Command::new(tool("openssl"));
    x509.args(["x509", "-noout", "-pubkey"]);
    text(&succeeded("openssl x509 -pubkey", output_with(x509, Some(pem))).stdout)
}

/// A `nginx` master (and its workers, one process group), stopped when
/// dropped, even when the test fails.
struct Nginx {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl Nginx {
    /// nginx in the foreground serving [`BODY`] on `127.0.0.1:PORT` with
    /// certificate `cert` and the key `label` through the engine.
    fn start(setup: &Pkcs11Setup, cert: &Path, label: &str) -> Self {
        let dir = setup.dir.join(&format!("nginx-{label}"));
        std::fs::create_dir_all(dir.join("html")).unwrap();
        std::fs::write(dir.join("html/index.html"), BODY).unwrap();
        let port = free_port();
        let d = p(&dir);
        let conf = format!(
            "user {WORKER_USER};\n\
             daemon off;\n\
             master_process on;\n\
             worker_processes 1;\n\
             pid {d}/nginx.pid;\n\
             error_log {d}/error.log info;\n\
             env RAMPART_PKCS11_CONFIG;\n\
             env PKCS11_MODULE_PATH;\n\
             ssl_engine pkcs11;\n\
             events {{ worker_connections 64; }}\n\
             http {{\n\
                 access_log off;\n\
                 client_body_temp_path {d}/body;\n\
                 proxy_temp_path {d}/proxy;\n\
                 fastcgi_temp_path {d}/fastcgi;\n\
                 uwsgi_temp_path {d}/uwsgi;\n\
                 scgi_temp_path {d}/scgi;\n\
                 server {{\n\
                     listen 127.0.0.1:{port} ssl;\n\
                     server_name localhost;\n\
                     ssl_protocols TLSv1.2 TLSv1.3;\n\
                     ssl_certificate {cert};\n\
                     ssl_certificate_key \"engine:pkcs11:{uri}\";\n\
                     root {d}/html;\n\
                 }}\n\
             }}\n",
            cert = p(cert),
            uri = key_uri(label),
        );
        let conf_path = dir.join("nginx.conf");
        std::fs::write(&conf_path, conf).unwrap();
        let mut command = with_module(setup, "nginx");
        command
            .args(["-p", d, "-e", &format!("{d}/error.log"), "-c", p(&conf_path)])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let child = command.spawn().unwrap_or_else(|e| panic!("cannot run nginx: {e}"));
        let mut nginx = Self { child, port, dir };
        let listening = wait_until(Duration::from_secs(30), || {
            nginx.exited().is_some()
                || std::net::TcpStream::connect(("127.0.0.1", nginx.port)).is_ok()
        });
        if let Some(status) = nginx.exited() {
            panic!("nginx exited ({status}) at start:\n{}", nginx.error_log());
        }
        assert!(listening, "nginx does not listen on {port}:\n{}", nginx.error_log());
        nginx
    }

    fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().unwrap()
    }

    fn error_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("error.log")).unwrap_or_default()
    }

    fn master_pid(&self) -> u32 {
        self.child.id()
    }

    /// The pids of the workers (the master's children).
    fn workers(&self) -> Vec<String> {
        let mut pgrep = Command::new(tool("pgrep"));
        pgrep.args(["-P", &self.master_pid().to_string()]);
        text(&output(pgrep).stdout).split_whitespace().map(str::to_owned).collect()
    }

    fn signal(target: &str, signal: &str) {
        let mut kill = Command::new(tool("kill"));
        kill.args([&format!("-{signal}"), "--", target]);
        let _ = output(kill);
    }

    /// `curl` over TLS `version` (`1.2`, `1.3`), checking the chain
    /// against `ca`: its body and its verbose output.
    fn curl(&self, ca: &Path, version: &str) -> (String, String) {
        let url = format!("https://localhost:{}/", self.port);
        let mut curl = Command::new(tool("curl"));
        curl.args(["--silent", "--show-error", "--fail", "--verbose", "--max-time", "30"])
            .args(["--cacert", p(ca)])
            .args(["--resolve", &format!("localhost:{}:127.0.0.1", self.port)])
            .args([&format!("--tlsv{version}"), "--tls-max", version, &url]);
        let out = output(curl);
        assert!(
            out.status.success(),
            "{}\n--- nginx error log ---\n{}",
            describe("curl", &out),
            self.error_log()
        );
        (text(&out.stdout), text(&out.stderr))
    }

    /// Asserts curl gets [`BODY`] over TLS 1.3 and TLS 1.2.
    fn serves_both_versions(&self, ca: &Path) {
        for version in ["1.3", "1.2"] {
            let (body, verbose) = self.curl(ca, version);
            assert_eq!(body, BODY);
            assert!(verbose.contains(&format!("SSL connection using TLSv{version}")), "{verbose}");
            assert!(verbose.contains("SSL certificate verify ok"), "{verbose}");
        }
    }

    /// `openssl s_client` with `args`, verifying the chain against `ca`
    /// and sending a GET: (standard output, standard error).
    fn s_client(&self, ca: &Path, args: &[&str]) -> (String, String) {
        let mut s_client = Command::new(tool("openssl"));
        s_client
            .args(["s_client", "-connect", &format!("127.0.0.1:{}", self.port)])
            .args(["-servername", "localhost", "-verify_hostname", "localhost"])
            .args(["-CAfile", p(ca), "-verify_return_error", "-showcerts", "-ign_eof"])
            .args(args);
        let out = output_with(s_client, Some(b"GET / HTTP/1.0\r\nHost: localhost\r\n\r\n"));
        assert!(
            out.status.success(),
            "{}\n--- nginx error log ---\n{}",
            describe("openssl s_client", &out),
            self.error_log()
        );
        (text(&out.stdout), text(&out.stderr))
    }

    /// The leaf certificate (PEM) nginx serves.
    fn served_certificate(&self, ca: &Path) -> String {
        let (stdout, _) = self.s_client(ca, &[]);
        let begin = stdout
            .find("-----BEGIN CERTIFICATE-----")
            .unwrap_or_else(|| panic!("no certificate shown: {stdout}"));
        let end = stdout[begin..].find("-----END CERTIFICATE-----").unwrap() + begin;
        format!("{}-----END CERTIFICATE-----\n", &stdout[begin..end])
    }

    /// No critical failure was logged (a failed handshake is `[crit]`).
    fn logged_no_failure(&self) {
        let log = self.error_log();
        for level in ["[crit]", "[alert]", "[emerg]"] {
            assert!(!log.contains(level), "nginx logged a failure:\n{log}");
        }
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // The master and its workers are one process group; the master
        // stops its workers on SIGTERM.
        let group = format!("-{}", self.master_pid());
        Self::signal(&group, "TERM");
        let stopped = wait_until(Duration::from_secs(10), || self.exited().is_some());
        if !stopped {
            Self::signal(&group, "KILL");
            let _ = self.child.wait();
        }
    }
}

/// A key manager, its module configuration and client bundle readable by
/// nginx's workers, which initialize the module again after the fork.
fn setup_for_nginx() -> Pkcs11Setup {
    let setup = Pkcs11Setup::start(None);
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(setup.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut chgrp = Command::new(tool("chgrp"));
    chgrp.arg(WORKER_USER).arg(&setup.config).arg(&setup.bundle);
    succeeded("chgrp", output(chgrp));
    for file in [setup.config.as_path(), Path::new(&setup.bundle)] {
        std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o640)).unwrap();
    }
    setup
}

#[test]
fn nginx_serves_https_with_an_ec_p256_key_held_in_the_key_manager() {
    let setup = setup_for_nginx();
    let cert = key_and_certificate(&setup, "EC:prime256v1", "web", "10");

    // A certificate request for a CA is signed the same way.
    let csr = setup.dir.join("web.csr");
    let mut req = with_module(&setup, "openssl");
    req.args(["req", "-new", "-engine", "pkcs11", "-keyform", "engine", "-key"])
        .arg(key_uri("web"))
        .args(["-subj", "/CN=localhost", "-out", p(&csr)]);
    succeeded("openssl req -new -engine pkcs11", output(req));
    let mut verify = Command::new(tool("openssl"));
    verify.args(["req", "-verify", "-noout", "-in", p(&csr)]);
    succeeded("openssl req -verify", output(verify));

    let nginx = Nginx::start(&setup, &cert, "web");
    nginx.serves_both_versions(&cert);

    // The certificate served is the one signed through the engine, over
    // the key manager's public key.
    let served = nginx.served_certificate(&cert);
    assert_eq!(public_key_of(served.as_bytes()), key_manager_public_key(&setup, "ec"));
    assert_eq!(public_key_of(served.as_bytes()), public_key_of(&std::fs::read(&cert).unwrap()));
    let (_, brief) = nginx.s_client(&cert, &["-brief", "-tls1_3"]);
    assert!(brief.contains("Signature type: ECDSA"), "{brief}");

    // A worker that dies (a signal the master did not send) is respawned
    // by the master, a fork of the process holding the engine's key: the
    // new worker signs too.
    let workers = nginx.workers();
    assert_eq!(workers.len(), 1, "one worker expected: {workers:?}");
    Nginx::signal(&workers[0], "TERM");
    assert!(
        wait_until(Duration::from_secs(10), || {
            let now = nginx.workers();
            now.len() == 1 && now != workers
        }),
        "no worker respawned:\n{}",
        nginx.error_log()
    );
    nginx.serves_both_versions(&cert);

    // A reload: the master reads its configuration and loads the key
    // again, then forks new workers.
    let before = nginx.workers();
    Nginx::signal(&nginx.master_pid().to_string(), "HUP");
    assert!(
        wait_until(Duration::from_secs(20), || {
            let now = nginx.workers();
            !now.is_empty() && now.iter().all(|w| !before.contains(w))
        }),
        "no new workers after the reload:\n{}",
        nginx.error_log()
    );
    nginx.serves_both_versions(&cert);
    nginx.logged_no_failure();
}

#[test]
fn nginx_serves_https_with_an_rsa_2048_key_held_in_the_key_manager() {
    let setup = setup_for_nginx();
    let cert = key_and_certificate(&setup, "rsa:2048", "web-rsa", "11");
    let nginx = Nginx::start(&setup, &cert, "web-rsa");
    // RSA-PSS (CKM_RSA_PKCS_PSS) in both versions with curl's defaults.
    nginx.serves_both_versions(&cert);

    let served = nginx.served_certificate(&cert);
    assert_eq!(public_key_of(served.as_bytes()), key_manager_public_key(&setup, "rsa"));

    let (_, brief) = nginx.s_client(&cert, &["-brief", "-tls1_3"]);
    assert!(brief.contains("Signature type: RSA-PSS"), "{brief}");
    // A TLS 1.2 client offering only PKCS #1 v1.5 signatures:
    // CKM_RSA_PKCS over a DigestInfo.
    let (stdout, brief) =
        nginx.s_client(&cert, &["-brief", "-tls1_2", "-sigalgs", "RSA+SHA256:RSA+SHA384"]);
    assert!(brief.contains("Protocol version: TLSv1.2"), "{brief}");
    assert!(brief.contains("Signature type: RSA\n"), "{brief}");
    assert!(brief.contains("Verification: OK"), "{brief}");
    assert!(stdout.ends_with(BODY), "{stdout}");
    nginx.logged_no_failure();
}
