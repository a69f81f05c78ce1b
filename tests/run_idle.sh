#!/usr/bin/env bash
# Runs a command at idle CPU priority: it gets a core only when nothing else
# on the host wants one. `make test` builds the check tree this way beside
# the integration tests.
#
# `nice` alone does not do that. A nice value ranks a thread only among the
# threads of its own cpu cgroup (in the root group, of its session's
# autogroup), so a nice-19 build outweighed the warm pool's refill cgroup
# (cpu weight 10): the pool's guests booted in 37-44 s instead of 5-8 s and
# one pool e2e case failed on its first try. So the command runs in a cpu
# cgroup of its own, marked idle (cpu.idle, Linux 5.15+: it runs only on a
# core that would otherwise idle) or else given the lowest weight, removed
# afterwards. Where no cpu controller is writable (not root, no cgroup
# delegation), it runs in a new session whose autogroup is niced to 19.
set -uo pipefail

case "${1:-}" in
  -h | --help | "")
    echo "usage: $(basename "$0") COMMAND [ARG...]"
    echo "Runs COMMAND in an idle cpu cgroup (or at autogroup nice 19) and returns its exit status."
    [ -n "${1:-}" ]; exit $? ;;
  --version)
    sed -n 's/^project(capsule VERSION \([0-9.]*\).*/run_idle.sh (capsule) \1/p' "$(dirname "$0")/../CMakeLists.txt"
    exit 0 ;;
esac

# The cpu hierarchy's root: cgroup v2 with the cpu controller, or v1's cpu.
root="" own=""
if [ -f /sys/fs/cgroup/cgroup.controllers ] && grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null; then
  root=/sys/fs/cgroup
  own=$(sed -n 's/^0:://p' /proc/self/cgroup)
elif [ -f /sys/fs/cgroup/cpu/cpu.shares ]; then
  root=/sys/fs/cgroup/cpu
  own=$(awk -F: '$2 ~ /(^|,)cpu(,|$)/ {print $3}' /proc/self/cgroup)
fi

group=""
if [ -n "$root" ] && [ -w "$root" ]; then
  group="$root/capsule-idle-$$"
  if mkdir "$group" 2>/dev/null; then
    if ! { [ -f "$group/cpu.idle" ] && echo 1 > "$group/cpu.idle"; } 2>/dev/null; then
      if [ -f "$group/cpu.weight" ]; then echo 1 > "$group/cpu.weight"; else echo 2 > "$group/cpu.shares"; fi ||
        echo "run_idle.sh: $group keeps the default cpu weight" >&2
    fi
    if ! echo $$ > "$group/cgroup.procs"; then rmdir "$group"; group=""; fi
  else
    group=""
  fi
fi

# Back to where this shell came from, then the group goes once its last
# process (a straggler of a killed command) has left.
leave() {
  [ -n "$group" ] || return 0
  echo $$ > "$root${own:-/}/cgroup.procs" 2>/dev/null || echo $$ > "$root/cgroup.procs" 2>/dev/null
  for _ in $(seq 50); do
    rmdir "$group" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "run_idle.sh: $group still has processes; left in place" >&2
}

if [ -z "$group" ]; then
  echo "run_idle.sh: no writable cpu cgroup; running at autogroup nice 19" >&2
  # Its own session, so that the autogroup niced is not the caller's.
  if [ "$(ps -o sid= -p $$ | tr -d ' ')" != $$ ]; then
    exec setsid --wait bash -c 'echo 19 > /proc/self/autogroup 2>/dev/null; exec nice -n 19 "$@"' run_idle "$@"
  fi
  echo 19 > /proc/self/autogroup 2>/dev/null
  exec nice -n 19 "$@"
fi

trap leave EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
nice -n 19 "$@" &
wait $!
