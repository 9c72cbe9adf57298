"""Commands of the practice workflow (hint, solution, reset, progress, watch, mock).

Registered on the main app by importing this module; behaviour lives in verbs/.
"""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from .app import app, complete_id, run, use_lang
from .options import DifficultyOpt, LangOpt, Problem, WatchFormat, WatchFormatOpt, Yes, value


@app.command()
def hint(problem: Problem,
         lang: LangOpt = None,
         show_all: bool = typer.Option(False, "--all", help="Show again the hints already seen (no new one).")):
    """Show the next hint for a problem, one at a time (recorded in your progress).

    Example: attn-drill hint gqa · attn-drill hint gqa --all
    """
    from ..verbs.practice import hint as verb
    run(verb, problem, use_lang(lang), show_all, Path.cwd())


@app.command()
def solution(problem: Problem,
             yes: Yes = False):
    """Show the reference solution. Asks first if you have not passed the problem.

    Example: attn-drill solution gqa
    """
    from ..verbs.practice import solution as verb
    run(verb, problem, yes, Path.cwd())


@app.command()
def reset(problem: Problem,
          path: Optional[Path] = typer.Argument(None, help="File to reset (default ./<id>.py)."),
          yes: Yes = False):
    """Put the stub back in <id>.py, keeping a backup of your file.

    Example: attn-drill reset gqa
    """
    from ..verbs.practice import reset as verb
    run(verb, problem, path, yes, Path.cwd())


@app.command()
def progress(json_out: bool = typer.Option(False, "--json", help="Print JSON instead of tables."),
             lang: LangOpt = None):
    """Your progress, one for all your folders: each problem, a summary by level and tag, mock interviews.

    Example: attn-drill progress · attn-drill progress --json
    """
    from ..verbs.practice import progress as verb
    run(verb, Path.cwd(), json_out, use_lang(lang))


@app.command()
def watch(problem: Optional[str] = typer.Argument(None, help="Problem id; omit to watch every problem file here.",
                                                  autocompletion=complete_id),
          path: Optional[Path] = typer.Argument(None, help="File to watch (default ./<id>.py)."),
          seed: Optional[int] = typer.Option(None, "--seed",
                                             help="Master seed (default: random, kept across re-checks)."),
          full: bool = typer.Option(False, "--full", help="Also run the larger random cases."),
          lang: LangOpt = None,
          fmt: WatchFormatOpt = WatchFormat.text):
    """Re-grade on every save, with a warm grader (no torch import per check). Ctrl-C stops.

    Examples: attn-drill watch gqa · attn-drill watch gqa --format lines
    """
    from ..verbs.watch import watch as verb
    run(verb, problem, str(path) if path else None, seed, full, use_lang(lang), Path.cwd(), fmt.value)


