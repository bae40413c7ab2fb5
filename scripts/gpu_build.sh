#!/usr/bin/env bash
# Run on the lent GPU machine, from the checkout (the image has python3 with PyTorch + CUDA,
# nvcc, cmake, ninja; no apt, no network): unpacks the .deb files scripts/gpu_prepare.sh put in
# build-gpu-deps/debs into a prefix, build-gpu-prefix/ (never into /), configures against that
# Python's libtorch and builds the targets into build-gpu/.
#   scripts/gpu_build.sh [TARGET...]     (default: asyncrl_cli bench_device_throughput)
# Env: BUILD_DIR (default build-gpu), PYTHON (python3), LOG_DIR (where configure.log and
# build.log go; default $OUT when set, else /tmp), BUILD_TIMEOUT (seconds for the compile,
# default 300), CMAKE_EXTRA (more cmake arguments).
# Prints one line per phase; exit status: the first phase that failed. Afterwards the binaries
# find the prefix's libraries through their rpath; `source <(scripts/gpu_build.sh --env)` exports
# LD_LIBRARY_PATH for anything else.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEPS="$ROOT/build-gpu-deps"
# The prefix sits outside build-gpu-deps, so that carrying that folder never carries it too.
P="${DEPS_PREFIX:-$ROOT/build-gpu-prefix}"
L="$P/usr/lib/x86_64-linux-gnu"
if [ "${1:-}" = "--env" ]; then
  echo "export LD_LIBRARY_PATH=$L\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
  exit 0
fi
BUILD="${BUILD_DIR:-$ROOT/build-gpu}"
PY="${PYTHON:-python3}"
LOG="${LOG_DIR:-${OUT:-/tmp}}"
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(asyncrl_cli bench_device_throughput)
mkdir -p "$LOG"
t0=$(date +%s)
say() { echo "[$(( $(date +%s) - t0 ))s] gpu_build: $*"; }

# 1. The prefix: every .deb unpacked into it (dpkg-deb when there, else ar + tar), once per set
#    of packages (the stamp is their SHA256SUMS).
[ -f "$DEPS/debs/SHA256SUMS" ] || { say "no build-gpu-deps/debs: run scripts/gpu_prepare.sh here first"; exit 1; }
if ! cmp -s "$DEPS/debs/SHA256SUMS" "$P/.stamp" 2>/dev/null; then
  (cd "$DEPS/debs" && sha256sum --quiet -c SHA256SUMS) || { say "a .deb does not match SHA256SUMS"; exit 1; }
  rm -rf "$P"
  mkdir -p "$P"
  for deb in "$DEPS"/debs/*.deb; do
    if command -v dpkg-deb >/dev/null; then
      dpkg-deb -x "$deb" "$P" || { say "cannot unpack $deb"; exit 1; }
    else
      member=$(ar t "$deb" | grep '^data\.tar')
      ar p "$deb" "$member" | tar -x -a -f - -C "$P" 2>/dev/null ||
        ar p "$deb" "$member" | tar -xJ -C "$P" || { say "cannot unpack $deb"; exit 1; }
    fi
  done
  # The .pc files name /usr: point them at the prefix.
  for pc in "$L"/pkgconfig/*.pc "$P"/usr/share/pkgconfig/*.pc; do
    [ -f "$pc" ] || continue
    sed -i -E -e "s#^([a-z_]+)=/usr#\\1=$P/usr#" -e "s#-I/usr/#-I$P/usr/#g" -e "s#-L/usr/#-L$P/usr/#g" "$pc"
  done
  # A pkg-config that sees the prefix only: a module missing there fails here, not at link time.
  mkdir -p "$P/bin"
  cat >"$P/bin/pkg-config" <<EOF
#!/bin/sh
export PKG_CONFIG_LIBDIR="$L/pkgconfig:$P/usr/share/pkgconfig"
export LD_LIBRARY_PATH="$L\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
exec "$P/usr/bin/pkgconf" "\$@"
EOF
  chmod +x "$P/bin/pkg-config"
  cp "$DEPS/debs/SHA256SUMS" "$P/.stamp"
fi
say "prefix ok ($(find "$DEPS/debs" -name "*.deb" | wc -l) packages)"

# 2. Configure against the image's libtorch.
TORCH_CMAKE="$("$PY" -c 'import torch; print(torch.utils.cmake_prefix_path)')" ||
  { say "$PY has no torch"; exit 1; }
# Caffe2's CMake config asks for the CUDA architectures; the lent GPUs are Hopper (sm_90).
export TORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST:-9.0}"
GEN="Unix Makefiles"
command -v ninja >/dev/null && GEN=Ninja
# --no-as-needed: Ubuntu's linker drops a library no symbol is taken from, and nothing here
# calls into libtorch_cuda.so directly; without it the binaries would see no CUDA device.
# shellcheck disable=SC2086 # CMAKE_EXTRA holds several arguments
timeout 120 cmake -S "$ROOT" -B "$BUILD" -G "$GEN" -DCMAKE_BUILD_TYPE=Release \
  -DASYNCRL_BUILD_TESTS=OFF -DCMAKE_PREFIX_PATH="$P/usr;$TORCH_CMAKE" -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DPKG_CONFIG_EXECUTABLE="$P/bin/pkg-config" \
  -DCMAKE_EXE_LINKER_FLAGS="-Wl,--no-as-needed -L$L -Wl,-rpath-link,$L -Wl,-rpath,$L" \
  -DCMAKE_SHARED_LINKER_FLAGS="-L$L -Wl,-rpath-link,$L -Wl,-rpath,$L" \
  -DCMAKE_MODULE_LINKER_FLAGS="-L$L -Wl,-rpath-link,$L -Wl,-rpath,$L" \
  ${CMAKE_EXTRA:-} >"$LOG/configure.log" 2>&1
rc=$?
say "configure: rc=$rc, $(grep -m1 -o 'asyncrl: libtorch.*' "$LOG/configure.log" || echo 'see configure.log')"
[ $rc -eq 0 ] || { grep -m10 -i 'error' "$LOG/configure.log"; exit 2; }

# 3. Build.
timeout "${BUILD_TIMEOUT:-300}" cmake --build "$BUILD" -j "$(nproc)" --target "${TARGETS[@]}" \
  >"$LOG/build.log" 2>&1
rc=$?
say "build ${TARGETS[*]}: rc=$rc, $(grep -c 'error:' "$LOG/build.log") errors"
[ $rc -eq 0 ] || { grep -m15 'error:' "$LOG/build.log"; exit 3; }
