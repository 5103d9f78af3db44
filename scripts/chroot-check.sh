# Sourced by the external checks (scripts/quant-check, scripts/model-check): they run a program
# built here against tools of Debian unstable in the ROCm chroot (scripts/rocm-env). Callers set
# `check` (their name, for messages) and `pkgs` (the chroot packages they need), then call:
#   chroot_ready             the chroot made (with WICK_CHECK_SETUP=1 or WICK_QUANT_CHECK_SETUP=1)
#                            and `pkgs` installed there, else `<check>: skipped: <reason>`, exit 77
#   build_path               $build: the build directory (WICK_BUILD_DIR, default build), checked
#                            to be inside what the chroot sees
#   build_dir                build_path, and the directory configured with tests
#   use_libs PROGRAM         the directories outside the system's that PROGRAM's libraries come
#                            from (CUDA's runtime in a GPU build) mounted read-only in the chroot
#                            by each later `scripts/rocm-env run` (WICK_ROCM_LIBS); system
#                            libraries the chroot lacks copied into $build/chroot-libs and put
#                            on LD_LIBRARY_PATH
root=${WICK_ROCM_ROOT:-/var/cache/wick-rocm/sid}

skip() {
  echo "$check: skipped: $*"
  exit 77
}

chroot_ready() {
  [ "$(id -u)" -eq 0 ] || skip "needs root (the chroot's setup, chroot and mount)"
  if [ ! -f "$root/.wick-ready" ] && [ "${WICK_CHECK_SETUP:-${WICK_QUANT_CHECK_SETUP:-0}}" != 1 ]; then
    skip "the ROCm chroot ($root) is not made; WICK_CHECK_SETUP=1 makes it (a few minutes)"
  fi
  scripts/rocm-env setup > /dev/null || skip "the ROCm chroot ($root) cannot be made (debootstrap or network failed)"
  local installed
  installed=$(scripts/rocm-env run dpkg-query -W -f='${Status}\n' "${pkgs[@]}" 2> /dev/null | grep -c "install ok installed" || true)
  if [ "$installed" -ne ${#pkgs[@]} ]; then
    install() { scripts/rocm-env run env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${pkgs[@]}" > /dev/null; }
    install || { scripts/rocm-env run apt-get update -qq && install; } ||
      skip "${pkgs[*]} cannot be installed in the chroot (no network?)"
  fi
}

# The build directory's path in $build, checked to be one the chroot sees; build_dir also
# configures it where it is not yet configured.
build_path() {
  build=$(realpath -m "${WICK_BUILD_DIR:-build}")
  # scripts/rocm-env mounts this checkout's parent directory and nothing else; a checkout directly
  # under / is mounted alone.
  local seen
  seen=$(dirname "$(pwd -P)")
  [ "$seen" = / ] && seen=$(pwd -P)
  case "$build/" in
    "$seen"/*) ;;
    *)
      echo "$check: $build is outside $seen, which the chroot does not see" >&2
      exit 1
      ;;
  esac
}

build_dir() {
  build_path
  if [ ! -f "$build/CMakeCache.txt" ]; then
    ./scripts/setup
    cmake -S . -B "$build" -G Ninja -DWICK_WERROR="${WICK_WERROR:-OFF}" -DWICK_BUILD_TESTS=ON > /dev/null
  elif grep -q "^WICK_BUILD_TESTS:BOOL=OFF" "$build/CMakeCache.txt"; then
    # The checks' programs may be test targets: `scripts/parity` leaves WICK_BUILD_TESTS=OFF.
    cmake -S . -B "$build" -DWICK_BUILD_TESTS=ON > /dev/null
  fi
}

use_libs() {
  local lib so dir dirs=()
  for lib in $(ldd "$1" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }'); do
    dir=$(dirname "$lib")
    so=$(basename "$lib")
    case "$dir" in
      /lib* | /usr/lib*)
        # A system library the chroot lacks (cpp-httplib 0.11, which Debian unstable ships under
        # another soname): a copy in $build/chroot-libs, found through LD_LIBRARY_PATH, which the
        # chroot keeps.
        if [ ! -e "$root/usr/lib/x86_64-linux-gnu/$so" ] && [ ! -e "$root/usr/lib/$so" ]; then
          mkdir -p "$build/chroot-libs"
          cp -L "$lib" "$build/chroot-libs/$so"
          export LD_LIBRARY_PATH="$build/chroot-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
        fi
        ;;
      *) dirs+=("$dir") ;;
    esac
  done
  WICK_ROCM_LIBS=$(printf '%s\n' "${dirs[@]}" | sort -u | paste -sd:)
  export WICK_ROCM_LIBS
}
