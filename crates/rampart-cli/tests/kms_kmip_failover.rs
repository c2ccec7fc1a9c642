#![allow(clippy::unwrap_used)]
//! KMIP failover: two `rampart kms serve` processes on one PostgreSQL
//! database, each with its KMIP listener; a KMIP client given both
//! addresses (rampart_kms::kmip, as `kms bench --kmip` uses) keeps
//! working when the server it is connected to is killed with SIGKILL: it
//! reconnects to the other, and the keys created before the kill are
//! still there (found by Name, fetched, used).
//!
//! The cluster comes from `$RAMPART_TEST_PG_URL` (scripts/test starts one
//! with scripts/pg-test-cluster) or is started here.

use crate::helpers::kms_support as support;

use rampart_kms::kmip::{KmipClient, TlsVersions};
use rampart_kms::Bundle;
use support::{free_port, issue_client, ok, PgCluster, ServerProcess, TempDir};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kmip_client_fails_over_when_a_server_is_killed() {
    let cluster = PgCluster::get();
    let db = cluster.database("kmipfo");
    let tmp = TempDir::new("kms-kmip-failover");
    let dir = tmp.join("data");
    let dir_s = dir.display().to_string();
    let (port_a, port_b) = (free_port(), free_port());
    let (kmip_a, kmip_b) = (free_port(), free_port());
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
    let mut a = ServerProcess::start_kmip(&dir, port_a, kmip_a, Some(&db));
    let b = ServerProcess::start_kmip(&dir, port_b, kmip_b, Some(&db));
    let admin = dir.join("admin.bundle").display().to_string();
    let app = tmp.join("app.bundle").display().to_string();
    issue_client(&admin, "app", "role=db", &app);
    let bundle = Bundle::read(std::path::Path::new(&app)).unwrap();
    let addresses = [a.kmip.clone().unwrap(), b.kmip.clone().unwrap()];
    let mut client = KmipClient::new(&bundle, &addresses, TlsVersions::Negotiated).unwrap();

    // Keys created through server A (the first address).
    let mut keys = Vec::new();
    for i in 0..3 {
        let name = format!("db-key-{i}");
        let uid = client.create_aes(256, Some(&name)).await.unwrap();
        assert_eq!(client.connected_to(), Some(addresses[0].as_str()));
        let material = client.get_symmetric_key(&uid).await.unwrap().expose().to_vec();
        assert_eq!(material.len(), 32);
        keys.push((name, uid, material));
    }
    let (_, uid0, material0) = &keys[0];
    let (ct, iv, tag) = client.encrypt_gcm(uid0, b"row 1 of the customers table").await.unwrap();

    a.kill();

    // The same client carries on: the broken connection is replaced by
    // one to server B, and every key created before the kill is there.
    for (name, uid, material) in &keys {
        assert_eq!(client.locate_name(name).await.unwrap(), vec![uid.clone()]);
        assert_eq!(client.get_symmetric_key(uid).await.unwrap().expose(), material.as_slice());
    }
    assert_eq!(client.connected_to(), Some(addresses[1].as_str()));
    // A ciphertext made through A opens with the key fetched through B.
    let mut opened = ct.clone();
    rampart_crypto::Gcm::new(material0)
        .unwrap()
        .open(
            iv.as_slice().try_into().unwrap(),
            b"",
            &mut opened,
            tag.as_slice().try_into().unwrap(),
        )
        .unwrap();
    assert_eq!(opened, b"row 1 of the customers table");
    // New work goes on through B: encryption, and a new key.
    let (ct2, _, _) = client.encrypt_gcm(uid0, b"row 2").await.unwrap();
    assert_eq!(ct2.len(), 5);
    let uid = client.create_aes(128, Some("db-key-after")).await.unwrap();
    assert_eq!(client.get_symmetric_key(&uid).await.unwrap().expose().len(), 16);

    // The KMIP-created keys are ordinary keys of the deployment.
    let listed = support::json_lines(ok(&["kms", "key", "list", "--json", "--kms", &admin]));
    let names: Vec<&str> =
        listed.as_array().unwrap().iter().map(|k| k["name"].as_str().unwrap()).collect();
    for name in ["db-key-0", "db-key-1", "db-key-2", "db-key-after"] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
    // With both servers gone the client says so, naming both addresses.
    drop(b);
    let error = client.get(uid0).await.unwrap_err().to_string();
    assert!(
        error.contains(&addresses[0]) && error.contains(&addresses[1]),
        "unexpected error: {error}"
    );
    // The audit chain both servers wrote to verifies.
    let mut c = ServerProcess::start(&dir, free_port(), Some(&db));
    let mut only_c = Bundle::read(std::path::Path::new(&admin)).unwrap();
    only_c.endpoints = vec![c.url.clone()];
    let report =
        rampart_kms::client::KmsClient::new(&only_c).unwrap().audit_verify().await.unwrap();
    assert!(report.ok, "{report:?}");
    c.kill();
}
