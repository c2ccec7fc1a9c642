//! The audit log over years, end to end on in-process servers with real
//! TLS and a real store, each scenario on SQLite and on PostgreSQL (a
//! fresh database in `$RAMPART_TEST_PG_URL`'s cluster, or a throwaway
//! cluster from scripts/pg-test-cluster outside CI): verified checkpoints
//! and verification from them, export / prune / verify of archives,
//! tampering inside archives and checkpoints, the file and syslog sinks,
//! and which requests are chained.

use crate::common;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{fast, Backend, StoreDeployment, TempDir};
use rampart_kms::audit::{verify_export, ExportedEntry, VerifyReport};
use rampart_kms::client::{AuditUntil, KmsClient};
use rampart_kms::deployment::{archive, files, AdminError};
use rampart_kms::keys::RootKey;
use rampart_kms::model::{HeldKey, Labels};
use rampart_kms::server::{AuditOptions, SinkOptions};

/// A deployment of the tests below: the shared one, with their helpers.
struct Deployment(StoreDeployment);

impl std::ops::Deref for Deployment {
    type Target = StoreDeployment;

    fn deref(&self) -> &StoreDeployment {
        &self.0
    }
}

/// Checkpoints only when a test asks ([`Server::checkpoint_audit`]).
fn manual_checkpoints() -> AuditOptions {
    AuditOptions {
        checkpoint_entries: 0,
        checkpoint_interval: Duration::from_secs(3600),
        sinks: SinkOptions::default(),
    }
}

impl Deployment {
    async fn on(backend: Backend, tag: &str, audit: AuditOptions) -> Self {
        Self(StoreDeployment::start(backend, tag, None, |o| o.audit = audit).await)
    }

    fn admin(&self) -> KmsClient {
        KmsClient::with_policy(&self.admin, fast()).unwrap()
    }

    async fn issue(&self, name: &str, labels: &str) -> KmsClient {
        let bundle = self
            .admin()
            .issue_client(
                name,
                &Labels::parse_list(labels).unwrap(),
                false,
                Some(7),
                self.admin.endpoints.clone(),
            )
            .await
            .unwrap();
        KmsClient::with_policy(&bundle, fast()).unwrap()
    }

    /// Every stored entry, in order.
    async fn entries(&self) -> Vec<rampart_kms::model::AuditEntry> {
        self.store.audit_page(0, None, 1_000_000).await.unwrap()
    }

    async fn count(&self) -> usize {
        self.entries().await.len()
    }

    async fn export(&self, until: u64) -> (Vec<u8>, rampart_kms::client::AuditExportSummary) {
        let mut bytes = Vec::new();
        let summary = self.admin().audit_export(AuditUntil::Seq(until), &mut bytes).await.unwrap();
        (bytes, summary)
    }
}

/// A key `k` for client `h`, and `n` wrap/unwrap pairs by it (chained).
async fn traffic(host: &KmsClient, n: usize) {
    for _ in 0..n {
        let c = host.wrap("k", b"secret", b"").await.unwrap();
        host.unwrap(&c, b"").await.unwrap();
    }
}

fn check(bytes: &[u8], root: Option<&RootKey>, anchor: Option<&str>) -> VerifyReport {
    verify_export(bytes, root, anchor).unwrap()
}

fn lines(bytes: &[u8]) -> Vec<Vec<u8>> {
    bytes.split_inclusive(|b| *b == b'\n').map(<[u8]>::to_vec).collect()
}

fn api_code<T: std::fmt::Debug>(result: Result<T, rampart_kms::client::ClientError>) -> String {
    result.unwrap_err().code().unwrap_or("none").to_owned()
}

on_each_store!(export_prune_and_verify_round_trip);

