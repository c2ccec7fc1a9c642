//! The heartbeat policy against a scripted key manager and a fake
//! server's exports, on a short period: a refused key closes its export,
//! silence is tolerated for the grace period and no longer, a refused
//! client closes everything.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rampart_kms::client::ClientError;
use rampart_kms::model::{HeartbeatVerdict, HeldKey};
use rampart_serve::heartbeat::{retry_policy, Checker, Exports, HeldVolume, KeyManager};
use tokio::sync::oneshot;
use tokio::time::Instant;

type Answer = Result<Vec<HeartbeatVerdict>, ClientError>;

/// Answers each heartbeat with the next scripted answer; once the script
/// is done, allows every key. Records what each heartbeat named.
#[derive(Debug, Default, Clone)]
struct ScriptedKms {
    script: Arc<Mutex<VecDeque<Answer>>>,
    asked: Arc<Mutex<Vec<Vec<HeldKey>>>>,
}

impl ScriptedKms {
    fn new(script: Vec<Answer>) -> Self {
        Self { script: Arc::new(Mutex::new(script.into())), ..Self::default() }
    }
}

fn allow_all(keys: &[HeldKey]) -> Vec<HeartbeatVerdict> {
    keys.iter()
        .map(|k| HeartbeatVerdict {
            name: k.name.clone(),
            version: k.version,
            allowed: true,
            reason: None,
        })
        .collect()
}

fn verdict(name: &str, version: u32, allowed: bool, reason: Option<&str>) -> HeartbeatVerdict {
    HeartbeatVerdict { name: name.into(), version, allowed, reason: reason.map(str::to_owned) }
}

fn unavailable() -> Answer {
    Err(ClientError::Unavailable("connection refused".into()))
}

impl KeyManager for ScriptedKms {
    fn heartbeat(&self, keys: &[HeldKey]) -> impl Future<Output = Answer> + Send {
        self.asked.lock().unwrap().push(keys.to_vec());
        let answer = self.script.lock().unwrap().pop_front().unwrap_or_else(|| Ok(allow_all(keys)));
        async move { answer }
    }
}

/// A server's exports: which are open, and when each was closed.
#[derive(Debug, Clone)]
struct FakeExports {
    open: Arc<Mutex<Vec<String>>>,
    closed: Arc<Mutex<Vec<(String, Duration)>>>,
    started: Instant,
}

impl FakeExports {
    fn new(names: &[&str]) -> Self {
        Self {
            open: Arc::new(Mutex::new(names.iter().map(|n| (*n).to_owned()).collect())),
            closed: Arc::default(),
            started: Instant::now(),
        }
    }

    fn closed(&self) -> Vec<(String, Duration)> {
        self.closed.lock().unwrap().clone()
    }
}

impl Exports for FakeExports {
    fn close_export(&self, name: &str) -> impl Future<Output = std::io::Result<bool>> + Send {
        let mut open = self.open.lock().unwrap();
        let was_open = open.iter().any(|n| n == name);
        open.retain(|n| n != name);
        if was_open {
            self.closed.lock().unwrap().push((name.to_owned(), self.started.elapsed()));
        }
        async move { Ok(was_open) }
    }

    fn open_exports(&self) -> Vec<String> {
        self.open.lock().unwrap().clone()
    }
}

fn held(export: &str, key: &str, version: u32) -> HeldVolume {
    HeldVolume {
        export: export.into(),
        key: key.into(),
        version: Arc::new(AtomicU32::new(version)),
    }
}

const EVERY: Duration = Duration::from_millis(50);
const GRACE: Duration = Duration::from_secs(1);
/// Far longer than any test needs.
const PATIENCE: Duration = Duration::from_secs(30);

/// Starts the checker; returns the receiver of "every export closed".
fn start(
    kms: &ScriptedKms,
    volumes: Vec<HeldVolume>,
    exports: &FakeExports,
) -> oneshot::Receiver<String> {
    let (tx, rx) = oneshot::channel();
    let checker = Checker::new(kms.clone(), volumes, EVERY, GRACE);
    tokio::spawn(checker.run(exports.clone(), tx));
    rx
}

async fn all_closed(emptied: oneshot::Receiver<String>) -> String {
    tokio::time::timeout(PATIENCE, emptied).await.unwrap().unwrap()
}

fn names(closed: Vec<(String, Duration)>) -> Vec<String> {
    closed.into_iter().map(|(n, _)| n).collect()
}

#[tokio::test]
async fn a_refused_key_closes_its_export_and_the_others_keep_serving() {
    let kms = ScriptedKms::new(vec![
        Ok(vec![verdict("k1", 1, true, None), verdict("k2", 4, true, None)]),
        Ok(vec![verdict("k1", 1, false, Some("key k1 is revoked")), verdict("k2", 4, true, None)]),
    ]);
    let exports = FakeExports::new(&["a", "b", "plain"]);
    let mut emptied = start(&kms, vec![held("a", "k1", 1), held("b", "k2", 4)], &exports);
    tokio::time::sleep(EVERY * 10).await;
    assert_eq!(names(exports.closed()), ["a"]);
    assert_eq!(exports.open_exports(), ["b", "plain"]);
    // One heartbeat per period, naming the keys still held.
    let asked = kms.asked.lock().unwrap().clone();
    assert!(asked.len() >= 3, "{}", asked.len());
    assert_eq!(asked[0].len(), 2);
    assert_eq!(asked.last().unwrap(), &[HeldKey { name: "k2".into(), version: 4 }]);
    assert!(emptied.try_recv().is_err(), "other exports are still served");
}

