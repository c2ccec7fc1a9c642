//! A load generator for the key manager (`rampart kms bench`): unwraps
//! of secrets wrapped under one key or under a random sample of many,
//! optionally mixed with heartbeats, from one identity or from many
//! hosts, each host on its own kept-alive mTLS connection.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rampart_crypto::random_secret;
use rampart_kms::client::{ClientError, KmsClient};
use rampart_kms::deployment::AdminError;
use rampart_kms::model::HeldKey;
use rampart_kms::Bundle;

use crate::bench::BenchRuns;

/// Context the benchmark's secrets are wrapped with.
const CONTEXT: &[u8] = b"bench";

/// One benchmark run's load.
#[derive(Debug, Clone)]
pub struct LoadPlan {
    /// Requests in flight at once (one task each).
    pub concurrency: usize,
    pub duration: Duration,
    /// Percent of requests that are heartbeats (0 to 100) naming the
    /// key of the secret the task would have unwrapped.
    pub heartbeat_percent: u32,
}

/// The secrets a run unwraps: each a ciphertext and the key it is under.
#[derive(Debug, Clone)]
pub struct Workload {
    items: Arc<Vec<(String, HeldKey)>>,
}

impl Workload {
    /// Wraps one fresh 32-byte secret under each of `keys` (as `admin`,
    /// or any client allowed to wrap with them), `parallel` at a time.
    pub async fn wrap(
        admin: &KmsClient,
        keys: Vec<String>,
        parallel: usize,
    ) -> Result<Self, ClientError> {
        let mut items = Vec::with_capacity(keys.len());
        for chunk in keys.chunks(parallel.max(1)) {
            let mut tasks = tokio::task::JoinSet::new();
            for name in chunk {
                let (admin, name) = (admin.clone(), name.clone());
                tasks.spawn(async move {
                    let secret = random_secret(32).map_err(rampart_kms::KmsError::from)?;
                    let ciphertext = admin.wrap(&name, secret.expose(), CONTEXT).await?;
                    Ok::<_, ClientError>((ciphertext, HeldKey { name, version: 1 }))
                });
            }
            while let Some(done) = tasks.join_next().await {
                items.push(done.map_err(|e| ClientError::from(task_failed(&e)))??);
            }
        }
        Ok(Self { items: Arc::new(items) })
    }