async fn export_prune_and_verify_round_trip(backend: Backend) {
    let d = Deployment::on(backend, "roundtrip", manual_checkpoints()).await;
    let root = d.root();
    let admin = d.admin();
    admin.create_key("k", &["client:h".into()], false).await.unwrap();
    let host = d.issue("h", "").await;
    traffic(&host, 10).await;
    let cp = d.server.checkpoint_audit().await.unwrap().expect("a checkpoint");
    assert!(cp.seq >= 22, "{cp:?}");
    traffic(&host, 3).await;

    let full = admin.audit_verify().await.unwrap();
    assert!(full.ok && full.start == "genesis" && full.start_seq == 0, "{full:?}");
    let incremental = admin.audit_verify_from_checkpoint().await.unwrap();
    assert!(incremental.ok, "{incremental:?}");
    assert_eq!((incremental.start.as_str(), incremental.start_seq), ("checkpoint", cp.seq));
    assert_eq!(incremental.start_hash, cp.hash);
    assert!(incremental.entries < full.entries && incremental.entries >= 6, "{incremental:?}");

    // Pruning needs an export that covers the entries first.
    let until = 15;
    let refused = admin.audit_prune(until).await;
    assert_eq!(api_code(refused), "conflict");
    let (archive, summary) = d.export(until).await;
    assert_eq!((summary.anchor_seq, summary.until_seq, summary.entries), (0, until, until));
    // Not recorded yet: still refused.
    assert_eq!(api_code(admin.audit_prune(until).await), "conflict");
    admin.audit_exported(0, until, &summary.until_hash).await.unwrap();
    // A record that does not match the log is refused.
    assert_eq!(api_code(admin.audit_exported(0, until, &"00".repeat(32)).await), "conflict");

    // The archive verifies offline: hash links always, MACs with the key.
    let offline = check(&archive, None, None);
    assert!(offline.ok && !offline.macs_checked, "{offline:?}");
    assert_eq!((offline.entries, offline.head_seq), (until, until));
    assert_eq!(offline.head_hash, summary.until_hash);
    let with_key = check(&archive, Some(&root), Some(&"00".repeat(32)));
    assert!(with_key.ok && with_key.macs_checked && with_key.unauthenticated == 0, "{with_key:?}");
    // Every line carries the fields that recompute the chain.
    let first: ExportedEntry = serde_json::from_slice(&lines(&archive)[1]).unwrap();
    assert_eq!((first.seq, first.prev_hash.as_str()), (1, "00".repeat(32).as_str()));
    assert!(first.mac.is_some());

    let pruned = admin.audit_prune(until).await.unwrap();
    assert_eq!((pruned.removed, pruned.anchor.seq), (until, until));
    assert_eq!(pruned.anchor.hash, summary.until_hash);
    assert_eq!(d.entries().await[0].seq, until + 1);
    // Pruned entries cannot be pruned or exported again.
    assert_eq!(api_code(admin.audit_prune(until).await), "conflict");

    // What remains verifies, in full (from the anchor) and from the checkpoint.
    let full = admin.audit_verify().await.unwrap();
    assert!(full.ok, "{full:?}");
    assert_eq!((full.start.as_str(), full.start_seq), ("anchor", until));
    let incremental = admin.audit_verify_from_checkpoint().await.unwrap();
    assert!(incremental.ok && incremental.start == "checkpoint", "{incremental:?}");

    // The next archive starts where the first ended: they chain.
    let head = full.head_seq;
    let (second, summary2) = d.export(head).await;
    assert_eq!(
        (summary2.anchor_seq, summary2.anchor_hash.as_str()),
        (until, offline.head_hash.as_str())
    );
    let report = check(&second, Some(&root), Some(&offline.head_hash));
    assert!(report.ok && report.head_seq == head, "{report:?}");
    // ... and another anchor is refused.
    let report = check(&second, None, Some(&"11".repeat(32)));
    assert!(!report.ok && report.problem.as_deref().unwrap().contains("expected"), "{report:?}");
    admin.audit_exported(until, head, &summary2.until_hash).await.unwrap();

    // Pruning past the checkpoint: verification from it falls back to
    // the anchor, and both still pass.
    let pruned = admin.audit_prune(cp.seq + 2).await.unwrap();
    assert_eq!(pruned.anchor.seq, cp.seq + 2);
    let incremental = admin.audit_verify_from_checkpoint().await.unwrap();
    assert!(incremental.ok && incremental.start == "anchor", "{incremental:?}");
    assert_eq!(incremental.start_seq, cp.seq + 2);
    assert!(admin.audit_verify().await.unwrap().ok);
    // New checkpoints follow the anchor; appends continue the chain.
    let cp2 = d.server.checkpoint_audit().await.unwrap().expect("a checkpoint");
    traffic(&host, 2).await;
    let incremental = admin.audit_verify_from_checkpoint().await.unwrap();
    assert!(incremental.ok && incremental.start_seq == cp2.seq, "{incremental:?}");

    // Tampering with what remains is still caught, in full and from the
    // checkpoint when after it.
    d.drop_audit_guard();
    let victim = cp2.seq + 2;
    d.sql(&format!("UPDATE kms_audit SET detail = 'nothing to see' WHERE seq = {victim}")).unwrap();
    let report = admin.audit_verify().await.unwrap();
    assert_eq!(report.first_bad_seq, Some(victim), "{report:?}");
    let report = admin.audit_verify_from_checkpoint().await.unwrap();
    assert_eq!(report.first_bad_seq, Some(victim), "{report:?}");
    // A rewritten anchor is refused: its MAC does not match.
    d.sql(&format!(
        "UPDATE kms_audit_anchor SET seq = {}, hash = '{}'",
        pruned.anchor.seq - 1,
        summary.until_hash
    ))
    .unwrap();
    let report = admin.audit_verify().await.unwrap();
    assert!(!report.ok, "{report:?}");
    assert!(report.problem.as_deref().unwrap().contains("anchor"), "{report:?}");
}

