//! Headerless volumes against the kernel (`scripts/kernel-vm`): for each
//! of cryptsetup's plain-mode options (cipher and IV, key size, passphrase
//! hashes and `--hash plain`, a passphrase line on standard input, `--key-file
//! -`, a key file with `--keyfile-offset`, `--keyfile-size`, `--offset`,
//! `--skip`, sector sizes 512 to 4096, `--iv-large-sectors`, an XTS key
//! whose halves are identical), data the
//! kernel's dm-crypt wrote through `cryptsetup open --type plain` reads
//! back identically through `rampart export` and `rampart serve`, and data
//! `rampart import` and `rampart serve` wrote reads back identically
//! through the kernel, whose mapping has the size of Rampart's. One boot
//! checks every case.

use crate::helpers::kernel_support::*;
use crate::helpers::serve_support::{rampart_in, require, run, unix_uri, Serve, MIB};

use std::path::PathBuf;
use std::time::Duration;

/// Plaintext bytes each mapping holds.
const DATA: u64 = 2 * MIB;

/// One plain mapping, opened alike by cryptsetup and Rampart.
struct Case {
    name: &'static str,
    /// The plain-mode flags both take, in cryptsetup's spelling.
    flags: Vec<String>,
    /// `--offset` in 512-byte sectors.
    offset: u64,
    /// `--key-file` (None: the passphrase is a line of standard input).
    key_file: Option<PathBuf>,
    /// Standard input of both.
    stdin: PathBuf,
}

impl Case {
    /// Rampart's arguments: the flags, `--key-file`, and the data offset
    /// under the command's name for it.
    fn rampart_args(&self, offset_flag: &str) -> Vec<String> {
        let mut args = vec!["--type".to_owned(), "plain".to_owned()];
        args.extend(self.flags.iter().cloned());
        if self.offset > 0 {
            args.extend([offset_flag.to_owned(), self.offset.to_string()]);
        }
        if let Some(key) = &self.key_file {
            args.extend(["--key-file".to_owned(), p(key).to_owned()]);
        }
        args
    }

    fn cryptsetup_args(&self) -> String {
        let mut args = self.flags.join(" ");
        if self.offset > 0 {
            args.push_str(&format!(" --offset {}", self.offset));
        }
        if let Some(key) = &self.key_file {
            args.push_str(&format!(" --key-file {}", p(key)));
        }
        args
    }

    fn volume(&self, dir: &TempDir, side: &str) -> PathBuf {
        dir.join(&format!("{}.{side}.img", self.name))
    }
}

fn case(
    name: &'static str,
    flags: &[&str],
    offset: u64,
    key_file: Option<PathBuf>,
    stdin: PathBuf,
) -> Case {
    let flags = flags.iter().map(|s| (*s).to_owned()).collect();
    Case { name, flags, offset, key_file, stdin }
}

