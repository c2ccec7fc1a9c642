//! The console's login codes and sessions, kept in this server's memory:
//! codes are stored as their SHA-256 only and used once, sessions end
//! when idle or too old.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use hyper::header::HeaderValue;
use serde::Serialize;

use crate::error::{KmsError, Result};
use crate::model::{now_ms, ClientInfo};

/// How long a login code may be exchanged.
pub const CODE_TTL_MS: i64 = 2 * 60 * 1000;
/// A session ends after this long without a request...
pub const SESSION_IDLE_MS: i64 = 30 * 60 * 1000;
/// ... and this long after sign-in in any case.
pub const SESSION_MAX_MS: i64 = 8 * 60 * 60 * 1000;
/// Codes waiting to be exchanged, and sessions, at most (a flood of
/// either is refused rather than grown without bound).
const MAX_CODES: usize = 256;
pub(super) const MAX_SESSIONS: usize = 1024;

/// A login code as `POST /v1/console/login-codes` answers it.
#[derive(Debug, Serialize)]
pub(crate) struct LoginCode {
    /// The code (64 hex digits).
    pub code: String,
    /// A short public name of the code (the audit entries use it).
    pub id: String,
    /// The URL to open, from the request's `Host`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The URL's path and query, to put after `https://HOST:PORT`.
    pub path: String,
    pub expires_ms: i64,
}

struct PendingCode {
    id: String,
    admin: String,
    fingerprint: String,
    expires_ms: i64,
}

/// A signed-in browser.
#[derive(Debug, Clone)]
pub(crate) struct Session {
    /// A public name (the first 16 hex digits of the cookie's hash).
    pub id: String,
    pub admin: String,
    pub fingerprint: String,
    pub created_ms: i64,
    pub last_ms: i64,
    pub peer: String,
    pub(super) csrf: String,
    /// A message for the next page (what the last action did).
    pub(super) flash: Option<String>,
}

#[derive(Default)]
struct Inner {
    /// By the SHA-256 of the code.
    codes: HashMap<[u8; 32], PendingCode>,
    /// By the SHA-256 of the cookie.
    sessions: HashMap<[u8; 32], Session>,
}

/// The console's login codes and sessions.
pub(crate) struct Console {
    inner: Mutex<Inner>,
    started: Instant,
    started_ms: i64,
}

impl Default for Console {
    fn default() -> Self {
        Self { inner: Mutex::default(), started: Instant::now(), started_ms: now_ms() }
    }
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    let mut out = [0u8; 32];
    out.copy_from_slice(rampart_crypto::digest(rampart_crypto::HashAlg::Sha256, bytes).expose());
    out
}

fn random_hex(bytes: usize) -> Result<String> {
    Ok(hex::encode(rampart_crypto::random_secret(bytes)?.expose()))
}

/// `HOST[:PORT]` as a browser may send it, or none.
pub(super) fn valid_host(host: Option<&HeaderValue>) -> Option<String> {
    let host = host?.to_str().ok()?;
    let ok = !host.is_empty()
        && host.len() <= 260
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']'));
    ok.then(|| host.to_owned())
}

impl Console {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A new login code for `admin` (an admin client, as identified by
    /// its certificate).
    pub(crate) fn issue_code(
        &self,
        admin: &ClientInfo,
        host: Option<&HeaderValue>,
    ) -> Result<LoginCode> {
        let code = random_hex(32)?;
        let hash = sha256(code.as_bytes());
        let id = hex::encode(&hash[..8]);
        let now = now_ms();
        let expires_ms = now + CODE_TTL_MS;
        let mut inner = self.lock();
        inner.codes.retain(|_, c| c.expires_ms > now);
        if inner.codes.len() >= MAX_CODES {
            return Err(KmsError::Conflict(format!(
                "{MAX_CODES} console login codes are waiting to be used: try again in {} minutes",
                CODE_TTL_MS / 60_000
            )));
        }
        inner.codes.insert(
            hash,
            PendingCode {
                id: id.clone(),
                admin: admin.name.clone(),
                fingerprint: admin.fingerprint.clone(),
                expires_ms,
            },
        );
        let path = format!("/ui/login?code={code}");
        let url = valid_host(host).map(|host| format!("https://{host}{path}"));
        Ok(LoginCode { code, id, url, path, expires_ms })
    }

    /// Takes a login code out (used or not, it is gone): the admin's
    /// name and certificate fingerprint, and the code's id, when it was
    /// valid.
    pub(super) fn redeem(
        &self,
        code: &str,
    ) -> std::result::Result<(String, String, String), &'static str> {
        let hash = sha256(code.as_bytes());
        let now = now_ms();
        let mut inner = self.lock();
        inner.codes.retain(|_, c| c.expires_ms > now || c.id == hex::encode(&hash[..8]));
        match inner.codes.remove(&hash) {
            Some(c) if c.expires_ms > now => Ok((c.admin, c.fingerprint, c.id)),
            Some(_) => Err("the sign-in code has expired"),
            None => Err("the sign-in code is unknown or was already used"),
        }
    }

