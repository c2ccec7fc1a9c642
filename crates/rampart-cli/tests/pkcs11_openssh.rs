#![allow(clippy::unwrap_used)]
//! OpenSSH logging in with keys held in the key manager, through
//! `librampart_pkcs11.so`: key pairs generated with `pkcs11-tool`,
//! `ssh-keygen -D` printing their public keys (the key manager's public
//! keys, converted), and a local `sshd` (root, its own host key, the
//! printed key as its only authorized key) accepting `ssh -I MODULE` and
//! `ssh -o PKCS11Provider=MODULE` running `echo ok`, with an ECDSA P-256
//! key and an RSA-2048 key (sshd logs which key it accepted), and
//! refusing once the key is no longer authorized; with `IdentitiesOnly
//! yes`, only when `IdentityFile` names the printed public key. A token with a PIN:
//! `ssh` in batch mode cannot log in, `ssh` given the PIN by its
//! `SSH_ASKPASS` program (asked "Enter PIN for 'rampart': ") can (a wrong
//! PIN cannot), and `ssh-agent` loaded with `ssh-add -s MODULE` and the
//! PIN serves the keys to `ssh` until `ssh-add -e MODULE`.
//!
//! The commands and configuration are those of docs/src/pkcs11/openssh.md.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use crate::helpers::kms_support::{self, free_port, wait_until, TempDir};
use crate::helpers::pkcs11_support::{Pkcs11Setup, PIN};

use kms_support::common::{describe, output, output_with, p, text, tool};

#[track_caller]
fn succeeded(what: &str, out: Output) -> Output {
    assert!(out.status.success(), "{}", describe(what, &out));
    out
}

fn signal(target: &str, signal: &str) {
    let mut kill = Command::new(tool("kill"));
    kill.args([&format!("-{signal}"), "--", target]);
    let _ = output(kill);
}

/// A configuration of the setup's key manager for a token without a PIN
/// (no login: OpenSSH uses its keys without asking for anything).
fn no_pin_config(setup: &Pkcs11Setup) -> PathBuf {
    let config = setup.dir.join("no-pin.conf");
    std::fs::write(
        &config,
        format!(
            "[slot]\nlabel = rampart\nbundle = {}\nkmip = {}\n",
            setup.bundle,
            setup.server.kmip.as_deref().unwrap()
        ),
    )
    .unwrap();
    config
}

/// `pkcs11-tool --keypairgen` of a key labelled `label` with the module
/// configured by `config` (`pin`: log in with it).
fn generate(setup: &Pkcs11Setup, config: &Path, pin: Option<&str>, key_type: &str, label: &str) {
    let mut keygen = setup.pkcs11_tool();
    keygen.env("RAMPART_PKCS11_CONFIG", config);
    if let Some(pin) = pin {
        keygen.args(["--login", "--pin", pin]);
    }
    keygen.args(["--keypairgen", "--key-type", key_type, "--label", label, "--usage-sign"]);
    keygen.arg("--sensitive");
    succeeded("pkcs11-tool --keypairgen", output(keygen));
}

/// The lines `ssh-keygen -D MODULE` prints (`TYPE BASE64 LABEL`).
fn listed_keys(setup: &Pkcs11Setup, config: &Path) -> Vec<String> {
    let mut keygen = Command::new(tool("ssh-keygen"));
    keygen.env("RAMPART_PKCS11_CONFIG", config).arg("-D").arg(&setup.module);
    let out = succeeded("ssh-keygen -D", output(keygen));
    text(&out.stdout).lines().map(str::to_owned).collect()
}

/// The line of `listed` for the key labelled `label`.
fn line_of<'a>(listed: &'a [String], label: &str) -> &'a str {
    listed
        .iter()
        .find(|l| l.split_whitespace().nth(2) == Some(label))
        .unwrap_or_else(|| panic!("no key {label} in {listed:?}"))
}

/// `TYPE BASE64` of the key manager's public key of the pair whose
/// algorithm is `algorithm` (`ec`, `rsa`), from `rampart kms key public`
/// converted by `ssh-keygen -i -m PKCS8`.
fn key_manager_ssh_key(setup: &Pkcs11Setup, algorithm: &str) -> String {
    let list = kms_support::ok(&["kms", "key", "list", "--json", "--kms", &setup.admin]);
    let keys = kms_support::json_lines(&list);
    let private: Vec<&str> = keys
        .as_array()
        .unwrap()
        .iter()
        .filter(|k| k["type"] == "private-key" && k["algorithm"] == algorithm)
        .map(|k| k["name"].as_str().unwrap())
        .collect();
    assert_eq!(private.len(), 1, "one {algorithm} private key expected: {list}");
    let pem = kms_support::ok(&["kms", "key", "public", private[0], "--kms", &setup.bundle]);
    let file = setup.dir.file(&format!("{algorithm}.pub.pem"), pem.as_bytes());
    let mut convert = Command::new(tool("ssh-keygen"));
    convert.args(["-i", "-m", "PKCS8", "-f", p(&file)]);
    let line = text(&succeeded("ssh-keygen -i -m PKCS8", output(convert)).stdout);
    type_and_key(&line)
}

