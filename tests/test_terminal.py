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


def test_a_static_error_is_reported_without_torch(tmp_path):
    """The syntax error is found before any torch: a torch that cannot be imported changes nothing
    (the time it saves is measured by benchmarks/bench_tool.py, row `static`)."""
    (tmp_path / "mhsa.py").write_text("class MultiHeadSelfAttention:\n    def forward(self, x:\n")
    fake = tmp_path / "no_torch"
    (fake / "torch").mkdir(parents=True)
    (fake / "torch" / "__init__.py").write_text("raise ImportError('torch imported by the command line')\n")
    lines, raw, status = run(["check", "mhsa"], tmp_path, env={"PYTHONPATH": str(fake)})
    assert status == 1 and "SyntaxError" in "\n".join(lines) and "torch imported" not in raw
    # the user's line, a caret under the place, and no seed: no case ran
    at = next(i for i, ln in enumerate(lines) if "mhsa.py:2" in ln)
    assert lines[at + 1].strip() == "def forward(self, x:" and lines[at + 2].strip() == "^"
    assert "seed" not in "\n".join(lines)


def test_watch_shows_checking_at_once_and_a_save_cancels_a_hung_check(tmp_path):
    ref = (ROOT / "reference" / "mhsa.py").read_text()
    hung = ref.replace("        B, L, E = x.shape",
                       "        while True:\n            pass\n        B, L, E = x.shape", 1)
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
    child.expect(r"\d+ s \(limit \d+ s\)")                 # the running check's time, against its limit
    time.sleep(1.0)
    t1 = time.perf_counter()
    (tmp_path / "mhsa.py").write_text(ref)                    # the fix, saved while the hung check runs
    child.expect(r"check #2")                                 # the fix's verdict: the hung check never counted
    to_verdict = time.perf_counter() - t1
    seen = child.before
    child.expect("PASS")
    assert "timed out" not in plain(seen + child.before)     # cancelled, not waited out to its limit
    child.send("q")
    child.expect(pexpect.EOF)
    child.close()
    print(f"\nwatch: 'checking…' {shown:.2f} s after start, first verdict {first:.2f} s; save to 'checking…' "
          f"{to_checking:.2f} s; after saving the fix "
          f"during a hung check: its verdict {to_verdict:.2f} s later")
    assert child.exitstatus == 0     # the fix got its verdict: the hung check was cancelled, not waited out


def test_quiz_in_a_terminal_with_number_keys_and_arrows(tmp_path):
    """The first choice answered with its number key, the second with ↓ and Enter."""
    from attn_drill.bank import quiz
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


# ---------------------------------------------------------------- no line splits a word or a command
CJK = "\u3000-\u303f\u4e00-\u9fff\uff00-\uffef"


def layout_faults(raw: str, width: int, lang: str) -> list[str]:
    """What is wrong with the lines a command wrote, read as written (before the terminal folds them):
    a line wider than the screen that is not a command on its own (the terminal would cut a word in
    two), a command whose arguments go on the next line, and in Chinese a space or an ASCII , ; .
    between two Chinese characters."""
    from attn_drill.render.base import cell_width, commands
    lines = plain(raw).split("\n")
    out = []
    for i, line in enumerate(lines):
        if cell_width(line) > width:
            rest = line
            for a, b in reversed(commands(line)):
                rest = rest[:a] + rest[b:]
            # allowed: a command on its own line (after a label), or one word longer than the screen (a path)
            if (not commands(line) or len(rest.strip().rstrip(":：")) > 12) and " " in line.strip():
                out.append(f"wider than {width}: {line!r}")
        nxt = lines[i + 1].strip() if i + 1 < len(lines) else ""
        if line.strip() and nxt and (nxt.startswith("-") or re.match(r"[\w./-]*(/|\.py\b)", nxt)) and \
                (any(b == len(line.rstrip()) for _, b in commands(line)) or line.rstrip().endswith("attn-drill")):
            out.append(f"a command goes on: {line!r} / {lines[i + 1]!r}")
        if lang == "zh":
            if re.search(f"[{CJK}] [{CJK}]", line):
                out.append(f"a space between two Chinese characters: {line!r}")
            if re.search(f"[{CJK}] ?[,;](?!\\d)|[{CJK}]\\.(\\s|$)", line):
                out.append(f"ASCII punctuation in Chinese: {line!r}")
    return out


@pytest.fixture(scope="module")
def practice(tmp_path_factory):
    """A folder with a wrong mhsa.py (a known mistake), a passed split_heads and an open re-drill."""
    from attn_drill.bank import sources
    from attn_drill import bank
    ws = tmp_path_factory.mktemp("practice")
    (ws / "mhsa.py").write_text(sources.mutant_source(bank.get("mhsa"), bank.read_reference("mhsa"),
                                                      "softmax_query_axis"))
    shutil.copy(ROOT / "reference" / "split_heads.py", ws / "split_heads.py")
    env = {"ATTN_DRILL_HOME": str(ws / ".attn-drill")}
    run(["check", "split_heads", "--seed", "1"], ws, env=env)
    run(["drill", "causal"], ws, env=env)
    return ws, env