#[tokio::test]
async fn an_answer_that_does_not_mention_a_key_refuses_it() {
    let kms = ScriptedKms::new(vec![Ok(Vec::new())]);
    let exports = FakeExports::new(&["a"]);
    let reason = all_closed(start(&kms, vec![held("a", "k1", 1)], &exports)).await;
    assert_eq!(reason, "export 'a': the key server's heartbeat answer does not mention this key");
    // A verdict for another version of the key is no verdict either.
    let kms = ScriptedKms::new(vec![Ok(vec![verdict("k1", 2, true, None)])]);
    let exports = FakeExports::new(&["a"]);
    let reason = all_closed(start(&kms, vec![held("a", "k1", 1)], &exports)).await;
    assert!(reason.ends_with("does not mention this key"), "{reason}");
}

#[tokio::test]
async fn silence_within_the_grace_period_is_forgiven_and_longer_closes_everything() {
    // Silent for about half the grace period, answered, then silent.
    let mut script: Vec<Answer> = (0..10).map(|_| unavailable()).collect();
    script.push(Ok(vec![verdict("k1", 1, true, None)]));
    script.extend((0..1000).map(|_| unavailable()));
    let kms = ScriptedKms::new(script);
    let exports = FakeExports::new(&["a"]);
    let started = Instant::now();
    let reason = all_closed(start(&kms, vec![held("a", "k1", 1)], &exports)).await;
    // Had the first silence counted, the export would have closed one
    // grace period after it began (at about 1.05 s), not one grace period
    // after the second began (after 1.5 s).
    assert!(started.elapsed() >= GRACE + EVERY * 9, "{:?}", started.elapsed());
    assert!(
        reason.starts_with("export 'a': no key server answered the heartbeat for "),
        "{reason}"
    );
    assert!(
        reason.ends_with(" (--grace 1s): no key server answered: connection refused"),
        "{reason}"
    );
    assert_eq!(names(exports.closed()), ["a"]);
}

#[tokio::test]
async fn a_refused_client_closes_every_managed_export_at_once() {
    let forbidden = ClientError::Api {
        status: 403,
        code: "forbidden".into(),
        message: "client host-1 is revoked".into(),
    };
    let kms = ScriptedKms::new(vec![Err(forbidden)]);
    let exports = FakeExports::new(&["a", "b"]);
    let emptied = start(&kms, vec![held("a", "k1", 1), held("b", "k2", 1)], &exports);
    let reason = all_closed(emptied).await;
    assert_eq!(
        reason,
        "export 'b': the key server refuses this host: client host-1 is revoked (HTTP 403, forbidden)"
    );
    assert_eq!(names(exports.closed()), ["a", "b"]);
    assert_eq!(kms.asked.lock().unwrap().len(), 1, "closed at the first refusal");

    let revoked = ClientError::Tls {
        endpoint: "kms:8443".into(),
        message: "received fatal alert: CertificateRevoked".into(),
    };
    let kms = ScriptedKms::new(vec![Err(revoked)]);
    let exports = FakeExports::new(&["a"]);
    let reason = all_closed(start(&kms, vec![held("a", "k1", 1)], &exports)).await;
    assert_eq!(
        reason,
        "export 'a': the key server kms:8443 refuses this host's certificate: \
         received fatal alert: CertificateRevoked"
    );
}

#[tokio::test]
async fn an_untrusted_server_certificate_counts_as_silence_not_refusal() {
    let untrusted =
        || Err(ClientError::Tls { endpoint: "kms:8443".into(), message: "UnknownIssuer".into() });
    let kms = ScriptedKms::new((0..1000).map(|_| untrusted()).collect());
    let exports = FakeExports::new(&["a"]);
    let started = Instant::now();
    let reason = all_closed(start(&kms, vec![held("a", "k1", 1)], &exports)).await;
    assert!(started.elapsed() >= GRACE, "closed only once the grace period is over");
    assert!(reason.contains("(--grace 1s): TLS refused by kms:8443: UnknownIssuer"), "{reason}");
}

#[tokio::test]
async fn a_rebind_moves_the_reported_version() {
    let kms = ScriptedKms::new(Vec::new());
    let exports = FakeExports::new(&["a"]);
    let volume = held("a", "k1", 1);
    let version = Arc::clone(&volume.version);
    let _emptied = start(&kms, vec![volume], &exports);
    tokio::time::sleep(EVERY * 3).await;
    version.store(2, Ordering::Relaxed);
    tokio::time::sleep(EVERY * 3).await;
    let asked = kms.asked.lock().unwrap().clone();
    assert_eq!(asked[0], [HeldKey { name: "k1".into(), version: 1 }]);
    assert_eq!(asked.last().unwrap(), &[HeldKey { name: "k1".into(), version: 2 }]);
    assert!(exports.closed().is_empty());
}

#[test]
fn one_heartbeat_retries_within_its_period() {
    let second = Duration::from_secs(1);
    let short = retry_policy(Duration::from_millis(200));
    assert_eq!((short.connect_timeout, short.request_timeout), (second, second));
    let medium = retry_policy(Duration::from_secs(5));
    assert_eq!(medium.request_timeout, Duration::from_secs(5));
    let long = retry_policy(Duration::from_secs(60));
    assert_eq!(long.connect_timeout, Duration::from_secs(10));
    assert_eq!((long.rounds, long.backoff), (2, Duration::from_millis(100)));
}
