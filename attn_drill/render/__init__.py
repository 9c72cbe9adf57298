"""The one layer that turns plain results into what the user sees (rich) or reads (JSON).

Verbs compute results and call these; every word comes from the message catalogue
(attn_drill/messages.py through attn_drill.i18n), every width rule lives in base. No torch.

  base       console, numbers that never get cut, tables that drop columns, clipping at words
  report     a check report: the first screen (fits 80×24), then the details
  exercism   the exercism v3 JSON of a report
  practice   list, show, hints, progress, mock interviews, today, plan, quiz
  classroom  grade, verify and bench output
"""
from .base import (FIRST_SCREEN, code, confirm, console, emit, error, live, markdown,  # noqa: F401
                   print_command, plain, print_json, say, spinner, warn)
from .exercism import exercism  # noqa: F401
