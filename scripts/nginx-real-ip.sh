#!/usr/bin/env bash
# Prints nginx's realip settings for a server block (issue 19, item 11): behind a load balancer
# or proxy, nginx takes each client's address from REAL_IP_HEADER, but only on connections from
# the TRUSTED proxies, so the per-address limits (logins, requests in progress) and the access
# log see the clients, not the balancer. Nothing (the default) when TRUSTED is empty: every
# client is the peer address of its TCP connection.
#
# Usage: scripts/nginx-real-ip.sh TRUSTED [HEADER] [INDENT]
#   TRUSTED  comma-separated addresses or CIDR ranges of the proxies (or `unix:` for connections
#            on unix sockets, as the cluster's front gets them); empty: off
#   HEADER   X-Forwarded-For (default), X-Real-IP, another header name, or proxy_protocol
#   INDENT   spaces before each line (default 8)
# With X-Forwarded-For, real_ip_recursive takes the last address that is not a trusted proxy:
# a client cannot pick its own address by sending the header itself.
set -euo pipefail
(($# >= 1)) || { echo "usage: $0 TRUSTED [HEADER] [INDENT]" >&2; exit 2; }
trusted=$1 header=${2:-X-Forwarded-For} indent=${3:-8}
[[ -n $trusted ]] || exit 0
[[ $header == proxy_protocol || $header =~ ^[A-Za-z0-9-]+$ ]] ||
    { echo "$0: not a header name or proxy_protocol: $header" >&2; exit 2; }
[[ $indent =~ ^[0-9]+$ ]] || { echo "$0: INDENT must be a number" >&2; exit 2; }
pad=$(printf '%*s' "$indent" '')
IFS=, read -r -a addresses <<<"$trusted"
lines=("# Client addresses from $header, on connections from these proxies only (scripts/nginx-real-ip.sh).")
for address in "${addresses[@]}"; do
    address=${address//[[:space:]]/}
    [[ -z $address ]] && continue
    [[ $address == unix: || $address =~ ^[0-9A-Fa-f.:]+(/[0-9]{1,3})?$ ]] ||
        { echo "$0: not an address or CIDR range: $address" >&2; exit 2; }
    lines+=("set_real_ip_from $address;")
done
lines+=("real_ip_header $header;" "real_ip_recursive on;")
printf "${pad}%s\n" "${lines[@]}"
