"""The command line as a user meets it (CliRunner, no colour, fixed width)."""
import json
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from attn_drill.cli import app

ROOT = Path(__file__).resolve().parent.parent
runner = CliRunner()


def invoke(args, env, **kw):
    return runner.invoke(app, args, env=env, catch_exceptions=False, **kw)


def test_every_command_has_help(cli_env):
    top = invoke(["--help"], cli_env)
    assert top.exit_code == 0
    commands = [c.name or c.callback.__name__ for c in app.registered_commands]
    assert {"list", "show", "new", "check", "verify"} <= set(commands)
    for name in commands:
        res = invoke([name, "--help"], cli_env)
        assert res.exit_code == 0, name
        assert "Example" in res.output, f"`{name} --help` has no example"


def test_python_dash_m_and_list_do_not_import_torch():
    code = ("import sys, runpy; sys.argv = ['attn-drill', 'list']\n"
            "try:\n    runpy.run_module('attn_drill', run_name='__main__')\n"
            "except SystemExit as e:\n    assert e.code == 0, e.code\n"
            "assert 'torch' not in sys.modules, 'list imported torch'\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env={"NO_COLOR": "1", "COLUMNS": "100", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert "mhsa" in out.stdout


def test_list_filters_and_json(cli_env):
    res = invoke(["list", "--json"], cli_env)
    data = json.loads(res.output)
    assert any(p["id"] == "mhsa" for p in data)
    res = invoke(["list", "--tag", "mha", "--json"], cli_env)
    assert all("mha" in p["tags"] for p in json.loads(res.output))
    res = invoke(["list", "--difficulty", "hard", "--json"], cli_env)
    assert all(p["difficulty"] == "hard" for p in json.loads(res.output))


def test_show_in_both_languages(cli_env):
    en = invoke(["show", "mhsa"], cli_env)
    zh = invoke(["show", "mhsa", "--lang", "zh"], cli_env)
    assert en.exit_code == zh.exit_code == 0
    assert "MultiHeadSelfAttention" in en.output and "hints" in en.output
    assert "多头自注意力" in zh.output


def test_unknown_id_suggests_close_ones(cli_env):
    res = invoke(["show", "mhas"], cli_env)
    assert res.exit_code == 2
    assert "Did you mean mhsa" in res.output


def test_new_never_overwrites_without_force(cli_env, tmp_path):
    res = invoke(["new", "mhsa", "--dir", str(tmp_path)], cli_env)
    assert res.exit_code == 0
    stub = tmp_path / "mhsa.py"
    stub.write_text("my precious work\n")
    res = invoke(["new", "mhsa", "--dir", str(tmp_path)], cli_env)
    assert res.exit_code == 1 and "already exists" in res.output
    assert stub.read_text() == "my precious work\n"
    res = invoke(["new", "mhsa", "--dir", str(tmp_path), "--force"], cli_env)
    assert res.exit_code == 0
    backups = list(tmp_path.glob("mhsa.py.*.bak"))
    assert len(backups) == 1 and backups[0].read_text() == "my precious work\n"
    assert "class MultiHeadSelfAttention" in stub.read_text()


def test_check_missing_file_is_a_usage_error(cli_env, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = invoke(["check", "mhsa"], cli_env)
    assert res.exit_code == 2 and "attn-drill new mhsa" in res.output
    res = invoke(["check"], cli_env)
    assert res.exit_code == 2


def test_a_library_not_implemented_error_is_a_failure_not_an_unwritten_stub(cli_env, tmp_path):
    """torch raising NotImplementedError (an op without a bfloat16 kernel) on a written line is the
    code's failure, with torch's words; only the code's own `raise NotImplementedError` is "not written"."""
    path = tmp_path / "mhsa.py"
    path.write_text((ROOT / "reference" / "mhsa.py").read_text().replace(
        "        return self.out_proj(out)",
        "        if x.dtype == torch.bfloat16:\n"
        "            torch.linalg.solve_triangular(torch.eye(2, dtype=x.dtype), torch.ones(2, 1, dtype=x.dtype),"
        " upper=False)\n"
        "        return self.out_proj(out)"))
    res = invoke(["check", "mhsa", str(path), "--json"], cli_env)
    report = json.loads(res.output)
    failed = [t for t in report["tests"] if t["status"] != "pass"]
    assert res.exit_code == 1 and failed and all("bf16" in t["name"] for t in failed), report["message"]
    assert len(report["tests"]) > len(failed) + 1                  # grading went on past the first failure
    assert "not implemented for 'BFloat16'" in failed[0]["message"]
    assert "not written yet" not in res.output and "still raises" not in res.output


def test_check_stub_fails_and_reference_passes(cli_env, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    invoke(["new", "mhsa"], cli_env)
    res = invoke(["check", "mhsa", "--seed", "4"], cli_env)
    assert res.exit_code == 1
    assert "not written yet" in res.output and "mhsa.py:" in res.output
    # the replay names the file as the user did: here, the default ./mhsa.py, so no path at all
    assert "replay: attn-drill check mhsa --seed 4 --case" in res.output
    good = tmp_path / "good.py"
    good.write_text((ROOT / "reference" / "mhsa.py").read_text())
    res = invoke(["check", "mhsa", str(good), "--seed", "4"], cli_env)
    assert res.exit_code == 0, res.output
    assert "PASS" in res.output and "seed 4" in res.output


def test_check_report_explains_a_known_mistake(cli_env, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    src = (ROOT / "reference" / "mhsa.py").read_text().replace("torch.softmax(scores, dim=-1)",
                                                                "torch.softmax(scores, dim=-2)")
    (tmp_path / "mhsa.py").write_text(src)
    res = invoke(["check", "mhsa", "--seed", "2"], cli_env)
    assert res.exit_code == 1
    first = res.output          # the first screen: the failing case, the named mistake, the replay
    # the mistake by its title (the id stays in the JSON)
    assert "looks like: softmax over the query axis" in first and "dim=-2" in first and "replay: " in first
    assert "softmax_query_axis" not in first
    assert "Mismatched elements" not in first and "--verbose" in first
    res = invoke(["check", "mhsa", "--seed", "2", "--verbose"], cli_env)
    out = res.output
    assert out.startswith(first.split("details:")[0][:200])                # the same first screen, then
    assert "Mismatched elements" in out and "Greatest absolute difference" in out   # the details
    assert "got vs expected" in out and "error of `out`" in out
    assert out.count("looks like") == 1                                      # said once, on the first screen
    data = json.loads(invoke(["check", "mhsa", "--seed", "2", "--json"], cli_env).output)
    assert data["attn_drill"]["diagnosis"] == "softmax_query_axis"


def test_check_json_is_exercism_v3(cli_env, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mhsa.py").write_text("def broken(:\n")
    res = invoke(["check", "mhsa", "--json", "--seed", "1"], cli_env)
    assert res.exit_code == 1
    data = json.loads(res.output)
    assert data["version"] == 3 and data["status"] == "error" and "mhsa.py:1" in data["message"]
    (tmp_path / "mhsa.py").write_text((ROOT / "reference" / "mhsa.py").read_text())
    res = invoke(["check", "mhsa", "--json", "--seed", "1"], cli_env)
    data = json.loads(res.output)
    assert res.exit_code == 0 and data["status"] == "pass" and data["message"] is None
    for t in data["tests"]:
        assert set(t) >= {"name", "status", "message", "output"}
        assert t["attn_drill"]["seed"] == 1 and t["attn_drill"]["dtype"]
    assert any(t["attn_drill"]["max_error"] is not None for t in data["tests"])


def test_check_grades_every_file_present(cli_env, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mhsa.py").write_text((ROOT / "reference" / "mhsa.py").read_text())
    res = invoke(["check", "--seed", "3"], cli_env)
    assert res.exit_code == 0 and "mhsa" in res.output
    assert (tmp_path / ".attn-drill" / "state.json").exists()
    status = json.loads(invoke(["list", "--json"], cli_env).output)
    assert next(p for p in status if p["id"] == "mhsa")["status"] == "passed"


def test_verify_on_the_fixture_bank(cli_env, fixture_bank):
    res = invoke(["verify", "--json"], cli_env)
    data = json.loads(res.output)
    assert res.exit_code == 0, res.output
    assert data["ok"] and data["problems"][0]["mutants_caught"] == 4


def test_verify_fails_a_mutant_that_is_not_caught(cli_env, fixture_bank, tmp_path, monkeypatch):
    import shutil
    bank_copy = tmp_path / "bank"
    shutil.copytree(fixture_bank, bank_copy)
    grader = bank_copy / "graders" / "attend.py"
    # without masked cases, the mask_ignored mutant passes every case
    grader.write_text(grader.read_text().replace('kwargs={"mask": causal_keep(4)}, ', ""))
    monkeypatch.setenv("ATTN_DRILL_BANK", str(bank_copy))
    from attn_drill import bank
    bank.root.cache_clear()
    bank.get.cache_clear()
    res = invoke(["verify", "attend"], cli_env)
    assert res.exit_code == 1
    assert "mutant mask_ignored passes every case" in res.output


def test_a_binary_file_or_a_folder_is_explained(cli_env, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mhsa.py").write_bytes(b"\xff\xfe\x00garbage\x81")
    res = invoke(["check", "mhsa", "--seed", "1"], cli_env)
    assert res.exit_code == 1 and "not UTF-8" in res.output
    res = invoke(["check", "mhsa", str(tmp_path)], cli_env)
    assert res.exit_code == 2 and "is a folder" in res.output


def test_a_device_is_explained_and_a_bom_is_no_character(cli_env, tmp_path, monkeypatch, judge):
    """`check mhsa /dev/null` names what the path is; a file saved with a UTF-8 BOM (as some editors
    save) is graded as Python runs it."""
    monkeypatch.chdir(tmp_path)
    res = invoke(["check", "mhsa", "/dev/null"], cli_env)
    assert res.exit_code == 2 and "not a regular file" in res.output, res.output
    from attn_drill import bank
    bom = tmp_path / "mhsa.py"
    bom.write_bytes(b"\xef\xbb\xbf" + bank.reference_path("mhsa").read_bytes())
    assert judge.grade("mhsa", str(bom), 0, time_limit=60).status == "pass"


def test_check_json_is_a_document_whatever_goes_wrong(cli_env, tmp_path, monkeypatch):
    """A script reading `check --json` gets JSON even when nothing could be graded (exit 2)."""
    import json
    monkeypatch.chdir(tmp_path)
    res = invoke(["check", "nosuch", "x.py", "--json"], cli_env)
    assert res.exit_code == 2
    doc = json.loads(res.stdout)
    assert doc["status"] == "error" and "nosuch" in doc["message"] and doc["attn_drill"]["not_graded"] is True


def test_the_command_line_as_run_names_one_command_or_all(cli_env, tmp_path):
    """`attn-drill <command>` builds only that command; the top-level help still lists every one, and
    a mistyped name gets click's suggestion, once."""
    import os
    import subprocess
    import sys

    def run(*args):
        return subprocess.run([sys.executable, "-m", "attn_drill", *args], cwd=tmp_path, capture_output=True,
                              text=True, env={**os.environ, **cli_env}, timeout=60)
    top = run("--help")
    assert top.returncode == 0 and all(c in top.stdout for c in ("list", "check", "grade", "verify"))
    typo = run("lst")
    assert typo.returncode == 2 and typo.stderr.count("Did you mean 'list'?") == 1, typo.stderr
    listed = run("list", "--tag", "gqa")
    assert listed.returncode == 0 and "gqa" in listed.stdout


def test_a_ctrl_c_caught_in_a_callback_is_not_lost():
    """Ctrl-C landing in a weakref callback (the import machinery has one) is printed by Python as
    "Exception ignored" and dropped; the tool raises it again in the main thread instead."""
    code = ("import importlib, signal, sys, weakref\n"
            # SIGINT as a terminal's shell leaves it: the suite's worker may pass it on ignored or blocked
            "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
            "signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})\n"
            "a = importlib.import_module('attn_drill.cli.app')\n"
            "sys.unraisablehook = a._redeliver\n"
            "class O: pass\n"
            "def cb(_): raise KeyboardInterrupt\n"
            "o = O(); r = weakref.ref(o, cb)\n"
            "try:\n"
            "    del o\n"
            "    import time\n"
            "    for _ in range(300):\n"       # up to 30 s: on a loaded machine the interrupt may come late
            "        time.sleep(0.1)\n"
            "    print('lost')\n"
            "except KeyboardInterrupt:\n"
            "    print('raised again')\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.stdout.strip() == "raised again", p.stdout + p.stderr
    assert "Traceback" not in p.stderr and "Exception ignored" not in p.stderr, p.stderr
