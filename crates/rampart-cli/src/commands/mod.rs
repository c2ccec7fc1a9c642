mod bench;
mod bind;
mod clone;
mod copy;
mod docs;
mod file;
mod header;
pub mod keysource;
pub mod kms;
mod luks;
mod plain;
mod rand;
mod reencrypt;
mod serve;
pub mod wipe;

use crate::cli::{Args, Command};

pub fn run(args: Args) -> anyhow::Result<()> {
    match args.command {
        Command::Bench(bench) => bench::run(&bench),
        Command::Rand(rand) => rand::run(&rand),
        Command::Format(format) => luks::format(&format),
        Command::Dump(dump) => luks::dump(&dump),
        Command::TestKey(test) => luks::test_key(&test),
        Command::AddKey(add) => luks::add_key(&add),
        Command::ChangeKey(change) => luks::change_key(&change),
        Command::RemoveKey(remove) => luks::remove_key(&remove),
        Command::KillSlot(kill) => luks::kill_slot(&kill),
        Command::Token(token) => luks::token(&token),
        Command::Header(header) => luks::header(&header),
        Command::Export(export) => copy::export(&export),
        Command::Import(import) => copy::import(&import),
        Command::Repair(repair) => luks::repair(&repair),
        Command::Clone(clone) => clone::clone(&clone),
        Command::Wipe(wipe) => wipe::wipe(&wipe),
        Command::IsLuks(is_luks) => luks::is_luks(&is_luks),
        Command::Uuid(uuid) => luks::uuid(&uuid),
        Command::Serve(serve) => serve::run(&serve),
        Command::Bind(bind) => bind::bind(&bind),
        Command::Unbind(unbind) => bind::unbind(&unbind),
        Command::Rewrap(rewrap) => bind::rewrap(&rewrap),
        Command::Reencrypt(args) => reencrypt::run(&args),
        Command::Unlock(unlock) => bind::unlock(&unlock),
        Command::Kms(kms) => kms::run(&kms),
        Command::Encrypt(encrypt) => file::encrypt(&encrypt),
        Command::Decrypt(decrypt) => file::decrypt(&decrypt),
        Command::GenerateDocs(docs) => docs::generate(&docs),
    }
}
