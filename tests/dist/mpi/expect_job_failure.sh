#!/usr/bin/env bash
# Runs an mpirun command that must fail, and checks how: a nonzero exit status, output matching a regular
# expression (the message naming the failing rank), and no output file left behind (nothing half-written).
# Usage: expect_job_failure.sh REGEX OUT_FILE COMMAND...
set -u
regex=$1
out_file=$2
shift 2
rm -f "$out_file"
log=$("$@" 2>&1)
rc=$?
printf '%s\n' "$log"
if [ "$rc" -eq 0 ]; then
  echo "expect_job_failure: the job succeeded but should have failed" >&2
  exit 1
fi
if ! printf '%s\n' "$log" | grep -Eq -- "$regex"; then
  echo "expect_job_failure: exit status $rc, but no line matches: $regex" >&2
  exit 1
fi
if ls "$out_file"* >/dev/null 2>&1; then
  echo "expect_job_failure: $out_file (or a temporary of it) was written by a failed job" >&2
  exit 1
fi
echo "expect_job_failure: failed as expected (exit status $rc), nothing written"
