"""Ctrl-C in the full-screen loops (watch, mock).

By default Python raises KeyboardInterrupt at whatever line runs when the signal arrives, which in a
live screen is often halfway through writing to the terminal: the user's terminal then receives the
first bytes of a character and never the rest. Inside these loops Ctrl-C calls a function instead
(it queues a stop, or sets a flag), and the loop stops at a point of its own choosing.
"""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Callable, Iterator


@contextmanager
def ctrl_c(on_interrupt: Callable[[], None]) -> Iterator[None]:
    """While inside, Ctrl-C calls on_interrupt() instead of raising (main thread only; elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, lambda *_: on_interrupt())
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextmanager
def ctrl_c_raises() -> Iterator[None]:
    """Inside a ctrl_c() block: Ctrl-C raises KeyboardInterrupt again (a prompt that reads a line)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def cbreak(fd: int) -> list:
    """Keys one at a time, without echo; returns the settings to restore. NOFLSH too: a Ctrl-C does
    not make the terminal driver throw away what the screen was drawing (a character cut in half)."""
    import termios
    import tty
    old = termios.tcgetattr(fd)
    tty.setcbreak(fd)
    mode = termios.tcgetattr(fd)
    mode[3] |= getattr(termios, "NOFLSH", 0)
    termios.tcsetattr(fd, termios.TCSANOW, mode)
    return old
