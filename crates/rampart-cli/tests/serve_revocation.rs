#![allow(clippy::unwrap_used)]
//! Keys pulled back from a serving host: `rampart serve` of volumes bound
//! to a real `rampart kms serve`, checking in every second
//! (`--heartbeat 1s`), with libnbd's nbdsh as the client.
//! - revoking the key closes its export within a heartbeat: the client's
//!   unflushed write is on disk, the client is disconnected, the other
//!   (passphrase) export keeps serving, the key server audits the refusal;
//! - revoking the client: its certificate is refused at the next TLS
//!   handshake, the export closes and serve exits non-zero;
//! - relabelling the client out of the key's allow rule closes it too;
//! - a key server that stops answering: serving goes on for `--grace`,
//!   then stops; back within the grace period, serving goes on silently.

use crate::helpers::serve_support as support;

// Its TempDir is the same as support's, which is the one used here.
#[allow(unused_imports)]
use crate::helpers::kms_support;

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use kms_support::ServerProcess;
use support::*;

const CHEAP_KDF: &[&str] = &["--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000"];

/// A key server with an admin bundle, host `host-a` (region=eu) and key
/// `disk` allowed for `label:region=eu`.
struct Deployment {
    tmp: TempDir,
    data: PathBuf,
    port: u16,
    server: Option<ServerProcess>,
    admin: PathBuf,
    host: PathBuf,
}

impl Deployment {
    fn start(tag: &str) -> Self {
        let tmp = TempDir::new(tag);
        let data = tmp.join("kms");
        let port = kms_support::free_port();
        let endpoint = format!("127.0.0.1:{port}");
        kms_support::ok(&["kms", "init", "--data-dir", p(&data), "--endpoint", &endpoint]);
        let server = ServerProcess::start(&data, port, None);
        let admin = data.join("admin.bundle");
        let host = tmp.join("host.bundle");
        kms_support::issue_client(p(&admin), "host-a", "region=eu", p(&host));
        kms_support::ok(&[
            "kms",
            "key",
            "create",
            "disk",
            "--allow",
            "label:region=eu",
            "--kms",
            p(&admin),
        ]);
        Self { tmp, data, port, server: Some(server), admin, host }
    }

    /// Formats a volume of 16 MiB of data; bound to key `disk` when asked.
    fn volume(&self, name: &str, bound: bool) -> PathBuf {
        let vol = self.tmp.join(name);
        let pass = key_file(&self.tmp);
        let mut args = vec!["format", p(&vol), "--size", "32M", "--key-file", p(&pass), "-q"];
        args.extend_from_slice(CHEAP_KDF);
        if bound {
            args.extend_from_slice(&["--key", "disk", "--kms", p(&self.host)]);
        }
        kms_support::ok(&args);
        vol
    }

    fn admin(&self, args: &[&str]) -> String {
        let mut all = args.to_vec();
        all.extend_from_slice(&["--kms", p(&self.admin)]);
        kms_support::ok(&all)
    }

    fn kill_server(&mut self) {
        if let Some(mut server) = self.server.take() {
            server.kill();
        }
    }

    fn restart_server(&mut self) {
        assert!(self.server.is_none());
        self.server = Some(ServerProcess::start(&self.data, self.port, None));
    }

    /// The audit entries, as JSON.
    fn audit(&self) -> Vec<serde_json::Value> {
        match kms_support::json_lines(self.admin(&["kms", "audit", "--json"])) {
            serde_json::Value::Array(entries) => entries,
            other => panic!("not a list: {other}"),
        }
    }

    /// Serves `exports` (VOL=NAME) on a Unix socket, checking in every
    /// second, with `extra` flags.
    fn serve(&self, exports: &[String], extra: &[&str]) -> (Serve, PathBuf) {
        let socket = self.tmp.join("nbd.sock");
        let pass = key_file(&self.tmp);
        let mut args: Vec<&str> = exports.iter().map(String::as_str).collect();
        args.extend_from_slice(&["--kms", p(&self.host), "--socket", p(&socket)]);
        args.extend_from_slice(&["--heartbeat", "1s", "--key-file", p(&pass)]);
        args.extend_from_slice(extra);
        let serve = Serve::start(&args, self.tmp.join("serve.log"), exports.len());
        (serve, socket)
    }
}

/// Whether a 4 KiB read of export `uri` succeeds.
fn readable(uri: &str) -> bool {
    let mut command = nbdsh_command();
    command.args(["-u", uri, "-c", "h.pread(4096, 0)"]);
    output_limited(command, Duration::from_secs(30)).status.success()
}

