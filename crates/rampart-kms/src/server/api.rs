//! Routing, request parsing and the JSON answers of the REST API; the
//! operations themselves are the service's ([`super::service`]). Every
//! request that reveals a key, is refused, or changes a policy or a state
//! (and every admin request) is appended to the audit chain before its
//! response is sent; a request whose audit entry cannot be written is
//! answered 503 instead. Requests that change nothing and reveal no key
//! (health, seal status, whoami, the OpenAPI document, metrics, and a
//! heartbeat whose answer is the one the client got last time) are only
//! counted (`rampart_kms_requests_unchained_total`, and the heartbeat
//! metrics' last-seen time): a fleet checking in every 30 s would
//! otherwise add millions of identical entries a day.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, Response};
use rampart_crypto::SecretBytes;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use zeroize::Zeroizing;

use super::audit_log::{self, WalkFrom};
use super::limits::Admission;
use super::metrics::outcome;
use super::openapi::openapi_document;
use super::paging;
use super::service::access::{self, KeyUse};
use super::service::audit;
use super::service::clients::{self, ClientChange};
use super::service::objects::{self, SignInput, MAX_SIGNATURE, MAX_SIGN_INPUT};
use super::service::{self, key_pairs, keys, lists};
use super::state::State;
use crate::audit::ExportedEntry;
use crate::error::{KmsError, Result};
use crate::keys::{RootKey, WrappedHeader, MAX_CONTEXT, MAX_WRAP_PLAINTEXT};
use crate::model::{
    check_name, now_ms, parse_policy, ClientInfo, HeartbeatVerdict, HeldKey, Labels,
};
use crate::shamir::Share;
use crate::store::MaterialRow;

/// Largest request body.
pub const MAX_BODY: usize = 256 * 1024;
/// Largest oversized body read to its end (and discarded) before a 413.
const MAX_DRAIN: usize = 8 * 1024 * 1024;
/// Time allowed for sending a whole request body.
const DRAIN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

struct Reply {
    status: u16,
    content_type: &'static str,
    body: Vec<u8>,
    /// The `Allow` header of a 405.
    allow: Option<&'static str>,
    /// The `Retry-After` header of a 429, in seconds.
    retry_after: Option<u64>,
}

impl Reply {
    fn json(status: u16, value: &impl Serialize) -> Result<Self> {
        let body = serde_json::to_vec(value)
            .map_err(|e| KmsError::Crypto(format!("cannot encode the response: {e}")))?;
        Ok(Self { status, content_type: "application/json", body, allow: None, retry_after: None })
    }

    fn error(error: &KmsError) -> Self {
        let body = json!({ "error": { "code": error.code(), "message": error.to_string() } });
        let allow = match error {
            KmsError::MethodNotAllowed { allow, .. } => Some(*allow),
            _ => None,
        };
        let retry_after = match error {
            KmsError::RateLimited { retry_after } => Some(*retry_after),
            _ => None,
        };
        Self {
            status: error.status(),
            content_type: "application/json",
            body: body.to_string().into_bytes(),
            allow,
            retry_after,
        }
    }
}

/// What a request did, for the audit entry and metrics.
#[derive(Default)]
struct Ctx {
    op: &'static str,
    client: Option<ClientInfo>,
    key: Option<String>,
    version: Option<u32>,
    /// Whether `key` names a key the store holds (only those are metric
    /// labels: a request for any name cannot grow the metrics).
    key_known: bool,
    /// Appended to the audit entry's detail (a heartbeat's verdicts).
    note: Option<String>,
    /// Audited as `denied` though answered 200 (a heartbeat refusing a key).
    denied: bool,
    /// A successful answer that changed nothing and revealed no key: not
    /// chained (an error is chained whatever this says).
    quiet: bool,
}

impl Ctx {
    async fn client<'a>(&'a mut self, state: &State, fp: &str) -> Result<&'a ClientInfo> {
        if self.client.is_none() {
            self.client = Some(state.identify(fp).await?);
        }
        self.client.as_ref().ok_or(KmsError::UnknownClient)
    }

    async fn admin<'a>(&'a mut self, state: &State, fp: &str) -> Result<&'a ClientInfo> {
        let op = self.op;
        let client = self.client(state, fp).await?;
        access::require_admin(client, op)?;
        Ok(client)
    }
}

pub(super) async fn handle(
    state: &State,
    fp: &str,
    request: Request<Incoming>,
) -> Response<Full<Bytes>> {
    let start = Instant::now();
    let mut ctx = Ctx { op: "unknown", ..Ctx::default() };
    // The body is read (or, over the limit, drained) whatever the route
    // decides: a request refused before its body is read would otherwise
    // close the connection under a client still sending, whose kernel then
    // sees a reset instead of the answer.
    let (parts, incoming) = request.into_parts();
    let body = read_body(&parts.headers, incoming).await;
    // Per certificate: a client over its rate is answered 429 before any
    // work (store lookups included); only the first refusal of a run is
    // audited, so a flood cannot flood the audit log.
    if let Admission::Refused { retry_after, first } = state.rate.admit(fp) {
        state.metrics.rate_limited();
        let segments: Vec<&str> = parts.uri.path().trim_start_matches('/').split('/').collect();
        ctx.op = operation_name(&segments);
        let error = KmsError::RateLimited { retry_after };
        let mut reply = Reply::error(&error);
        if first {
            ctx.client = state.identify(fp).await.ok();
            let detail = format!(
                "{} {error} (further refusals until the rate recovers are counted in \
                 rampart_kms_rate_limited_total, not audited)",
                error.status()
            );
            reply = audited(state, fp, &ctx, reply, detail).await;
        }
        state.metrics.record(ctx.op, reply.status, start.elapsed());
        return response(reply);
    }
    let request = Request::from_parts(parts, body);
    let (reply, detail) = match route(state, fp, request, &mut ctx).await {
        Ok(reply) if ctx.quiet => {
            state.metrics.unchained();
            state.metrics.record(ctx.op, reply.status, start.elapsed());
            if let Some(client) = &ctx.client {
                let key = ctx.key.as_deref().filter(|_| ctx.key_known);
                state.metrics.record_identity(&client.name, key, ctx.op, reply.status);
            }
            return response(reply);
        }
        Ok(reply) => {
            let detail = match &ctx.note {
                Some(note) => format!("{} {note}", reply.status),
                None => reply.status.to_string(),
            };
            (reply, detail)
        }
        Err(error) => (Reply::error(&error), format!("{} {error}", error.status())),
    };
    let reply = audited(state, fp, &ctx, reply, detail).await;
    state.metrics.record(ctx.op, reply.status, start.elapsed());
    if let Some(client) = &ctx.client {
        // A key a request succeeded on exists (create included).
        let key = ctx.key.as_deref().filter(|_| ctx.key_known || reply.status < 300);
        state.metrics.record_identity(&client.name, key, ctx.op, reply.status);
    }
    response(reply)
}

