"""attn-drill in IPython and Jupyter (`pip install "attn-drill[notebook]"`), loaded with
`%load_ext attn_drill`:

    %attn_drill new gqa              the stub of gqa in the next cell, under a `%%check gqa` line
    %attn_drill show gqa             the statement
    %%check gqa [--seed N] [--case NAME] [--full] [--lang zh] [--html FILE]
                                     grades the cell's code as `attn-drill check gqa` grades a file

A `%%check` cell's code is saved as `<id>/cell.py` in a folder of this kernel's (a line above it, so
the file's line numbers are the cell's; the room may not read the workspace's .attn-drill/, so not
there), then graded by `verbs.check.run`: the same vetting, the same judge and rooms, the same
verdict; the attempt is recorded in the progress of the kernel's folder, as `check` records it.
The judge starts when the extension loads and stays warm between cells (like `watch`), so no cell
pays for importing torch but the first. The report is shown as HTML (the verdict, the
failing case, the named mistake, the heatmaps as images, the replay, the cases), with a plain-text
copy for consoles; it holds no script, so opening or saving a notebook never grades anything.

Only this module imports IPython; the command line never imports it.
"""
from __future__ import annotations

import atexit
import random
import shutil
import tempfile
from pathlib import Path

from IPython.core.error import UsageError as MagicUsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from IPython.display import Markdown, display

from . import bank
from .errors import AttnDrillError, ToolError
from .i18n import set_lang, t

def _lang(given: str | None) -> str:
    from .progress.config import resolve
    chosen, _, _ = resolve("lang", given, Path.cwd())
    return set_lang(chosen or "en")


def _show(bundle: tuple[str, str], metadata: dict | None = None) -> None:
    html, text = bundle
    display({"text/html": html, "text/plain": text}, raw=True, metadata=metadata or {})


def cell_replay(command: str) -> str:
    """`attn-drill check gqa --seed 1 --case x` as the cell that replays it: `%%check gqa --seed 1 --case x`."""
    prefix = "attn-drill check "
    return "%%check " + command[len(prefix):] if command.startswith(prefix) else command


@magics_class
class DrillMagics(Magics):
    def __init__(self, shell):
        super().__init__(shell)
        self.client = None
        self.cells = Path(tempfile.mkdtemp(prefix="attn-drill-cells-"))   # the code of each problem's last cell

    def cell_file(self, pid: str) -> Path:
        folder = self.cells / pid
        folder.mkdir(parents=True, exist_ok=True)
        return folder / "cell.py"

    def judge(self):
        """The warm judge of this kernel, started again if it died."""
        from .client import JudgeClient
        if self.client is None:
            self.client = JudgeClient()
        return self.client.start()

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None
        shutil.rmtree(self.cells, ignore_errors=True)

    def _forget(self) -> None:
        """A grading interrupted or failed: its judge may still be busy; the next cell starts a fresh one."""
        if self.client is not None:
            self.client.kill()
            self.client.close()
            self.client = None

    # ------------------------------------------------------------ %%check
    @magic_arguments()
    @argument("problem", help="Problem id, e.g. gqa.")
    @argument("--seed", type=int, default=None, help="Master seed (default: random, shown).")
    @argument("--case", default=None, help="Run only this case (replay).")
    @argument("--full", action="store_true", help="Also run the larger random cases.")
    @argument("--lang", choices=["en", "zh"], default=None, help="Language of the report.")
    @argument("--html", metavar="FILE", default=None, help="Also write the report as an HTML page.")
    @cell_magic
    def check(self, line: str, cell: str):
        """Grade this cell's code as `attn-drill check <id>` grades a file: %%check gqa --seed 7"""
        from .progress import clock, rules as progress
        from .render import notebook as view
        from .verbs import check as verb, outputs
        args = parse_argstring(self.check, line)
        lang = _lang(args.lang)
        cwd = Path.cwd()
        try:
            spec = bank.get(args.problem)
            file = self.cell_file(spec.id)
            file.write_text("\n" + cell, encoding="utf-8")       # line N of the file is line N of the cell
            seed = random.randrange(1_000_000) if args.seed is None else args.seed
            [r] = verb.run([(spec.id, file)], seed, args.full, args.case, self.judge(), typed="")
        except KeyboardInterrupt:
            self._forget()
            _show(view.message(t("nb.interrupted"), error=True))
            return None
        except AttnDrillError as exc:
            if isinstance(exc, ToolError):
                self._forget()
            raise MagicUsageError(str(exc)) from None
        r.replay, r.file = cell_replay(r.replay), t("nb.this_cell")
        notes = []
        try:
            sch = progress.record_check(cwd, r)
        except OSError as exc:
            sch = None
            notes.append(t("nb.not_recorded", why=exc.strerror or exc))
        if sch and sch.get("due"):
            key = "check.drill_done" if sch.get("drill") else "check.scheduled"
            notes.append(t(key, id=spec.id, rating=sch["rating"], date=clock.local_day(sch["due"])))
        if r.passed:
            nxt = verb.next_problem(progress.statuses(cwd), {spec.id})
            if nxt:
                notes.append(t("nb.next", id=nxt))
        if args.html:
            outputs.write_check_html(Path(args.html), [r], lang)
            notes.append(t("html.wrote", path=args.html))
        first = r.first_failure()
        summary = {"problem": r.problem, "status": r.status, "seed": r.seed, "seconds": round(r.seconds, 3),
                   "diagnosis": r.diagnosis.mistake if r.diagnosis else None,
                   "symptom": r.symptom.mistake if r.symptom else None,
                   "first_failure": first.name if first is not None else None,
                   "cases": {c.name: c.status for c in r.cases}, "replay": r.replay or None}
        _show(view.cell_output(r, spec.title.get(lang), notes), {"attn-drill": summary})
        return None

    # ------------------------------------------------------------ %attn_drill
    @line_magic("attn_drill")
    def attn_drill(self, line: str):
        """%attn_drill new <id> (the stub in the next cell) · %attn_drill show <id> (the statement)"""
        from .render import notebook as view
        words = line.split()
        lang = _lang(None)
        if "--lang" in words:
            at = words.index("--lang")
            lang = _lang(words[at + 1] if at + 1 < len(words) and words[at + 1] in ("en", "zh") else None)
            words = words[:at] + words[at + 2:]
        if len(words) != 2 or words[0] not in ("new", "show"):
            raise MagicUsageError(t("nb.usage"))
        what, pid = words
        try:
            spec = bank.get(pid)
            if what == "show":
                display(Markdown(f"## {spec.id}: {spec.title.get(lang)}\n\n{spec.statement.get(lang)}"))
                return None
            from .verbs.scaffold import stub_text
            stub = stub_text(spec.id)
        except AttnDrillError as exc:
            raise MagicUsageError(str(exc)) from None
        self.shell.set_next_input(f"%%check {spec.id}\n{stub.rstrip()}\n", replace=False)
        self.judge()                 # torch loads while the stub is filled in
        _show(view.message(t("nb.new", id=spec.id)))
        return None


def load_ipython_extension(ipython) -> None:
    magics = DrillMagics(ipython)
    ipython.register_magics(magics)
    ipython._attn_drill = magics
    atexit.register(magics.close)
    magics.judge()                   # the first %%check finds torch imported


def unload_ipython_extension(ipython) -> None:
    magics = getattr(ipython, "_attn_drill", None)
    if magics is not None:
        magics.close()
