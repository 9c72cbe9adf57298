"""The screens in this folder, captured in a pseudo-terminal of 80×24 read through a terminal emulator
(pexpect and pyte, the test extra): `check` of a file with a known mistake, `today`, `list`, and a
mock interview's last follow-up question, in English and Chinese. Whole outputs are kept with the
lines that scrolled off the 24 rows; the mock is the 24 rows on screen when its last feedback shows.

    python docs/screens/capture.py        # rewrites docs/screens/*.txt
"""
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pexpect
import pyte

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
COLS, ROWS = 80, 24


def _text(screen) -> str:
    lines = [line.rstrip() for line in screen.display]
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines) + "\n"


def whole(args, cwd, env) -> str:
    """Everything the command printed, as an 80-column terminal lays it out (its scrollback too)."""
    child = pexpect.spawn(sys.executable, ["-m", "attn_drill", *args], cwd=str(cwd), env=env,
                          dimensions=(ROWS, COLS), encoding="utf-8", timeout=180)
    raw = child.read()
    child.close()
    screen = pyte.Screen(COLS, 400)
    pyte.Stream(screen).feed(raw.replace("\n", "\r\n") if "\r\n" not in raw else raw)
    return f"$ attn-drill {' '.join(args)}\n" + _text(screen)


def last_followup(ws, env) -> str:
    """A mock of mhsa, solved, its follow-ups answered (the numbers typed as expressions): the screen
    when the last answer's feedback shows."""
    from attn_drill.bank import quiz
    screen = pyte.Screen(COLS, ROWS)
    stream = pyte.ByteStream(screen)
    child = pexpect.spawn(sys.executable, ["-m", "attn_drill", "mock", "-p", "mhsa", "--minutes", "30", "--seed", "3"],
                          cwd=str(ws), env=env, dimensions=(ROWS, COLS), timeout=180)

    def until(pattern):
        child.expect(pattern.encode())
        stream.feed(child.before + child.after)
    until("left|剩余")
    folder = next(ws.glob("mock-*"))
    shutil.copy(ROOT / "reference" / "mhsa.py", folder / "mhsa.py")
    child.send("c")
    until("green at|时通过")
    child.send("u")
    answers = {"forward_flops": "8*8*2048*1024**2 + 4*8*2048**2*1024", "scores_memory": "4*32*4096^2*2"}
    for q in quiz.load(ROOT / "questions" / "mhsa.py"):
        if isinstance(q, quiz.Choice):
            until("1-9")
            child.send(str(next(i for i, (_, ok) in enumerate(q.options(3)) if ok) + 1))
        else:
            until("answer:|答案：")
            child.send(answers[q.id] + "\r")
        until("right\\.|not quite|正确|不对")                # its feedback, before the next question
    until("any key|任意键")
    try:
        child.expect(pexpect.TIMEOUT, timeout=1)
    except pexpect.EOF:
        pass
    stream.feed(child.before or b"")
    shot = _text(screen)
    child.send(" ")
    child.send("f")
    child.send("y")
    child.expect(pexpect.EOF)
    return shot


def main() -> None:
    from attn_drill import bank
    from attn_drill.bank import sources
    for lang in ("en", "zh"):
        with tempfile.TemporaryDirectory() as tmp:
            ws = Path(tmp) / "practice"
            ws.mkdir()
            env = dict(os.environ, COLUMNS=str(COLS), LINES=str(ROWS), TERM="xterm-256color", ATTN_DRILL_LANG=lang,
                       ATTN_DRILL_HOME=str(Path(tmp) / "progress"))
            env.pop("NO_COLOR", None)
            (ws / "mhsa.py").write_text(sources.mutant_source(bank.get("mhsa"), bank.read_reference("mhsa"),
                                                              "softmax_query_axis"))
            shutil.copy(ROOT / "reference" / "split_heads.py", ws / "split_heads.py")
            whole(["check", "split_heads", "--seed", "1"], ws, env)          # a pass: a re-drill scheduled
            (HERE / f"check-wrong-file.{lang}.txt").write_text(whole(["check", "mhsa", "--seed", "3"], ws, env))
            (HERE / f"today.{lang}.txt").write_text(whole(["today"], ws, env))
            (HERE / f"list.{lang}.txt").write_text(whole(["list"], ws, env))
            (HERE / f"mock-last-followup.{lang}.txt").write_text(last_followup(ws, env))
    print("wrote", ", ".join(sorted(p.name for p in HERE.glob("*.txt"))))


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
