mod bench;
mod rand;

use crate::cli::{Args, Command};

pub fn run(args: Args) -> anyhow::Result<()> {
    match args.command {
        Command::Bench(bench) => bench::run(&bench),
        Command::Rand(rand) => rand::run(&rand),
    }
}
