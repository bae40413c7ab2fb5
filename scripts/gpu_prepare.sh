#!/usr/bin/env bash
# Run here, in the checkout, before a GPU run: copies the .deb files that scripts/gpu_packages.txt
# names into build-gpu-deps/debs (ignored by /build*/ in .gitignore), with a SHA256SUMS, so that
# a call to the lent GPU machine can carry them (that machine has no apt and no network).
#   scripts/gpu_prepare.sh [DEB_DIR...]
# Each package is looked up, in order, in the DEB_DIRs given and in apt's cache
# (/var/cache/apt/archives); a package found nowhere is fetched with `apt-get download` (the
# Debian 12 archive this machine uses).
# Afterwards the run carries build-gpu-deps (about 21 MB) and, for the end-to-end run with
# Qwen2.5's vocabulary, tests/fixtures/hf (scripts/fetch_tokenizers.py; 7 MB):
#   run(command="OUT=$OUT bash bench/gpu_session.sh", carry=["build-gpu-deps", "tests/fixtures/hf"])
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="$ROOT/build-gpu-deps/debs"
DIRS=("$@" /var/cache/apt/archives)
# Only the .deb files: a prefix unpacked from them (build-gpu-prefix/) stays out of what is carried.
rm -rf "$ROOT/build-gpu-deps"
mkdir -p "$DEST"
missing=()
while read -r pkg _; do
  case "$pkg" in ''|'#'*) continue ;; esac
  found=""
  for d in "${DIRS[@]}"; do
    [ -d "$d" ] || continue
    # The newest version there (sort -V); the name ends at the first '_' of a .deb file name.
    f=$(find "$d" -maxdepth 1 \( -name "${pkg}_*_amd64.deb" -o -name "${pkg}_*_all.deb" \) |
        sort -V | tail -1)
    if [ -n "$f" ]; then found="$f"; break; fi
  done
  if [ -n "$found" ]; then
    cp "$found" "$DEST/"
  else
    (cd "$DEST" && apt-get download "$pkg" >/dev/null 2>&1) || missing+=("$pkg")
  fi
done <"$ROOT/scripts/gpu_packages.txt"
if [ ${#missing[@]} -gt 0 ]; then
  echo "gpu_prepare: no .deb for: ${missing[*]} (give a directory that has them)" >&2
  exit 1
fi
(cd "$DEST" && sha256sum -- *.deb >SHA256SUMS)
n=$(find "$DEST" -name "*.deb" | wc -l)
echo "gpu_prepare: $n packages in build-gpu-deps/debs ($(du -sh "$ROOT/build-gpu-deps" | cut -f1) to carry)"
if [ ! -f "$ROOT/tests/fixtures/hf/qwen2_5/tokenizer.json" ]; then
  echo "gpu_prepare: no tests/fixtures/hf/qwen2_5 (scripts/fetch_tokenizers.py): the end-to-end" \
       "run will use the char vocabulary"
fi
echo "carry: build-gpu-deps tests/fixtures/hf; command: OUT=\$OUT bash bench/gpu_session.sh"
