#!/bin/sh
# Regenerates the seed corpora of the file_format and openssl_enc fuzz
# targets (corpus/file_format/, corpus/openssl_enc/): Rampart files written
# by `rampart encrypt` (RAMPART, default target/release/rampart) and
# `openssl enc` files, all under the key and passphrase the targets try
# (a raw key of 32 bytes 0x11; the passphrase "rampart-fuzz" with Argon2id
# at 4 passes, 32 KiB, 1 lane). Each seed is the target's selector byte,
# then the file.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
rampart=${RAMPART:-$here/../target/release/rampart}
files="$here/corpus/file_format"
enc="$here/corpus/openssl_enc"
mkdir -p "$files" "$enc"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
printf 'rampart-fuzz' > pass
printf '\021%.0s' $(seq 32) > raw.key
printf 'a short file\n' > short
head -c 9000 /dev/zero | tr '\0' 'x' > long
: > empty
cheap="--pbkdf argon2id --pbkdf-force-iterations 4 --pbkdf-memory 32 --pbkdf-parallel 1"
seed() { # seed DIR NAME SELECTOR FILE
    { printf "\\$(printf %03o "$3")"; cat "$4"; } > "$1/$2"
}
"$rampart" encrypt --raw-key-file raw.key --segment-size 4K -o out short
seed "$files" raw-key-short 0 out
"$rampart" encrypt --raw-key-file raw.key --segment-size 4K -o out long
seed "$files" raw-key-three-segments 0 out
"$rampart" encrypt --raw-key-file raw.key --segment-size 4K -o out empty
seed "$files" raw-key-empty 0 out
# shellcheck disable=SC2086
"$rampart" encrypt --key-file pass $cheap --raw-key-file raw.key --segment-size 4K -o out short
seed "$files" passphrase-and-raw-key 0 out
# The round-trip mode: segment size, decoy stanzas, order, change, range, plaintext.
printf '\001\000\100\002\003\010decoy-01\200\004rawk\000\000\001\000\000\004\000\020plaintext of the round trip' \
    > "$files/round-trip-two-decoys"
printf '\001\003\377\000\000\001\377\377\000\007\377\377Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod' \
    > "$files/round-trip-truncated"

i=0
for spec in "0 aes128cbc-pbkdf2 -aes-128-cbc -pbkdf2 -iter 1 -md sha256" \
            "1 aes256cbc-pbkdf2 -aes-256-cbc -pbkdf2 -iter 1 -md sha256" \
            "2 aes128ctr-pbkdf2 -aes-128-ctr -pbkdf2 -iter 1 -md sha256" \
            "3 aes256ctr-pbkdf2 -aes-256-ctr -pbkdf2 -iter 1 -md sha256" \
            "5 aes256cbc-md5 -aes-256-cbc -md md5" "10 aes128ctr-sha256 -aes-128-ctr -md sha256" \
            "9 aes256cbc-sha256 -aes-256-cbc -md sha256"; do
    # shellcheck disable=SC2086
    set -- $spec
    selector=$1 name=$2
    shift 2
    for input in short long empty; do
        [ "$input" = long ] && [ "$i" -gt 1 ] && continue
        # The legacy key derivation draws a warning on standard error.
        openssl enc -e "$@" -pass pass:rampart-fuzz -in "$input" -out out 2>/dev/null
        seed "$enc" "$name-$input" "$selector" out
    done
    i=$((i + 1))
done
