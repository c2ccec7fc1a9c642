//! `rampart kms ...`: the key management server and its clients.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::ValueEnum;
use rampart_crypto::SecretBytes;
use rampart_kms::client::{AuditQuery, ClientQuery, KeyQuery, KmsClient};
use rampart_kms::deployment::serve::ServeSettings;
use rampart_kms::deployment::{
    self, archive, files, AdminError, InitOptions, InitSeal, StoreAccess,
};
use rampart_kms::kmip::TlsVersions;
use rampart_kms::model::{format_time, parse_time, Labels};
use rampart_kms::server::{AuditOptions, Limits, ServerOptions, SinkOptions};
use rampart_kms::{Bundle, KmsError};
use rampart_kms_tools::bench::{BenchRuns, KmipBench, KmipOperation};
use rampart_kms_tools::bulk::{BulkPlan, PopulateSettings};
use rampart_kms_tools::load::{BenchHosts, UnwrapBench};

pub(crate) use crate::errors::map_client;
use crate::passphrase::Source;
use crate::UsageError;

mod args;
mod output;
pub use args::*;
use output::{
    audit_row, client_row, key_row, print_key, print_key_info, print_kmip_runs, print_report,
    print_unwrap_runs, session_row, walk,
};

/// The name a fixed-choice flag was given as.
fn choice_name(value: impl ValueEnum) -> String {
    value.to_possible_value().map(|v| v.get_name().to_owned()).unwrap_or_default()
}

pub(crate) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("rampart-kms")
        .build()
        .context("cannot start the I/O runtime")
}

/// (Also for the client crate's errors: bundles, names.)
fn map_kms(error: impl Into<KmsError>) -> anyhow::Error {
    let error = error.into();
    match error {
        KmsError::Config(_)
        | KmsError::InvalidRequest(_)
        | KmsError::Conflict(_)
        | KmsError::UnsealFailed(_) => UsageError(error.to_string()).into(),
        other => anyhow::Error::new(other),
    }
}

/// The operator commands' errors: usage errors exit 2, as the key
/// manager's and the client's errors do when they are the user's to fix.
fn map_admin(error: AdminError) -> anyhow::Error {
    match error {
        AdminError::Usage(message) => UsageError(message).into(),
        AdminError::Io(message) => anyhow::anyhow!(message),
        AdminError::Output(error) => error.into(),
        AdminError::Kms(error) => map_kms(error),
        AdminError::Client(error) => map_client(error),
        AdminError::Other(error) => anyhow::anyhow!(error),
        other => anyhow::Error::new(other),
    }
}

/// The client bundle's path: `--kms BUNDLE`, else `$RAMPART_KMS`, else none.
pub(crate) fn load_bundle(args: &ClientArgs) -> anyhow::Result<Bundle> {
    let path = args.bundle.as_deref().ok_or_else(|| {
        UsageError("no client bundle: give --kms BUNDLE or set RAMPART_KMS".into())
    })?;
    Bundle::read(path).map_err(map_kms)
}

pub(crate) fn connect(args: &ClientArgs) -> anyhow::Result<KmsClient> {
    KmsClient::new(&load_bundle(args)?).map_err(map_client)
}

pub fn run(command: &KmsCommand) -> anyhow::Result<()> {
    match command {
        KmsCommand::Init(args) => init(args),
        KmsCommand::Serve(args) => serve(args),
        KmsCommand::Unseal(args) => unseal(args),
        KmsCommand::Status(args) => {
            let client = connect(args)?;
            let status = runtime()?.block_on(client.seal_status()).map_err(map_client)?;
            outln!("{}", serde_json::to_string_pretty(&status)?)?;
            Ok(())
        }
        KmsCommand::Client(command) => client_command(command),
        KmsCommand::Key(command) => key_command(command),
        KmsCommand::Audit(args) => audit(args),
        KmsCommand::Bench(args) => bench(args),
        KmsCommand::Populate(args) => populate(args),
        KmsCommand::ConsoleLogin(args) => console_login(args),
        KmsCommand::ConsoleSessions(command) => console_sessions(command),
    }
}

