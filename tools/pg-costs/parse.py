#!/usr/bin/env python3
"""Parses callgrind_annotate --tree=both output and computes pg15.toml (table.py).
  parse.py extract TREE.txt        -> JSON {function: {incl, calls, callees, callers}}
  parse.py shrink FUNCS.json       -> the same, only the functions table.py reads
  parse.py pick CG...              -> the profile with the most CommitTransactionCommand calls
                                      (the backend serving pgbench: one call per statement)
  parse.py table DATA SHORT LONG IDLE -> the TOML on stdout"""
import json, re, subprocess, sys

LINE = re.compile(r"^\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+([<>*])\s+(.*)$")
NAME = re.compile(r"^(?:[^:]*:)?(.*?)(?: \(([\d,]+)x\))? \[([^\]]*)\]$")

def fname(s):
    m = NAME.match(s.strip())
    if not m:
        return s.strip(), 0, ""
    name, calls, obj = m.group(1), int((m.group(2) or "0").replace(",", "")), m.group(3)
    if "postgres" not in obj:
        name = name + "@" + obj.rsplit("/", 1)[-1]
    return name, calls, obj

def extract(path):
    funcs = {}
    callers, cur = [], None
    for line in open(path, errors="replace"):
        m = LINE.match(line)
        if not m:
            if not line.strip():
                callers, cur = [], None
            continue
        cost, kind, rest = int(m.group(1).replace(",", "")), m.group(2), m.group(3)
        name, calls, _ = fname(rest)
        if kind == "<":
            callers.append((name, cost, calls))
        elif kind == "*":
            f = funcs.setdefault(name, {"incl": 0, "calls": 0, "callees": {}, "callers": {}})
            f["incl"] = cost
            for (c, ci, cc) in callers:
                f["callers"][c] = [ci, cc]
                f["calls"] += cc
            cur = f
        elif kind == ">" and cur is not None:
            cur["callees"][name] = [cost, calls]
    return funcs

def total_ir(path):
    for line in open(path, errors="replace"):
        if line.startswith("summary:") or line.startswith("totals:"):
            return int(line.split()[1])
    return 0

def pick(paths):
    best, bestn = None, -1
    for p in paths:
        out = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--tree=caller", "--threshold=100", p],
                             capture_output=True, text=True).stdout
        n = 0
        # calls of CommitTransactionCommand = sum of its callers' counts
        block, cur = [], False
        for line in out.splitlines():
            m = LINE.match(line)
            if not m:
                if not line.strip():
                    block = []
                continue
            if m.group(2) == "<":
                block.append(fname(m.group(3))[1])
            elif m.group(2) == "*":
                if fname(m.group(3))[0] == "CommitTransactionCommand":
                    n = sum(block)
                block = []
        if n > bestn:
            best, bestn = p, n
    print(best)

if __name__ == "__main__":
    if sys.argv[1] == "extract":
        import table
        funcs = {k: v for k, v in extract(sys.argv[2]).items() if k in table.NEEDED}
        json.dump(funcs, sys.stdout, indent=0, sort_keys=True)
    elif sys.argv[1] == "shrink":  # an existing full funcs.json down to table.NEEDED
        import table
        funcs = json.load(open(sys.argv[2]))
        json.dump({k: v for k, v in funcs.items() if k in table.NEEDED}, sys.stdout, indent=0, sort_keys=True)
    elif sys.argv[1] == "pick":
        pick(sys.argv[2:])
    elif sys.argv[1] == "table":
        import table
        table.main(*sys.argv[2:])
