//! Prometheus text metrics: requests by operation and outcome, a latency
//! histogram per operation, refused TLS handshakes, what the limits
//! against hostile clients cut off, operations per client and per key, and
//! the heartbeats of serving hosts.
//!
//! Label values are client names and key names as the store holds them
//! (a request naming a key that does not exist is not counted per key),
//! never strings a client chose, so the number of series is bounded by
//! the deployment's size; [`MAX_SERIES`] caps each map regardless.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::Duration;

const BUCKETS: [f64; 12] =
    [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5];

#[derive(Debug, Default)]
struct Histogram {
    buckets: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

/// Most names (clients, keys) one per-identity map tracks.
pub const MAX_SERIES: usize = 10_000;

type ByOperation = BTreeMap<(&'static str, &'static str), u64>;

/// A client's heartbeats.
#[derive(Debug, Default, Clone, Copy)]
struct Heartbeats {
    allowed: u64,
    refused: u64,
    /// Unix seconds of the last one.
    last: f64,
    /// Whether the last one allowed every key.
    last_allowed: bool,
}

/// Per-name series, looked up on every request (hashed: a fleet's
/// thousands of names would cost a dozen string comparisons each in an
/// ordered map) and sorted only when rendered.
type ByName<T> = HashMap<String, T>;

/// `map`'s entries in name order.
fn sorted<T>(map: &ByName<T>) -> Vec<(&String, &T)> {
    let mut entries: Vec<_> = map.iter().collect();
    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
    entries
}

#[derive(Debug, Default)]
struct Inner {
    by_client: ByName<ByOperation>,
    by_key: ByName<ByOperation>,
    heartbeats: ByName<Heartbeats>,
    /// Unix milliseconds of each known client's last request.
    last_seen: ByName<i64>,
    requests: BTreeMap<(&'static str, &'static str), u64>,
    latency: BTreeMap<&'static str, Histogram>,
    tls_refused: u64,
    audit_failures: u64,
    connections_refused: u64,
    /// When a refused connection was last logged.
    refusal_logged: Option<std::time::Instant>,
    handshake_timeouts: u64,
    rate_limited: u64,
    oversized_headers: u64,
    unchained: u64,
    sink_errors: u64,
    checkpoints: u64,
    checkpoint_failures: u64,
}

/// One operation's requests since the server started.
#[derive(Debug, Clone)]
pub(crate) struct OperationSummary {
    pub operation: &'static str,
    pub requests: u64,
    /// Requests whose outcome was not `ok`.
    pub refused: u64,
    pub mean_seconds: f64,
    /// The histogram bucket bound under which 95 % fell (none: above
    /// the largest bucket).
    pub p95_bound_seconds: Option<f64>,
}

/// The server's counters.
#[derive(Debug, Default)]
pub struct Metrics {
    inner: Mutex<Inner>,
}

/// The outcome label of an HTTP status.
#[must_use]
pub fn outcome(status: u16) -> &'static str {
    match status {
        200..=299 => "ok",
        401 | 403 => "denied",
        429 => "limited",
        503 => "unavailable",
        400..=499 => "invalid",
        _ => "error",
    }
}

impl Metrics {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn record(&self, operation: &'static str, status: u16, elapsed: Duration) {
        let mut inner = self.lock();
        *inner.requests.entry((operation, outcome(status))).or_default() += 1;
        let h = inner.latency.entry(operation).or_default();
        let seconds = elapsed.as_secs_f64();
        for (bucket, bound) in h.buckets.iter_mut().zip(BUCKETS) {
            if seconds <= bound {
                *bucket += 1;
            }
        }
        h.count += 1;
        h.sum += seconds;
    }

