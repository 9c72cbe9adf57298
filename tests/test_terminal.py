"""What the user sees, in a real terminal (a pseudo-terminal read through a terminal emulator):
the first screen of a failing report fits 80×24 with the verdict on top, numbers are never cut at
60 columns, the replay command is one unbroken line, in English and Chinese; watch shows
"checking…" at once, and a save cancels a hung check."""
import os
import re
import shutil
import sys
import time
from pathlib import Path

import pytest

pexpect = pytest.importorskip("pexpect")
pyte = pytest.importorskip("pyte")

ROOT = Path(__file__).resolve().parent.parent
SYMPTOMS = ROOT / "tests" / "fixtures" / "symptoms"
pytestmark = pytest.mark.slow


def run(args, cwd, cols=80, rows=24, env=None, timeout=120):
    """Run attn-drill in a pseudo-terminal of this size; (screen lines, raw text, exit status)."""
    e = dict(os.environ, COLUMNS=str(cols), LINES=str(rows), TERM="xterm-256color")
    e.pop("NO_COLOR", None)
    e.update(env or {})
    child = pexpect.spawn(sys.executable, ["-m", "attn_drill", *args], cwd=str(cwd), env=e, dimensions=(rows, cols),
                          encoding="utf-8", timeout=timeout)
    raw = child.read()
    child.close()
    screen = pyte.Screen(cols, 500)                   # tall enough to keep every line it printed
    stream = pyte.Stream(screen)
    stream.feed(raw.replace("\n", "\r\n") if "\r\n" not in raw else raw)
    lines = [line.rstrip() for line in screen.display]
    while lines and not lines[-1]:
        lines.pop()
    return lines, raw, child.exitstatus


def plain(raw: str) -> str:
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07", "", raw).replace("\r", "")


@pytest.fixture
def work(tmp_path):
    shutil.copy(SYMPTOMS / "mhsa__softmax_overflow.py", tmp_path / "mhsa.py")
    shutil.copy(SYMPTOMS / "gqa__only_b1.py", tmp_path / "gqa.py")
    return tmp_path


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("pid", ["mhsa", "gqa"])
def test_a_failing_report_first_screen_fits_80x24(work, lang, pid):
    lines, raw, status = run(["check", pid, "--seed", "3", "--lang", lang], work)
    assert status == 1
    assert len(lines) <= 24, "\n".join(lines)
    verdict = "FAIL" if lang == "en" else "未通过"
    assert verdict in lines[1]                                  # the verdict on top
    text = "\n".join(lines)
    assert ("replay:" if lang == "en" else "复现：") in text
    assert ("looks like" in text or "what the failure shows" in text) if lang == "en" else \
        ("看起来是" in text or "失败的规律" in text)
    # the replay command is one unbroken line in what was written (the terminal wraps it, not us)
    replay = re.search(r"attn-drill check \S+ --seed 3 --case \S+", plain(raw))
    assert replay is not None
    if lang == "zh":
        assert "Multi-head" not in text and "cases failed" not in text      # the frame is Chinese too


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_at_60_columns_no_number_is_cut_and_the_replay_is_whole(work, lang):
    lines, raw, _ = run(["check", "mhsa", "--seed", "3", "--verbose", "--lang", lang], work, cols=60)
    assert all(len(line) <= 60 for line in lines)
    text = plain(raw)
    rows = [ln for ln in text.splitlines() if re.search(r"(≤|>) ", ln) and re.search(r"_(fp|bf)\d", ln)]
    assert rows, text
    for ln in rows:      # every "error ≤ allowed" cell holds two whole numbers
        assert re.search(r"\d(?:\.\d+)?(?:e[-+]\d+)? (?:≤|>) \d(?:\.\d+)?(?:e[-+]\d+)?(?:\s|$)", ln), ln
    assert re.search(r"attn-drill check mhsa --seed 3 --case \S+", text)
    assert "Mismatched elements" in text or "不一致的元素" in text