    /// Opens a session; its cookie value and the session.
    pub(super) fn open(
        &self,
        admin: String,
        fingerprint: String,
        peer: String,
    ) -> Result<(String, Session)> {
        let token = random_hex(32)?;
        let hash = sha256(token.as_bytes());
        let now = now_ms();
        let session = Session {
            id: hex::encode(&hash[..8]),
            admin,
            fingerprint,
            created_ms: now,
            last_ms: now,
            peer,
            csrf: random_hex(32)?,
            flash: None,
        };
        let mut inner = self.lock();
        inner.sessions.retain(|_, s| live(s, now));
        if inner.sessions.len() >= MAX_SESSIONS {
            return Err(KmsError::Conflict(format!(
                "{MAX_SESSIONS} console sessions are open: sign out elsewhere or wait"
            )));
        }
        inner.sessions.insert(hash, session.clone());
        Ok((token, session))
    }

    /// The live session of a cookie value, marked used now (its flash
    /// message taken).
    pub(super) fn touch(&self, token: &str) -> Option<Session> {
        let hash = sha256(token.as_bytes());
        let now = now_ms();
        let mut inner = self.lock();
        let session = inner.sessions.get_mut(&hash)?;
        if !live(session, now) {
            inner.sessions.remove(&hash);
            return None;
        }
        session.last_ms = now;
        let out = session.clone();
        session.flash = None;
        Some(out)
    }

    pub(super) fn flash(&self, id: &str, message: String) {
        if let Some(s) = self.lock().sessions.values_mut().find(|s| s.id == id) {
            s.flash = Some(message);
        }
    }

    /// Ends the session named `id`; whether it existed.
    pub(crate) fn end(&self, id: &str) -> bool {
        let mut inner = self.lock();
        let before = inner.sessions.len();
        inner.sessions.retain(|_, s| s.id != id);
        inner.sessions.len() != before
    }

    /// Up to `limit` live sessions after `after` in the list's order
    /// (newest first, then by id): a walk page by page sees every session
    /// that lives throughout once, whatever opens or ends meanwhile.
    pub(crate) fn sessions(&self, after: Option<&SessionPosition>, limit: usize) -> Vec<Session> {
        let now = now_ms();
        let mut inner = self.lock();
        inner.sessions.retain(|_, s| live(s, now));
        let mut out: Vec<Session> = inner
            .sessions
            .values()
            .filter(|s| after.is_none_or(|a| s.position() > *a))
            .cloned()
            .collect();
        out.sort_by_key(Session::position);
        out.truncate(limit);
        out
    }
}

/// Where a session stands in the session list (newest first, then by
/// id), as a cursor of `GET /v1/console/sessions` holds it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct SessionPosition {
    newer_first: std::cmp::Reverse<i64>,
    id: String,
}

impl SessionPosition {
    /// Sign-in time (big-endian milliseconds) and the 16 hex digits of
    /// the id.
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        let mut out = self.newer_first.0.to_be_bytes().to_vec();
        out.extend_from_slice(self.id.as_bytes());
        out
    }

    pub(crate) fn from_bytes(bytes: &[u8]) -> Option<Self> {
        let (time, id) = bytes.split_at_checked(8)?;
        let time = i64::from_be_bytes(time.try_into().ok()?);
        let id_ok = id.len() == 16 && id.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        id_ok.then(|| Self {
            newer_first: std::cmp::Reverse(time),
            id: String::from_utf8_lossy(id).into_owned(),
        })
    }
}

impl Session {
    pub(crate) fn position(&self) -> SessionPosition {
        SessionPosition { newer_first: std::cmp::Reverse(self.created_ms), id: self.id.clone() }
    }

    /// What `GET /v1/console/sessions` shows of a session.
    pub(crate) fn summary(&self) -> serde_json::Value {
        serde_json::json!({
            "id": self.id, "admin": self.admin, "peer": self.peer,
            "created_ms": self.created_ms, "last_ms": self.last_ms,
            "ends_ms": (self.last_ms + SESSION_IDLE_MS).min(self.created_ms + SESSION_MAX_MS),
        })
    }
}

fn live(s: &Session, now: i64) -> bool {
    now - s.last_ms < SESSION_IDLE_MS && now - s.created_ms < SESSION_MAX_MS
}

