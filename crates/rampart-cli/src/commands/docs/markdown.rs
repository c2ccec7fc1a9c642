//! The command reference as Markdown, for the book: one page per command
//! and subcommand, named like its manual page (rampart-kms-key-create.md
//! for rampart-kms-key-create.1), rendered from the same clap `Command`
//! and leaving out what the manual pages leave out (hidden commands,
//! arguments, values and environment variables, the `help` subcommand).
//! The program's version is left out too, so that the committed pages
//! change only when the commands do.

use std::fmt::Write as _;

use clap::{Arg, Command};

/// Every page as (file name, text), the root's first, in command-tree
/// order.
pub fn pages(root: Command) -> Vec<(String, String)> {
    // Built as clap_mangen builds it, so that every subcommand has its
    // full name ("rampart kms key create"), its page name and the flags
    // propagated to it, and no `help` subcommand.
    let mut root = root.disable_help_subcommand(true);
    root.build();
    let mut pages = Vec::new();
    collect(&root, true, &mut pages);
    pages
}

fn collect(command: &Command, root: bool, pages: &mut Vec<(String, String)>) {
    pages.push((file_name(command), page(command, root)));
    for sub in subcommands(command) {
        collect(sub, false, pages);
    }
}

/// The visible subcommands, in the order `--help` and the manual pages
/// list them.
fn subcommands(command: &Command) -> Vec<&Command> {
    let mut subs: Vec<&Command> = command.get_subcommands().filter(|s| !s.is_hide_set()).collect();
    subs.sort_by_key(|s| s.get_display_order());
    subs
}

fn file_name(command: &Command) -> String {
    format!("{}.md", command.get_display_name().unwrap_or(command.get_name()))
}

/// "rampart kms key create".
fn full_name(command: &Command) -> &str {
    command.get_bin_name().unwrap_or(command.get_name())
}

fn page(command: &Command, root: bool) -> String {
    let mut out = format!("# {}\n\n", full_name(command));
    if let Some(about) = command.get_long_about().or(command.get_about()) {
        out.push_str(&paragraphs(&about.to_string()));
    }
    let aliases: Vec<String> = command.get_visible_aliases().map(code).collect();
    if !aliases.is_empty() {
        let _ = writeln!(out, "Also spelled {}.\n", aliases.join(", "));
    }
    if root {
        out.push_str(
            "The flag reference: one page per command and subcommand, generated from the \
             definitions the binary parses its arguments with, as are the manual pages \
             (`man rampart-kms-key-create` is the page of `rampart kms key create`) and \
             `rampart COMMAND --help`.\n\n",
        );
    }
    let _ = writeln!(out, "```text\n{}\n```\n", usage(command));

    let subs = subcommands(command);
    if !subs.is_empty() {
        out.push_str("## Commands\n\n");
        for sub in subs {
            command_list(sub, 0, &mut out);
        }
        out.push('\n');
    }

    let args: Vec<&Arg> = command.get_arguments().filter(|a| !a.is_hide_set()).collect();
    let mut sections: Vec<(String, Vec<&Arg>)> = Vec::new();
    for arg in args {
        let heading = match (arg.get_help_heading(), arg.is_positional()) {
            (Some(heading), _) => heading.to_owned(),
            (None, true) => "Arguments".to_owned(),
            (None, false) => "Options".to_owned(),
        };
        match sections.iter_mut().find(|(h, _)| *h == heading) {
            Some((_, section)) => section.push(arg),
            None => sections.push((heading, vec![arg])),
        }
    }
    // Arguments before options, then clap's help headings, as `--help`.
    sections.sort_by_key(|(heading, _)| match heading.as_str() {
        "Arguments" => 0,
        "Options" => 1,
        _ => 2,
    });
    for (heading, mut section) in sections {
        let _ = writeln!(out, "## {heading}\n");
        section.sort_by_key(|a| a.get_display_order());
        for arg in section {
            argument(arg, &mut out);
        }
    }
    // One newline at the end of the file, not the blank line the
    // sections leave.
    let trimmed = out.trim_end().len();
    out.truncate(trimmed);
    out.push('\n');
    out
}