fn console_login(args: &ClientArgs) -> anyhow::Result<()> {
    let bundle = load_bundle(args)?;
    let kms = KmsClient::new(&bundle).map_err(map_client)?;
    let code = runtime()?.block_on(kms.console_login_code()).map_err(map_client)?;
    let url = match code.url {
        Some(url) => url,
        None => {
            let endpoint = bundle.endpoints().map_err(map_kms)?;
            format!("{}{}", endpoint[0].url(), code.path)
        }
    };
    outln!("{url}")?;
    eprintln!(
        "rampart: open this link in a browser before {} (it works once); the session is audited as {}",
        format_time(code.expires_ms),
        bundle.name
    );
    Ok(())
}

fn console_sessions(command: &ConsoleSessionsCommand) -> anyhow::Result<()> {
    match command {
        ConsoleSessionsCommand::List { paging, json, client } => {
            let kms = connect(client)?;
            let fetch = |limit: u32, cursor: Option<String>| {
                let kms = &kms;
                async move { kms.console_session_page(Some(limit), cursor.as_deref()).await }
            };
            runtime()?.block_on(walk(
                paging,
                *json,
                Some(output::session_header()),
                fetch,
                session_row,
            ))
        }
        ConsoleSessionsCommand::End { id, client } => {
            let kms = connect(client)?;
            runtime()?.block_on(kms.end_console_session(id)).map_err(map_client)?;
            outln!("console session {id} ended")?;
            Ok(())
        }
    }
}

fn init(args: &InitArgs) -> anyhow::Result<()> {
    let seal = match (args.shares, args.threshold, &args.hsm_module) {
        (Some(shares), Some(threshold), _) => InitSeal::Shamir { shares, threshold },
        (_, _, Some(module)) => match (&args.hsm_token, &args.hsm_pin_file) {
            (Some(token), Some(pin_file)) => InitSeal::Hsm {
                module: module.clone(),
                token: token.clone(),
                pin_file: pin_file.clone(),
            },
            _ => {
                return Err(
                    UsageError("--hsm-module needs --hsm-token and --hsm-pin-file".into()).into()
                )
            }
        },
        _ => InitSeal::File(
            access(&args.data_dir, None, args.unseal_key_file.clone()).unseal_key_path(),
        ),
    };
    let opts = InitOptions {
        data_dir: args.data_dir.clone(),
        seal,
        sans: args.san.clone(),
        endpoints: args.endpoint.clone(),
        days: deployment::clamp_days(args.days),
    };
    let outcome =
        runtime()?.block_on(deployment::create(&opts, args.store.as_deref())).map_err(map_admin)?;
    eprintln!("rampart: admin bundle written to {}", outcome.admin_bundle.display());
    if let Some(path) = &outcome.unseal_key_file {
        eprintln!(
            "rampart: unseal key written to {} (mode 0600); servers unseal with it at start",
            path.display()
        );
    }
    if let Some(hsm) = &outcome.hsm {
        eprintln!(
            "rampart: root key generated in HSM token '{}' as '{}' (sensitive, never extractable); module and token recorded in {}",
            hsm.token,
            hsm.key_label,
            args.data_dir.join(files::HSM_CONFIG).display()
        );
        eprintln!(
            "rampart: servers unseal by logging in to the token: `kms serve --hsm-pin-file FILE`, or `rampart kms unseal`"
        );
    }
    if !outcome.shares.is_empty() {
        eprintln!(
            "rampart: the root key is split into {} shares; give each to a different person. They are shown only now:",
            outcome.shares.len()
        );
        let mut out = std::io::stdout().lock();
        for share in &outcome.shares {
            let text = share.to_hex();
            out.write_all(text.expose())?;
            out.write_all(b"\n")?;
        }
        out.flush()?;
    }
    Ok(())
}

