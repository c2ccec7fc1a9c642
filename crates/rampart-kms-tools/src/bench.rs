//! Load generators for `rampart kms bench`: N workers, each on its own
//! kept-open connection, repeat one operation for a fixed time; the result
//! is operations per second and latency percentiles.

use std::time::{Duration, Instant};

use serde::Serialize;

use rampart_kms::deployment::AdminError;
use rampart_kms::kmip::{
    EcCurve, KeyPairKind, KmipClient, KmipClientError, SignatureAlgorithm, TlsVersions,
};
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
    /// AES-256-GCM Encrypt of a 4 KiB payload.
    EncryptGcm4k,
    /// Create Key Pair of a new RSA-2048 pair each time (unnamed, not
    /// activated).
    CreateKeyPairRsa2048,
    /// Create Key Pair of a new EC P-256 pair each time.
    CreateKeyPairEcP256,
    /// Sign of a 64-byte message, ECDSA P-256 with SHA-256.
    SignEcdsaP256,
    /// Sign of a 64-byte message, RSA-2048 PSS with SHA-256.
    SignRsa2048Pss,
    /// Get of an X.509 certificate.
    GetCertificate,
}

impl KmipOperation {
    /// Every operation, in the order of the report.
    pub const ALL: [Self; 8] = [
        Self::Get,
        Self::EncryptGcm,
        Self::EncryptGcm4k,
        Self::CreateKeyPairRsa2048,
        Self::CreateKeyPairEcP256,
        Self::SignEcdsaP256,
        Self::SignRsa2048Pss,
        Self::GetCertificate,
    ];

