#!/usr/bin/env bash
# Builds CAF 0.17.6 (the upstream tarball of Debian's source package for libcaf-dev) with
# -fsanitize=thread, for scripts/sanitize.sh thread. ThreadSanitizer only sees synchronization
# in code it instrumented: with Debian's uninstrumented libcaf_core, every message handed from
# one actor's thread to another's (the mailbox's atomics live in the library) would be
# reported as a data race.
#   scripts/tsan_caf.sh [PREFIX]   (default build-tsan-caf/install; prints PREFIX when done)
# About 15 minutes on 2 cores; nothing is rebuilt when PREFIX already has the libraries.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WORK="$ROOT/build-tsan-caf"
PREFIX="${1:-$WORK/install}"
if [ -f "$PREFIX/lib/libcaf_core.so" ] && [ -f "$PREFIX/lib/libcaf_openssl.so" ]; then
  echo "$PREFIX"
  exit 0
fi

POOL=http://deb.debian.org/debian/pool/main/a/actor-framework
DSC=actor-framework_0.17.6-2.1.dsc
ORIG=actor-framework_0.17.6.orig.tar.gz
mkdir -p "$WORK/dl"
cd "$WORK/dl"
# The upstream tarball of Debian's source package, checked against the SHA-256 its .dsc lists.
# (The package's debian/ patches are not on the mirror any more; they touch packaging only.)
curl -fsSLO "$POOL/$DSC"
[ -f "$ORIG" ] || curl -fsSLO "$POOL/$ORIG"
want=$(sed -n '/^Checksums-Sha256:/,/^[A-Z]/p' "$DSC" | awk -v f="$ORIG" '$3 == f {print $1}')
have=$(sha256sum "$ORIG" | awk '{print $1}')
if [ -z "$want" ] || [ "$want" != "$have" ]; then
  echo "tsan_caf: $ORIG has SHA-256 $have, the .dsc says '$want'" >&2
  exit 1
fi
rm -rf "$WORK/src"
mkdir -p "$WORK/src"
tar -xzf "$ORIG" -C "$WORK/src" --strip-components=1
# What Debian's patches do for gcc 11 and later: a header that uses std::numeric_limits
# without including <limits> (installed, so our own sources compile against it too).
sed -i 's|#pragma once|#pragma once\n#include <limits>|' \
  "$WORK/src/libcaf_io/caf/io/network/receive_buffer.hpp"

mkdir -p "$WORK/build"
cd "$WORK/build"
cmake "$WORK/src" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS="-fsanitize=thread -fno-omit-frame-pointer" \
  -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread -DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=thread \
  -DCAF_NO_EXAMPLES=yes -DCAF_NO_UNIT_TESTS=yes -DCAF_NO_TOOLS=yes -DCAF_NO_PYTHON=yes \
  -DCAF_NO_OPENCL=yes -DCAF_NO_COMPILER_CHECK=yes -DCMAKE_INSTALL_PREFIX="$PREFIX" \
  -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >/dev/null
make -j "$(nproc)" >/dev/null
make install >/dev/null
echo "$PREFIX"
