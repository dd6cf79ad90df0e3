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
# Body limits (docs/OPERATIONS.md, "Request body limits"): the result is refused when a location
# that a client can reach (not `internal`, not a named @location) names no client_max_body_size of
# its own, or names 0 (unlimited). The http and server levels must stay at 0 (over HTTP/2 nginx would
# answer a limit there with its HTML 413), so nginx's inheritance gives a new location no limit:
# this check is what makes every new location choose one (1k for a route that takes no body).
#
# Usage: scripts/render-nginx.sh TEMPLATE NAME=VALUE...   (prints the result)
#        scripts/render-nginx.sh --limits                 (prints nginx/limits.env's NAME=VALUE lines)
set -euo pipefail
shopt -u patsub_replacement 2>/dev/null || true
here=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
# Prints each reachable location of the nginx configuration on stdin that names no body limit of
# its own, or an unlimited one; quoted strings (the JSON error bodies) are blanked before the braces
# are counted.
locations_without_body_limit() {
    awk -v q="'" '
        { line = $0; gsub(q "[^" q "]*" q, q q, line); gsub(/"[^"]*"/, "\"\"", line); sub(/#.*/, "", line) }
        line ~ /^[ \t]*location[ \t]/ && depth_of_location == 0 {
            name = line; sub(/^[ \t]*location[ \t]+/, "", name); sub(/[ \t]*\{.*/, "", name)
            depth_of_location = depth + 1; internal = (name ~ /^@/); limit = ""
        }
        {
            if (depth_of_location && depth == depth_of_location) {
                if (line ~ /^[ \t]*internal[ \t]*;/) internal = 1
                if (match(line, /client_max_body_size[ \t]+[^; \t]+/)) { limit = substr(line, RSTART, RLENGTH); sub(/.*[ \t]/, "", limit) }
            }
            n = split(line, chars, "")
            for (i = 1; i <= n; i++) {
                if (chars[i] == "{") depth++
                else if (chars[i] == "}") {
                    depth--
                    if (depth_of_location && depth == depth_of_location - 1) {
                        if (!internal && (limit == "" || limit ~ /^0+[kKmMgG]?$/)) print "location " name (limit == "" ? ": no client_max_body_size" : ": client_max_body_size " limit)
                        depth_of_location = 0
                    }
                }
            }
        }'
}
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
        [[ $text == *"\${${pair%%=*}}"* ]] || continue  # a snippet the template does not use
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
# RENDER_NGINX_UNCHECKED=1: render without the check, only to recognise a site an earlier version
# of a template rendered (scripts/install.sh's shipped_before), when no location needed a limit.
bad=""
[[ ${RENDER_NGINX_UNCHECKED:-0} == 1 ]] || bad=$(printf '%s\n' "$text" | locations_without_body_limit)
if [[ -n $bad ]]; then
    printf '%s\n' "$bad" | sed "s|^|$0: $template: |" >&2
    echo "$0: every location a client reaches names its own client_max_body_size (1k if its routes take no body)" >&2
    exit 1
fi
printf '%s\n' "$text"
