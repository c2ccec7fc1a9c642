#![allow(clippy::unwrap_used)]
//! GnuTLS's `p11tool` and `certtool`, and p11-kit, with the PKCS#11
//! module (`librampart_pkcs11.so`) against a real `rampart kms serve`
//! over KMIP:
//!
//! - `p11tool --provider` lists the token (label `rampart`), shows its
//!   private keys only after `--login` with the PIN (`GNUTLS_PIN`),
//!   generates an EC P-256 key pair on the key manager, signs with it
//!   (`--test-sign`) and exports its public key, which OpenSSL reads;
//!   `certtool` signs a self-signed certificate with that key, and
//!   `openssl verify` checks the signature against the exported key.
//! - A p11-kit module configuration (`module: ...`) in a user's
//!   `~/.config/pkcs11/modules/`: `p11-kit list-modules` shows the module
//!   and its token, `p11tool --list-tokens` without `--provider` sees the
//!   token, and `pkcs11-tool` through p11-kit's proxy module signs with a
//!   key of the key manager (verified by `openssl dgst -verify`).
//!
//! p11-kit ignores user configuration in programs running as root, so
//! as root the p11-kit programs run as `nobody` (`setpriv`), with the
//! user's own copy of the client bundle and module configuration.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::helpers::common::{describe, output, p, text, tool};
use crate::helpers::pkcs11_support::{Pkcs11Setup, PIN};

/// Where Debian's p11-kit installs its proxy module.
const P11_KIT_PROXY: &str = "/usr/lib/x86_64-linux-gnu/p11-kit-proxy.so";
/// The user p11-kit programs run as when the tests run as root.
const NOBODY: u32 = 65534;

#[track_caller]
fn succeeded(what: &str, out: Output) -> Output {
    assert!(out.status.success(), "{}", describe(&format!("{what} failed"), &out));
    out
}

/// `p11tool` (or `certtool`) with the module as its provider and the
/// PIN in the environment.
fn gnutls(setup: &Pkcs11Setup, program: &str) -> Command {
    let mut command = Command::new(tool(program));
    command
        .env("RAMPART_PKCS11_CONFIG", &setup.config)
        .env("GNUTLS_PIN", PIN)
        .arg("--provider")
        .arg(&setup.module);
    command
}

/// An EC P-256 key pair made with `pkcs11-tool`: label `label`, ID `id`.
fn ec_pair(setup: &Pkcs11Setup, label: &str, id: &str) {
    let mut command = setup.pkcs11_tool();
    command.args(["--login", "--pin", PIN, "--keypairgen", "--key-type", "EC:prime256v1"]);
    command.args(["--label", label, "--id", id, "--usage-sign", "--sensitive"]);
    succeeded("pkcs11-tool --keypairgen", output(command));
}

/// Runs `openssl ARGS`.
fn openssl(args: &[&str]) -> Output {
    let mut command = Command::new(tool("openssl"));
    command.args(args);
    output(command)
}

#[test]
fn p11tool_lists_the_token_and_its_private_keys_only_after_login() {
    let setup = Pkcs11Setup::start(None);
    ec_pair(&setup, "listed", "21");

    let mut list = gnutls(&setup, "p11tool");
    list.arg("--list-tokens");
    let tokens = text(&succeeded("p11tool --list-tokens", output(list)).stdout);
    assert!(tokens.contains("Label: rampart"), "no token labelled rampart:\n{tokens}");
    assert!(tokens.contains("token=rampart"), "no token URL:\n{tokens}");

    let mut anonymous = gnutls(&setup, "p11tool");
    anonymous.args(["--list-all", "pkcs11:token=rampart"]);
    let public = text(&succeeded("p11tool --list-all", output(anonymous)).stdout);
    assert!(public.contains("object=listed;type=public"), "public key not listed:\n{public}");
    assert!(!public.contains("type=private"), "a private key without login:\n{public}");

    let mut login = gnutls(&setup, "p11tool");
    login.args(["--login", "--list-privkeys", "pkcs11:token=rampart"]);
    let private = text(&succeeded("p11tool --login --list-privkeys", output(login)).stdout);
    assert!(
        private.contains("id=%21;object=listed;type=private"),
        "the private key is not listed after login:\n{private}"
    );
    assert!(private.contains("CKA_SENSITIVE"), "{private}");
}

