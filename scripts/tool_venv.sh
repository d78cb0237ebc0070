# Sourced, not run: tool_venv, the one way scripts/*_venv.sh make a test-only venv per tool.
#
# tool_venv NAME DOWNLOAD BROKEN PACKAGE...: makes sure ${MUSTER_CACHE:-~/.cache/muster}/
# NAME-venv (set as VENV) holds exactly PACKAGE... (pinned, installed --no-deps: nothing a
# resolver would pick on another day), outside the repo. The caller defines `have`, which
# says whether $VENV is usable: when it is, nothing is done; else the venv is made again
# (DOWNLOAD: its size, for the one-time message) and must then pass `have` (BROKEN: what the
# error says otherwise). Under a lock (flock on $CACHE/.NAME.lock, up to 600 s), so that
# parallel test workers make it once. Returns 1 after a message on stderr when it cannot.
tool_venv() {
  local name=$1 download=$2 broken=$3
  shift 3
  local cache=${MUSTER_CACHE:-$HOME/.cache/muster} me
  me=$(basename "$0" .sh)
  VENV=$cache/$name-venv
  mkdir -p "$cache"
  exec 9>"$cache/.$name.lock"
  flock -w 600 9 || { echo "$me: $cache/.$name.lock still held after 600 s" >&2; return 1; }
  have && return 0
  echo "$me: creating $VENV with $1 (one time, $download download)" >&2
  rm -rf "$VENV"
  /usr/bin/python3 -m venv "$VENV" || { echo "$me: python3 -m venv failed" >&2; return 1; }
  if ! "$VENV/bin/python" -m pip install -q --no-deps "$@" >&2; then
    echo "$me: pip install $* failed" >&2
    return 1
  fi
  have || { echo "$me: $VENV: $broken" >&2; return 1; }
}
