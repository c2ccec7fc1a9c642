#![allow(clippy::unwrap_used)]
//! Prometheus metrics, scraped over HTTP and parsed by the official
//! Python client library's parser (`prometheus_client`, which
//! `scripts/test` installs) as Prometheus reads them:
//! - `rampart serve --metrics-listen`: libnbd's nbdsh drives an exact mix of
//!   requests (writes, reads, flushes, a trim, a zero, a refused read) and
//!   nbdcopy bulk traffic; every counter, the latency histograms, the
//!   connection gauges and the TLS handshake counters must match.
//! - the key server's `/metrics` (mutual TLS, admin bundle): operations
//!   per client and per key after real wraps and unwraps, refusals
//!   included, and no series for a key name the store does not hold.

use crate::helpers::serve_support as support;

// Its TempDir is the same as support's, which is the one used here.
#[allow(unused_imports)]
use crate::helpers::kms_support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use support::*;

const SCRAPE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/helpers/prom_scrape.py");

/// One scrape, as prometheus_client parsed it.
struct Scrape {
    samples: Vec<serde_json::Value>,
    types: serde_json::Map<String, serde_json::Value>,
    raw: String,
}

impl Scrape {
    /// Scrapes `url`; with `tls`, presents (CA, certificate, key) PEM files.
    fn take(url: &str, tls: Option<&[PathBuf; 3]>) -> Self {
        let mut command = Command::new(tool("python3"));
        command.arg(SCRAPE).arg(url);
        if let Some(files) = tls {
            command.args(files);
        }
        let out = output_limited(command, Duration::from_secs(60));
        assert!(
            out.status.success(),
            "scraping {url} failed (scripts/test installs prometheus_client): {}",
            text(&out.stderr)
        );
        let raw = text(&out.stdout);
        let value: serde_json::Value = serde_json::from_str(&raw).unwrap();
        Self {
            samples: value["samples"].as_array().unwrap().clone(),
            types: value["types"].as_object().unwrap().clone(),
            raw,
        }
    }

    fn matching(&self, name: &str, labels: &[(&str, &str)]) -> Vec<&serde_json::Value> {
        self.samples
            .iter()
            .filter(|s| s["name"] == name)
            .filter(|s| labels.iter().all(|(k, v)| s["labels"][*k] == *v))
            .collect()
    }

    /// The value of the one sample `name` with (at least) `labels`.
    #[track_caller]
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        let found = self.matching(name, labels);
        assert_eq!(found.len(), 1, "{name}{labels:?}: {} samples in {}", found.len(), self.raw);
        found[0]["value"].as_f64().unwrap()
    }

    #[track_caller]
    fn family_type(&self, family: &str) -> &str {
        self.types.get(family).and_then(|t| t.as_str()).unwrap_or_else(|| {
            panic!("no metric family {family} in {}", self.raw);
        })
    }
}

const EXPORT: &str = "disk";

fn nbd_value(scrape: &Scrape, name: &str, kind: &str) -> f64 {
    scrape.value(name, &[("export", EXPORT), ("type", kind)])
}

/// Asserts requests, bytes and errors of one request type.
#[track_caller]
fn assert_type(scrape: &Scrape, kind: &str, requests: u64, bytes: u64, errors: u64) {
    let got = (
        nbd_value(scrape, "rampart_nbd_requests_total", kind) as u64,
        nbd_value(scrape, "rampart_nbd_request_bytes_total", kind) as u64,
        nbd_value(scrape, "rampart_nbd_request_errors_total", kind) as u64,
    );
    assert_eq!(got, (requests, bytes, errors), "{kind}: (requests, bytes, errors)");
    // Every answered request is in the histogram, in the +Inf bucket, with
    // cumulative buckets.
    let name = "rampart_nbd_request_duration_seconds";
    let count = nbd_value(scrape, &format!("{name}_count"), kind) as u64;
    assert_eq!(count, requests, "{kind}: histogram count");
    let buckets = scrape.matching(&format!("{name}_bucket"), &[("export", EXPORT), ("type", kind)]);
    assert_eq!(buckets.len(), 17, "{kind}: 16 bounds and +Inf");
    let counts: Vec<f64> = buckets.iter().map(|b| b["value"].as_f64().unwrap()).collect();
    assert!(counts.windows(2).all(|w| w[0] <= w[1]), "{kind}: buckets not cumulative: {counts:?}");
    assert_eq!(*counts.last().unwrap() as u64, requests);
    let sum = nbd_value(scrape, &format!("{name}_sum"), kind);
    assert!(sum >= 0.0 && (requests == 0 || sum > 0.0), "{kind}: sum {sum}");
}

