//! The console's pages: Keys, Clients, Audit, Health and Sessions.
//! Forms are parsed into the typed arguments of the service operations
//! the REST handlers call too ([`crate::server::service`]).

use std::collections::BTreeMap;

use hyper::Method;

use super::html::{query, Html};
use super::request::{Audit, Auth, Out, Req};
use super::sessions::{MAX_SESSIONS, SESSION_IDLE_MS, SESSION_MAX_MS};
use crate::bundle::{Bundle, BUNDLE_FORMAT};
use crate::error::{KmsError, Result};
use crate::model::{
    check_name, now_ms, AuditEntry, ClientInfo, KeyInfo, KeyState, KeyView, Labels, ObjectInfo,
};
use crate::server::audit_log::{self, WalkFrom};
use crate::server::paging;
use crate::server::service::clients::{self, ClientChange};
use crate::server::service::{self, keys, lists, objects};
use crate::server::state::{State, PRESENCE_INTERVAL};
use crate::store::ClientFilter;

/// Items per list page.
const PAGE: &str = "50";
/// Most entries one audit download holds.
const MAX_EXPORT: usize = 100_000;
/// Certificates expiring within this many days are flagged.
const EXPIRY_WARNING_DAYS: i64 = 30;
const DAY_MS: i64 = 24 * 60 * 60 * 1000;

/// `2026-05-01 12:00:00 UTC`.
pub(super) fn time(ms: i64) -> String {
    let format = time::format_description::parse_borrowed::<2>(
        "[year]-[month]-[day] [hour]:[minute]:[second]",
    );
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .zip(format.ok())
        .and_then(|(t, f)| t.format(&f).ok())
        .map_or_else(|| format!("{ms} ms since 1970"), |t| format!("{t} UTC"))
}

/// A duration in words with its unit.
fn span(ms: i64) -> String {
    let s = ms / 1000;
    if s.abs() < 120 {
        format!("{s} s")
    } else if s.abs() < 7200 {
        format!("{} min", s / 60)
    } else if s.abs() < 2 * 86_400 {
        format!("{} h", s / 3600)
    } else {
        format!("{} days", s / 86_400)
    }
}

