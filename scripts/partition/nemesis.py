"""The nemesis of `scripts/cluster.sh check`: faults on the cluster's hosts, on a seeded schedule.

Every fault is undone by its heal; `heal_all` undoes whatever may be left (a run that stops early
still leaves no rule, paused process or dead host behind). Each start and heal is one JSON line in
the run's nemesis log (docs/HISTORY.md): {"t", "wall", "event": "start"|"heal"|"note", "fault", "detail"}.

Partitions are nftables rules in the cut host's own network namespace (table `inet nemesis`,
dropping packets to and from the peers' addresses in both directions): packets vanish, so TCP
waits and times out as it would on a real cut (tc netem is not available here, so no latency).
Pauses are SIGSTOP/SIGCONT of every process of a host's namespace (mariadbd; the responder).
Kills and restarts go through cluster.sh (node-kill/node-start/node-wait, app-kill/app-start).
"""

from __future__ import annotations

import json
import random
import subprocess
import threading
import time
from dataclasses import dataclass, field

# name -> what it does. Every kind that cuts the network has `partition` in its name.
KINDS: dict[str, str] = {
    "partition-node": "one Galera node cut from the other two (a random node each cycle), then healed",
    "partition-moving": "a minority/majority split that moves: the cut node changes each cycle without a heal in between",
    "partition-app-db": "one responder host cut from every Galera node it uses",
    "partition-front-app": "front 1 cut from one responder host",
    "pause-node": "SIGSTOP of one Galera node's processes, SIGCONT at the heal",
    "pause-app": "SIGSTOP of one responder host's responder, SIGCONT at the heal",
    "kill-node": "SIGKILL of one Galera node, restarted (it rejoins by IST/SST) at the heal",
    "kill-app": "SIGKILL of one responder host, restarted at the heal",
    "partition-mixed": "each cycle one fault drawn from all the kinds above (partitions, pauses, kills)",
    "none": "no fault (a baseline for the workload and the checker)",
}


@dataclass
class Topology:
    prefix: str
    net: str
    nodes: int
    apps: int
    fronts: int
    cluster_cmd: str

    def node_ns(self, n: int) -> str:
        return f"{self.prefix}-db{n}"

    def node_ip(self, n: int) -> str:
        return f"{self.net}.{10 + n}"

    def app_ns(self, n: int) -> str:
        return f"{self.prefix}-app{n}"

    def app_ip(self, n: int) -> str:
        return f"{self.net}.{20 + n}"

    def front_ns(self, f: int) -> str:
        return f"{self.prefix}-fe" if f == 1 else f"{self.prefix}-fe{f}"

    def front_ip(self, f: int) -> str:
        return f"{self.net}.{1 + f}"

    def all_ns(self) -> list[str]:
        return ([self.node_ns(n) for n in range(1, self.nodes + 1)] + [self.app_ns(n) for n in range(1, self.apps + 1)]
                + [self.front_ns(f) for f in range(1, self.fronts + 1)])


