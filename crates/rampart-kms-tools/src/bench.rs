//! Load generators for `rampart kms bench`: N workers, each on its own
//! kept-open connection, repeat one operation for a fixed time; the result
//! is operations per second and latency percentiles.

use std::time::{Duration, Instant};

use serde::Serialize;

use rampart_kms::deployment::AdminError;
use rampart_kms::kmip_client::{KmipClient, KmipClientError, TlsVersions};
use rampart_kms::server::kmip::DEFAULT_KMIP_PORT;
use rampart_kms::Bundle;

/// One run at one concurrency.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BenchRun {
    pub concurrency: usize,
    pub operations: usize,
    pub ops_per_second: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// The TLS version the connections negotiated (KMIP runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<String>,
}

impl BenchRun {
    /// The run's figures from every operation's latency.
    #[must_use]
    pub fn from_latencies(
        concurrency: usize,
        mut latencies: Vec<Duration>,
        elapsed: Duration,
    ) -> Self {
        latencies.sort_unstable();
        let percentile = |p: usize| {
            latencies
                .get((latencies.len() * p / 100).min(latencies.len().saturating_sub(1)))
                .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
        };
        Self {
            concurrency,
            operations: latencies.len(),
            ops_per_second: latencies.len() as f64 / elapsed.as_secs_f64().max(1e-9),
            p50_ms: percentile(50),
            p99_ms: percentile(99),
            tls: None,
        }
    }
}

/// The KMIP operation a run repeats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum KmipOperation {
    /// Get of the key.
    Get,
    /// AES-256-GCM Encrypt of a 64-byte payload (the server picks the IV).
    EncryptGcm,
}

impl KmipOperation {
    /// The name in the report (`get`, `encrypt-aes-256-gcm`).
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Get => "get",
            Self::EncryptGcm => "encrypt-aes-256-gcm",
        }
    }
}

async fn kmip_once(
    client: &mut KmipClient,
    uid: &str,
    op: KmipOperation,
    payload: &[u8],
) -> Result<(), KmipClientError> {
    match op {
        KmipOperation::Get => client.get(uid).await.map(drop),
        KmipOperation::EncryptGcm => client.encrypt_gcm(uid, payload).await.map(drop),
    }
}

/// Repeats `op` on key `uid` for `duration` in `concurrency` workers, each
/// with its own connection (opened, and used once, before the clock
/// starts: the handshakes are not measured).
pub async fn kmip(
    client: &KmipClient,
    uid: &str,
    op: KmipOperation,
    concurrency: usize,
    duration: Duration,
) -> Result<BenchRun, KmipClientError> {
    let mut payload = [0u8; 64];
    rampart_crypto::fill_random(&mut payload)
        .map_err(|e| rampart_kms::KmsError::Crypto(format!("random payload: {e}")))?;
    let mut workers = Vec::with_capacity(concurrency);
    for _ in 0..concurrency {
        let mut worker = client.clone();
        kmip_once(&mut worker, uid, op, &payload).await?;
        workers.push(worker);
    }
    let tls = workers.first().and_then(KmipClient::tls_version);
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(concurrency);
    for mut worker in workers {
        let uid = uid.to_owned();
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            while start.elapsed() < duration {
                let t = Instant::now();
                kmip_once(&mut worker, &uid, op, &payload).await?;
                latencies.push(t.elapsed());
            }
            Ok::<_, KmipClientError>(latencies)
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        let latencies = task.await.map_err(|e| {
            KmipClientError::Unavailable(format!("a benchmark worker failed: {e}"))
        })??;
        all.extend(latencies);
    }
    let mut run = BenchRun::from_latencies(concurrency, all, start.elapsed());
    run.tls = tls;
    Ok(run)
}

/// How long each run of a benchmark lasts, and at which concurrencies.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchRuns {
    /// Requests in flight at once, one run each.
    pub concurrency: Vec<usize>,
    /// Seconds per run.
    pub seconds: f64,
}

impl BenchRuns {
    #[must_use]
    pub fn duration(&self) -> Duration {
        Duration::from_secs_f64(self.seconds)
    }

    /// Checks the runs, with the heartbeat share and secret sample of a
    /// REST benchmark (given to every benchmark alike).
    pub fn check(&self, heartbeat_percent: u32, sample: u64) -> Result<(), AdminError> {
        if self.concurrency.iter().any(|&c| c == 0 || c > 4096)
            || !(0.1..=3600.0).contains(&self.seconds)
            || heartbeat_percent > 100
            || !(1..=1_000_000).contains(&sample)
        {
            return Err(AdminError::Usage(
                "--concurrency must be 1 to 4096, --seconds 0.1 to 3600, --heartbeat-percent 0 \
                 to 100 and --sample 1 to 1000000"
                    .into(),
            ));
        }
        Ok(())
    }
}

/// `rampart kms bench --kmip`: each operation at each concurrency, on a
/// key found by its KMIP Name (or created, AES-256 and Active).
#[derive(Debug, Clone)]
pub struct KmipBench {
    pub runs: BenchRuns,
    /// The key's KMIP Name.
    pub key: String,
    pub operations: Vec<KmipOperation>,
    pub tls: TlsVersions,
    /// The servers' KMIP addresses; empty: each endpoint host of the
    /// bundle on the standard KMIP port.
    pub addresses: Vec<String>,
}

impl KmipBench {
    /// Runs every operation at every concurrency, in that order.
    pub async fn run(
        &self,
        bundle: &Bundle,
    ) -> Result<Vec<(KmipOperation, Vec<BenchRun>)>, AdminError> {
        let addresses = if self.addresses.is_empty() {
            let mut addresses = Vec::new();
            for endpoint in bundle.endpoints()? {
                let host = if endpoint.host.contains(':') {
                    format!("[{}]", endpoint.host)
                } else {
                    endpoint.host.clone()
                };
                addresses.push(format!("{host}:{DEFAULT_KMIP_PORT}"));
            }
            addresses
        } else {
            self.addresses.clone()
        };
        let failed = |e: KmipClientError| AdminError::Other(Box::new(e));
        let mut client = KmipClient::new(bundle, &addresses, self.tls).map_err(failed)?;
        let uid = match client.locate_name(&self.key).await.map_err(failed)?.into_iter().next() {
            Some(uid) => uid,
            None => client.create_aes(256, Some(&self.key)).await.map_err(failed)?,
        };
        let mut reports = Vec::new();
        for &op in &self.operations {
            let mut runs = Vec::new();
            for &concurrency in &self.runs.concurrency {
                let run = kmip(&client, &uid, op, concurrency, self.runs.duration()).await;
                runs.push(run.map_err(failed)?);
            }
            reports.push((op, runs));
        }
        Ok(reports)
    }
}
