#!/bin/sh
# Helm 4 runs this for `--post-renderer styrmin` (plugin.yaml), with the rendered manifests on
# stdin and the `--post-renderer-args` as arguments. It runs the real post-renderer:
# bin/styrmin-postrender next to this file if there is one, else styrmin-postrender on $PATH.
#
# Helm 4.1 throws away everything a post-renderer plugin writes to stderr, warnings and errors
# alike (even with --debug). So when a terminal is there, stderr goes to it; otherwise pass
# `--post-renderer-args --report=FILE` to keep the warnings. STYRMIN_TTY=0 turns the terminal
# off.
set -eu

dir="${HELM_PLUGIN_DIR:-$(cd "$(dirname "$0")" && pwd)}"
if [ -x "$dir/bin/styrmin-postrender" ]; then
    bin="$dir/bin/styrmin-postrender"
elif bin="$(command -v styrmin-postrender 2>/dev/null)"; then
    :
else
    msg="styrmin: styrmin-postrender is neither in $dir/bin/ nor on PATH ($PATH)"
    (echo "$msg" >/dev/tty) 2>/dev/null || echo "$msg" >&2
    exit 127
fi

# A subshell: a failed redirection of a special built-in such as `:` would end the script.
if [ "${STYRMIN_TTY:-1}" != 0 ] && (true >/dev/tty) 2>/dev/null; then
    exec "$bin" "$@" 2>/dev/tty
fi
exec "$bin" "$@"