/// The usage lines, without clap's "Usage: " title.
fn usage(command: &Command) -> String {
    let usage = command.clone().render_usage().to_string();
    let lines: Vec<&str> = usage
        .lines()
        .map(|line| line.trim_start_matches("Usage:").trim())
        .filter(|line| !line.is_empty())
        .collect();
    lines.join("\n")
}

/// `command` and its subcommands, as a nested list of links with their
/// one-line about.
fn command_list(command: &Command, depth: usize, out: &mut String) {
    let _ = write!(out, "{}- [{}]({})", "  ".repeat(depth), full_name(command), file_name(command));
    if let Some(about) = command.get_about().or(command.get_long_about()) {
        let about = about.to_string();
        let _ =
            write!(out, ": {}", inline(&about.split_whitespace().collect::<Vec<_>>().join(" ")));
    }
    out.push('\n');
    for sub in subcommands(command) {
        command_list(sub, depth + 1, out);
    }
}

/// One argument: a heading that is its name (so that pages can link to
/// `rampart-format.md#--key-file`), how it is written, its help, default,
/// possible values and environment variable.
fn argument(arg: &Arg, out: &mut String) {
    let values = value_names(arg);
    if arg.is_positional() {
        let (open, close) = if arg.is_required_set() { ("<", ">") } else { ("[", "]") };
        let many = if arg.get_num_args().is_some_and(|n| n.max_values() > values.len()) {
            "..."
        } else {
            ""
        };
        let _ =
            writeln!(out, "### {}\n", code(&format!("{open}{}{close}{many}", values.join(" "))));
    } else {
        let name = match (arg.get_long(), arg.get_short()) {
            (Some(long), _) => format!("--{long}"),
            (None, Some(short)) => format!("-{short}"),
            (None, None) => arg.get_id().to_string(),
        };
        let _ = writeln!(out, "### {}\n", code(&name));
        let spelling = spellings(arg, &values);
        if spelling != [name] {
            let spelled: Vec<String> = spelling.iter().map(|s| code(s)).collect();
            let _ = writeln!(out, "{}\n", spelled.join(", "));
        }
    }
    if let Some(help) = arg.get_long_help().or(arg.get_help()) {
        out.push_str(&paragraphs(&help.to_string()));
    }
    let takes_values = arg.get_num_args().is_some_and(|n| n.takes_values());
    let defaults: Vec<String> =
        arg.get_default_values().iter().map(|v| v.to_string_lossy().into_owned()).collect();
    if takes_values && !arg.is_hide_default_value_set() && !defaults.is_empty() {
        let shown = defaults.join(",");
        if shown.is_empty() {
            out.push_str("Default: empty.\n\n");
        } else {
            let _ = writeln!(out, "Default: {}.\n", code(&shown));
        }
    }
    if !arg.is_hide_possible_values_set() {
        let possible: Vec<_> =
            arg.get_possible_values().into_iter().filter(|v| !v.is_hide_set()).collect();
        if !possible.is_empty() {
            out.push_str("Possible values:\n\n");
            for value in possible {
                let _ = write!(out, "- {}", code(value.get_name()));
                if let Some(help) = value.get_help() {
                    let _ = write!(out, ": {}", inline(&help.to_string()));
                }
                out.push('\n');
            }
            out.push('\n');
        }
    }
    if let (Some(env), false) = (arg.get_env(), arg.is_hide_env_set()) {
        let _ = writeln!(
            out,
            "Also read from the environment variable {}.\n",
            code(&env.to_string_lossy())
        );
    }
}

/// The names of an argument's values: its value names, else its id in
/// capitals, as clap's help writes them.
fn value_names(arg: &Arg) -> Vec<String> {
    match arg.get_value_names() {
        Some(names) if !names.is_empty() => names.iter().map(|n| n.to_string()).collect(),
        _ => vec![arg.get_id().as_str().to_uppercase()],
    }
}

