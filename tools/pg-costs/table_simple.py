EXTRA = {"exec_simple_query", "pg_parse_query", "pg_analyze_and_rewrite_fixedparams", "pg_rewrite_query",
         "pg_plan_queries", "pg_plan_query", "planner", "standard_planner", "parse_analyze_fixedparams",
         "raw_parser", "PortalRun", "PortalStart", "CreatePortal", "PortalDrop", "exec_bind_message",
         "exec_execute_message", "exec_parse_message", "ExecutorStart", "ExecutorRun", "ExecutorEnd",
         "ProcessUtility", "standard_ProcessUtility", "CreateCommandTag", "ReadyForQuery",
         "pq_getbyte", "pq_flush", "secure_read", "secure_write", "pgstat_report_activity",
         "start_xact_command", "finish_xact_command", "CommitTransactionCommand", "StartTransactionCommand",
         "printtup", "EndCommand", "BeginCommand", "get_relname_relid", "RangeVarGetRelidExtended",
         "transformStmt", "query_planner", "create_plan", "get_relation_info", "SearchCatCache1",
         "SearchCatCache", "SearchCatCache2", "SearchCatCache3", "SearchSysCache1", "SearchSysCache",
         "AcquireRewriteLocks", "QueryRewrite", "fireRIRrules", "MemoryContextDelete", "MemoryContextReset",
         "MemoryContextResetOnly", "AllocSetAlloc", "AllocSetReset", "AllocSetDelete", "palloc", "palloc0",
         "pfree", "hash_search", "hash_search_with_hash_value", "errstart", "pg_strtoint32", "core_yylex",
         "base_yyparse", "scanner_init", "check_log_duration", "pgstat_report_stat"}
"""Computes the simple-protocol block of crates/sim/costs/pg15.toml (measure-simple.sh): the
statement.*.simple and txn.*.simple regions and their sum check, from the Q* server passes in
data/ (pgbench -M simple -c 1). Same residual method as table.py's statements: the backend's
PostgresMain inclusive difference per transaction minus the regions' functions and all LWLock
calls, then differences between scripts that differ by one statement."""
import os, sys, tomllib
import table
from table import Run, r1, q

LAE, LRA, GSD, PAE, GNT = ("LockAcquireExtended", "LockReleaseAll", "GetSnapshotData",
                           "ProcArrayEndTransaction", "GetNewTransactionId")
XF, TST, TGS, XIR = "XLogFlush", "TransactionIdSetTreeStatus", "TransactionIdGetStatus", "XLogInsertRecord"
DEEP = {LRA: ("VirtualXactLockTableCleanup",), XF: ("WaitXLogInsertionsToFinish", "XLogWrite"),
        TST: ("TransactionIdSetPageStatus",), TGS: ("SimpleLruReadPage_ReadOnly",),
        XIR: ("WALInsertLockAcquire", "WALInsertLockRelease")}
STAGES = (("parse", "pg_parse_query"), ("analyze+rewrite", "pg_analyze_and_rewrite_fixedparams"),
          ("plan", "pg_plan_queries"))


class QRun(Run):
    def total(self):  # server runs: the measured backend's main loop (table.Run does this for P*)
        return self.incl("PostgresMain")


def covered(r):
    """table.py's covered(): the regions' functions (without their LWLock calls) + all LWLock calls"""
    c = r.lw_total()
    for fn in (LAE, "LockRelease", LRA, GSD, PAE, GNT, XF, TST, TGS, XIR):
        c += r.nolw(fn, DEEP.get(fn, ()))
    for fn in ("BufTableHashCode", "BufTableLookup", "PinBuffer", "ReleaseBuffer", "UnpinBuffer",
               "_bt_binsrch", "_bt_moveright", "_bt_readpage", "heap_hot_search_buffer"):
        c += r.incl(fn)
    return c