/// The cases: every option, each beside others where they do not mask
/// each other.
fn cases(dir: &TempDir) -> Vec<Case> {
    let line = |name: &str, text: &[u8]| dir.file(&format!("{name}.stdin"), text);
    let raw_key = dir.file("raw.key", &random_bytes(77, 200));
    let binary = dir.file("binary.pass", &random_bytes(78, 300));
    let half = random_bytes(79, 32);
    let twin_halves = dir.file("twin-halves.key", &[&half[..], &half[..]].concat());
    let stdin_file = || Some(PathBuf::from("-"));
    let xts = ["--cipher", "aes-xts-plain64"];
    vec![
        // cryptsetup's defaults: aes-cbc-essiv:sha256, 256 bits, ripemd160
        // over a typed line.
        case("defaults", &[], 0, None, line("defaults", b"correct horse battery staple\n")),
        case(
            "xts512-sha256-4k",
            &[&xts[..], &["--key-size", "512", "--hash", "sha256", "--sector-size", "4096"]]
                .concat(),
            0,
            None,
            line("xts512", b"a passphrase\n"),
        ),
        // --hash plain: the line itself, zero-padded to the key.
        case(
            "xts256-hash-plain",
            &[&xts[..], &["--key-size", "256", "--hash", "plain"]].concat(),
            0,
            None,
            line("hash-plain", b"short\n"),
        ),
        // A key file holds the key: --hash and --keyfile-size are ignored,
        // --keyfile-offset is not; --offset and --skip in 512-byte sectors.
        case(
            "keyfile-offset-skip",
            &[
                &xts[..],
                &["--key-size", "512", "--hash", "sha512", "--keyfile-offset", "13"],
                &["--keyfile-size", "7", "--skip", "1001"],
            ]
            .concat(),
            2048,
            Some(raw_key),
            line("empty", b""),
        ),
        // --key-file -: standard input's exact bytes, newlines and all,
        // from --keyfile-offset, --keyfile-size of them.
        case(
            "stdin-file-size",
            &["--cipher", "aes-cbc-plain64", "--key-size", "128", "--hash", "sha512"],
            0,
            stdin_file(),
            binary.clone(),
        )
        .with(&["--keyfile-offset", "3", "--keyfile-size", "100"]),
        // Unhashed standard input is read for the key size.
        case(
            "stdin-file-unhashed",
            &[&xts[..], &["--key-size", "256", "--hash", "plain"]].concat(),
            8,
            stdin_file(),
            binary,
        ),
        // The 32-bit plain IV, SHA-1, and NAME:BYTES.
        case(
            "cbc-plain-sha1",
            &["--cipher", "aes-cbc-plain", "--key-size", "256", "--hash", "sha1"],
            0,
            None,
            line("sha1", b"sha one\n"),
        ),
        case(
            "essiv-sha256-16",
            &["--cipher", "aes-cbc-essiv:sha256", "--key-size", "256", "--hash", "sha256:16"],
            4,
            None,
            line("sha256-16", b"half hashed\n"),
        )
        .with(&["--sector-size", "1024", "--skip", "6"]),
        case(
            "xts-plain-large-sectors",
            &["--cipher", "aes-xts-plain", "--key-size", "512", "--hash", "ripemd160"],
            16,
            None,
            line("large", b"large sectors\n"),
        )
        .with(&["--sector-size", "4096", "--iv-large-sectors", "--skip", "24"]),
        case(
            "xts-2k-keyfile-size",
            &[&xts[..], &["--key-size", "256", "--hash", "sha256", "--sector-size", "2048"]]
                .concat(),
            0,
            None,
            line("2k", b"12345\n"),
        )
        .with(&["--keyfile-size", "5"]),
        // A key whose two halves are the same: IEEE 1619-2018 forbids it
        // and Rampart never makes one, but dm-crypt accepts it outside
        // FIPS mode, so data under it must read and write alike.
        case(
            "xts-identical-halves",
            &[&xts[..], &["--key-size", "512"]].concat(),
            0,
            Some(twin_halves),
            line("twin", b""),
        ),
    ]
}

impl Case {
    /// The value of flag `name`, if the case gives it.
    fn flag(&self, name: &str) -> Option<&str> {
        let at = self.flags.iter().position(|f| f == name)?;
        self.flags.get(at + 1).map(String::as_str)
    }

