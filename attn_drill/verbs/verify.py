"""`verify`: prove the bank. Every spec loads, every reference passes, every untouched stub fails,
every known mistake fails and is diagnosed as itself, every follow-up question is sound
(attn_drill.bank.quiz) and its computed answers match their proofs. One judge per job (default:
2, or the CPU count if smaller); each imports torch once."""
from __future__ import annotations

import os
import queue
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .. import bank, render, rules
from ..bank import sources
from ..client import JudgeClient
from ..errors import SpecError
from ..render import classroom as view
from ..results import PASS


@dataclass
class Row:
    problem: str
    ok: bool = True
    spec: str = "ok"
    reference: str = "-"
    stub: str = "-"
    mutants_caught: int = 0
    mutants: int = 0
    questions: int = 0
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)

    def fail(self, msg: str) -> None:
        self.ok = False
        self.problems.append(msg)


def verify_one(pid: str, client: JudgeClient, seed: int, full: bool, tmp: Path) -> Row:
    row = Row(pid)
    t0 = time.perf_counter()
    try:
        spec = bank.get(pid)
        ref_src = sources.read(bank.reference_path(pid))
        stub = sources.make_stub(spec, ref_src)
        mutants = {m.id: sources.mutant_source(spec, ref_src, m.id) for m in spec.mistakes}
        if not bank.grader_path(pid).is_file():
            raise SpecError(bank.grader_path(pid), "<file>", "is missing", f"write graders/{pid}.py")
    except (SpecError, sources.MutantError, OSError, SyntaxError, ValueError) as exc:
        row.spec = "bad"
        row.fail(str(exc))
        row.seconds = time.perf_counter() - t0
        return row
    bad_ref = [f for f in sources.scan(ref_src, spec) if f.line]
    if bad_ref:
        row.fail(f"reference line {bad_ref[0].line}: {bad_ref[0].message}")
    limit = rules.time_limit(spec, full)
    # the reference is graded from a copy: a room may not read the bank itself
    ref_copy = tmp / "reference" / f"{pid}.py"
    ref_copy.parent.mkdir(exist_ok=True)
    ref_copy.write_text(ref_src, encoding="utf-8")
    ref = client.grade(pid, str(ref_copy), seed, full=full, time_limit=limit)
    row.reference = ref.status
    if ref.status != PASS:
        first = ref.first_failure()
        row.fail(f"reference: {ref.message}" + (f" [{first.name}: {first.message}]" if first else ""))
    stub_path = tmp / f"{pid}.py"
    stub_path.write_text(stub, encoding="utf-8")
    st = client.grade(pid, str(stub_path), seed, fail_fast=True, diagnose=False, time_limit=limit)
    row.stub = "fails" if st.status != PASS else "PASSES"
    if st.status == PASS:
        row.fail("the untouched stub passes: the cases prove nothing")
    row.mutants = len(mutants)
    for mid, src in mutants.items():
        mpath = tmp / f"{pid}__{mid}.py"
        mpath.write_text(src, encoding="utf-8")
        rep = client.grade(pid, str(mpath), seed, fail_fast=True, time_limit=limit)
        named = rep.diagnosis.mistake if rep.diagnosis else None
        if rep.status == PASS:
            row.fail(f"mutant {mid} passes every case")
        elif named != mid:
            row.fail(f"mutant {mid} fails but is diagnosed as {named or 'nothing'} ({rep.message})")
        else:
            row.mutants_caught += 1
    row.questions = len(_questions(pid))
    for msg in client.check_questions(pid):
        row.fail(msg)
    row.seconds = time.perf_counter() - t0
    return row


def _questions(pid: str) -> list:
    from .quizzing import questions_of
    try:
        return questions_of(pid)
    except Exception:  # noqa: BLE001 - reported by check_questions
        return []


def _jobs(requested: int | None, n: int) -> int:
    return max(1, min(n, requested or min(2, os.cpu_count() or 1)))


def verify(ids: list[str], seed: int, full: bool, as_json: bool, jobs: int | None = None) -> int:
    for pid in ids:
        bank.get(pid)
    ids = ids or bank.ids()
    t0 = time.perf_counter()
    con = render.console()
    n = _jobs(jobs, len(ids))
    judges: queue.SimpleQueue = queue.SimpleQueue()
    clients = [JudgeClient().start() for _ in range(n)]     # torch loads in each while the first specs are read
    rows = []
    with tempfile.TemporaryDirectory(prefix="attn-drill-verify-") as tmp:
        for i, client in enumerate(clients):                 # each judge's files in a folder of its own
            (Path(tmp) / f"job{i}").mkdir()
            judges.put((client, Path(tmp) / f"job{i}"))

        def one(pid: str) -> Row:
            client, folder = judges.get()
            try:
                return verify_one(pid, client, seed, full, folder)
            except Exception as exc:  # noqa: BLE001 - a tool error on one problem: say so, go on
                row = Row(pid)
                row.fail(f"the grader itself failed: {str(exc).strip().splitlines()[-1]}")
                return row
            finally:
                judges.put((client, folder))
        try:
            with ThreadPoolExecutor(max_workers=n) as pool:
                for row in pool.map(one, ids):              # printed in the bank's order as rows arrive
                    rows.append(row)
                    if not as_json:
                        con.print(view.verify_row(row))
        finally:
            for client in clients:
                client.close()
    total = time.perf_counter() - t0
    ok = all(r.ok for r in rows)
    if as_json:
        render.print_json({"ok": ok, "seconds": round(total, 2), "seed": seed, "full": full,
                           "problems": [asdict(r) for r in rows]})
    else:
        con.print(view.verify_total(rows, total, seed, full))
    return 0 if ok else 1
