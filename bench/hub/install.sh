#!/usr/bin/env bash
# Install the peer proxies for bench/hub/run.py from PyPI, each into its own venv, and print
# one line per peer on stdout: `NAME PATH` (the venv's bin directory).
#
#   bash bench/hub/install.sh
#   # -> mcp-proxy /root/.cache/quarry-bench/hub/mcp-proxy-venv/bin
#   #    fastmcp   /root/.cache/quarry-bench/hub/fastmcp-venv/bin
#
# Why two venvs: mcp-proxy 0.13 (sparfenyuk/mcp-proxy) pins `mcp<2`, while fastmcp 4 needs
# `mcp>=2`; installed together pip falls back to fastmcp 3.x. Separate venvs give each its
# newest release.
#
# Idempotent: a second run only checks that each peer starts (`--version` / import).
# Knobs (env): QUARRY_BENCH_CACHE (default ~/.cache/quarry-bench), HUB_BENCH_PYTHON (an
# interpreter >= 3.10; default: python3.12, else python3), MCP_PROXY_VERSION (default 0.13.0),
# FASTMCP_VERSION (default: newest that resolves), HUB_BENCH_FORCE=1 (reinstall).
# A peer that does not install is reported on stderr and left out of the output; run.py
# records it as skipped.
set -uo pipefail

CACHE="${QUARRY_BENCH_CACHE:-$HOME/.cache/quarry-bench}/hub"
MCP_PROXY_VERSION="${MCP_PROXY_VERSION:-0.13.0}"
FASTMCP_VERSION="${FASTMCP_VERSION:-}"
log() { printf '[hub-install] %s\n' "$*" >&2; }

PY="${HUB_BENCH_PYTHON:-}"
if [[ -z "$PY" ]]; then
  for c in python3.12 python3.13 python3.11 python3; do
    if command -v "$c" >/dev/null 2>&1 && "$c" -c 'import sys, venv; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
      PY="$("$c" -c 'import sys; print(sys.executable)')"; break
    fi
  done
fi
if [[ -z "$PY" ]]; then log "no python >= 3.10 found"; exit 1; fi
mkdir -p "$CACHE"

# install NAME SPEC CHECK...: a venv at $CACHE/NAME-venv with SPEC, checked by running CHECK
# with the venv's bin first on PATH.
install() {
  local name="$1" spec="$2"; shift 2
  local venv="$CACHE/$name-venv" stamp="$CACHE/$name-venv/.installed-$spec"
  if [[ "${HUB_BENCH_FORCE:-0}" != 1 && -f "$stamp" ]] && PATH="$venv/bin:$PATH" "$@" >/dev/null 2>&1; then
    log "$name: already installed ($spec)"
    echo "$name $venv/bin"
    return 0
  fi
  log "$name: installing $spec into $venv with $PY"
  rm -rf "$venv"
  if ! "$PY" -m venv "$venv" >&2; then log "$name: venv failed"; return 1; fi
  if ! "$venv/bin/pip" install --quiet --disable-pip-version-check "$spec" >&2; then
    log "$name: pip install $spec failed"
    return 1
  fi
  if ! PATH="$venv/bin:$PATH" "$@" >&2; then log "$name: installed but does not run"; return 1; fi
  touch "$stamp"
  log "$name: $("$venv/bin/pip" list --disable-pip-version-check 2>/dev/null | grep -iE "^($name|mcp) " | tr -s ' ' | paste -sd, -)"
  echo "$name $venv/bin"
}

ok=0
install mcp-proxy "mcp-proxy==$MCP_PROXY_VERSION" mcp-proxy --version && ok=1
install fastmcp "fastmcp${FASTMCP_VERSION:+==$FASTMCP_VERSION}" \
  python -c 'from fastmcp.server import create_proxy; import fastmcp; print("fastmcp", fastmcp.__version__)' && ok=1
[[ $ok == 1 ]] || { log "no peer installed"; exit 1; }
