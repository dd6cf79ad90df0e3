#!/usr/bin/env bash
# The box's file-descriptor budget for nginx (docs/OPERATIONS.md, "File descriptors"): prints
# `NOFILE WORKER_CONNECTIONS`, what nginx.conf's worker_rlimit_nofile and worker_connections are
# rendered with, and fails when the budget is too small to serve (a start must not pass with a
# limit nginx cannot reach: a worker_rlimit_nofile above what setrlimit allows leaves the workers
# at the inherited limit, often 1,024, and nginx runs out of files under load).
#
# NOFILE: the wanted 140,000, bounded by what a worker can be given: the kernel's fs.nr_open, and
# the hard limit (`ulimit -Hn`) the master inherits unless it may raise it (root with
# CAP_SYS_RESOURCE; in a container often not: seen here, 20,000, where nginx logged `setrlimit(
# RLIMIT_NOFILE, 140000) failed` and kept 65,536 connections per worker on 20,000 files). Connections per
# worker: NOFILE / FILES_PER_CONNECTION (2: a client and a responder; 4 behind the per-address
# connection cap, whose stream server holds the client and its end of the front's socket), at
# most 65,536 (~30 MB of connection structures per worker).
#
# Usage: scripts/nginx-fd-budget.sh FILES_PER_CONNECTION   (the master's user and limits: this shell's)
set -euo pipefail
(($# == 1)) && [[ $1 =~ ^[1-9]$ ]] || { echo "usage: $0 FILES_PER_CONNECTION" >&2; exit 2; }
per_connection=$1
want=140000
minimum=4096
budget=$want
nr_open=$(cat /proc/sys/fs/nr_open 2>/dev/null || echo "$want")
((nr_open < budget)) && budget=$nr_open
hard=$(ulimit -Hn)
if [[ $hard != unlimited ]] && ((hard < budget)); then
    (ulimit -Hn "$budget") 2>/dev/null || budget=$hard
fi
connections=$(((budget - 256) / per_connection))
((connections > 65536)) && connections=65536
if ((budget < minimum)); then
    echo "$0: nginx may open only $budget files (fs.nr_open $nr_open, hard limit $(ulimit -Hn)); at least $minimum are needed: raise the hard limit (ulimit -Hn, systemd LimitNOFILE=)" >&2
    exit 1
fi
printf '%s %s\n' "$budget" "$connections"