/// An nbdsh client that writes 1 MiB of `0x5a` at offset 0 without
/// flushing, touches `marker`, then reads every 50 ms until the server
/// disconnects it (printing "disconnected") or 60 s pass.
fn holder(uri: &str, marker: &Path) -> Child {
    let script = format!(
        r#"
import time
h.pwrite(b"\x5a" * 1048576, 0)
open({marker:?}, "w").close()
end = time.time() + 60
while time.time() < end:
    try:
        h.pread(4096, 0)
    except nbd.Error:
        print("disconnected", flush=True)
        break
    time.sleep(0.05)
else:
    print("still connected", flush=True)
"#,
        marker = marker.to_str().unwrap()
    );
    let mut command = nbdsh_command();
    command.args(["-u", uri, "-c", &script]).stdout(Stdio::piped()).stderr(Stdio::piped());
    let child = command.spawn().unwrap();
    assert!(
        kms_support::wait_until(Duration::from_secs(20), || marker.exists()),
        "the client did not write"
    );
    child
}

#[track_caller]
fn assert_disconnected(child: Child) {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = rx.recv_timeout(Duration::from_secs(30)).expect("the client was never disconnected");
    let out = out.unwrap();
    assert_eq!(text(&out.stdout).trim(), "disconnected", "{}", text(&out.stderr));
}

