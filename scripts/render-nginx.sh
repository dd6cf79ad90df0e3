#!/usr/bin/env bash
# Renders an nginx template: every ${NAME} placeholder is replaced by the value given as
# NAME=VALUE (plain text substitution; nginx's own $variables are left alone). Fails when the
# template is missing or keeps a placeholder no argument filled, so a new placeholder cannot
# slip through unrendered. The one renderer of scripts/stack.sh and scripts/cluster.sh
# (nginx/todosync.conf.template, a whole nginx.conf) and scripts/install.sh
# (nginx/todosync-site.conf.template, a host's site).
#
# A value `@FILE` stands for FILE rendered with the same (plain) NAME=VALUE pairs: how the shared
# snippets (nginx/live-http.conf.template, nginx/live-locations.conf.template) enter every config.
#
# Usage: scripts/render-nginx.sh TEMPLATE NAME=VALUE...   (prints the result)
#        scripts/render-nginx.sh --limits                 (prints nginx/limits.env's NAME=VALUE lines)
set -euo pipefail
shopt -u patsub_replacement 2>/dev/null || true
here=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
if [[ ${1:-} == --limits ]]; then
    grep -E '^TODOSYNC_[A-Z_]+=[0-9]+$' "$here/../nginx/limits.env"
    exit 0
fi
(($# >= 1)) || { echo "usage: $0 TEMPLATE NAME=VALUE..." >&2; exit 2; }
template=$1
shift
[[ -r $template ]] || { echo "$0: template $template not found" >&2; exit 1; }
plain=()
for pair in "$@"; do
    name=${pair%%=*}
    [[ $name =~ ^[A-Z_]+$ && $pair == *=* ]] || { echo "$0: not NAME=VALUE: $pair" >&2; exit 2; }
    [[ ${pair#*=} == @* ]] || plain+=("$pair")
done
substitute() { # TEXT NAME=VALUE...: prints TEXT with each placeholder replaced
    local text=$1 pair
    shift
    for pair in "$@"; do
        text=${text//"\${${pair%%=*}}"/"${pair#*=}"}
    done
    printf '%s' "$text"
}
text=$(<"$template")
for pair in "$@"; do
    value=${pair#*=}
    if [[ $value == @* ]]; then
        [[ -r ${value#@} ]] || { echo "$0: snippet ${value#@} not found" >&2; exit 1; }
        value=$(substitute "$(<"${value#@}")" "${plain[@]}")
        text=$(substitute "$text" "${pair%%=*}=$value")
    fi
done
text=$(substitute "$text" "${plain[@]}")
if [[ $text =~ \$\{[A-Z_]+\} ]]; then
    echo "$0: unknown placeholder ${BASH_REMATCH[0]} in $template" >&2
    exit 1
fi
printf '%s\n' "$text"
