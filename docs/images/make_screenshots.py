"""Make the screenshots of docs/images/ from the tool's real output, in a headless Chromium:

  check-report.png        `attn-drill check gqa --html` of a GQA whose KV heads are tiled (a named mistake)
  check-report-phone.png  the same page on a phone-sized screen
  class-report.png        `attn-drill grade tests/fixtures/class --html`: the grid and what the class got wrong
  notebook.png            a `%%check gqa` cell of the same code, run by nbclient and shown by nbconvert's
                          JupyterLab template

    python docs/images/make_screenshots.py

Needs Chromium, and for the notebook the test extra plus nbconvert.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "tests"))

from browser import Browser  # noqa: E402

TILED = ("k = k[:, :, None].expand(B, Hkv, G, L, D).reshape(B, Hq, L, D)", "k = k.repeat(1, G, 1, 1)",
         "v = v[:, :, None].expand(B, Hkv, G, L, D).reshape(B, Hq, L, D)", "v = v.repeat(1, G, 1, 1)")


def tiled_gqa() -> str:
    src = (ROOT / "reference" / "gqa.py").read_text()
    for old, new in zip(TILED[::2], TILED[1::2]):
        assert old in src
        src = src.replace(old, new)
    return src


def cli(args, cwd) -> None:
    env = dict(os.environ, NO_COLOR="1", COLUMNS="100", PYTHONPATH=str(ROOT))
    subprocess.run([sys.executable, "-m", "attn_drill", *args], cwd=cwd, env=env, check=False,
                   stdout=subprocess.DEVNULL)


def crop(png: Path, height: int) -> None:
    from PIL import Image
    im = Image.open(png)
    im.crop((0, 0, im.width, min(height, im.height))).save(png, optimize=True)


def notebook_page(tmp: Path) -> Path:
    import nbformat
    from nbclient import NotebookClient
    from nbconvert import HTMLExporter
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("%load_ext attn_drill"),
                nbformat.v4.new_code_cell("%%check gqa --seed 7\n" + tiled_gqa())]
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp)}}).execute()
    body, _ = HTMLExporter(template_name="lab").from_notebook_node(nb)
    page = tmp / "notebook.html"
    page.write_text(body)
    return page


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp, Browser() as b:
        tmp = Path(tmp)
        (tmp / "gqa.py").write_text(tiled_gqa())
        cli(["check", "gqa", "--seed", "7", "--html", "check.html"], tmp)
        b.open(tmp / "check.html", 1000, 900).screenshot(OUT / "check-report.png")
        crop(OUT / "check-report.png", 1900)
        b.open(tmp / "check.html", 390, 844, mobile=True).screenshot(OUT / "check-report-phone.png", full=False)
        cli(["grade", "tests/fixtures/class", "--time-limit", "20", "--seed", "1", "--workers", "2",   # paths as typed
             "--out", str(tmp / "grades"), "--html", str(tmp / "class.html")], ROOT)
        b.open(tmp / "class.html", 1000, 900).screenshot(OUT / "class-report.png")
        crop(OUT / "class-report.png", 1250)
        page = b.open(notebook_page(tmp), 1100, 900)
        top = page.eval("window.scrollY + document.querySelectorAll('.jp-Cell')[1].getBoundingClientRect().top")
        code = page.eval("document.querySelectorAll('.jp-Cell')[1].querySelector('.jp-OutputArea')"
                         ".getBoundingClientRect().top + window.scrollY")
        png = OUT / "notebook.png"
        page.screenshot(png)
        from PIL import Image
        im = Image.open(png)
        start = max(int(top), int(code) - 420)      # the end of the cell's code, then its report
        im.crop((0, start, im.width, min(im.height, start + 1700))).save(png, optimize=True)
    for p in sorted(OUT.glob("*.png")):
        print(p.relative_to(ROOT), f"{p.stat().st_size / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