#[test]
fn p11tool_generates_an_ec_key_that_signs_and_whose_public_key_openssl_reads() {
    let setup = Pkcs11Setup::start(None);
    let dir = setup.dir.path();
    let generated = dir.join("generated.pem");
    let mut generate = gnutls(&setup, "p11tool");
    generate.args(["--login", "--generate-privkey=ecdsa", "--curve=secp256r1"]);
    generate.args(["--label", "gnutls-ec", "--outfile", p(&generated), "pkcs11:token=rampart"]);
    succeeded("p11tool --generate-privkey", output(generate));

    let key = "pkcs11:token=rampart;object=gnutls-ec;type=private";
    let mut test_sign = gnutls(&setup, "p11tool");
    test_sign.args(["--login", "--test-sign", key]);
    let out = succeeded("p11tool --test-sign", output(test_sign));
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(
        said.contains("Signing using ECDSA-SHA256... ok")
            && said.contains("Verifying against public key in the token... ok"),
        "p11tool --test-sign did not sign and verify:\n{said}"
    );

    let exported = dir.join("exported.pem");
    let mut export = gnutls(&setup, "p11tool");
    export.args(["--export-pubkey", "--outfile", p(&exported)]);
    export.arg("pkcs11:token=rampart;object=gnutls-ec;type=public");
    succeeded("p11tool --export-pubkey", output(export));
    let details = succeeded(
        "openssl pkey -pubin",
        openssl(&["pkey", "-pubin", "-in", p(&exported), "-noout", "-text"]),
    );
    let details = text(&details.stdout);
    assert!(details.contains("NIST CURVE: P-256"), "not a P-256 key:\n{details}");
    assert_eq!(
        std::fs::read(&exported).unwrap(),
        std::fs::read(&generated).unwrap(),
        "the exported public key is not the one --generate-privkey printed"
    );

    // A signature made through GnuTLS, checked by OpenSSL.
    let template = dir.join("cert.tmpl");
    std::fs::write(
        &template,
        "cn = \"gnutls-ec\"\nserial = 7\nexpiration_days = 30\nsigning_key\n",
    )
    .unwrap();
    let certificate = dir.join("self-signed.pem");
    let mut certtool = gnutls(&setup, "certtool");
    certtool.args(["--generate-self-signed", "--load-privkey", key]);
    certtool.args(["--template", p(&template), "--outfile", p(&certificate)]);
    succeeded("certtool --generate-self-signed", output(certtool));
    let verified = succeeded(
        "openssl verify of the self-signed certificate",
        openssl(&["verify", "-CAfile", p(&certificate), p(&certificate)]),
    );
    assert!(text(&verified.stdout).contains(": OK"), "{}", describe("openssl verify", &verified));
    let in_certificate = succeeded(
        "openssl x509 -pubkey",
        openssl(&["x509", "-in", p(&certificate), "-pubkey", "-noout"]),
    );
    assert_eq!(
        text(&in_certificate.stdout),
        text(&std::fs::read(&exported).unwrap()),
        "the certificate certifies another key"
    );
}

/// A user of p11-kit: a home with `.config/pkcs11/modules/rampart.module`,
/// the user's copy of the bundle and the module's configuration. As root
/// the user is `nobody` (p11-kit reads no user configuration for root).
struct P11KitUser {
    home: PathBuf,
    config: PathBuf,
    as_nobody: bool,
}

impl P11KitUser {
    fn new(setup: &Pkcs11Setup) -> Self {
        let home = setup.dir.path().join("home");
        let modules = home.join(".config/pkcs11/modules");
        std::fs::create_dir_all(&modules).unwrap();
        let bundle = home.join("app.bundle");
        std::fs::copy(&setup.bundle, &bundle).unwrap();
        let config = home.join("pkcs11.conf");
        let original = std::fs::read_to_string(&setup.config).unwrap();
        std::fs::write(&config, original.replace(&setup.bundle, p(&bundle))).unwrap();
        let module = home.join("librampart_pkcs11.so");
        std::fs::copy(&setup.module, &module).unwrap();
        std::fs::write(modules.join("rampart.module"), format!("module: {}\n", p(&module)))
            .unwrap();
        let as_nobody = std::fs::metadata("/proc/self").unwrap().uid() == 0;
        if as_nobody {
            for path in [setup.dir.path(), &home] {
                std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
                    .unwrap();
            }
            chown_all(&home);
        }
        Self { home, config, as_nobody }
    }

