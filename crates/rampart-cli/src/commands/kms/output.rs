//! How `rampart kms ...` prints what the key manager answers: lists
//! streamed page by page as tables or JSON lines, keys, audit reports,
//! benchmark runs.

use std::io::Write;

use rampart_kms::audit::VerifyReport;
use rampart_kms::client::{ClientError, Page};
use rampart_kms::model::{format_time, AuditEntry, ClientInfo, KeyInfo, KeyView, ObjectInfo};
use rampart_kms_tools::bench::{BenchRun, KmipOperation};
use rampart_kms_tools::load::UnwrapRun;

use super::{map_client, ListArgs};

/// Walks a list page by page, printing each item as its page arrives
/// (a JSON line, or a table row under `header`): one page in memory at a
/// time, whatever the list's length. A reader that stops reading
/// (`| head`) ends the walk quietly.
pub(super) async fn walk<T: serde::Serialize, F, Fut>(
    paging: &ListArgs,
    json: bool,
    header: Option<String>,
    mut fetch: F,
    row: fn(&mut dyn Write, &T) -> std::io::Result<()>,
) -> anyhow::Result<()>
where
    F: FnMut(u32, Option<String>) -> Fut,
    Fut: std::future::Future<Output = Result<Page<T>, ClientError>>,
{
    if let (false, Some(header)) = (json, header) {
        outln!("{header}")?;
    }
    let emit =
        |out: &mut dyn Write, item: &T| if json { json_line(out, item) } else { row(out, item) };
    let mut out = std::io::stdout().lock();
    let mut printed = 0u64;
    let mut cursor = None;
    loop {
        let want = match paging.limit {
            Some(total) => {
                u32::try_from(total.saturating_sub(printed).min(u64::from(paging.page_size)))
                    .unwrap_or(paging.page_size)
            }
            None => paging.page_size,
        };
        if want == 0 {
            return Ok(());
        }
        let page = fetch(want, cursor.take()).await.map_err(map_client)?;
        // A reader that went away (`| head`) ends the command quietly in main.
        page.items.iter().try_for_each(|item| emit(&mut out, item)).and_then(|()| out.flush())?;
        printed += page.items.len() as u64;
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return Ok(()),
        }
    }
}

fn json_line(out: &mut dyn Write, value: &impl serde::Serialize) -> std::io::Result<()> {
    serde_json::to_writer(&mut *out, value)?;
    out.write_all(b"\n")
}

pub(super) fn session_header() -> String {
    format!(
        "{:<16} {:<24} {:<22} {:<25} {:<25}",
        "ID", "ADMIN", "FROM", "SIGNED IN", "LAST REQUEST"
    )
}

pub(super) fn session_row(out: &mut dyn Write, s: &serde_json::Value) -> std::io::Result<()> {
    let time = |field: &str| format_time(s[field].as_i64().unwrap_or_default());
    writeln!(
        out,
        "{:<16} {:<24} {:<22} {:<25} {:<25}",
        s["id"].as_str().unwrap_or_default(),
        s["admin"].as_str().unwrap_or_default(),
        s["peer"].as_str().unwrap_or_default(),
        time("created_ms"),
        time("last_ms")
    )
}

pub(super) fn client_header() -> String {
    format!(
        "{:<24} {:<6} {:<32} {:<25} {:<8} FINGERPRINT",
        "NAME", "ADMIN", "LABELS", "EXPIRES", "STATE"
    )
}

pub(super) fn client_row(out: &mut dyn Write, c: &ClientInfo) -> std::io::Result<()> {
    let labels: Vec<String> = c.labels.as_map().iter().map(|(k, v)| format!("{k}={v}")).collect();
    writeln!(
        out,
        "{:<24} {:<6} {:<32} {:<25} {:<8} {}",
        c.name,
        if c.admin { "yes" } else { "no" },
        labels.join(","),
        format_time(c.not_after_ms),
        if c.revoked.is_some() { "revoked" } else { "active" },
        &c.fingerprint[..c.fingerprint.len().min(16)]
    )
}

pub(super) fn key_header() -> String {
    format!(
        "{:<32} {:>7} {:<9} {:<14} {:<9} {:<10} ALLOW",
        "NAME", "VERSION", "STATE", "TYPE", "ALGORITHM", "EXPORTABLE"
    )
}

/// A key's algorithm in a word: `ec-p256`, `rsa-2048`, `aes-256`, or
/// the algorithm and length.
fn algorithm_text(object: &ObjectInfo) -> String {
    if let Some(t) = &object.key_type {
        return t.clone();
    }
    match (&object.algorithm, object.length) {
        (Some(a), Some(l)) => format!("{a}-{l}"),
        (Some(a), None) => a.clone(),
        _ => "-".into(),
    }
}

pub(super) fn key_row(out: &mut dyn Write, view: &KeyView) -> std::io::Result<()> {
    let key = &view.key;
    let latest = key.latest();
    let allow: Vec<String> = key.allow.iter().map(ToString::to_string).collect();
    writeln!(
        out,
        "{:<32} {:>7} {:<9} {:<14} {:<9} {:<10} {}",
        key.name,
        latest.map_or(0, |v| v.version),
        latest.map_or("-", |v| v.state.name()),
        view.object.object_type,
        algorithm_text(&view.object),
        if key.exportable { "yes" } else { "no" },
        allow.join(" ")
    )
}

