//! Audit sinks: the chained entries, once committed to the store, as JSON
//! lines (the export format's entry lines: sequence number, link, fields,
//! hash and MAC) to a file and/or the local syslog socket, for SIEMs, as
//! Vault's audit devices do. The store stays the record of truth: a sink
//! that cannot take a batch is logged and counted
//! (`rampart_kms_audit_sink_errors_total`), and the request is answered.
//!
//! File: opened for append (mode 0600), one `write` per batch of entries,
//! `fdatasync` after each batch with `--audit-file-fsync` (otherwise the
//! kernel writes it back; the store already holds the entries durably).
//! Reopened on [`Sinks::request_reopen`] (`kms serve` calls it on SIGHUP,
//! after logrotate renamed the file), and, with a size limit, rotated by
//! the server itself: the full file is renamed `PATH.SEQ` after the last
//! entry it holds and a new one started.
//!
//! Syslog: one datagram per entry to a Unix datagram socket (`/dev/log`,
//! where journald and rsyslog listen), `<PRI>TIMESTAMP rampart-kms[PID]:
//! JSON`, facility authpriv, severity info.

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::audit::ExportedEntry;

/// The default syslog socket.
pub const SYSLOG_SOCKET: &str = "/dev/log";
/// authpriv (10) * 8 + info (6).
const SYSLOG_PRI: u8 = 86;
/// How long a send to a stalled syslog daemon may block the audit writer.
const SYSLOG_TIMEOUT: Duration = Duration::from_secs(1);

/// Where the chained entries are streamed to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SinkOptions {
    /// Append the entries to this file.
    pub file: Option<PathBuf>,
    /// Rotate the file (rename it `PATH.SEQ`) before it grows past this.
    pub file_max_bytes: Option<u64>,
    /// `fdatasync` the file after each batch.
    pub file_fsync: bool,
    /// Send the entries to this syslog socket (`/dev/log`).
    pub syslog: Option<PathBuf>,
}

struct FileSink {
    path: PathBuf,
    file: File,
    size: u64,
    max: Option<u64>,
    fsync: bool,
}

fn open_append(path: &Path) -> std::io::Result<(File, u64)> {
    let file = OpenOptions::new().create(true).append(true).mode(0o600).open(path)?;
    let size = file.metadata()?.len();
    Ok((file, size))
}

impl FileSink {
    fn open(path: &Path, max: Option<u64>, fsync: bool) -> std::io::Result<Self> {
        let (file, size) = open_append(path)?;
        Ok(Self { path: path.to_owned(), file, size, max, fsync })
    }

    fn reopen(&mut self) -> std::io::Result<()> {
        let (file, size) = open_append(&self.path)?;
        self.file = file;
        self.size = size;
        Ok(())
    }

    fn write(&mut self, bytes: &[u8], last_before: u64) -> std::io::Result<()> {
        if self.max.is_some_and(|max| self.size > 0 && self.size + bytes.len() as u64 > max) {
            let mut rotated = self.path.clone().into_os_string();
            rotated.push(format!(".{last_before}"));
            if Path::new(&rotated).exists() {
                rotated.push(format!(".{}", crate::model::now_ms()));
            }
            std::fs::rename(&self.path, &rotated)?;
            self.reopen()?;
        }
        self.file.write_all(bytes)?;
        self.size += bytes.len() as u64;
        if self.fsync {
            self.file.sync_data()?;
        }
        Ok(())
    }
}

struct SyslogSink {
    path: PathBuf,
    socket: Option<UnixDatagram>,
}

impl SyslogSink {
    fn connect(&mut self) -> std::io::Result<&UnixDatagram> {
        if self.socket.is_none() {
            let socket = UnixDatagram::unbound()?;
            socket.set_write_timeout(Some(SYSLOG_TIMEOUT))?;
            socket.connect(&self.path)?;
            self.socket = Some(socket);
        }
        self.socket.as_ref().ok_or_else(|| std::io::Error::other("syslog socket not connected"))
    }

    fn send(&mut self, message: &[u8]) -> std::io::Result<()> {
        // A restarted syslog daemon has a new socket: reconnect once.
        for attempt in 0..2 {
            let result = self.connect().and_then(|s| s.send(message));
            match result {
                Ok(_) => return Ok(()),
                Err(error) if attempt == 0 => {
                    tracing::debug!("syslog send failed ({error}); reconnecting");
                    self.socket = None;
                }
                Err(error) => return Err(error),
            }
        }
        Ok(())
    }
}

/// The configured sinks.
pub(crate) struct Sinks {
    file: Option<FileSink>,
    syslog: Option<SyslogSink>,
    reopen: Arc<AtomicBool>,
    tag: String,
}

impl Sinks {
    /// Opens the file sink (an error if it cannot be opened: better
    /// refused at start than silently missing).
    pub(crate) fn open(options: &SinkOptions) -> crate::error::Result<Self> {
        let file = options
            .file
            .as_deref()
            .map(|path| {
                FileSink::open(path, options.file_max_bytes, options.file_fsync).map_err(|e| {
                    crate::error::KmsError::Config(format!(
                        "cannot open the audit file {}: {e}",
                        path.display()
                    ))
                })
            })
            .transpose()?;
        let syslog = options.syslog.clone().map(|path| SyslogSink { path, socket: None });
        Ok(Self {
            file,
            syslog,
            reopen: Arc::new(AtomicBool::new(false)),
            tag: format!("rampart-kms[{}]", std::process::id()),
        })
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.file.is_none() && self.syslog.is_none()
    }

    /// A flag that makes the next batch reopen the file first.
    pub(crate) fn reopen_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.reopen)
    }

    /// Writes committed entries, in order; the number of sinks that
    /// failed (each failure logged).
    pub(crate) fn write(&mut self, entries: &[ExportedEntry]) -> u32 {
        let mut failed = 0;
        let lines: Vec<Vec<u8>> = entries
            .iter()
            .map(|e| serde_json::to_vec(e).unwrap_or_else(|_| b"{}".to_vec()))
            .collect();
        if let Some(file) = &mut self.file {
            let mut result = Ok(());
            if self.reopen.swap(false, Ordering::AcqRel) {
                result = file.reopen();
            }
            if result.is_ok() {
                let mut bytes = Vec::with_capacity(lines.iter().map(|l| l.len() + 1).sum());
                for line in &lines {
                    bytes.extend_from_slice(line);
                    bytes.push(b'\n');
                }
                let last_before = entries.first().map_or(0, |e| e.seq.saturating_sub(1));
                result = file.write(&bytes, last_before);
            }
            if let Err(error) = result {
                failed += 1;
                tracing::error!("cannot write the audit file {}: {error}", file.path.display());
            }
        }
        if let Some(syslog) = &mut self.syslog {
            let stamp = syslog_time();
            for line in &lines {
                let mut message = format!("<{SYSLOG_PRI}>{stamp} {}: ", self.tag).into_bytes();
                message.extend_from_slice(line);
                if let Err(error) = syslog.send(&message) {
                    failed += 1;
                    tracing::error!(
                        "cannot send audit entries to syslog at {}: {error}",
                        syslog.path.display()
                    );
                    break;
                }
            }
        }
        failed
    }
}

/// `Mmm dd hh:mm:ss` (RFC 3164), in UTC.
fn syslog_time() -> String {
    const MONTHS: [&str; 12] =
        ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let now = time::OffsetDateTime::now_utc();
    format!(
        "{} {:>2} {:02}:{:02}:{:02}",
        MONTHS[usize::from(u8::from(now.month()) - 1) % 12],
        now.day(),
        now.hour(),
        now.minute(),
        now.second()
    )
}