/// The first two fields of an OpenSSH public key line.
fn type_and_key(line: &str) -> String {
    line.split_whitespace().take(2).collect::<Vec<_>>().join(" ")
}

/// `SHA256:...` of an OpenSSH public key line.
fn fingerprint(dir: &TempDir, line: &str) -> String {
    let file = dir.file("fingerprint.pub", format!("{line}\n").as_bytes());
    let mut keygen = Command::new(tool("ssh-keygen"));
    keygen.args(["-l", "-E", "sha256", "-f", p(&file)]);
    let out = text(&succeeded("ssh-keygen -l", output(keygen)).stdout);
    out.split_whitespace().nth(1).unwrap().to_owned()
}

/// A local `sshd` (and the processes it forks: one process group) on a
/// free port, stopped when dropped, even when the test fails.
struct Sshd {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl Sshd {
    /// sshd with a new host key and an empty `authorized_keys`.
    fn start(parent: &TempDir) -> Self {
        let dir = parent.join("sshd");
        std::fs::create_dir_all(&dir).unwrap();
        // sshd's privilege separation directory (systemd's unit makes it).
        std::fs::create_dir_all("/run/sshd").unwrap();
        let host_key = dir.join("host_key");
        let mut keygen = Command::new(tool("ssh-keygen"));
        keygen.args(["-q", "-t", "ed25519", "-N", "", "-f", p(&host_key)]);
        succeeded("ssh-keygen (host key)", output(keygen));
        std::fs::write(dir.join("authorized_keys"), "").unwrap();
        let port = free_port();
        let d = p(&dir);
        let config = dir.join("sshd_config");
        std::fs::write(
            &config,
            format!(
                "Port {port}\n\
                 ListenAddress 127.0.0.1\n\
                 HostKey {d}/host_key\n\
                 PidFile {d}/sshd.pid\n\
                 AuthorizedKeysFile {d}/authorized_keys\n\
                 UsePAM no\n\
                 PubkeyAuthentication yes\n\
                 PasswordAuthentication no\n\
                 KbdInteractiveAuthentication no\n\
                 PermitRootLogin prohibit-password\n\
                 StrictModes no\n"
            ),
        )
        .unwrap();
        let host_pub = std::fs::read_to_string(dir.join("host_key.pub")).unwrap();
        std::fs::write(
            dir.join("known_hosts"),
            format!("[127.0.0.1]:{port} {}\n", type_and_key(&host_pub)),
        )
        .unwrap();
        let log = std::fs::File::create(dir.join("sshd.log")).unwrap();
        let mut command = Command::new(tool("sshd"));
        command
            .args(["-D", "-e", "-f", p(&config)])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let child = command.spawn().unwrap_or_else(|e| panic!("cannot run sshd: {e}"));
        let mut sshd = Self { child, port, dir };
        let listening = wait_until(Duration::from_secs(20), || {
            sshd.child.try_wait().unwrap().is_some()
                || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        if let Some(status) = sshd.child.try_wait().unwrap() {
            panic!("sshd exited ({status}) at start:\n{}", sshd.log());
        }
        assert!(listening, "sshd does not listen on {port}:\n{}", sshd.log());
        sshd
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("sshd.log")).unwrap_or_default()
    }

    /// Makes `line` the only authorized key.
    fn authorize(&self, line: &str) {
        std::fs::write(self.dir.join("authorized_keys"), format!("{line}\n")).unwrap();
    }

    /// `ssh` as root running `echo ok`, with `options` and `env`,
    /// standard input closed and no configuration file.
    fn ssh(&self, options: &[&str], env: &[(&str, &Path)]) -> Output {
        let mut ssh = Command::new(tool("ssh"));
        ssh.args(["-F", "none", "-p", &self.port.to_string()])
            .args(["-o", "StrictHostKeyChecking=yes", "-o", "ConnectTimeout=30"])
            .arg("-o")
            .arg(format!("UserKnownHostsFile={}", p(&self.dir.join("known_hosts"))))
            .args(options)
            .args(["root@127.0.0.1", "echo", "ok"]);
        ssh.env_remove("SSH_AUTH_SOCK").env_remove("SSH_ASKPASS").env_remove("DISPLAY");
        for (name, value) in env {
            ssh.env(name, value);
        }
        output(ssh)
    }

    /// Asserts `ssh` logged in and ran `echo ok`, and sshd accepted the
    /// key of fingerprint `fingerprint`.
    #[track_caller]
    fn logged_in(&self, out: &Output, algorithm: &str, fingerprint: &str) {
        assert!(
            out.status.success() && text(&out.stdout) == "ok\n",
            "{}\n--- sshd log ---\n{}",
            describe("ssh", out),
            self.log()
        );
        let accepted = format!("ssh2: {algorithm} {fingerprint}");
        assert!(
            self.log().lines().any(|l| l.starts_with("Accepted publickey for root from 127.0.0.1")
                && l.ends_with(&accepted)),
            "sshd did not log {accepted:?}:\n{}",
            self.log()
        );
    }

    #[track_caller]
    fn refused(&self, out: &Output) {
        assert!(!out.status.success(), "{}", describe("ssh (expected to fail)", out));
        assert!(text(&out.stderr).contains("Permission denied"), "{}", describe("ssh", out));
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let group = format!("-{}", self.child.id());
        signal(&group, "TERM");
        if !wait_until(Duration::from_secs(10), || self.child.try_wait().unwrap().is_some()) {
            signal(&group, "KILL");
            let _ = self.child.wait();
        }
    }
}

/// `ssh-agent -D` on a socket of its own, stopped when dropped.
struct Agent {
    child: Child,
    socket: PathBuf,
}

impl Agent {
    /// An agent that may load `module` (`-P`), with the module's
    /// configuration in its environment (its `ssh-pkcs11-helper` loads
    /// the module).
    fn start(dir: &TempDir, module: &Path, config: &Path) -> Self {
        let socket = dir.join("agent.sock");
        let mut command = Command::new(tool("ssh-agent"));
        command
            .args(["-D", "-a", p(&socket), "-P", p(module)])
            .env("RAMPART_PKCS11_CONFIG", config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let child = command.spawn().unwrap_or_else(|e| panic!("cannot run ssh-agent: {e}"));
        let agent = Self { child, socket };
        assert!(wait_until(Duration::from_secs(10), || agent.socket.exists()), "no agent socket");
        agent
    }

    /// `ssh-add ARGS` with `stdin`.
    fn ssh_add(&self, args: &[&OsStr], stdin: &[u8]) -> Output {
        let mut add = Command::new(tool("ssh-add"));
        add.args(args).env("SSH_AUTH_SOCK", &self.socket);
        add.env_remove("SSH_ASKPASS").env_remove("DISPLAY");
        output_with(add, Some(stdin))
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn ssh_logs_in_with_ec_and_rsa_keys_held_in_the_key_manager() {
    let setup = Pkcs11Setup::start(None);
    let config = no_pin_config(&setup);
    generate(&setup, &config, None, "EC:prime256v1", "ssh-ec");
    generate(&setup, &config, None, "rsa:2048", "ssh-rsa");

    // ssh-keygen -D prints the key manager's public keys, labelled.
    let listed = listed_keys(&setup, &config);
    assert_eq!(listed.len(), 2, "{listed:?}");
    let ec = line_of(&listed, "ssh-ec");
    let rsa = line_of(&listed, "ssh-rsa");
    assert!(ec.starts_with("ecdsa-sha2-nistp256 "), "{ec}");
    assert!(rsa.starts_with("ssh-rsa "), "{rsa}");
    assert_eq!(type_and_key(ec), key_manager_ssh_key(&setup, "ec"));
    assert_eq!(type_and_key(rsa), key_manager_ssh_key(&setup, "rsa"));

    let sshd = Sshd::start(&setup.dir);
    let module = p(&setup.module);
    let env = [("RAMPART_PKCS11_CONFIG", config.as_path())];
    fn batch<'a>(more: &[&'a str]) -> Vec<&'a str> {
        let mut options = vec!["-o", "BatchMode=yes", "-o", "IdentityAgent=none"];
        options.extend_from_slice(more);
        options
    }

