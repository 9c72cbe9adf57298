"""A headless Chromium driven over the DevTools protocol on a pipe (no websocket library, no network):
open a page, collect its console errors, evaluate JavaScript in it, take a screenshot.

    with Browser() as b:                    # skips (pytest) or raises when no Chromium can be started
        page = b.open(path, width=390, height=844)
        page.errors                         # console errors, uncaught exceptions, failed loads
        page.eval("document.title")
        page.screenshot(png_path, full=True)

Chromium starts with a fresh profile and every flag that keeps it off the network.
"""
from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions", "--disable-default-apps", "--mute-audio", "--hide-scrollbars",
         "--remote-debugging-pipe"]


class NoBrowser(RuntimeError):
    """No Chromium here, or it would not start."""


def find() -> str | None:
    env = os.environ.get("ATTN_DRILL_CHROMIUM")
    if env:
        return env if Path(env).is_file() else None
    return next((p for p in map(shutil.which, NAMES) if p), None)


class Page:
    def __init__(self, browser: "Browser", session: str):
        self.b, self.session = browser, session
        self.errors: list[str] = []

    def call(self, method: str, params: dict | None = None, timeout: float = 30) -> dict:
        return self.b.call(method, params, self.session, timeout)

    def eval(self, expression: str):
        res = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in res:
            raise RuntimeError(f"{expression}: {res['exceptionDetails']}")
        return res["result"].get("value")

    def screenshot(self, path: Path, full: bool = True) -> bytes:
        params = {"format": "png"}
        if full:
            w, h = self.eval("[document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
            params.update(captureBeyondViewport=True, clip={"x": 0, "y": 0, "width": w, "height": h, "scale": 1})
        data = base64.b64decode(self.call("Page.captureScreenshot", params)["data"])
        Path(path).write_bytes(data)
        return data


class Browser:
    def __init__(self, binary: str | None = None):
        self.binary = binary or find()
        self.proc = None
        self._id = 0
        self._buf = b""
        self._pages: dict[str, Page] = {}

    def __enter__(self) -> "Browser":
        if not self.binary:
            raise NoBrowser("no Chromium found (looked for " + ", ".join(NAMES) + "; or set ATTN_DRILL_CHROMIUM)")
        self.profile = tempfile.mkdtemp(prefix="attn-drill-chromium-")
        to_child, self._w = os.pipe()      # we write, Chromium reads on fd 3
        self._r, from_child = os.pipe()    # Chromium writes on fd 4, we read

        def fds():
            a, b = os.dup(to_child), os.dup(from_child)     # dup2 onto itself would keep close-on-exec
            os.dup2(a, 3)
            os.dup2(b, 4)
        self._log = open(Path(self.profile) / "stderr.log", "wb")
        try:
            self.proc = subprocess.Popen([self.binary, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
                                         preexec_fn=fds, close_fds=False, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=self._log)
        except OSError as exc:
            raise NoBrowser(f"{self.binary} would not start: {exc}") from None
        finally:
            os.close(to_child)
            os.close(from_child)
        try:
            self.call("Target.getTargets", timeout=60)
        except (OSError, TimeoutError, NoBrowser) as exc:
            self.__exit__()
            raise NoBrowser(f"{self.binary} did not answer: {exc}") from None
        return self

    def __exit__(self, *exc) -> None:
        if self.proc is not None:
            try:
                self._send({"id": 0, "method": "Browser.close", "params": {}})
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
            self.proc = None
        for fd in (getattr(self, "_w", None), getattr(self, "_r", None)):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        if getattr(self, "_log", None):
            self._log.close()
        shutil.rmtree(getattr(self, "profile", ""), ignore_errors=True)

    # ------------------------------------------------------------ the protocol
    def _send(self, msg: dict) -> None:
        os.write(self._w, json.dumps(msg).encode() + b"\0")

    def call(self, method: str, params: dict | None = None, session: str | None = None, timeout: float = 30) -> dict:
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        self._send(msg)
        deadline = time.monotonic() + timeout
        while True:
            while b"\0" in self._buf:
                raw, self._buf = self._buf.split(b"\0", 1)
                reply = json.loads(raw)
                if reply.get("id") == self._id:
                    if "error" in reply:
                        raise RuntimeError(f"{method}: {reply['error']}")
                    return reply.get("result", {})
                self._event(reply)
            if time.monotonic() > deadline:
                raise TimeoutError(f"{method}: no answer in {timeout} s")
            if self.proc.poll() is not None:
                raise NoBrowser(f"Chromium exited with {self.proc.returncode}")
            if not select.select([self._r], [], [], min(1.0, max(0.0, deadline - time.monotonic())))[0]:
                continue
            chunk = os.read(self._r, 1 << 20)
            if not chunk:
                raise NoBrowser("Chromium closed the pipe")
            self._buf += chunk

    def _event(self, msg: dict) -> None:
        page = self._pages.get(msg.get("sessionId", ""))
        if page is None:
            return
        method, p = msg.get("method"), msg.get("params", {})
        if method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            page.errors.append("console: " + " ".join(str(a.get("value", a.get("description", "")))
                                                      for a in p.get("args", [])))
        elif method == "Runtime.exceptionThrown":
            page.errors.append("exception: " + json.dumps(p.get("exceptionDetails", {}))[:500])
        elif method == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            page.errors.append("log: " + p["entry"].get("text", ""))

    def open(self, path: Path, width: int = 1000, height: int = 800, mobile: bool = False) -> Page:
        """A new tab showing the file, once it has loaded."""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, session)
        self._pages[session] = page
        for m in ("Runtime.enable", "Log.enable", "Page.enable"):
            page.call(m)
        page.call("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1,
                                                         "mobile": mobile})
        page.call("Page.navigate", {"url": Path(path).resolve().as_uri()})
        deadline = time.monotonic() + 30
        while page.eval("document.readyState") != "complete":
            if time.monotonic() > deadline:
                raise TimeoutError(f"{path} did not load")
            time.sleep(0.05)
        return page