    /// Checks the kernel's table of the case's mapping ("0 SECTORS crypt
    /// CIPHER KEY IV_OFFSET DEVICE OFFSET [N OPTIONS]") against the flags,
    /// so that each case proves the option it names reached dm-crypt.
    fn check_table(&self, table: &str) {
        let name = self.name;
        let fields: Vec<&str> = table.split_whitespace().collect();
        assert!(fields.len() >= 8 && fields[2] == "crypt", "{name}: not a crypt table: {table}");
        let cipher = self.flag("--cipher").unwrap_or("aes-cbc-essiv:sha256");
        assert_eq!(fields[3], cipher, "{name}: the kernel's cipher ({table})");
        let bits: usize = self.flag("--key-size").unwrap_or("256").parse().unwrap();
        assert_eq!(fields[4].len() * 4, bits, "{name}: the kernel's key size ({table})");
        assert_eq!(fields[5], self.flag("--skip").unwrap_or("0"), "{name}: IV offset ({table})");
        assert_eq!(fields[7], self.offset.to_string(), "{name}: data offset ({table})");
        let sector = fields.iter().find_map(|f| f.strip_prefix("sector_size:")).unwrap_or("512");
        assert_eq!(sector, self.flag("--sector-size").unwrap_or("512"), "{name}: ({table})");
        assert_eq!(
            fields.contains(&"iv_large_sectors"),
            self.flags.iter().any(|f| f == "--iv-large-sectors"),
            "{name}: iv_large_sectors ({table})"
        );
    }

    /// The case with `more` flags.
    fn with(mut self, more: &[&str]) -> Self {
        self.flags.extend(more.iter().map(|s| (*s).to_owned()));
        self
    }
}