def test_a_static_error_is_reported_without_torch_in_a_fraction_of_a_second(tmp_path):
    (tmp_path / "mhsa.py").write_text("class MultiHeadSelfAttention:\n    def forward(self, x:\n")
    t0 = time.perf_counter()
    lines, raw, status = run(["check", "mhsa"], tmp_path)
    took = time.perf_counter() - t0
    assert status == 1 and "SyntaxError" in "\n".join(lines)
    print(f"\nstatic error reported in {took:.2f} s")
    assert took < 1.5          # generous on a loaded machine; the benchmark script measures it properly


def test_watch_shows_checking_at_once_and_a_save_cancels_a_hung_check(tmp_path):
    ref = (ROOT / "reference" / "mhsa.py").read_text()
    hung = ref.replace("        B, L, E = x.shape", "        while True:\n            pass\n        B, L, E = x.shape", 1)
    (tmp_path / "mhsa.py").write_text(ref)
    e = dict(os.environ, COLUMNS="80", LINES="24", TERM="xterm-256color")
    t0 = time.perf_counter()
    child = pexpect.spawn(sys.executable, ["-m", "attn_drill", "watch", "mhsa", "--seed", "2"], cwd=str(tmp_path),
                          env=e, dimensions=(24, 80), encoding="utf-8", timeout=90)
    child.expect("checking")
    shown = time.perf_counter() - t0
    child.expect("PASS")
    first = time.perf_counter() - t0
    time.sleep(0.5)
    th = time.perf_counter()
    (tmp_path / "mhsa.py").write_text(hung)                  # a hang: its check would take the time limit
    child.expect("checking")
    to_checking = time.perf_counter() - th
    time.sleep(1.0)
    t1 = time.perf_counter()
    (tmp_path / "mhsa.py").write_text(ref)                    # the fix, saved while the hung check runs
    child.expect(r"check #2")                                 # the fix's verdict: the hung check never counted
    to_verdict = time.perf_counter() - t1
    child.expect("PASS")
    child.send("q")
    child.expect(pexpect.EOF)
    child.close()
    print(f"\nwatch: 'checking…' {shown:.2f} s after start, first verdict {first:.2f} s; save to 'checking…' "
          f"{to_checking:.2f} s; after saving the fix "
          f"during a hung check: its verdict {to_verdict:.2f} s later")
    assert shown < 1.5 and to_checking < 1.5
    assert to_verdict < 15       # not the 30 s time limit of the hung check: it was cancelled
    assert child.exitstatus == 0


def test_quiz_in_a_terminal_with_number_keys_and_arrows(tmp_path):
    """The first choice answered with its number key, the second with ↓ and Enter."""
    from attn_drill import quiz
    now = 1796200000
    qs = quiz.load(ROOT / "questions" / "mhsa.py")
    rights = [next(i for i, (_, ok) in enumerate(q.options(now // 86400)) if ok) for q in qs[:2]]
    e = dict(os.environ, COLUMNS="80", LINES="24", TERM="xterm-256color", ATTN_DRILL_NOW=str(now))
    child = pexpect.spawn(sys.executable, ["-m", "attn_drill", "quiz", "mhsa", "--count", "2"], cwd=str(tmp_path),
                          env=e, dimensions=(24, 80), encoding="utf-8", timeout=60)
    child.expect("1-9 or")
    child.send(str(rights[0] + 1))
    child.expect("right")
    child.expect("1-9 or")
    child.send("\x1b[B" * rights[1] + "\r")
    child.expect("right")
    child.expect("2 of 2 right")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_today_and_plan_fit_the_terminal(tmp_path, lang):
    lines, raw, status = run(["today", "--lang", lang], tmp_path)
    assert status == 0 and len(lines) <= 24 and all(len(x) <= 80 for x in lines)
    assert ("today," if lang == "en" else "今天") in lines[0]
    assert "attn-drill new mhsa" in "\n".join(lines)
    lines, raw, status = run(["plan", "--days", "7", "--lang", lang], tmp_path, cols=80)
    assert status == 0 and all(len(x) <= 80 for x in lines)
    text = "\n".join(lines)
    assert ("study plan: 7 days" if lang == "en" else "学习计划：7 天") in text and "mhsa" in text