fn serve(args: &ServeArgs) -> anyhow::Result<()> {
    let settings = ServeSettings {
        server: ServerOptions {
            data_dir: args.data_dir.clone(),
            unseal_key_file: args.unseal_key_file.clone(),
            hsm_pin_file: args.hsm_pin_file.clone(),
            limits: Limits {
                max_connections: args.max_connections,
                handshake_timeout: args.handshake_timeout,
                idle_timeout: args.idle_timeout,
                rate: args.rate_limit,
                burst: args.rate_burst,
                max_header_bytes: usize::try_from(args.max_header_size).unwrap_or(usize::MAX),
                max_headers: args.max_headers,
            },
            audit: AuditOptions {
                checkpoint_entries: args.audit_checkpoint_entries,
                checkpoint_interval: args.audit_checkpoint_interval,
                sinks: SinkOptions {
                    file: args.audit_file.clone(),
                    file_max_bytes: args.audit_file_max_size,
                    file_fsync: args.audit_file_fsync,
                    syslog: args.audit_syslog.then(|| args.audit_syslog_socket.clone()),
                },
            },
            kmip_interop: args.kmip_interop,
        },
        store: args.store.clone(),
        listen: args.listen.clone(),
        kmip_listen: args.kmip_listen.clone(),
    };
    let ready = |at: &deployment::serve::Listening| {
        // The first line stays the REST URL (scripts read it); the KMIP
        // address follows when KMIP is on.
        let mut out = std::io::stdout().lock();
        writeln!(out, "https://{}", at.rest)?;
        if let Some(kmip) = at.kmip {
            writeln!(out, "kmip://{kmip}")?;
        }
        out.flush()?;
        let state = if at.sealed { "sealed: waiting for `rampart kms unseal`" } else { "unsealed" };
        let kmip_note = at.kmip.map(|a| format!(", KMIP on {a}")).unwrap_or_default();
        tracing::info!("key server on https://{}{kmip_note} ({state})", at.rest);
        crate::notify::ready(&format!("serving on https://{}{kmip_note} ({state})", at.rest));
        Ok(())
    };
    deployment::serve::prepare_process();
    runtime()?.block_on(deployment::serve::serve(settings, ready)).map_err(map_admin)
}

fn unseal(args: &UnsealArgs) -> anyhow::Result<()> {
    let bundle = load_bundle(&args.client)?;
    let client = match &args.endpoint {
        Some(endpoint) => KmsClient::for_endpoint(&bundle, endpoint),
        None => KmsClient::new(&bundle),
    }
    .map_err(map_client)?;
    let runtime = runtime()?;
    let status = if let Some(path) = &args.hsm_pin_file {
        let pin = rampart_kms::hsm::read_pin_file(path).map_err(map_kms)?;
        runtime.block_on(client.unseal_pin(&pin)).map_err(map_client)?
    } else if let Some(text) = &args.share {
        let share = SecretBytes::from_slice(text.as_bytes());
        runtime.block_on(client.unseal(&share)).map_err(map_client)?
    } else {
        let status = runtime.block_on(client.seal_status()).map_err(map_client)?;
        if status["scheme"] == "hsm" {
            let pin = Source::new(None, "HSM token user PIN: ", false).read()?;
            runtime.block_on(client.unseal_pin(&pin)).map_err(map_client)?
        } else {
            let share = Source::new(None, "Unseal share: ", false).read()?;
            runtime.block_on(client.unseal(&share)).map_err(map_client)?
        }
    };
    if status["sealed"] == serde_json::Value::Bool(false) {
        outln!("unsealed")?;
    } else {
        outln!("sealed: {} of {} shares given", status["progress"], status["threshold"])?;
    }
    Ok(())
}

