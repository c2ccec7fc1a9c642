//! The web console at `/ui/`, served on the REST listener to browsers
//! without a client certificate.
//!
//! Sign-in: an admin asks for a one-time code over mTLS (`POST
//! /v1/console/login-codes`, `rampart kms console-login`); the code is
//! 256 random bits, kept only as its SHA-256, valid for [`CODE_TTL`] and
//! once. Exchanging it (`POST /ui/login`) opens a session bound to that
//! admin's certificate: a random cookie (`HttpOnly; Secure;
//! SameSite=Strict; Path=/ui`), kept as its SHA-256 in this server's
//! memory (a restart signs everyone out), ending after [`SESSION_IDLE`]
//! without a request or [`SESSION_MAX`] after sign-in.
//!
//! Authorisation is the REST API's: every request looks the admin's
//! certificate up again ([`State::identify`]: a revoked admin's sessions
//! die at once), requires the admin flag and an unexpired certificate,
//! is counted by the same rate limiter, and performs its action through
//! the same functions as the REST handlers; every request is audited
//! under the admin's name in the same chain. State changes are POST
//! forms carrying the session's CSRF token (compared in constant time)
//! from this origin (`Origin` / `Sec-Fetch-Site`); every page is sent
//! with a strict Content-Security-Policy and no inline script or style.

mod html;
mod pages;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::Instant;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderMap, HeaderValue};
use hyper::{Method, Request, Response};
use serde::Serialize;

use super::State;
use crate::error::{KmsError, Result};
use crate::model::{now_ms, AuditDraft, ClientInfo};

/// How long a login code may be exchanged.
pub const CODE_TTL_MS: i64 = 2 * 60 * 1000;
/// A session ends after this long without a request...
pub const SESSION_IDLE_MS: i64 = 30 * 60 * 1000;
/// ... and this long after sign-in in any case.
pub const SESSION_MAX_MS: i64 = 8 * 60 * 60 * 1000;
/// Codes waiting to be exchanged, and sessions, at most (a flood of
/// either is refused rather than grown without bound).
const MAX_CODES: usize = 256;
const MAX_SESSIONS: usize = 1024;
/// Largest form body.
const MAX_FORM: usize = 64 * 1024;
/// The session cookie's name.
const COOKIE: &str = "rampart_console";

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

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
    csrf: String,
    /// A message for the next page (what the last action did).
    flash: Option<String>,
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

/// Constant-time equality of two strings (CSRF tokens).
fn same(a: &str, b: &str) -> bool {
    rampart_crypto::constant_time_eq(a.as_bytes(), b.as_bytes())
}