/// The ways an option is written: `-d`, `--key-file <FILE>` and its
/// visible aliases, the value after the last.
fn spellings(arg: &Arg, values: &[String]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    if let Some(short) = arg.get_short() {
        names.push(format!("-{short}"));
    }
    for short in arg.get_visible_short_aliases().unwrap_or_default() {
        names.push(format!("-{short}"));
    }
    if let Some(long) = arg.get_long() {
        names.push(format!("--{long}"));
    }
    for long in arg.get_visible_aliases().unwrap_or_default() {
        names.push(format!("--{long}"));
    }
    let Some(range) = arg.get_num_args().filter(|n| n.takes_values()) else { return names };
    let mut value: String = values.iter().map(|v| format!("<{v}>")).collect::<Vec<_>>().join(" ");
    if range.max_values() > values.len() {
        value.push_str("...");
    }
    let value = match (range.min_values() > 0, arg.is_require_equals_set()) {
        (true, false) => format!(" {value}"),
        (true, true) => format!("={value}"),
        (false, false) => format!(" [{value}]"),
        (false, true) => format!("[={value}]"),
    };
    if let Some(last) = names.last_mut() {
        last.push_str(&value);
    }
    names
}

/// Help text as Markdown paragraphs, each ending in a blank line: clap's
/// blank lines separate paragraphs, the lines between them are one.
fn paragraphs(help: &str) -> String {
    let mut out = String::new();
    let mut paragraph: Vec<&str> = Vec::new();
    for line in help.lines().map(str::trim).chain([""]) {
        if !line.is_empty() {
            paragraph.push(line);
        } else if !paragraph.is_empty() {
            out.push_str(&block_start(&inline(&paragraph.join(" "))));
            out.push_str("\n\n");
            paragraph.clear();
        }
    }
    out
}

/// A paragraph that Markdown would otherwise read as a heading, a list
/// item or a rule, with its first marker escaped.
fn block_start(paragraph: &str) -> String {
    let digits = paragraph.chars().take_while(char::is_ascii_digit).count();
    let after_digits = paragraph[digits..].chars().next();
    let at = if paragraph.starts_with(['#', '-', '+', '=']) {
        0
    } else if digits > 0 && matches!(after_digits, Some('.' | ')')) {
        digits
    } else {
        return paragraph.to_owned();
    };
    format!("{}\\{}", &paragraph[..at], &paragraph[at..])
}

/// Plain text as Markdown text: `code` spans kept as they are, the
/// characters Markdown would take for markup escaped elsewhere.
fn inline(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find('`') {
        escape(&rest[..start], &mut out);
        let span = &rest[start..];
        match span[1..].find('`') {
            Some(end) => {
                out.push_str(&span[..end + 2]);
                rest = &span[end + 2..];
            }
            None => {
                out.push_str("\\`");
                rest = &span[1..];
            }
        }
    }
    escape(rest, &mut out);
    out
}

fn escape(text: &str, out: &mut String) {
    let chars: Vec<char> = text.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        let word =
            |j: Option<usize>| j.and_then(|j| chars.get(j)).is_some_and(|c| c.is_alphanumeric());
        let markup = match c {
            '\\' | '*' | '[' | ']' | '<' | '>' | '&' | '~' | '|' => true,
            // An underscore inside a word (RAMPART_KMS) is never emphasis.
            '_' => !(word(i.checked_sub(1)) && word(Some(i + 1))),
            _ => false,
        };
        if markup {
            out.push('\\');
        }
        out.push(c);
    }
}

/// `text` as a code span, fenced by more backticks than it holds in a row.
fn code(text: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat(longest + 1);
    let pad = if text.starts_with('`') || text.ends_with('`') { " " } else { "" };
    format!("{fence}{pad}{text}{pad}{fence}")
}

#[cfg(test)]
mod tests {
    use super::{code, inline, paragraphs};

    #[test]
    fn markup_is_escaped_outside_code_spans_only() {
        assert_eq!(
            inline("DIR/*.bundle, `a *b*` and <FILE> for $RAMPART_KMS or _x"),
            "DIR/\\*.bundle, `a *b*` and \\<FILE\\> for $RAMPART_KMS or \\_x"
        );
        assert_eq!(inline("a lone ` backtick"), "a lone \\` backtick");
        assert_eq!(paragraphs("# one\nline\n\n2. two\n"), "\\# one line\n\n2\\. two\n\n");
        assert_eq!(code("a`b"), "``a`b``");
        assert_eq!(code("`x"), "`` `x ``");
    }
}