VERBS = [["list"], ["show", "mhsa"], ["check", "mhsa", "--seed", "3"], ["check", "mhsa", "--seed", "3", "--verbose"],
         ["hint", "mhsa"], ["progress"], ["today"], ["plan", "--days", "5"], ["new", "mhsa"], ["drill", "causal"],
         ["quiz", "mhsa", "--answers", "1,abc,2**38,(2**32)"], ["mock", "--history"], ["solution", "gqa"],
         ["quiz", "--help"], ["drill", "--help"], ["grade", "--help"]]


@pytest.mark.parametrize("cols", [80, 60])
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_no_line_of_any_verb_splits_a_word_or_a_command(practice, lang, cols):
    ws, env = practice
    faults = []
    for args in VERBS:
        lines, raw, _ = run([*args, "--lang", lang] if "--help" not in args else args, ws, cols=cols, env=env)
        faults += [f"{' '.join(args)}: {f}" for f in layout_faults(raw, cols, lang)]
        assert "Traceback" not in raw, raw
    assert not faults, "\n".join(faults)


def test_a_truncated_state_is_restored_with_nothing_lost(practice):
    ws, env = practice
    state = ws / ".attn-drill" / "state.json"
    before = state.read_text()
    state.write_text(before[: len(before) // 2])              # cut in the middle, as a full disk would
    lines, raw, status = run(["progress", "--json"], ws, env=env)
    text = plain(raw)
    assert status == 0 and "restored its last good copy" in " ".join(text.split())
    import json
    assert json.loads(state.read_text()) == json.loads(before)
    assert list(state.parent.glob("state.json.damaged-*"))


# ---------------------------------------------------------------- a mock's results reach the practice
FIXTURE_BANK = ROOT / "tests" / "fixtures" / "bank"


def test_a_scripted_mock_in_a_fresh_folder_shows_in_today_where_it_was_started(tmp_path):
    """Solve the mock's problem, answer its follow-ups (each feedback shown, the last one until a key),
    finish: the pass is a card (today's next re-drill), the answers are reviewed questions."""
    from attn_drill.bank import quiz
    ws = tmp_path / "practice"
    ws.mkdir()
    e = dict(os.environ, COLUMNS="80", LINES="24", TERM="xterm-256color", ATTN_DRILL_BANK=str(FIXTURE_BANK))
    child = pexpect.spawn(sys.executable, ["-m", "attn_drill", "mock", "--count", "1", "--minutes", "10", "--seed",
                                           "3"], cwd=str(ws), env=e, dimensions=(24, 80), encoding="utf-8",
                          timeout=90)
    child.expect("left")
    folder = next(ws.glob("mock-*"))
    shutil.copy(FIXTURE_BANK / "reference" / "attend.py", folder / "attend.py")
    child.send("c")
    child.expect(r"green at")
    child.send("u")
    for i, q in enumerate(quiz.load(FIXTURE_BANK / "questions" / "attend.py")):
        if isinstance(q, quiz.Choice):
            child.expect("1-9 or")
            right = next(k for k, (_, ok) in enumerate(q.options(3)) if ok)
            child.send(str(right + 1))
        else:
            child.expect("your answer:")
            child.send("2*(3)*5\r")                             # an expression: 30
        child.expect(r"right\.")                                # feedback on every answer, the last one too
    child.expect("3 of 3 right")
    child.expect("press any key")
    child.send(" ")
    child.expect("left")
    child.send("u")
    child.expect("were asked already")                         # not "pass a problem first"
    child.send("f")
    child.expect("press y")
    child.send("y")
    child.expect("scorecard")
    child.expect(r"rated \w+ in your re-drills")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    lines, raw, status = run(["today", "--json"], ws, env={"ATTN_DRILL_BANK": str(FIXTURE_BANK)})
    import json
    today = json.loads(plain(raw)[plain(raw).index("{"):])
    assert today["next_due"]["id"] == "attend" and today["retention"]["tracked"] == 1
    lines, raw, _ = run(["progress", "--json"], ws, env={"ATTN_DRILL_BANK": str(FIXTURE_BANK)})
    data = json.loads(plain(raw)[plain(raw).index("{"):])
    assert data["summary"]["solved"] == 1 and data["mocks"][0]["verdict"] == "strong pass"
    from attn_drill.progress import store
    cards = store.load()["cards"]
    assert {"attend", "attend/why_scale", "attend/score_count", "attend/mask_value"} <= set(cards)


def test_the_quiz_reads_an_expression_and_asks_again_for_what_it_cannot_read(tmp_path):
    from attn_drill.bank import quiz
    now = 1796200000
    e = dict(os.environ, COLUMNS="80", LINES="24", TERM="xterm-256color", ATTN_DRILL_NOW=str(now),
             ATTN_DRILL_BANK=str(FIXTURE_BANK))
    child = pexpect.spawn(sys.executable, ["-m", "attn_drill", "quiz", "attend", "--count", "2"], cwd=str(tmp_path),
                          env=e, dimensions=(24, 80), encoding="utf-8", timeout=60)
    qs = quiz.load(FIXTURE_BANK / "questions" / "attend.py")
    child.expect("1-9 or")
    child.send(str(next(i for i, (_, ok) in enumerate(qs[0].options(now // 86400)) if ok) + 1))
    child.expect(r"right\.")
    child.expect("your answer:")
    child.send("abc\r")
    child.expect("could not read 'abc' as a number")           # asked again, not marked wrong
    child.expect("your answer:")
    child.send("(2*3)*5\r")
    child.expect(r"right\.")
    child.expect("2 of 2 right")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
