"""Computes crates/sim/costs/pg15.toml from the per-run function summaries (*.funcs.json)
that measure.sh writes. Every figure is a difference of a long and a short run divided by the
difference in calls (or transactions), so start-up cost cancels."""
import json, os, re, subprocess, datetime

# Static functions of the Debian binary (no symbols: callgrind names them by address), identified
# by their callers, callees and call counts (docs/measurements/pg-costs.md says how). They hold for
# 15.18 (Debian 15.18-0+deb12u1) only; table() checks the version.
STATIC = {
    "SetupLockInTable": "0x000000000045d510",       # LockAcquireExtended -> hash_search_with_hash_value x2
    "GrantLockLocal": "0x000000000045d730",         # -> ResourceOwnerRememberLock
    "FastPathUnGrantRelationLock": "0x000000000045d220",  # LockReleaseAll, no callees, 2 per -S txn
    "RemoveLocalLock": "0x000000000045d3b0",        # -> hash_search (HASH_REMOVE), pfree
    "PinBuffer": "0x000000000043caf0",              # ReadBuffer_common, once per buffer hit
    "ReadBuffer_common": "0x00000000004405c0",      # ReadBufferExtended's only callee
    "UnpinBuffer": "0x000000000043f760",            # ReleaseAndReadBuffer's
    "_bt_search": "0x00000000001b7fc0",             # _bt_first -> _bt_relandgetbuf, _bt_moveright
    "_bt_binsrch": "0x00000000001b7cd0",            # -> _bt_compare; from _bt_first and _bt_search
    "_bt_readpage": "0x00000000001b68e0",           # -> _bt_checkkeys
    "CleanUpLock": "0x000000000045dcd0",            # -> hash_search_with_hash_value x2, SHMQueueDelete
    "UnGrantLock": "0x000000000045d1d0",            # LockRelease/LockReleaseAll, no callees
    "GetXLogBuffer": "0x00000000001eaa90",          # XLogInsertRecord, once per record + per page crossed
    "WALInsertLockAcquire": "0x00000000001e78c0",   # XLogInsertRecord -> LWLockAcquire
    "WALInsertLockRelease": "0x00000000001e77d0",   # XLogInsertRecord -> LWLockReleaseClearVar
    "XLogBytePosToEndRecPtr": "0x00000000001e5e70", # XLogInsertRecord and WaitXLogInsertionsToFinish, no callees
    "WaitXLogInsertionsToFinish": "0x00000000001e62e0",  # XLogFlush -> LWLockWaitForVar x8
    "XLogWrite": "0x00000000001e9f80",              # XLogFlush, once per flush that writes
    "TransactionIdSetPageStatus": "0x00000000001d3a00",
}
LW = ("LWLockAcquire", "LWLockRelease", "LWLockConditionalAcquire", "LWLockAcquireOrWait",
      "LWLockReleaseClearVar", "LWLockWaitForVar", "LWLockUpdateVar", "LWLockWakeup")
# the functions table.py reads: the only ones kept in data/*.funcs.json
NEEDED = set(LW) | set(STATIC) | set(STATIC.values()) | {
    "LockAcquireExtended", "LockRelease", "LockReleaseAll", "VirtualXactLockTableCleanup",
    "MemoryContextAlloc", "hash_search", "hash_seq_search", "ResourceOwnerForgetLock",
    "GetSnapshotData", "ProcArrayEndTransaction", "GetNewTransactionId", "BufTableHashCode",
    "BufTableLookup", "ReleaseBuffer", "ReleaseAndReadBuffer", "ReadBufferExtended", "LockBuffer",
    "_bt_moveright", "_bt_first", "heap_hot_search_buffer", "XLogInsertRecord", "XLogFlush",
    "pg_comp_crc32c_sse42", "MarkCurrentTransactionIdLoggedIfAny", "TransactionIdSetTreeStatus",
    "TransactionIdGetStatus", "SimpleLruReadPage", "SimpleLruReadPage_ReadOnly",
    "CommitTransactionCommand", "PostgresMain", "debugtup", "printtup", "exec_simple_query"}
EMPTY = {"incl": 0, "calls": 0, "callees": {}, "callers": {}}


class Run:
    """Per-unit differences between the short and long run of one kind."""

    def __init__(self, data, kind, short, long_, suffix=""):
        self.a = json.load(open(f"{data}/{kind}{short}{suffix}.funcs.json"))
        self.b = json.load(open(f"{data}/{kind}{long_}{suffix}.funcs.json"))
        self.n = long_ - short
        self.kind = kind
        self.ta = self._total(f"{data}/{kind}{short}{suffix}.inclusive.txt")
        self.tb = self._total(f"{data}/{kind}{long_}{suffix}.inclusive.txt")
        self.lsn = None
        la, lb = f"{data}/{kind}{short}{suffix}.lsn", f"{data}/{kind}{long_}{suffix}.lsn"
        if os.path.exists(la) and os.path.exists(lb):
            def span(p):
                v = [int(x.split("/")[0], 16) << 32 | int(x.split("/")[1], 16) for x in open(p).read().split()]
                return v[-1] - v[0] if len(v) >= 2 else None
            sa, sb = span(la), span(lb)
            if sa is not None and sb is not None:
                self.lsn = (sb - sa) / self.n

    @staticmethod
    def _total(p):
        for line in open(p):
            if "PROGRAM TOTALS" in line:
                return int(line.split()[0].replace(",", ""))
        return 0

    def f(self, fn, which):
        return (self.a if which == "a" else self.b).get(STATIC.get(fn, fn), EMPTY)

    def incl(self, fn):
        return (self.f(fn, "b")["incl"] - self.f(fn, "a")["incl"]) / self.n

    def calls(self, fn):
        return (self.f(fn, "b")["calls"] - self.f(fn, "a")["calls"]) / self.n

    def callee(self, fn, c):
        c = STATIC.get(c, c)
        x, y = self.f(fn, "a")["callees"].get(c, [0, 0]), self.f(fn, "b")["callees"].get(c, [0, 0])
        return (y[0] - x[0]) / self.n, (y[1] - x[1]) / self.n

    def lw(self, fn):
        """LWLock calls made directly by fn (per unit)."""
        return sum(self.callee(fn, c)[0] for c in LW)

    def nolw(self, fn, wrappers=()):
        """fn's inclusive count minus its LWLock calls, also those made through the static
        wrappers it calls (each wrapper's LWLock calls pro rata to the calls from fn)."""
        v = self.incl(fn) - self.lw(fn)
        for w in wrappers:
            cw = self.calls(w)
            if cw:
                v -= self.lw(w) * self.callee(fn, w)[1] / cw
        return v

    def self_(self, fn):
        fa, fb = self.f(fn, "a"), self.f(fn, "b")
        return ((fb["incl"] - sum(v[0] for v in fb["callees"].values()))
                - (fa["incl"] - sum(v[0] for v in fa["callees"].values()))) / self.n

    def per_call(self, fn, v=None):
        c = self.calls(fn)
        return (self.incl(fn) if v is None else v) / c if c else 0.0

    def total(self):
        if self.kind.startswith("P"):  # server runs: the measured backend's main loop
            return self.incl("PostgresMain")
        return (self.tb - self.ta) / self.n

    def lw_total(self):
        return sum(self.incl(c) for c in LW)


