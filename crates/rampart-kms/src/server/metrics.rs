//! Prometheus text metrics: requests by operation and outcome, a latency
//! histogram per operation, refused TLS handshakes, and what the limits
//! against hostile clients cut off.

use std::collections::BTreeMap;
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

#[derive(Debug, Default)]
struct Inner {
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

    pub fn tls_refused(&self) {
        self.lock().tls_refused += 1;
    }

    pub fn audit_failed(&self) {
        self.lock().audit_failures += 1;
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
        ];
        for (name, help, value) in counters {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}");
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
}
