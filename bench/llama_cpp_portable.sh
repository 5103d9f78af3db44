#!/usr/bin/env bash
# llama.cpp's tools from the ROCm chroot (Debian unstable's llama.cpp-tools, scripts/rocm-env) packed
# to run on another x86-64 Linux machine, such as the device machine, which cannot install them:
# the tools, the libraries they load (ggml's CPU variants among them) and the chroot's own dynamic
# loader, which runs them against those libraries whatever the machine's C library is.
#
#   bench/llama_cpp_portable.sh OUT.tar.xz [TOOL...]   (default tools: llama-batched-bench llama-bench)
#   tar -xJf OUT.tar.xz && llama-cpp/run llama-batched-bench -m FILE ...
#
# ggml looks for its CPU variants beside the program it runs in, which is the loader here: they
# go into lib/ with it. Needs root (the chroot) and the chroot's llama.cpp-tools.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { sed -n '2,12p' "$0"; exit 2; }
out=$(realpath -m "$1")
shift
tools=("$@")
[ ${#tools[@]} -gt 0 ] || tools=(llama-batched-bench llama-bench)
root=${WICK_ROCM_ROOT:-/var/cache/wick-rocm/sid}
lib=/usr/lib/x86_64-linux-gnu
[ -x "$root/usr/bin/${tools[0]}" ] || { echo "llama_cpp_portable: no ${tools[0]} in $root (apt install llama.cpp-tools there)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
dir=$work/llama-cpp
mkdir -p "$dir/lib"
# Each tool is a small program that loads lib<tool>-impl.so from $lib/llama.
objects=()
for t in "${tools[@]}"; do
  cp -L "$root/usr/bin/$t" "$dir/"
  objects+=("/usr/bin/$t")
  if [ -e "$root$lib/llama/lib$t-impl.so" ]; then
    cp -L "$root$lib/llama/lib$t-impl.so" "$dir/lib/"
    objects+=("$lib/llama/lib$t-impl.so")
  fi
done
for so in "$root$lib"/ggml/backends0/*.so; do
  cp -L "$so" "$dir/lib/"
  objects+=("${so#"$root"}")
done
for o in "${objects[@]}"; do
  chroot "$root" ldd "$o" | awk '$3 ~ /^\// { print $3 }' | while read -r l; do cp -Ln "$root$l" "$dir/lib/"; done
done
cp -L "$root/lib64/ld-linux-x86-64.so.2" "$dir/lib/"
cat > "$dir/run" << 'EOF'
#!/bin/sh
# run TOOL ARGS...: one of the packed llama.cpp tools, through the packed loader and libraries.
here=$(dirname "$(readlink -f "$0")")
tool=$1
shift
exec "$here/lib/ld-linux-x86-64.so.2" --library-path "$here/lib" "$here/$tool" "$@"
EOF
chmod +x "$dir/run"
tar -cJf "$out" -C "$work" llama-cpp
# shellcheck disable=SC2016 # dpkg-query's format, not the shell's
echo "llama_cpp_portable: $out ($(du -h "$out" | cut -f1)): ${tools[*]} from $(chroot "$root" dpkg-query -W -f='${Version}' llama.cpp-tools 2> /dev/null || echo '?')"