    fn command(&self, program: &str) -> Command {
        let mut command = if self.as_nobody {
            let mut command = Command::new(tool("setpriv"));
            command.args(["--reuid", "65534", "--regid", "65534", "--clear-groups"]);
            command.arg(tool(program));
            command
        } else {
            Command::new(tool(program))
        };
        command
            .current_dir(&self.home)
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", self.home.join(".config"))
            .env("RAMPART_PKCS11_CONFIG", &self.config)
            .env("GNUTLS_PIN", PIN);
        command
    }
}

fn chown_all(path: &Path) {
    std::os::unix::fs::chown(path, Some(NOBODY), Some(NOBODY)).unwrap();
    if path.is_dir() {
        for entry in std::fs::read_dir(path).unwrap() {
            chown_all(&entry.unwrap().path());
        }
    }
}

#[test]
fn p11kit_user_module_shows_the_token_to_list_modules_and_to_p11tool() {
    let setup = Pkcs11Setup::start(None);
    let user = P11KitUser::new(&setup);

    let mut list = user.command("p11-kit");
    list.arg("list-modules");
    let modules = text(&succeeded("p11-kit list-modules", output(list)).stdout);
    let ours = modules
        .lines()
        .skip_while(|line| !line.starts_with("rampart: "))
        .take_while(|line| line.starts_with("rampart: ") || line.starts_with(' '))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(ours.contains("librampart_pkcs11.so"), "module rampart not listed:\n{modules}");
    assert!(ours.contains("library-manufacturer: Rampart"), "{ours}");
    assert!(ours.contains("token: rampart"), "no token under the module:\n{ours}");
    assert!(ours.contains("login-required"), "{ours}");

    let mut tokens = user.command("p11tool");
    tokens.arg("--list-token-urls");
    let urls = text(&succeeded("p11tool --list-token-urls (p11-kit)", output(tokens)).stdout);
    assert!(
        urls.lines()
            .any(|url| url.contains("manufacturer=Rampart") && url.ends_with("token=rampart")),
        "p11tool without --provider does not see the token:\n{urls}"
    );
}

#[test]
fn p11kit_proxy_module_signs_with_a_key_of_the_key_manager() {
    let setup = Pkcs11Setup::start(None);
    ec_pair(&setup, "proxied", "31");
    let user = P11KitUser::new(&setup);
    assert!(Path::new(P11_KIT_PROXY).is_file(), "{P11_KIT_PROXY} is missing (package p11-kit)");
    let message = user.home.join("message");
    std::fs::write(&message, b"signed through p11-kit-proxy.so").unwrap();
    let signature = user.home.join("signature.der");
    let public = user.home.join("public.der");
    if user.as_nobody {
        chown_all(&user.home);
    }

    let proxy = |args: &[&str]| {
        let mut command = user.command("pkcs11-tool");
        command.args(["--module", P11_KIT_PROXY, "--token-label", "rampart"]);
        command.args(args);
        output(command)
    };
    let slots = succeeded("pkcs11-tool -L (proxy)", proxy(&["-L"]));
    assert!(
        text(&slots.stdout).contains("token label        : rampart"),
        "{}",
        text(&slots.stdout)
    );
    succeeded(
        "pkcs11-tool --sign through the proxy",
        proxy(&[
            "--login",
            "--pin",
            PIN,
            "--sign",
            "--mechanism",
            "ECDSA-SHA256",
            "--signature-format",
            "openssl",
            "--id",
            "31",
            "-i",
            p(&message),
            "-o",
            p(&signature),
        ]),
    );
    succeeded(
        "pkcs11-tool --read-object through the proxy",
        proxy(&["--read-object", "--type", "pubkey", "--id", "31", "-o", p(&public)]),
    );
    let pem = setup.dir.path().join("public.pem");
    succeeded(
        "openssl pkey",
        openssl(&["pkey", "-pubin", "-inform", "der", "-in", p(&public), "-out", p(&pem)]),
    );
    let verified =
        openssl(&["dgst", "-sha256", "-verify", p(&pem), "-signature", p(&signature), p(&message)]);
    assert!(
        verified.status.success() && text(&verified.stdout).contains("Verified OK"),
        "{}",
        describe("openssl dgst -verify of the proxy's signature", &verified)
    );
}
