#![allow(clippy::unwrap_used)]
//! `rampart generate-docs`: manual pages that man-db renders without
//! warnings, one per subcommand (nested ones included), and shell
//! completions that bash loads and that complete subcommands and flags.

use crate::helpers::kms_support;

use std::path::Path;
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