#[test]
fn serve_metrics_match_the_traffic() {
    require(&["nbdsh", "nbdcopy", "python3"]);
    let dir = TempDir::new("prom-serve");
    let vol = make_volume(&dir, "vol", 16 * MIB);
    let key = key_file(&dir);
    let socket = dir.join("nbd.sock");
    let port = kms_support::free_port();
    let metrics = format!("http://127.0.0.1:{port}/metrics");
    let spec = format!("{}={EXPORT}", p(&vol));
    let listen = format!("127.0.0.1:{port}");
    let args = ["--key-file", p(&key), "--socket", p(&socket), "--metrics-listen", &listen];
    let mut serve = Serve::start(&[&[spec.as_str()][..], &args[..]].concat(), dir.join("log"), 1);
    let uri = unix_uri(&socket, EXPORT);

    let idle = Scrape::take(&metrics, None);
    assert_eq!(idle.family_type("rampart_nbd_request_duration_seconds"), "histogram");
    assert_eq!(idle.family_type("rampart_nbd_requests"), "counter");
    assert_eq!(idle.family_type("rampart_nbd_inflight_bytes"), "gauge");
    assert_type(&idle, "read", 0, 0, 0);
    assert_eq!(idle.value("rampart_nbd_export_up", &[("export", EXPORT)]), 1.0);
    assert_eq!(idle.value("rampart_nbd_open_connections", &[("export", EXPORT)]), 0.0);

    // An exact mix of requests on one connection.
    let script = r#"
h.set_strict_mode(0)
block = bytes(range(256)) * 256
for i in range(10):
    h.pwrite(block, i * 65536)
for i in range(5):
    h.pread(131072, i * 131072)
h.flush()
h.flush()
h.trim(1048576, 4194304)
h.zero(2097152, 8388608)
try:
    h.pread(4096, 16 * 1048576)
    print("read beyond the end succeeded")
except nbd.Error:
    print("refused")
"#;
    let mut command = nbdsh_command();
    command.args(["-u", &uri, "-c", script]);
    let out = output_limited(command, Duration::from_secs(60));
    assert!(out.status.success(), "nbdsh: {}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "refused");

    let after = Scrape::take(&metrics, None);
    assert_type(&after, "write", 10, 10 * 65536, 0);
    assert_type(&after, "read", 6, 5 * 131072, 1);
    assert_type(&after, "flush", 2, 0, 0);
    assert_type(&after, "trim", 1, MIB, 0);
    assert_type(&after, "write_zeroes", 1, 2 * MIB, 0);
    assert_type(&after, "cache", 0, 0, 0);
    assert_type(&after, "other", 0, 0, 0);
    assert_eq!(after.value("rampart_nbd_connections_total", &[("export", EXPORT)]), 1.0);
    assert_eq!(after.value("rampart_nbd_open_connections", &[("export", EXPORT)]), 0.0);
    assert_eq!(after.value("rampart_nbd_inflight_bytes", &[("export", EXPORT)]), 0.0);
    assert_eq!(after.value("rampart_nbd_accepted_connections_total", &[]), 1.0);

    // Bulk traffic from nbdcopy (several connections, large requests):
    // the bytes match exactly.
    let data = random_bytes(7, 4 * MIB as usize);
    let src = dir.file("src", &data);
    let copied = run_limited("nbdcopy", &[p(&src), &uri], Duration::from_secs(60));
    ok("nbdcopy to the export", copied);
    let back = dir.join("back");
    let copied = run_limited("nbdcopy", &[&uri, p(&back)], Duration::from_secs(60));
    ok("nbdcopy from the export", copied);
    assert_same("copied data", &std::fs::read(&back).unwrap()[..data.len()], &data);

    let bulk = Scrape::take(&metrics, None);
    let bytes = |kind| nbd_value(&bulk, "rampart_nbd_request_bytes_total", kind) as u64;
    assert_eq!(bytes("write"), 10 * 65536 + 4 * MIB, "nbdcopy's 4 MiB written");
    assert_eq!(bytes("read"), 5 * 131072 + 16 * MIB, "nbdcopy read the 16 MiB export");
    let requests = |kind| nbd_value(&bulk, "rampart_nbd_requests_total", kind) as u64;
    let count = |kind| nbd_value(&bulk, "rampart_nbd_request_duration_seconds_count", kind) as u64;
    for kind in ["read", "write", "flush"] {
        assert_eq!(count(kind), requests(kind), "{kind}: every request answered and timed");
    }
    assert!(requests("write") > 10, "nbdcopy wrote through the export");
    let total = bulk.value("rampart_nbd_connections_total", &[("export", EXPORT)]);
    assert!(total >= 3.0, "nbdsh and two nbdcopy runs: {total} connections");
    assert_eq!(bulk.value("rampart_nbd_open_connections", &[("export", EXPORT)]), 0.0);
    assert_eq!(bulk.value("rampart_nbd_inflight_bytes", &[("export", EXPORT)]), 0.0);

    // Anything but GET /metrics is refused; the server is unaffected.
    let curlish = |request: &str| -> String {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(&listen).unwrap();
        stream.write_all(request.as_bytes()).unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        answer
    };
    assert!(curlish("GET / HTTP/1.1\r\nHost: x\r\n\r\n").starts_with("HTTP/1.1 404"));
    assert!(curlish("POST /metrics HTTP/1.1\r\nHost: x\r\n\r\n").starts_with("HTTP/1.1 405"));
    let head = curlish("HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 200") && head.ends_with("\r\n\r\n"), "{head}");
    serve.assert_alive("scrapes");
    serve.stop();
}