def _run(args: list[str], timeout: float = 300, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(args, input=stdin, capture_output=True, text=True, timeout=timeout)


def nft_cut(ns: str, peers: list[str]) -> None:
    """Drops every packet between namespace `ns` and the addresses `peers`, both ways."""
    ips = ", ".join(peers)
    rules = f"""table inet nemesis {{
  chain in {{ type filter hook input priority 0; policy accept; ip saddr {{ {ips} }} drop; }}
  chain out {{ type filter hook output priority 0; policy accept; ip daddr {{ {ips} }} drop; }}
}}
"""
    nft_heal(ns)
    proc = _run(["ip", "netns", "exec", ns, "nft", "-f", "-"], stdin=rules, timeout=30)
    if proc.returncode != 0:
        raise RuntimeError(f"nft in {ns}: {proc.stderr.strip()}")


def nft_heal(ns: str) -> None:
    _run(["ip", "netns", "exec", ns, "nft", "delete", "table", "inet", "nemesis"], timeout=30)


def ns_pids(ns: str) -> list[int]:
    proc = _run(["ip", "netns", "pids", ns], timeout=30)
    return [int(p) for p in proc.stdout.split()]


def signal_ns(ns: str, sig: str) -> list[int]:
    pids = ns_pids(ns)
    if pids:
        _run(["kill", f"-{sig}", *map(str, pids)], timeout=30)
    return pids


@dataclass
class Fault:
    kind: str
    detail: dict = field(default_factory=dict)


class Nemesis:
    """Runs `kind` on a schedule drawn from `seed` until stopped, logging every event."""

    def __init__(self, topo: Topology, kind: str, seed: int, log_path: str, t0: float):
        if kind not in KINDS:
            raise ValueError(f"unknown nemesis kind {kind!r} (see --nemesis list)")
        self.topo, self.kind, self.rng = topo, kind, random.Random(f"nemesis-{kind}-{seed}")
        self.t0 = t0
        self.log = open(log_path, "a", buffering=1)
        self.lock = threading.Lock()
        self.active: list[Fault] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="nemesis", daemon=True)
        self.errors: list[str] = []
        self.counts: dict[str, int] = {}

    # --- logging
    def event(self, event: str, fault: str, **detail) -> None:
        line = {"t": round(time.monotonic() - self.t0, 3), "wall": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "event": event, "fault": fault, "detail": detail}
        with self.lock:
            self.log.write(json.dumps(line) + "\n")

    def cluster(self, *args: str, timeout: float = 300) -> None:
        proc = _run([self.topo.cluster_cmd, *args], timeout=timeout)
        if proc.returncode != 0:
            raise RuntimeError(f"cluster.sh {' '.join(args)}: {proc.stderr.strip()[-500:]}")

    # --- faults
    def start(self, kind: str, previous: Fault | None = None) -> Fault:
        t, rng = self.topo, self.rng
        if kind in ("partition-node", "partition-moving"):
            choices = list(range(1, t.nodes + 1))
            if previous is not None and previous.kind == kind and len(choices) > 1:
                choices.remove(previous.detail["node"])  # the split moves to another node
            n = rng.choice(choices)
            peers = [t.node_ip(m) for m in range(1, t.nodes + 1) if m != n]
            nft_cut(t.node_ns(n), peers)
            fault = Fault(kind, {"node": n, "ns": t.node_ns(n), "cut_from": peers})
        elif kind == "partition-app-db":
            a = rng.randint(1, t.apps)
            peers = [t.node_ip(m) for m in range(1, t.nodes + 1)]
            nft_cut(t.app_ns(a), peers)
            fault = Fault(kind, {"app": a, "ns": t.app_ns(a), "cut_from": peers})
        elif kind == "partition-front-app":
            a = rng.randint(1, t.apps)
            nft_cut(t.front_ns(1), [t.app_ip(a)])
            fault = Fault(kind, {"front": 1, "app": a, "ns": t.front_ns(1), "cut_from": [t.app_ip(a)]})
        elif kind == "pause-node":
            n = rng.randint(1, t.nodes)
            pids = signal_ns(t.node_ns(n), "STOP")
            fault = Fault(kind, {"node": n, "pids": pids})
        elif kind == "pause-app":
            a = rng.randint(1, t.apps)
            pids = signal_ns(t.app_ns(a), "STOP")
            fault = Fault(kind, {"app": a, "pids": pids})
        elif kind == "kill-node":
            n = rng.randint(1, t.nodes)
            self.cluster("node-kill", str(n))
            fault = Fault(kind, {"node": n})
        elif kind == "kill-app":
            a = rng.randint(1, t.apps)
            self.cluster("app-kill", str(a))
            fault = Fault(kind, {"app": a})
        else:
            raise ValueError(kind)
        self.counts[kind] = self.counts.get(kind, 0) + 1
        self.event("start", kind, **fault.detail)
        return fault

    def heal(self, fault: Fault) -> None:
        t, d = self.topo, fault.detail
        if fault.kind.startswith("partition-"):
            nft_heal(d["ns"])
        elif fault.kind == "pause-node":
            signal_ns(t.node_ns(d["node"]), "CONT")
        elif fault.kind == "pause-app":
            signal_ns(t.app_ns(d["app"]), "CONT")
        elif fault.kind == "kill-node":
            self.cluster("node-start", str(d["node"]))
        elif fault.kind == "kill-app":
            self.cluster("app-start", str(d["app"]))
        self.event("heal", fault.kind, **d)

    def wait_whole(self, timeout: float = 240) -> None:
        """Every node Synced again (after a partition, a pause or a kill)."""
        for n in range(1, self.topo.nodes + 1):
            self.cluster("node-wait", str(n), str(int(timeout)), timeout=timeout + 30)
        self.event("note", "whole", nodes=self.topo.nodes)

    def _sleep(self, seconds: float) -> bool:
        return not self.stop.wait(seconds)

    def _loop(self) -> None:
        if self.kind == "none":
            return
        kinds = [k for k in KINDS if k not in ("partition-mixed", "none")] if self.kind == "partition-mixed" else [self.kind]
        previous: Fault | None = None
        try:
            if not self._sleep(self.rng.uniform(3, 5)):
                return
            while not self.stop.is_set():
                kind = self.rng.choice(kinds)
                fault = self.start(kind, previous)
                self.active.append(fault)
                self._sleep(self.rng.uniform(6, 12))
                moving = kind == "partition-moving" and not self.stop.is_set()
                self.active.remove(fault)
                self.heal(fault)
                previous = fault
                if kind.startswith("kill-node") or kind == "pause-node":
                    self.wait_whole()
                if not moving and not self._sleep(self.rng.uniform(4, 8)):
                    return
        except Exception as exc:  # reported in the run's result; the heal below still runs
            self.errors.append(repr(exc))
            self.event("note", "error", error=repr(exc))

    # --- control
    def begin(self) -> None:
        self.event("note", "begin", kind=self.kind)
        self.thread.start()

    def end(self) -> None:
        self.stop.set()
        self.thread.join(timeout=600)
        self.heal_all()

    def heal_all(self) -> None:
        for fault in list(self.active):
            try:
                self.heal(fault)
            except Exception as exc:
                self.errors.append(repr(exc))
        self.active.clear()
        for ns in self.topo.all_ns():
            nft_heal(ns)
            signal_ns(ns, "CONT")
        self.event("note", "healed-all")