def r1(x):
    return round(x, 1)


def main(data, short, long_, idle):
    short, long_, idle = int(short), int(long_), int(idle)
    R = lambda k, s=short, l=long_: Run(data, k, s, l)
    S, B, N, NS, NI, I, T = (R(k) for k in ("S", "B", "N", "NS", "NI", "I", "T"))
    A, AL, AS = (R(k, short * 5, long_ * 5) for k in ("A", "AL", "AS"))
    PS, PN, PT, PB, PI, PNS, PNI, PNX = (R(k) for k in ("PS", "PN", "PT", "PB", "PI", "PNS", "PNI", "PNX"))
    reg = {}

    def put(name, instr, how, covers, per_item=0.0, item="", estimated=False, runs=""):
        reg[name] = dict(instructions=r1(instr), per_item=r1(per_item), item=item,
                         estimated=estimated, covers=covers, how=how + (f" [{runs}]" if runs else ""))

    # ---- lock manager -------------------------------------------------------------------
    lae = "LockAcquireExtended"
    local_hit = AL.per_call(lae)                          # LOCALLOCK found: lookup + GrantLockLocal
    hit_self = AL.per_call(lae, AL.self_(lae))
    # -S: new LOCALLOCKs (MemoryContextAlloc of lockOwners once per new one) take the fast path
    s_calls = S.calls(lae)
    s_new = S.callee(lae, "MemoryContextAlloc")[1]
    s_hit = s_calls - s_new
    s_nolw = S.nolw(lae)
    s_self = S.self_(lae)
    newlocal_init = 30.0   # LOCALLOCK field set-up folded into LockAcquireExtended (estimate)
    fp = (s_self - s_hit * hit_self) / s_new - hit_self - newlocal_init
    local_new = (s_nolw - s_hit * local_hit) / s_new - fp
    put("lmgr.lock_acquire.local", local_new,
        f"-S: LockAcquireExtended per new lock ({s_new:.2f}/txn) minus the fast-path part; a "
        f"re-acquisition of a lock already held (LOCALLOCK found) costs {local_hit:.0f} "
        f"(advisory lock re-taken N times, 'AL'), see lmgr.lock_acquire.local_held",
        "LockAcquireExtended outside any LWLock: LOCALLOCK hash_search (HASH_ENTER, new entry), "
        "LockTagHashCode, lockOwners palloc, GrantLockLocal + ResourceOwnerRememberLock",
        runs="S, AL")
    put("lmgr.lock_acquire.local_held", local_hit,
        "per call of pg_advisory_xact_lock(1) repeated in one transaction (only the local path runs)",
        "LockAcquireExtended when the LOCALLOCK already holds the lock: hash_search (HASH_ENTER, found), GrantLockLocal",
        runs="AL")
    put("lmgr.lock_acquire.fastpath", fp,
        f"-S: LockAcquireExtended's own (folded) instructions per new lock minus the local path's "
        f"own instructions ({hit_self:.0f}, from AL) minus {newlocal_init:.0f} for LOCALLOCK set-up: "
        "FastPathGrantRelationLock is static and inlined, so its loop over the 16 slots is separated "
        "this way. Cross-check in the binary's disassembly (LockAcquireExtended+0x8e8..0x9a4): the slot "
        "loop is 10 instructions a slot, always all 16 (it looks for an unused slot and an existing "
        "entry), plus ~15 to set up and grant and ~10 for the strong-lock count check: ~185-195",
        "FastPathGrantRelationLock (16-slot scan and grant) under MyProc->fpInfoLock, plus "
        "FastPathStrongRelationLocks check", runs="S, AL")
    a_nolw = A.per_call(lae, A.nolw(lae))
    main_acq = a_nolw - local_new
    put("lmgr.lock_acquire.main", main_acq,
        f"advisory xact locks on distinct keys (never fast path): LockAcquireExtended per call minus "
        f"LWLock calls ({a_nolw:.0f}) minus lmgr.lock_acquire.local; SetupLockInTable (static, "
        f"{A.per_call('SetupLockInTable') if A.calls('SetupLockInTable') else 0:.0f}/call) measured on its own",
        "under the lock-manager partition LWLock: SetupLockInTable (LOCK and PROCLOCK hash_search_with_hash_value "
        "HASH_ENTER_NULL, queue init), LockCheckConflicts, GrantLock",
        runs="A, S")

    # releases: LockReleaseAll at commit (A: per main lock; S: fast-path locks)
    lra = "LockReleaseAll"
    a_locks = A.calls(lae)
    a_rel = A.nolw(lra) / a_locks
    a_rll = A.callee(lra, "RemoveLocalLock")[0] / a_locks
    a_hss = A.callee(lra, "hash_seq_search")[0] / a_locks
    a_rofl = A.callee(lra, "ResourceOwnerForgetLock")[0] / a_locks
    local_rel = a_rll + a_hss + a_rofl + 20.0
    put("lmgr.lock_release.local", local_rel,
        "per lock in LockReleaseAll (A): RemoveLocalLock (static) + hash_seq_search step + "
        "ResourceOwnerForgetLock + ~20 instructions of LockReleaseAll's loop (estimate)",
        "LockReleaseAll's/LockRelease's per-lock work outside LWLocks: LOCALLOCK hash_search HASH_REMOVE, "
        "pfree of lockOwners, resource-owner bookkeeping", estimated=True, runs="A")
    put("lmgr.lock_release.main", a_rel - local_rel,
        f"per lock in LockReleaseAll at commit of a transaction holding many main-table locks (A): "
        f"{a_rel:.0f} per lock excluding LWLock calls, minus lmgr.lock_release.local (whose ~20 "
        f"instructions of LockReleaseAll's own loop are an estimate: the split between the two is "
        f"estimated, their sum is measured). The partition "
        "LWLock is taken once per partition, not per lock, in LockReleaseAll",
        f"under the partition LWLock: PROCLOCK queue walk, UnGrantLock ({A.per_call('UnGrantLock'):.0f}), "
        f"LockTagHashCode, CleanUpLock ({A.per_call('CleanUpLock'):.0f}: PROCLOCK and LOCK "
        "hash_search_with_hash_value HASH_REMOVE)", estimated=True, runs="A")
    if AS.calls("LockRelease"):
        asr = AS.per_call("LockRelease", AS.nolw("LockRelease"))
        reg["lmgr.lock_release.main"]["how"] += (
            f"; cross-check: LockRelease (pg_advisory_unlock, AS) costs {asr:.0f} per call "
            f"excluding LWLock calls = local + main {asr - local_rel:.0f}")
    put("lmgr.lock_release_all", B.per_call(lra, B.nolw(lra, ("VirtualXactLockTableCleanup",))),
        "single-user BEGIN;END; (no locks held but the VXID): LockReleaseAll per call excluding LWLock "
        "calls (also VirtualXactLockTableCleanup's); two calls per transaction (default and user lock "
        "methods)",
        "LockReleaseAll's fixed part per call, whatever the locks: hash_seq_init/hash_seq_search over "
        "the LOCALLOCK table, the walk over the 16 partitions' PROCLOCK queues (SHMQueueNext per "
        "partition), VirtualXactLockTableCleanup", runs="B")
    fpu = S.per_call("FastPathUnGrantRelationLock")
    put("lmgr.lock_release.fastpath", fpu,
        "-S: FastPathUnGrantRelationLock (static, not inlined) inclusive per call (its loop visits all "
        "16 slots: ~14 instructions a slot)",
        "FastPathUnGrantRelationLock's 16-slot scan under fpInfoLock (LockReleaseAll takes fpInfoLock "
        "once for all of a backend's fast-path locks)", runs="S")
    # transfer: no pgbench script takes a strong relation lock; L does (LOCK TABLE ... IN SHARE MODE),
    # at max_connections 100 and 20: FastPathTransferRelationLocks (inlined) visits every PGPROC slot
    if os.path.exists(f"{data}/L{long_}m20.funcs.json"):
        L100, L20 = R("L"), Run(data, "L", short, long_, "m20")
        procs = L100.callee(lae, "LWLockAcquire")[1] - L20.callee(lae, "LWLockAcquire")[1]
        per_proc = (L100.nolw(lae) - L20.nolw(lae)) / procs
        fixed = L20.nolw(lae) - L20.callee(lae, "LWLockAcquire")[1] * per_proc - local_new - main_acq
        put("lmgr.fastpath_transfer", max(fixed, 0.0),
            f"single-user BEGIN; LOCK TABLE pgbench_branches IN SHARE MODE; END; at max_connections "
            f"100 and 20 ({procs:.0f} fewer PGPROC slots, counted by their fpInfoLock acquisitions): "
            f"LockAcquireExtended's difference excluding LWLock calls / slots = {per_proc:.1f} per slot; "
            f"fixed = the rest beyond lmgr.lock_acquire.local + .main ({fixed:.0f}, clamped at 0). Every "
            "slot in ProcGlobal->allProcs (max_connections + autovacuum + auxiliary + prepared-xact "
            "slots, used or not) is visited with one fpInfoLock acquire/release (not included: the "
            "simulator's LWLock); a backend of the same database also has its 16 slots scanned "
            "(~80 more, estimated from the loop: not measured, no other backend here)",
            "FastPathTransferRelationLocks (inlined into LockAcquireExtended) per PGPROC slot: "
            "databaseId test, (same database) 16-slot fpRelId scan, transfer of a matching entry "
            "(SetupLockInTable + GrantLock)", per_item=per_proc,
            item="PGPROC slot visited (allProcCount; plus one fpInfoLock LWLock pair each)", runs="L, L-m20")
    else:
        put("lmgr.fastpath_transfer", 0.0,
            "not measured in this run (no L passes): estimated from FastPathTransferRelationLocks' "
            "structure: per PGPROC slot a databaseId test (~18) and, for a backend of the same "
            "database, the 16-slot scan (~80)",
            "FastPathTransferRelationLocks, per PGPROC scanned (fixed part 0)", per_item=18.0,
            item="PGPROC slot visited (allProcCount; plus one fpInfoLock LWLock pair each)", estimated=True)

    # ---- procarray ----------------------------------------------------------------------
    gsd = "GetSnapshotData"
    reuse = S.per_call(gsd, S.nolw(gsd))
    n_calls = N.calls(gsd)
    full = N.nolw(gsd) - (n_calls - 1) * reuse        # one full scan per -N transaction
    slope = (PNX.nolw(gsd) - PN.nolw(gsd)) / idle        # per txn = per full scan
    put("procarray.get_snapshot_data", full - slope,
        f"-N single-user: GetSnapshotData excluding LWLock calls, {n_calls:.0f} calls/txn of which one "
        f"(the first after the transaction's own commit bumped xactCompletionCount) scans and the rest "
        f"reuse the snapshot ({reuse:.0f} each, from -S); minus one entry ({slope:.1f}). Slope: server "
        f"-N via pgbench -M prepared with {idle} idle sessions vs none, difference per transaction "
        f"(one full scan) / {idle}; the loop over other_xids is 9 instructions per idle entry in "
        "the binary's disassembly",
        "GetSnapshotData (inclusive) under ProcArrayLock shared, full scan: xid array loop, xmin "
        "computation, subxids; excluding the LWLock calls", per_item=slope,
        item="backend in the proc array (idle: no xid)", runs="S, N, PN, PNX")
    put("procarray.get_snapshot_data.reuse", reuse,
        "-S single-user: every call reuses (no xid-bearing commit in between); PostgreSQL 14+ only",
        "GetSnapshotData when GetSnapshotDataReuse succeeds (xactCompletionCount unchanged), "
        "excluding the LWLock calls", runs="S")
    pae = "ProcArrayEndTransaction"
    put("procarray.end_transaction", N.per_call(pae, N.nolw(pae)),
        f"-N single-user: ProcArrayEndTransaction per call (one per write transaction, "
        f"LWLockConditionalAcquire succeeds so no group clear) excluding LWLock calls; a read-only "
        f"transaction's call (no xid, no lock) costs {S.per_call(pae, S.nolw(pae)):.0f}. Under "
        "contention (not measured: one client) the group-clear leader runs "
        "ProcArrayEndTransactionInternal for each member, about this figure + ~20 of list walking and "
        "wakeup per member (see release.pg96)",
        "ProcArrayEndTransaction -> ProcArrayEndTransactionInternal (static) under ProcArrayLock "
        "exclusive: clear xid/xmin, subxids, xactCompletionCount++, latestCompletedXid", runs="N, S")
    gnt = "GetNewTransactionId"
    put("procarray.xid_assign", N.per_call(gnt, N.nolw(gnt)),
        "-N single-user: GetNewTransactionId per call excluding LWLock calls (ExtendCLOG, "
        "ExtendSUBTRANS, ExtendCommitTs included; page zeroing amortised)",
        "GetNewTransactionId under XidGenLock exclusive: nextXid advance, Extend* checks, "
        "the proc's xid and subxid-array updates", runs="N")

    # ---- buffer manager -----------------------------------------------------------------
    mapping = S.per_call("BufTableHashCode") + S.per_call("BufTableLookup")
    put("bufmgr.mapping_lookup", mapping,
        "-S single-user, tables prewarmed: BufTableHashCode + BufTableLookup inclusive per call "
        f"({S.per_call('BufTableHashCode'):.0f} + {S.per_call('BufTableLookup'):.0f}); the hash is "
        "computed before the partition lock is taken",
        "BufTableHashCode (tag hash) and BufTableLookup (hash_search_with_hash_value HASH_FIND) under "
        "the buffer-mapping partition lock shared", runs="S")
    put("bufmgr.pin", S.per_call("PinBuffer"),
        "-S single-user: PinBuffer (static, named by address) inclusive per call",
        "PinBuffer: CAS loop on the buffer state, usage count, private refcount entry "
        "(GetPrivateRefCountEntry/NewPrivateRefCountEntry), ResourceOwnerRememberBuffer", runs="S")
    put("bufmgr.unpin", S.per_call("ReleaseBuffer"),
        f"-S single-user: ReleaseBuffer inclusive per call; UnpinBuffer from ReleaseAndReadBuffer "
        f"costs {S.per_call('UnpinBuffer'):.0f}",
        "ReleaseBuffer -> UnpinBuffer: private refcount, ResourceOwnerForgetBuffer, atomic "
        "state decrement", runs="S")
    bs = S.incl("_bt_binsrch"); mr = S.incl("_bt_moveright"); rp = S.incl("_bt_readpage")
    hh = S.incl("heap_hot_search_buffer"); holds = S.calls("LockBuffer") / 2
    idx_pages = S.calls("_bt_binsrch")
    put("bufmgr.content_lock_hold.read", (bs + mr + rp + hh) / holds,
        f"-S single-user: per share content-lock hold ({holds:.0f}/txn: {idx_pages:.0f} index pages, "
        f"1 heap page): (_bt_binsrch {bs:.0f} + _bt_moveright {mr:.0f} + _bt_readpage {rp:.0f} + "
        f"heap_hot_search_buffer {hh:.0f} per txn) / holds; index page ~{(bs + mr + rp) / idx_pages:.0f}, "
        f"heap page ~{hh:.0f}",
        "work under a page's content lock shared in an index scan: B-tree binary search (_bt_compare), "
        "right-link check, leaf _bt_readpage/_bt_checkkeys; heap_hot_search_buffer with "
        "HeapTupleSatisfiesVisibility", runs="S")

    # ---- WAL ----------------------------------------------------------------------------
    xir = "XLogInsertRecord"
    recs = N.calls(xir)
    conv = N.per_call("XLogBytePosToEndRecPtr")
    reserve = 12.0 + conv + 2 * 20.0
    put("xlog.insert_reserve", reserve,
        f"ReserveXLogInsertLocation is inlined into XLogInsertRecord: the out-of-line "
        f"XLogBytePosToEndRecPtr is measured ({conv:.0f}, -N), two inlined XLogBytePosToRecPtr taken as "
        "~20 each and the arithmetic under insertpos_lck as ~12 (code structure)",
        "ReserveXLogInsertLocation: CurrBytePos/PrevBytePos update under insertpos_lck (~12 of these), "
        "then XLogBytePosToRecPtr x2 and XLogBytePosToEndRecPtr outside it", estimated=True, runs="N")
    memcpy_callee = [c for c in N.f(xir, "b")["callees"] if "memcpy" in c or "0x00000000001d70d0" in c]
    mc = sum(N.callee(xir, c)[0] for c in memcpy_callee)
    wal_per_txn = N.lsn or 0.0
    rec_bytes = wal_per_txn / recs if recs else 0.0
    # per byte: the same number of INSERTs of 100- and 1900-byte rows (WS, WL)
    ws = json.load(open(f"{data}/WS{long_}.funcs.json")); wl = json.load(open(f"{data}/WL{long_}.funcs.json"))
    def span(p):
        v = [int(x.split("/")[0], 16) << 32 | int(x.split("/")[1], 16) for x in open(p).read().split()]
        return v[-1] - v[0]
    wbytes = span(f"{data}/WL{long_}.lsn") - span(f"{data}/WS{long_}.lsn")
    per_byte = (wl[xir]["incl"] - ws[xir]["incl"]) / wbytes
    gx = STATIC["GetXLogBuffer"]
    pb_gxb = (wl[xir]["callees"][gx][0] - ws[xir]["callees"][gx][0]) / wbytes
    pages = wl[xir]["callees"][gx][1] - ws[xir]["callees"][gx][1]
    per_page = (wl[xir]["callees"][gx][0] - ws[xir]["callees"][gx][0]) / pages if pages else 0.0
    lockwrap = N.incl("WALInsertLockAcquire") + N.incl("WALInsertLockRelease")
    other = sum(N.callee(xir, c)[0] for c in ("pg_comp_crc32c_sse42", "MarkCurrentTransactionIdLoggedIfAny"))
    copy_rec = (N.incl(xir) - lockwrap - other) / recs - reserve
    put("xlog.insert_copy", copy_rec - per_byte * rec_bytes,
        f"-N single-user (full_page_writes=off): XLogInsertRecord inclusive minus "
        f"WALInsertLockAcquire/Release (static, with their LWLock calls: {lockwrap / recs:.0f}/record), "
        f"the header CRC finish and xlog.insert_reserve = {copy_rec:.0f} per record at the mean record "
        f"size {rec_bytes:.0f} B ({recs:.2f} records and {wal_per_txn:.0f} WAL bytes per txn, from "
        f"pg_current_wal_insert_lsn; memcpy {mc / recs:.0f} of it); fixed = that minus per_item x mean "
        f"size. Per byte: {long_} INSERTs of 1900-byte vs 100-byte uncompressed rows (WL vs WS): "
        f"XLogInsertRecord's difference / the WAL bytes' difference ({wbytes}); of it GetXLogBuffer "
        f"{pb_gxb:.3f}/byte (new WAL pages: {per_page:.0f} per page crossed, AdvanceXLInsertBuffer "
        "initialising the page), the rest memcpy",
        "CopyXLogRecordToWAL (inlined): GetXLogBuffer per page, memcpy of the record's chunks, "
        "page-header handling; XLogInsertRecord's bookkeeping after the copy", per_item=0.0,
        item="byte of WAL record", runs="N, WS, WL")
    reg["xlog.insert_copy"]["per_item"] = round(per_byte, 3)
    xf = "XLogFlush"
    flushes = N.calls("XLogWrite")
    wr = sum(N.callee("XLogWrite", c)[0] for c in N.f("XLogWrite", "b")["callees"]
             if "write" in c.lower() or "issue_xlog_fsync" in c)
    fl = N.nolw(xf, ("WaitXLogInsertionsToFinish", "XLogWrite")) - wr
    put("xlog.flush_bookkeeping", fl / flushes,
        f"-N single-user, fsync=off: XLogFlush inclusive per flush that writes ({flushes:.2f}/txn; "
        f"{N.calls(xf):.2f} calls/txn, the rest return early) minus LWLock calls (also "
        f"WaitXLogInsertionsToFinish's LWLockWaitForVar on the 8 insertion locks) and the write/fsync "
        f"calls ({wr:.0f}/txn)",
        "XLogFlush: LogwrtResult checks under info_lck, WaitXLogInsertionsToFinish (static), XLogWrite's "
        "bookkeeping (static: page loop, LogwrtResult update), WalSndWakeup", runs="N")

    # ---- CLOG / SLRU --------------------------------------------------------------------
    tst = "TransactionIdSetTreeStatus"
    srp = N.per_call("SimpleLruReadPage", N.nolw("SimpleLruReadPage"))
    put("clog.set_status", N.per_call(tst, N.nolw(tst, ("TransactionIdSetPageStatus",))) - srp,
        "-N single-user: TransactionIdSetTreeStatus per call excluding LWLock calls and the nested "
        "SimpleLruReadPage (slru.read_page)",
        "TransactionIdSetTreeStatus -> TransactionIdSetPageStatus(Internal) under XactSLRULock: status "
        "bits, group LSN, page dirty", runs="N")
    tgs = "TransactionIdGetStatus"
    gs_run = T if T.calls(tgs) > N.calls(tgs) else N
    put("clog.get_status", gs_run.per_call(tgs, gs_run.nolw(tgs, ("SimpleLruReadPage_ReadOnly",))),
        f"{'tpcb-like' if gs_run is T else '-N'} single-user: TransactionIdGetStatus per call excluding "
        "LWLock calls (the page lookup of SimpleLruReadPage_ReadOnly included)",
        "TransactionIdGetStatus: SimpleLruReadPage_ReadOnly's slot search under XactSLRULock shared, "
        "the 2-bit status read", runs="N or T")
    put("slru.read_page", srp,
        "-N single-user: SimpleLruReadPage per call (the page is always resident: a hit; "
        "SlruPhysicalReadPage's I/O is not exercised and not included)",
        "SimpleLruReadPage: slot search, LRU update, pgstat hit count (the read I/O excluded)", runs="N")

    # ---- LWLock operations themselves (for the older releases' derivations) ---------------
    put("lwlock.acquire", S.per_call("LWLockAcquire"),
        "-S single-user: LWLockAcquire inclusive per call, uncontended",
        "LWLockAcquire: atomic CAS on the state word, held_lwlocks", runs="S")
    put("lwlock.release", S.per_call("LWLockRelease"),
        "-S single-user: LWLockRelease inclusive per call, no waiters",
        "LWLockRelease: atomic sub on the state word, held_lwlocks", runs="S")

    # ---- statements: residuals --------------------------------------------------------------
    deep = {lra: ("VirtualXactLockTableCleanup",), xf: ("WaitXLogInsertionsToFinish", "XLogWrite"),
            tst: ("TransactionIdSetPageStatus",), tgs: ("SimpleLruReadPage_ReadOnly",),
            xir: ("WALInsertLockAcquire", "WALInsertLockRelease")}

    def covered(r):
        c = r.lw_total()
        for fn in (lae, "LockRelease", lra, gsd, pae, gnt, xf, tst, tgs, xir):
            c += r.nolw(fn, deep.get(fn, ()))
        for fn in ("BufTableHashCode", "BufTableLookup", "PinBuffer", "ReleaseBuffer", "UnpinBuffer",
                   "_bt_binsrch", "_bt_moveright", "_bt_readpage", "heap_hot_search_buffer"):
            c += r.incl(fn)
        return c

    def resid(r):
        out = r.incl("debugtup") if not r.kind.startswith("P") else 0.0
        return r.total() - covered(r) - out

    rs = {k: resid(v) for k, v in dict(S=S, B=B, N=N, NS=NS, NI=NI, I=I, T=T, PS=PS, PN=PN, PT=PT,
                                        PB=PB, PI=PI, PNS=PNS, PNI=PNI).items()}
    # server runs (pgbench -M prepared over a socket), scripts differing by one statement
    sel_w = rs["PN"] - rs["PNS"]
    ins = rs["PN"] - rs["PNI"]
    upd = rs["PNS"] - rs["PI"]
    upd_small = (rs["PT"] - rs["PN"]) / 2
    # BEGIN vs END in BEGIN;END;: the END's CommitTransactionCommand does the commit
    ctc = PB.incl("CommitTransactionCommand") - PB.lw_total()
    for fn in (lae, "LockRelease", lra, gsd, pae):
        ctc -= PB.nolw(fn, deep.get(fn, ()))
    rt = (rs["PB"] - ctc) / 2          # one statement's round trip (BEGIN's, END's), taken as equal
    begin = rt
    commit_ro = ctc
    commit_w = rs["PI"] - ins - begin
    su = dict(sel=rs["N"] - rs["NS"], ins=rs["N"] - rs["NI"], upd=rs["NS"] - rs["I"],
              small=(rs["T"] - rs["N"]) / 2, b=rs["B"], s=rs["S"])
    stmt_how = ("residuals (the backend's total minus the regions' functions and all LWLock calls) of "
                "server runs (pgbench -M prepared -c 1 over a socket, custom scripts in "
                "tools/pg-costs/scripts) that differ by this statement; Bind/Execute protocol work, "
                "printtup's row output and socket I/O included")
    put("statement.select_pk", rs["PS"] - commit_ro,
        f"-S residual per transaction ({rs['PS']:.0f}) minus a read-only commit's ({commit_ro:.0f}); "
        f"the implicit transaction start stays in. In a write transaction (PN minus PNS) the SELECT "
        f"costs {sel_w:.0f}. Single-user (EXECUTE, debugtup row output subtracted): "
        f"{su['s']:.0f} per -S transaction; " + stmt_how,
        "SELECT abalance FROM pgbench_accounts WHERE aid = $1 (Bind/Execute, executor start/run/end, "
        "index scan set-up, row output) outside the regions", runs="PS, PB, PN, PNS")
    put("statement.update_pk", upd,
        f"PNS (BEGIN; UPDATE accounts; INSERT; END) minus PI (BEGIN; INSERT; END); single-user "
        f"{su['upd']:.0f}; " + stmt_how,
        "UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid = $2: executor, index scan, "
        "heap_update (new tuple version, HOT or index insert) under the exclusive content lock, outside "
        "the regions", runs="PNS, PI")
    put("statement.update_pk.small_table", upd_small,
        f"(tpcb-like minus -N)/2, server; single-user {su['small']:.0f}; " + stmt_how,
        "UPDATE pgbench_tellers / pgbench_branches by key (tpcb-like's 2nd and 3rd UPDATE; HOT chains "
        "on one hot page)", runs="PT, PN")
    put("statement.insert_history", ins,
        f"PN minus PNI (-N without the INSERT); single-user {su['ins']:.0f}; " + stmt_how,
        "INSERT INTO pgbench_history VALUES (...): executor, heap_insert (RelationGetBufferForTuple)",
        runs="PN, PNI")
    put("statement.begin", begin,
        f"PB (BEGIN; END;) residual minus the END's CommitTransactionCommand outside regions "
        f"({commit_ro:.0f}), halved (the BEGIN's and the END's protocol round trips taken as equal); single-user "
        f"BEGIN;END; residual {su['b']:.0f} for both; " + stmt_how,
        "BEGIN: the statement's protocol round trip, StartTransactionCommand/StartTransaction", runs="PB")
    put("statement.commit", commit_w,
        f"PI residual minus statement.insert_history minus statement.begin; a read-only END costs "
        f"{commit_ro:.0f}; " + stmt_how,
        "END of a write transaction: the statement round trip, CommitTransaction (RecordTransactionCommit's "
        "record assembly, resource-owner release, AtEOXact_*), outside the xlog/clog/procarray/lmgr regions",
        runs="PI, PN, PNI, PB")
    reg["statement.commit.read_only"] = dict(reg["statement.commit"])
    reg["statement.commit.read_only"].update(
        instructions=r1(commit_ro), how="PB: the END's CommitTransactionCommand outside regions and "
        f"LWLock calls, without the END statement's protocol round trip (add {rt:.0f}, = statement.begin, "
        "for an explicit END; -S's implicit commit has none); " + stmt_how,
        covers="END (or -S's implicit commit) of a read-only transaction (no xid): CommitTransaction "
               "without a commit record")

    # ---- whole transactions ----------------------------------------------------------------
    for name, srv, single, script in (("txn.select_only", PS, S, "select-only"),
                                       ("txn.simple_update", PN, N, "simple-update"),
                                       ("txn.tpcb_like", PT, T, "tpcb-like")):
        put(name, srv.total(),
            f"server backend under callgrind, pgbench -b {script} -M prepared -c 1, {long_} vs "
            f"{short} transactions: PostgresMain inclusive per transaction (single-user mode with "
            f"EXECUTE statements: {single.total():.0f} per transaction, of which debugtup "
            f"{single.incl('debugtup'):.0f}); LWLock calls {srv.lw_total():.0f} per transaction",
            "the whole transaction in the backend: protocol, parse of Bind/Execute, executor, all "
            "regions, LWLock calls, row output and socket reads/writes (user space only)",
            runs=f"{srv.kind}, {single.kind}")

    # ---- sum check ----------------------------------------------------------------------------
    check = {}
    g = lambda k: reg[k]["instructions"]
    stm = {"select_only": g("statement.select_pk") + g("statement.commit.read_only"),  # implicit commit
           "simple_update": g("statement.begin") + g("statement.update_pk") + sel_w + g("statement.insert_history") + g("statement.commit"),
           "tpcb_like": g("statement.begin") + g("statement.update_pk") + sel_w + 2 * g("statement.update_pk.small_table") + g("statement.insert_history") + g("statement.commit")}
    def from_constants(r):
        """the regions' per-call figures times the calls counted in run r, plus LWLock calls"""
        n_new = r.callee(lae, "MemoryContextAlloc")[1]
        n_main = r.calls("SetupLockInTable")
        held = r.calls(lae) - n_new
        v = n_main * (g("lmgr.lock_acquire.main") + g("lmgr.lock_acquire.local")) \
            + (n_new - n_main) * (g("lmgr.lock_acquire.fastpath") + g("lmgr.lock_acquire.local")) \
            + held * g("lmgr.lock_acquire.local_held")
        v += r.calls("FastPathUnGrantRelationLock") * g("lmgr.lock_release.fastpath") \
            + r.calls("CleanUpLock") * g("lmgr.lock_release.main") \
            + r.calls("RemoveLocalLock") * g("lmgr.lock_release.local") \
            + r.calls(lra) * g("lmgr.lock_release_all")
        full = r.calls(gnt)
        v += full * (g("procarray.get_snapshot_data") + reg["procarray.get_snapshot_data"]["per_item"]) \
            + (r.calls(gsd) - full) * g("procarray.get_snapshot_data.reuse")
        v += full * (g("procarray.end_transaction") + g("procarray.xid_assign"))
        v += r.calls("BufTableLookup") * g("bufmgr.mapping_lookup") + r.calls("PinBuffer") * g("bufmgr.pin") \
            + (r.calls("ReleaseBuffer") + r.calls("UnpinBuffer")) * g("bufmgr.unpin")
        v += (r.calls("_bt_binsrch") + r.calls("heap_hot_search_buffer")) * g("bufmgr.content_lock_hold.read")
        recs = r.calls(xir)
        v += recs * (g("xlog.insert_reserve") + g("xlog.insert_copy")) \
            + (r.lsn or rec_bytes * recs) * reg["xlog.insert_copy"]["per_item"]
        v += r.calls("XLogWrite") * g("xlog.flush_bookkeeping")
        v += r.calls(tst) * g("clog.set_status") + r.calls(tgs) * g("clog.get_status") \
            + r.calls("SimpleLruReadPage") * g("slru.read_page")
        v += r.lw_total()
        return v

    for name, srv in (("select_only", PS), ("simple_update", PN), ("tpcb_like", PT)):
        c = covered(srv)
        k = from_constants(srv)
        check[name] = dict(total=srv.total(), regions_and_lwlocks=c, statements=stm[name],
                           difference=srv.total() - c - stm[name], regions_from_constants=k,
                           constants_vs_measured=k - c)

    derive(reg)
    return emit(reg, check, short, long_, idle)


