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
mod request;
pub(super) mod sessions;

use std::net::SocketAddr;
use std::time::Instant;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderMap, HeaderValue};
use hyper::{Method, Request, Response};

use self::request::{Audit, Auth, Out, Req};
use self::sessions::Session;
use super::limits::Admission;
use super::paging::query_params;
use super::service;
use super::state::State;
use crate::error::{KmsError, Result};
use crate::model::{now_ms, AuditDraft};

/// Largest form body.
const MAX_FORM: usize = 64 * 1024;
/// The session cookie's name.
const COOKIE: &str = "rampart_console";

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// Constant-time equality of two strings (CSRF tokens).
fn same(a: &str, b: &str) -> bool {
    rampart_crypto::constant_time_eq(a.as_bytes(), b.as_bytes())
}

/// Whether `path` belongs to the console.
pub(super) fn is_console_path(path: &str) -> bool {
    path == "/ui" || path.starts_with("/ui/")
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
                .and_then(query_params)
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
            let params = query_params(&req.query).unwrap_or_default();
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
    if let Admission::Refused { retry_after, .. } = state.rate.admit(&session.fingerprint) {
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
    service::audit::entry(
        client.to_owned(),
        audit.op,
        audit.key.clone(),
        audit.version,
        outcome,
        detail,
    )
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
        let _ = state.audit(service::audit::refused_peer("console.login", detail)).await;
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
    let detail =
        format!("peer {peer}: {} {}: no client certificate", parts.method, parts.uri.path());
    let draft = service::audit::refused_peer("tls.handshake", detail);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csrf_tokens_compare_whole() {
        assert!(same("abc", "abc"));
        assert!(!same("abc", "abd"));
        assert!(!same("abc", "ab"));
        assert!(!same("", "a"));
    }
}
