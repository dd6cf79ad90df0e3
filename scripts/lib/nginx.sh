# shellcheck shell=bash
# nginx's configuration as the dev stack and the cluster's fronts render it (scripts/lib/common.sh
# first): the limits' defaults and the placeholders of nginx/todosync.conf.template that both fill
# alike. A placeholder both fill the same way gets its value here, once.

# The limits' defaults (nginx/limits.env) for each TODOSYNC_* limit not already set.
load_limit_defaults() {
    local k v
    while IFS='=' read -r k v; do
        [[ -n ${!k:-} ]] || printf -v "$k" '%s' "$v"
    done < <("$REPO_ROOT/scripts/render-nginx.sh" --limits)
}

# render_nginx_conf_file TEMPLATE OUT NAME=VALUE...: renders TEMPLATE by scripts/render-nginx.sh
# into OUT (through OUT.tmp). Filled here unless a NAME=VALUE says otherwise: the file budget
# (scripts/nginx-fd-budget.sh; NGINX_NOFILE stays set for the caller), the certificate in TLS_DIR,
# the limits from TODOSYNC_AUTH_RATE, _AUTH_BURST, _ACCOUNT_CONCURRENCY, _ADDRESS_CONCURRENCY and
# _LIVE_STREAMS, the shared snippets (live sync, body limits), and empty optional parts (the
# connection cap, /__bench/, nchan's Redis). The caller gives the rest.
render_nginx_conf_file() {
    local template=$1 out=$2 budget pair name args=()
    shift 2
    budget=$("$REPO_ROOT/scripts/nginx-fd-budget.sh") || die "nginx's file-descriptor budget is too small"
    NGINX_NOFILE=${budget% *}
    local -A values=(
        [NGINX_NOFILE]=$NGINX_NOFILE [NGINX_WORKER_CONNECTIONS]=${budget#* }
        [TLS_CERT]=$TLS_DIR/cert.pem [TLS_KEY]=$TLS_DIR/key.pem
        [AUTH_RATE]=$TODOSYNC_AUTH_RATE [AUTH_BURST]=$TODOSYNC_AUTH_BURST
        [ACCOUNT_CONCURRENCY]=$TODOSYNC_ACCOUNT_CONCURRENCY [ADDRESS_CONCURRENCY]=$TODOSYNC_ADDRESS_CONCURRENCY
        [LIVE_STREAMS]=$TODOSYNC_LIVE_STREAMS
        [LIVE_HTTP]=@$REPO_ROOT/nginx/live-http.conf.template
        [LIVE_LOCATIONS]=@$REPO_ROOT/nginx/live-locations.conf.template
        [BODY_LIMITS_HTTP]=@$REPO_ROOT/nginx/body-limits-http.conf.template
        [ADDRESS_CAP_STREAM]="" [ADDRESS_CAP_HTTP]="" [BENCH_LOCATIONS]="" [LIVE_REDIS_HTTP]="" [LIVE_REDIS_PASS]=""
    )
    for pair in "$@"; do values[${pair%%=*}]=${pair#*=}; done
    while IFS= read -r name; do args+=("$name=${values[$name]}"); done < <(printf '%s\n' "${!values[@]}" | sort)
    "$REPO_ROOT/scripts/render-nginx.sh" "$template" "${args[@]}" >"$out.tmp" || die "could not render $template"
    mv -f "$out.tmp" "$out"
}