def derive(reg):
    """Older releases, derived from the PostgreSQL 15 figures and the older code's structure."""
    g = lambda k: reg[k]["instructions"]
    gs, gsi = g("procarray.get_snapshot_data"), reg["procarray.get_snapshot_data"]["per_item"]
    lwa, lwr = g("lwlock.acquire"), g("lwlock.release")
    rel = {}
    # GetSnapshotData before 14: loop over pgprocnos, per entry PGXACT (9.2+) or PGPROC (9.1) reads of
    # vacuumFlags, xmin (min computation) and xid, no reuse
    rel["procarray.get_snapshot_data"] = {
        "pg91": (gs, 14.0, "9.1: the loop loads procArray->procs[i] and reads that PGPROC's "
                 "vacuumFlags (test), xmin (TransactionIdIsNormal + NormalTransactionIdPrecedes vs "
                 "globalxmin) and xid (IsNormal) for every entry: ~14 instructions per idle entry vs "
                 "15's 9 (measured in 15's disassembly: load xid, compare, next); the extra cost in 9.1 "
                 "is the PGPROC cache lines, not instructions; fixed part as 15's full scan; no reuse: "
                 "every call scans"),
        "pg92": (gs, 15.0, "9.2-13: the same three reads from PGXACT via pgprocnos[] (one more load "
                 "and an index computation than 9.1): ~15 per idle entry; every call scans"),
        "pg96": (gs, 15.0, "as 9.2 (9.6 unchanged in this loop); every call scans"),
    }
    rel["procarray.get_snapshot_data.reuse"] = {
        k: (gs, 0.0, "no snapshot reuse before 14: every call is a full scan (this figure = the full "
                     "scan's fixed part; add per_item of procarray.get_snapshot_data)") for k in ("pg91", "pg92", "pg96")}
    # LWLock before 9.5: spinlock inside the LWLock
    for k, add in (("lwlock.acquire", 12.0), ("lwlock.release", 12.0)):
        rel[k] = {r: (g(k) + add - 6.0, 0.0, "pre-9.5 LWLock: SpinLockAcquire/Release of lock->mutex "
                      "around the shared/exclusive counters (+~12: TAS, test, release store) instead of "
                      "15's atomic CAS/sub on the state word (~-6)") for r in ("pg91", "pg92")}
        rel[k]["pg96"] = (g(k), 0.0, "9.5+ atomic LWLock: as 15")
    # lock manager
    rel["lmgr.lock_acquire.fastpath"] = {
        "pg91": (0.0, 0.0, "9.1 has no fast path: every relation lock takes lmgr.lock_acquire.main "
                 "under the partition lock"),
        "pg92": (g("lmgr.lock_acquire.fastpath"), 0.0, "9.2-9.6: the same 16-slot fast path (backendLock "
                 "instead of fpInfoLock)"),
        "pg96": (g("lmgr.lock_acquire.fastpath"), 0.0, "as 9.2")}
    rel["lmgr.lock_release.fastpath"] = {
        "pg91": (0.0, 0.0, "9.1: no fast path, every release is lmgr.lock_release.main"),
        "pg92": (g("lmgr.lock_release.fastpath"), 0.0, "same 16-slot scan"),
        "pg96": (g("lmgr.lock_release.fastpath"), 0.0, "same 16-slot scan")}
    rel["lmgr.fastpath_transfer"] = {
        "pg91": (0.0, 0.0, "9.1: no fast path, nothing to transfer"),
        "pg92": (0.0, reg["lmgr.fastpath_transfer"]["per_item"], "same structure (backendLock "
                 "instead of fpInfoLock), every PGPROC slot visited"),
        "pg96": (0.0, reg["lmgr.fastpath_transfer"]["per_item"], "same structure")}
    # WAL insertion before 9.4: one WALInsertLock over reserve + copy
    rel["xlog.insert_reserve"] = {
        r: (g("xlog.insert_reserve"), 0.0, "9.1-9.3: no insertpos_lck: the position is advanced under "
            "WALInsertLock together with the copy (charge reserve + copy under that one lock); the "
            "instruction count is taken as 15's") for r in ("pg91", "pg92")}
    # buffer pins before 9.6: buffer header spinlock; 9.1: PrivateRefCount array (no hash)
    rel["bufmgr.pin"] = {
        "pg91": (g("bufmgr.pin") - 40.0, 0.0, "9.1: LockBufHdr spinlock instead of the CAS loop (similar "
                 "count) and a plain PrivateRefCount[] array instead of 9.5's refcount array+hash "
                 "(~-40)"),
        "pg92": (g("bufmgr.pin") - 40.0, 0.0, "as 9.1"),
        "pg96": (g("bufmgr.pin"), 0.0, "9.6 atomic state word and private refcount entries, as 15")}
    rel["bufmgr.unpin"] = {
        "pg91": (g("bufmgr.unpin") - 40.0, 0.0, "as bufmgr.pin"),
        "pg92": (g("bufmgr.unpin") - 40.0, 0.0, "as bufmgr.pin"),
        "pg96": (g("bufmgr.unpin"), 0.0, "as 15")}
    rel["lmgr.lock_acquire.main"] = {
        "pg91": (g("lmgr.lock_acquire.main"), 0.0, "9.1: the same LOCK/PROCLOCK hash inserts and "
                 "conflict check (SetupLockInTable's code was inline in LockAcquireExtended); with no fast "
                 "path every relation lock pays it, under the partition LWLock"),
        "pg92": (g("lmgr.lock_acquire.main"), 0.0, "as 15"),
        "pg96": (g("lmgr.lock_acquire.main"), 0.0, "as 15")}
    pe = g("procarray.end_transaction")
    rel["procarray.end_transaction"] = {  # pg96's per_item also holds for 15's group clear
        "pg91": (pe - 10.0, 0.0, "9.1: clears PGPROC xid/xmin/subxids under ProcArrayLock exclusive; "
                 "no xactCompletionCount and no dense xids[]/statusFlags[] copies to keep in step "
                 "(~-10 vs 15)"),
        "pg92": (pe - 10.0, 0.0, "9.2-9.5: as 9.1 on PGXACT"),
        "pg96": (pe - 10.0, pe + 20.0, "9.6: a backend that cannot get ProcArrayLock joins the group "
                 "(lock-free list push, sleep); the leader runs ProcArrayEndTransactionInternal for "
                 "each member plus ~20 of list walking and wakeup per member (per_item, charged "
                 "to the leader under the lock)")}
    for k, rs in rel.items():
        reg[k]["release"] = {r: dict(instructions=round(v[0], 1), per_item=round(v[1], 1),
                                     estimated=True, how="derived: " + v[2]) for r, v in rs.items()}