    /// Counts a request of a known client (and, when it used one, of a
    /// key the store holds).
    pub fn record_identity(
        &self,
        client: &str,
        key: Option<&str>,
        operation: &'static str,
        status: u16,
    ) {
        let outcome = outcome(status);
        let mut inner = self.lock();
        let add = |map: &mut ByName<ByOperation>, name: &str| {
            // Looked up by `&str` first: no allocation once a name is known.
            if let Some(ops) = map.get_mut(name) {
                *ops.entry((operation, outcome)).or_default() += 1;
            } else if map.len() < MAX_SERIES {
                map.entry(name.to_owned()).or_default().insert((operation, outcome), 1);
            }
        };
        add(&mut inner.by_client, client);
        if let Some(key) = key {
            add(&mut inner.by_key, key);
        }
        let now = crate::model::now_ms();
        if let Some(last) = inner.last_seen.get_mut(client) {
            *last = now;
        } else if inner.last_seen.len() < MAX_SERIES {
            inner.last_seen.insert(client.to_owned(), now);
        }
    }

    /// When `client` last made a request, and its last heartbeat (Unix
    /// milliseconds, and whether it allowed every key), as this server saw
    /// them since it started.
    pub(crate) fn client_activity(&self, client: &str) -> (Option<i64>, Option<(i64, bool)>) {
        let inner = self.lock();
        let heartbeat = inner.heartbeats.get(client).map(|h| {
            #[allow(clippy::cast_possible_truncation)]
            let ms = (h.last * 1000.0) as i64;
            (ms, h.last_allowed)
        });
        (inner.last_seen.get(client).copied(), heartbeat)
    }