fn client_command(command: &ClientCommand) -> anyhow::Result<()> {
    match command {
        ClientCommand::Issue { name, labels, admin, out, days, client } => {
            let bundle = load_bundle(client)?;
            let labels = Labels::parse_list(labels).map_err(map_kms)?;
            let kms = KmsClient::new(&bundle).map_err(map_client)?;
            let issued = runtime()?
                .block_on(kms.issue_client(name, &labels, *admin, *days, bundle.endpoints.clone()))
                .map_err(map_client)?;
            issued.write(out).map_err(map_kms)?;
            eprintln!("rampart: bundle for {name} written to {}", out.display());
            Ok(())
        }
        ClientCommand::List { prefix, label, admin, revoked, paging, json, client } => {
            let kms = connect(client)?;
            let query = ClientQuery {
                prefix: prefix.clone(),
                label: label.clone(),
                admin: *admin,
                revoked: *revoked,
                limit: None,
            };
            let fetch = |limit: u32, cursor: Option<String>| {
                let (kms, query) = (&kms, ClientQuery { limit: Some(limit), ..query.clone() });
                async move { kms.client_page(&query, cursor.as_deref()).await }
            };
            runtime()?.block_on(walk(
                paging,
                *json,
                Some(output::client_header()),
                fetch,
                client_row,
            ))
        }
        ClientCommand::Pem { out_dir, client } => {
            let bundle = load_bundle(client)?;
            deployment::write_pem_files(&bundle, out_dir).map_err(map_admin)?;
            eprintln!(
                "rampart: {} written to {} (cert.pem, key.pem, ca.pem)",
                bundle.name,
                out_dir.display()
            );
            Ok(())
        }
        ClientCommand::Revoke { name, reason, client } => {
            let kms = connect(client)?;
            let revoked =
                runtime()?.block_on(kms.revoke_client(name, reason)).map_err(map_client)?;
            let when = revoked.revoked.as_ref().map_or(0, |r| r.revoked_ms);
            outln!("client {} revoked ({})", revoked.name, format_time(when))?;
            Ok(())
        }
        ClientCommand::Relabel { name, labels, client } => {
            let labels = Labels::parse_list(labels).map_err(map_kms)?;
            let kms = connect(client)?;
            let changed =
                runtime()?.block_on(kms.relabel_client(name, &labels)).map_err(map_client)?;
            let labels: Vec<String> =
                changed.labels.as_map().iter().map(|(k, v)| format!("{k}={v}")).collect();
            outln!("client {}: labels {}", changed.name, labels.join(","))?;
            Ok(())
        }
    }
}

fn read_input(path: Option<&Path>, limit: u64) -> anyhow::Result<SecretBytes> {
    let mut bytes = Vec::new();
    match path {
        Some(path) if path != Path::new("-") => {
            std::fs::File::open(path)
                .with_context(|| format!("cannot open {}", path.display()))?
                .take(limit + 1)
                .read_to_end(&mut bytes)
                .with_context(|| format!("cannot read {}", path.display()))?;
        }
        _ => {
            std::io::stdin()
                .lock()
                .take(limit + 1)
                .read_to_end(&mut bytes)
                .context("cannot read standard input")?;
        }
    }
    let bytes = SecretBytes::new(bytes);
    if bytes.len() as u64 > limit {
        return Err(UsageError(format!("the input is larger than {limit} bytes")).into());
    }
    Ok(bytes)
}

fn write_output(out: Option<&Path>, bytes: &[u8]) -> anyhow::Result<()> {
    match out {
        Some(path) => rampart_kms::bundle::write_private_file(path, bytes).map_err(map_kms),
        None => {
            let mut stdout = std::io::stdout().lock();
            stdout.write_all(bytes)?;
            stdout.flush()?;
            Ok(())
        }
    }
}

/// Largest input `key sign` and `key verify` read (the server's limit).
const MAX_SIGN_INPUT: u64 = 128 * 1024;
/// Largest certificate `key import-certificate` reads.
const MAX_CERTIFICATE: u64 = 64 * 1024;

