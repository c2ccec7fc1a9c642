//! Audit archives on the operator's disk: `kms audit export` writes one
//! so that a crash can never leave a half-written archive that a prune
//! relies on, and `kms audit verify --file` checks one offline.

use std::path::{Path, PathBuf};

use super::AdminError;
use crate::audit::VerifyReport;
use crate::client::{AuditExportSummary, AuditUntil, KmsClient};
use crate::model::parse_time;

/// `--until` of an export: digits are a sequence number, anything else a
/// time (RFC 3339, or Unix seconds) for the newest entry stamped at or
/// before it.
pub fn parse_until(text: &str) -> Result<AuditUntil, AdminError> {
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        let seq = text
            .parse()
            .map_err(|_| AdminError::Usage(format!("--until {text} is out of range")))?;
        return Ok(AuditUntil::Seq(seq));
    }
    Ok(AuditUntil::TimeMs(parse_time(text)?))
}

/// Exports the entries from the anchor up to `until` into the new file
/// `out`: written to `out.partial`, synced, renamed into place (the
/// directory synced too), and only then recorded on the server. An
/// existing `out` is never overwritten.
pub async fn export(
    kms: &KmsClient,
    until: AuditUntil,
    out: &Path,
) -> Result<AuditExportSummary, AdminError> {
    if out.exists() {
        return Err(AdminError::Usage(format!(
            "{} exists: an archive is never overwritten; choose another name",
            out.display()
        )));
    }
    let mut partial = out.as_os_str().to_owned();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&partial)
        .map_err(|e| AdminError::io("cannot create", &partial, &e))?;
    let mut writer = std::io::BufWriter::new(file);
    let summary = match kms.audit_export(until, &mut writer).await {
        Ok(summary) => summary,
        Err(error) => {
            drop(writer);
            let _ = std::fs::remove_file(&partial);
            return Err(error.into());
        }
    };
    let file = writer
        .into_inner()
        .map_err(|e| AdminError::Io(format!("cannot write the export: {}", e.error())))?;
    file.sync_all().map_err(|e| AdminError::io("cannot sync", &partial, &e))?;
    drop(file);
    std::fs::rename(&partial, out).map_err(|e| {
        AdminError::Io(format!("cannot rename {} to {}: {e}", partial.display(), out.display()))
    })?;
    let dir = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| AdminError::io("cannot sync", dir, &e))?;
    kms.audit_exported(summary.anchor_seq, summary.until_seq, &summary.until_hash).await?;
    Ok(summary)
}

/// Checks the archive `path` offline: hash links, sequence numbers, the
/// range its header names, that it starts from `anchor` when given, and
/// every entry's MAC with the root key of `unseal_key_file` when given.
pub fn verify_file(
    path: &Path,
    unseal_key_file: Option<&Path>,
    anchor: Option<&str>,
) -> Result<VerifyReport, AdminError> {
    let root = unseal_key_file.map(super::read_root_key).transpose()?;
    let input = std::fs::File::open(path).map_err(|e| AdminError::io("cannot open", path, &e))?;
    crate::audit::verify_export(std::io::BufReader::new(input), root.as_ref(), anchor)
        .map_err(|e| AdminError::io("cannot read", path, &e))
}