on_each_store!(an_archive_file_is_written_whole_recorded_and_never_overwritten);

/// `deployment::archive`: the export lands in its file (no `.partial`
/// left), is recorded so that a prune may rely on it, is never written
/// over, and verifies offline from the file, MACs too with the unseal
/// key file.
async fn an_archive_file_is_written_whole_recorded_and_never_overwritten(backend: Backend) {
    let d = Deployment::on(backend, "archive_file", manual_checkpoints()).await;
    let admin = d.admin();
    admin.create_key("k", &["client:h".into()], false).await.unwrap();
    let host = d.issue("h", "").await;
    traffic(&host, 4).await;
    let until = 6;
    assert_eq!(api_code(admin.audit_prune(until).await), "conflict");

    let out = d.dir.path().join("a1.jsonl");
    let seq = archive::parse_until(&until.to_string()).unwrap();
    assert_eq!(seq, AuditUntil::Seq(until));
    let summary = archive::export(&admin, seq, &out).await.unwrap();
    assert_eq!((summary.anchor_seq, summary.until_seq, summary.entries), (0, until, until));
    assert!(!d.dir.path().join("a1.jsonl.partial").exists());
    let written = std::fs::read(&out).unwrap();
    assert_eq!(lines(&written).len(), 1 + 6);
    let again = archive::export(&admin, AuditUntil::Seq(until + 1), &out).await.unwrap_err();
    assert!(matches!(again, AdminError::Usage(_)), "{again:?}");
    assert!(again
        .to_string()
        .ends_with("exists: an archive is never overwritten; choose another name"));
    assert_eq!(std::fs::read(&out).unwrap(), written);
    // Recorded: the prune it covers is allowed.
    assert_eq!(admin.audit_prune(until).await.unwrap().removed, until);

    let key_file = d.data_dir().join(files::UNSEAL_KEY);
    let report = archive::verify_file(&out, Some(&key_file), None).unwrap();
    assert!(report.ok && report.macs_checked && report.head_seq == until, "{report:?}");
    assert_eq!(report.head_hash, summary.until_hash);
    let report = archive::verify_file(&out, None, Some(&"11".repeat(32))).unwrap();
    assert!(!report.ok && !report.macs_checked, "{report:?}");
    let missing = archive::verify_file(&d.dir.path().join("none.jsonl"), None, None).unwrap_err();
    assert!(missing.to_string().starts_with("cannot open "), "{missing}");

    let time = archive::parse_until("2999-01-01T00:00:00Z").unwrap();
    assert!(matches!(time, AuditUntil::TimeMs(ms) if ms > 0), "{time:?}");
    let huge = archive::parse_until("99999999999999999999999").unwrap_err();
    assert_eq!(huge.to_string(), "--until 99999999999999999999999 is out of range");
}

