//! `rampart generate-docs` (hidden): the flag reference generated from
//! the clap definitions. `--out DIR` writes manual pages and shell
//! completions for packages (`scripts/build-deb`): DIR/man/ gets
//! rampart.1 and one page per subcommand (rampart-bind.1,
//! rampart-kms-key-create.1...), DIR/completions/ gets rampart.bash,
//! _rampart (zsh) and rampart.fish. `--markdown DIR` writes the same
//! reference as Markdown pages for the book (docs/src/commands).

mod markdown;

use std::path::Path;

use anyhow::Context;
use clap::CommandFactory;
use clap_complete::Shell;

use crate::cli::{Args, GenerateDocsArgs};

pub fn generate(args: &GenerateDocsArgs) -> anyhow::Result<()> {
    if let Some(out) = &args.out {
        man_and_completions(out)?;
    }
    if let Some(dir) = &args.markdown {
        write_markdown(dir)?;
    }
    Ok(())
}

fn man_and_completions(out: &Path) -> anyhow::Result<()> {
    let man = out.join("man");
    let completions = out.join("completions");
    for dir in [&man, &completions] {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    clap_mangen::generate_to(Args::command(), &man)
        .with_context(|| format!("cannot write the manual pages to {}", man.display()))?;
    let mut command = Args::command();
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        clap_complete::generate_to(shell, &mut command, "rampart", &completions)
            .with_context(|| format!("cannot write the {shell} completions"))?;
    }
    let pages = std::fs::read_dir(&man)
        .with_context(|| format!("cannot list {}", man.display()))?
        .filter(|entry| {
            entry.as_ref().is_ok_and(|e| e.path().extension().is_some_and(|x| x == "1"))
        })
        .count();
    eprintln!(
        "rampart: {pages} manual pages in {}, bash, zsh and fish completions in {}",
        man.display(),
        completions.display()
    );
    Ok(())
}

fn write_markdown(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let pages = markdown::pages(Args::command());
    for (name, text) in &pages {
        let path = dir.join(name);
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    // A renamed or removed command must not leave its old page behind,
    // where the book would still link it; other files are not ours.
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))? {
        let path = entry.with_context(|| format!("cannot list {}", dir.display()))?.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else { continue };
        let ours = name.starts_with("rampart") && name.ends_with(".md");
        if ours && !pages.iter().any(|(page, _)| page == name) {
            std::fs::remove_file(&path)
                .with_context(|| format!("cannot remove {}", path.display()))?;
        }
    }
    eprintln!("rampart: {} Markdown pages in {}", pages.len(), dir.display());
    Ok(())
}
