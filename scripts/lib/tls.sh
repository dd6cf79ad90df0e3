# shellcheck shell=bash
# The self-signed certificate of the dev stack and the cluster's fronts (scripts/lib/common.sh
# first). Uses TLS_DIR and LOG_DIR.

# ensure_cert SAN: $TLS_DIR/cert.pem (0644) and key.pem (0600), a self-signed certificate for
# CN=localhost with subjectAltName SAN, unless both exist; openssl's output in $LOG_DIR/openssl.log.
ensure_cert() {
    local san=$1
    mkdir -p "$TLS_DIR"
    [[ -s $TLS_DIR/cert.pem && -s $TLS_DIR/key.pem ]] && return 0
    require_cmd openssl
    log "tls: generating self-signed certificate ($san)"
    (
        umask 077
        openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 3650 \
            -keyout "$TLS_DIR/key.pem" -out "$TLS_DIR/cert.pem" \
            -subj /CN=localhost -addext "subjectAltName=$san" >"$LOG_DIR/openssl.log" 2>&1
    ) || { show_tail "$LOG_DIR/openssl.log"; die "openssl req failed"; }
    chmod 644 "$TLS_DIR/cert.pem"
}
