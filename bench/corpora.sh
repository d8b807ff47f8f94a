#!/usr/bin/env bash
# Fetches pinned, real-world benchmark corpora from package registries and
# generates the synthetic repository. Nothing is written inside the Canopy
# checkout: everything goes under $CANOPY_BENCH_CACHE (default
# ~/.cache/canopy-bench). Prints one "name<TAB>path" line per corpus on stdout.
#
# Usage: bench/corpora.sh [--force] [--no-git] [NAME...]
#   NAME: tokio django ts synth   (default: all four)
#   --force    re-create corpora that already exist
#   --no-git   leave the corpora as plain directories (canopy then walks them
#              honouring .gitignore instead of using `git ls-files`)
#
# Corpora (versions are pinned; change them here only on purpose):
#   tokio   crates.io: the tokio workspace crates as published
#           (tokio, tokio-util, tokio-stream, tokio-macros, tokio-test),
#           fetched with `cargo vendor` from a throwaway project.
#   django  PyPI: the Django sdist (includes tests/ and docs/),
#           fetched with `pip download --no-binary :all:`.
#   ts      npm: TypeScript sources shipped in packages, `npm pack`:
#           effect (src/) and rxjs (src/).
#   synth   bench/gen_repo.py: 5,000 files, mixed languages, seed 42.
#
# Each corpus is made a git repository (one commit) so that canopy lists its
# files with `git ls-files`, as it does for a real checkout.
set -euo pipefail

TOKIO_VERSION=1.47.1
TOKIO_UTIL_VERSION=0.7.16
TOKIO_STREAM_VERSION=0.1.17
TOKIO_MACROS_VERSION=2.5.0
TOKIO_TEST_VERSION=0.4.4
DJANGO_VERSION=5.2.7
EFFECT_VERSION=3.16.0
RXJS_VERSION=7.8.2
SYNTH_FILES=5000
SYNTH_SEED=42

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${CANOPY_BENCH_CACHE:-$HOME/.cache/canopy-bench}
FORCE=0
GIT=1
NAMES=()
for arg in "$@"; do
  case "$arg" in
    --force) FORCE=1 ;;
    --no-git) GIT=0 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    tokio|django|ts|synth) NAMES+=("$arg") ;;
    *) echo "unknown argument: $arg (see --help)" >&2; exit 2 ;;
  esac
done
[ ${#NAMES[@]} -eq 0 ] && NAMES=(tokio django ts synth)

mkdir -p "$CACHE"
log() { echo "corpora: $*" >&2; }
need() {
  command -v "$1" >/dev/null 2>&1 || { log "missing '$1': $2"; exit 1; }
}

# Makes $1 a git repository with everything committed (so canopy uses git ls-files).
git_snapshot() {
  local dir=$1
  [ "$GIT" = 1 ] || return 0
  need git "apt-get install -y git"
  (
    cd "$dir"
    git init -q .
    git add -A .
    git -c user.name=canopy-bench -c user.email=bench@localhost \
      -c commit.gpgsign=false commit -q -m "corpus snapshot" --no-verify
  )
}

# Runs $2 (a function) to build corpus $1 into a temp dir, then moves it in place.
build() {
  local name=$1 fn=$2
  local dest="$CACHE/$name"
  if [ -d "$dest" ] && [ "$FORCE" = 0 ]; then
    printf '%s\t%s\n' "$name" "$dest"
    return 0
  fi
  local work
  work=$(mktemp -d "$CACHE/.tmp-$name-XXXXXX")
  log "building $name in $work"
  "$fn" "$work" "$work/corpus"
  git_snapshot "$work/corpus"
  rm -rf "$dest"
  mv "$work/corpus" "$dest"
  rm -rf "$work"
  log "$name ready: $(find "$dest" -type f -not -path '*/.git/*' | wc -l) files, $(du -sh --exclude=.git "$dest" | cut -f1)"
  printf '%s\t%s\n' "$name" "$dest"
}

fetch_tokio() {
  local work=$1 out=$2
  need cargo "install Rust (https://rustup.rs)"
  mkdir -p "$work/proj/src" "$out"
  cat >"$work/proj/Cargo.toml" <<EOF
[package]
name = "canopy-bench-corpus"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
tokio = { version = "=$TOKIO_VERSION", default-features = false }
tokio-util = { version = "=$TOKIO_UTIL_VERSION", default-features = false }
tokio-stream = { version = "=$TOKIO_STREAM_VERSION", default-features = false }
tokio-macros = { version = "=$TOKIO_MACROS_VERSION", default-features = false }
tokio-test = { version = "=$TOKIO_TEST_VERSION", default-features = false }

[workspace]
EOF
  echo 'fn main() {}' >"$work/proj/src/main.rs"
  (cd "$work/proj" && cargo vendor --quiet --versioned-dirs "$work/vendor" >/dev/null)
  local c
  for c in tokio-$TOKIO_VERSION tokio-util-$TOKIO_UTIL_VERSION tokio-stream-$TOKIO_STREAM_VERSION \
    tokio-macros-$TOKIO_MACROS_VERSION tokio-test-$TOKIO_TEST_VERSION; do
    [ -d "$work/vendor/$c" ] || { log "cargo vendor did not produce $c"; exit 1; }
    # Name directories like the tokio repository does (tokio/, tokio-util/, ...).
    cp -a "$work/vendor/$c" "$out/${c%-*}"
    # Packaging artefacts, not source.
    rm -f "$out/${c%-*}/.cargo-checksum.json" "$out/${c%-*}/.cargo_vcs_info.json" \
      "$out/${c%-*}/Cargo.toml.orig"
  done
}

fetch_django() {
  local work=$1 out=$2
  need python3 "apt-get install -y python3 python3-pip"
  python3 -m pip download --quiet --no-deps --no-binary :all: \
    "django==$DJANGO_VERSION" -d "$work/dl" >/dev/null
  local sdist
  sdist=$(ls "$work"/dl/[Dd]jango-"$DJANGO_VERSION".tar.gz)
  mkdir -p "$work/x"
  tar --no-same-owner -xzf "$sdist" -C "$work/x"
  mv "$work/x/"[Dd]jango-"$DJANGO_VERSION" "$out"
}

fetch_ts() {
  local work=$1 out=$2
  need npm "apt-get install -y npm"
  mkdir -p "$work/dl" "$out"
  (cd "$work/dl" && npm pack --silent "effect@$EFFECT_VERSION" "rxjs@$RXJS_VERSION" >/dev/null 2>&1)
  local pkg
  for pkg in "effect-$EFFECT_VERSION" "rxjs-$RXJS_VERSION"; do
    mkdir -p "$work/x/$pkg"
    tar --no-same-owner -xzf "$work/dl/$pkg.tgz" -C "$work/x/$pkg"
    # Only the TypeScript sources (the packages also ship compiled JS and .d.ts).
    mkdir -p "$out/${pkg%-*}"
    cp -a "$work/x/$pkg/package/src" "$out/${pkg%-*}/src"
    cp -a "$work/x/$pkg/package/package.json" "$out/${pkg%-*}/"
  done
}

fetch_synth() {
  local work=$1 out=$2
  need python3 "apt-get install -y python3"
  python3 "$BENCH_DIR/gen_repo.py" --files "$SYNTH_FILES" --seed "$SYNTH_SEED" "$out" >&2
}

for name in "${NAMES[@]}"; do
  build "$name" "fetch_$name"
done