/// Appends the request's audit entry; the reply, or a 503 when the entry
/// cannot be written.
async fn audited(state: &State, fp: &str, ctx: &Ctx, reply: Reply, detail: String) -> Reply {
    let client = match &ctx.client {
        Some(client) => client.name.clone(),
        None => format!("cert:{}", &fp[..fp.len().min(16)]),
    };
    let outcome = if ctx.denied && reply.status < 300 { "denied" } else { outcome(reply.status) };
    let draft = audit::entry(client, ctx.op, ctx.key.clone(), ctx.version, outcome, detail);
    match state.audit(draft).await {
        Ok(()) => reply,
        Err(error) => {
            state.metrics.audit_failed();
            Reply::error(&KmsError::Store(format!("the audit log cannot be written: {error}")))
        }
    }
}

fn response(reply: Reply) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(reply.body)));
    *response.status_mut() = hyper::StatusCode::from_u16(reply.status)
        .unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(reply.content_type),
    );
    response
        .headers_mut()
        .insert(hyper::header::CACHE_CONTROL, hyper::header::HeaderValue::from_static("no-store"));
    if let Some(allow) = reply.allow {
        response
            .headers_mut()
            .insert(hyper::header::ALLOW, hyper::header::HeaderValue::from_static(allow));
    }
    if let Some(seconds) = reply.retry_after {
        response.headers_mut().insert(hyper::header::RETRY_AFTER, seconds.into());
    }
    response
}

fn expect(method: &Method, want: &Method, path: &str) -> Result<()> {
    if method == want {
        return Ok(());
    }
    let allow = if *want == Method::GET { "GET" } else { "POST" };
    Err(KmsError::MethodNotAllowed { target: format!("{method} {path}"), allow })
}

/// For the collections that take both GET (list) and POST (create).
fn expect_get_or_post(method: &Method, path: &str) -> Result<()> {
    if *method == Method::GET || *method == Method::POST {
        return Ok(());
    }
    Err(KmsError::MethodNotAllowed { target: format!("{method} {path}"), allow: "GET, POST" })
}

/// Reads a request body of at most [`MAX_BODY`] bytes. A larger body is
/// read on and discarded (up to [`MAX_DRAIN`] bytes, within
/// [`DRAIN_TIMEOUT`]) before the 413 is sent: a server that answers and
/// closes while the client is still sending makes the client's kernel see
/// a reset, and the client never reads the 413.
async fn read_body(headers: &hyper::HeaderMap, mut incoming: Incoming) -> Result<SecretBytes> {
    let declared = headers
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_DRAIN as u64) {
        // Too large to be worth reading: answer, and let the connection close.
        return Err(KmsError::PayloadTooLarge(MAX_BODY));
    }
    let capacity = declared.map_or(0, |n| usize::try_from(n).unwrap_or(MAX_BODY).min(MAX_BODY));
    // Allocated once at its final size where the length is declared, and
    // grown by hand otherwise, so that no copy of a secret is left unwiped.
    let mut bytes = Zeroizing::new(Vec::with_capacity(capacity));
    let mut seen = 0usize;
    let read = async {
        while let Some(frame) = incoming.frame().await {
            let frame = frame
                .map_err(|e| KmsError::invalid(format!("cannot read the request body: {e}")))?;
            let Ok(data) = frame.into_data() else { continue };
            seen = seen.saturating_add(data.len());
            if seen > MAX_DRAIN {
                break;
            }
            if seen > MAX_BODY {
                continue;
            }
            if bytes.capacity() - bytes.len() < data.len() {
                let mut grown = Vec::with_capacity((bytes.len() + data.len()).max(2 * bytes.len()));
                grown.extend_from_slice(&bytes);
                bytes = Zeroizing::new(grown);
            }
            bytes.extend_from_slice(&data);
        }
        Ok::<(), KmsError>(())
    };
    match tokio::time::timeout(DRAIN_TIMEOUT, read).await {
        Err(_) => Err(KmsError::invalid("the request body was not sent in time")),
        Ok(Err(e)) => Err(e),
        Ok(Ok(())) if seen > MAX_BODY => Err(KmsError::PayloadTooLarge(MAX_BODY)),
        Ok(Ok(())) => Ok(SecretBytes::new(std::mem::take(&mut *bytes))),
    }
}

/// A request whose body has been read (or the error reading it).
type Req = Request<Result<SecretBytes>>;

fn read_json<T: DeserializeOwned>(request: Req) -> Result<T> {
    let body = request.into_body()?;
    parse_json(body.expose())
}

fn parse_json<T: DeserializeOwned>(body: &[u8]) -> Result<T> {
    let text = if body.is_empty() { &b"{}"[..] } else { body };
    // Every request body is a JSON object (serde would also take an
    // array for a struct).
    if text.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(KmsError::invalid("the request body must be a JSON object"));
    }
    serde_json::from_slice(text).map_err(|e| KmsError::invalid(format!("bad JSON body: {e}")))
}

async fn route(state: &State, fp: &str, request: Req, ctx: &mut Ctx) -> Result<Reply> {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let query = request.uri().query().unwrap_or("").to_owned();
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match segments.as_slice() {
        ["v1", "health"] => {
            ctx.op = "health";
            expect(&method, &Method::GET, &path)?;
            let sealed = state.root().is_none();
            ctx.quiet = true;
            Reply::json(
                if sealed { 503 } else { 200 },
                &json!({ "status": if sealed { "sealed" } else { "ok" }, "sealed": sealed,
                         "store": state.store.kind(), "version": env!("CARGO_PKG_VERSION") }),
            )
        }
        ["v1", "sys", "seal-status"] => {
            ctx.op = "sys.seal_status";
            expect(&method, &Method::GET, &path)?;
            ctx.client(state, fp).await?;
            ctx.quiet = true;
            Reply::json(200, &service::seal_status(state))
        }
        ["v1", "sys", "unseal"] => {
            ctx.op = "sys.unseal";
            expect(&method, &Method::POST, &path)?;
            ctx.admin(state, fp).await?;
            let body: UnsealRequest = read_json(request)?;
            match body.secret()? {
                UnsealSecret::Share(share) => {
                    state.add_share(share)?;
                }
                UnsealSecret::Pin(pin) => state.unseal_with_pin(pin).await?,
            }
            Reply::json(200, &service::seal_status(state))
        }
        _ => {
            let root = state.require_root();
            // Sealed: nothing else is answered (still audited).
            if root.is_err() {
                ctx.op = operation_name(&segments);
                return Err(KmsError::Sealed);
            }
            route_unsealed(state, fp, request, ctx, &method, &path, &query, &segments).await
        }
    }
}