    // ECDSA (CKM_ECDSA on the hash), with -I.
    sshd.authorize(ec);
    let out = sshd.ssh(&batch(&["-I", module]), &env);
    sshd.logged_in(&out, "ECDSA", &fingerprint(&setup.dir, ec));

    // IdentitiesOnly hides the module's keys unless IdentityFile names
    // the public key ssh-keygen -D printed.
    let only = ["-o", "IdentitiesOnly=yes", "-I", module];
    sshd.refused(&sshd.ssh(&batch(&only), &env));
    let ec_pub = setup.dir.file("ssh-ec.pub", format!("{ec}\n").as_bytes());
    let identity = format!("IdentityFile={}", p(&ec_pub));
    let mut named = only.to_vec();
    named.extend(["-o", identity.as_str()]);
    let out = sshd.ssh(&batch(&named), &env);
    sshd.logged_in(&out, "ECDSA", &fingerprint(&setup.dir, ec));

    // RSA (rsa-sha2-512: CKM_RSA_PKCS on a DigestInfo), with the option.
    sshd.authorize(rsa);
    let provider = format!("PKCS11Provider={module}");
    let out = sshd.ssh(&batch(&["-o", &provider]), &env);
    sshd.logged_in(&out, "RSA", &fingerprint(&setup.dir, rsa));

