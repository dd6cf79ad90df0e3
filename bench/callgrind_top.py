#!/usr/bin/env python3
"""Top functions by self cost (exclusive instructions) of a callgrind dump, aggregated per
function name. (callgrind_annotate 3.19 mis-attributes self cost in dumps taken after
`callgrind_control --zero` in multithreaded programs; the raw file is right.)

    callgrind_top.py DUMP [N] [--per COUNT]
"""
import re
import sys


def main():
    path = sys.argv[1]
    top = int(sys.argv[2]) if len(sys.argv) > 2 and not sys.argv[2].startswith("--") else 30
    per = int(sys.argv[sys.argv.index("--per") + 1]) if "--per" in sys.argv else 1
    names = {"fn": {}, "ob": {}}
    self_cost, current, current_ob, skip_next, total = {}, None, "", False, 0
    ob_of = {}
    ref = re.compile(r"^\((\d+)\)(?: (.*))?$")

    def resolve(kind, value):
        m = ref.match(value)
        if not m:
            return value
        key, name = m.group(1), m.group(2)
        if name is not None:
            names[kind][key] = name
        return names[kind].get(key, value)

    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith("fn="):
                current = resolve("fn", line[3:].strip())
                ob_of.setdefault(current, current_ob)
            elif line.startswith("ob="):
                current_ob = resolve("ob", line[3:].strip())
            elif line.startswith(("cfn=", "cfi=", "cfl=")):
                if line.startswith("cfn="):
                    resolve("fn", line[4:].strip())
            elif line.startswith("cob="):
                resolve("ob", line[4:].strip())
            elif line.startswith("calls="):
                skip_next = True
            elif line[:1].isdigit() or line[:1] in "+-*":
                if skip_next:
                    skip_next = False
                    continue
                parts = line.split()
                if len(parts) >= 2 and current is not None:
                    cost = int(parts[1])
                    self_cost[current] = self_cost.get(current, 0) + cost
                    total += cost
    print(f"self cost, total {total:,} Ir" + (f" ({total // per:,} per request)" if per > 1 else ""))
    for name, cost in sorted(self_cost.items(), key=lambda kv: -kv[1])[:top]:
        lib = ob_of.get(name, "").rsplit("/", 1)[-1]
        print(f"{cost / total:6.1%} {cost // per:>12,}  {name}  [{lib}]")


if __name__ == "__main__":
    main()