fn operation_name(segments: &[&str]) -> &'static str {
    match segments {
        ["v1", "health"] => "health",
        ["v1", "sys", "seal-status"] => "sys.seal_status",
        ["v1", "sys", "unseal"] => "sys.unseal",
        ["v1", "openapi.json"] => "openapi",
        ["metrics"] => "metrics",
        ["v1", "whoami"] => "whoami",
        ["v1", "keys"] => "key.list_or_create",
        ["v1", "keys", _] => "key.show",
        ["v1", "keys", _, action] => match *action {
            "rotate" => "key.rotate",
            "revoke" => "key.revoke",
            "destroy" => "key.destroy",
            "wrap" => "key.wrap",
            "unwrap" => "key.unwrap",
            "export" => "key.export",
            "sign" => "key.sign",
            "verify" => "key.verify",
            "public" => "key.public",
            _ => "unknown",
        },
        ["v1", "certificates"] => "certificate.register",
        ["v1", "certificates", _] => "certificate.show",
        ["v1", "clients"] => "client.list_or_issue",
        ["v1", "clients", _, "revoke"] => "client.revoke",
        ["v1", "clients", _, "labels"] => "client.relabel",
        ["v1", "heartbeat"] => "heartbeat",
        ["v1", "audit"] => "audit.list",
        ["v1", "audit", "verify"] => "audit.verify",
        ["v1", "audit", "export"] => "audit.export",
        ["v1", "audit", "exports"] => "audit.exported",
        ["v1", "audit", "prune"] => "audit.prune",
        ["v1", "console", "login-codes"] => "console.login_code",
        ["v1", "console", "sessions"] => "console.sessions",
        ["v1", "console", "sessions", _, "end"] => "console.session_end",
        _ => "unknown",
    }
}

