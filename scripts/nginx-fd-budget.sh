#!/usr/bin/env bash
# The box's file-descriptor budget for nginx (docs/OPERATIONS.md, "File descriptors"): prints
# `NOFILE WORKER_CONNECTIONS`, what nginx.conf's worker_rlimit_nofile and worker_connections are
# rendered with, and fails when the budget is too small to serve. A start must not pass with a
# limit nginx cannot reach: a worker_rlimit_nofile above what setrlimit allows only logs an alert
# and leaves the workers at the inherited limit.
#
# NOFILE: the wanted 140,000, bounded by what a worker can be given: the kernel's fs.nr_open, and
# the hard limit (`ulimit -Hn`) the master inherits unless it may raise it (root with
# CAP_SYS_RESOURCE; in a container often not: seen here, 20,000, where nginx logged
# `setrlimit(RLIMIT_NOFILE, 140000) failed` and kept 65,536 connections per worker on 20,000 files).
# WORKER_CONNECTIONS: nginx counts a descriptor as a connection (a client's, a responder's, either
# end of the connection cap's front socket), so NOFILE less 1,024 for files (logs, temporary
# bodies, the cache), at most 65,536 (~30 MB of connection structures per worker). How many
# clients that serves depends on what each holds: up to four descriptors behind the cap.
#
# Usage: scripts/nginx-fd-budget.sh   (the master's user and limits: this shell's)
set -euo pipefail
(($# == 0)) || { echo "usage: $0" >&2; exit 2; }
want=140000
minimum=4096
budget=$want
nr_open=$(cat /proc/sys/fs/nr_open 2>/dev/null || echo "$want")
((nr_open < budget)) && budget=$nr_open
hard=$(ulimit -Hn)
if [[ $hard != unlimited ]] && ((hard < budget)); then
    (ulimit -Hn "$budget") 2>/dev/null || budget=$hard
fi
if ((budget < minimum)); then
    echo "$0: nginx may open only $budget files (fs.nr_open $nr_open, hard limit $hard); at least $minimum are needed: raise the hard limit (ulimit -Hn, systemd LimitNOFILE=)" >&2
    exit 1
fi
connections=$((budget - 1024))
((connections > 65536)) && connections=65536
printf '%s %s\n' "$budget" "$connections"
