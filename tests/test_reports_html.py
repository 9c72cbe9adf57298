"""The HTML reports (`check --html`, `grade --html`): one self-contained file each, nothing fetched, no
script; what a submission prints or raises, and a student's folder name, stay text; and, in a real
headless Chromium (skipped, with the reason, where none can be started): the page loads without a
console error, a screenshot is not blank, and a submission that prints `<script>` or `</table>`
changes nothing in the page's structure."""
from __future__ import annotations

import io
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from typer.testing import CliRunner

from attn_drill.render import html
from attn_drill.results import CaseResult, Diagnosis, Frame, Report, UserProblem
from attn_drill.verbs import check
from attn_drill.verbs.grade import Cell

from browser import Browser, NoBrowser

ROOT = Path(__file__).resolve().parent.parent
CLASS = ROOT / "tests" / "fixtures" / "class"
ENV = {"NO_COLOR": "1", "COLUMNS": "100"}
HOSTILE = "<script>document.title='pwned';console.error('pwned')</script></table></pre><img src=x onerror=alert(1)>"
PLAIN = "x" * len(HOSTILE)
runner = CliRunner()


class Tags(HTMLParser):
    """The element structure of a page: every start tag, with the attribute names it carries."""

    def __init__(self):
        super().__init__()
        self.tags: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag + "[" + ",".join(sorted(a for a, _ in attrs)) + "]")


def tags(page: str) -> list[str]:
    p = Tags()
    p.feed(page)
    return p.tags


def _submission(folder: Path, text: str, *, raises: bool) -> Path:
    """bob's wrong softmax (so the report has heatmaps), printing `text`; or raising it."""
    src = (CLASS / "bob" / "mhsa.py").read_text()
    line = f"        raise RuntimeError({text!r})\n" if raises else f"        print({text!r})\n"
    src = src.replace("        b, n, e = x.shape\n", line + "        b, n, e = x.shape\n")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "mhsa.py").write_text(src)
    return folder / "mhsa.py"


@pytest.fixture(scope="module")
def pages(judge, tmp_path_factory):
    """{name: path} of check pages for the same mistakes, one with markup in what the code prints and
    raises, one with plain text of the same length."""
    root = tmp_path_factory.mktemp("pages")
    out = {}
    for name, text in (("hostile", HOSTILE), ("plain", PLAIN)):
        reports = []
        for raises in (False, True):
            f = _submission(root / f"{name}-{raises}", text, raises=raises)
            reports.append(check.grade_file(judge, "mhsa", f, 3, time_limit=20))
        for r in reports:
            r.file = "mhsa.py"          # the two differ only in what the code says
            r.replay = f"attn-drill check mhsa --seed {r.seed}"
        out[name] = root / f"{name}.html"
        out[name].write_text(html.check_page([(r, "Multi-head self-attention") for r in reports]))
    return out


def test_a_check_page_is_self_contained_and_escapes_the_submission(pages):
    page = pages["hostile"].read_text()
    assert "<script" not in page.lower() and "<img src=x" not in page
    assert html.CSP in page and 'http-equiv="Content-Security-Policy"' in page
    assert not re.search(r"""(src|href)=["'](?!data:|#)""", page), "something would be fetched"
    assert "url(" not in page and "@import" not in page
    assert "&lt;script&gt;document.title=" in page          # printed and raised, shown as text
    assert "data:image/png;base64," in page                 # the maps, as images
    assert tags(page) == tags(pages["plain"].read_text())   # the markup changed no element


def test_a_class_page_escapes_student_names_and_messages():
    def page(text: str) -> str:
        student = "eve" + text[:40]
        cells = {(student, "mhsa"): Cell(student, "mhsa", "exception", "fail", 0, 3, message=text, file=f"{student}/x",
                                         detail=text, diagnosis=""),
                 ("zed", "mhsa"): Cell("zed", "mhsa", "fail", "fail", 1, 3, message=text, diagnosis="wrong_axis",
                                       replay="attn-drill check mhsa zed/mhsa.py --seed 1")}
        r = Report("mhsa", "zed/mhsa.py", 1, status="fail", output=text,
                   diagnosis=Diagnosis("wrong_axis", text, text),
                   cases=[CaseResult("c1", "fail", shapes=text, message=text,
                                     problem=UserProblem("exception", text, [Frame("mhsa.py", 3, text, text)]))])
        return html.class_page([student, "zed"], ["mhsa"], cells, text, [text], {("zed", "mhsa"): r}, {"mhsa": text})
    hostile, plain = page(HOSTILE), page(PLAIN)
    assert "<script" not in hostile.lower()
    assert tags(hostile) == tags(plain)