/// The page around a body: head, navigation, main.
pub(super) fn layout(title: &str, body: &str) -> String {
    let mut h = Html::new();
    h.raw("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">")
        .raw("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">")
        .raw("<title>")
        .text(title)
        .raw(" · Rampart key manager</title>")
        // No favicon request: it would go to /favicon.ico, outside /ui/.
        .raw("<link rel=\"icon\" href=\"data:,\">")
        .raw("<link rel=\"stylesheet\" href=\"/ui/static/console.css\">")
        .raw("<script src=\"/ui/static/console.js\" defer></script></head><body>");
    let mut out = h.finish();
    out.push_str(body);
    out.push_str("</body></html>");
    out
}

fn nav(h: &mut Html, auth: &Auth, current: &str) {
    h.raw(
        "<header><nav aria-label=\"Console\"><span class=\"brand\">Rampart key manager</span><ul>",
    );
    for (href, name) in [
        ("/ui/keys", "Keys"),
        ("/ui/clients", "Clients"),
        ("/ui/audit", "Audit"),
        ("/ui/health", "Health"),
        ("/ui/sessions", "Sessions"),
    ] {
        h.raw("<li><a").attr("href", href);
        if name == current {
            h.raw(" aria-current=\"page\"");
        }
        h.raw(">").text(name).raw("</a></li>");
    }
    h.raw("</ul><form method=\"post\" action=\"/ui/logout\" class=\"signout\">")
        .raw("<span>Signed in as <strong>")
        .text(&auth.admin.name)
        .raw("</strong></span> ");
    h.hidden("csrf", &auth.session.csrf);
    h.raw("<button type=\"submit\">Sign out</button></form></nav></header><main>");
    if let Some(flash) = &auth.session.flash {
        h.raw("<p class=\"flash\" role=\"status\">").text(flash).raw("</p>");
    }
}

fn page(auth: &Auth, current: &str, title: &str, fill: impl FnOnce(&mut Html)) -> Out {
    let mut h = Html::new();
    nav(&mut h, auth, current);
    h.raw("<h1>").text(title).raw("</h1>");
    fill(&mut h);
    h.raw("</main>");
    Out::Page { status: 200, title: title.to_owned(), body: h.finish() }
}

fn csrf_form(h: &mut Html, auth: &Auth, action: &str, class: &'static str) {
    h.raw("<form method=\"post\"").attr("action", action).raw(" class=\"").raw(class).raw("\">");
    h.hidden("csrf", &auth.session.csrf);
}

pub(super) fn login_form(code: &str) -> Out {
    let mut h = Html::new();
    h.raw("<main class=\"narrow\"><h1>Sign in to the Rampart key manager</h1>");
    h.raw("<p>This one-time link was made by <code>rampart kms console-login</code> for an admin certificate. It can be used once, within 2 minutes.</p>");
    h.raw("<form method=\"post\" action=\"/ui/login\">");
    h.hidden("code", code);
    h.raw("<button type=\"submit\" autofocus>Sign in</button></form></main>");
    Out::Page { status: 200, title: "Sign in".into(), body: h.finish() }
}

pub(super) fn refused_login(reason: &str) -> String {
    let mut h = Html::new();
    h.raw("<main class=\"narrow\"><h1>Sign-in refused</h1><p class=\"error\" role=\"alert\">")
        .text(reason)
        .raw("</p><p>Ask for a new link with <code>rampart kms console-login --kms ADMIN_BUNDLE</code>.</p></main>");
    h.finish()
}

pub(super) fn signed_out() -> String {
    let mut h = Html::new();
    h.raw("<main class=\"narrow\"><h1>Not signed in</h1>")
        .raw("<p>Your console session has ended or was never opened. Sign in with a one-time link from <code>rampart kms console-login --kms ADMIN_BUNDLE</code>.</p></main>");
    h.finish()
}

pub(super) fn error_body(error: &KmsError) -> String {
    let mut h = Html::new();
    h.raw("<main class=\"narrow\"><h1>")
        .text(&format!("Refused ({})", error.status()))
        .raw("</h1><p class=\"error\" role=\"alert\">")
        .text(&error.to_string())
        .raw("</p><p><a href=\"/ui/keys\">Back to the console</a></p></main>");
    h.finish()
}

/// The routes behind sign-in.
pub(super) async fn route(
    state: &State,
    req: &Req,
    auth: &Auth,
    segments: &[&str],
    audit: &mut Audit,
) -> Result<Out> {
    let post = req.method == Method::POST;
    let params = paging::query_params(&req.query)?;
    match segments {
        ["ui"] | ["ui", ""] => {
            audit.op = "console.asset";
            Ok(Out::Redirect("/ui/keys".into()))
        }
        ["ui", "logout"] if post => {
            audit.op = "console.logout";
            state.console.end(&auth.session.id);
            Ok(Out::Page { status: 200, title: "Signed out".into(), body: signed_out() })
        }
        ["ui", "keys"] if post => {
            audit.op = "key.create";
            let name = req.field("name").trim().to_owned();
            audit.key = Some(name.clone());
            audit.version = Some(1);
            let allow: Vec<String> = req
                .field("allow")
                .split(|c: char| c == ',' || c.is_whitespace())
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect();
            let key =
                keys::create_key(state, name, &allow, req.field("exportable") == "on").await?;
            audit.note = Some(format!("key {} created", key.name));
            Ok(Out::Redirect(format!("/ui/keys/{}", key.name)))
        }
        ["ui", "keys"] => {
            audit.op = "key.list";
            keys_page(state, auth, &params).await
        }
        ["ui", "keys", name] => {
            audit.op = "key.show";
            check_name("key name", name)?;
            audit.key = Some((*name).to_owned());
            let key = objects::describe(state, keys::get_key(state, name).await?).await?;
            Ok(key_page(auth, &key))
        }
        ["ui", "keys", name, "destroy"] if !post => {
            audit.op = "key.show";
            check_name("key name", name)?;
            audit.key = Some((*name).to_owned());
            let key = keys::get_key(state, name).await?;
            Ok(destroy_confirm(auth, &key, params.get("version").map_or("", String::as_str)))
        }
        ["ui", "keys", name, action @ ("rotate" | "revoke" | "destroy")] if post => {
            check_name("key name", name)?;
            audit.key = Some((*name).to_owned());
            let version = match req.field("version") {
                "" | "all" => None,
                v => Some(
                    v.parse::<u32>().map_err(|_| KmsError::invalid("version must be a number"))?,
                ),
            };
            let key = match *action {
                "rotate" => {
                    audit.op = "key.rotate";
                    let key = keys::rotate_key(state, name, &mut audit.version).await?;
                    audit.note = Some(format!(
                        "key {name} rotated to version {}",
                        audit.version.unwrap_or(0)
                    ));
                    key
                }
                "revoke" => {
                    audit.op = "key.revoke";
                    audit.version = version;
                    let key =
                        keys::revoke_key(state, name, version, req.field("reason").to_owned())
                            .await?;
                    audit.note = Some(format!("key {name} {} revoked", versions_text(version)));
                    key
                }
                _ => {
                    audit.op = "key.destroy";
                    audit.version = version;
                    if req.field("confirm") != *name {
                        return Err(KmsError::invalid(format!(
                            "type the key's name ({name}) to confirm its destruction"
                        )));
                    }
                    let key = keys::destroy_key(state, name, version).await?;
                    audit.note = Some(format!("key {name} {} destroyed", versions_text(version)));
                    key
                }
            };
            Ok(Out::Redirect(format!("/ui/keys/{}", key.name)))
        }
        ["ui", "clients"] if post => {
            audit.op = "client.issue";
            issue(state, req, audit).await
        }
        ["ui", "clients"] => {
            audit.op = "client.list";
            clients_page(state, auth, &params).await
        }
        ["ui", "clients", name] => {
            audit.op = "client.show";
            check_name("client name", name)?;
            let client = clients::client_by_name(state, name).await?;
            Ok(client_page(state, auth, &client))
        }
        ["ui", "clients", name, action @ ("revoke" | "labels")] if post => {
            check_name("client name", name)?;
            let change = if *action == "revoke" {
                audit.op = "client.revoke";
                ClientChange::Revoke(req.field("reason").to_owned())
            } else {
                audit.op = "client.relabel";
                ClientChange::Relabel(Labels::parse_list(req.field("labels"))?.as_map().clone())
            };
            let changed =
                clients::change_client(state, &auth.admin, (*name).to_owned(), change).await?;
            audit.note = Some(format!(
                "client {} {}",
                changed.name,
                if *action == "revoke" { "revoked" } else { "relabelled" }
            ));
            Ok(Out::Redirect(format!("/ui/clients/{}", changed.name)))
        }
        ["ui", "audit"] => {
            audit.op = "audit.list";
            audit_page(state, auth, &params, None).await
        }
        ["ui", "audit", "verify"] if post => {
            audit.op = "audit.verify";
            let root = state.require_root()?;
            let report = audit_log::verify(state, &root, WalkFrom::Anchor).await?;
            audit.note = Some(if report.ok {
                format!("intact: {} entries", report.entries)
            } else {
                format!("FAILED at {}", report.first_bad_seq.unwrap_or_default())
            });
            audit_page(state, auth, &params, Some(report)).await
        }
        ["ui", "audit", "export"] => {
            audit.op = "audit.export";
            let (filters, _) = audit_filters(&params)?;
            let mut body = Vec::new();
            let mut cursor = String::new();
            let mut count = 0usize;
            loop {
                let mut list = filters.clone();
                list.insert("limit".into(), "10000".into());
                if !cursor.is_empty() {
                    list.insert("cursor".into(), cursor.clone());
                }
                let (request, after_seq) = paging::audit_request(&list)?;
                let (entries, next) = lists::audit_page(state, request, after_seq).await?;
                count += entries.len();
                if count > MAX_EXPORT {
                    return Err(KmsError::Conflict(format!(
                        "more than {MAX_EXPORT} entries match: narrow the filter, or use `rampart kms audit export`"
                    )));
                }
                for entry in &entries {
                    serde_json::to_writer(&mut body, entry)
                        .map_err(|e| KmsError::Crypto(format!("cannot encode an entry: {e}")))?;
                    body.push(b'\n');
                }
                match next {
                    Some(n) => cursor = n,
                    None => break,
                }
            }
            audit.note = Some(format!("{count} entries downloaded"));
            Ok(Out::Download {
                filename: "rampart-audit.jsonl".into(),
                content_type: "application/x-ndjson",
                body,
            })
        }
        ["ui", "health"] => {
            audit.op = "console.health";
            health_page(state, auth).await
        }
        ["ui", "sessions"] => {
            audit.op = "console.sessions";
            Ok(sessions_page(state, auth))
        }
        ["ui", "sessions", id, "end"] if post => {
            audit.op = "console.session_end";
            if !state.console.end(id) {
                return Err(KmsError::NotFound(format!("console session {id}")));
            }
            audit.note = Some(format!("ended console session {id}"));
            if *id == auth.session.id {
                return Ok(Out::Page {
                    status: 200,
                    title: "Signed out".into(),
                    body: signed_out(),
                });
            }
            Ok(Out::Redirect("/ui/sessions".into()))
        }
        _ if post => Err(KmsError::NoRoute(req.path.clone())),
        _ => {
            audit.op = "console.unknown";
            Err(KmsError::NoRoute(req.path.clone()))
        }
    }
}

fn versions_text(version: Option<u32>) -> String {
    version.map_or_else(|| "(all versions)".into(), |v| format!("version {v}"))
}

fn param<'a>(params: &'a BTreeMap<String, String>, name: &str) -> &'a str {
    params.get(name).map_or("", String::as_str)
}

