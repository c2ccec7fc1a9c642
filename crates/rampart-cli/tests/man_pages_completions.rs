#![allow(clippy::unwrap_used)]
//! `rampart generate-docs`: manual pages that man-db renders without
//! warnings, one per subcommand (nested ones included), shell
//! completions that bash loads and that complete subcommands and flags,
//! and the book's Markdown command reference (docs/src/commands), which
//! must be what the binary generates now, page for page with the manual
//! pages, and all in the book's summary.

use crate::helpers::kms_support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use kms_support::common::{describe, output_with, p, tool};
use kms_support::{ok, rampart, TempDir};

fn generate(tmp: &TempDir) -> std::path::PathBuf {
    let out = tmp.join("docs");
    let run = rampart(&["generate-docs", "--out", p(&out)]);
    assert!(run.status.success(), "{}", describe("generate-docs", &run));
    out
}

/// `man -l PAGE` as plain text, with groff's warnings on.
fn render(page: &Path) -> (String, String) {
    let mut command = Command::new(tool("man"));
    command.args(["--warnings", "-P", "cat", "-l", p(page)]).env("MANWIDTH", "100");
    let out = output_with(command, None);
    assert!(out.status.success(), "{}", describe(&format!("man -l {}", page.display()), &out));
    (String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
}

#[test]
fn man_pages_render_for_every_subcommand() {
    let tmp = TempDir::new("manpages");
    let man = generate(&tmp).join("man");
    let mut pages: Vec<String> = std::fs::read_dir(&man)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    pages.sort();
    for wanted in [
        "rampart.1",
        "rampart-bind.1",
        "rampart-unlock.1",
        "rampart-serve.1",
        "rampart-kms.1",
        "rampart-kms-serve.1",
        "rampart-kms-key-create.1",
    ] {
        assert!(pages.iter().any(|p| p == wanted), "{wanted} missing from {pages:?}");
    }
    // The hidden generator documents nobody.
    assert!(!pages.iter().any(|p| p.contains("generate-docs")), "{pages:?}");

    for page in &pages {
        let (text, warnings) = render(&man.join(page));
        assert!(warnings.trim().is_empty(), "{page}: groff warnings:\n{warnings}");
        assert!(text.contains("NAME"), "{page}:\n{text}");
        assert!(text.contains("SYNOPSIS"), "{page}:\n{text}");
    }
    let (bind, _) = render(&man.join("rampart-bind.1"));
    assert!(bind.contains("--token-bundle"), "{bind}");
    assert!(bind.contains("/etc/rampart/client.bundle"), "{bind}");
    let (top, _) = render(&man.join("rampart.1"));
    assert!(top.contains("rampart-bind(1)"), "the main page lists the subcommand pages: {top}");
    let version = ok(&["--version"]);
    assert!(top.contains(version.trim().trim_start_matches("rampart ")), "{top}");
}

/// Runs bash with the completion script loaded and completes `words`
/// (the cursor on the last one); returns the candidates.
fn complete(script: &Path, words: &[&str]) -> Vec<String> {
    let line = words.join(" ");
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let program = format!(
        "source '{}' || exit 3\n\
         COMP_WORDS=({})\nCOMP_CWORD={}\nCOMP_LINE='{line}'\nCOMP_POINT=${{#COMP_LINE}}\n\
         _rampart rampart '{}' '{}' || exit 4\n\
         printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        p(script),
        quoted.join(" "),
        words.len() - 1,
        words[words.len() - 1],
        words.get(words.len().wrapping_sub(2)).copied().unwrap_or("")
    );
    let mut command = Command::new(tool("bash"));
    command.args(["--norc", "--noprofile", "-c", &program]);
    let out = output_with(command, None);
    assert!(out.status.success(), "{}", describe(&format!("complete {line:?}"), &out));
    String::from_utf8(out.stdout).unwrap().lines().map(str::to_owned).collect()
}

#[test]
fn completions_load_in_bash_and_complete() {
    let tmp = TempDir::new("completions");
    let dir = generate(&tmp).join("completions");
    for file in ["rampart.bash", "_rampart", "rampart.fish"] {
        assert!(std::fs::metadata(dir.join(file)).unwrap().len() > 1000, "{file} is tiny");
    }
    let bash = dir.join("rampart.bash");
    let mut command = Command::new(tool("bash"));
    command.args([
        "--norc",
        "--noprofile",
        "-c",
        &format!("source '{}' && complete -p rampart", p(&bash)),
    ]);
    let out = output_with(command, None);
    assert!(out.status.success(), "{}", describe("complete -p rampart", &out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("_rampart"), "{out:?}");

    let subcommands = complete(&bash, &["rampart", "bi"]);
    assert_eq!(subcommands, ["bind"], "{subcommands:?}");
    let kms = complete(&bash, &["rampart", "kms", "k"]);
    assert_eq!(kms, ["key"], "{kms:?}");
    let flags = complete(&bash, &["rampart", "bind", "--token-"]);
    assert!(flags.contains(&"--token-bundle".to_owned()), "{flags:?}");
    assert!(flags.contains(&"--token-id".to_owned()), "{flags:?}");
}

#[test]
fn generate_docs_refuses_an_unwritable_directory() {
    let tmp = TempDir::new("docs-refused");
    let file = tmp.file("not-a-dir", b"x");
    let run = rampart(&["generate-docs", "--out", p(&file)]);
    assert_eq!(run.status.code(), Some(1), "{}", describe("generate-docs into a file", &run));
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(err.starts_with("rampart: error: cannot create"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

/// How to bring docs/src/commands up to date, for the failure messages.
const REGENERATE: &str = "cargo run -p rampart-cli -- generate-docs --markdown docs/src/commands";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The files of `dir` by name, with their contents.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let path = e.unwrap().path();
            (path.file_name().unwrap().to_str().unwrap().to_owned(), std::fs::read(&path).unwrap())
        })
        .collect()
}

#[test]
fn the_books_command_reference_is_current() {
    let tmp = TempDir::new("markdown");
    let out = tmp.join("docs");
    let fresh = tmp.join("commands");
    let run = rampart(&["generate-docs", "--out", p(&out), "--markdown", p(&fresh)]);
    assert!(run.status.success(), "{}", describe("generate-docs --markdown", &run));
    let fresh = files(&fresh);
    let committed = files(&repo_root().join("docs/src/commands"));

    let mut stale: Vec<String> = Vec::new();
    for (name, text) in &fresh {
        match committed.get(name) {
            None => stale.push(format!("{name} is missing")),
            Some(old) if old != text => stale.push(format!("{name} differs")),
            Some(_) => {}
        }
    }
    stale.extend(
        committed.keys().filter(|n| !fresh.contains_key(*n)).map(|n| format!("{n} is extra")),
    );
    assert!(
        stale.is_empty(),
        "docs/src/commands is not the reference this binary generates ({}): regenerate it \
         with `{REGENERATE}` and commit it",
        stale.join(", ")
    );

    // One Markdown page per manual page, by the same name.
    let man: Vec<String> =
        files(&out.join("man")).keys().map(|n| n.trim_end_matches(".1").to_owned()).collect();
    let markdown: Vec<String> =
        fresh.keys().map(|n| n.trim_end_matches(".md").to_owned()).collect();
    assert_eq!(man, markdown, "manual pages and Markdown pages differ");
    assert!(!markdown.iter().any(|n| n.contains("generate-docs")), "{markdown:?}");

    // mdBook renders only the pages its summary lists: the Command
    // reference part must be the command tree of rampart.md, in order.
    let root = String::from_utf8(fresh["rampart.md"].clone()).unwrap();
    let tree = root.split("## Commands\n\n").nth(1).unwrap().split("\n\n").next().unwrap();
    let mut expected = String::from("# Command reference\n\n- [rampart](commands/rampart.md)\n");
    for line in tree.lines() {
        let (entry, _about) = line.split_once("): ").unwrap_or((line, ""));
        let entry = entry.trim_end_matches(')').replacen("](", "](commands/", 1);
        expected.push_str(&format!("  {entry})\n"));
    }
    let summary = std::fs::read_to_string(repo_root().join("docs/src/SUMMARY.md")).unwrap();
    assert!(
        summary.contains(&expected),
        "docs/src/SUMMARY.md lacks this Command reference part, the command tree of \
         docs/src/commands/rampart.md (after `{REGENERATE}`):\n{expected}"
    );
}

#[test]
fn markdown_pages_show_usage_options_defaults_and_values() {
    let tmp = TempDir::new("markdown-pages");
    let dir = tmp.join("commands");
    // A page of a command that no longer exists is removed; other files stay.
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("rampart-gone.md"), "# rampart gone\n").unwrap();
    std::fs::write(dir.join("notes.txt"), "mine").unwrap();
    let run = rampart(&["generate-docs", "--markdown", p(&dir)]);
    assert!(run.status.success(), "{}", describe("generate-docs --markdown", &run));
    assert!(!dir.join("rampart-gone.md").exists());
    assert!(dir.join("notes.txt").exists());
    assert!(!dir.join("man").exists(), "--markdown alone writes no manual pages");

    let page = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap();
    let create = page("rampart-kms-key-create.md");
    assert!(create.starts_with("# rampart kms key create\n\nCreate a key\n"), "{create}");
    assert!(create.contains("```text\nrampart kms key create [OPTIONS] <NAME>\n```"), "{create}");
    assert!(create.contains("### `--allow`\n\n`--allow <SELECTOR>`\n\nWho may"), "{create}");
    // Never a ```sh block: the docs tests would run it.
    assert!(!create.contains("```sh"), "{create}");
    let format = page("rampart-format.md");
    assert!(format.contains("`-d`, `--key-file <FILE>`"), "{format}");
    assert!(format.contains("Default: `luks2`.\n\nPossible values:\n\n- `luks2`\n- `luks1`\n"));
    let kms = page("rampart-kms.md");
    assert!(kms.contains("- [rampart kms key](rampart-kms-key.md): "), "{kms}");
    assert!(kms.contains("  - [rampart kms key create](rampart-kms-key-create.md): Create a key"));

    let refused = rampart(&["generate-docs"]);
    assert_eq!(refused.status.code(), Some(2), "{}", describe("generate-docs", &refused));
}