#[allow(clippy::too_many_arguments)]
async fn route_unsealed(
    state: &State,
    fp: &str,
    request: Req,
    ctx: &mut Ctx,
    method: &Method,
    path: &str,
    query: &str,
    segments: &[&str],
) -> Result<Reply> {
    match segments {
        ["v1", "openapi.json"] => {
            ctx.op = "openapi";
            expect(method, &Method::GET, path)?;
            ctx.quiet = true;
            Reply::json(200, &openapi_document())
        }
        ["metrics"] => {
            ctx.op = "metrics";
            expect(method, &Method::GET, path)?;
            ctx.quiet = true;
            Ok(Reply {
                status: 200,
                content_type: "text/plain; version=0.0.4",
                body: state.metrics.render(state.root().is_none()).into_bytes(),
                allow: None,
                retry_after: None,
            })
        }
        ["v1", "whoami"] => {
            ctx.op = "whoami";
            expect(method, &Method::GET, path)?;
            let client = ctx.client(state, fp).await?.clone();
            ctx.quiet = true;
            Reply::json(200, &client)
        }
        ["v1", "keys"] if *method == Method::GET => {
            ctx.op = "key.list";
            ctx.admin(state, fp).await?;
            list_keys(state, query).await
        }
        ["v1", "keys"] => {
            ctx.op = "key.create";
            expect_get_or_post(method, path)?;
            ctx.admin(state, fp).await?;
            let body: CreateKeyRequest = read_json(request)?;
            ctx.key = Some(body.name.clone());
            ctx.version = Some(1);
            let kind = key_pairs::rest_key_type(body.key_type.as_deref().unwrap_or("aes-256"))?;
            let Some((algorithm, length)) = kind else {
                let key = keys::create_key(state, body.name, &body.allow, body.exportable).await?;
                return Reply::json(201, &objects::describe(state, key).await?);
            };
            let client = ctx.client.clone().ok_or(KmsError::UnknownClient)?;
            let pair = create_pair(state, &client, body, algorithm, length).await?;
            ctx.note = Some(format!(
                "key pair {} and {}",
                pair.key.name,
                pair.object.public_key.as_deref().unwrap_or("")
            ));
            Reply::json(201, &pair)
        }
        ["v1", "keys", name] => {
            ctx.op = "key.show";
            expect(method, &Method::GET, path)?;
            check_name("key name", name)?;
            ctx.key = Some((*name).to_owned());
            ctx.admin(state, fp).await?;
            let key = keys::get_key(state, name).await?;
            Reply::json(200, &objects::describe(state, key).await?)
        }
        ["v1", "certificates"] => {
            ctx.op = "certificate.register";
            expect(method, &Method::POST, path)?;
            let client = ctx.admin(state, fp).await?.clone();
            let body: CertificateRequest = read_json(request)?;
            if let Some(name) = &body.name {
                check_name("certificate name", name)?;
                ctx.key = Some(name.clone());
            }
            let der = objects::certificate_der(&body.certificate)?;
            let view =
                objects::register_certificate(state, &client, body.name, der, &body.allow).await?;
            ctx.key = Some(view.key.name.clone());
            ctx.version = Some(1);
            Reply::json(201, &view)
        }
        ["v1", "certificates", name] => {
            ctx.op = "certificate.show";
            expect(method, &Method::GET, path)?;
            check_name("certificate name", name)?;
            ctx.key = Some((*name).to_owned());
            let client = ctx.client(state, fp).await?.clone();
            let cert =
                objects::certificate(state, &client, name, &mut ctx.version, &mut ctx.key_known)
                    .await?;
            let mut value = serde_json::to_value(&cert.view)
                .map_err(|e| KmsError::Crypto(format!("cannot encode the response: {e}")))?;
            if let Value::Object(map) = &mut value {
                map.insert("pem".into(), Value::String(cert.pem));
                map.insert("subject".into(), Value::String(cert.subject));
                map.insert("issuer".into(), Value::String(cert.issuer));
                map.insert("not_after".into(), Value::String(cert.not_after));
            }
            Reply::json(200, &value)
        }
        ["v1", "keys", name, action] => {
            check_name("key name", name)?;
            ctx.key = Some((*name).to_owned());
            let name = (*name).to_owned();
            key_action(state, fp, request, ctx, method, path, name, action).await
        }
        ["v1", "clients"] if *method == Method::GET => {
            ctx.op = "client.list";
            ctx.admin(state, fp).await?;
            list_clients(state, query).await
        }
        ["v1", "clients"] => {
            ctx.op = "client.issue";
            expect_get_or_post(method, path)?;
            ctx.admin(state, fp).await?;
            let body: IssueClientRequest = read_json(request)?;
            let days = body.days;
            let (client, certificate, ca_pem) =
                clients::issue_client(state, body.name, body.labels, body.admin, &body.csr, days)
                    .await?;
            Reply::json(
                201,
                &json!({ "client": client, "certificate": certificate, "ca_certificate": ca_pem }),
            )
        }
        ["v1", "clients", name, action @ ("revoke" | "labels")] => {
            ctx.op = operation_name(&["v1", "clients", "_", *action]);
            expect(method, &Method::POST, path)?;
            check_name("client name", name)?;
            let admin = ctx.admin(state, fp).await?.clone();
            let name = (*name).to_owned();
            let change = if *action == "revoke" {
                ClientChange::Revoke(read_json::<ReasonRequest>(request)?.reason)
            } else {
                ClientChange::Relabel(read_json::<LabelsRequest>(request)?.labels)
            };
            let changed = clients::change_client(state, &admin, name, change).await?;
            ctx.note = Some(format!("client {}", changed.name));
            Reply::json(200, &changed)
        }
        ["v1", "heartbeat"] => {
            ctx.op = "heartbeat";
            expect(method, &Method::POST, path)?;
            let client = ctx.client(state, fp).await?.clone();
            let body: HeartbeatRequest = read_json(request)?;
            check_heartbeat(&body)?;
            let result = heartbeat(state, &client, &body.keys, ctx).await;
            state.metrics.heartbeat(
                &client.name,
                result.as_ref().is_ok_and(|v| v.iter().all(|v| v.allowed)),
            );
            let verdicts = result?;
            // Chained when something was refused, or the answer is not the
            // one this client got last time (first check-in, a key revoked
            // or back, other keys held); a repeat of an all-clear is not.
            let answer = json!({ "client": client.name, "keys": verdicts });
            ctx.quiet = !ctx.denied && state.heartbeat_unchanged(&client.name, &body.keys, &answer);
            Reply::json(200, &answer)
        }
        ["v1", "audit"] => {
            ctx.op = "audit.list";
            expect(method, &Method::GET, path)?;
            ctx.admin(state, fp).await?;
            list_audit(state, query).await
        }
        ["v1", "audit", "verify"] => {
            ctx.op = "audit.verify";
            expect(method, &Method::POST, path)?;
            ctx.admin(state, fp).await?;
            let root = state.require_root()?;
            let params = paging::query_params(query)?;
            let from = match params.get("from").map(String::as_str) {
                None | Some("anchor") => WalkFrom::Anchor,
                Some("checkpoint") => WalkFrom::Checkpoint,
                Some(other) => {
                    return Err(KmsError::invalid(format!(
                        "from must be 'anchor' or 'checkpoint', not '{other}'"
                    )))
                }
            };
            let report = audit_log::verify(state, &root, from).await?;
            ctx.note = Some(format!(
                "from {} {}: {}",
                report.start,
                report.start_seq,
                if report.ok {
                    "intact".to_owned()
                } else {
                    format!("FAILED at {}", report.first_bad_seq.unwrap_or_default())
                }
            ));
            Reply::json(200, &report)
        }
        ["v1", "audit", "export"] => {
            ctx.op = "audit.export";
            expect(method, &Method::GET, path)?;
            ctx.admin(state, fp).await?;
            export_page(state, &paging::query_params(query)?, ctx).await
        }
        ["v1", "audit", "exports"] => {
            ctx.op = "audit.exported";
            expect(method, &Method::POST, path)?;
            let client = ctx.admin(state, fp).await?.name.clone();
            let body: ExportedRequest = read_json(request)?;
            let (anchor_seq, _) = audit_log::anchor_position(state).await?;
            if body.after_seq > anchor_seq || body.until_seq <= body.after_seq {
                return Err(KmsError::Conflict(format!(
                    "an export must start at or before the anchor (entry {anchor_seq}) and end after it"
                )));
            }
            let stored = state.store.audit_hash(body.until_seq).await?;
            if stored.as_deref() != Some(body.until_hash.to_ascii_lowercase().as_str()) {
                return Err(KmsError::Conflict(format!(
                    "entry {} is not stored with hash {}: the export does not match the log",
                    body.until_seq, body.until_hash
                )));
            }
            state
                .store
                .record_audit_export(
                    body.after_seq,
                    body.until_seq,
                    body.until_hash.to_ascii_lowercase(),
                    client,
                    now_ms(),
                )
                .await?;
            ctx.note = Some(format!("entries {} to {}", body.after_seq + 1, body.until_seq));
            Reply::json(200, &json!({ "after_seq": body.after_seq, "until_seq": body.until_seq }))
        }
        ["v1", "audit", "prune"] => {
            ctx.op = "audit.prune";
            expect(method, &Method::POST, path)?;
            ctx.admin(state, fp).await?;
            let root = state.require_root()?;
            let body: PruneRequest = read_json(request)?;
            if body.until_seq == 0 || body.until_seq > i64::MAX as u64 {
                return Err(KmsError::invalid("until_seq must be 1 to 2^63-1"));
            }
            let (removed, anchor) = audit_log::prune(state, &root, body.until_seq).await?;
            ctx.note = Some(format!("removed {removed} entries up to {}", anchor.seq));
            Reply::json(200, &json!({ "removed": removed, "anchor": anchor }))
        }
        ["v1", "console", "login-codes"] => {
            ctx.op = "console.login_code";
            expect(method, &Method::POST, path)?;
            let admin = ctx.admin(state, fp).await?.clone();
            let host = request.headers().get(hyper::header::HOST).cloned();
            let _: Empty = read_json(request)?;
            let code = state.console.issue_code(&admin, host.as_ref())?;
            ctx.note = Some(format!("code {} for the web console", code.id));
            Reply::json(201, &code)
        }
        ["v1", "console", "sessions"] => {
            ctx.op = "console.sessions";
            expect(method, &Method::GET, path)?;
            ctx.admin(state, fp).await?;
            let request = paging::console_session_request(&paging::query_params(query)?)?;
            let (sessions, next) = lists::console_session_page(state, &request)?;
            let sessions: Vec<Value> = sessions.iter().map(|s| s.summary()).collect();
            Reply::json(200, &json!({ "sessions": sessions, "next_cursor": next }))
        }
        ["v1", "console", "sessions", id, "end"] => {
            ctx.op = "console.session_end";
            expect(method, &Method::POST, path)?;
            ctx.admin(state, fp).await?;
            if id.len() != 16 || !id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
                return Err(KmsError::invalid("a console session id is 16 lowercase hex digits"));
            }
            let _: Empty = read_json(request)?;
            if !state.console.end(id) {
                return Err(KmsError::NotFound(format!("console session {id}")));
            }
            ctx.note = Some(format!("ended console session {id}"));
            Reply::json(200, &json!({ "ended": id }))
        }
        _ => {
            ctx.op = "unknown";
            Err(KmsError::NoRoute(path.to_owned()))
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn key_action(
    state: &State,
    fp: &str,
    request: Req,
    ctx: &mut Ctx,
    method: &Method,
    path: &str,
    name: String,
    action: &str,
) -> Result<Reply> {
    ctx.op = operation_name(&["v1", "keys", "_", action]);
    if ctx.op == "unknown" {
        return Err(KmsError::NoRoute(path.to_owned()));
    }
    if action == "public" {
        expect(method, &Method::GET, path)?;
        let client = ctx.client(state, fp).await?.clone();
        let public =
            objects::public_key(state, &client, &name, &mut ctx.version, &mut ctx.key_known)
                .await?;
        ctx.note = Some(format!("public key of {}", public.object));
        return Reply::json(
            200,
            &json!({ "key": name, "version": ctx.version, "object": public.object,
                     "public_key": public.pem }),
        );
    }
    expect(method, &Method::POST, path)?;
    let root = state.require_root()?;
    match action {
        "rotate" => {
            ctx.admin(state, fp).await?;
            let _: Empty = read_json(request)?;
            let key = keys::rotate_key(state, &name, &mut ctx.version).await?;
            Reply::json(200, &objects::describe(state, key).await?)
        }
        "revoke" => {
            ctx.admin(state, fp).await?;
            let body: RevokeRequest = read_json(request)?;
            ctx.version = body.version;
            let key = keys::revoke_key(state, &name, body.version, body.reason).await?;
            Reply::json(200, &objects::describe(state, key).await?)
        }
        "destroy" => {
            ctx.admin(state, fp).await?;
            let body: VersionRequest = read_json(request)?;
            ctx.version = body.version;
            let key = keys::destroy_key(state, &name, body.version).await?;
            Reply::json(200, &objects::describe(state, key).await?)
        }
        "wrap" => {
            let body: WrapRequest = read_json(request)?;
            let plaintext = decode_b64("plaintext", body.plaintext.expose(), MAX_WRAP_PLAINTEXT)?;
            let context = decode_b64(
                "context",
                body.context.as_deref().unwrap_or("").as_bytes(),
                MAX_CONTEXT,
            )?;
            let (row, material) = usable(state, fp, ctx, &root, &name, KeyUse::Wrap).await?;
            let ciphertext = crate::keys::wrap(
                &name,
                row.version.version,
                &material,
                plaintext.expose(),
                context.expose(),
            )?;
            Reply::json(
                200,
                &json!({ "key": name, "version": row.version.version, "ciphertext": ciphertext }),
            )
        }
        "unwrap" => {
            let body: UnwrapRequest = read_json(request)?;
            let header = WrappedHeader::parse(&body.ciphertext)?;
            ctx.version = Some(header.version);
            if header.name != name {
                return Err(KmsError::invalid(format!(
                    "the ciphertext belongs to key {}, not {name}",
                    header.name
                )));
            }
            let context = decode_b64(
                "context",
                body.context.as_deref().unwrap_or("").as_bytes(),
                MAX_CONTEXT,
            )?;
            let (_, material) = usable(state, fp, ctx, &root, &name, KeyUse::Unwrap).await?;
            let plaintext = crate::keys::unwrap(&header, &material, context.expose())?;
            let encoded = SecretBytes::new(B64.encode(plaintext.expose()).into_bytes());
            let text = std::str::from_utf8(encoded.expose()).unwrap_or_default();
            Reply::json(200, &json!({ "key": name, "version": header.version, "plaintext": text }))
        }
        "export" => {
            let body: VersionRequest = read_json(request)?;
            ctx.version = body.version;
            let (row, material) = usable(state, fp, ctx, &root, &name, KeyUse::Export).await?;
            let encoded = SecretBytes::new(B64.encode(material.expose()).into_bytes());
            let text = std::str::from_utf8(encoded.expose()).unwrap_or_default();
            let object_type = row.kmip.as_ref().map(|k| k.object_type);
            let (format, label) = objects::export_form(object_type);
            let pem = label.map(|label| objects::pem(label, material.expose()));
            Reply::json(
                200,
                &json!({ "key": name, "version": row.version.version, "material": text,
                         "type": service::keys::type_name_of(object_type), "format": format,
                         "pem": pem.as_deref().map(String::as_str) }),
            )
        }
        "sign" => {
            let body: SignBody = read_json(request)?;
            let input = body.input()?;
            let client = ctx.client(state, fp).await?.clone();
            let algorithm = body.algorithm.as_deref();
            let signed = objects::sign(
                state,
                &client,
                &name,
                algorithm,
                input,
                &mut ctx.version,
                &mut ctx.key_known,
            )
            .await?;
            ctx.note = Some(format!("signed with {}", signed.algorithm));
            Reply::json(
                200,
                &json!({ "key": name, "version": signed.version, "algorithm": signed.algorithm,
                         "signature": B64.encode(&signed.signature) }),
            )
        }
        "verify" => {
            let body: VerifyBody = read_json(request)?;
            let (input, signature) = body.input()?;
            let client = ctx.client(state, fp).await?.clone();
            let verdict = objects::verify(
                state,
                &client,
                &name,
                body.algorithm.as_deref(),
                input,
                signature,
                &mut ctx.version,
                &mut ctx.key_known,
            )
            .await?;
            ctx.note = Some(format!(
                "{} with {} ({})",
                if verdict.valid { "valid signature" } else { "INVALID signature" },
                verdict.used,
                verdict.algorithm
            ));
            Reply::json(
                200,
                &json!({ "key": name, "version": verdict.version, "algorithm": verdict.algorithm,
                         "verified_with": verdict.used, "valid": verdict.valid }),
            )
        }
        _ => Err(KmsError::NoRoute(path.to_owned())),
    }
}

/// Most entries one export page holds.
const MAX_EXPORT_PAGE: u32 = 10_000;

/// A numeric query parameter, when given.
fn parse_param<T: std::str::FromStr>(
    params: &BTreeMap<String, String>,
    name: &str,
) -> Result<Option<T>> {
    params
        .get(name)
        .map(|v| {
            v.parse()
                .map_err(|_| KmsError::invalid(format!("query parameter '{name}' is not a number")))
        })
        .transpose()
}

/// `GET /v1/audit/export`: the entries after `after_seq` (default: the
/// anchor) up to `until_seq` (or the newest stamped at or before
/// `until_ms`), at most `limit`, each with its link; plus the anchor and
/// the resolved `until_seq`, so the client can write the header and ask
/// for the next page.
async fn export_page(
    state: &State,
    params: &BTreeMap<String, String>,
    ctx: &mut Ctx,
) -> Result<Reply> {
    let until_seq: Option<u64> = parse_param(params, "until_seq")?;
    let until_ms: Option<i64> = parse_param(params, "until_ms")?;
    let limit: u32 = parse_param(params, "limit")?.unwrap_or(5000);
    if !(1..=MAX_EXPORT_PAGE).contains(&limit) {
        return Err(KmsError::invalid(format!("limit must be 1 to {MAX_EXPORT_PAGE}")));
    }
    if until_seq.is_some_and(|s| s == 0 || s > i64::MAX as u64) || until_ms.is_some_and(|ms| ms < 0)
    {
        return Err(KmsError::invalid("until_seq must be 1 to 2^63-1 and until_ms 0 or more"));
    }
    // Neither: up to the newest entry; both: the earlier end.
    let by_time =
        state.store.audit_seq_at(until_ms.unwrap_or(i64::MAX)).await?.ok_or_else(|| {
            KmsError::NotFound(match until_ms {
                Some(ms) => {
                    format!("no audit entry at or before {}", crate::model::format_time(ms))
                }
                None => "no audit entry".into(),
            })
        })?;
    let until =
        until_seq.map_or(by_time, |seq| if until_ms.is_some() { seq.min(by_time) } else { seq });
    let (anchor_seq, anchor_hash) = audit_log::anchor_position(state).await?;
    let after: u64 = parse_param(params, "after_seq")?.unwrap_or(anchor_seq);
    if after < anchor_seq {
        return Err(KmsError::Conflict(format!(
            "entries up to {anchor_seq} were pruned; an export starts at the anchor"
        )));
    }
    if until <= anchor_seq {
        return Err(KmsError::Conflict(format!(
            "entries up to {anchor_seq} were pruned: nothing up to {until} is left to export"
        )));
    }
    let Some(until_hash) = state.store.audit_hash(until).await? else {
        return Err(KmsError::NotFound(format!("audit entry {until}")));
    };
    let mut prev = if after == anchor_seq {
        anchor_hash.clone()
    } else {
        state
            .store
            .audit_hash(after)
            .await?
            .ok_or_else(|| KmsError::NotFound(format!("audit entry {after}")))?
    };
    let page = if after >= until {
        Vec::new()
    } else {
        let want = u32::try_from((until - after).min(u64::from(limit))).unwrap_or(limit);
        state.store.audit_page(after, None, want).await?
    };
    let mut entries = Vec::with_capacity(page.len());
    for entry in page.into_iter().take_while(|e| e.seq <= until) {
        let hash = entry.hash.clone();
        entries.push(ExportedEntry::new(entry, std::mem::replace(&mut prev, hash)));
    }
    let next = entries.last().map(|e| e.seq).filter(|&seq| seq < until);
    ctx.note = Some(format!(
        "entries {} to {}",
        entries.first().map_or(0, |e| e.seq),
        entries.last().map_or(0, |e| e.seq)
    ));
    Reply::json(
        200,
        &json!({ "anchor_seq": anchor_seq, "anchor_hash": anchor_hash, "until_seq": until,
                 "until_hash": until_hash, "entries": entries, "next_after_seq": next }),
    )
}

/// The heartbeat's verdicts (see [`clients::heartbeat_verdicts`]), put
/// into the audit entry's detail.
async fn heartbeat(
    state: &State,
    client: &ClientInfo,
    keys: &[HeldKey],
    ctx: &mut Ctx,
) -> Result<Vec<HeartbeatVerdict>> {
    let (verdicts, known) = clients::heartbeat_verdicts(state, client, keys).await?;
    if let [only] = verdicts.as_slice() {
        ctx.key = Some(only.name.clone());
        ctx.version = Some(only.version);
        ctx.key_known = known == 1;
    }
    let summary: Vec<String> = verdicts
        .iter()
        .map(|v| match &v.reason {
            None => format!("{}:{} allowed", v.name, v.version),
            Some(reason) => format!("{}:{} refused ({reason})", v.name, v.version),
        })
        .collect();
    ctx.note = Some(summary.join("; "));
    ctx.denied = verdicts.iter().any(|v| !v.allowed);
    Ok(verdicts)
}

fn check_heartbeat(body: &HeartbeatRequest) -> Result<()> {
    clients::check_held_keys(&body.keys)
}

/// The key version the request's client may use for `key_use`, with its
/// material (see [`keys::usable`]); the version found goes into the
/// audit entry, refused or not.
async fn usable(
    state: &State,
    fp: &str,
    ctx: &mut Ctx,
    root: &RootKey,
    name: &str,
    key_use: KeyUse,
) -> Result<(Arc<MaterialRow>, SecretBytes)> {
    ctx.client(state, fp).await?;
    let client = ctx.client.as_ref().ok_or(KmsError::UnknownClient)?;
    keys::usable(state, client, root, name, &mut ctx.version, key_use, &mut ctx.key_known).await
}

async fn list_keys(state: &State, query: &str) -> Result<Reply> {
    let request = paging::key_request(&paging::query_params(query)?)?;
    let (keys, next) = lists::key_page(state, request).await?;
    let keys = objects::describe_all(state, keys).await?;
    Reply::json(200, &json!({ "keys": keys, "next_cursor": next }))
}

async fn list_clients(state: &State, query: &str) -> Result<Reply> {
    let request = paging::client_request(&paging::query_params(query)?)?;
    let (clients, next) = lists::client_page(state, request).await?;
    Reply::json(200, &json!({ "clients": clients, "next_cursor": next }))
}

/// The audit list: `next_after_seq` (the last entry's number) is kept for
/// callers of the older `after_seq` paging.
async fn list_audit(state: &State, query: &str) -> Result<Reply> {
    let (request, after_seq) = paging::audit_request(&paging::query_params(query)?)?;
    let (entries, next) = lists::audit_page(state, request, after_seq).await?;
    let last = entries.last().map(|e| e.seq);
    Reply::json(200, &json!({ "entries": entries, "next_cursor": next, "next_after_seq": last }))
}

fn decode_b64(what: &str, text: &[u8], limit: usize) -> Result<SecretBytes> {
    if text.len() > limit.div_ceil(3) * 4 + 4 {
        return Err(KmsError::invalid(format!("{what} is larger than {limit} bytes")));
    }
    let bytes = SecretBytes::new(
        B64.decode(text).map_err(|_| KmsError::invalid(format!("{what} is not base64")))?,
    );
    if bytes.len() > limit {
        return Err(KmsError::invalid(format!("{what} is larger than {limit} bytes")));
    }
    Ok(bytes)
}

/// The request bodies the API parses, by operation (as in the audit log).
pub const BODY_OPERATIONS: [&str; 15] = [
    "heartbeat",
    "client.revoke",
    "client.relabel",
    "sys.unseal",
    "key.create",
    "client.issue",
    "key.rotate",
    "key.revoke",
    "key.destroy",
    "key.wrap",
    "key.unwrap",
    "key.export",
    "key.sign",
    "key.verify",
    "certificate.register",
];

/// Parses a request body for `operation` (one of [`BODY_OPERATIONS`]) and
/// runs every check its handler makes before touching the store or a key:
/// the request-parsing edge on its own, for fuzzing and tests.
pub fn check_request_body(operation: &str, body: &[u8]) -> Result<()> {
    match operation {
        "sys.unseal" => parse_json::<UnsealRequest>(body)?.secret().map(drop),
        "key.create" => {
            let body: CreateKeyRequest = parse_json(body)?;
            check_name("key name", &body.name)?;
            let kind = key_pairs::rest_key_type(body.key_type.as_deref().unwrap_or("aes-256"))?;
            if kind.is_some() {
                check_pair_name(&body.name)?;
            }
            parse_policy(&body.allow).map(drop)
        }
        "key.sign" => parse_json::<SignBody>(body)?.input().map(drop),
        "key.verify" => parse_json::<VerifyBody>(body)?.input().map(drop),
        "certificate.register" => {
            let body: CertificateRequest = parse_json(body)?;
            if let Some(name) = &body.name {
                check_name("certificate name", name)?;
            }
            parse_policy(&body.allow)?;
            objects::certificate_der(&body.certificate).map(drop)
        }
        "client.issue" => {
            let body: IssueClientRequest = parse_json(body)?;
            check_name("client name", &body.name)?;
            Labels::new(body.labels)?;
            clients::check_days(body.days).map(drop)
        }
        "heartbeat" => check_heartbeat(&parse_json::<HeartbeatRequest>(body)?),
        "client.revoke" => service::check_reason(&parse_json::<ReasonRequest>(body)?.reason),
        "client.relabel" => Labels::new(parse_json::<LabelsRequest>(body)?.labels).map(drop),
        "key.rotate" => parse_json::<Empty>(body).map(drop),
        "key.revoke" => service::check_reason(&parse_json::<RevokeRequest>(body)?.reason),
        "key.destroy" | "key.export" => parse_json::<VersionRequest>(body).map(drop),
        "key.wrap" => {
            let body: WrapRequest = parse_json(body)?;
            decode_b64("plaintext", body.plaintext.expose(), MAX_WRAP_PLAINTEXT)?;
            let context = body.context.as_deref().unwrap_or("").as_bytes();
            decode_b64("context", context, MAX_CONTEXT).map(drop)
        }
        "key.unwrap" => {
            let body: UnwrapRequest = parse_json(body)?;
            WrappedHeader::parse(&body.ciphertext)?;
            let context = body.context.as_deref().unwrap_or("").as_bytes();
            decode_b64("context", context, MAX_CONTEXT).map(drop)
        }
        other => Err(KmsError::invalid(format!("no request body for operation '{other}'"))),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Empty {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExportedRequest {
    after_seq: u64,
    until_seq: u64,
    until_hash: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PruneRequest {
    until_seq: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateKeyRequest {
    name: String,
    #[serde(default)]
    allow: Vec<String>,
    #[serde(default)]
    exportable: bool,
    /// `aes-256` (the default), or a key pair's type (see
    /// [`key_pairs::KEY_TYPES`]).
    #[serde(default, rename = "type", deserialize_with = "present_string")]
    key_type: Option<String>,
}

/// An optional string field that, when present, is a string (`null` is
/// refused as any other non-string).
fn present_string<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<String>, D::Error> {
    String::deserialize(d).map(Some)
}

/// A key pair's private key is named as asked, its public key NAME.pub:
/// both must be valid key names.
fn check_pair_name(name: &str) -> Result<()> {
    check_name("key name", &key_pairs::public_name(name)).map_err(|_| {
        KmsError::invalid(format!(
            "key pair name {name} is too long (its public key is {name}.pub)"
        ))
    })
}

/// Makes key pair `body.name` (and `body.name`.pub) over the service's
/// Create Key Pair: active from now, allowed to `body.allow`; the
/// private key's view.
async fn create_pair(
    state: &State,
    client: &ClientInfo,
    body: CreateKeyRequest,
    algorithm: rampart_kmip::enums::CryptographicAlgorithm,
    length: i32,
) -> Result<crate::model::KeyView> {
    check_name("key name", &body.name)?;
    check_pair_name(&body.name)?;
    let allow = parse_policy(&body.allow)?;
    let public_name = key_pairs::public_name(&body.name);
    let now = now_ms();
    let half = |name: &str| -> Result<crate::server::kmip_objects::NewObject> {
        let mut new = crate::server::kmip_objects::NewObject {
            activation_ms: Some(now),
            ..Default::default()
        };
        new.stored.push(key_pairs::name_row(name).map_err(objects::from_kmip)?);
        Ok(new)
    };
    let spec = key_pairs::PairSpec {
        private: half(&body.name)?,
        public: half(&public_name)?,
        private_name: body.name.clone(),
        public_name,
        algorithm,
        length: Some(length),
        allow: Some(allow),
        exportable: body.exportable,
    };
    key_pairs::create_key_pair(state, client, spec).await.map_err(objects::from_kmip)?;
    objects::describe(state, keys::get_key(state, &body.name).await?).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CertificateRequest {
    #[serde(default, deserialize_with = "present_string")]
    name: Option<String>,
    /// PEM, or base64 of the DER.
    certificate: String,
    #[serde(default)]
    allow: Vec<String>,
}

/// What `sign` signs: a message or the caller's digest of it (base64).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SignBody {
    #[serde(default, deserialize_with = "present_string")]
    message: Option<String>,
    #[serde(default, deserialize_with = "present_string")]
    digest: Option<String>,
    #[serde(default, deserialize_with = "present_string")]
    algorithm: Option<String>,
}

impl SignBody {
    fn input(&self) -> Result<SignInput> {
        if let Some(a) = &self.algorithm {
            objects::check_signature_algorithm(a)?;
        }
        match (&self.message, &self.digest) {
            (Some(m), None) => {
                let bytes = decode_b64("message", m.as_bytes(), MAX_SIGN_INPUT)?;
                Ok(SignInput::Message(bytes.expose().to_vec()))
            }
            (None, Some(d)) => {
                let bytes = decode_b64("digest", d.as_bytes(), 64)?;
                if bytes.is_empty() {
                    return Err(KmsError::invalid("the digest is empty"));
                }
                Ok(SignInput::Digest(bytes.expose().to_vec()))
            }
            (Some(_), Some(_)) => Err(KmsError::invalid("give a message or a digest, not both")),
            (None, None) => Err(KmsError::invalid("give a message or a digest (base64)")),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct VerifyBody {
    #[serde(default, deserialize_with = "present_string")]
    message: Option<String>,
    #[serde(default, deserialize_with = "present_string")]
    digest: Option<String>,
    #[serde(default, deserialize_with = "present_string")]
    algorithm: Option<String>,
    signature: String,
}

impl VerifyBody {
    fn input(&self) -> Result<(SignInput, Vec<u8>)> {
        let sign = SignBody {
            message: self.message.clone(),
            digest: self.digest.clone(),
            algorithm: self.algorithm.clone(),
        };
        let input = sign.input()?;
        let signature = decode_b64("signature", self.signature.as_bytes(), MAX_SIGNATURE)?;
        if signature.is_empty() {
            return Err(KmsError::invalid("the signature is empty"));
        }
        Ok((input, signature.expose().to_vec()))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RevokeRequest {
    reason: String,
    #[serde(default)]
    version: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReasonRequest {
    reason: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LabelsRequest {
    labels: BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HeartbeatRequest {
    keys: Vec<HeldKey>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct VersionRequest {
    #[serde(default)]
    version: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WrapRequest {
    #[serde(with = "crate::bundle::secret_text")]
    plaintext: SecretBytes,
    #[serde(default, deserialize_with = "present_string")]
    context: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UnwrapRequest {
    ciphertext: String,
    #[serde(default, deserialize_with = "present_string")]
    context: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct IssueClientRequest {
    name: String,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    admin: bool,
    csr: String,
    #[serde(default)]
    days: Option<u32>,
}

/// One Shamir share, or the HSM token's user PIN.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UnsealRequest {
    #[serde(default, deserialize_with = "optional_secret")]
    share: Option<SecretBytes>,
    #[serde(default, deserialize_with = "optional_secret")]
    pin: Option<SecretBytes>,
}

enum UnsealSecret {
    Share(Share),
    Pin(SecretBytes),
}

/// Longest PIN accepted (PKCS#11 tokens take far shorter ones).
const MAX_PIN: usize = 256;

impl UnsealRequest {
    fn secret(self) -> Result<UnsealSecret> {
        match (self.share, self.pin) {
            (Some(share), None) => {
                let text = std::str::from_utf8(share.expose())
                    .map_err(|_| KmsError::invalid("the share is not text"))?;
                Ok(UnsealSecret::Share(Share::from_hex(text)?))
            }
            (None, Some(pin)) => {
                if pin.is_empty() || pin.len() > MAX_PIN {
                    return Err(KmsError::invalid(format!("the PIN must be 1 to {MAX_PIN} bytes")));
                }
                Ok(UnsealSecret::Pin(pin))
            }
            _ => Err(KmsError::invalid("give either a share or a PIN")),
        }
    }
}

/// A secret string field. Any other JSON type is refused without the
/// parser's usual echo of the value (`invalid type: integer 1234`): a PIN
/// typed as a number must not reach the response or the audit log.
fn optional_secret<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<SecretBytes>, D::Error> {
    match Value::deserialize(d)? {
        Value::String(text) => Ok(Some(SecretBytes::new(text.into_bytes()))),
        Value::Null => Ok(None),
        _ => Err(serde::de::Error::custom("a share or PIN must be a JSON string")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sign_and_verify_bodies_take_one_base64_input_and_a_known_algorithm() {
        assert!(check_request_body("key.sign", br#"{"message":"aGk="}"#).is_ok());
        let digest = br#"{"digest":"aGk=","algorithm":"ecdsa-sha256"}"#;
        assert!(check_request_body("key.sign", digest).is_ok());
        for bad in [
            r#"{}"#,
            r#"{"message":"!"}"#,
            r#"{"message":"aGk=","digest":"aGk="}"#,
            r#"{"message":"aGk=","algorithm":"md5"}"#,
            r#"{"message":"aGk=","extra":1}"#,
            r#"{"digest":""}"#,
        ] {
            let error = check_request_body("key.sign", bad.as_bytes()).unwrap_err();
            assert_eq!(error.status(), 400, "{bad}");
        }
        let big = format!(r#"{{"message":"{}"}}"#, B64.encode(vec![0u8; MAX_SIGN_INPUT + 1]));
        assert!(check_request_body("key.sign", big.as_bytes()).is_err());
        assert!(
            check_request_body("key.verify", br#"{"message":"aGk=","signature":"aGk="}"#).is_ok()
        );
        assert!(check_request_body("key.verify", br#"{"message":"aGk="}"#).is_err());
        assert!(check_request_body("key.verify", br#"{"message":"aGk=","signature":""}"#).is_err());
    }

    #[test]
    fn key_types_are_named_and_a_pair_leaves_room_for_its_public_key() {
        assert!(check_request_body("key.create", br#"{"name":"k","type":"ec-p256"}"#).is_ok());
        assert!(check_request_body("key.create", br#"{"name":"k"}"#).is_ok());
        assert!(check_request_body("key.create", br#"{"name":"k","type":null}"#).is_err());
        let wrap = br#"{"plaintext":"","context":null}"#;
        assert!(check_request_body("key.wrap", wrap).is_err());
        assert!(check_request_body("key.sign", br#"{"message":"aGk=","algorithm":null}"#).is_err());
        let error = check_request_body("key.create", br#"{"name":"k","type":"dsa"}"#).unwrap_err();
        assert!(error.to_string().contains("unknown key type 'dsa'"), "{error}");
        let long = |n: usize, t: &str| format!(r#"{{"name":"{}","type":"{t}"}}"#, "k".repeat(n));
        assert!(check_request_body("key.create", long(124, "ed25519").as_bytes()).is_ok());
        assert!(check_request_body("key.create", long(125, "ed25519").as_bytes()).is_err());
        assert!(check_request_body("key.create", long(128, "aes-256").as_bytes()).is_ok());
        let cert = br#"{"certificate":"not a certificate!"}"#;
        assert!(check_request_body("certificate.register", cert).is_err());
    }

    #[test]
    fn unseal_takes_a_share_or_a_pin_never_both() {
        let share = r#"{"share":"020101"}"#;
        assert!(check_request_body("sys.unseal", share.as_bytes()).is_ok());
        assert!(check_request_body("sys.unseal", br#"{"pin":"1234"}"#).is_ok());
        for bad in [
            &br#"{}"#[..],
            br#"{"share":"020101","pin":"1234"}"#,
            br#"{"pin":""}"#,
            br#"{"pin":1234}"#,
            br#"{"pin":"1234","other":1}"#,
        ] {
            let error = check_request_body("sys.unseal", bad).unwrap_err();
            assert_eq!(error.status(), 400, "{}", String::from_utf8_lossy(bad));
            assert!(!error.to_string().contains("1234"), "{error}");
        }
        let long = format!(r#"{{"pin":"{}"}}"#, "9".repeat(MAX_PIN + 1));
        assert!(check_request_body("sys.unseal", long.as_bytes()).is_err());
    }
}
