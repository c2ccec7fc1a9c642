//! The documentation, run: every ```sh block of README.md and of each
//! page of the book (docs/src) runs, page by page and in order, in a new
//! scratch directory with this build's `rampart` first on PATH, so a
//! command the pages show that stops working fails the tests. Blocks
//! marked ```sh kernel set up a host (/etc, systemd, the kernel's NBD
//! client and dm-crypt) and are told apart here; they are not run yet,
//! as the test kernel's root file system is read-only. The ports a page listens on are `${PORT_A:-18443}`-style
//! variables, which the harness sets to free ports; a page that names
//! `$PG_URL` gets a throwaway PostgreSQL cluster of its own
//! (scripts/pg-test-cluster).

use std::path::{Path, PathBuf};

use crate::helpers::kernel_support::rampart_bin;
use crate::helpers::kms_support::free_port;
use crate::helpers::serve_support::tool;

use super::helpers::common::{describe, output, TempDir};

/// A page's runnable blocks, in order, split by where they run.
#[derive(Debug, Default, PartialEq, Eq)]
struct Blocks {
    host: Vec<String>,
    kernel: Vec<String>,
}

/// The fenced blocks of `text` whose info string is `sh` (on the host)
/// or `sh kernel` (under the test kernel); other languages are examples.
fn blocks(text: &str) -> Blocks {
    let mut found = Blocks::default();
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
            ["sh"] => found.host.push(body),
            ["sh", "kernel"] => found.kernel.push(body),
            _ => {}
        }
    }
    found
}

/// README.md and every Markdown page under docs/src, by path.
fn pages() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut pages = vec![root.join("README.md")];
    let mut dirs = vec![root.join("docs/src")];
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

/// The page's blocks as one script: free ports in the port variables,
/// each block announced on standard error (so a failure says which),
/// background jobs stopped at the end. Under the kernel the shell is
/// busybox's, which has no `pipefail`.
fn script(blocks: &[String], kernel: bool) -> String {
    let bin_dir = Path::new(rampart_bin()).parent().unwrap();
    let mut text = String::from(if kernel { "set -eu\n" } else { "set -euo pipefail\n" });
    text.push_str("trap 'kill $(jobs -p) 2>/dev/null || true; wait' EXIT\n");
    text.push_str(&format!("export PATH={}:$PATH\n", bin_dir.display()));
    for variable in PORT_VARIABLES {
        text.push_str(&format!("export {variable}={}\n", free_port()));
    }
    for (i, block) in blocks.iter().enumerate() {
        text.push_str(&format!("echo '--- block {}' >&2\n", i + 1));
        text.push_str(block);
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
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts").join(name)
}

fn run_page(page: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(page).unwrap();
    let found = blocks(&text);
    let name = page.file_stem().unwrap().to_string_lossy().into_owned();
    if !found.host.is_empty() {
        let dir = TempDir::new(&format!("docs-{name}"));
        let body = script(&found.host, false);
        let cluster = body.contains("PG_URL").then(PgCluster::start);
        let mut command = std::process::Command::new(tool("bash"));
        command
            .args(["-c", &body])
            .current_dir(dir.path())
            .env_remove("RAMPART_KMS")
            .env("RAMPART_LOG", "warn");
        if let Some(cluster) = &cluster {
            command.env("PG_URL", &cluster.0);
        }
        let out = output(command);
        if !out.status.success() {
            return Err(format!("{}\n{}", page.display(), describe(&body, &out)));
        }
    }
    Ok(())
}

#[test]
fn every_shell_block_of_the_readme_and_the_book_runs() {
    let pages = pages();
    assert!(pages.len() > 5, "the book's pages are missing: {pages:?}");
    let failures: Vec<String> = pages.iter().filter_map(|page| run_page(page).err()).collect();
    assert!(failures.is_empty(), "{} page(s) failed:\n{}", failures.len(), failures.join("\n\n"));
}

#[test]
fn blocks_are_found_by_their_info_string() {
    let text = "intro\n```sh\nrampart --version\n```\n```text\nnot run\n```\n\
                - item\n  ```sh kernel\n  losetup -f\n  ```\n```console\n$ no\n```\n";
    assert_eq!(
        blocks(text),
        Blocks { host: vec!["rampart --version\n".into()], kernel: vec!["losetup -f\n".into()] }
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
