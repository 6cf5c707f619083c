#!/bin/sh
# smoke.sh PYTHON CHECKER PROGRAM ARGS...
#
# Runs PROGRAM ARGS under the LD_PRELOAD given by the environment (ctest sets
# it to libhakmem.so), then once more without it, and has CHECKER (run without
# the preload) verify the result line and compare the checksums.  Only shell
# built-ins run under the preload besides PROGRAM itself.
py=$1; checker=$2; shift 2
prog=$1
if [ -z "$LD_PRELOAD" ]; then
    echo "smoke.sh: LD_PRELOAD is not set" >&2
    exit 1
fi
preload=$LD_PRELOAD
errf=${TMPDIR:-/tmp}/bench-smoke.$$.err
trap 'rm -f "$errf"' EXIT
out=$("$@" 2>"$errf")
rc=$?
err=$(cat "$errf")
[ -n "$err" ] && printf '%s\n' "$err" >&2
if [ $rc -ne 0 ]; then
    echo "FAIL: $* exited with status $rc under LD_PRELOAD=$preload" >&2
    printf '%s\n' "$out"
    exit 1
fi
case "$err" in
    *"cannot be preloaded"*|*"ERROR: ld.so"*)
        echo "FAIL: the preload was ignored: $err" >&2
        exit 1 ;;
esac
ref=$(unset LD_PRELOAD; "$@")
rc=$?
if [ $rc -ne 0 ]; then
    echo "FAIL: reference run without preload exited with status $rc" >&2
    exit 1
fi
unset LD_PRELOAD
exec "$py" "$checker" --program "$(basename "$prog")" --output "$out" --reference "$ref"