/// `HOST[:PORT]` as a browser may send it, or none.
fn valid_host(host: Option<&HeaderValue>) -> Option<String> {
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
    fn redeem(&self, code: &str) -> std::result::Result<(String, String, String), &'static str> {
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
    fn open(&self, admin: String, fingerprint: String, peer: String) -> Result<(String, Session)> {
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
    fn touch(&self, token: &str) -> Option<Session> {
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

    fn flash(&self, id: &str, message: String) {
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

/// Whether `path` belongs to the console.
pub(super) fn is_console_path(path: &str) -> bool {
    path == "/ui" || path.starts_with("/ui/")
}

/// What a console route answers.
pub(super) enum Out {
    Page {
        status: u16,
        title: String,
        body: String,
    },
    /// 303 See Other.
    Redirect(String),
    Download {
        filename: String,
        content_type: &'static str,
        body: Vec<u8>,
    },
    Asset {
        content_type: &'static str,
        body: &'static str,
    },
}

/// A console request: its parts and form body.
pub(super) struct Req {
    pub method: Method,
    pub path: String,
    pub query: String,
    pub headers: HeaderMap,
    pub form: std::collections::BTreeMap<String, String>,
}

impl Req {
    /// A form field, empty when absent.
    pub fn field(&self, name: &str) -> &str {
        self.form.get(name).map_or("", String::as_str)
    }

    fn host(&self) -> Option<String> {
        valid_host(self.headers.get(hyper::header::HOST))
    }
}

/// The signed-in admin of a request.
pub(super) struct Auth {
    pub session: Session,
    pub admin: ClientInfo,
}

/// What a request did, for its audit entry.
#[derive(Default)]
pub(super) struct Audit {
    pub op: &'static str,
    pub key: Option<String>,
    pub version: Option<u32>,
    pub note: Option<String>,
}

pub(super) async fn handle(
    state: &State,
    peer: SocketAddr,
    request: Request<Incoming>,
) -> Response<Full<Bytes>> {
    let start = Instant::now();
    let (parts, body) = request.into_parts();
    let body = Limited::new(body, MAX_FORM).collect().await.map(|b| b.to_bytes());
    let path = parts.uri.path().to_owned();
    let query = parts.uri.query().unwrap_or("").to_owned();
    let form = match &body {
        Ok(bytes)
            if parts
                .headers
                .get(hyper::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded")) =>
        {
            std::str::from_utf8(bytes)
                .map_err(|_| KmsError::invalid("the form is not UTF-8"))
                .and_then(super::paging::query_params)
        }
        Ok(_) => Ok(std::collections::BTreeMap::new()),
        Err(_) => Err(KmsError::PayloadTooLarge(MAX_FORM)),
    };
    let mut audit = Audit { op: "console.unknown", ..Audit::default() };
    let (out, cookie) = match form {
        Err(error) => (error_page(&error), None),
        Ok(form) => {
            let req = Req { method: parts.method, path, query, headers: parts.headers, form };
            route(state, peer, &req, &mut audit).await
        }
    };
    // A redirect answers a form that succeeded.
    let status = match &out {
        Out::Page { status, .. } => *status,
        _ => 200,
    };
    if audit.op != "console.unknown" {
        state.metrics.record(audit.op, status, start.elapsed());
    }
    respond(out, cookie)
}

/// Routes a request; the answer, and a `Set-Cookie` value.
async fn route(
    state: &State,
    peer: SocketAddr,
    req: &Req,
    audit: &mut Audit,
) -> (Out, Option<String>) {
    let segments: Vec<&str> = req.path.trim_start_matches('/').split('/').collect();
    match (&req.method, segments.as_slice()) {
        (&Method::GET, ["ui", "static", "console.css"]) => {
            return (
                Out::Asset {
                    content_type: "text/css; charset=utf-8",
                    body: include_str!("console.css"),
                },
                None,
            )
        }
        (&Method::GET, ["ui", "static", "console.js"]) => {
            return (
                Out::Asset {
                    content_type: "text/javascript; charset=utf-8",
                    body: include_str!("console.js"),
                },
                None,
            )
        }
        (&Method::GET, ["ui", "login"]) => {
            let params = super::paging::query_params(&req.query).unwrap_or_default();
            let code = params.get("code").cloned().unwrap_or_default();
            return (pages::login_form(&code), None);
        }
        (&Method::POST, ["ui", "login"]) => return login(state, peer, req).await,
        _ => {}
    }
    let Some(token) = cookie_value(&req.headers) else {
        return (signed_out(), None);
    };
    let Some(session) = state.console.touch(&token) else {
        return (signed_out(), Some(clear_cookie()));
    };
    // The admin as the store knows it now: revoked, no longer admin, or
    // expired, and the session ends.
    let admin = match state.identify(&session.fingerprint).await {
        Ok(admin) if admin.admin && admin.not_after_ms > now_ms() => admin,
        Ok(_) | Err(_) => {
            state.console.end(&session.id);
            audit.op = "console.session";
            let draft = draft(&session.admin, audit, "denied", format!(
                "console session {}: ended, the admin certificate is no longer valid for the console",
                session.id
            ));
            let _ = state.audit(draft).await;
            return (signed_out(), Some(clear_cookie()));
        }
    };
    if let super::limits::Admission::Refused { retry_after, .. } =
        state.rate.admit(&session.fingerprint)
    {
        state.metrics.rate_limited();
        return (error_page(&KmsError::RateLimited { retry_after }), None);
    }
    if req.method == Method::POST {
        if let Err(error) = check_post(req, &session) {
            audit.op = "console.csrf";
            let detail = format!("console session {}: {} {error}", session.id, error.status());
            let _ = state.audit(draft(&session.admin, audit, "denied", detail)).await;
            return (error_page(&error), None);
        }
    } else if req.method != Method::GET {
        return (
            error_page(&KmsError::MethodNotAllowed {
                target: req.path.clone(),
                allow: "GET, POST",
            }),
            None,
        );
    }
    let auth = Auth { session, admin };
    let result = pages::route(state, req, &auth, &segments, audit).await;
    let (out, status, error) = match result {
        Ok(out) => (out, 200, None),
        Err(error) => (error_page(&error), error.status(), Some(error)),
    };
    let mut cookie = None;
    if audit.op == "console.logout" && error.is_none() {
        cookie = Some(clear_cookie());
    }
    if audit.op == "console.asset" {
        return (out, cookie);
    }
    let outcome = super::metrics::outcome(status);
    let outcome = if outcome == "limited" { "denied" } else { outcome };
    let detail = match (&error, &audit.note) {
        (Some(e), _) => format!("console session {}: {} {e}", auth.session.id, e.status()),
        (None, Some(note)) => format!("console session {}: {status} {note}", auth.session.id),
        (None, None) => format!("console session {}: {status}", auth.session.id),
    };
    if let Err(e) = state.audit(draft(&auth.admin.name, audit, outcome, detail)).await {
        state.metrics.audit_failed();
        let error = KmsError::Store(format!("the audit log cannot be written: {e}"));
        return (error_page(&error), None);
    }
    if let (Out::Redirect(_), Some(note)) = (&out, &audit.note) {
        state.console.flash(&auth.session.id, note.clone());
    }
    (out, cookie)
}

fn draft(client: &str, audit: &Audit, outcome: &str, detail: String) -> AuditDraft {
    AuditDraft {
        time_ms: now_ms(),
        client: client.to_owned(),
        operation: audit.op.to_owned(),
        key: audit.key.clone(),
        version: audit.version,
        outcome: outcome.to_owned(),
        detail,
    }
}

/// A state change must come from a page of this console: the same
/// origin (as the browser states it) and the session's CSRF token.
fn check_post(req: &Req, session: &Session) -> Result<()> {
    same_origin(req)?;
    if !same(req.field("csrf"), &session.csrf) {
        return Err(KmsError::Forbidden(
            "the form's CSRF token is missing or wrong: reload the page and try again".into(),
        ));
    }
    Ok(())
}

fn same_origin(req: &Req) -> Result<()> {
    let header = |name: &str| req.headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(site) = header("sec-fetch-site") {
        if site != "same-origin" {
            return Err(KmsError::Forbidden(format!(
                "a console form must be sent from the console (Sec-Fetch-Site: {site})"
            )));
        }
    }
    if let Some(origin) = header("origin") {
        // Under `Referrer-Policy: no-referrer` Chromium sends `Origin:
        // null` even for a same-origin form; then its `Sec-Fetch-Site:
        // same-origin` (checked above) is what vouches for the origin.
        if origin == "null" && header("sec-fetch-site") == Some("same-origin") {
            return Ok(());
        }
        let want = req.host().map(|h| format!("https://{h}"));
        if want.as_deref() != Some(origin) {
            return Err(KmsError::Forbidden(
                "a console form must be sent from the console (Origin does not match)".into(),
            ));
        }
    }
    Ok(())
}

/// `POST /ui/login`: exchanges a code for a session.
async fn login(state: &State, peer: SocketAddr, req: &Req) -> (Out, Option<String>) {
    let mut audit = Audit { op: "console.login", ..Audit::default() };
    let refuse = |reason: String| async move {
        let detail = format!("peer {peer}: {reason}");
        let _ = state
            .audit(draft("-", &Audit { op: "console.login", ..Audit::default() }, "denied", detail))
            .await;
        (
            Out::Page {
                status: 403,
                title: "Sign-in refused".into(),
                body: pages::refused_login(&reason),
            },
            None,
        )
    };
    if let Err(error) = same_origin(req) {
        return refuse(error.to_string()).await;
    }
    let code = req.field("code");
    if code.len() != 64 || !code.bytes().all(|b| b.is_ascii_hexdigit()) {
        return refuse("the sign-in code is malformed".into()).await;
    }
    let (name, fingerprint, code_id) = match state.console.redeem(code) {
        Ok(found) => found,
        Err(reason) => return refuse(reason.into()).await,
    };
    // The code's admin as the store knows it now.
    match state.identify(&fingerprint).await {
        Ok(admin) if admin.admin && admin.not_after_ms > now_ms() => {}
        Ok(_) => {
            return refuse(format!("{name} is no longer an admin with a valid certificate")).await
        }
        Err(error) => return refuse(format!("{name}: {error}")).await,
    }
    let (token, session) = match state.console.open(name.clone(), fingerprint, peer.to_string()) {
        Ok(opened) => opened,
        Err(error) => return refuse(error.to_string()).await,
    };
    audit.note = Some(format!("signed in from {peer} with code {code_id}"));
    let detail =
        format!("console session {}: 200 signed in from {peer} with code {code_id}", session.id);
    if let Err(e) = state.audit(draft(&name, &audit, "ok", detail)).await {
        state.console.end(&session.id);
        let error = KmsError::Store(format!("the audit log cannot be written: {e}"));
        return (error_page(&error), None);
    }
    let cookie = format!("{COOKIE}={token}; HttpOnly; Secure; SameSite=Strict; Path=/ui");
    (Out::Redirect("/ui/keys".into()), Some(cookie))
}

fn cookie_value(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(hyper::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .map(|(_, v)| v.to_owned())
        .filter(|v| v.len() == 64)
}

fn clear_cookie() -> String {
    format!("{COOKIE}=; HttpOnly; Secure; SameSite=Strict; Path=/ui; Max-Age=0")
}

fn signed_out() -> Out {
    Out::Page { status: 401, title: "Not signed in".into(), body: pages::signed_out() }
}

fn error_page(error: &KmsError) -> Out {
    Out::Page { status: error.status(), title: "Refused".into(), body: pages::error_body(error) }
}

fn respond(out: Out, cookie: Option<String>) -> Response<Full<Bytes>> {
    let (status, content_type, body, location, disposition) = match out {
        Out::Page { status, title, body } => (
            status,
            "text/html; charset=utf-8",
            pages::layout(&title, &body).into_bytes(),
            None,
            None,
        ),
        Out::Redirect(to) => (303, "text/plain; charset=utf-8", Vec::new(), Some(to), None),
        Out::Download { filename, content_type, body } => {
            (200, content_type, body, None, Some(format!("attachment; filename=\"{filename}\"")))
        }
        Out::Asset { content_type, body } => {
            (200, content_type, body.as_bytes().to_vec(), None, None)
        }
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() =
        hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    let headers = response.headers_mut();
    let mut set = |name: &'static str, value: &str| {
        if let Ok(value) = HeaderValue::from_str(value) {
            headers.insert(name, value);
        }
    };
    set("content-type", content_type);
    set("cache-control", "no-store");
    set("content-security-policy", CSP);
    set("x-content-type-options", "nosniff");
    set("referrer-policy", "no-referrer");
    set("x-frame-options", "DENY");
    set("cross-origin-opener-policy", "same-origin");
    set("strict-transport-security", "max-age=31536000");
    if let Some(to) = location {
        set("location", &to);
    }
    if let Some(disposition) = disposition {
        set("content-disposition", &disposition);
    }
    if let Some(cookie) = cookie {
        set("set-cookie", &cookie);
    }
    response
}

/// Answers a request outside `/ui/` that came without a client
/// certificate: 401, audited as the TLS handshake refusal it was before
/// the console (the handshake now lets browsers in).
pub(super) async fn refuse_without_certificate(
    state: &State,
    peer: SocketAddr,
    request: Request<Incoming>,
) -> Response<Full<Bytes>> {
    // Read (and discard) a small body so the client sees the answer.
    let (parts, body) = request.into_parts();
    let _ = Limited::new(body, MAX_FORM).collect().await;
    state.metrics.tls_refused();
    let message = "a client certificate issued by the deployment CA is required \
                   (only the web console under /ui/ is served without one)";
    let draft = AuditDraft {
        time_ms: now_ms(),
        client: "-".into(),
        operation: "tls.handshake".into(),
        key: None,
        version: None,
        outcome: "denied".into(),
        detail: format!(
            "peer {peer}: {} {}: no client certificate",
            parts.method,
            parts.uri.path()
        ),
    };
    if let Err(e) = state.audit(draft).await {
        tracing::error!("cannot audit a request without a certificate: {e}");
    }
    let body =
        serde_json::json!({ "error": { "code": "certificate_required", "message": message } });
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() = hyper::StatusCode::UNAUTHORIZED;
    response
        .headers_mut()
        .insert(hyper::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
        .headers_mut()
        .insert(hyper::header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response.headers_mut().insert(hyper::header::CONNECTION, HeaderValue::from_static("close"));
    response
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

    #[test]
    fn csrf_tokens_compare_whole() {
        assert!(same("abc", "abc"));
        assert!(!same("abc", "abd"));
        assert!(!same("abc", "ab"));
        assert!(!same("", "a"));
    }
}