fn base64_encode(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn base64_decode(text: &str) -> Option<Vec<u8>> {
    use base64::Engine as _;
    let text: String = text.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    base64::engine::general_purpose::STANDARD.decode(text).ok()
}

/// `key verify --signature`: a file holding the signature (raw, or
/// base64 text), or base64 text itself.
fn read_signature(arg: &str) -> anyhow::Result<Vec<u8>> {
    let path = Path::new(arg);
    if path.is_file() {
        let bytes = read_input(Some(path), 64 * 1024)?;
        let text = std::str::from_utf8(bytes.expose()).ok();
        return Ok(text.and_then(base64_decode).unwrap_or_else(|| bytes.expose().to_vec()));
    }
    base64_decode(arg)
        .filter(|b| !b.is_empty())
        .ok_or_else(|| UsageError(format!("--signature {arg}: neither a file nor base64")).into())
}

fn key_command(command: &KeyCommand) -> anyhow::Result<()> {
    let rt = runtime()?;
    match command {
        KeyCommand::Create { name, allow, exportable, key_type, json, client } => {
            let kms = connect(client)?;
            let key_type = choice_name(*key_type);
            let key = rt
                .block_on(kms.create_typed_key(name, &key_type, allow, *exportable))
                .map_err(map_client)?;
            print_key(&key, *json)
        }
        KeyCommand::List { prefix, state, selector, paging, json, client } => {
            let kms = connect(client)?;
            let query = KeyQuery {
                prefix: prefix.clone(),
                state: state.map(choice_name),
                selector: selector.clone(),
                limit: None,
            };
            let fetch = |limit: u32, cursor: Option<String>| {
                let (kms, query) = (&kms, KeyQuery { limit: Some(limit), ..query.clone() });
                async move { kms.key_view_page(&query, cursor.as_deref()).await }
            };
            rt.block_on(walk(paging, *json, Some(output::key_header()), fetch, key_row))
        }
        KeyCommand::Show { name, json, client } => {
            let kms = connect(client)?;
            print_key(&rt.block_on(kms.describe_key(name)).map_err(map_client)?, *json)
        }
        KeyCommand::Rotate { name, json, client } => {
            let kms = connect(client)?;
            print_key_info(&rt.block_on(kms.rotate_key(name)).map_err(map_client)?, *json)
        }
        KeyCommand::Revoke { name, reason, version, client } => {
            let kms = connect(client)?;
            print_key_info(
                &rt.block_on(kms.revoke_key(name, reason, *version)).map_err(map_client)?,
                false,
            )
        }
        KeyCommand::Destroy { name, version, client } => {
            let kms = connect(client)?;
            print_key_info(
                &rt.block_on(kms.destroy_key(name, *version)).map_err(map_client)?,
                false,
            )
        }
        KeyCommand::Wrap { name, input, context, client } => {
            let kms = connect(client)?;
            let plaintext =
                read_input(input.as_deref(), rampart_kms::keys::MAX_WRAP_PLAINTEXT as u64)?;
            let ciphertext = rt
                .block_on(kms.wrap(name, plaintext.expose(), context.as_bytes()))
                .map_err(map_client)?;
            outln!("{ciphertext}")?;
            Ok(())
        }
        KeyCommand::Unwrap { ciphertext, input, context, out, client } => {
            let kms = connect(client)?;
            let text = match ciphertext {
                Some(text) => text.clone(),
                None => {
                    let raw = read_input(input.as_deref(), 1 << 20)?;
                    String::from_utf8(raw.expose().to_vec())
                        .map_err(|_| UsageError("the ciphertext is not text".into()))?
                }
            };
            let plaintext =
                rt.block_on(kms.unwrap(text.trim(), context.as_bytes())).map_err(map_client)?;
            write_output(out.as_deref(), plaintext.expose())
        }
        KeyCommand::Sign { name, algorithm, digest, input, raw, json, client } => {
            let kms = connect(client)?;
            let data = read_input(input.as_deref(), MAX_SIGN_INPUT)?;
            let algorithm = algorithm.map(choice_name);
            let answer = rt
                .block_on(kms.sign(name, data.expose(), *digest, algorithm.as_deref()))
                .map_err(map_client)?;
            if *json {
                outln!("{}", serde_json::to_string_pretty(&answer)?)?;
                return Ok(());
            }
            let signature = answer["signature"].as_str().unwrap_or_default();
            if *raw {
                let bytes = base64_decode(signature)
                    .ok_or_else(|| anyhow::anyhow!("the server's signature is not base64"))?;
                return write_output(None, &bytes);
            }
            outln!("{signature}")?;
            Ok(())
        }
        KeyCommand::Verify { name, signature, algorithm, digest, input, json, client } => {
            let kms = connect(client)?;
            let signature = read_signature(signature)?;
            let data = read_input(input.as_deref(), MAX_SIGN_INPUT)?;
            let algorithm = algorithm.map(choice_name);
            let answer = rt
                .block_on(kms.verify(
                    name,
                    data.expose(),
                    *digest,
                    algorithm.as_deref(),
                    &signature,
                ))
                .map_err(map_client)?;
            let valid = answer["valid"].as_bool() == Some(true);
            if *json {
                outln!("{}", serde_json::to_string_pretty(&answer)?)?;
            } else if valid {
                outln!(
                    "signature verifies with {} ({})",
                    answer["verified_with"].as_str().unwrap_or(name),
                    answer["algorithm"].as_str().unwrap_or_default()
                )?;
            }
            if !valid {
                anyhow::bail!(
                    "the signature does not verify with key {name} ({})",
                    answer["algorithm"].as_str().unwrap_or_default()
                );
            }
            Ok(())
        }
        KeyCommand::Public { name, client } => {
            let kms = connect(client)?;
            let pem = rt.block_on(kms.public_key(name)).map_err(map_client)?;
            write_output(None, pem.as_bytes())
        }
        KeyCommand::ImportCertificate { name, input, allow, json, client } => {
            let kms = connect(client)?;
            let bytes = read_input(input.as_deref(), MAX_CERTIFICATE)?;
            let text = if bytes.expose().starts_with(b"-----BEGIN") {
                String::from_utf8_lossy(bytes.expose()).into_owned()
            } else {
                base64_encode(bytes.expose())
            };
            let key = rt
                .block_on(kms.register_certificate(name.as_deref(), &text, allow))
                .map_err(map_client)?;
            print_key(&key, *json)
        }
        KeyCommand::Certificate { name, json, client } => {
            let kms = connect(client)?;
            let cert = rt.block_on(kms.get_certificate(name)).map_err(map_client)?;
            if *json {
                outln!("{}", serde_json::to_string_pretty(&cert)?)?;
                return Ok(());
            }
            write_output(None, cert["pem"].as_str().unwrap_or_default().as_bytes())
        }
        KeyCommand::Export { name, version, out, client } => {
            let kms = connect(client)?;
            let (_, material) = rt.block_on(kms.export_key(name, *version)).map_err(map_client)?;
            write_output(out.as_deref(), deployment::hex_line(material.expose()).expose())
        }
    }
}

fn audit(args: &AuditArgs) -> anyhow::Result<()> {
    let rt = runtime()?;
    match &args.verify {
        Some(AuditCommand::Verify {
            from_checkpoint,
            file,
            unseal_key_file,
            anchor,
            json,
            client,
        }) => {
            if let Some(path) = file {
                let report =
                    archive::verify_file(path, unseal_key_file.as_deref(), anchor.as_deref())
                        .map_err(map_admin)?;
                return print_report(&report, *json);
            }
            let kms = connect(client)?;
            let report = if *from_checkpoint {
                rt.block_on(kms.audit_verify_from_checkpoint())
            } else {
                rt.block_on(kms.audit_verify())
            }
            .map_err(map_client)?;
            return print_report(&report, *json);
        }
        Some(AuditCommand::Export { until, out, client }) => {
            let until = archive::parse_until(until).map_err(map_admin)?;
            let kms = connect(client)?;
            let summary = rt.block_on(archive::export(&kms, until, out)).map_err(map_admin)?;
            eprintln!(
                "rampart: exported entries {} to {} ({} entries, anchor {}) to {}",
                summary.anchor_seq + 1,
                summary.until_seq,
                summary.entries,
                summary.anchor_hash,
                out.display()
            );
            return Ok(());
        }
        Some(AuditCommand::Prune { until, client }) => {
            let kms = connect(client)?;
            let pruned = rt.block_on(kms.audit_prune(*until)).map_err(map_client)?;
            outln!(
                "removed {} entries; the log now starts after entry {} (anchor {})",
                pruned.removed,
                pruned.anchor.seq,
                pruned.anchor.hash
            )?;
            return Ok(());
        }
        None => {}
    }
    let kms = connect(&args.client)?;
    let query = AuditQuery {
        since_ms: args.since.as_deref().map(parse_time).transpose().map_err(map_kms)?,
        until_ms: args.until.as_deref().map(parse_time).transpose().map_err(map_kms)?,
        client: args.by.clone(),
        key: args.key.clone(),
        operation: args.operation.clone(),
        outcome: args.outcome.map(choice_name),
        limit: None,
    };
    let fetch = |limit: u32, cursor: Option<String>| {
        let (kms, query) = (&kms, AuditQuery { limit: Some(limit), ..query.clone() });
        async move { kms.audit_list_page(&query, cursor.as_deref()).await }
    };
    rt.block_on(walk(&args.paging, args.json, None, fetch, audit_row))
}

/// Unwraps 32-byte secrets (a volume passphrase's size) in a loop at each
/// concurrency over kept-alive mTLS connections, under one key or a
/// random sample of many, optionally mixed with heartbeats and spread
/// over many host identities; reports requests per second and latency
/// percentiles. With `--kmip`, Get and AES-GCM Encrypt over KMIP instead.
fn bench(args: &BenchArgs) -> anyhow::Result<()> {
    let runs = BenchRuns { concurrency: args.concurrency.clone(), seconds: args.seconds };
    runs.check(args.heartbeat_percent, args.sample).map_err(map_admin)?;
    if args.kmip {
        return bench_kmip(args, runs);
    }
    let rt = runtime()?;
    let hosts = match &args.bundles {
        None => BenchHosts::One(connect(&args.client)?),
        Some(dir) => BenchHosts::Bundles(dir.clone()),
    };
    let bench = UnwrapBench {
        runs,
        key: args.key.clone(),
        key_count: args.key_count,
        sample: args.sample,
        heartbeat_percent: args.heartbeat_percent,
        hosts,
    };
    let rows = rt.block_on(bench.run()).map_err(map_admin)?;

    print_unwrap_runs(&rows, args.json)
}

/// The deployment files a command that opens the store itself uses.
fn access(data_dir: &Path, store: Option<&str>, unseal_key_file: Option<PathBuf>) -> StoreAccess {
    StoreAccess { data_dir: data_dir.to_owned(), store: store.map(str::to_owned), unseal_key_file }
}

/// Fills a store at fleet scale (`rampart_kms_tools::bulk`).
fn populate(args: &PopulateArgs) -> anyhow::Result<()> {
    let settings = PopulateSettings {
        access: access(&args.data_dir, args.store.as_deref(), args.unseal_key_file.clone()),
        plan: BulkPlan {
            keys: args.keys,
            key_prefix: args.key_prefix.clone(),
            clients: args.clients,
            client_prefix: args.client_prefix.clone(),
            audit: args.audit,
        },
        bundles: args.bundles,
        bundle_dir: args.bundle_dir.clone(),
    };
    let rt = runtime()?;
    let start = std::time::Instant::now();
    let progress = |phase: &'static str, done: u64| {
        eprint!("\r{phase}: {done} ({:.0} s)   ", start.elapsed().as_secs_f64());
    };
    let report = rt.block_on(rampart_kms_tools::bulk::populate_deployment(&settings, &progress));
    eprintln!();
    let report = report.map_err(map_admin)?;
    outln!(
        "{} keys, {} clients ({} bundles), {} audit entries in {:.1} s",
        report.keys,
        report.clients,
        report.bundles,
        report.audit,
        start.elapsed().as_secs_f64()
    )?;
    Ok(())
}

