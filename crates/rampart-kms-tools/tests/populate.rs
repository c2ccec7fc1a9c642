//! `populate_deployment` on a fresh SQLite deployment: what it writes is
//! what a server would have written, and a wrong unseal key or a bad
//! benchmark setting is refused before anything is written.

use std::path::PathBuf;

use rampart_kms::deployment::{self, files, AdminError, InitOptions, InitSeal, StoreAccess};
use rampart_kms::Bundle;
use rampart_kms_tools::bench::BenchRuns;
use rampart_kms_tools::bulk::{BulkPlan, PopulateSettings};

/// A directory removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        let mut random = [0u8; 8];
        rampart_crypto::fill_random(&mut random).unwrap();
        let path =
            std::env::temp_dir().join(format!("rampart-kms-tools-{tag}-{}", hex::encode(random)));
        std::fs::create_dir_all(&path).unwrap();
        Self(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

async fn deployment_in(tmp: &TempDir) -> StoreAccess {
    let data_dir = tmp.0.join("data");
    let opts = InitOptions {
        data_dir: data_dir.clone(),
        seal: InitSeal::File(data_dir.join(files::UNSEAL_KEY)),
        sans: Vec::new(),
        endpoints: vec!["127.0.0.1:18443".into()],
        days: deployment::clamp_days(30),
    };
    deployment::create(&opts, None).await.unwrap();
    StoreAccess { data_dir, store: None, unseal_key_file: None }
}

fn plan() -> BulkPlan {
    BulkPlan {
        keys: 5,
        key_prefix: "key-".into(),
        clients: 3,
        client_prefix: "host-".into(),
        audit: 20,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_populated_store_holds_the_keys_clients_bundles_and_audit_entries() {
    let tmp = TempDir::new("populate");
    let access = deployment_in(&tmp).await;
    let bundle_dir = tmp.0.join("hosts");
    let settings = PopulateSettings {
        access: access.clone(),
        plan: plan(),
        bundles: 2,
        bundle_dir: Some(bundle_dir.clone()),
    };
    let report = rampart_kms_tools::bulk::populate_deployment(&settings, &|_, _| {}).await.unwrap();
    assert_eq!((report.keys, report.clients, report.bundles, report.audit), (5, 3, 2, 20));

    let store = access.open_store().await.unwrap();
    for i in 0..5 {
        let key = store.get_key(plan().key_name(i)).await.unwrap().unwrap();
        assert_eq!(key.versions.len(), 1, "{key:?}");
        assert_eq!(
            key.allow.iter().map(ToString::to_string).collect::<Vec<_>>(),
            ["label:role=host"]
        );
    }
    assert!(store.get_key(plan().key_name(5)).await.unwrap().is_none());
    let mut written: Vec<String> = std::fs::read_dir(&bundle_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    written.sort();
    assert_eq!(written, ["host-0000000.bundle", "host-0000001.bundle"]);
    let bundle = Bundle::read(&bundle_dir.join("host-0000001.bundle")).unwrap();
    assert_eq!(bundle.name, "host-0000001");
    assert_eq!(bundle.endpoints, ["https://127.0.0.1:18443"]);
    let entries = store.audit_page(0, None, 100).await.unwrap();
    let unwraps = entries.iter().filter(|e| e.operation == "key.unwrap").count();
    assert_eq!(unwraps, 20, "{entries:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_deployments_unseal_key_is_refused() {
    let tmp = TempDir::new("populate-wrong");
    let access = deployment_in(&tmp).await;
    let other = TempDir::new("populate-other");
    let other = deployment_in(&other).await;
    let settings = PopulateSettings {
        access: StoreAccess { unseal_key_file: Some(other.unseal_key_path()), ..access },
        plan: plan(),
        bundles: 0,
        bundle_dir: None,
    };
    let error =
        rampart_kms_tools::bulk::populate_deployment(&settings, &|_, _| {}).await.unwrap_err();
    assert!(error.to_string().contains("does not open this store"), "{error}");
}

#[test]
fn benchmark_settings_out_of_range_are_usage_errors() {
    let runs = |concurrency: Vec<usize>, seconds| BenchRuns { concurrency, seconds };
    assert!(runs(vec![1, 16], 5.0).check(0, 10_000).is_ok());
    for (bad, heartbeat, sample) in [
        (runs(vec![0], 5.0), 0, 1),
        (runs(vec![4097], 5.0), 0, 1),
        (runs(vec![1], 0.05), 0, 1),
        (runs(vec![1], 5.0), 101, 1),
        (runs(vec![1], 5.0), 0, 0),
    ] {
        let error = bad.check(heartbeat, sample).unwrap_err();
        assert!(matches!(error, AdminError::Usage(_)), "{error:?}");
        assert!(error.to_string().starts_with("--concurrency must be 1 to 4096"), "{error}");
    }
}