pub(super) fn audit_row(out: &mut dyn Write, e: &AuditEntry) -> std::io::Result<()> {
    let key = match (&e.key, e.version) {
        (Some(k), Some(v)) => format!("{k}#{v}"),
        (Some(k), None) => k.clone(),
        _ => "-".into(),
    };
    writeln!(
        out,
        "{:>6} {} {:<16} {:<20} {:<24} {:<8} {}",
        e.seq,
        format_time(e.time_ms),
        e.client,
        e.operation,
        key,
        e.outcome,
        e.detail
    )
}

/// A key as rotate, revoke and destroy answer it (without its type).
pub(super) fn print_key_info(key: &KeyInfo, json: bool) -> anyhow::Result<()> {
    if json {
        outln!("{}", serde_json::to_string_pretty(key)?)?;
        return Ok(());
    }
    print_key(&KeyView { key: key.clone(), object: ObjectInfo::default() }, false)
}

pub(super) fn print_key(view: &KeyView, json: bool) -> anyhow::Result<()> {
    if json {
        outln!("{}", serde_json::to_string_pretty(view)?)?;
        return Ok(());
    }
    let key = &view.key;
    let object = &view.object;
    let allow: Vec<String> = key.allow.iter().map(ToString::to_string).collect();
    outln!("key:        {}", key.name)?;
    if !object.object_type.is_empty() {
        outln!("type:       {}", object.object_type)?;
        outln!("algorithm:  {}", algorithm_text(object))?;
    }
    if let Some(curve) = &object.curve {
        outln!("curve:      {curve}")?;
    }
    for (what, linked) in [
        ("public key", &object.public_key),
        ("private key", &object.private_key),
        ("certificate", &object.certificate),
    ] {
        if let Some(name) = linked {
            outln!("{:<12}{name}", format!("{what}:"))?;
        }
    }
    outln!("created:    {}", format_time(key.created_ms))?;
    outln!("exportable: {}", if key.exportable { "yes" } else { "no" })?;
    outln!("allow:      {}", if allow.is_empty() { "(nobody)".into() } else { allow.join(" ") })?;
    outln!("versions:")?;
    for v in &key.versions {
        let reason = v.state.reason().map(|r| format!(" ({r})")).unwrap_or_default();
        outln!(
            "  {:>4}  {:<9}{}  created {}",
            v.version,
            v.state.name(),
            reason,
            format_time(v.created_ms)
        )?;
    }
    Ok(())
}

pub(super) fn print_report(report: &VerifyReport, json: bool) -> anyhow::Result<()> {
    if json {
        outln!("{}", serde_json::to_string_pretty(report)?)?;
    } else if report.ok {
        outln!(
            "audit log intact: {} entries after {} {} (entry {}), head #{} {} ({} without MAC{})",
            report.entries,
            report.start,
            report.start_hash,
            report.start_seq,
            report.head_seq,
            report.head_hash,
            report.unauthenticated,
            if report.macs_checked { "" } else { "; MACs not checked" }
        )?;
    }
    if !report.ok {
        let problem = report.problem.clone().unwrap_or_default();
        return Err(anyhow::anyhow!(
            "audit log verification FAILED at entry {}: {problem}",
            report.first_bad_seq.unwrap_or_default()
        ));
    }
    Ok(())
}

pub(super) fn print_unwrap_runs(runs: &[UnwrapRun], json: bool) -> anyhow::Result<()> {
    let rows: Vec<serde_json::Value> = runs
        .iter()
        .map(|run| {
            let report = &run.report;
            serde_json::json!({
                "concurrency": run.concurrency,
                "hosts": report.hosts,
                "keys": run.keys,
                "operations": report.unwraps + report.heartbeats,
                "unwraps": report.unwraps,
                "heartbeats": report.heartbeats,
                "ops_per_second": report.per_second(),
                "p50_ms": report.p50_ms,
                "p99_ms": report.p99_ms,
            })
        })
        .collect();
    if json {
        outln!(
            "{}",
            serde_json::to_string_pretty(
                &serde_json::json!({ "operation": "unwrap", "runs": rows })
            )?
        )?;
    } else {
        outln!("{:>11} {:>12} {:>10} {:>10}", "concurrency", "requests/s", "p50 ms", "p99 ms")?;
        for row in rows {
            outln!(
                "{:>11} {:>12.0} {:>10.3} {:>10.3}",
                row["concurrency"],
                row["ops_per_second"].as_f64().unwrap_or(0.0),
                row["p50_ms"].as_f64().unwrap_or(0.0),
                row["p99_ms"].as_f64().unwrap_or(0.0)
            )?;
        }
    }
    Ok(())
}

pub(super) fn print_kmip_runs(
    reports: &[(KmipOperation, Vec<BenchRun>)],
    json: bool,
) -> anyhow::Result<()> {
    if json {
        let value: Vec<serde_json::Value> = reports
            .iter()
            .map(|(op, runs)| serde_json::json!({ "operation": op.name(), "runs": runs }))
            .collect();
        outln!("{}", serde_json::to_string_pretty(&serde_json::json!({ "kmip": value }))?)?;
    } else {
        outln!(
            "{:>20} {:>11} {:>10} {:>10} {:>10} {:>8}",
            "operation",
            "concurrency",
            "ops/s",
            "p50 ms",
            "p99 ms",
            "tls"
        )?;
        for (op, runs) in reports {
            for run in runs {
                outln!(
                    "{:>20} {:>11} {:>10.0} {:>10.3} {:>10.3} {:>8}",
                    op.name(),
                    run.concurrency,
                    run.ops_per_second,
                    run.p50_ms,
                    run.p99_ms,
                    run.tls.as_deref().unwrap_or("-")
                )?;
            }
        }
    }
    Ok(())
}