on_each_store!(tampering_inside_an_archive_is_caught_with_the_entry_number);

async fn tampering_inside_an_archive_is_caught_with_the_entry_number(backend: Backend) {
    let d = Deployment::on(backend, "tamper", manual_checkpoints()).await;
    let root = d.root();
    d.admin().create_key("k", &["client:h".into()], false).await.unwrap();
    let host = d.issue("h", "").await;
    traffic(&host, 6).await;
    let (archive, summary) = d.export(12).await;
    assert!(check(&archive, Some(&root), None).ok);
    let original = lines(&archive);
    assert_eq!(original.len(), 13, "a header and 12 entries");
    let join = |ls: &[Vec<u8>]| ls.concat();
    let failed_at = |bytes: &[u8], root: Option<&RootKey>| {
        let report = check(bytes, root, None);
        assert!(!report.ok, "tampering was not caught: {report:?}");
        let problem = report.problem.clone().unwrap();
        (report.first_bad_seq.unwrap(), problem)
    };

    // A flipped byte in entry 5's client name (still valid JSON).
    let mut flipped = original.clone();
    let at = find(&flipped[5], b"\"client\":\"") + 10;
    flipped[5][at] ^= 0x01;
    let (seq, problem) = failed_at(&join(&flipped), None);
    assert_eq!(seq, 5, "{problem}");
    assert!(problem.contains("entry 5"), "{problem}");
    // A flipped byte in entry 7's hash.
    let mut flipped = original.clone();
    let at = find(&flipped[7], b"\"hash\":\"") + 9;
    flipped[7][at] = if flipped[7][at] == b'0' { b'1' } else { b'0' };
    let (seq, problem) = failed_at(&join(&flipped), None);
    assert_eq!(seq, 7, "{problem}");
    // A flipped byte that breaks the line's JSON.
    let mut flipped = original.clone();
    flipped[9][0] ^= 0x01;
    let (seq, problem) = failed_at(&join(&flipped), None);
    assert_eq!(seq, 9, "{problem}");
    assert!(problem.contains("entry 9"), "{problem}");

    // A removed line.
    let mut removed = original.clone();
    removed.remove(6);
    let (seq, problem) = failed_at(&join(&removed), None);
    assert_eq!(seq, 6, "{problem}");
    assert!(problem.contains("entry 6"), "{problem}");
    // The last line removed: the file ends before the header's range.
    let mut cut = original.clone();
    cut.pop();
    let (seq, problem) = failed_at(&join(&cut), None);
    assert_eq!(seq, 12, "{problem}");
    assert!(problem.contains("ends before entry 12"), "{problem}");

    // A reordered pair.
    let mut reordered = original.clone();
    reordered.swap(3, 4);
    let (seq, problem) = failed_at(&join(&reordered), None);
    assert_eq!(seq, 3, "{problem}");
    assert!(problem.contains("entry 3"), "{problem}");

    // An entry edited and the chain recomputed after it, without the root
    // key: links and hashes hold, the MACs do not.
    let mut forged = Vec::new();
    let mut prev = summary.anchor_hash.clone();
    for (i, line) in original.iter().enumerate() {
        if i == 0 {
            forged.push(line.clone());
            continue;
        }
        let mut e: ExportedEntry = serde_json::from_slice(line).unwrap();
        if e.seq == 4 {
            e.outcome = "denied".into();
        }
        let draft = rampart_kms::model::AuditDraft {
            time_ms: e.time_ms,
            client: e.client.clone(),
            operation: e.operation.clone(),
            key: e.key.clone(),
            version: e.version,
            outcome: e.outcome.clone(),
            detail: e.detail.clone(),
        };
        let hash = rampart_kms::audit::chain_hash(&hex::decode(&prev).unwrap(), e.seq, &draft);
        e.prev_hash = prev;
        e.hash = hex::encode(hash);
        prev = e.hash.clone();
        let mut bytes = serde_json::to_vec(&e).unwrap();
        bytes.push(b'\n');
        forged.push(bytes);
    }
    let bytes = join(&forged);
    assert!(check(&bytes, None, None).ok, "offline, without the key, links alone hold");
    let (seq, problem) = failed_at(&bytes, Some(&root));
    assert_eq!(seq, 4, "{problem}");
    assert!(problem.contains("wrong MAC"), "{problem}");
}