    /// The name in the report (`get`, `encrypt-aes-256-gcm`,
    /// `sign-ecdsa-p256`...).
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Get => "get",
            Self::EncryptGcm => "encrypt-aes-256-gcm",
            Self::EncryptGcm4k => "encrypt-aes-256-gcm-4k",
            Self::CreateKeyPairRsa2048 => "create-key-pair-rsa-2048",
            Self::CreateKeyPairEcP256 => "create-key-pair-ec-p256",
            Self::SignEcdsaP256 => "sign-ecdsa-p256",
            Self::SignRsa2048Pss => "sign-rsa-2048-pss",
            Self::GetCertificate => "get-certificate",
        }
    }

    /// The operation of a report name.
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|op| op.name() == name)
    }

    /// The object the runs work on, made once before them when it is not
    /// there: the AES key for Get and Encrypt, a key pair for Sign, a
    /// certificate for its Get; none for Create Key Pair.
    fn subject(self) -> Subject {
        match self {
            Self::Get | Self::EncryptGcm | Self::EncryptGcm4k => Subject::AesKey,
            Self::CreateKeyPairRsa2048 | Self::CreateKeyPairEcP256 => Subject::None,
            Self::SignEcdsaP256 => Subject::KeyPair(KeyPairKind::Ec(EcCurve::P256)),
            Self::SignRsa2048Pss => Subject::KeyPair(KeyPairKind::Rsa(2048)),
            Self::GetCertificate => Subject::Certificate,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Subject {
    None,
    AesKey,
    KeyPair(KeyPairKind),
    Certificate,
}

async fn kmip_once(
    client: &mut KmipClient,
    uid: &str,
    op: KmipOperation,
    payload: &[u8],
) -> Result<(), KmipClientError> {
    match op {
        KmipOperation::Get => client.get(uid).await.map(drop),
        KmipOperation::EncryptGcm | KmipOperation::EncryptGcm4k => {
            client.encrypt_gcm(uid, payload).await.map(drop)
        }
        KmipOperation::CreateKeyPairRsa2048 => {
            client.create_key_pair(KeyPairKind::Rsa(2048), None, false).await.map(drop)
        }
        KmipOperation::CreateKeyPairEcP256 => {
            client.create_key_pair(KeyPairKind::Ec(EcCurve::P256), None, false).await.map(drop)
        }
        KmipOperation::SignEcdsaP256 => {
            client.sign(uid, SignatureAlgorithm::EcdsaSha256, payload).await.map(drop)
        }
        KmipOperation::SignRsa2048Pss => {
            let signature = client.sign(uid, SignatureAlgorithm::RsaPssSha256, payload).await?;
            // Anything else is not an RSA-2048 signature.
            if signature.len() != 256 {
                return Err(KmipClientError::Protocol {
                    address: client.connected_to().unwrap_or_default().to_owned(),
                    message: format!("a {}-byte RSA-2048 signature", signature.len()),
                });
            }
            Ok(())
        }
        KmipOperation::GetCertificate => client.get_certificate(uid).await.map(drop),
    }
}

/// Repeats `op` on object `uid` (unused by Create Key Pair) for `duration`
/// in `concurrency` workers, each with its own connection (opened, and
/// used once, before the clock starts: the handshakes are not measured).
pub async fn kmip(
    client: &KmipClient,
    uid: &str,
    op: KmipOperation,
    concurrency: usize,
    duration: Duration,
) -> Result<BenchRun, KmipClientError> {
    let mut payload = vec![0u8; if op == KmipOperation::EncryptGcm4k { 4096 } else { 64 }];
    rampart_crypto::fill_random(&mut payload)?;
    let payload: std::sync::Arc<[u8]> = payload.into();
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
        let payload = std::sync::Arc::clone(&payload);
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

/// `rampart kms bench --kmip`: each operation at each concurrency, on
/// objects found by their KMIP Names or made before the runs: the AES-256
/// key `key` (Active), the key pairs `key-ecdsa-p256` and `key-rsa-2048`
/// (their public keys `...-public`, all Active) and the certificate
/// `key-certificate` (an ECDSA P-256 X.509 one from a throwaway CA,
/// registered).
#[derive(Debug, Clone)]
pub struct KmipBench {
    pub runs: BenchRuns,
    /// The key's KMIP Name, and the prefix of the other objects' names.
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
        let mut reports = Vec::new();
        for &op in &self.operations {
            let uid = self.subject(&mut client, op.subject()).await?;
            let mut runs = Vec::new();
            for &concurrency in &self.runs.concurrency {
                let run = kmip(&client, &uid, op, concurrency, self.runs.duration()).await;
                runs.push(run.map_err(failed)?);
            }
            reports.push((op, runs));
        }
        Ok(reports)
    }

    /// The Unique Identifier of the object an operation works on (empty
    /// for none), found by its Name or made.
    async fn subject(
        &self,
        client: &mut KmipClient,
        subject: Subject,
    ) -> Result<String, AdminError> {
        let failed = |e: KmipClientError| AdminError::Other(Box::new(e));
        let name = match subject {
            Subject::None => return Ok(String::new()),
            Subject::AesKey => self.key.clone(),
            Subject::KeyPair(KeyPairKind::Rsa(bits)) => format!("{}-rsa-{bits}", self.key),
            Subject::KeyPair(_) => format!("{}-ecdsa-p256", self.key),
            Subject::Certificate => format!("{}-certificate", self.key),
        };
        if let Some(uid) = client.locate_name(&name).await.map_err(failed)?.into_iter().next() {
            return Ok(uid);
        }
        match subject {
            Subject::None => Ok(String::new()),
            Subject::AesKey => client.create_aes(256, Some(&name)).await.map_err(failed),
            Subject::KeyPair(kind) => {
                let public = format!("{name}-public");
                let ids = client.create_key_pair(kind, Some((&name, &public)), true).await;
                Ok(ids.map_err(failed)?.private_key)
            }
            Subject::Certificate => {
                let der = bench_certificate()?;
                client.register_certificate(&der, Some(&name)).await.map_err(failed)
            }
        }
    }
}

/// An X.509 certificate to register: a server's (ECDSA P-256) from a
/// throwaway CA.
fn bench_certificate() -> Result<Vec<u8>, AdminError> {
    let (ca, _) = rampart_kms::pki::Authority::generate("bench")?;
    let cert = ca.issue_server(&[], 30)?;
    Ok(rampart_kms::pki::pem_to_der(&cert.cert_pem)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_operation_has_its_own_name_and_is_found_by_it() {
        let names: std::collections::HashSet<_> =
            KmipOperation::ALL.iter().map(|op| op.name()).collect();
        assert_eq!(names.len(), KmipOperation::ALL.len());
        for op in KmipOperation::ALL {
            assert_eq!(KmipOperation::from_name(op.name()), Some(op));
        }
        assert_eq!(KmipOperation::from_name("sign"), None);
    }

    #[test]
    fn only_create_key_pair_runs_without_an_object_and_signs_use_their_own_pairs() {
        for op in KmipOperation::ALL {
            let none = op.subject() == Subject::None;
            assert_eq!(
                none,
                matches!(
                    op,
                    KmipOperation::CreateKeyPairRsa2048 | KmipOperation::CreateKeyPairEcP256
                ),
                "{op:?}"
            );
        }
        assert_eq!(
            KmipOperation::SignRsa2048Pss.subject(),
            Subject::KeyPair(KeyPairKind::Rsa(2048))
        );
        assert_eq!(
            KmipOperation::SignEcdsaP256.subject(),
            Subject::KeyPair(KeyPairKind::Ec(EcCurve::P256))
        );
    }
}