    /// Counts a heartbeat of `client`: whether every key it holds is still
    /// allowed.
    pub fn heartbeat(&self, client: &str, allowed: bool) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs_f64();
        let mut inner = self.lock();
        let len = inner.heartbeats.len();
        let entry = match inner.heartbeats.get_mut(client) {
            Some(entry) => entry,
            None if len < MAX_SERIES => inner.heartbeats.entry(client.to_owned()).or_default(),
            None => return,
        };
        if allowed {
            entry.allowed += 1;
        } else {
            entry.refused += 1;
        }
        entry.last = now;
        entry.last_allowed = allowed;
    }

    pub fn tls_refused(&self) {
        self.lock().tls_refused += 1;
    }

    pub fn audit_failed(&self) {
        self.lock().audit_failures += 1;
    }

    /// Counts a request answered without an audit entry (it changed
    /// nothing and revealed no key).
    pub fn unchained(&self) {
        self.lock().unchained += 1;
    }

    /// Counts a batch an audit sink could not take.
    pub fn sink_failed(&self) {
        self.lock().sink_errors += 1;
    }

    /// Counts a checkpoint written, or a checkpoint run that found the
    /// chain broken (and wrote none).
    pub fn checkpoint(&self, written: bool) {
        let mut inner = self.lock();
        if written {
            inner.checkpoints += 1;
        } else {
            inner.checkpoint_failures += 1;
        }
    }

    /// Counts a connection refused over the connection limit; true when
    /// it should be logged (the first of each second).
    pub fn connection_refused(&self) -> bool {
        let mut inner = self.lock();
        inner.connections_refused += 1;
        let now = std::time::Instant::now();
        let log =
            inner.refusal_logged.is_none_or(|at| now.duration_since(at) >= Duration::from_secs(1));
        if log {
            inner.refusal_logged = Some(now);
        }
        log
    }

    pub fn handshake_timed_out(&self) {
        self.lock().handshake_timeouts += 1;
    }

    pub fn rate_limited(&self) {
        self.lock().rate_limited += 1;
    }

    pub fn oversized_headers(&self) {
        self.lock().oversized_headers += 1;
    }

    /// Requests, failures and latency per operation, and refused TLS
    /// handshakes, since the server started (the console's health page).
    pub(crate) fn summary(&self) -> (Vec<OperationSummary>, u64) {
        let inner = self.lock();
        let mut out: Vec<OperationSummary> = inner
            .latency
            .iter()
            .map(|(op, h)| {
                // The smallest bucket bound holding 95 % of the requests.
                let want = h.count - h.count / 20;
                let p95 = BUCKETS.iter().zip(h.buckets).find(|(_, n)| *n >= want).map(|(b, _)| *b);
                OperationSummary {
                    operation: op,
                    requests: h.count,
                    refused: inner
                        .requests
                        .iter()
                        .filter(|((o, outcome), _)| o == op && *outcome != "ok")
                        .map(|(_, n)| n)
                        .sum(),
                    #[allow(clippy::cast_precision_loss)]
                    mean_seconds: if h.count == 0 { 0.0 } else { h.sum / h.count as f64 },
                    p95_bound_seconds: p95,
                }
            })
            .collect();
        out.sort_by(|a, b| b.requests.cmp(&a.requests).then(a.operation.cmp(b.operation)));
        (out, inner.tls_refused)
    }

    /// The Prometheus text exposition.
    #[must_use]
    pub fn render(&self, sealed: bool) -> String {
        let inner = self.lock();
        let mut out = String::new();
        out.push_str("# HELP rampart_kms_requests_total API requests by operation and outcome.\n");
        out.push_str("# TYPE rampart_kms_requests_total counter\n");
        for ((op, outcome), n) in &inner.requests {
            let _ = writeln!(
                out,
                "rampart_kms_requests_total{{operation=\"{op}\",outcome=\"{outcome}\"}} {n}"
            );
        }
        out.push_str("# HELP rampart_kms_request_duration_seconds API request latency.\n");
        out.push_str("# TYPE rampart_kms_request_duration_seconds histogram\n");
        for (op, h) in &inner.latency {
            for (bound, n) in BUCKETS.iter().zip(h.buckets) {
                let _ = writeln!(
                    out,
                    "rampart_kms_request_duration_seconds_bucket{{operation=\"{op}\",le=\"{bound}\"}} {n}"
                );
            }
            let _ = writeln!(
                out,
                "rampart_kms_request_duration_seconds_bucket{{operation=\"{op}\",le=\"+Inf\"}} {}",
                h.count
            );
            let _ = writeln!(
                out,
                "rampart_kms_request_duration_seconds_sum{{operation=\"{op}\"}} {}",
                h.sum
            );
            let _ = writeln!(
                out,
                "rampart_kms_request_duration_seconds_count{{operation=\"{op}\"}} {}",
                h.count
            );
        }
        out.push_str("# HELP rampart_kms_tls_handshakes_refused_total TLS handshakes refused (no, expired or foreign client certificate).\n");
        out.push_str("# TYPE rampart_kms_tls_handshakes_refused_total counter\n");
        let _ = writeln!(out, "rampart_kms_tls_handshakes_refused_total {}", inner.tls_refused);
        out.push_str("# HELP rampart_kms_audit_failures_total Requests refused because the audit entry could not be written.\n");
        out.push_str("# TYPE rampart_kms_audit_failures_total counter\n");
        let _ = writeln!(out, "rampart_kms_audit_failures_total {}", inner.audit_failures);
        let counters = [
            (
                "rampart_kms_connections_refused_total",
                "Connections closed at once because --max-connections were open.",
                inner.connections_refused,
            ),
            (
                "rampart_kms_handshake_timeouts_total",
                "Connections dropped for not finishing the TLS handshake within --handshake-timeout.",
                inner.handshake_timeouts,
            ),
            (
                "rampart_kms_rate_limited_total",
                "Requests answered 429 because their client identity exceeded --rate-limit.",
                inner.rate_limited,
            ),
            (
                "rampart_kms_oversized_headers_total",
                "Requests answered 431 for headers over --max-header-size or --max-headers.",
                inner.oversized_headers,
            ),
            (
                "rampart_kms_requests_unchained_total",
                "Requests answered without an audit entry: health checks, status reads and heartbeats whose answer had not changed.",
                inner.unchained,
            ),
            (
                "rampart_kms_audit_sink_errors_total",
                "Batches of audit entries the file or syslog sink could not take (the store holds them).",
                inner.sink_errors,
            ),
            (
                "rampart_kms_audit_checkpoints_total",
                "Audit checkpoints written after verifying the chain since the previous one.",
                inner.checkpoints,
            ),
            (
                "rampart_kms_audit_checkpoint_failures_total",
                "Checkpoint runs that found the audit chain broken and wrote no checkpoint.",
                inner.checkpoint_failures,
            ),
        ];
        for (name, help, value) in counters {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}");
        }
        for (name, help, map, label) in [
            (
                "rampart_kms_client_operations_total",
                "API requests by registered client, operation and outcome.",
                &inner.by_client,
                "client",
            ),
            (
                "rampart_kms_key_operations_total",
                "API requests on existing keys by key, operation and outcome.",
                &inner.by_key,
                "key",
            ),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
            for (who, ops) in sorted(map) {
                for ((op, outcome), n) in ops {
                    let _ = writeln!(
                        out,
                        "{name}{{{label}=\"{who}\",operation=\"{op}\",outcome=\"{outcome}\"}} {n}"
                    );
                }
            }
        }
        let heartbeats = sorted(&inner.heartbeats);
        out.push_str("# HELP rampart_kms_heartbeats_total Heartbeats of serving hosts by client and verdict (refused: some key may no longer be held).\n");
        out.push_str("# TYPE rampart_kms_heartbeats_total counter\n");
        for (client, h) in &heartbeats {
            let _ = writeln!(
                out,
                "rampart_kms_heartbeats_total{{client=\"{client}\",verdict=\"allowed\"}} {}\nrampart_kms_heartbeats_total{{client=\"{client}\",verdict=\"refused\"}} {}",
                h.allowed, h.refused
            );
        }
        out.push_str("# HELP rampart_kms_heartbeat_last_seconds Unix time of each client's last heartbeat.\n");
        out.push_str("# TYPE rampart_kms_heartbeat_last_seconds gauge\n");
        for (client, h) in &heartbeats {
            let _ = writeln!(
                out,
                "rampart_kms_heartbeat_last_seconds{{client=\"{client}\"}} {}",
                h.last
            );
        }
        out.push_str("# HELP rampart_kms_heartbeat_allowed Whether each client's last heartbeat allowed every key it holds.\n");
        out.push_str("# TYPE rampart_kms_heartbeat_allowed gauge\n");
        for (client, h) in &heartbeats {
            let _ = writeln!(
                out,
                "rampart_kms_heartbeat_allowed{{client=\"{client}\"}} {}",
                u8::from(h.last_allowed)
            );
        }
        out.push_str("# HELP rampart_kms_sealed Whether the server is sealed.\n");
        out.push_str("# TYPE rampart_kms_sealed gauge\n");
        let _ = writeln!(out, "rampart_kms_sealed {}", u8::from(sealed));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_and_histograms() {
        let m = Metrics::default();
        m.record("key.unwrap", 200, Duration::from_micros(700));
        m.record("key.unwrap", 403, Duration::from_millis(30));
        let text = m.render(false);
        assert!(
            text.contains("rampart_kms_requests_total{operation=\"key.unwrap\",outcome=\"ok\"} 1")
        );
        assert!(text
            .contains("rampart_kms_requests_total{operation=\"key.unwrap\",outcome=\"denied\"} 1"));
        assert!(text.contains(
            "rampart_kms_request_duration_seconds_bucket{operation=\"key.unwrap\",le=\"0.001\"} 1"
        ));
        assert!(
            text.contains("rampart_kms_request_duration_seconds_count{operation=\"key.unwrap\"} 2")
        );
    }

    #[test]
    fn per_name_series_are_rendered_in_name_order() {
        let m = Metrics::default();
        for name in ["host-c", "host-a", "host-b"] {
            m.record_identity(name, Some(&name.replace("host", "key")), "key.unwrap", 200);
            m.heartbeat(name, true);
        }
        let text = m.render(false);
        for prefix in [
            "rampart_kms_client_operations_total{client=\"host-",
            "rampart_kms_key_operations_total{key=\"key-",
            "rampart_kms_heartbeats_total{client=\"host-",
            "rampart_kms_heartbeat_allowed{client=\"host-",
        ] {
            let order: Vec<&str> = text
                .lines()
                .filter_map(|l| l.strip_prefix(prefix))
                .map(|rest| &rest[..1])
                .collect();
            assert!(
                order.len() >= 3 && order.windows(2).all(|w| w[0] <= w[1]),
                "{prefix}: {order:?}"
            );
        }
        assert_eq!(m.client_activity("host-a").1.map(|(_, allowed)| allowed), Some(true));
    }
}