fn find(haystack: &[u8], needle: &[u8]) -> usize {
    haystack.windows(needle.len()).position(|w| w == needle).unwrap()
}

on_each_store!(a_tampered_checkpoint_is_refused);

async fn a_tampered_checkpoint_is_refused(backend: Backend) {
    let d = Deployment::on(backend, "checkpoint", manual_checkpoints()).await;
    let admin = d.admin();
    admin.create_key("k", &["client:h".into()], false).await.unwrap();
    let host = d.issue("h", "").await;
    traffic(&host, 4).await;
    let cp = d.server.checkpoint_audit().await.unwrap().unwrap();
    traffic(&host, 4).await;
    assert!(admin.audit_verify_from_checkpoint().await.unwrap().ok);

    // Moved forward to skip entries, with the next entry's real hash: the
    // MAC (under a key derived from the root key) no longer matches.
    let next = cp.seq + 4;
    let hash = d.sql(&format!("SELECT hex(hash) FROM kms_audit WHERE seq = {next}"));
    let hash = match hash {
        Ok(h) => h.to_ascii_lowercase(),
        Err(_) => {
            d.sql(&format!("SELECT encode(hash, 'hex') FROM kms_audit WHERE seq = {next}")).unwrap()
        }
    };
    d.sql(&format!("UPDATE kms_audit_checkpoints SET seq = {next}, hash = '{hash}'")).unwrap();
    let report = admin.audit_verify_from_checkpoint().await.unwrap();
    assert!(!report.ok, "{report:?}");
    assert_eq!(report.first_bad_seq, Some(next));
    let problem = report.problem.unwrap();
    assert!(problem.contains(&format!("checkpoint at entry {next}")), "{problem}");
    assert!(problem.contains("wrong MAC"), "{problem}");
    // The server writes no checkpoint over a tampered one, and counts it.
    assert!(d.server.checkpoint_audit().await.unwrap().is_none());
    let metrics = admin.metrics().await.unwrap();
    assert!(metrics.contains("rampart_kms_audit_checkpoint_failures_total 1"), "{metrics}");
    // The full walk (the default) does not depend on checkpoints.
    assert!(admin.audit_verify().await.unwrap().ok);

    // Restored; then the log's tail cut off, checkpointed entry included:
    // both walks report it.
    d.sql(&format!("UPDATE kms_audit_checkpoints SET seq = {}, hash = '{}'", cp.seq, cp.hash))
        .unwrap();
    assert!(admin.audit_verify_from_checkpoint().await.unwrap().ok);
    d.drop_audit_guard();
    d.sql(&format!("DELETE FROM kms_audit WHERE seq >= {}", cp.seq)).unwrap();
    let report = admin.audit_verify_from_checkpoint().await.unwrap();
    assert_eq!(report.first_bad_seq, Some(cp.seq), "{report:?}");
    assert!(report.problem.unwrap().contains("gone"));
    let report = admin.audit_verify().await.unwrap();
    assert!(!report.ok, "{report:?}");
}

on_each_store!(the_server_checkpoints_on_its_own_every_n_entries);

async fn the_server_checkpoints_on_its_own_every_n_entries(backend: Backend) {
    let options = AuditOptions { checkpoint_entries: 10, ..manual_checkpoints() };
    let d = Deployment::on(backend, "auto", options).await;
    d.admin().create_key("k", &["client:h".into()], false).await.unwrap();
    let host = d.issue("h", "").await;
    traffic(&host, 15).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(cp) = d.store.last_audit_checkpoint().await.unwrap() {
            if cp.seq >= 20 {
                break;
            }
        }
        assert!(std::time::Instant::now() < deadline, "no checkpoint after 30 entries");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let report = d.admin().audit_verify_from_checkpoint().await.unwrap();
    assert!(report.ok && report.start == "checkpoint" && report.start_seq >= 20, "{report:?}");
}

