//! Prometheus metrics of a server: per export, requests, bytes and errors
//! by request type, bytes in flight, request latency histograms and
//! connections; per server, TLS handshakes and refused connections.
//!
//! Recording is a handful of relaxed atomic additions per request into
//! arrays fixed when the server is built: no lock, no allocation, no map
//! lookup on the request path. Rendering (one scrape) walks the arrays and
//! formats the text exposition format (version 0.0.4).

use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use crate::proto::*;

/// Request types, as the `type` label names them.
const TYPES: [&str; 8] =
    ["read", "write", "flush", "trim", "write_zeroes", "cache", "block_status", "other"];

/// The index of a request type in [`TYPES`].
#[must_use]
pub(crate) fn type_index(kind: u16) -> usize {
    match kind {
        CMD_READ => 0,
        CMD_WRITE => 1,
        CMD_FLUSH => 2,
        CMD_TRIM => 3,
        CMD_WRITE_ZEROES => 4,
        CMD_CACHE => 5,
        CMD_BLOCK_STATUS => 6,
        _ => 7,
    }
}

/// Upper bounds of the latency buckets, in seconds: from a page-cache hit
/// (tens of microseconds) to a flush of a slow disk (seconds).
const BUCKETS: [f64; 16] = [
    0.000_025, 0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1,
    0.25, 0.5, 1.0, 5.0,
];
/// The same bounds in nanoseconds, for comparing without floating point.
const BUCKETS_NS: [u64; 16] = [
    25_000,
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    5_000_000_000,
];

/// Counters of one request type.
#[derive(Debug, Default)]
struct TypeCounters {
    requests: AtomicU64,
    bytes: AtomicU64,
    errors: AtomicU64,
    /// Per bucket, not cumulative (one addition per observation); the last
    /// slot counts requests slower than every bound.
    latency: [AtomicU64; BUCKETS.len() + 1],
    latency_sum_ns: AtomicU64,
}

/// The metrics of one export.
#[derive(Debug, Default)]
pub(crate) struct ExportMetrics {
    types: [TypeCounters; TYPES.len()],
    /// Payload bytes of requests received but not yet answered.
    inflight_bytes: AtomicI64,
    connections: AtomicI64,
    connections_total: AtomicU64,
    /// 1 while served; 0 once closed (revoked, grace expired).
    closed: std::sync::atomic::AtomicBool,
}

impl ExportMetrics {
    /// A request was read.
    pub(crate) fn request(&self, kind: u16) {
        self.types[type_index(kind)].requests.fetch_add(1, Ordering::Relaxed);
    }

    /// A request of `len` bytes was answered (its reply written) `elapsed`
    /// after it was read; the bytes of successful ones are counted.
    pub(crate) fn answered(&self, kind: u16, len: u32, failed: bool, elapsed: Duration) {
        let counters = &self.types[type_index(kind)];
        if failed {
            counters.errors.fetch_add(1, Ordering::Relaxed);
        } else if matches!(kind, CMD_READ | CMD_WRITE | CMD_TRIM | CMD_WRITE_ZEROES | CMD_CACHE) {
            counters.bytes.fetch_add(u64::from(len), Ordering::Relaxed);
        }
        let ns = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        let bucket = BUCKETS_NS.iter().position(|&bound| ns <= bound).unwrap_or(BUCKETS.len());
        counters.latency[bucket].fetch_add(1, Ordering::Relaxed);
        counters.latency_sum_ns.fetch_add(ns, Ordering::Relaxed);
    }

    pub(crate) fn inflight(&self, bytes: i64) {
        self.inflight_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    pub(crate) fn connected(&self) {
        self.connections.fetch_add(1, Ordering::Relaxed);
        self.connections_total.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn disconnected(&self) {
        self.connections.fetch_sub(1, Ordering::Relaxed);
    }

    /// Connections in transmission on this export now.
    pub(crate) fn open_connections(&self) -> i64 {
        self.connections.load(Ordering::Relaxed)
    }

    pub(crate) fn mark_closed(&self) {
        self.closed.store(true, Ordering::Relaxed);
    }
}

/// Counters over the server's life, logged on exit.
#[derive(Debug, Default)]
pub struct Stats {
    pub connections: AtomicU64,
    pub failed_connections: AtomicU64,
    pub requests: AtomicU64,
    pub bytes_read: AtomicU64,
    pub bytes_written: AtomicU64,
    pub request_errors: AtomicU64,
    /// Connections closed at once because `max_connections` were open.
    pub refused_connections: AtomicU64,
    /// Connections cut off by a handshake, idle or stall timeout.
    pub timed_out_connections: AtomicU64,
}

impl std::fmt::Display for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        write!(
            f,
            "{} connections ({} ended by errors, {} timed out, {} refused over the limit), {} requests ({} failed), {} bytes read, {} bytes written",
            get(&self.connections),
            get(&self.failed_connections),
            get(&self.timed_out_connections),
            get(&self.refused_connections),
            get(&self.requests),
            get(&self.request_errors),
            get(&self.bytes_read),
            get(&self.bytes_written)
        )
    }
}

