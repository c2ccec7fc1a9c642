//! The documentation, run: every ```sh block of README.md and of each
//! page of the book (docs/src) runs, page by page and in order, in a new
//! scratch directory with this build's `rampart` first on PATH, so a
//! command the pages show that stops working fails the tests.
//!
//! A page with a ```sh kernel block (one that needs a Linux host: /etc,
//! systemd, the kernel's NBD client, dm-crypt) runs whole under the test
//! kernel (`scripts/kernel-vm --systemd`), as root on a machine with
//! systemd as PID 1 where this build is installed as the Debian package
//! installs it; its scratch directory is in the guest's memory. The ports
//! a page listens on are `${PORT_A:-18443}`-style variables, which the
//! harness sets to free ports; a page that names `$PG_URL` gets a
//! throwaway PostgreSQL cluster of its own (scripts/pg-test-cluster).

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::helpers::kernel_support::{rampart_bin, run_in_kernel_with_systemd};
use crate::helpers::kms_support::{built_token_plugin, free_port, token_plugin_dir, TOKEN_PLUGIN};
use crate::helpers::serve_support::tool;

use super::helpers::common::{describe, output, TempDir};

/// A runnable block of a page: ```sh, or ```sh kernel when it needs a
/// Linux host.
#[derive(Debug, PartialEq, Eq)]
struct Block {
    text: String,
    kernel: bool,
}

/// The fenced blocks of `text` whose info string is `sh` or `sh kernel`,
/// in order; other languages are examples.
fn blocks(text: &str) -> Vec<Block> {
    let mut found = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let Some(info) = line.trim_start().strip_prefix("```") else { continue };
        let fence_indent = line.len() - line.trim_start().len();
        let mut body = String::new();
        for inner in lines.by_ref() {
            if inner.trim_start().starts_with("```") {
                break;
            }
            body.push_str(inner.get(fence_indent..).unwrap_or(inner.trim_start()));
            body.push('\n');
        }
        match info.split_whitespace().collect::<Vec<_>>().as_slice() {
            ["sh"] => found.push(Block { text: body, kernel: false }),
            ["sh", "kernel"] => found.push(Block { text: body, kernel: true }),
            _ => {}
        }
    }
    found
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// README.md and every Markdown page under docs/src, by path.
fn pages() -> Vec<PathBuf> {
    let mut pages = vec![root().join("README.md")];
    let mut dirs = vec![root().join("docs/src")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                pages.push(path);
            }
        }
    }
    pages.sort();
    pages
}

/// The variables pages take their ports from (`${PORT_A:-18443}`).
const PORT_VARIABLES: [&str; 4] = ["PORT_A", "PORT_B", "PORT_KMIP", "PORT_NBD"];

/// The page's blocks as one bash script: free ports in the port
/// variables, each block announced on standard error (so a failure says
/// which), background jobs stopped at the end.
fn script(blocks: &[Block]) -> String {
    let bin_dir = Path::new(rampart_bin()).parent().unwrap();
    let mut text = String::from("set -euo pipefail\n");
    text.push_str("trap 'kill $(jobs -p) 2>/dev/null || true; wait' EXIT\n");
    text.push_str(&format!("export PATH={}:$PATH\n", bin_dir.display()));
    for variable in PORT_VARIABLES {
        text.push_str(&format!("export {variable}={}\n", free_port()));
    }
    for (i, block) in blocks.iter().enumerate() {
        text.push_str(&format!("echo '--- block {}' >&2\n", i + 1));
        text.push_str(&block.text);
    }
    text
}

/// A PostgreSQL cluster of one page's own, stopped when dropped.
struct PgCluster(String);

impl PgCluster {
    fn start() -> Self {
        let out = output(std::process::Command::new(script_path("pg-test-cluster")));
        assert!(out.status.success(), "{}", describe("scripts/pg-test-cluster", &out));
        Self(String::from_utf8(out.stdout).unwrap().trim().to_owned())
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        let mut stop = std::process::Command::new(script_path("pg-test-cluster"));
        stop.args(["stop", &self.0]);
        let _ = output(stop);
    }
}

fn script_path(name: &str) -> PathBuf {
    root().join("scripts").join(name)
}

/// Runs a page on this machine.
fn run_on_host(page: &Path, body: &str) -> Result<(), String> {
    let name = page.file_stem().unwrap().to_string_lossy().into_owned();
    let dir = TempDir::new(&format!("docs-{name}"));
    let cluster = body.contains("PG_URL").then(PgCluster::start);
    let mut command = std::process::Command::new(tool("bash"));
    command
        .args(["-c", body])
        .current_dir(dir.path())
        .env_remove("RAMPART_KMS")
        .env("RAMPART_LOG", "warn");
    if let Some(cluster) = &cluster {
        command.env("PG_URL", &cluster.0);
    }
    let out = output(command);
    if !out.status.success() {
        return Err(format!("{}\n{}", page.display(), describe(body, &out)));
    }
    Ok(())
}