/// A syslog daemon stand-in: the datagrams sent to a socket it binds.
fn syslog_listener(path: &Path) -> Arc<Mutex<Vec<String>>> {
    let socket = std::os::unix::net::UnixDatagram::bind(path).unwrap();
    let received = Arc::new(Mutex::new(Vec::new()));
    let out = Arc::clone(&received);
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 20];
        while let Ok(n) = socket.recv(&mut buf) {
            out.lock().unwrap().push(String::from_utf8_lossy(&buf[..n]).into_owned());
        }
    });
    received
}

/// The entries in the sink files (rotated ones included), by sequence number.
fn file_entries(dir: &Path) -> Vec<ExportedEntry> {
    let mut out = Vec::new();
    for file in std::fs::read_dir(dir).unwrap() {
        let path = file.unwrap().path();
        if !path.file_name().unwrap().to_string_lossy().starts_with("audit.jsonl") {
            continue;
        }
        for line in std::fs::read_to_string(&path).unwrap().lines() {
            out.push(serde_json::from_str::<ExportedEntry>(line).unwrap());
        }
    }
    out.sort_by_key(|e| e.seq);
    out
}

on_each_store!(the_sinks_receive_exactly_the_chained_entries);

async fn the_sinks_receive_exactly_the_chained_entries(backend: Backend) {
    let sinks_dir = TempDir::new("sinks");
    let log = sinks_dir.path().join("log.sock");
    let received = syslog_listener(&log);
    let audit_file = sinks_dir.path().join("audit.jsonl");
    let options = AuditOptions {
        sinks: SinkOptions {
            file: Some(audit_file.clone()),
            file_max_bytes: Some(2048),
            file_fsync: true,
            syslog: Some(log.clone()),
        },
        ..manual_checkpoints()
    };
    let d = Deployment::on(backend, "sinks", options).await;
    let admin = d.admin();
    admin.create_key("k", &["client:h".into()], false).await.unwrap();
    let host = d.issue("h", "").await;
    let disk = [HeldKey { name: "k".into(), version: 1 }];
    traffic(&host, 8).await;
    for _ in 0..3 {
        host.heartbeat(&disk).await.unwrap();
        host.health().await.unwrap();
    }
    // logrotate: the file renamed, then SIGHUP (here, the call it makes).
    std::fs::rename(&audit_file, sinks_dir.path().join("audit.jsonl.rotated")).unwrap();
    d.server.reopen_audit_file();
    traffic(&host, 8).await;
    assert_eq!(api_code(host.export_key("k", None).await), "forbidden");

    let stored = d.entries().await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while received.lock().unwrap().len() < stored.len() && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let expected: Vec<(u64, String, Option<String>, String, String)> = stored
        .iter()
        .map(|e| (e.seq, e.hash.clone(), e.mac.clone(), e.operation.clone(), e.detail.clone()))
        .collect();
    let as_tuple = |e: &ExportedEntry| {
        (e.seq, e.hash.clone(), e.mac.clone(), e.operation.clone(), e.detail.clone())
    };
    // The file: every entry once, in order (rotated by size and renamed
    // by "logrotate" along the way), each linked to the one before.
    let in_files = file_entries(sinks_dir.path());
    assert!(
        std::fs::read_dir(sinks_dir.path()).unwrap().count() >= 4,
        "size rotation left no rotated file"
    );
    assert_eq!(in_files.iter().map(as_tuple).collect::<Vec<_>>(), expected);
    for pair in in_files.windows(2) {
        assert_eq!(pair[1].prev_hash, pair[0].hash);
    }
    assert!(std::fs::read_to_string(&audit_file).unwrap().lines().count() > 0, "reopened");
    // Syslog: one message per entry, in chain order.
    let messages = received.lock().unwrap().clone();
    let in_syslog: Vec<ExportedEntry> = messages
        .iter()
        .map(|m| {
            assert!(m.starts_with("<86>"), "{m}");
            let (_, json) = m.split_once("]: ").unwrap();
            serde_json::from_str(json).unwrap()
        })
        .collect();
    assert_eq!(in_syslog.iter().map(as_tuple).collect::<Vec<_>>(), expected);
    // Only chained requests: the repeated heartbeat and the health checks
    // are not there.
    assert_eq!(in_syslog.iter().filter(|e| e.operation == "heartbeat").count(), 1);
    assert!(!in_syslog.iter().any(|e| e.operation == "health"));
}