@pytest.fixture
def class_page(graded_class):
    """`grade --html` on the 8-student fixture class (graded once for the session, conftest.py)."""
    res, _, page, _ = graded_class
    assert res.exit_code == 1 and "under --fail-under 50" in res.output, res.output   # 1 of 8 pass
    assert "HTML report:" in res.output
    return page


@pytest.mark.slow
@pytest.mark.xdist_group("fixture_class")
def test_the_class_page(class_page):
    page = class_page.read_text()
    assert len(page.encode()) <= 2 * 1024 * 1024
    grid = page[page.index('<table class="grid">'):page.index("</table>", page.index('<table class="grid">'))]
    assert grid.count("<tr>") == 1 + 8
    for word in ("PASS", "FAIL", "exception", "timeout", "crash", "memory", "ERROR", "missing"):
        assert f">{word}" in grid, word
    links = re.findall(r'href="#([\w-]+)"', grid)
    assert len(links) == 8 and all(f'id="{a}"' in page for a in links)
    wrong = page[page.index("What the class got wrong most"):page.index("Every student")]
    assert "softmax_query_axis" in wrong and "Softmax over the query axis" in wrong
    assert "<script" not in page.lower() and not re.search(r"""(src|href)=["'](?!data:|#)""", page)


# ---------------------------------------------------------------- in a real browser
@pytest.fixture(scope="module")
def browser():
    try:
        with Browser() as b:
            yield b
    except NoBrowser as exc:
        pytest.skip(f"no headless browser: {exc}")


def _not_blank(png: bytes) -> None:
    from PIL import Image
    im = Image.open(io.BytesIO(png)).convert("RGB")
    small = im.resize((max(1, im.width // 4), max(1, im.height // 4)))
    colors = small.getcolors(1 << 20) or []
    inked = sum(n for n, c in colors if c != (255, 255, 255) and c != colors[0][1])
    assert len(colors) > 20, f"{len(colors)} colours: blank?"
    assert inked > 0.01 * small.width * small.height, "almost nothing drawn"


STRUCTURE = "Array.from(document.querySelectorAll('*')).map(e => e.tagName).join(' ')"


def test_a_check_page_in_a_browser(browser, pages, tmp_path):
    seen = {}
    for name in ("hostile", "plain"):
        page = browser.open(pages[name], 1000, 800)
        seen[name] = page.eval(STRUCTURE)
        assert page.errors == [], page.errors
        assert page.eval("document.scripts.length") == 0
        assert page.eval("document.title") == "attn-drill check: mhsa, mhsa"
        assert page.eval("document.querySelectorAll('img').length") >= 2
        assert page.eval("Array.from(document.images).every(i => i.complete && i.naturalWidth > 0)")
        _not_blank(page.screenshot(tmp_path / f"{name}.png"))
    assert seen["hostile"] == seen["plain"]
    page = browser.open(pages["hostile"], 1000, 800)
    assert HOSTILE in page.eval("Array.from(document.querySelectorAll('pre')).map(p => p.textContent).join('')")


@pytest.mark.slow
@pytest.mark.xdist_group("fixture_class")
def test_the_class_page_in_a_browser_on_a_phone(browser, class_page, tmp_path):
    page = browser.open(class_page, 390, 844, mobile=True)
    assert page.errors == [], page.errors
    assert page.eval("document.scripts.length") == 0
    assert page.eval("document.documentElement.scrollWidth") <= 390 + 1, "wider than the phone"
    assert page.eval("Array.from(document.querySelectorAll('table.grid a')).every("
                     "a => document.getElementById(a.hash.slice(1)) !== null)")
    _not_blank(page.screenshot(tmp_path / "class.png"))


def test_no_browser_is_said_with_the_reason(monkeypatch):
    monkeypatch.setenv("ATTN_DRILL_CHROMIUM", "/nonexistent/chromium")
    with pytest.raises(NoBrowser, match="no Chromium found"):
        with Browser():
            pass