/// Runs a page under the test kernel, after installing this build where
/// the Debian package puts it (scripts/build-deb): the binary, the token
/// plugin, the units and the service user.
fn run_under_kernel(page: &Path, body: &str) -> Result<(), String> {
    let name = page.file_stem().unwrap().to_string_lossy().into_owned();
    let share = TempDir::new(&format!("docs-kernel-{name}"));
    let page_script = share.file("page.sh", body.as_bytes());
    let plugin = match built_token_plugin() {
        Some(built) => format!(
            "install -m 0644 {} {}/{TOKEN_PLUGIN}",
            built.display(),
            token_plugin_dir().display()
        ),
        None => String::new(),
    };
    let packaging = root().join("packaging");
    let pg = if body.contains("PG_URL") {
        format!("export PG_URL=$({})\n", script_path("pg-test-cluster").display())
    } else {
        String::new()
    };
    let guest = format!(
        "install -m 0755 {bin} /usr/bin/rampart\n\
         {plugin}\n\
         install -m 0644 {packaging}/systemd/*.service /usr/lib/systemd/system/\n\
         install -m 0644 {packaging}/sysusers.d/rampart.conf /usr/lib/sysusers.d/\n\
         systemd-sysusers\n\
         systemctl daemon-reload\n\
         {pg}\
         mkdir -p /srv/docs-page && cd /srv/docs-page\n\
         env -u RAMPART_KMS RAMPART_LOG=warn bash {page_script}\n",
        bin = rampart_bin(),
        packaging = packaging.display(),
        page_script = page_script.display(),
    );
    let run = run_in_kernel_with_systemd(&share, &guest, Duration::from_secs(1200));
    if !run.out.status.success() {
        return Err(format!(
            "{} (under the kernel)\n{}\n--- script output ---\n{}\n--- console ---\n{}",
            page.display(),
            describe(body, &run.out),
            run.transcript,
            run.console
        ));
    }
    Ok(())
}

/// Runs the page at `path` (relative to the repository): under the kernel
/// when a block needs it, else here.
fn run_page(path: &str) {
    let page = root().join(path);
    let text = std::fs::read_to_string(&page).unwrap();
    let found = blocks(&text);
    assert!(!found.is_empty(), "{path} has no ```sh block: take it out of the page list");
    let body = script(&found);
    let result = if found.iter().any(|b| b.kernel) {
        run_under_kernel(&page, &body)
    } else {
        run_on_host(&page, &body)
    };
    if let Err(failure) = result {
        panic!("{failure}");
    }
}

/// One test per page with shell blocks, so pages run side by side and a
/// failure names its page.
macro_rules! pages_run {
    ($($name:ident: $path:literal,)*) => {
        $(
            #[test]
            fn $name() {
                run_page($path);
            }
        )*
        /// The pages the tests above run.
        const RUN_PAGES: &[&str] = &[$($path),*];
    };
}

pages_run! {
    readme_runs: "README.md",
    page_install_runs: "docs/src/install.md",
    page_cryptsetup_runs: "docs/src/cryptsetup.md",
    page_serving_runs: "docs/src/serving.md",
    page_plain_volumes_runs: "docs/src/plain-volumes.md",
    page_integrity_volumes_runs: "docs/src/integrity-volumes.md",
    page_key_manager_runs: "docs/src/key-manager.md",
    page_boot_unlock_runs: "docs/src/boot-unlock.md",
    page_kmip_clients_runs: "docs/src/kmip-clients.md",
    page_files_runs: "docs/src/files.md",
    page_operations_runs: "docs/src/operations.md",
    page_reference_runs: "docs/src/reference.md",
}

#[test]
fn every_page_with_shell_blocks_is_run() {
    let missing: Vec<String> = pages()
        .iter()
        .map(|page| page.strip_prefix(root()).unwrap().to_string_lossy().into_owned())
        .filter(|path| {
            !blocks(&std::fs::read_to_string(root().join(path)).unwrap()).is_empty()
                && !RUN_PAGES.contains(&path.as_str())
        })
        .collect();
    assert!(missing.is_empty(), "pages with shell blocks that no test runs: {missing:?}");
}

#[test]
fn blocks_are_found_by_their_info_string() {
    let text = "intro\n```sh\nrampart --version\n```\n```text\nnot run\n```\n\
                - item\n  ```sh kernel\n  losetup -f\n  ```\n```console\n$ no\n```\n";
    assert_eq!(
        blocks(text),
        [
            Block { text: "rampart --version\n".into(), kernel: false },
            Block { text: "losetup -f\n".into(), kernel: true }
        ]
    );
}

/// GitHub's (and mdBook's) anchor of a heading: lower case, spaces to
/// dashes, punctuation other than `-` and `_` dropped.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a Markdown file's headings (outside fenced blocks).
fn anchors(text: &str) -> Vec<String> {
    let mut fenced = false;
    let mut found = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            found.push(anchor(line.trim_start_matches('#')));
        }
    }
    found
}

/// The targets of the inline links `[text](target)` of `text`.
fn links(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("](") {
        rest = &rest[at + 2..];
        if let Some(end) = rest.find(')') {
            found.push(rest[..end].to_owned());
        }
    }
    found
}

#[test]
fn every_relative_link_of_the_readme_and_the_book_resolves() {
    let mut broken = Vec::new();
    for page in pages()
        .into_iter()
        .chain([Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/src/SUMMARY.md")])
    {
        let text = std::fs::read_to_string(&page).unwrap();
        for link in links(&text) {
            if link.contains("://") || link.starts_with("mailto:") {
                continue;
            }
            let (file, fragment) = link.split_once('#').unwrap_or((&link, ""));
            let target =
                if file.is_empty() { page.clone() } else { page.parent().unwrap().join(file) };
            let Ok(target_text) = std::fs::read_to_string(&target) else {
                if !target.exists() {
                    broken.push(format!("{}: {link} (no such file)", page.display()));
                }
                continue;
            };
            if !fragment.is_empty() && !anchors(&target_text).iter().any(|a| a == fragment) {
                broken.push(format!("{}: {link} (no such heading)", page.display()));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn anchors_are_spelled_as_github_spells_them() {
    assert_eq!(
        anchor(" Crash trials: `kill -9` of `rampart serve` under fio"),
        "crash-trials-kill--9-of-rampart-serve-under-fio"
    );
    assert_eq!(anchor("Key manager: fleet scale"), "key-manager-fleet-scale");
    assert_eq!(links("see [a](b.md#c) and [d](https://e)"), ["b.md#c", "https://e"]);
}
