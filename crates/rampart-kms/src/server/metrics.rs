//! Prometheus text metrics: requests by operation and outcome, a latency
//! histogram per operation, and refused TLS handshakes.

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