@app.command()
def mock(minutes: Optional[float] = typer.Option(None, "--minutes", "-m",
                                                 help="Time limit (default: the problems' estimates added up)."),
         count: int = typer.Option(2, "--count", "-k", help="How many problems."),
         difficulty: DifficultyOpt = None,
         tag: Optional[str] = typer.Option(None, "--tag", "-t", help="Only problems with this tag."),
         problems: Optional[List[str]] = typer.Option(None, "--problem", "-p",
                                                      help="These problems (repeatable) instead of a random pick."),
         seed: Optional[int] = typer.Option(None, "--seed",
                                            help="Seed for the pick and the grading (default: random)."),
         dir: Path = typer.Option(Path("."), "--dir", help="Where to create the mock-YYYYmmdd-HHMM folder."),
         resume: bool = typer.Option(False, "--resume", help="Continue the paused mock with the time it had left."),
         history: bool = typer.Option(False, "--history", help="List your mock interviews."),
         json_out: bool = typer.Option(False, "--json", help="Scorecard (or --history) as JSON on stdout."),
         lang: LangOpt = None,
         seconds: Optional[float] = typer.Option(None, "--seconds", hidden=True)):
    """A timed mock interview: fresh files, a live countdown, checks, and a scorecard at the end.

    Unsolved problems at your level come first, as many as fit in --minutes. Keys while it runs: c
    check all, l last reports, u follow-ups, h hint (counts against you), s statements, f finish now,
    Ctrl-C pause. Its passes and answers go into your re-drills and questions. Exit code 0 when every
    problem passes.

    Examples: attn-drill mock --minutes 45 --count 2 --difficulty medium · attn-drill mock --resume
    """
    from ..verbs import mock as verb
    if history:
        run(verb.history, Path.cwd(), json_out)
    elif resume:
        run(verb.resume, json_out, (use_lang(lang) if lang else None), Path.cwd())
    else:
        run(verb.start, count, minutes, seconds, value(difficulty), tag,
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
def drill(problem: Problem,
          give_up: bool = typer.Option(False, "--give-up", help="End the open re-drill of this problem (rated again)."),
          lang: LangOpt = None):
    from ..verbs.drills import drill as verb
    use_lang(lang)
    run(verb, problem, give_up, Path.cwd())


@app.command(help=TODAY_HELP)
def today(json_out: bool = typer.Option(False, "--json", help="JSON instead of the list."),
          lang: LangOpt = None):
    from ..verbs.drills import today as verb
    run(verb, Path.cwd(), json_out, use_lang(lang))


@app.command()
def plan(days: int = typer.Option(14, "--days", "-n", help="How many days to plan."),
         hours: float = typer.Option(1.0, "--hours-per-day", help="Time you have each day."),
         tags: Optional[List[str]] = typer.Option(None, "--tag", "-t",
                                                  help="Only problems with this tag (repeatable)."),
         markdown: bool = typer.Option(False, "--markdown", help="Markdown (a checklist per day) for a notes app."),
         json_out: bool = typer.Option(False, "--json", help="JSON instead of the table."),
         lang: LangOpt = None):
    """A day-by-day study plan: due re-drills and questions first, then new problems in curriculum order.

    Prerequisites come first; reviews are projected with the scheduler as if each planned item went
    well. The same progress gives the same plan.

    Examples: attn-drill plan --days 14 · attn-drill plan --days 7 --hours-per-day 2 --tag kv-cache --markdown
    """
    from ..verbs.drills import plan as verb
    run(verb, Path.cwd(), days, hours, list(tags or []), markdown, json_out, use_lang(lang))


@app.command()
def quiz(problem: Optional[str] = typer.Argument(None, help="Problem id; omit for the questions due and new ones "
                                                             "of the problems you passed.",
                                                 autocompletion=complete_id),
         count: int = typer.Option(5, "--count", "-k", help="How many questions."),
         due: bool = typer.Option(False, "--due", help="Only the questions due for review."),
         answers: Optional[str] = typer.Option(None, "--answers",
                                               help="The answers for scripts, separated by commas (or by ; when a "
                                                    "number has commas): a choice's number or letter (the choices "
                                                    "come in the fixed order printed), a number or an expression "
                                                    "such as 2**32; no terminal is needed."),
         json_out: bool = typer.Option(False, "--json", help="The results as JSON on stdout."),
         lang: LangOpt = None):
    """The interviewer's follow-up questions, graded: choices and computed numbers, with explanations.

    A right answer schedules the question later, a wrong one soon (the same FSRS scheduler as the
    re-drills). Keys: 1-9, or ↑/↓ and Enter; s skips. Exit code 0 when every answer is right.

    Examples: attn-drill quiz · attn-drill quiz mhsa --count 3 ·
    attn-drill quiz mhsa --answers 2,2,274877906944,2**32
    """
    from ..verbs.quizzing import run as verb
    given = None if answers is None else [a.strip() for a in answers.split(";" if ";" in answers else ",")]
    run(verb, problem, count, due, given, json_out, use_lang(lang), Path.cwd())