#[test]
fn kernel_plain_mode_and_rampart_read_each_others_data() {
    require(&["cryptsetup", "nbdcopy"]);
    let dir = TempDir::new("kernel-plain");
    let cases = cases(&dir);

    // The kernel writes `NAME.kernel.img`; Rampart imports `NAME.rampart.img`
    // and writes `NAME.served.img` through `rampart serve`.
    for (i, case) in cases.iter().enumerate() {
        let size = case.offset * 512 + DATA;
        let data = dir.file(&format!("{}.data", case.name), &random_bytes(i as u64, DATA as usize));
        for side in ["kernel", "rampart", "served"] {
            let vol = case.volume(&dir, side);
            std::fs::write(&vol, random_bytes(1000 + i as u64, size as usize)).unwrap();
        }
        let mut args = vec!["import".to_owned(), p(&case.volume(&dir, "rampart")).to_owned()];
        args.push(p(&data).to_owned());
        args.extend(case.rampart_args("--data-offset"));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        ok(
            &format!("{}: rampart import", case.name),
            rampart_in(&args, &std::fs::read(&case.stdin).unwrap()),
        );
        let socket = dir.join(&format!("{}.write.sock", case.name));
        let mut args =
            vec![p(&case.volume(&dir, "served")).to_owned(), "--socket".into(), p(&socket).into()];
        args.extend(case.rampart_args("--offset"));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let input = std::fs::File::open(&case.stdin).unwrap();
        let log = dir.join(&format!("{}.write.log", case.name));
        let mut serve = Serve::start_with_stdin(&args, log, 1, input.into());
        ok(
            &format!("{}: nbdcopy into rampart serve", case.name),
            run("nbdcopy", &[p(&data), &unix_uri(&socket, "")]),
        );
        serve.stop();
    }

    let mut script = String::from(
        r#"
mkdir -p res
# open NAME.SIDE VOLUME STDIN FLAGS...: the mapping NAME_SIDE, or a note why not
open() {
  m=$1; vol=$2; input=$3; shift 3
  loop=$(losetup -f --show "$vol")
  echo $loop > res/$m.loop
  cryptsetup open --type plain -q --disable-keyring "$@" $loop $(echo $m | tr . _) <"$input" \
    >res/$m.open 2>&1 || { echo failed >>res/$m.open; return 1; }
  dmsetup table --showkeys $(echo $m | tr . _) >res/$m.table
}
close() {
  cryptsetup close $(echo $1 | tr . _)
  losetup -d $(cat res/$1.loop)
}
"#,
    );
    for case in &cases {
        let name = case.name;
        let flags = case.cryptsetup_args();
        let stdin = p(&case.stdin);
        let kernel = case.volume(&dir, "kernel").display().to_string();
        let data = p(&dir.join(&format!("{name}.data"))).to_owned();
        let m = name.replace('-', "_");
        script.push_str(&format!(
            "if open {m}.kernel {kernel} {stdin} {flags}; then\n  \
               dd if={data} of=/dev/mapper/{m}_kernel bs=1M oflag=direct conv=fsync 2>res/{m}.dd\n  \
               close {m}.kernel\nfi\n",
        ));
        for side in ["rampart", "served"] {
            let vol = case.volume(&dir, side).display().to_string();
            let read = dir.join(&format!("{name}.{side}.read")).display().to_string();
            script.push_str(&format!(
                "if open {m}.{side} {vol} {stdin} {flags}; then\n  \
                   blockdev --getsize64 /dev/mapper/{m}_{side} >res/{m}.{side}.size\n  \
                   dd if=/dev/mapper/{m}_{side} of={read} bs=1M iflag=direct 2>res/{m}.{side}.dd\n  \
                   close {m}.{side}\nfi\n",
            ));
        }
    }
    script.push_str("sync\ndmsetup ls >res/dmsetup-ls 2>&1\n");
    let guest = run_in_kernel(&dir, &script, &[], Duration::from_secs(900));
    guest.assert_ok("cryptsetup open --type plain");

    for (i, case) in cases.iter().enumerate() {
        let name = case.name;
        let key = name.replace('-', "_");
        let note = |side: &str| {
            std::fs::read_to_string(dir.join(&format!("res/{key}.{side}.open")))
                .unwrap_or_else(|_| "(never opened)".into())
        };
        let data = random_bytes(i as u64, DATA as usize);
        let stdin = std::fs::read(&case.stdin).unwrap();

        // Rampart's import and writes through serve, read by the kernel,
        // whose mapping has the size Rampart's plaintext has.
        for (side, how) in [("rampart", "rampart import"), ("served", "rampart serve")] {
            let read = std::fs::read(dir.join(&format!("{name}.{side}.read")))
                .unwrap_or_else(|_| panic!("{name}: the kernel could not open it: {}", note(side)));
            assert_same(&format!("{name}: the kernel reads what {how} wrote"), &read, &data);
            let size =
                std::fs::read_to_string(dir.join(&format!("res/{key}.{side}.size"))).unwrap();
            assert_eq!(size.trim(), DATA.to_string(), "{name}: the kernel's mapping size");
        }

        // The kernel's writes, read by rampart export and rampart serve.
        assert!(
            !note("kernel").contains("failed"),
            "{name}: cryptsetup open failed: {}",
            note("kernel")
        );
        case.check_table(
            &std::fs::read_to_string(dir.join(&format!("res/{key}.kernel.table"))).unwrap(),
        );
        let kernel_vol = case.volume(&dir, "kernel");
        let out = dir.join(&format!("{name}.exported"));
        let mut args = vec!["export".to_owned(), p(&kernel_vol).to_owned(), p(&out).to_owned()];
        args.extend(case.rampart_args("--data-offset"));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        ok(&format!("{name}: rampart export"), rampart_in(&args, &stdin));
        assert_same(
            &format!("{name}: rampart export reads what the kernel wrote"),
            &std::fs::read(&out).unwrap(),
            &data,
        );

        let socket = dir.join(&format!("{name}.sock"));
        let mut args =
            vec![p(&kernel_vol).to_owned(), "--socket".to_owned(), p(&socket).to_owned()];
        args.extend(case.rampart_args("--offset"));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let input = std::fs::File::open(&case.stdin).unwrap();
        let mut serve =
            Serve::start_with_stdin(&args, dir.join(&format!("{name}.serve.log")), 1, input.into());
        let served = dir.join(&format!("{name}.served"));
        ok(
            &format!("{name}: nbdcopy from rampart serve"),
            run("nbdcopy", &[&unix_uri(&socket, ""), p(&served)]),
        );
        serve.stop();
        assert_same(
            &format!("{name}: rampart serve reads what the kernel wrote"),
            &std::fs::read(&served).unwrap(),
            &data,
        );
    }
    let left = std::fs::read_to_string(dir.join("res/dmsetup-ls")).unwrap();
    assert!(left.contains("No devices found"), "mappings left open: {left}");
}
