//! Limits against hostile or broken clients: how many connections, how
//! long a handshake or an idle connection may take, how large a request's
//! headers may be, and how many requests each client identity may make.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The server's limits; [`Limits::default`] is what `rampart kms serve`
/// uses without flags.
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    /// TLS connections served at once; further ones are closed at once
    /// (and counted in `rampart_kms_connections_refused_total`).
    pub max_connections: usize,
    /// Time from accepting a connection to the end of its TLS handshake; a
    /// client that sends nothing, or stalls mid-handshake, is dropped.
    pub handshake_timeout: Duration,
    /// Time a kept-alive connection may wait for its next request, and a
    /// request for the end of its headers; then it is closed. Also bounds
    /// how long the server waits for a client to take a response.
    pub idle_timeout: Duration,
    /// Requests per second each client identity (certificate) may make on
    /// average; 0: no limit. Beyond it: 429 with `Retry-After`.
    pub rate: f64,
    /// Requests an identity may make at once above the average rate.
    pub burst: u32,
    /// Largest request head (request line and headers) in bytes; larger
    /// ones are answered 431 and the connection is closed.
    pub max_header_bytes: usize,
    /// Most header fields in one request (431 beyond).
    pub max_headers: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_connections: 4096,
            handshake_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            rate: 1000.0,
            burst: 2000,
            max_header_bytes: 16 * 1024,
            // hyper's own default, which keeps header parsing on the stack.
            max_headers: HYPER_MAX_HEADERS,
        }
    }
}

/// Smallest head limit accepted.
pub(crate) const MIN_HEADER_BYTES: usize = 8192;
/// hyper's default header count; any other costs a heap allocation per request.
pub(crate) const HYPER_MAX_HEADERS: usize = 100;

impl Limits {
    /// Checks the values; the error names the offending one.
    pub fn validate(&self) -> Result<(), String> {
        if self.max_connections == 0 {
            return Err("max connections must be at least 1".into());
        }
        if self.handshake_timeout.is_zero() || self.idle_timeout.is_zero() {
            return Err("timeouts must be longer than zero".into());
        }
        if !self.rate.is_finite() || self.rate < 0.0 {
            return Err("the rate limit must be a non-negative number".into());
        }
        if self.rate > 0.0 && self.burst == 0 {
            return Err("the burst must be at least 1".into());
        }
        if self.max_header_bytes < MIN_HEADER_BYTES {
            return Err(format!("the header size limit must be at least {MIN_HEADER_BYTES} bytes"));
        }
        if self.max_headers == 0 {
            return Err("at least one header must be allowed".into());
        }
        Ok(())
    }
}

/// Buckets kept at most; past it, full (long idle) buckets are forgotten.
const MAX_BUCKETS: usize = 65_536;

/// A token bucket per client identity.
#[derive(Debug)]
pub(crate) struct RateLimiter {
    rate: f64,
    burst: f64,
    buckets: Mutex<HashMap<String, Bucket>>,
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
    /// Refusing since the last admitted request: only the first refusal of
    /// a run is audited, so a flood cannot flood the audit log.
    refusing: bool,
}

/// The verdict on one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admission {
    Admitted,
    /// Over the limit; `first` for the first refusal since an admitted
    /// request; `retry_after` in whole seconds (at least 1).
    Refused {
        retry_after: u64,
        first: bool,
    },
}

impl RateLimiter {
    pub(crate) fn new(limits: &Limits) -> Self {
        Self { rate: limits.rate, burst: f64::from(limits.burst), buckets: Mutex::default() }
    }

    pub(crate) fn admit(&self, identity: &str) -> Admission {
        self.admit_at(identity, Instant::now())
    }

    fn admit_at(&self, identity: &str, now: Instant) -> Admission {
        if self.rate <= 0.0 {
            return Admission::Admitted;
        }
        let mut buckets = self.buckets.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if buckets.len() >= MAX_BUCKETS && !buckets.contains_key(identity) {
            let (rate, burst) = (self.rate, self.burst);
            buckets.retain(|_, b| {
                b.tokens + now.saturating_duration_since(b.at).as_secs_f64() * rate < burst
            });
        }
        let bucket = buckets.entry(identity.to_owned()).or_insert(Bucket {
            tokens: self.burst,
            at: now,
            refusing: false,
        });
        let elapsed = now.saturating_duration_since(bucket.at).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * self.rate).min(self.burst);
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            bucket.refusing = false;
            return Admission::Admitted;
        }
        let first = !bucket.refusing;
        bucket.refusing = true;
        let wait = (1.0 - bucket.tokens) / self.rate;
        // `wait` is positive and at most 1/rate seconds: the cast is exact
        // enough and cannot overflow for any rate above 1e-18.
        let retry_after = (wait.ceil() as u64).max(1);
        Admission::Refused { retry_after, first }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limiter(rate: f64, burst: u32) -> RateLimiter {
        RateLimiter::new(&Limits { rate, burst, ..Limits::default() })
    }

    #[test]
    fn admits_the_burst_then_the_rate_per_identity() {
        let limiter = limiter(10.0, 3);
        let t0 = Instant::now();
        for _ in 0..3 {
            assert_eq!(limiter.admit_at("a", t0), Admission::Admitted);
        }
        assert_eq!(limiter.admit_at("a", t0), Admission::Refused { retry_after: 1, first: true });
        assert_eq!(limiter.admit_at("a", t0), Admission::Refused { retry_after: 1, first: false });
        // Another identity has its own bucket.
        assert_eq!(limiter.admit_at("b", t0), Admission::Admitted);
        // A tenth of a second later, one token has come back.
        let later = t0 + Duration::from_millis(101);
        assert_eq!(limiter.admit_at("a", later), Admission::Admitted);
        assert_eq!(
            limiter.admit_at("a", later),
            Admission::Refused { retry_after: 1, first: true }
        );
    }

    #[test]
    fn slow_rates_ask_for_longer_waits_and_zero_is_off() {
        let limiter = limiter(0.25, 1);
        let t0 = Instant::now();
        assert_eq!(limiter.admit_at("a", t0), Admission::Admitted);
        assert_eq!(limiter.admit_at("a", t0), Admission::Refused { retry_after: 4, first: true });
        let off = super::RateLimiter::new(&Limits { rate: 0.0, ..Limits::default() });
        for _ in 0..10_000 {
            assert_eq!(off.admit_at("a", t0), Admission::Admitted);
        }
    }

    #[test]
    fn forgets_idle_buckets_past_the_cap() {
        let limiter = limiter(1000.0, 1);
        let t0 = Instant::now();
        for i in 0..MAX_BUCKETS {
            limiter.admit_at(&i.to_string(), t0);
        }
        let later = t0 + Duration::from_secs(1);
        limiter.admit_at("new", later);
        assert_eq!(limiter.buckets.lock().unwrap().len(), 1);
    }

    #[test]
    fn validation_names_the_bad_value() {
        assert!(Limits::default().validate().is_ok());
        let bad = Limits { max_header_bytes: 100, ..Limits::default() };
        assert!(bad.validate().unwrap_err().contains("header size"));
        let bad = Limits { rate: f64::NAN, ..Limits::default() };
        assert!(bad.validate().is_err());
    }
}
