#!/bin/bash
# llama.cpp, the CPU-speed peer of bench/run: built once, CPU only, from the source the npm
# package node-llama-cpp ships (package/llama/gitRelease.bundle, a git bundle of llama.cpp
# release v0.5.0), cached under BUILD_DIR/llama.cpp/, one build per CPU: GGML_NATIVE compiles
# for the CPU at hand, and a build made on another CPU (sessions and CI differ) would measure
# a peer tuned for the wrong machine, or stop on an illegal instruction.
#
#   llama_cpp.sh build BUILD_DIR            -> prints the llama-bench path
#   llama_cpp.sh gguf BUILD_DIR CHECKPOINT OUT.gguf [F32|BF16]
#   llama_cpp.sh quantize BUILD_DIR IN.gguf OUT.gguf Q8_0|Q4_0
#   llama_cpp.sh bench BUILD_DIR MODEL.gguf THREADS PROMPT NEW REPS OUT.json
#
# `quantize` runs `llama-quantize IN OUT TYPE` with its defaults, as llama.cpp users make their
# Q8_0 / Q4_0 files (token_embd takes TYPE; output.weight stays Q8_0 under Q8_0 and becomes
# Q6_K under Q4_0). `bench` runs `llama-bench -t THREADS -p PROMPT -n NEW -r REPS -o json` and
# writes its JSON.
set -euo pipefail

VERSION=3.22.1  # node-llama-cpp; its gitRelease.bundle is llama.cpp v0.5.0
cmd=${1:?usage: llama_cpp.sh build|gguf|quantize|bench BUILD_DIR ...}
build_dir=${2:?BUILD_DIR}
root="$build_dir/llama.cpp"

# The build directory is named after the CPU's model and flags (and the arch flags below), so
# each CPU gets its own.
cpu_build_dir() {
  local key
  key=$( (grep -m1 '^model name' /proc/cpuinfo; grep -m1 '^flags' /proc/cpuinfo; arch_flags
    echo "$ARCH_KEY") |
    sha256sum | cut -c1-12)
  echo "$root/build-$key"
}

# GGML_NATIVE (-march=native) on every CPU, AMX ones included: there llama.cpp keeps Q4_0 and
# Q8_0 weights in its AMX layout and multiplies prompt chunks on the tiles (and decode rows on
# VNNI over that layout), 2.1-2.4x its AVX-512 prefill on the Emerald Rapids VM of the
# forty-sixth session (bench/analysis.md). `ARCH_KEY` names the peer's build in the cache key,
# so a build made before a change here is not reused.
ARCH_KEY="native, amx tile configuration kept"
arch_flags() {  # one cmake argument per line
  echo -DGGML_NATIVE=ON
}

# Debian 12's GCC 12 drops the stores that fill ggml's tile configuration before `ldtilecfg`
# (it does not see the instruction read the struct), so v0.5.0's AMX kernels ran with no tiles
# configured and died with SIGILL on their first tile instruction (which is why earlier
# sessions built this peer without AMX). An empty asm that reads the struct keeps the stores,
# as placer's own model/amx_tiles.cc does. The source is otherwise llama.cpp's, unchanged.
keep_tile_configuration() {
  local file="$root/src/ggml/src/ggml-cpu/amx/mmq.cpp" marker='placer: keep the tile configuration'
  grep -q "$marker" "$file" && return
  grep -q '^    _tile_loadconfig(&tc);$' "$file" ||
    { echo "llama_cpp.sh: no '_tile_loadconfig(&tc);' line in $file to patch" >&2; exit 1; }
  sed -i '/^    _tile_loadconfig(&tc);$/i \    asm volatile("" : : "m"(tc) : "memory");  // '"$marker"' (GCC 12)' "$file"
  grep -q "$marker" "$file"
}

fetch_source() {
  if [[ -f "$root/src/CMakeLists.txt" ]]; then return; fi
  mkdir -p "$root"
  (cd "$root" && npm pack "node-llama-cpp@$VERSION" --silent >/dev/null)
  tar -xzf "$root/node-llama-cpp-$VERSION.tgz" -C "$root" package/llama/gitRelease.bundle
  rm -rf "$root/src"
  git -c advice.detachedHead=false clone --quiet "$root/package/llama/gitRelease.bundle" "$root/src"
}

build() {
  fetch_source
  keep_tile_configuration
  local out
  out=$(cpu_build_dir)
  if [[ ! -x "$out/bin/llama-bench" ]]; then
    local flags
    mapfile -t flags < <(arch_flags)
    if command -v ccache >/dev/null; then  # a rebuild (a new cache key) recompiles what changed
      flags+=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
    fi
    cmake -S "$root/src" -B "$out" -DCMAKE_BUILD_TYPE=Release "${flags[@]}" \
      -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF -DLLAMA_CURL=OFF \
      -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF >"$out.configure.log" 2>&1 ||
      { tail -20 "$out.configure.log" >&2; exit 1; }
    cmake --build "$out" -j"${JOBS:-2}" --target llama-bench llama-quantize \
      >"$out.build.log" 2>&1 || { tail -30 "$out.build.log" >&2; exit 1; }
  fi
  echo "$out/bin/llama-bench"
}

case "$cmd" in
  build) build ;;
  gguf)
    fetch_source
    checkpoint=${3:?CHECKPOINT}; out=${4:?OUT.gguf}; dtype=${5:-}
    here=$(dirname "$0")
    /usr/bin/python3 "$here/write_gguf.py" "$checkpoint" "$out" --gguf-py "$root/src/gguf-py" \
      ${dtype:+--dtype "$dtype"}
    ;;
  quantize)
    bench=$(build)
    in=${3:?IN.gguf}; out=${4:?OUT.gguf}; type=${5:?Q8_0|Q4_0}
    case "$type" in Q8_0|Q4_0) ;; *) echo "llama_cpp.sh quantize: type '$type' is not Q8_0 or Q4_0" >&2; exit 2 ;; esac
    # Written under a temporary name and renamed, so a stopped run leaves no partial file
    # that a later run would take for a finished one.
    "$(dirname "$bench")/llama-quantize" "$in" "$out.partial" "$type" "${JOBS:-2}" \
      >"$out.log" 2>&1 || { tail -20 "$out.log" >&2; rm -f "$out.partial"; exit 1; }
    mv "$out.partial" "$out"
    ;;
  bench)
    bench=$(build)
    model=${3:?MODEL.gguf}; threads=${4:?THREADS}; prompt=${5:?PROMPT}; new=${6:?NEW}
    reps=${7:?REPS}; out=${8:?OUT.json}
    "$bench" -m "$model" -t "$threads" -p "$prompt" -n "$new" -r "$reps" -o json >"$out"
    ;;
  *) echo "llama_cpp.sh: unknown command '$cmd' (build, gguf, quantize, bench)" >&2; exit 2 ;;
esac
