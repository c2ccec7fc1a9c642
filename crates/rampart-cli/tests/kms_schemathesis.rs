#![allow(clippy::unwrap_used)]
//! The key server's OpenAPI document, exercised by schemathesis (PyPI;
//! `scripts/test` installs it) against a real `rampart kms serve` on
//! SQLite: every operation the document describes, generated positive and
//! negative requests, and stateful sequences along the inferred links,
//! with the client certificates of an admin and of a plain host. No
//! response may be a 5xx, and every response must conform to the document
//! (status codes, content types, headers, schemas), reject schema-invalid
//! requests, and answer unsupported methods properly.
//!
//! Two checks are narrowed, for reasons the document cannot express
//! (`negative_data_rejection` also accepts 413 for bodies over the limit,
//! and `positive_data_acceptance` 410 for versions the run destroyed):
//! - `positive_data_acceptance` is off for `/v1/clients`, `/v1/sys/unseal`,
//!   `/v1/keys/{name}/unwrap` and `/v1/clients/{name}/labels`: a
//!   schema-valid string is not a parseable CSR, a Shamir share of this
//!   deployment, or a ciphertext that authenticates, and label keys are
//!   object property names, whose pattern OpenAPI 3.0 cannot state
//!   (`propertyNames` came later); those are rightly refused with 400.
//!   It is off for the lists (`GET /v1/keys`, `/v1/audit`, and
//!   `/v1/clients` above) too: a schema-valid `cursor` string is not a
//!   cursor this deployment issued and authenticated, and is rightly
//!   refused with 400.
//!   It is off for the key-pair and certificate operations too: a
//!   schema-valid `certificate` string is not an X.509 certificate, a
//!   schema-valid sign, verify or public-key request may name a key of
//!   another type (a symmetric key signs nothing) or a digest not of the
//!   algorithm's hash length, and a key pair's name must leave room for
//!   its public key's `.pub` (124 of the 128 characters), which a schema
//!   without conditionals cannot state for `POST /v1/keys`; all are
//!   rightly refused with 400.
//! - `POST /v1/keys` gets 12 generated examples instead of 60: each RSA
//!   pair it makes (up to 4096 bits) takes up to a second or more to
//!   generate, and 60 of them would take most of the run's time bound.
//! - `ensure_resource_availability` is off for revoke, destroy and export
//!   of `/v1/keys/{name}`: their bodies may name a version, and a key just
//!   created has only version 1, so a generated version is rightly 404.
//!
//! A missing python3 or schemathesis fails the test (it never skips).

use crate::helpers::kms_support as support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rampart_kms::Bundle;
use support::{free_port, issue_client, ok, ServerProcess, TempDir};

/// The supported schemathesis major version (as `scripts/test` pins it).
const SCHEMATHESIS_MAJOR: &str = "4.";
/// Generous bound for one run; both runs together take well under a
/// minute on this project's 2-core machine.
const RUN_LIMIT: Duration = Duration::from_secs(150);

const CONFIG: &str = r#"
[checks.negative_data_rejection]
# 413: a body over the server's 256 KiB limit is rightly refused as such.
expected-statuses = [400, 401, 403, 404, 405, 406, 409, 413, 415, 422]

[checks.positive_data_acceptance]
# 410: a valid request for a key version that the run destroyed earlier.
expected-statuses = ["2xx", "3xx", 401, 403, 404, 409, 410, 429, "5xx"]  # 5xx: not_a_server_error reports those

[[operations]]
include-path-regex = '^/v1/(clients|sys/unseal|keys/\{name\}/unwrap|clients/\{name\}/labels)$'
checks.positive_data_acceptance.enabled = false

[[operations]]
include-path-regex = '^/v1/(keys|audit)$'
include-method = ["GET"]
checks.positive_data_acceptance.enabled = false

[[operations]]
include-path-regex = '^/v1/(certificates|keys/\{name\}/(sign|verify|public)|certificates/\{name\})$'
checks.positive_data_acceptance.enabled = false

[[operations]]
include-path-regex = '^/v1/keys$'
include-method = ["POST"]
checks.positive_data_acceptance.enabled = false
# An RSA-4096 pair takes over a second to generate: fewer creations.
generation.max-examples = 12

[[operations]]
include-path-regex = '^/v1/keys/\{name\}/(revoke|destroy|export)$'
checks.ensure_resource_availability.enabled = false
"#;

/// Writes a bundle's CA, certificate and key as PEM files (the key 0600);
/// returns their paths.
fn pem_files(bundle: &Bundle, dir: &Path, tag: &str) -> [String; 3] {
    let ca = dir.join(format!("{tag}-ca.pem"));
    let cert = dir.join(format!("{tag}-cert.pem"));
    let key = dir.join(format!("{tag}-key.pem"));
    std::fs::write(&ca, &bundle.ca_cert).unwrap();
    std::fs::write(&cert, &bundle.cert).unwrap();
    rampart_kms::bundle::write_private_file(&key, bundle.key.expose()).unwrap();
    [ca, cert, key].map(|p| p.display().to_string())
}

fn schemathesis() -> Command {
    let mut command = Command::new("python3");
    command.args(["-m", "schemathesis.cli"]);
    command
}

