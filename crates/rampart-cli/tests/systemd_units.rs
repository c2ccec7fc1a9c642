#![allow(clippy::unwrap_used)]
//! The systemd integration in packaging/: the units pass
//! `systemd-analyze verify` (with this build's binary in ExecStart=, since
//! /usr/bin/rampart exists only once the package is installed;
//! scripts/test-package verifies the installed units as they are), the
//! sysusers.d file creates the service user with `systemd-sysusers`, and
//! `rampart kms serve` and `rampart serve` send READY=1 over the
//! `$NOTIFY_SOCKET` datagram protocol that `Type=notify` waits for.

use crate::helpers::kms_support;

use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use kms_support::common::{describe, output_with, p, tool};
use kms_support::{free_port, ok, TempDir};

fn packaging() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packaging")
}

/// The unit `name` of packaging/systemd/, written to `dir` with ExecStart=
/// pointing at this build's binary.
fn unit_for_this_build(dir: &Path, name: &str) -> PathBuf {
    let text = std::fs::read_to_string(packaging().join("systemd").join(name)).unwrap();
    assert!(text.contains("ExecStart=/usr/bin/rampart "), "{name}: {text}");
    let text = text.replace("/usr/bin/rampart", kms_support::rampart_bin());
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn verify(unit: &Path) -> std::process::Output {
    let mut command = Command::new(tool("systemd-analyze"));
    // The man pages are installed by the package only (test-package
    // verifies the man: links).
    command.args(["verify", "--man=no", p(unit)]);
    output_with(command, None)
}

#[test]
fn units_pass_systemd_analyze_verify() {
    let tmp = TempDir::new("units");
    let kms = unit_for_this_build(tmp.path(), "rampart-kms.service");
    let out = verify(&kms);
    assert!(out.status.success(), "{}", describe("verify rampart-kms.service", &out));
    assert!(out.stderr.is_empty(), "{}", describe("verify rampart-kms.service", &out));

    unit_for_this_build(tmp.path(), "rampart-serve@.service");
    let instance = tmp.join("rampart-serve@data.service");
    let out = verify(&instance);
    assert!(out.status.success(), "{}", describe("verify rampart-serve@data.service", &out));
    assert!(out.stderr.is_empty(), "{}", describe("verify rampart-serve@data.service", &out));

    // verify does fail on a broken unit (the checks above mean something).
    let text = std::fs::read_to_string(&kms).unwrap().replace("Type=notify", "Type=notifyy");
    let broken = tmp.file("broken.service", text.as_bytes());
    let out = verify(&broken);
    assert!(!out.status.success() || !out.stderr.is_empty(), "{}", describe("broken", &out));

    // The hardening the units promise is there.
    let text = std::fs::read_to_string(packaging().join("systemd/rampart-kms.service")).unwrap();
    for line in [
        "Type=notify",
        "User=rampart",
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "PrivateTmp=yes",
        "MemoryDenyWriteExecute=yes",
        "LimitMEMLOCK=infinity",
        "StateDirectory=rampart/kms",
    ] {
        assert!(text.lines().any(|l| l == line), "rampart-kms.service lacks {line}");
    }
}

#[test]
fn sysusers_creates_the_service_user() {
    let tmp = TempDir::new("sysusers");
    std::fs::create_dir_all(tmp.join("etc")).unwrap();
    let mut command = Command::new(tool("systemd-sysusers"));
    command.arg(format!("--root={}", p(tmp.path())));
    command.arg(packaging().join("sysusers.d/rampart.conf"));
    let out = output_with(command, None);
    assert!(out.status.success(), "{}", describe("systemd-sysusers", &out));
    let passwd = std::fs::read_to_string(tmp.join("etc/passwd")).unwrap();
    let line =
        passwd.lines().find(|l| l.starts_with("rampart:")).unwrap_or_else(|| panic!("{passwd}"));
    let fields: Vec<&str> = line.split(':').collect();
    assert_eq!(fields[5], "/var/lib/rampart", "{line}");
    assert_eq!(fields[6], "/usr/sbin/nologin", "{line}");
    let uid: u32 = fields[2].parse().unwrap();
    assert!(uid < 1000, "a system user: {line}");
    let group = std::fs::read_to_string(tmp.join("etc/group")).unwrap();
    assert!(group.lines().any(|l| l.starts_with("rampart:")), "{group}");
}

/// A socket standing in for systemd's notification socket.
fn notify_socket(tmp: &TempDir) -> (UnixDatagram, PathBuf) {
    let path = tmp.join("notify");
    let socket = UnixDatagram::bind(&path).unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    (socket, path)
}

/// Waits for the READY=1 datagram of `child`; returns its lines.
fn wait_ready(socket: &UnixDatagram, child: &mut Child) -> Vec<String> {
    let mut buf = vec![0u8; 4096];
    let n = match socket.recv(&mut buf) {
        Ok(n) => n,
        Err(e) => {
            use std::io::Read;
            let _ = child.kill();
            let _ = child.wait();
            let mut said = String::new();
            if let Some(mut stderr) = child.stderr.take() {
                let _ = stderr.read_to_string(&mut said);
            }
            panic!("no readiness notification ({e}); the process said: {said}");
        }
    };
    let text = String::from_utf8(buf[..n].to_vec()).unwrap();
    let lines: Vec<String> = text.lines().map(str::to_owned).collect();
    assert!(lines.contains(&"READY=1".to_owned()), "{text}");
    assert!(lines.contains(&format!("MAINPID={}", child.id())), "{text}");
    lines
}

#[test]
fn kms_serve_notifies_readiness() {
    let tmp = TempDir::new("notify-kms");
    let dir = tmp.join("kms");
    let port = free_port();
    ok(&["kms", "init", "--data-dir", p(&dir), "--endpoint", &format!("127.0.0.1:{port}")]);
    let (socket, path) = notify_socket(&tmp);
    let mut child = Command::new(kms_support::rampart_bin())
        .args(["kms", "serve", "--data-dir", p(&dir), "--listen", &format!("127.0.0.1:{port}")])
        .env("NOTIFY_SOCKET", &path)
        .env("RAMPART_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = wait_ready(&socket, &mut child);
    assert!(
        lines.contains(&format!("STATUS=serving on https://127.0.0.1:{port} (unsealed)")),
        "{lines:?}"
    );
    // Ready means serving: a client gets an answer at once.
    let status = ok(&["kms", "status", "--kms", p(&dir.join("admin.bundle"))]);
    assert!(status.contains("\"sealed\": false"), "{status}");
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn nbd_serve_notifies_readiness_after_unlocking() {
    let tmp = TempDir::new("notify-serve");
    let vol = tmp.join("vol");
    let pass = tmp.file("pass", b"notify test passphrase");
    ok(&[
        "format",
        p(&vol),
        "--size",
        "20M",
        "--key-file",
        p(&pass),
        "-q",
        "--pbkdf",
        "pbkdf2",
        "--pbkdf-force-iterations",
        "1000",
    ]);
    let (socket, path) = notify_socket(&tmp);
    let nbd_socket = tmp.join("nbd.sock");
    let mut child = Command::new(kms_support::rampart_bin())
        .args(["serve", p(&vol), "--key-file", p(&pass), "--socket", p(&nbd_socket)])
        .env("NOTIFY_SOCKET", &path)
        .env("RAMPART_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = wait_ready(&socket, &mut child);
    assert!(lines.contains(&"STATUS=serving 1 export(s)".to_owned()), "{lines:?}");
    assert!(nbd_socket.exists(), "READY=1 before the socket listens");
    child.kill().unwrap();
    child.wait().unwrap();
}