/// `kms bench --kmip`: for each operation and concurrency, workers on
/// kept-open KMIP connections (see [`rampart_kms_tools::bench::kmip`]).
fn bench_kmip(args: &BenchArgs, runs: BenchRuns) -> anyhow::Result<()> {
    let bundle = load_bundle(&args.client)?;
    let bench = KmipBench {
        runs,
        key: args.key.clone(),
        operations: args
            .operations
            .iter()
            .map(|op| match op {
                KmipOperationArg::Get => KmipOperation::Get,
                KmipOperationArg::Encrypt => KmipOperation::EncryptGcm,
                KmipOperationArg::Encrypt4k => KmipOperation::EncryptGcm4k,
                KmipOperationArg::CreateKeyPairRsa2048 => KmipOperation::CreateKeyPairRsa2048,
                KmipOperationArg::CreateKeyPairEcP256 => KmipOperation::CreateKeyPairEcP256,
                KmipOperationArg::SignEcdsaP256 => KmipOperation::SignEcdsaP256,
                KmipOperationArg::SignRsa2048Pss => KmipOperation::SignRsa2048Pss,
                KmipOperationArg::GetCertificate => KmipOperation::GetCertificate,
            })
            .collect(),
        tls: match args.tls {
            TlsArg::Negotiated => TlsVersions::Negotiated,
            TlsArg::Tls12 => TlsVersions::Tls12,
            TlsArg::Tls13 => TlsVersions::Tls13,
        },
        addresses: args.kmip_addresses.clone(),
    };
    let reports = runtime()?.block_on(bench.run(&bundle)).map_err(map_admin)?;
    print_kmip_runs(&reports, args.json)
}