fn check_installed() {
    let out = schemathesis().arg("--version").output().unwrap_or_else(|e| {
        panic!("python3 is needed to run schemathesis ({e}); scripts/test installs it")
    });
    let version = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "schemathesis is not installed (python3 -m pip install 'schemathesis>=4,<5', as scripts/test does): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let number = version.rsplit("version ").next().unwrap_or("").trim().to_owned();
    assert!(number.starts_with(SCHEMATHESIS_MAJOR), "unsupported schemathesis {version:?}");
    eprintln!("schemathesis {number}");
}

/// Runs schemathesis as the client whose PEM files are given; returns its
/// report. Panics on a failure, an error, or a run over [`RUN_LIMIT`].
fn run(dir: &Path, url: &str, pems: &[String; 3], examples: u32, seed: &str) -> String {
    let [ca, cert, key] = pems;
    let config = dir.join("schemathesis.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let report = dir.join(format!("schemathesis-{}.txt", examples));
    let mut child = schemathesis()
        .args(["--config-file", &config.display().to_string(), "run"])
        .arg(format!("{url}/v1/openapi.json"))
        .args(["--request-cert", cert, "--request-cert-key", key, "--tls-verify", ca])
        .args(["--max-examples", &examples.to_string(), "--seed", seed])
        // One worker: Python 3.11's ast module is not thread-safe, and
        // hypothesis parses source while describing strategies.
        .args(["--workers", "1", "--continue-on-failure", "--no-color"])
        .args(["--request-timeout", "10", "--wait-for-schema", "10"])
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env("SCHEMATHESIS_TELEMETRY", "false")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&report).unwrap())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > RUN_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "schemathesis ran over {RUN_LIMIT:?}:\n{}",
                std::fs::read_to_string(&report).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let text = std::fs::read_to_string(&report).unwrap();
    eprintln!("schemathesis finished in {:.1} s", start.elapsed().as_secs_f64());
    assert!(status.success(), "schemathesis reported problems ({status}):\n{text}");
    let count = |label: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(label))
            .and_then(|rest| rest.trim().split('/').next().map(str::to_owned))
            .unwrap_or_default()
    };
    let (selected, tested) = (count("Selected:"), count("Tested:"));
    assert!(
        !selected.is_empty() && selected == tested,
        "not every operation was tested ({tested} of {selected}):\n{text}"
    );
    let summary = text.lines().rev().find(|l| l.contains("generated")).unwrap_or("");
    assert!(
        summary.contains("passed") && !summary.contains("fail") && !summary.contains("error"),
        "{summary}\n{text}"
    );
    text
}

#[test]
fn schemathesis_finds_no_server_error_or_nonconformance() {
    check_installed();
    let tmp = TempDir::new("kms-schemathesis");
    let dir = tmp.join("data");
    let port = free_port();
    ok(&[
        "kms",
        "init",
        "--data-dir",
        &dir.display().to_string(),
        "--endpoint",
        &format!("127.0.0.1:{port}"),
    ]);
    let mut server = ServerProcess::start(&dir, port, None);
    let admin = dir.join("admin.bundle").display().to_string();
    let host = tmp.join("host.bundle").display().to_string();
    // Keys the generated requests can reach, and a plain host client.
    ok(&["kms", "key", "create", "disk", "--allow", "label:role=host", "--kms", &admin]);
    ok(&[
        "kms",
        "key",
        "create",
        "raw",
        "--allow",
        "client:admin",
        "--allow",
        "client:host",
        "--exportable",
        "--kms",
        &admin,
    ]);
    issue_client(&admin, "host", "role=host", &host);
    let seed = std::env::var("RAMPART_SCHEMATHESIS_SEED").unwrap_or_else(|_| "5".into());

    let admin_pems = pem_files(&Bundle::read(Path::new(&admin)).unwrap(), tmp.path(), "admin");
    let report = run(tmp.path(), &server.url, &admin_pems, 60, &seed);
    assert!(report.contains("Stateful"), "{report}");
    // The admin run may have revoked or relabelled `host` (its name is in
    // the client list the stateful phase reads): the host run uses a
    // client issued after it.
    let host = tmp.join("host-after.bundle").display().to_string();
    issue_client(&admin, "host-after", "role=host", &host);
    let host_pems = pem_files(&Bundle::read(Path::new(&host)).unwrap(), tmp.path(), "host");
    run(tmp.path(), &server.url, &host_pems, 20, &seed);

    // The server survived it all, still serves, and its audit chain (every
    // generated request is in it) is intact. (The admin run may have
    // revoked or destroyed the keys made above: a new one.)
    assert!(server.child.try_wait().unwrap().is_none(), "the server died under schemathesis");
    ok(&["kms", "key", "create", "after", "--allow", "client:host-after", "--kms", &admin]);
    let ciphertext =
        support::rampart_in(&["kms", "key", "wrap", "after", "--kms", &host], b"still");
    assert!(ciphertext.status.success());
    let ciphertext = String::from_utf8(ciphertext.stdout).unwrap();
    let plain = ok(&["kms", "key", "unwrap", ciphertext.trim(), "--kms", &host]);
    assert_eq!(plain, "still");
    let verify = ok(&["kms", "audit", "verify", "--kms", &admin]);
    assert!(verify.contains("intact"), "{verify}");
    let entries: usize = verify
        .split_whitespace()
        .skip_while(|w| *w != "intact:")
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!(entries > 500, "too few requests reached the server: {verify}");
    server.kill();
}