/// Waits up to `limit` for serve to exit; returns its status and how long it took.
fn exit_within(serve: &mut Serve, limit: Duration) -> (std::process::ExitStatus, Duration) {
    let start = Instant::now();
    loop {
        if let Some(status) = serve.try_wait() {
            return (status, start.elapsed());
        }
        assert!(
            start.elapsed() < limit,
            "rampart serve still runs after {limit:?}: {}",
            serve.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn heartbeats(d: &Deployment) -> Vec<serde_json::Value> {
    d.audit().into_iter().filter(|e| e["operation"] == "heartbeat").collect()
}

#[test]
fn revoked_key_closes_its_export_and_the_others_keep_serving() {
    require(&["nbdsh"]);
    let d = Deployment::start("revoke-key");
    let bound = d.volume("bound", true);
    let plain = d.volume("plain", false);
    let exports = [format!("{}=bound", p(&bound)), format!("{}=plain", p(&plain))];
    let (mut serve, socket) = d.serve(&exports, &[]);
    let (bound_uri, plain_uri) = (unix_uri(&socket, "bound"), unix_uri(&socket, "plain"));
    let client = holder(&bound_uri, &d.tmp.join("written"));

    // Heartbeats go through and are audited as allowed.
    assert!(kms_support::wait_until(Duration::from_secs(10), || {
        heartbeats(&d).iter().any(|e| e["outcome"] == "ok")
    }));
    serve.assert_alive("heartbeats");
    let ok = heartbeats(&d).into_iter().find(|e| e["outcome"] == "ok").unwrap();
    assert_eq!(ok["client"], "host-a");
    assert_eq!(ok["key"], "disk");
    assert!(ok["detail"].as_str().unwrap().contains("disk:1 allowed"), "{ok}");

    let revoked_at = Instant::now();
    d.admin(&["kms", "key", "revoke", "disk", "--reason", "laptop stolen"]);
    assert_disconnected(client);
    assert!(
        revoked_at.elapsed() < Duration::from_secs(4),
        "the export closed {:?} after the revocation (heartbeat 1 s)",
        revoked_at.elapsed()
    );
    assert!(kms_support::wait_until(Duration::from_secs(5), || serve.log().contains("wiped")));
    let log = serve.log();
    assert!(log.contains("closing export 'bound'") && log.contains("laptop stolen"), "{log}");
    assert!(log.contains("export 'bound' closed: pending writes flushed"), "{log}");

    // The other export is untouched; the closed one is gone.
    serve.assert_alive("closing one export");
    assert!(readable(&plain_uri), "the passphrase export stopped serving");
    assert!(!readable(&bound_uri), "the revoked export still serves");

    // The server audited the refusal.
    let refused: Vec<_> =
        heartbeats(&d).into_iter().filter(|e| e["outcome"] == "denied").collect::<Vec<_>>();
    let detail: Vec<String> = refused.iter().map(|e| e["detail"].to_string()).collect();
    assert!(
        detail.iter().any(|d| d.contains("disk:1 refused") && d.contains("laptop stolen")),
        "no refused heartbeat in the audit log: {detail:?}"
    );

    let log = serve.stop();
    assert!(!log.contains("panicked"));
    // The write the client never flushed was flushed on closing.
    let pass = key_file(&d.tmp);
    let data = export_range(&bound, &pass, 0, MIB);
    assert!(data.iter().all(|&b| b == 0x5a), "the unflushed write was lost");
}

#[test]
fn revoked_client_is_refused_at_handshake_and_serve_exits() {
    require(&["nbdsh"]);
    let d = Deployment::start("revoke-client");
    let bound = d.volume("bound", true);
    let (mut serve, socket) = d.serve(&[format!("{}=bound", p(&bound))], &["--token-only"]);
    let client = holder(&unix_uri(&socket, "bound"), &d.tmp.join("written"));

    let printed =
        d.admin(&["kms", "client", "revoke", "host-a", "--reason", "host decommissioned"]);
    assert!(printed.contains("client host-a revoked"), "{printed}");
    assert_disconnected(client);
    let (status, _) = exit_within(&mut serve, Duration::from_secs(10));
    assert_eq!(status.code(), Some(1), "no export left: exit 1: {}", serve.log());
    let log = serve.log();
    assert!(log.contains("every export was closed"), "{log}");
    assert!(log.contains("closing export 'bound'"), "{log}");
    assert!(!log.contains("panicked"), "{log}");

    // Every later TLS handshake with the client's certificate is refused.
    let refused =
        kms_support::rampart(&["unlock", p(&bound), "--print-passphrase", "--kms", p(&d.host)]);
    assert!(!refused.status.success());
    let err = text(&refused.stderr);
    assert!(err.contains("CertificateRevoked"), "{err}");
    let audit = d.audit();
    assert!(audit.iter().any(|e| e["operation"] == "client.revoke"
        && e["outcome"] == "ok"
        && e["client"] == "admin"));
    assert!(
        audit.iter().any(|e| e["operation"] == "tls.handshake"
            && e["outcome"] == "denied"
            && e["detail"].as_str().unwrap().contains("Revoked")),
        "no refused handshake audited: {audit:?}"
    );
    let listed = kms_support::json_lines(d.admin(&["kms", "client", "list", "--json"]));
    let host = listed.as_array().unwrap().iter().find(|c| c["name"] == "host-a").unwrap();
    assert_eq!(host["revoked"]["reason"], "host decommissioned");
}

#[test]
fn client_relabelled_out_of_the_allow_rule_loses_its_exports() {
    require(&["nbdsh"]);
    let d = Deployment::start("relabel");
    let bound = d.volume("bound", true);
    let (mut serve, socket) = d.serve(&[format!("{}=bound", p(&bound))], &["--token-only"]);
    assert!(readable(&unix_uri(&socket, "bound")));
    d.admin(&["kms", "client", "relabel", "host-a", "--labels", "region=us"]);
    let (status, took) = exit_within(&mut serve, Duration::from_secs(10));
    assert_eq!(status.code(), Some(1), "{}", serve.log());
    assert!(took < Duration::from_secs(5), "closed {took:?} after the relabelling");
    let log = serve.log();
    assert!(log.contains("no longer allowed to use key disk"), "{log}");
    assert!(heartbeats(&d).iter().any(|e| e["outcome"] == "denied"
        && e["detail"].as_str().unwrap().contains("refused (client host-a is no longer allowed")));
}

#[test]
fn unreachable_key_server_stops_serving_after_the_grace_period() {
    require(&["nbdsh"]);
    let mut d = Deployment::start("grace-expires");
    let bound = d.volume("bound", true);
    let (mut serve, socket) =
        d.serve(&[format!("{}=bound", p(&bound))], &["--token-only", "--grace", "3s"]);
    let uri = unix_uri(&socket, "bound");
    assert!(readable(&uri));
    let killed = Instant::now();
    d.kill_server();
    std::thread::sleep(Duration::from_millis(1500));
    serve.assert_alive("1.5 s without a key server");
    assert!(readable(&uri), "stopped serving before the grace period ended");
    let (status, _) = exit_within(&mut serve, Duration::from_secs(15));
    let after = killed.elapsed();
    assert_eq!(status.code(), Some(1), "{}", serve.log());
    assert!(after >= Duration::from_secs(3), "stopped {after:?} after the key server died");
    assert!(after < Duration::from_secs(10), "stopped only {after:?} after the key server died");
    let log = serve.log();
    assert!(log.contains("no key server answered the heartbeat"), "{log}");
    assert!(log.contains("(--grace 3s)"), "{log}");
}

#[test]
fn key_server_back_within_the_grace_period_resumes_silently() {
    require(&["nbdsh"]);
    let mut d = Deployment::start("grace-resumes");
    let bound = d.volume("bound", true);
    let (mut serve, socket) =
        d.serve(&[format!("{}=bound", p(&bound))], &["--token-only", "--grace", "1m"]);
    let uri = unix_uri(&socket, "bound");
    d.kill_server();
    assert!(kms_support::wait_until(Duration::from_secs(10), || {
        serve.log().contains("no key server answered the heartbeat")
    }));
    std::thread::sleep(Duration::from_secs(2));
    serve.assert_alive("3 s without a key server, 1 min of grace");
    assert!(readable(&uri));
    d.restart_server();
    assert!(
        kms_support::wait_until(Duration::from_secs(10), || serve.log().contains("answered again")),
        "{}",
        serve.log()
    );
    serve.assert_alive("the key server's return");
    assert!(readable(&uri));
    // The heartbeat works end to end again: a revocation now still closes.
    d.admin(&["kms", "key", "revoke", "disk", "--reason", "after the outage"]);
    let (status, _) = exit_within(&mut serve, Duration::from_secs(10));
    assert_eq!(status.code(), Some(1));
    assert!(serve.log().contains("after the outage"));
}
