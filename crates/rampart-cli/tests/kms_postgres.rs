#![allow(clippy::unwrap_used)]
//! High availability on PostgreSQL: two `rampart kms serve` processes on
//! one database under a steady unwrap load; the first is killed with
//! SIGKILL mid-load and the client sees no failed operation; then the
//! database restarts under load and the servers reconnect by themselves.
//!
//! The cluster comes from `$RAMPART_TEST_PG_URL` (scripts/test starts one
//! with scripts/pg-test-cluster) or is started here.

use crate::helpers::kms_support as support;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rampart_kms::client::{KmsClient, RetryPolicy};
use rampart_kms::Bundle;
use support::{free_port, issue_client, ok, PgCluster, ServerProcess, TempDir};

struct Load {
    stop: Arc<AtomicBool>,
    done: Arc<AtomicU64>,
    tasks: Vec<tokio::task::JoinHandle<Vec<String>>>,
}

fn start_load(client: &KmsClient, ciphertexts: &[String], workers: usize) -> Load {
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for worker in 0..workers {
        let (client, stop, done) = (client.clone(), stop.clone(), done.clone());
        let ciphertexts = ciphertexts.to_vec();
        tasks.push(tokio::spawn(async move {
            let mut errors = Vec::new();
            let mut i = worker;
            while !stop.load(Ordering::Relaxed) {
                let c = &ciphertexts[i % ciphertexts.len()];
                match client.unwrap(c, b"ha").await {
                    Ok(p)
                        if p.expose() == format!("secret-{}", i % ciphertexts.len()).as_bytes() =>
                    {
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(_) => errors.push("wrong plaintext".into()),
                    Err(e) => errors.push(e.to_string()),
                }
                i += workers;
            }
            errors
        }));
    }
    Load { stop, done, tasks }
}

impl Load {
    async fn finish(self) -> (u64, Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        let mut errors = Vec::new();
        for task in self.tasks {
            errors.extend(task.await.unwrap());
        }
        (self.done.load(Ordering::Relaxed), errors)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_on_one_postgres_survive_sigkill_and_database_restart() {
    let cluster = PgCluster::get();
    let db = cluster.database("ha");
    let tmp = TempDir::new("kms-ha");
    let dir = tmp.join("data");
    let dir_s = dir.display().to_string();
    let (port_a, port_b) = (free_port(), free_port());
    let (ea, eb) = (format!("127.0.0.1:{port_a}"), format!("127.0.0.1:{port_b}"));
    ok(&[
        "kms",
        "init",
        "--data-dir",
        &dir_s,
        "--store",
        &db,
        "--endpoint",
        &ea,
        "--endpoint",
        &eb,
    ]);
    // Both servers share the database (and, as copies would, the directory).
    let mut a = ServerProcess::start(&dir, port_a, Some(&db));
    let _b = ServerProcess::start(&dir, port_b, Some(&db));
    let admin = dir.join("admin.bundle").display().to_string();
    let host = tmp.join("host.bundle").display().to_string();
    // Writes through either server are seen by the other.
    ok(&["kms", "key", "create", "k1", "--allow", "label:role=host", "--kms", &admin]);
    issue_client(&admin, "host", "role=host", &host);

    let bundle = Bundle::read(std::path::Path::new(&host)).unwrap();
    let policy =
        RetryPolicy { rounds: 10, backoff: Duration::from_millis(50), ..RetryPolicy::default() };
    let client = KmsClient::with_policy(&bundle, policy.clone()).unwrap();
    let mut only_b = bundle.clone();
    only_b.endpoints = vec![format!("https://{eb}")];
    let via_b = KmsClient::with_policy(&only_b, policy.clone()).unwrap();
    let mut only_a = bundle.clone();
    only_a.endpoints = vec![format!("https://{ea}")];
    let via_a = KmsClient::with_policy(&only_a, policy).unwrap();
    let mut ciphertexts = Vec::new();
    for i in 0..8 {
        let server = if i % 2 == 0 { &via_a } else { &via_b };
        ciphertexts.push(server.wrap("k1", format!("secret-{i}").as_bytes(), b"ha").await.unwrap());
    }
    ok(&["kms", "key", "create", "k2", "--allow", "client:host", "--kms", &admin]);
    ok(&["kms", "key", "rotate", "k1", "--kms", &admin]);

    // Steady load through the bundle (preferring server A); SIGKILL A.
    let load = start_load(&client, &ciphertexts, 4);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let before_kill = load.done.load(Ordering::Relaxed);
    a.kill();
    tokio::time::sleep(Duration::from_millis(2000)).await;
    let (done, errors) = load.finish().await;
    assert!(errors.is_empty(), "failed operations after SIGKILL: {errors:?}");
    assert!(
        before_kill > 20 && done > before_kill + 20,
        "load too small: {before_kill} then {done}"
    );

    // Every key is served by the survivor.
    let keys = ok(&["kms", "key", "list", "--json", "--kms", &admin]);
    let keys = support::json_lines(keys);
    assert_eq!(keys.as_array().unwrap().len(), 2);
    let c2 = via_b.wrap("k2", b"secret-x", b"").await.unwrap();
    assert_eq!(via_b.unwrap(&c2, b"").await.unwrap().expose(), b"secret-x");
    assert!(via_b.wrap("k1", b"v2", b"").await.unwrap().starts_with("rampart:v1:k1:2:"));

    // The database restarts under load: server B reconnects by itself and
    // the client's retries cover the gap.
    let load = start_load(&via_b, &ciphertexts, 4);
    tokio::time::sleep(Duration::from_millis(800)).await;
    cluster.restart();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let after_restart = load.done.load(Ordering::Relaxed);
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let (done, errors) = load.finish().await;
    assert!(errors.is_empty(), "failed operations across the database restart: {errors:?}");
    assert!(done > after_restart, "no progress after the restart");

    // Revocation and destruction on the shared database.
    ok(&["kms", "key", "revoke", "k2", "--reason", "rotated out", "--kms", &admin]);
    assert_eq!(via_b.unwrap(&c2, b"").await.unwrap_err().code(), Some("key_revoked"));
    ok(&["kms", "key", "destroy", "k2", "--kms", &admin]);
    assert_eq!(via_b.unwrap(&c2, b"").await.unwrap_err().code(), Some("key_destroyed"));
    let shown = ok(&["kms", "key", "show", "k2", "--json", "--kms", &admin]);
    assert!(shown.contains("\"destroyed\""), "{shown}");

    // One audit chain across both servers, intact.
    let verify = ok(&["kms", "audit", "verify", "--kms", &admin]);
    assert!(verify.contains("intact"), "{verify}");
}
