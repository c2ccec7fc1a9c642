#!/bin/sh
# Regenerates the seed corpus in corpus/luks_header/ with cryptsetup
# (tested with cryptsetup 2.6.1). Every keyslot uses the passphrase the
# fuzz target tries ("rampart-fuzz") and the smallest costs cryptsetup
# accepts, so the target's unlock path runs on the seeds.
#
# Seeds are detached headers (--header): two header copies plus a keyslots
# area shrunk with --luks2-keyslots-size, so each is 96-192 KiB (LUKS1: the
# eight fixed keyslot areas, ~520 KiB with a 128-bit key).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out="$here/corpus/luks_header"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
printf 'rampart-fuzz' > pass
printf 'rampart-fuzz-2' > pass2
truncate -s 4M data.img
fmt() { # fmt NAME ARGS...: luksFormat a detached header NAME.img
    name=$1; shift
    cryptsetup luksFormat -q --header "$name.img" --key-file pass "$@" data.img
}
pbkdf2="--pbkdf pbkdf2 --pbkdf-force-iterations 1000"
argon="--pbkdf argon2id --pbkdf-force-iterations 4 --pbkdf-memory 32 --pbkdf-parallel 1"

# LUKS2, PBKDF2-SHA256, AES-XTS with a 256-bit key.
fmt luks2-pbkdf2-xts256 --type luks2 $pbkdf2 --cipher aes-xts-plain64 --key-size 256 \
    --luks2-keyslots-size 128k
# LUKS2, Argon2id (32 KiB, 4 passes, 1 lane), AES-CBC-ESSIV with a 128-bit key,
# a label and a subsystem, 512-byte sectors.
fmt luks2-argon2id-cbc128 --type luks2 $argon --cipher aes-cbc-essiv:sha256 --key-size 128 \
    --luks2-keyslots-size 64k --label fuzz-label --subsystem fuzz-subsys --sector-size 512
# LUKS2 argon2i keyslot 0 plus a PBKDF2-SHA512 keyslot 1 (priority "prefer")
# and two tokens: an imported custom one and a luks2-keyring one.
fmt luks2-two-slots-tokens --type luks2 --pbkdf argon2i --pbkdf-force-iterations 4 \
    --pbkdf-memory 32 --pbkdf-parallel 1 --cipher aes-cbc-plain64 --key-size 128 \
    --luks2-keyslots-size 128k
cryptsetup luksAddKey -q --header luks2-two-slots-tokens.img --key-file pass \
    --new-keyfile pass2 --pbkdf pbkdf2 --hash sha512 --pbkdf-force-iterations 1000 data.img
cryptsetup config --header luks2-two-slots-tokens.img --key-slot 1 --priority prefer data.img
printf '{"type":"rampart-fuzz","keyslots":["0","1"],"note":{"a":[1,2,null]}}' > token.json
cryptsetup token import --header luks2-two-slots-tokens.img --json-file token.json data.img
cryptsetup token add --header luks2-two-slots-tokens.img --key-description fuzz:key \
    --key-slot 0 data.img
# LUKS2 with 32 KiB header copies (--luks2-metadata-size 32k), sha1 digest
# and AF hash, an attached header (data offset 192 KiB) and an argon2id slot.
truncate -s 192k attached.img
cryptsetup luksFormat -q --type luks2 --key-file pass $argon --hash sha1 \
    --cipher aes-xts-plain64 --key-size 256 --luks2-metadata-size 32k \
    --luks2-keyslots-size 128k --offset 384 attached.img
mv attached.img luks2-meta32k-attached.img
# LUKS1, PBKDF2-SHA256 with 1000 iterations, AES-CBC-ESSIV 128-bit (the
# smallest LUKS1 keyslot areas).
fmt luks1-pbkdf2-cbc128 --type luks1 --pbkdf-force-iterations 1000 \
    --cipher aes-cbc-essiv:sha256 --key-size 128
# LUKS1 with AES-CBC-plain64 128-bit and SHA1 (AES-XTS needs 256+ bits,
# which makes the eight keyslot areas 1 MiB).
fmt luks1-cbcplain-sha1 --type luks1 --pbkdf-force-iterations 1000 --hash sha1 \
    --cipher aes-cbc-plain64 --key-size 128
# LUKS2 reencryption metadata (luks2/reencrypt.rs): a reencryption, an
# encryption and a decryption initialized (--init-only; the reencrypt
# keyslot needs a 512 KiB keyslots area), and a reencryption killed
# half-way, its data segments split around the hotzone.
offline="--force-offline-reencrypt -q --key-file pass"
fmt luks2-reencrypt-init --type luks2 $pbkdf2 --cipher aes-xts-plain64 --key-size 256 \
    --luks2-keyslots-size 512k
cryptsetup reencrypt --init-only $offline --header luks2-reencrypt-init.img $pbkdf2 \
    --resilience journal data.img
cryptsetup reencrypt --encrypt --init-only $offline --header luks2-encrypt-init.img $pbkdf2 \
    --cipher aes-xts-plain64 --key-size 256 --luks2-keyslots-size 512k data.img
fmt luks2-decrypt-init --type luks2 $pbkdf2 --cipher aes-xts-plain64 --key-size 256 \
    --luks2-keyslots-size 512k
cryptsetup reencrypt --decrypt --init-only $offline --header luks2-decrypt-init.img data.img
truncate -s 1G big.data
cryptsetup luksFormat -q --type luks2 --header luks2-reencrypt-interrupted.img --key-file pass \
    $pbkdf2 --cipher aes-xts-plain64 --key-size 256 --luks2-keyslots-size 512k big.data
cryptsetup reencrypt $offline --header luks2-reencrypt-interrupted.img $pbkdf2 \
    --resilience checksum --hotzone-size 4M big.data &
sleep 1
kill -9 $!
wait $! || true
cryptsetup luksDump luks2-reencrypt-interrupted.img | grep -q in-reencryption || {
    echo "the reencryption was not caught half-way" >&2
    exit 1
}

mkdir -p "$out"
for f in *.img; do
    [ "$f" = data.img ] && continue
    cp "$f" "$out/${f%.img}"
done
ls -l "$out"