/// A list's parameters from form fields: an empty field does not filter.
fn list_params(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn next_link(h: &mut Html, base: &str, pairs: &[(&str, &str)], next: Option<&str>) {
    h.raw("<nav class=\"pager\" aria-label=\"Pages\">");
    let first = query(pairs);
    if !param_is_empty(pairs, "cursor")
        || pairs.iter().any(|(k, v)| *k == "after_seq" && !v.is_empty())
    {
        let without: Vec<(&str, &str)> =
            pairs.iter().copied().filter(|(k, _)| *k != "cursor" && *k != "after_seq").collect();
        h.link(&format!("{base}?{}", query(&without)), "First page");
        h.raw(" ");
    }
    let _ = first;
    if let Some(next) = next {
        let mut with: Vec<(&str, &str)> =
            pairs.iter().copied().filter(|(k, _)| *k != "cursor" && *k != "after_seq").collect();
        with.push(("cursor", next));
        h.raw("<a rel=\"next\"")
            .attr("href", &format!("{base}?{}", query(&with)))
            .raw(">Next page</a>");
    }
    h.raw("</nav>");
}

fn param_is_empty(pairs: &[(&str, &str)], name: &str) -> bool {
    pairs.iter().all(|(k, v)| *k != name || v.is_empty())
}

async fn keys_page(state: &State, auth: &Auth, params: &BTreeMap<String, String>) -> Result<Out> {
    let (prefix, key_state, cursor) =
        (param(params, "prefix"), param(params, "state"), param(params, "cursor"));
    let request = paging::key_request(&list_params(&[
        ("prefix", prefix),
        ("state", key_state),
        ("cursor", cursor),
        ("limit", PAGE),
    ]))?;
    let (keys, next) = lists::key_page(state, request).await?;
    let keys = objects::describe_all(state, keys).await?;
    Ok(page(auth, "Keys", "Keys", |h| {
        h.raw("<form method=\"get\" action=\"/ui/keys\" class=\"filters\" role=\"search\">");
        h.input("Name starts with", "prefix", prefix, "type=\"search\"");
        h.select(
            "State",
            "state",
            &[
                ("", "any"),
                ("active", "active"),
                ("revoked", "revoked"),
                ("destroyed", "destroyed"),
            ],
            key_state,
        );
        h.raw("<button type=\"submit\">Filter</button></form>");
        h.raw("<table><caption>Keys in name order (newest version's state)</caption><thead><tr>")
            .raw("<th scope=\"col\">Name</th><th scope=\"col\">Type</th><th scope=\"col\">Algorithm</th>")
            .raw("<th scope=\"col\">Versions</th><th scope=\"col\">Newest version</th>")
            .raw("<th scope=\"col\">Allow rules</th><th scope=\"col\">Exportable</th>")
            .raw("<th scope=\"col\">Created</th><th scope=\"col\">Last rotated</th></tr></thead><tbody>");
        for view in &keys {
            let key = &view.key;
            let latest = key.latest();
            h.raw("<tr><td>").link(&format!("/ui/keys/{}", key.name), &key.name).raw("</td>");
            h.td(&view.object.object_type);
            h.td(&algorithm_text(&view.object));
            h.td(&key.versions.len().to_string());
            h.td(
                &latest.map_or_else(String::new, |v| format!("{} ({})", v.version, v.state.name()))
            );
            h.td(&allow_text(key));
            h.td(if key.exportable { "yes" } else { "no" });
            h.td(&time(key.created_ms));
            h.td(&latest
                .filter(|v| v.version > 1)
                .map_or_else(|| "never".into(), |v| time(v.created_ms)));
            h.raw("</tr>");
        }
        if keys.is_empty() {
            h.raw("<tr><td colspan=\"9\">No key matches.</td></tr>");
        }
        h.raw("</tbody></table>");
        next_link(
            h,
            "/ui/keys",
            &[("prefix", prefix), ("state", key_state), ("cursor", cursor)],
            next.as_deref(),
        );
        h.raw("<section aria-labelledby=\"create-key\"><h2 id=\"create-key\">Create a key</h2>");
        csrf_form(h, auth, "/ui/keys", "stacked");
        h.input("Name", "name", "", "required pattern=\"[A-Za-z0-9][A-Za-z0-9._\\-]{0,127}\"");
        h.input(
            "Allow (client:NAME or label:KEY=VALUE, separated by spaces)",
            "allow",
            "",
            "size=\"60\"",
        );
        h.raw("<label><input type=\"checkbox\" name=\"exportable\"> Exportable (the raw material may be exported)</label>");
        h.raw("<button type=\"submit\">Create key</button></form></section>");
    }))
}

/// A key's algorithm in a word (`ec-p256`, `rsa-2048`, `aes-256`), with
/// its linked object when it has one.
fn algorithm_text(object: &ObjectInfo) -> String {
    let algorithm = match (&object.key_type, &object.algorithm, object.length) {
        (Some(t), _, _) => t.clone(),
        (None, Some(a), Some(l)) => format!("{a} {l}"),
        (None, Some(a), None) => a.clone(),
        _ => "-".into(),
    };
    match (&object.public_key, &object.private_key) {
        (Some(public), _) => format!("{algorithm} (public key {public})"),
        (_, Some(private)) => format!("{algorithm} (private key {private})"),
        _ => algorithm,
    }
}

fn allow_text(key: &KeyInfo) -> String {
    if key.allow.is_empty() {
        return "nobody".into();
    }
    key.allow.iter().map(ToString::to_string).collect::<Vec<_>>().join(" ")
}

fn key_page(auth: &Auth, view: &KeyView) -> Out {
    let key = &view.key;
    page(auth, "Keys", &format!("Key {}", key.name), |h| {
        h.raw("<dl>");
        h.el("dt", "Allow rules").el("dd", &allow_text(key));
        h.el("dt", "Exportable").el("dd", if key.exportable { "yes" } else { "no" });
        h.el("dt", "Created").el("dd", &time(key.created_ms));
        let rotated = key
            .latest()
            .filter(|v| v.version > 1)
            .map_or_else(|| "never".into(), |v| time(v.created_ms));
        h.el("dt", "Last rotated").el("dd", &rotated);
        h.el("dt", "Type").el("dd", &view.object.object_type);
        h.el("dt", "Algorithm").el("dd", &algorithm_text(&view.object));
        h.raw("</dl>");
        h.raw("<table><caption>Versions</caption><thead><tr><th scope=\"col\">Version</th><th scope=\"col\">State</th>")
            .raw("<th scope=\"col\">Reason</th><th scope=\"col\">Created</th><th scope=\"col\">State changed</th></tr></thead><tbody>");
        for v in key.versions.iter().rev() {
            h.raw("<tr>");
            h.td(&v.version.to_string());
            h.raw("<td><span")
                .attr("class", &format!("state {}", v.state.name()))
                .raw(">")
                .text(v.state.name())
                .raw("</span></td>");
            h.td(v.state.reason().unwrap_or(""));
            h.td(&time(v.created_ms));
            h.td(&v.changed_ms.map_or_else(String::new, time));
            h.raw("</tr>");
        }
        h.raw("</tbody></table>");
        let active: Vec<String> = key
            .versions
            .iter()
            .filter(|v| matches!(v.state, KeyState::Active))
            .map(|v| v.version.to_string())
            .collect();
        let mut options: Vec<(&str, &str)> = vec![("all", "all versions")];
        options.extend(active.iter().map(|v| (v.as_str(), v.as_str())));
        h.raw("<section aria-labelledby=\"rotate\"><h2 id=\"rotate\">Rotate</h2><p>Adds a version: new wraps use it; older versions still unwrap.</p>");
        csrf_form(h, auth, &format!("/ui/keys/{}/rotate", key.name), "inline");
        h.raw("<button type=\"submit\">Rotate key</button></form></section>");
        h.raw("<section aria-labelledby=\"revoke\"><h2 id=\"revoke\">Revoke</h2><p>A revoked version neither wraps nor unwraps.</p>");
        csrf_form(h, auth, &format!("/ui/keys/{}/revoke", key.name), "stacked");
        h.select("Version", "version", &options, "all");
        h.input("Reason (recorded in the audit log)", "reason", "", "required maxlength=\"1024\"");
        h.raw("<button type=\"submit\" data-confirm=\"Revoke this key?\">Revoke</button></form></section>");
        h.raw("<section aria-labelledby=\"destroy\"><h2 id=\"destroy\">Destroy</h2><p>Erases the material irreversibly: data wrapped by it can never be unwrapped.</p>");
        h.link(&format!("/ui/keys/{}/destroy", key.name), "Destroy…");
        h.raw("</section>");
    })
}

fn destroy_confirm(auth: &Auth, key: &KeyInfo, version: &str) -> Out {
    page(auth, "Keys", &format!("Destroy key {}", key.name), |h| {
        h.raw("<p class=\"warning\">Destroying erases the key material for good. Everything wrapped by the destroyed versions becomes unreadable. Type the key's name to confirm.</p>");
        csrf_form(h, auth, &format!("/ui/keys/{}/destroy", key.name), "stacked");
        let versions: Vec<String> = key.versions.iter().map(|v| v.version.to_string()).collect();
        let mut options: Vec<(&str, &str)> = vec![("all", "all versions")];
        options.extend(versions.iter().map(|v| (v.as_str(), v.as_str())));
        h.select("Version", "version", &options, if version.is_empty() { "all" } else { version });
        h.input("Key name", "confirm", "", "required autocomplete=\"off\"");
        h.raw("<button type=\"submit\" class=\"danger\">Destroy</button> ");
        h.link(&format!("/ui/keys/{}", key.name), "Cancel");
        h.raw("</form>");
    })
}

fn labels_text(labels: &Labels) -> String {
    labels.as_map().iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
}

fn expiry_text(not_after_ms: i64, now: i64) -> String {
    let left = not_after_ms - now;
    if left <= 0 {
        format!("{} (expired)", time(not_after_ms))
    } else {
        format!("{} (in {})", time(not_after_ms), span(left))
    }
}

fn activity(state: &State, client: &str) -> (String, String) {
    let (seen, heartbeat) = state.metrics.client_activity(client);
    let seen = seen.map_or_else(|| "not since this server started".into(), time);
    let heartbeat = heartbeat.map_or_else(
        || "none since this server started".into(),
        |(ms, allowed)| {
            format!("{} ({})", time(ms), if allowed { "all keys allowed" } else { "a key refused" })
        },
    );
    (seen, heartbeat)
}

async fn clients_page(
    state: &State,
    auth: &Auth,
    params: &BTreeMap<String, String>,
) -> Result<Out> {
    let (prefix, admin, revoked, cursor) = (
        param(params, "prefix"),
        param(params, "admin"),
        param(params, "revoked"),
        param(params, "cursor"),
    );
    let request = paging::client_request(&list_params(&[
        ("prefix", prefix),
        ("admin", admin),
        ("revoked", revoked),
        ("cursor", cursor),
        ("limit", PAGE),
    ]))?;
    let (clients, next) = lists::client_page(state, request).await?;
    let now = now_ms();
    Ok(page(auth, "Clients", "Clients", |h| {
        h.raw("<form method=\"get\" action=\"/ui/clients\" class=\"filters\" role=\"search\">");
        h.input("Name starts with", "prefix", prefix, "type=\"search\"");
        h.select(
            "Admin",
            "admin",
            &[("", "any"), ("true", "admins"), ("false", "not admins")],
            admin,
        );
        h.select(
            "Revoked",
            "revoked",
            &[("", "any"), ("false", "active"), ("true", "revoked")],
            revoked,
        );
        h.raw("<button type=\"submit\">Filter</button></form>");
        h.raw("<table><caption>Registered clients in name order</caption><thead><tr>")
            .raw("<th scope=\"col\">Identity</th><th scope=\"col\">Labels</th><th scope=\"col\">Admin</th>")
            .raw("<th scope=\"col\">Certificate expires</th><th scope=\"col\">State</th>")
            .raw("<th scope=\"col\">Last seen</th><th scope=\"col\">Last heartbeat</th></tr></thead><tbody>");
        for c in &clients {
            let (seen, heartbeat) = activity(state, &c.name);
            h.raw("<tr><td>").link(&format!("/ui/clients/{}", c.name), &c.name).raw("</td>");
            h.td(&labels_text(&c.labels));
            h.td(if c.admin { "yes" } else { "no" });
            let soon = c.not_after_ms - now < EXPIRY_WARNING_DAYS * DAY_MS;
            h.raw("<td")
                .attr("class", if soon { "soon" } else { "" })
                .raw(">")
                .text(&expiry_text(c.not_after_ms, now))
                .raw("</td>");
            h.td(if c.revoked.is_some() { "revoked" } else { "active" });
            h.td(&seen);
            h.td(&heartbeat);
            h.raw("</tr>");
        }
        if clients.is_empty() {
            h.raw("<tr><td colspan=\"7\">No client matches.</td></tr>");
        }
        h.raw("</tbody></table>");
        next_link(
            h,
            "/ui/clients",
            &[("prefix", prefix), ("admin", admin), ("revoked", revoked), ("cursor", cursor)],
            next.as_deref(),
        );
        h.raw("<section aria-labelledby=\"issue\"><h2 id=\"issue\">Issue a client bundle</h2>")
            .raw("<p>The server makes the key pair and certificate; the bundle (the same file as <code>rampart kms client issue</code> writes) is downloaded once and not kept. Store it like a private key.</p>");
        csrf_form(h, auth, "/ui/clients", "stacked");
        h.input("Name", "name", "", "required pattern=\"[A-Za-z0-9][A-Za-z0-9._\\-]{0,127}\"");
        h.input("Labels (KEY=VALUE,KEY=VALUE)", "labels", "", "size=\"40\"");
        h.input("Valid for (days)", "days", "365", "type=\"number\" min=\"1\" max=\"3650\"");
        h.raw("<label><input type=\"checkbox\" name=\"admin\"> Admin (may administer this key manager)</label>");
        h.raw("<button type=\"submit\">Issue and download bundle</button></form></section>");
    }))
}

fn client_page(state: &State, auth: &Auth, c: &ClientInfo) -> Out {
    let now = now_ms();
    let (seen, heartbeat) = activity(state, &c.name);
    page(auth, "Clients", &format!("Client {}", c.name), |h| {
        h.raw("<dl>");
        h.el("dt", "Labels").el("dd", &labels_text(&c.labels));
        h.el("dt", "Admin").el("dd", if c.admin { "yes" } else { "no" });
        h.el("dt", "Registered").el("dd", &time(c.created_ms));
        h.el("dt", "Certificate expires").el("dd", &expiry_text(c.not_after_ms, now));
        h.el("dt", "Certificate serial").el("dd", &c.serial);
        h.el("dt", "Certificate SHA-256").el("dd", &c.fingerprint);
        h.el("dt", "Last seen").el("dd", &seen);
        h.el("dt", "Last heartbeat").el("dd", &heartbeat);
        match &c.revoked {
            Some(r) => {
                h.el("dt", "Revoked").el("dd", &format!("{}: {}", time(r.revoked_ms), r.reason));
            }
            None => {
                h.el("dt", "State").el("dd", "active");
            }
        }
        h.raw("</dl>");
        h.raw("<p>")
            .link(
                &format!("/ui/audit?{}", query(&[("client", &c.name)])),
                "Audit entries of this client",
            )
            .raw("</p>");
        if c.revoked.is_none() {
            h.raw("<section aria-labelledby=\"relabel\"><h2 id=\"relabel\">Labels</h2>");
            csrf_form(h, auth, &format!("/ui/clients/{}/labels", c.name), "stacked");
            h.input(
                "Labels (KEY=VALUE,KEY=VALUE; replaces all)",
                "labels",
                &labels_text(&c.labels),
                "size=\"40\"",
            );
            h.raw("<button type=\"submit\">Relabel</button></form></section>");
            h.raw("<section aria-labelledby=\"revoke\"><h2 id=\"revoke\">Revoke</h2><p>Its certificate is refused at every later TLS handshake, request and heartbeat. Irreversible.</p>");
            csrf_form(h, auth, &format!("/ui/clients/{}/revoke", c.name), "stacked");
            h.input(
                "Reason (recorded in the audit log)",
                "reason",
                "",
                "required maxlength=\"1024\"",
            );
            h.raw("<button type=\"submit\" class=\"danger\" data-confirm=\"Revoke this client?\">Revoke client</button></form></section>");
        }
    })
}

/// Issues a client bundle (`POST /ui/clients`): the key pair is made
/// here, the certificate by the same function as `POST /v1/clients`.
async fn issue(state: &State, req: &Req, audit: &mut Audit) -> Result<Out> {
    let name = req.field("name").trim().to_owned();
    check_name("client name", &name)?;
    let labels = Labels::parse_list(req.field("labels"))?;
    let days = match req.field("days").trim() {
        "" => None,
        d => Some(d.parse::<u32>().map_err(|_| KmsError::invalid("days must be 1 to 3650"))?),
    };
    let host =
        req.host().ok_or_else(|| KmsError::invalid("the request has no usable Host header"))?;
    let (csr, key) = crate::pki::client_request(&name)?;
    let (client, cert, ca_cert) = clients::issue_client(
        state,
        name,
        labels.as_map().clone(),
        req.field("admin") == "on",
        &csr,
        days,
    )
    .await?;
    let bundle = Bundle {
        format: BUNDLE_FORMAT.into(),
        name: client.name.clone(),
        endpoints: vec![format!("https://{host}")],
        ca_cert,
        cert,
        key,
    };
    let body = serde_json::to_vec_pretty(&bundle)
        .map_err(|e| KmsError::Crypto(format!("cannot encode the bundle: {e}")))?;
    audit.note = Some(format!("client {} issued, bundle downloaded", client.name));
    Ok(Out::Download {
        filename: format!("{}.bundle", client.name),
        content_type: "application/json",
        body,
    })
}

/// The audit list's parameters from the console's filter fields: times
/// are `YYYY-MM-DDTHH:MM[:SS]` in UTC (as an `<input type=datetime-local>`
/// sends them) or RFC 3339.
#[allow(clippy::type_complexity)]
fn audit_filters(
    params: &BTreeMap<String, String>,
) -> Result<(BTreeMap<String, String>, Vec<(&'static str, String)>)> {
    let ms = |name: &str| -> Result<String> {
        let text = param(params, name).trim();
        if text.is_empty() {
            return Ok(String::new());
        }
        let full = match text.len() {
            16 => format!("{text}:00Z"),
            19 => format!("{text}Z"),
            _ => text.to_owned(),
        };
        Ok(crate::model::parse_time(&full)?.to_string())
    };
    let mut fields: Vec<(&'static str, String)> = Vec::new();
    for name in ["since", "until", "client", "key", "operation", "outcome"] {
        fields.push((name, param(params, name).trim().to_owned()));
    }
    let since = ms("since")?;
    let until = ms("until")?;
    let filters = list_params(&[
        ("since_ms", &since),
        ("until_ms", &until),
        ("client", param(params, "client").trim()),
        ("key", param(params, "key").trim()),
        ("operation", param(params, "operation").trim()),
        ("outcome", param(params, "outcome").trim()),
    ]);
    Ok((filters, fields))
}

async fn audit_page(
    state: &State,
    auth: &Auth,
    params: &BTreeMap<String, String>,
    report: Option<crate::audit::VerifyReport>,
) -> Result<Out> {
    let (mut list, fields) = audit_filters(params)?;
    let cursor = param(params, "cursor");
    let after = param(params, "after_seq");
    list.extend(list_params(&[("cursor", cursor), ("after_seq", after), ("limit", PAGE)]));
    let (request, after_seq) = paging::audit_request(&list)?;
    let (entries, next) = lists::audit_page(state, request, after_seq).await?;
    let field =
        |name: &str| fields.iter().find(|(k, _)| *k == name).map_or("", |(_, v)| v.as_str());
    Ok(page(auth, "Audit", "Audit log", |h| {
        h.raw(
            "<section aria-labelledby=\"chain\" class=\"chain\"><h2 id=\"chain\">Hash chain</h2>",
        );
        match &report {
            Some(r) if r.ok => {
                h.raw("<p class=\"ok\" role=\"status\">")
                    .text(&format!(
                        "Intact: {} entries checked from the {} (entry {}) to entry {}{}.",
                        r.entries,
                        r.start,
                        r.start_seq,
                        r.head_seq,
                        if r.macs_checked { ", MACs checked" } else { "" }
                    ))
                    .raw("</p>");
            }
            Some(r) => {
                let bad = r.first_bad_seq.unwrap_or_default();
                h.raw("<p class=\"error\" role=\"alert\">")
                    .text(&format!(
                        "BROKEN: the first bad entry is {bad}: {}",
                        r.problem.as_deref().unwrap_or("it does not match the chain")
                    ))
                    .raw("</p><p>");
                h.link(
                    &format!(
                        "/ui/audit?{}",
                        query(&[("after_seq", &bad.saturating_sub(1).to_string())])
                    ),
                    &format!("Show entry {bad} and those after it"),
                );
                h.raw("</p>");
            }
            None => {
                h.raw("<p>Not verified on this page yet.</p>");
            }
        }
        csrf_form(h, auth, "/ui/audit/verify", "inline");
        h.raw("<button type=\"submit\">Verify the chain</button></form></section>");
        h.raw("<form method=\"get\" action=\"/ui/audit\" class=\"filters\" role=\"search\">");
        h.input("Since (UTC)", "since", field("since"), "type=\"datetime-local\" step=\"1\"");
        h.input("Until (UTC)", "until", field("until"), "type=\"datetime-local\" step=\"1\"");
        h.input("Client", "client", field("client"), "size=\"16\"");
        h.input("Key", "key", field("key"), "size=\"16\"");
        h.input("Operation", "operation", field("operation"), "size=\"16\" list=\"operations\"");
        h.raw("<datalist id=\"operations\">");
        for op in [
            "key.create",
            "key.rotate",
            "key.revoke",
            "key.destroy",
            "key.wrap",
            "key.unwrap",
            "key.export",
            "client.issue",
            "client.revoke",
            "client.relabel",
            "heartbeat",
            "tls.handshake",
            "audit.verify",
            "console.login",
            "console.logout",
        ] {
            h.raw("<option").attr("value", op).raw(">");
        }
        h.raw("</datalist>");
        h.select(
            "Outcome",
            "outcome",
            &[
                ("", "any"),
                ("ok", "ok"),
                ("denied", "denied"),
                ("invalid", "invalid"),
                ("unavailable", "unavailable"),
                ("error", "error"),
            ],
            field("outcome"),
        );
        h.raw("<button type=\"submit\">Filter</button></form>");
        let filter_pairs: Vec<(&str, &str)> =
            fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
        h.raw("<p>")
            .link(
                &format!("/ui/audit/export?{}", query(&filter_pairs)),
                "Download these entries as JSON lines",
            )
            .raw("</p>");
        h.raw("<table class=\"audit\"><caption>Entries in chain order</caption><thead><tr><th scope=\"col\">#</th><th scope=\"col\">Time</th>")
            .raw("<th scope=\"col\">Client</th><th scope=\"col\">Operation</th><th scope=\"col\">Key</th>")
            .raw("<th scope=\"col\">Outcome</th><th scope=\"col\">Detail</th></tr></thead><tbody>");
        for e in &entries {
            entry_row(h, e, report.as_ref().and_then(|r| r.first_bad_seq));
        }
        if entries.is_empty() {
            h.raw("<tr><td colspan=\"7\">No entry matches.</td></tr>");
        }
        h.raw("</tbody></table>");
        let mut pairs = filter_pairs.clone();
        pairs.push(("cursor", cursor));
        pairs.push(("after_seq", after));
        next_link(h, "/ui/audit", &pairs, next.as_deref());
    }))
}

fn entry_row(h: &mut Html, e: &AuditEntry, bad: Option<u64>) {
    h.raw("<tr").attr("class", if bad == Some(e.seq) { "bad" } else { "" }).raw(">");
    h.td(&e.seq.to_string());
    h.td(&time(e.time_ms));
    h.td(&e.client);
    h.td(&e.operation);
    h.td(&match (&e.key, e.version) {
        (Some(k), Some(v)) => format!("{k} v{v}"),
        (Some(k), None) => k.clone(),
        _ => String::new(),
    });
    h.raw("<td><span")
        .attr("class", &format!("outcome {}", e.outcome))
        .raw(">")
        .text(&e.outcome)
        .raw("</span></td>");
    h.td(&e.detail);
    h.raw("</tr>");
}

/// The notAfter of a PEM certificate, Unix milliseconds.
fn not_after_ms(pem: &str) -> Option<i64> {
    let der = crate::pki::pem_to_der(pem).ok()?;
    let (_, cert) = x509_parser::parse_x509_certificate(&der).ok()?;
    cert.validity().not_after.timestamp().checked_mul(1000)
}

async fn health_page(state: &State, auth: &Auth) -> Result<Out> {
    let sealed = state.root().is_none();
    let seal = service::seal_status(state);
    let (ops, tls_refused) = state.metrics.summary();
    let uptime = state.console.uptime_seconds();
    let now = now_ms();
    let ca = state.store.get_meta(crate::store::meta::CA_CERT).await?;
    let ca_expiry = ca.as_deref().and_then(|c| std::str::from_utf8(c).ok()).and_then(not_after_ms);
    // Clients whose certificates expire soon (unrevoked, up to 50 000
    // looked at: the page stays cheap on a large fleet).
    let mut expiring: Vec<ClientInfo> = Vec::new();
    let mut after = String::new();
    let mut looked = 0usize;
    if !sealed {
        loop {
            let filter = ClientFilter { revoked: Some(false), ..ClientFilter::default() };
            let page =
                state.store.client_page(after.clone(), filter, crate::store::MAX_PAGE).await?;
            looked += page.len();
            let full = page.len() == crate::store::MAX_PAGE as usize;
            if let Some(last) = page.last() {
                after = last.name.clone();
            }
            expiring.extend(
                page.into_iter().filter(|c| c.not_after_ms - now < EXPIRY_WARNING_DAYS * DAY_MS),
            );
            if !full || looked >= 50_000 || expiring.len() >= 200 {
                break;
            }
        }
    }
    let server_expiry = not_after_ms(&state.server_cert_pem);
    let window = 3 * i64::try_from(PRESENCE_INTERVAL.as_millis()).unwrap_or(i64::MAX / 4);
    let servers = state.store.servers_seen(now - window).await?;
    Ok(page(auth, "Health", "Health", |h| {
        h.raw("<dl>");
        h.el("dt", "Seal state")
            .raw("<dd><span")
            .attr("class", if sealed { "state revoked" } else { "state active" })
            .raw(">")
            .text(if sealed { "sealed" } else { "unsealed" })
            .raw("</span> ")
            .text(&format!("(scheme: {})", seal["scheme"].as_str().unwrap_or("?")))
            .raw("</dd>");
        h.el("dt", "Store").el("dd", state.store.kind());
        h.el("dt", "Server version").el("dd", env!("CARGO_PKG_VERSION"));
        h.el("dt", "Started").el(
            "dd",
            &format!(
                "{} (up {})",
                time(state.console.started_ms()),
                span((uptime * 1000.0) as i64)
            ),
        );
        h.el("dt", "Refused TLS handshakes").el("dd", &format!("{tls_refused} since start"));
        h.el("dt", "Deployment CA expires")
            .el("dd", &ca_expiry.map_or_else(|| "unknown".into(), |ms| expiry_text(ms, now)));
        h.el("dt", "This server's certificate expires")
            .el("dd", &server_expiry.map_or_else(|| "unknown".into(), |ms| expiry_text(ms, now)));
        h.raw("</dl>");
        if ca_expiry.is_some_and(|ms| ms - now < EXPIRY_WARNING_DAYS * DAY_MS) {
            h.raw("<p class=\"warning\" role=\"alert\">The deployment CA certificate expires within 30 days.</p>");
        }
        if server_expiry.is_some_and(|ms| ms - now < EXPIRY_WARNING_DAYS * DAY_MS) {
            h.raw("<p class=\"warning\" role=\"alert\">This server's certificate expires within 30 days.</p>");
        }
        h.raw("<h2>Servers of this deployment</h2>");
        h.raw("<table><caption>Servers sharing this store, heard from in the last ")
            .text(&format!("{} s", 3 * PRESENCE_INTERVAL.as_secs()))
            .raw("</caption><thead><tr><th scope=\"col\">Host</th><th scope=\"col\">REST address</th>")
            .raw("<th scope=\"col\">Version</th><th scope=\"col\">Started</th><th scope=\"col\">Last heard from</th></tr></thead><tbody>");
        for server in &servers {
            let this = server.id == state.server_id;
            h.raw("<tr>");
            h.td(&if this {
                format!("{} (this server)", server.host)
            } else {
                server.host.clone()
            });
            h.td(&server.address);
            h.td(&server.version);
            h.td(&time(server.started_ms));
            h.td(&time(server.seen_ms));
            h.raw("</tr>");
        }
        if servers.is_empty() {
            h.raw("<tr><td colspan=\"5\">None yet (servers announce themselves every ")
                .text(&format!("{} s", PRESENCE_INTERVAL.as_secs()))
                .raw(").</td></tr>");
        }
        h.raw("</tbody></table>");
        h.raw("<h2>Requests since this server started</h2>");
        h.raw("<table><caption>By operation (REST, KMIP and console)</caption><thead><tr><th scope=\"col\">Operation</th><th scope=\"col\">Requests</th>")
            .raw("<th scope=\"col\">Rate (requests/s)</th><th scope=\"col\">Not ok</th><th scope=\"col\">Mean latency (ms)</th><th scope=\"col\">95 % under (ms)</th></tr></thead><tbody>");
        for op in &ops {
            h.raw("<tr>");
            h.td(op.operation);
            h.td(&op.requests.to_string());
            #[allow(clippy::cast_precision_loss)]
            let rate = if uptime > 0.0 { op.requests as f64 / uptime } else { 0.0 };
            h.td(&format!("{rate:.3} /s"));
            h.td(&op.refused.to_string());
            h.td(&format!("{:.2} ms", op.mean_seconds * 1000.0));
            h.td(&op
                .p95_bound_seconds
                .map_or_else(|| "> 2500 ms".into(), |s| format!("{} ms", s * 1000.0)));
            h.raw("</tr>");
        }
        if ops.is_empty() {
            h.raw("<tr><td colspan=\"6\">No request yet.</td></tr>");
        }
        h.raw("</tbody></table>");
        h.raw("<h2>Client certificates expiring within 30 days</h2>");
        if sealed {
            h.raw("<p>Sealed: the client list is not read.</p>");
        } else if expiring.is_empty() {
            h.raw("<p>").text(&format!("None (of {looked} active clients).")).raw("</p>");
        } else {
            h.raw("<ul class=\"expiring\">");
            for c in &expiring {
                h.raw("<li>")
                    .link(&format!("/ui/clients/{}", c.name), &c.name)
                    .raw(": ")
                    .text(&expiry_text(c.not_after_ms, now))
                    .raw("</li>");
            }
            h.raw("</ul>");
        }
    }))
}

fn sessions_page(state: &State, auth: &Auth) -> Out {
    let sessions = state.console.sessions(None, MAX_SESSIONS);
    let now = now_ms();
    page(auth, "Sessions", "Console sessions", |h| {
        h.raw("<p>")
            .text(&format!(
                "Sessions are kept in this server's memory (a restart signs everyone out); each ends after {} without a request, and {} after sign-in.",
                span(SESSION_IDLE_MS),
                span(SESSION_MAX_MS)
            ))
            .raw("</p>");
        h.raw("<table><caption>Open sessions, newest first</caption><thead><tr><th scope=\"col\">Session</th><th scope=\"col\">Admin</th>")
            .raw("<th scope=\"col\">From</th><th scope=\"col\">Signed in</th><th scope=\"col\">Last request</th><th scope=\"col\">Ends by</th><th scope=\"col\"></th></tr></thead><tbody>");
        for s in &sessions {
            h.raw("<tr>");
            h.td(&if s.id == auth.session.id {
                format!("{} (this browser)", s.id)
            } else {
                s.id.clone()
            });
            h.td(&s.admin);
            h.td(&s.peer);
            h.td(&time(s.created_ms));
            h.td(&format!("{} ({} ago)", time(s.last_ms), span(now - s.last_ms)));
            let ends = (s.last_ms + SESSION_IDLE_MS).min(s.created_ms + SESSION_MAX_MS);
            h.td(&time(ends));
            h.raw("<td>");
            csrf_form(h, auth, &format!("/ui/sessions/{}/end", s.id), "inline");
            h.raw("<button type=\"submit\">End session</button></form></td></tr>");
        }
        h.raw("</tbody></table>");
    })
}
