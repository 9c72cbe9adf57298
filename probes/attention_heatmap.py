"""Probes for `attention_heatmap` (they run beside the submission and hold no answers): call the
plotting function, describe the Figure it returns as data, and look at the file it saved."""
import os
import shutil
import sys
import tempfile

import matplotlib

matplotlib.use("Agg", force=True)

from attn_drill.room import kit  # noqa: E402

PNG_SIGNATURE_LEN = 8


def _close(fig) -> None:
    plt = sys.modules.get("matplotlib.pyplot")             # only when the submission used pyplot
    from matplotlib.figure import Figure
    if plt is not None and isinstance(fig, Figure):
        plt.close(fig)


def single(p):
    """plot_attention_weights(w, layer, head, tokens=..., save_path=...): the figure and the saved file."""
    w = p.inputs["attn_weights"]
    if p.args.get("grad"):
        w = w.clone().requires_grad_(True)
    tmp = tempfile.mkdtemp(prefix="attn_drill_fig_")
    path = os.path.join(tmp, "heatmap.png") if p.args.get("save") else None
    fig = None
    try:
        fig = p.target(w, p.kwargs["layer_idx"], p.kwargs["head_idx"], tokens=p.kwargs.get("tokens"), save_path=path)
        obs = kit.describe_figure(fig, ticks=p.kwargs.get("tokens") is not None)
        if path is not None:
            obs["saved"] = os.path.isfile(path)
            if obs["saved"]:
                with open(path, "rb") as fh:
                    obs["saved_head"] = fh.read(PNG_SIGNATURE_LEN)
        return obs
    finally:
        _close(fig)
        shutil.rmtree(tmp, ignore_errors=True)


def grid(p):
    """plot_attention_heads(w, layer, tokens=...): the figure."""
    fig = p.target(p.inputs["attn_weights"], p.kwargs["layer_idx"], tokens=p.kwargs.get("tokens"))
    try:
        return kit.describe_figure(fig, ticks=p.kwargs.get("tokens") is not None)
    finally:
        _close(fig)