    #[must_use]
    pub fn len(&self) -> usize {
        self.items.len()
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

fn task_failed(e: &tokio::task::JoinError) -> rampart_kms::KmsError {
    rampart_kms::KmsError::Config(format!("a benchmark task failed: {e}"))
}

/// What a run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadReport {
    pub unwraps: u64,
    pub heartbeats: u64,
    pub elapsed: Duration,
    /// Latency percentiles of every request, in milliseconds.
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// Distinct client identities (hosts) that sent requests.
    pub hosts: usize,
}

impl LoadReport {
    /// Requests (unwraps and heartbeats) per second.
    #[must_use]
    pub fn per_second(&self) -> f64 {
        (self.unwraps + self.heartbeats) as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// A small per-task generator (xorshift64*): the choice of secret and of
/// request kind needs speed and spread, not secrecy.
struct Pick(u64);

impl Pick {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % n.max(1) as u64).unwrap_or(0)
    }
}

/// Opens every host's connection before the clock starts (one
/// `GET /v1/health` each, `concurrency` at a time), as a fleet holds its
/// connections: otherwise each host's first request in the run pays a
/// full mTLS handshake on both sides, and with 2,000 hosts those are
/// more than one request in a hundred, i.e. the p99 measured handshakes.
async fn connect_all(hosts: &[KmsClient], concurrency: usize) -> Result<(), ClientError> {
    let mut tasks = tokio::task::JoinSet::new();
    let lanes = concurrency.clamp(1, hosts.len().max(1));
    for lane in 0..lanes {
        let mine: Vec<KmsClient> = hosts.iter().skip(lane).step_by(lanes).cloned().collect();
        tasks.spawn(async move {
            for host in &mine {
                host.health().await?;
            }
            Ok::<_, ClientError>(())
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.map_err(|e| ClientError::from(task_failed(&e)))??;
    }
    Ok(())
}

/// Runs `plan` against `hosts` (each a client with its own identity and
/// connections; task `t` speaks as hosts `t`, `t + concurrency`, ... in
/// turn): unwraps of a random secret of `work`, heartbeats about the
/// host's own secret. Every host is connected before the run is timed
/// (see [`connect_all`]).
pub async fn run(
    hosts: &[KmsClient],
    work: &Workload,
    plan: &LoadPlan,
) -> Result<LoadReport, ClientError> {
    if hosts.is_empty() || work.is_empty() || plan.concurrency == 0 {
        return Err(ClientError::from(rampart_kms::KmsError::InvalidRequest(
            "a benchmark needs a client, a secret and a concurrency of at least 1".into(),
        )));
    }
    connect_all(hosts, plan.concurrency).await?;
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    let seed = u64::from_le_bytes(
        random_secret(8)
            .map_err(rampart_kms::KmsError::from)?
            .expose()
            .try_into()
            .unwrap_or([0x5eu8; 8]),
    ) | 1;
    for t in 0..plan.concurrency {
        // Each host holds one secret of its own (host `h` the secret
        // `h % secrets`) and checks in about that one, as an agent reports
        // the keys it holds: an unchanged check-in is then quiet on any
        // store. Unwraps pick any secret.
        let mine: Vec<(usize, KmsClient)> = hosts
            .iter()
            .enumerate()
            .skip(t % hosts.len())
            .step_by(plan.concurrency)
            .map(|(index, host)| (index, host.clone()))
            .collect();
        // More tasks than hosts: tasks share them round robin.
        let mine = if mine.is_empty() {
            vec![(t % hosts.len(), hosts[t % hosts.len()].clone())]
        } else {
            mine
        };
        let items = Arc::clone(&work.items);
        let (duration, heartbeat) = (plan.duration, plan.heartbeat_percent);
        let mut pick = Pick(seed.wrapping_add((t as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)) | 1);
        tasks.spawn(async move {
            let mut latencies = Vec::with_capacity(1 << 16);
            let (mut unwraps, mut heartbeats) = (0u64, 0u64);
            let mut turn = 0usize;
            while start.elapsed() < duration {
                let (index, host) = &mine[turn % mine.len()];
                turn = turn.wrapping_add(1);
                let beat = heartbeat > 0 && pick.below(100) < heartbeat as usize;
                let t = Instant::now();
                if beat {
                    let (_, held) = &items[index % items.len()];
                    host.heartbeat(std::slice::from_ref(held)).await?;
                    heartbeats += 1;
                } else {
                    let (ciphertext, _) = &items[pick.below(items.len())];
                    host.unwrap(ciphertext, CONTEXT).await?;
                    unwraps += 1;
                }
                latencies.push(t.elapsed());
            }
            Ok::<_, ClientError>((latencies, unwraps, heartbeats))
        });
    }
    let mut all = Vec::new();
    let (mut unwraps, mut heartbeats) = (0u64, 0u64);
    while let Some(done) = tasks.join_next().await {
        let (latencies, u, h) = done.map_err(|e| ClientError::from(task_failed(&e)))??;
        all.extend(latencies);
        unwraps += u;
        heartbeats += h;
    }
    let elapsed = start.elapsed();
    let run = crate::bench::BenchRun::from_latencies(plan.concurrency, all, elapsed);
    Ok(LoadReport {
        unwraps,
        heartbeats,
        elapsed,
        p50_ms: run.p50_ms,
        p99_ms: run.p99_ms,
        hosts: hosts.len(),
    })
}

/// Who speaks in a benchmark.
#[derive(Debug, Clone)]
pub enum BenchHosts {
    /// One client identity.
    One(KmsClient),
    /// Every `DIR/*.bundle`, each a host with its own connections.
    Bundles(PathBuf),
}

/// `rampart kms bench` over REST: unwraps (and heartbeats) under one key
/// or a random sample of many, at each concurrency in turn.
#[derive(Debug, Clone)]
pub struct UnwrapBench {
    pub runs: BenchRuns,
    /// The key; with `key_count`, the name prefix of `KEY0000000` to
    /// `KEY(N-1)`, as `kms populate` names them.
    pub key: String,
    pub key_count: Option<u64>,
    /// With `key_count`: how many keys, picked at random, get a secret.
    pub sample: u64,
    /// Percent of requests that are heartbeats instead of unwraps.
    pub heartbeat_percent: u32,
    pub hosts: BenchHosts,
}

/// One run of an [`UnwrapBench`].
#[derive(Debug, Clone, PartialEq)]
pub struct UnwrapRun {
    pub concurrency: usize,
    /// Secrets (one per key) the run unwrapped from.
    pub keys: usize,
    pub report: LoadReport,
}

impl UnwrapBench {
    /// The keys secrets are wrapped under: `key`, or `sample` of the
    /// `key_count` keys picked at random.
    fn keys(&self) -> Result<Vec<String>, AdminError> {
        let n = match self.key_count {
            None => return Ok(vec![self.key.clone()]),
            Some(0) => return Err(AdminError::Usage("--key-count must be at least 1".into())),
            Some(n) => n,
        };
        let seed = random_secret(8).map_err(rampart_kms::KmsError::from)?;
        let mut x = u64::from_le_bytes(seed.expose().try_into().unwrap_or([7; 8])) | 1;
        Ok((0..self.sample.min(n))
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                format!("{}{:07}", self.key, x % n)
            })
            .collect())
    }

    /// The clients the run speaks as.
    fn clients(&self) -> Result<Vec<KmsClient>, AdminError> {
        let dir = match &self.hosts {
            BenchHosts::One(client) => return Ok(vec![client.clone()]),
            BenchHosts::Bundles(dir) => dir,
        };
        let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(|e| AdminError::io("cannot read", dir, &e))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "bundle"))
            .collect();
        paths.sort();
        if paths.is_empty() {
            return Err(AdminError::Usage(format!("{} holds no .bundle file", dir.display())));
        }
        paths.iter().map(|p| Ok(KmsClient::new(&Bundle::read(p)?)?)).collect()
    }

    /// Wraps the secrets (as the first host: keys allow their hosts, not
    /// necessarily the admin), then runs at each concurrency.
    pub async fn run(&self) -> Result<Vec<UnwrapRun>, AdminError> {
        let keys = self.keys()?;
        let hosts = self.clients()?;
        let work = Workload::wrap(&hosts[0], keys, 32).await?;
        let mut runs = Vec::new();
        for &concurrency in &self.runs.concurrency {
            let plan = LoadPlan {
                concurrency,
                duration: self.runs.duration(),
                heartbeat_percent: self.heartbeat_percent,
            };
            let report = run(&hosts, &work, &plan).await?;
            runs.push(UnwrapRun { concurrency, keys: work.len(), report });
        }
        Ok(runs)
    }
}
