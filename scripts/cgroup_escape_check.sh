#!/bin/bash
# Manual check of issue 31 item 1 (docs/operations/containment.md): whether a worker can
# move itself out of its attempt's cgroup, with the host's cgroup2 remounted nsdelegate for
# the few seconds it takes. nsdelegate is system-wide, so this is not part of the test suite
# (tests/integration/test_containment.py checks the refusal without it). Needs root.
#
#   scripts/cgroup_escape_check.sh [BUILD_DIR]
#
# Expected: (1) root in the initial user namespace: --containment cgroup refuses, naming
# CAP_SYS_ADMIN; with --allow-cgroup-escape the plain move fails and setns gets out.
# (2) muster in a user namespace under an outer cgroup namespace: runs, both moves fail.
set -u
build=${1:-build}
muster=$(realpath "$build/bin/muster")
mount=$(awk '$9 == "cgroup2" {print $5; exit}' /proc/self/mountinfo)
[ -n "$mount" ] || { echo "no cgroup2 mounted" >&2; exit 2; }
if grep -q "cgroup2 .*nsdelegate" /proc/self/mountinfo; then
  echo "$mount is mounted nsdelegate already; leaving it so" >&2
  restore=:
else
  restore="mount --options-mode ignore -o remount,rw $mount"
fi
work=$(mktemp -d)
trap '$restore; rm -rf "$work"' EXIT
cat >"$work/worker.sh" <<WORKER
#!/bin/sh
echo 0 > $mount/cgroup.procs 2>/dev/null && echo "plain move: escaped" >> $work/log ||
  echo "plain move: refused" >> $work/log
nsenter --cgroup=/proc/\$PPID/ns/cgroup /bin/sh -c "echo 0 > $mount/cgroup.procs" 2>/dev/null &&
  echo "setns move: escaped" >> $work/log || echo "setns move: refused" >> $work/log
WORKER
chmod +x "$work/worker.sh"
mount -o remount,nsdelegate "$mount" || exit 2
echo "== root, initial user namespace, --containment cgroup"
"$muster" run --containment cgroup --no-python "$work/worker.sh" 2>&1 | grep -o "workers could leave.*there" || echo "(not refused)"
echo "== root, initial user namespace, --containment cgroup --allow-cgroup-escape"
"$muster" run --containment cgroup --allow-cgroup-escape --no-python "$work/worker.sh" >/dev/null 2>&1
cat "$work/log"; : >"$work/log"
echo "== a user namespace under an outer cgroup namespace, --containment cgroup"
unshare -C unshare -U --map-user=0 --map-group=0 "$muster" run --containment cgroup \
  --no-python "$work/worker.sh" >/dev/null 2>&1
cat "$work/log"