def main(data, short, long_, toml_path):
    short, long_ = int(short), int(long_)
    R = {k: QRun(data, "Q" + k, short, long_) for k in ("S", "N", "T", "B", "I", "NS", "NI")}
    rs = {k: r.total() - covered(r) for k, r in R.items()}
    st = {k: {s: r.incl(fn) for s, fn in STAGES} for k, r in R.items()}   # per transaction
    prep = {}
    if os.path.exists(toml_path):
        prep = tomllib.load(open(toml_path, "rb")).get("region", {})
    pv = lambda k: prep.get(k, {}).get("instructions")

    B = R["B"]
    ctc = B.incl("CommitTransactionCommand") - B.lw_total()
    for fn in (LAE, "LockRelease", LRA, GSD, PAE):
        ctc -= B.nolw(fn, DEEP.get(fn, ()))
    begin = (rs["B"] - ctc) / 2
    ins = rs["N"] - rs["NI"]
    upd = rs["NS"] - rs["I"]
    sel_w = rs["N"] - rs["NS"]
    small = (rs["T"] - rs["N"]) / 2
    commit_w = rs["I"] - ins - begin
    sel = rs["S"] - ctc

    def stages(a, b=None, div=1.0):
        """parse / analyze+rewrite / plan inclusive per statement: run a minus run b (or a alone)"""
        return ", ".join(f"{s} {(st[a][s] - (st[b][s] if b else 0)) / div:.0f}" for s, _ in STAGES)

    reg = {}
    stmt_how = ("residuals (the backend's PostgresMain total minus the regions' functions and all LWLock "
                "calls, table.py's covered()) of server runs (pgbench -M simple -c 1 over a socket, "
                f"{long_} vs {short} transactions, custom scripts in tools/pg-costs/scripts) that differ "
                "by this statement; the Query message, raw parse, analyze, rewrite, plan, portal, executor, "
                "row output and socket I/O included; parse/plan stages are inclusive counts (their few "
                "catalog-cache and lock calls inside)")

    def put(name, instr, how, covers, runs, base):
        p = pv(base)
        extra = f"; -M prepared ({base}): {p:.0f}, simple minus prepared {instr - p:.0f}" if p is not None else ""
        reg[name] = dict(instructions=r1(instr), per_item=0.0, item="", estimated=False, covers=covers,
                         how=how + extra + "; " + stmt_how + f" [{runs}]")

    put("statement.select_pk.simple", sel,
        f"-S residual per transaction ({rs['S']:.0f}) minus the read-only commit ({ctc:.0f}, from QB); "
        f"implicit transaction start included; parse/plan stages per -S transaction: {stages('S')}; "
        f"in a write transaction (QN minus QNS) the SELECT costs {sel_w:.0f}",
        "SELECT abalance FROM pgbench_accounts WHERE aid = <literal> sent as a simple Query: raw parse, "
        "analyze, rewrite, plan, portal, executor, index scan set-up, row output, outside the regions",
        "QS, QB", "statement.select_pk")
    put("statement.update_pk.simple", upd,
        f"QNS (BEGIN; UPDATE accounts; INSERT; END) minus QI (BEGIN; INSERT; END); parse/plan stages: "
        f"{stages('NS', 'I')}",
        "UPDATE pgbench_accounts SET abalance = abalance + <literal> WHERE aid = <literal> as a simple "
        "Query: parse, analyze, rewrite, plan, executor, index scan, heap_update, outside the regions",
        "QNS, QI", "statement.update_pk")
    put("statement.update_pk.small_table.simple", small,
        f"(QT minus QN)/2 (tpcb-like minus -N: the tellers and branches UPDATEs); parse/plan stages: "
        f"{stages('T', 'N', 2.0)}",
        "UPDATE pgbench_tellers / pgbench_branches by key as a simple Query (HOT chains on one hot page)",
        "QT, QN", "statement.update_pk.small_table")
    put("statement.insert_history.simple", ins,
        f"QN minus QNI (-N without the INSERT); parse/plan stages: {stages('N', 'NI')}",
        "INSERT INTO pgbench_history VALUES (<literals>, CURRENT_TIMESTAMP) as a simple Query: parse, "
        "analyze, rewrite, plan, executor, heap_insert", "QN, QNI", "statement.insert_history")
    put("statement.begin.simple", begin,
        f"QB (BEGIN; END;) residual ({rs['B']:.0f}) minus the END's CommitTransactionCommand outside regions "
        f"({ctc:.0f}), halved (BEGIN's and END's Query round trips taken as equal); parse/plan stages "
        f"for BEGIN and END together: {stages('B')} (utility statements are not planned)",
        "BEGIN as a simple Query: the round trip, raw parse, StartTransactionCommand/StartTransaction",
        "QB", "statement.begin")
    put("statement.commit.simple", commit_w,
        f"QI residual minus statement.insert_history.simple minus statement.begin.simple",
        "END of a write transaction as a simple Query: the round trip, raw parse, CommitTransaction "
        "outside the xlog/clog/procarray/lmgr regions", "QI, QN, QNI, QB", "statement.commit")
    put("statement.commit.read_only.simple", ctc,
        f"QB: the END's CommitTransactionCommand outside regions and LWLock calls, without the END's "
        f"Query round trip (add statement.begin.simple for an explicit END; -S's implicit commit has none); "
        "the same code as under -M prepared, but here the statement's portal is already dropped (exec_simple_query "
        "runs PortalDrop, ~740, before finish_xact_command) while under -M prepared the unnamed portal is dropped "
        "inside the commit (PreCommit_Portals, ~1.2k/txn in PB): an attribution difference, not a cost difference",
        "END (or -S's implicit commit) of a read-only transaction: CommitTransaction without a commit record",
        "QB", "statement.commit.read_only")
    for name, k, script in (("txn.select_only", "S", "select-only"), ("txn.simple_update", "N", "simple-update"),
                            ("txn.tpcb_like", "T", "tpcb-like")):
        r = R[k]
        p = pv(name)
        reg[name + ".simple"] = dict(
            instructions=r1(r.total()), per_item=0.0, item="", estimated=False,
            covers="the whole transaction in the backend under -M simple: Query messages, parse, analyze, "
                   "rewrite, plan, executor, all regions, LWLock calls, row output and socket I/O (user space)",
            how=f"server backend under callgrind, pgbench -b {script} -M simple -c 1, {long_} vs {short} "
                f"transactions: PostgresMain inclusive per transaction; parse/plan stages per transaction: "
                f"{stages(k)}; LWLock calls {r.lw_total():.0f}; regions and LWLock calls {covered(r):.0f}"
                + (f"; -M prepared ({name}): {p:.0f}" if p is not None else "") + f" [Q{k}]")

    g = lambda n: reg[n]["instructions"]
    stm = {"select_only": g("statement.select_pk.simple") + g("statement.commit.read_only.simple"),
           "simple_update": g("statement.begin.simple") + g("statement.update_pk.simple") + sel_w
           + g("statement.insert_history.simple") + g("statement.commit.simple"),
           "tpcb_like": g("statement.begin.simple") + g("statement.update_pk.simple") + sel_w
           + 2 * g("statement.update_pk.small_table.simple") + g("statement.insert_history.simple")
           + g("statement.commit.simple")}
    out = ["# ---- simple protocol (tools/pg-costs/measure-simple.sh) ----",
           "# pgbench -M simple (statements sent as text: raw parse, analyze, rewrite and plan on every",
           "# execution); generated by tools/pg-costs/measure-simple.sh, do not edit by hand. Same keys and",
           "# method as the statement.* / txn.* regions above (which are -M prepared).",
           f"# measured = {__import__('datetime').date.today().isoformat()}; runs: {long_} vs {short} transactions.", ""]
    for name in sorted(reg):
        r = reg[name]
        out += [f"[region.{q(name)}]", f"instructions = {float(r['instructions'])}", "per_item = 0.0",
                'item = ""', "estimated = false", f"covers = {q(r['covers'])}", f"how = {q(r['how'])}", ""]
    out.append("# Sum check per server transaction (pgbench -M simple -c 1), as [check.*] above: statements =")
    out.append("# the statement.*.simple figures (-N/tpcb-like's SELECT in a write transaction: QN minus QNS);")
    out.append("# difference = total - regions_and_lwlocks - statements (0 by construction up to noise).")
    for name, k in (("select_only", "S"), ("simple_update", "N"), ("tpcb_like", "T")):
        r = R[k]
        tot, c = r.total(), covered(r)
        out.append(f'[check.{q(name + ".simple")}]')
        for kk, vv in (("total", tot), ("regions_and_lwlocks", c), ("statements", stm[name]),
                       ("difference", tot - c - stm[name]), ("select_pk_in_write_txn", sel_w if k != "S" else sel)):
            out.append(f"{kk} = {float(round(vv, 1))}")
        out.append("")
    out.append("# ---- end simple protocol ----")
    print("\n".join(out))


if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    main(sys.argv[1], sys.argv[2], sys.argv[3],
         sys.argv[4] if len(sys.argv) > 4 else os.path.join(here, "../../crates/sim/costs/pg15.toml"))