def q(s):
    return json.dumps(s)


def emit(reg, check, short, long_, idle):
    ver = subprocess.run([os.environ.get("PGBIN", "/usr/lib/postgresql/15/bin") + "/postgres", "--version"],
                         capture_output=True, text=True).stdout.strip()
    vg = subprocess.run(["valgrind", "--version"], capture_output=True, text=True).stdout.strip()
    out = ["# PostgreSQL 15's own instruction counts per lock-stack region, measured with callgrind.",
           "# Generated by tools/pg-costs/measure.sh (see tools/pg-costs/README.md); do not edit by hand.",
           "# instructions: per call (fixed part); per_item: per `item` on top (0 when none).",
           "# Regions exclude the LWLock calls themselves (lwlock.acquire/release give those).",
           "", "[meta]",
           f"postgres = {q(ver + ', as installed (Debian package, no debug symbols)')}",
           f"tool = {q(vg + ' callgrind, Ir (instructions executed, user space)')}",
           "method = " + q(f"differences of {long_} vs {short} transactions (locks: x5) of the same "
                           "script, per call; single-user mode (postgres --single, EXECUTE of prepared "
                           "statements, fsync=off, full_page_writes=off, tables prewarmed) for the "
                           "regions, a server backend under callgrind --trace-children serving pgbench "
                           f"-M prepared -c 1 for whole transactions and the snapshot slope ({idle} idle "
                           "sessions); static functions named by address (see tools/pg-costs/table.py)"),
           f"measured = {q(datetime.date.today().isoformat())}", ""]
    for name in sorted(reg):
        r = reg[name]
        out.append(f'[region.{q(name)}]')
        out.append(f"instructions = {float(r['instructions'])}")
        out.append(f"per_item = {float(r['per_item'])}")
        out.append(f"item = {q(r['item'])}")
        out.append(f"estimated = {'true' if r['estimated'] else 'false'}")
        out.append(f"covers = {q(r['covers'])}")
        out.append(f"how = {q(r['how'])}")
        for rn, rv in sorted(r.get("release", {}).items()):
            out.append(f'[region.{q(name)}.release.{rn}]')
            out.append(f"instructions = {float(rv['instructions'])}")
            out.append(f"per_item = {float(rv['per_item'])}")
            out.append(f"estimated = {'true' if rv['estimated'] else 'false'}")
            out.append(f"how = {q(rv['how'])}")
        out.append("")
    out.append("# Sum check per server transaction (pgbench -M prepared -c 1): total = the backend's count;")
    out.append("# regions_and_lwlocks = the regions' functions as counted in that run + all LWLock calls;")
    out.append("# statements = the statement.* figures of the script's statements; difference = total - both")
    out.append("# (0 by construction up to the runs' noise); regions_from_constants = the table's per-call")
    out.append("# figures x the calls counted in that run + LWLock calls (tests the per-call figures).")
    for k, v in check.items():
        out.append(f'[check.{k}]')
        for kk, vv in v.items():
            out.append(f"{kk} = {float(round(vv, 1))}")
        out.append("")
    print("\n".join(out))