/// Counters of the whole server (before an export is chosen).
#[derive(Debug, Default)]
pub(crate) struct ServerMetrics {
    pub(crate) tls_ok: AtomicU64,
    pub(crate) tls_failed: AtomicU64,
    /// With kernel TLS asked for: sessions handed to the kernel, and
    /// connections kept in user space because the kernel refused.
    pub(crate) kernel_tls_offloaded: AtomicU64,
    pub(crate) kernel_tls_refused: AtomicU64,
}

/// Holds bytes in the in-flight gauge of an export until dropped.
#[derive(Debug)]
pub(crate) struct InflightGauge {
    metrics: std::sync::Arc<ExportMetrics>,
    bytes: i64,
}

impl InflightGauge {
    pub(crate) fn new(metrics: &std::sync::Arc<ExportMetrics>, bytes: u32) -> Self {
        let bytes = i64::from(bytes);
        metrics.inflight(bytes);
        Self { metrics: std::sync::Arc::clone(metrics), bytes }
    }
}

impl Drop for InflightGauge {
    fn drop(&mut self) {
        self.metrics.inflight(-self.bytes);
    }
}

/// Escapes a label value as the text format wants (`\`, `"`, newline).
fn escape(value: &str, out: &mut String) {
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// Renders the exposition text of every export (by name) and the server.
pub(crate) fn render(
    exports: &[(String, std::sync::Arc<ExportMetrics>)],
    server: &ServerMetrics,
    stats: &Stats,
) -> String {
    let mut out = String::with_capacity(4096 + exports.len() * 8192);
    let labels: Vec<String> = exports
        .iter()
        .map(|(name, _)| {
            let mut label = String::from("export=\"");
            escape(name, &mut label);
            label.push('"');
            label
        })
        .collect();
    let load = |a: &AtomicU64| a.load(Ordering::Relaxed);

    type Field = fn(&TypeCounters) -> &AtomicU64;
    let per_type: [(&str, &str, Field); 3] = [
        ("rampart_nbd_requests_total", "NBD requests received, by export and type.", |c| {
            &c.requests
        }),
        (
            "rampart_nbd_request_bytes_total",
            "Bytes covered by successful NBD requests (read, write, trim, write_zeroes, cache), by export and type.",
            |c| &c.bytes,
        ),
        ("rampart_nbd_request_errors_total", "NBD requests answered with an error, by export and type.", |c| {
            &c.errors
        }),
    ];
    for (name, help, field) in per_type {
        header(&mut out, name, "counter", help);
        for ((_, metrics), label) in exports.iter().zip(&labels) {
            for (kind, counters) in TYPES.iter().zip(&metrics.types) {
                let _ =
                    writeln!(out, "{name}{{{label},type=\"{kind}\"}} {}", load(field(counters)));
            }
        }
    }

    let name = "rampart_nbd_request_duration_seconds";
    header(&mut out, name, "histogram", "Time from reading an NBD request to writing its reply.");
    for ((_, metrics), label) in exports.iter().zip(&labels) {
        for (kind, counters) in TYPES.iter().zip(&metrics.types) {
            let mut cumulative = 0u64;
            for (bound, count) in BUCKETS.iter().zip(&counters.latency) {
                cumulative += load(count);
                let _ = writeln!(
                    out,
                    "{name}_bucket{{{label},type=\"{kind}\",le=\"{bound}\"}} {cumulative}"
                );
            }
            cumulative += load(&counters.latency[BUCKETS.len()]);
            let _ =
                writeln!(out, "{name}_bucket{{{label},type=\"{kind}\",le=\"+Inf\"}} {cumulative}");
            let sum = load(&counters.latency_sum_ns) as f64 / 1e9;
            let _ = writeln!(out, "{name}_sum{{{label},type=\"{kind}\"}} {sum}");
            let _ = writeln!(out, "{name}_count{{{label},type=\"{kind}\"}} {cumulative}");
        }
    }

    type Gauge = fn(&ExportMetrics) -> i64;
    let gauges: [(&str, &str, &str, Gauge); 4] = [
        (
            "rampart_nbd_inflight_bytes",
            "gauge",
            "Payload bytes of requests received and not yet answered.",
            |m| m.inflight_bytes.load(Ordering::Relaxed).max(0),
        ),
        ("rampart_nbd_open_connections", "gauge", "Connections in transmission on the export.", |m| {
            m.connections.load(Ordering::Relaxed).max(0)
        }),
        ("rampart_nbd_connections_total", "counter", "Connections that entered transmission on the export.", |m| {
            i64::try_from(m.connections_total.load(Ordering::Relaxed)).unwrap_or(i64::MAX)
        }),
        (
            "rampart_nbd_export_up",
            "gauge",
            "1 while the export is served; 0 once it was closed (key revoked or unreachable past the grace period).",
            |m| i64::from(!m.closed.load(Ordering::Relaxed)),
        ),
    ];
    for (name, kind, help, value) in gauges {
        header(&mut out, name, kind, help);
        for ((_, metrics), label) in exports.iter().zip(&labels) {
            let _ = writeln!(out, "{name}{{{label}}} {}", value(metrics));
        }
    }

    let name = "rampart_nbd_tls_handshakes_total";
    header(&mut out, name, "counter", "STARTTLS handshakes, by result.");
    let _ = writeln!(out, "{name}{{result=\"ok\"}} {}", load(&server.tls_ok));
    let _ = writeln!(out, "{name}{{result=\"failed\"}} {}", load(&server.tls_failed));
    let name = "rampart_nbd_kernel_tls_sessions_total";
    header(
        &mut out,
        name,
        "counter",
        "With --ktls: TLS sessions handed to the kernel, or kept in user space.",
    );
    let _ = writeln!(out, "{name}{{result=\"offloaded\"}} {}", load(&server.kernel_tls_offloaded));
    let _ = writeln!(out, "{name}{{result=\"user_space\"}} {}", load(&server.kernel_tls_refused));
    let server_counters = [
        (
            "rampart_nbd_accepted_connections_total",
            "Connections accepted (before option haggling).",
            &stats.connections,
        ),
        (
            "rampart_nbd_failed_connections_total",
            "Connections ended by a protocol or I/O error.",
            &stats.failed_connections,
        ),
        (
            "rampart_nbd_timed_out_connections_total",
            "Connections cut off by a handshake, idle or stall timeout.",
            &stats.timed_out_connections,
        ),
        (
            "rampart_nbd_refused_connections_total",
            "Connections closed at once because --max-connections were open.",
            &stats.refused_connections,
        ),
    ];
    for (name, help, counter) in server_counters {
        header(&mut out, name, "counter", help);
        let _ = writeln!(out, "{name} {}", load(counter));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_lands_in_the_first_bucket_that_holds_it() {
        let m = ExportMetrics::default();
        m.request(CMD_READ);
        m.answered(CMD_READ, 4096, false, Duration::from_micros(30));
        m.request(CMD_WRITE);
        m.answered(CMD_WRITE, 512, true, Duration::from_secs(9));
        let exports = vec![("a\"b".to_owned(), std::sync::Arc::new(m))];
        let text = render(&exports, &ServerMetrics::default(), &Stats::default());
        assert!(text.contains("rampart_nbd_requests_total{export=\"a\\\"b\",type=\"read\"} 1"));
        assert!(
            text.contains("rampart_nbd_request_bytes_total{export=\"a\\\"b\",type=\"read\"} 4096")
        );
        assert!(text.contains(
            "rampart_nbd_request_duration_seconds_bucket{export=\"a\\\"b\",type=\"read\",le=\"0.000025\"} 0"
        ));
        assert!(text.contains(
            "rampart_nbd_request_duration_seconds_bucket{export=\"a\\\"b\",type=\"read\",le=\"0.00005\"} 1"
        ));
        assert!(text.contains(
            "rampart_nbd_request_duration_seconds_bucket{export=\"a\\\"b\",type=\"write\",le=\"5\"} 0"
        ));
        assert!(text.contains(
            "rampart_nbd_request_duration_seconds_bucket{export=\"a\\\"b\",type=\"write\",le=\"+Inf\"} 1"
        ));
        assert!(
            text.contains("rampart_nbd_request_errors_total{export=\"a\\\"b\",type=\"write\"} 1")
        );
        assert!(text.contains("rampart_nbd_export_up{export=\"a\\\"b\"} 1"));
    }
}