#[test]
fn serve_metrics_count_tls_handshakes() {
    require(&["nbdinfo", "openssl", "python3"]);
    let dir = TempDir::new("prom-tls");
    let vol = make_volume(&dir, "vol", MIB);
    let key = key_file(&dir);
    // A CA and a server certificate for 127.0.0.1; the client directory
    // in libnbd's layout trusts the CA.
    let pki = dir.join("pki");
    std::fs::create_dir_all(&pki).unwrap();
    issue_certificate(&pki, "ca", "/CN=metrics test CA", None, CA_EXTENSIONS);
    issue_certificate(&pki, "server", "/CN=localhost", Some("ca"), SERVER_EXTENSIONS);
    let trusted = dir.join("trusted");
    std::fs::create_dir_all(&trusted).unwrap();
    std::fs::copy(pki.join("ca-cert.pem"), trusted.join("ca-cert.pem")).unwrap();

    let nbd_port = kms_support::free_port();
    let port = kms_support::free_port();
    let metrics = format!("http://127.0.0.1:{port}/metrics");
    let (listen, scrape_at) = (format!("127.0.0.1:{nbd_port}"), format!("127.0.0.1:{port}"));
    let spec = format!("{}={EXPORT}", p(&vol));
    let cert = pki.join("server-cert.pem");
    let server_key = pki.join("server-key.pem");
    let mut serve = Serve::start(
        &[
            &spec,
            "--key-file",
            p(&key),
            "--listen",
            &listen,
            "--tls-cert",
            p(&cert),
            "--tls-key",
            p(&server_key),
            "--metrics-listen",
            &scrape_at,
            // This machine's kernel has no `tls` module (serve_tls.rs):
            // every connection stays in user space, and is counted so.
            "--ktls",
        ],
        dir.join("log"),
        1,
    );
    let good = format!("nbds://127.0.0.1:{nbd_port}/{EXPORT}?tls-certificates={}", p(&trusted));
    for _ in 0..2 {
        ok("nbdinfo over TLS", run_limited("nbdinfo", &["--size", &good], Duration::from_secs(30)));
    }
    // A client that trusts another CA only aborts the handshake.
    issue_certificate(&pki, "other", "/CN=another CA", None, CA_EXTENSIONS);
    let untrusted = dir.join("untrusted");
    std::fs::create_dir_all(&untrusted).unwrap();
    std::fs::copy(pki.join("other-cert.pem"), untrusted.join("ca-cert.pem")).unwrap();
    let bad = format!("nbds://127.0.0.1:{nbd_port}/{EXPORT}?tls-certificates={}", p(&untrusted));
    let refused = run_limited("nbdinfo", &["--size", &bad], Duration::from_secs(30));
    assert!(!refused.status.success(), "a client distrusting the server got in");
    let scrape = Scrape::take(&metrics, None);
    // The client's alert reaches the server after it sent its flight:
    // wait for the failed handshake to be counted.
    let mut failed = scrape.value("rampart_nbd_tls_handshakes_total", &[("result", "failed")]);
    for _ in 0..50 {
        if failed >= 1.0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
        failed = Scrape::take(&metrics, None)
            .value("rampart_nbd_tls_handshakes_total", &[("result", "failed")]);
    }
    let scrape = Scrape::take(&metrics, None);
    assert_eq!(scrape.value("rampart_nbd_tls_handshakes_total", &[("result", "ok")]), 2.0);
    assert_eq!(failed, 1.0);
    assert_eq!(scrape.value("rampart_nbd_connections_total", &[("export", EXPORT)]), 2.0);
    let kernel_tls =
        |result| scrape.value("rampart_nbd_kernel_tls_sessions_total", &[("result", result)]);
    assert_eq!(kernel_tls("user_space"), 3.0);
    assert_eq!(kernel_tls("offloaded"), 0.0);
    serve.stop();
}