    // Neither key authorized (only an unrelated one): refused.
    sshd.authorize(std::fs::read_to_string(sshd.dir.join("host_key.pub")).unwrap().trim());
    sshd.refused(&sshd.ssh(&batch(&["-I", module]), &env));
}

#[test]
fn ssh_and_ssh_agent_log_in_with_the_pin_of_a_token_that_has_one() {
    let setup = Pkcs11Setup::start(None);
    generate(&setup, &setup.config, Some(PIN), "EC:prime256v1", "ssh-pin");
    // Public keys need no login.
    let listed = listed_keys(&setup, &setup.config);
    let key = line_of(&listed, "ssh-pin").to_owned();
    let print = fingerprint(&setup.dir, &key);

    let sshd = Sshd::start(&setup.dir);
    sshd.authorize(&key);
    let module = p(&setup.module);
    let env = [("RAMPART_PKCS11_CONFIG", setup.config.as_path())];

    // Batch mode cannot ask for the PIN: the private key stays hidden.
    let out = sshd.ssh(&["-o", "BatchMode=yes", "-o", "IdentityAgent=none", "-I", module], &env);
    sshd.refused(&out);

    // The PIN from an askpass program: a wrong one is refused.
    use std::os::unix::fs::PermissionsExt;
    let prompts = setup.dir.join("prompts");
    let askpass = |name: &str, pin: &str| {
        let body = format!("#!/bin/sh\nprintf '%s\\n' \"$1\" >> {}\necho {pin}\n", p(&prompts));
        let script = setup.dir.file(name, body.as_bytes());
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        script
    };
    let right = askpass("askpass-right", PIN);
    let wrong = askpass("askpass-wrong", "9999");
    let force = Path::new("force");
    let options = ["-o", "IdentityAgent=none", "-I", module];
    for (script, works) in [(&wrong, false), (&right, true)] {
        let out = sshd.ssh(
            &options,
            &[env[0], ("SSH_ASKPASS", script.as_path()), ("SSH_ASKPASS_REQUIRE", force)],
        );
        if works {
            sshd.logged_in(&out, "ECDSA", &print);
        } else {
            sshd.refused(&out);
        }
    }
    let asked = std::fs::read_to_string(&prompts).unwrap();
    assert_eq!(asked, "Enter PIN for 'rampart': \n".repeat(2));

    // ssh-agent: `ssh-add -s` with the PIN on standard input; then ssh
    // needs neither the module nor its configuration.
    let agent = Agent::start(&setup.dir, &setup.module, &setup.config);
    let s = OsStr::new("-s");
    let out = agent.ssh_add(&[s, setup.module.as_os_str()], b"9999\n");
    assert!(!out.status.success(), "{}", describe("ssh-add -s, wrong PIN", &out));
    let out = agent.ssh_add(&[s, setup.module.as_os_str()], format!("{PIN}\n").as_bytes());
    succeeded("ssh-add -s", out);
    let out = succeeded("ssh-add -l", agent.ssh_add(&[OsStr::new("-l")], b""));
    assert!(text(&out.stdout).contains(&format!("{print} ssh-pin (ECDSA)")), "{out:?}");
    let sock = format!("IdentityAgent={}", p(&agent.socket));
    let out = sshd.ssh(&["-o", "BatchMode=yes", "-o", &sock], &[]);
    sshd.logged_in(&out, "ECDSA", &print);

    // `ssh-add -e` takes the module's keys out of the agent again.
    let e = OsStr::new("-e");
    succeeded("ssh-add -e", agent.ssh_add(&[e, setup.module.as_os_str()], b""));
    let out = agent.ssh_add(&[OsStr::new("-l")], b"");
    assert!(text(&out.stdout).contains("The agent has no identities"), "{out:?}");
    sshd.refused(&sshd.ssh(&["-o", "BatchMode=yes", "-o", &sock], &[]));
}