on_each_store!(a_check_in_that_changes_nothing_adds_no_chained_row);

async fn a_check_in_that_changes_nothing_adds_no_chained_row(backend: Backend) {
    let d = Deployment::on(backend, "nochain", manual_checkpoints()).await;
    let admin = d.admin();
    admin.create_key("k", &["client:h".into()], false).await.unwrap();
    admin.create_key("other", &["client:h".into()], false).await.unwrap();
    let host = d.issue("h", "").await;
    let disk = [HeldKey { name: "k".into(), version: 1 }];
    let heartbeats = |entries: &[rampart_kms::model::AuditEntry]| {
        entries
            .iter()
            .filter(|e| e.operation == "heartbeat")
            .map(|e| e.outcome.clone())
            .collect::<Vec<_>>()
    };

    // The first check-in is chained; repeats of the same answer are not,
    // nor are health checks, status reads and whoami.
    assert!(host.heartbeat(&disk).await.unwrap()[0].allowed);
    let before = d.count().await;
    for _ in 0..5 {
        assert!(host.heartbeat(&disk).await.unwrap()[0].allowed);
        host.health().await.unwrap();
        host.whoami().await.unwrap();
        host.seal_status().await.unwrap();
    }
    assert_eq!(d.count().await, before, "unchanged check-ins were chained");
    assert_eq!(heartbeats(&d.entries().await), vec!["ok"]);
    // ... but they are counted, and the client's last check-in is seen.
    let metrics = admin.metrics().await.unwrap();
    assert!(metrics.contains("rampart_kms_requests_unchained_total 20"), "{metrics}");
    assert!(
        metrics.contains("rampart_kms_heartbeats_total{client=\"h\",verdict=\"allowed\"} 6"),
        "{metrics}"
    );
    assert!(metrics.contains("rampart_kms_heartbeat_last_seconds{client=\"h\"}"), "{metrics}");

    // A different question (another key held) is a different answer.
    let both = [disk[0].clone(), HeldKey { name: "other".into(), version: 1 }];
    host.heartbeat(&both).await.unwrap();
    assert_eq!(heartbeats(&d.entries().await).len(), 2);
    host.heartbeat(&both).await.unwrap();
    assert_eq!(heartbeats(&d.entries().await).len(), 2);

    // A state change is chained, and so is the check-in whose answer it
    // changed, and every refusal after it.
    admin.revoke_key("k", "host lost", None).await.unwrap();
    let verdicts = host.heartbeat(&disk).await.unwrap();
    assert!(!verdicts[0].allowed);
    host.heartbeat(&disk).await.unwrap();
    let entries = d.entries().await;
    assert_eq!(heartbeats(&entries), vec!["ok", "ok", "denied", "denied"]);
    assert!(entries.iter().any(|e| e.operation == "key.revoke" && e.outcome == "ok"));
    // Unwraps and refusals are always chained.
    let c = host.wrap("other", b"x", b"").await.unwrap();
    host.unwrap(&c, b"").await.unwrap();
    host.unwrap(&c, b"").await.unwrap();
    assert!(host.get_key("other").await.is_err());
    let entries = d.entries().await;
    assert_eq!(entries.iter().filter(|e| e.operation == "key.unwrap").count(), 2);
    assert!(entries.iter().any(|e| e.operation == "key.show" && e.outcome == "denied"));
    assert!(admin.audit_verify().await.unwrap().ok);
}
