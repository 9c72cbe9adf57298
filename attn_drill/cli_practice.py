"""Commands of the practice workflow (hint, solution, reset, progress, watch, mock).

Registered on the main app by importing this module from cli.py; behaviour lives in verbs/.
"""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from .cli import complete_id, LANG_HELP, Difficulty, Lang, _run, app, use_lang


@app.command()
def hint(problem: str = typer.Argument(..., help="Problem id, e.g. gqa.", autocompletion=complete_id),
         lang: Optional[Lang] = typer.Option(None, "--lang", help=LANG_HELP),
         show_all: bool = typer.Option(False, "--all", help="Show again the hints already seen (no new one).")):
    """Show the next hint for a problem, one at a time (recorded in your progress).

    Example: attn-drill hint gqa · attn-drill hint gqa --all
    """
    from .verbs.practice import hint as verb
    _run(verb, problem, use_lang(lang), show_all, Path.cwd())


@app.command()
def solution(problem: str = typer.Argument(..., help="Problem id, e.g. gqa.", autocompletion=complete_id),
             yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation.")):
    """Show the reference solution. Asks first if you have not passed the problem.

    Example: attn-drill solution gqa
    """
    from .verbs.practice import solution as verb
    _run(verb, problem, yes, Path.cwd())


@app.command()
def reset(problem: str = typer.Argument(..., help="Problem id, e.g. gqa.", autocompletion=complete_id),
          path: Optional[Path] = typer.Argument(None, help="File to reset (default ./<id>.py)."),
          yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation.")):
    """Put the stub back in <id>.py, keeping a backup of your file.

    Example: attn-drill reset gqa
    """
    from .verbs.practice import reset as verb
    _run(verb, problem, path, yes, Path.cwd())


@app.command()
def progress(json_out: bool = typer.Option(False, "--json", help="Print JSON instead of tables."),
             lang: Optional[Lang] = typer.Option(None, "--lang", help=LANG_HELP)):
    """Your progress in this folder: each problem, a summary by level and tag, and mock interviews.

    Example: attn-drill progress · attn-drill progress --json
    """
    from .verbs.practice import progress as verb
    _run(verb, Path.cwd(), json_out, use_lang(lang))


@app.command()
def watch(problem: Optional[str] = typer.Argument(None, help="Problem id; omit to watch every problem file here.", autocompletion=complete_id),
          path: Optional[Path] = typer.Argument(None, help="File to watch (default ./<id>.py)."),
          seed: Optional[int] = typer.Option(None, "--seed",
                                             help="Master seed (default: random, kept across re-checks)."),
          full: bool = typer.Option(False, "--full", help="Also run the larger random cases."),
          lang: Optional[Lang] = typer.Option(None, "--lang", help=LANG_HELP)):
    """Re-grade on every save, with a warm grader (no torch import per check). Ctrl-C stops.

    Example: attn-drill watch gqa
    """
    from .verbs.watch import watch as verb
    _run(verb, problem, str(path) if path else None, seed, full, use_lang(lang), Path.cwd())


@app.command()
def mock(minutes: Optional[float] = typer.Option(None, "--minutes", "-m",
                                                 help="Time limit (default: the problems' estimates added up)."),
         count: int = typer.Option(2, "--count", "-k", help="How many problems."),
         difficulty: Optional[Difficulty] = typer.Option(None, "--difficulty", "-d", help="easy, medium or hard."),
         tag: Optional[str] = typer.Option(None, "--tag", "-t", help="Only problems with this tag."),
         problems: Optional[List[str]] = typer.Option(None, "--problem", "-p",
                                                      help="These problems (repeatable) instead of a random pick."),
         seed: Optional[int] = typer.Option(None, "--seed",
                                            help="Seed for the pick and the grading (default: random)."),
         dir: Path = typer.Option(Path("."), "--dir", help="Where to create the mock-YYYYmmdd-HHMM folder."),
         resume: bool = typer.Option(False, "--resume", help="Continue the paused mock with the time it had left."),
         history: bool = typer.Option(False, "--history", help="List the mock interviews recorded here."),
         json_out: bool = typer.Option(False, "--json", help="Scorecard (or --history) as JSON on stdout."),
         lang: Optional[Lang] = typer.Option(None, "--lang", help=LANG_HELP),
         seconds: Optional[float] = typer.Option(None, "--seconds", hidden=True)):
    """A timed mock interview: fresh files, a live countdown, checks, and a scorecard at the end.

    Unsolved problems come first. Keys while it runs: c check all, h hint (counts against you),
    s statements, f finish now, Ctrl-C pause. Exit code 0 when every problem passes.

    Examples: attn-drill mock --minutes 45 --count 2 --difficulty medium · attn-drill mock --resume
    """
    from .verbs import mock as verb
    if history:
        _run(verb.history, Path.cwd(), json_out)
    elif resume:
        _run(verb.resume, json_out, (use_lang(lang) if lang else None), Path.cwd())
    else:
        _run(verb.start, count, minutes, seconds, difficulty.value if difficulty else None, tag,
             list(problems or []), seed, dir, json_out, use_lang(lang), Path.cwd())


# ---------------------------------------------------------------- practice that sticks
RATING_HELP = ("Re-drills are scheduled by FSRS from how each solve went: failed, given up or solution viewed → "
               "again; slower than the problem's estimate or with hints → hard; within the estimate → good; in "
               "half of it, no hints, passed at the first check → easy.")


DRILL_HELP = ("Re-drill a problem from memory: a fresh stub in drills/, graded as strictly as the first solve.\n\n"
              "The time to green, the hints used and a pass at the first check are recorded; then the next "
              "re-drill is scheduled. " + RATING_HELP + "\n\nExamples: attn-drill drill mhsa · attn-drill check mhsa "
              "drills/mhsa-20261201-0930.py · attn-drill drill mhsa --give-up")
TODAY_HELP = ("What to do today: the re-drills due, the follow-up questions due, and a few new problems.\n\n" +
              RATING_HELP + "\n\nExample: attn-drill today")


@app.command(help=DRILL_HELP)
def drill(problem: str = typer.Argument(..., help="Problem id, e.g. gqa.", autocompletion=complete_id),
          give_up: bool = typer.Option(False, "--give-up", help="End the open re-drill of this problem (rated again)."),
          lang: Optional[Lang] = typer.Option(None, "--lang", help=LANG_HELP)):
    from .verbs.drills import drill as verb
    use_lang(lang)
    _run(verb, problem, give_up, Path.cwd())


@app.command(help=TODAY_HELP)
def today(json_out: bool = typer.Option(False, "--json", help="JSON instead of the list."),
          lang: Optional[Lang] = typer.Option(None, "--lang", help=LANG_HELP)):
    from .verbs.drills import today as verb
    _run(verb, Path.cwd(), json_out, use_lang(lang))


@app.command()
def plan(days: int = typer.Option(14, "--days", "-n", help="How many days to plan."),
         hours: float = typer.Option(1.0, "--hours-per-day", help="Time you have each day."),
         tags: Optional[List[str]] = typer.Option(None, "--tag", "-t", help="Only problems with this tag (repeatable)."),
         markdown: bool = typer.Option(False, "--markdown", help="Markdown (a checklist per day) for a notes app."),
         json_out: bool = typer.Option(False, "--json", help="JSON instead of the table."),
         lang: Optional[Lang] = typer.Option(None, "--lang", help=LANG_HELP)):
    """A day-by-day study plan: due re-drills and questions first, then new problems in curriculum order.

    Prerequisites come first; reviews are projected with the scheduler as if each planned item went
    well. The same progress gives the same plan.

    Examples: attn-drill plan --days 14 · attn-drill plan --days 7 --hours-per-day 2 --tag kv-cache --markdown
    """
    from .verbs.drills import plan as verb
    _run(verb, Path.cwd(), days, hours, list(tags or []), markdown, json_out, use_lang(lang))


@app.command()
def quiz(problem: Optional[str] = typer.Argument(None, help="Problem id; omit for the questions due and new ones "
                                                             "of the problems you passed.",
                                                 autocompletion=complete_id),
         count: int = typer.Option(5, "--count", "-k", help="How many questions."),
         due: bool = typer.Option(False, "--due", help="Only the questions due for review."),
         answers: Optional[str] = typer.Option(None, "--answers",
                                               help="The answers for scripts, separated by commas (or by ; when a "
                                                    "number has commas): a choice's number or letter, a number; "
                                                    "no terminal is needed."),
         json_out: bool = typer.Option(False, "--json", help="The results as JSON on stdout."),
         lang: Optional[Lang] = typer.Option(None, "--lang", help=LANG_HELP)):
    """The interviewer's follow-up questions, graded: choices and computed numbers, with explanations.

    A right answer schedules the question later, a wrong one soon (the same FSRS scheduler as the
    re-drills). Keys: 1-9, or ↑/↓ and Enter; s skips. Exit code 0 when every answer is right.

    Examples: attn-drill quiz · attn-drill quiz mhsa --count 3 · attn-drill quiz mhsa --answers 2,2,274877906944,4294967296
    """
    from .verbs.quizzing import run as verb
    given = None if answers is None else [a.strip() for a in answers.split(";" if ";" in answers else ",")]
    _run(verb, problem, count, due, given, json_out, use_lang(lang), Path.cwd())
