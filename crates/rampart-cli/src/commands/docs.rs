//! `rampart generate-docs --out DIR` (hidden): manual pages and shell
//! completions generated from the clap definitions, for packages
//! (`scripts/build-deb`). DIR/man/ gets rampart.1 and one page per
//! subcommand (rampart-bind.1, rampart-kms-key-create.1...);
//! DIR/completions/ gets rampart.bash, _rampart (zsh) and rampart.fish.

use anyhow::Context;
use clap::CommandFactory;
use clap_complete::Shell;

use crate::cli::{Args, GenerateDocsArgs};

pub fn generate(args: &GenerateDocsArgs) -> anyhow::Result<()> {
    let man = args.out.join("man");
    let completions = args.out.join("completions");
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