/// Writes a bundle's CA, certificate and key as PEM files.
fn pem_files(bundle: &Path, dir: &Path) -> [PathBuf; 3] {
    let bundle = rampart_kms::Bundle::read(bundle).unwrap();
    let files = [dir.join("admin-ca.pem"), dir.join("admin-cert.pem"), dir.join("admin-key.pem")];
    std::fs::write(&files[0], &bundle.ca_cert).unwrap();
    std::fs::write(&files[1], &bundle.cert).unwrap();
    rampart_kms::bundle::write_private_file(&files[2], bundle.key.expose()).unwrap();
    files
}

#[test]
fn key_server_metrics_count_operations_per_client_and_key() {
    require(&["python3"]);
    let tmp = TempDir::new("prom-kms");
    let data = tmp.join("kms");
    let port = kms_support::free_port();
    let endpoint = format!("127.0.0.1:{port}");
    kms_support::ok(&["kms", "init", "--data-dir", p(&data), "--endpoint", &endpoint]);
    let _server = kms_support::ServerProcess::start(&data, port, None);
    let admin = data.join("admin.bundle");
    let (eu, us) = (tmp.join("eu.bundle"), tmp.join("us.bundle"));
    kms_support::issue_client(p(&admin), "host-eu", "region=eu", p(&eu));
    kms_support::issue_client(p(&admin), "host-us", "region=us", p(&us));
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

    let wrapped =
        kms_support::rampart_in(&["kms", "key", "wrap", "disk", "--kms", p(&eu)], b"secret");
    assert!(wrapped.status.success(), "{}", text(&wrapped.stderr));
    let ciphertext = text(&wrapped.stdout).trim().to_owned();
    for _ in 0..3 {
        kms_support::ok(&["kms", "key", "unwrap", &ciphertext, "--kms", p(&eu)]);
    }
    let denied = kms_support::rampart(&["kms", "key", "unwrap", &ciphertext, "--kms", p(&us)]);
    assert!(!denied.status.success(), "host-us unwrapped a key of region eu");
    // A ciphertext naming a key the store does not hold: refused, and no
    // per-key series is made for that name.
    let ghost = ciphertext.replacen("rampart:v1:disk:", "rampart:v1:ghost-key:", 1);
    let missing = kms_support::rampart(&["kms", "key", "unwrap", &ghost, "--kms", p(&eu)]);
    assert!(!missing.status.success());

    let files = pem_files(&admin, tmp.path());
    let scrape = Scrape::take(&format!("https://{endpoint}/metrics"), Some(&files));
    let client = |name: &str, op: &str, outcome: &str| {
        scrape.value(
            "rampart_kms_client_operations_total",
            &[("client", name), ("operation", op), ("outcome", outcome)],
        )
    };
    let key = |op: &str, outcome: &str| {
        scrape.value(
            "rampart_kms_key_operations_total",
            &[("key", "disk"), ("operation", op), ("outcome", outcome)],
        )
    };
    assert_eq!(client("host-eu", "key.wrap", "ok"), 1.0);
    assert_eq!(client("host-eu", "key.unwrap", "ok"), 3.0);
    assert_eq!(client("host-eu", "key.unwrap", "invalid"), 1.0, "the unknown key: 404");
    assert_eq!(client("host-us", "key.unwrap", "denied"), 1.0);
    assert_eq!(client("admin", "key.create", "ok"), 1.0);
    assert_eq!(key("key.wrap", "ok"), 1.0);
    assert_eq!(key("key.unwrap", "ok"), 3.0);
    assert_eq!(key("key.unwrap", "denied"), 1.0);
    assert_eq!(key("key.create", "ok"), 1.0);
    assert!(
        scrape.matching("rampart_kms_key_operations_total", &[("key", "ghost-key")]).is_empty(),
        "a key name the store does not hold became a label:\n{}",
        scrape.raw
    );
    assert_eq!(scrape.family_type("rampart_kms_client_operations"), "counter");
    let unwraps = scrape
        .value("rampart_kms_requests_total", &[("operation", "key.unwrap"), ("outcome", "ok")]);
    assert_eq!(unwraps, 3.0);
}