impl Console {
    pub(crate) fn uptime_seconds(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    pub(crate) fn started_ms(&self) -> i64 {
        self.started_ms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admin() -> ClientInfo {
        ClientInfo {
            name: "admin".into(),
            labels: crate::model::Labels::default(),
            admin: true,
            serial: "01".into(),
            fingerprint: "ab".repeat(32),
            created_ms: 0,
            not_after_ms: i64::MAX,
            revoked: None,
        }
    }

    #[test]
    fn a_login_code_works_once_and_not_after_it_expires() {
        let console = Console::default();
        let host = HeaderValue::from_static("kms.example:8443");
        let code = console.issue_code(&admin(), Some(&host)).unwrap();
        assert_eq!(code.code.len(), 64);
        assert_eq!(
            code.url.as_deref(),
            Some(format!("https://kms.example:8443{}", code.path).as_str())
        );
        assert!(code.expires_ms <= now_ms() + CODE_TTL_MS);
        // Only the hash is kept.
        assert!(console.lock().codes.keys().all(|k| hex::encode(k) != code.code));
        let (name, fp, id) = console.redeem(&code.code).unwrap();
        assert_eq!((name.as_str(), fp.len(), id), ("admin", 64, code.id));
        assert!(console.redeem(&code.code).unwrap_err().contains("already used"));

        let late = console.issue_code(&admin(), None).unwrap();
        assert!(late.url.is_none());
        for c in console.lock().codes.values_mut() {
            c.expires_ms = now_ms() - 1;
        }
        assert!(console.redeem(&late.code).unwrap_err().contains("expired"));
        assert!(console.redeem(&late.code).is_err());
        let bad = HeaderValue::from_static("evil\"><x");
        assert!(console.issue_code(&admin(), Some(&bad)).unwrap().url.is_none());
    }

    #[test]
    fn sessions_end_when_idle_too_long_or_ended() {
        let console = Console::default();
        let (token, session) =
            console.open("admin".into(), "ab".repeat(32), "peer".into()).unwrap();
        assert_eq!(console.touch(&token).unwrap().id, session.id);
        assert!(console.touch(&"0".repeat(64)).is_none());
        for s in console.lock().sessions.values_mut() {
            s.last_ms -= SESSION_IDLE_MS;
        }
        assert!(console.touch(&token).is_none());
        let (token, session) =
            console.open("admin".into(), "ab".repeat(32), "peer".into()).unwrap();
        for s in console.lock().sessions.values_mut() {
            s.created_ms -= SESSION_MAX_MS;
        }
        assert!(console.touch(&token).is_none());
        let (token, session2) =
            console.open("admin".into(), "ab".repeat(32), "peer".into()).unwrap();
        assert_eq!(console.sessions(None, MAX_SESSIONS).len(), 1);
        assert!(!console.end(&session.id));
        assert!(console.end(&session2.id));
        assert!(console.touch(&token).is_none());
    }

    #[test]
    fn sessions_page_newest_first_and_walk_past_openings_and_endings() {
        let console = Console::default();
        let open = || console.open("admin".into(), "ab".repeat(32), "peer".into()).unwrap().1;
        for _ in 0..7 {
            open();
        }
        // Two share a sign-in time: the id orders them.
        let base = now_ms() - 60_000;
        for (i, s) in console.lock().sessions.values_mut().enumerate() {
            s.created_ms = base + (i as i64).min(5);
        }
        let mut all = console.sessions(None, MAX_SESSIONS);
        let times: Vec<i64> = all.iter().map(|s| s.created_ms - base).collect();
        assert_eq!(times, [5, 5, 4, 3, 2, 1, 0]);
        assert!(all[0].id < all[1].id);
        // A walk of pages of two while sessions open and end: each that
        // lives throughout comes once, in order.
        let ended = all.remove(3);
        let mut seen = Vec::new();
        let mut after: Option<SessionPosition> = None;
        let mut late = None;
        loop {
            let page = console.sessions(after.as_ref(), 2);
            if seen.len() == 2 {
                assert!(console.end(&ended.id));
                late = Some(open());
            }
            let Some(last) = page.last() else { break };
            after = Some(SessionPosition::from_bytes(&last.position().to_bytes()).unwrap());
            seen.extend(page.iter().map(|s| s.id.clone()));
        }
        let throughout: Vec<String> = all.iter().map(|s| s.id.clone()).collect();
        seen.retain(|id| *id != ended.id);
        assert_eq!(seen, throughout);
        // Opened during the walk, it is the newest: before the cursor.
        let late = late.unwrap();
        assert_eq!(console.sessions(None, 1)[0].id, late.id);
        assert!(SessionPosition::from_bytes(b"12345678ABCDEF0123456789").is_none());
        assert!(SessionPosition::from_bytes(b"1234567").is_none());
        assert!(SessionPosition::from_bytes(&[0u8; 25]).is_none());
    }
}
