"""Cases for `attention_heatmap`: every case is a check on the matplotlib Figure the submission
returns (probes/attention_heatmap.py describes it as data): the plotted data, the title, the axis
labels, the token tick labels, the saved PNG, the grid of heads and its unused cells."""
from __future__ import annotations

import re

import numpy as np
import torch

from attn_drill.bank.api import Case, Ctx, Failure
from attn_drill.i18n import pick

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
WORDS = ["<s>", "the", "cat", "sat", "on", "a", "warm", "mat", "and", "slept", "all", "day", "."]


def _weights(ctx: Ctx, *shape: int) -> torch.Tensor:
    return torch.softmax(ctx.randn(*shape, scale=2.0), dim=-1)   # rows sum to 1, like real weights


def _image_axes(fig: dict) -> list[dict]:
    return [ax for ax in fig["axes"] if ax["images"]]


def _data(ax: dict) -> np.ndarray:
    img = ax["images"][0]
    return img.numpy() if isinstance(img, torch.Tensor) else np.zeros((0,))


def _has(text: str, word: str, value) -> bool:
    return re.search(rf"\b{word}\b\W*{value}(?!\d)", text, flags=re.IGNORECASE) is not None


def _check_heatmap(ax, expected: np.ndarray, what: str) -> list:
    """The image must show `expected` (rows = queries, columns = keys)."""
    data = _data(ax)
    if data.shape == expected.shape and np.allclose(data, expected, rtol=1e-6, atol=1e-7):
        return []
    if data.shape == expected.T.shape and np.allclose(data, expected.T, rtol=1e-6, atol=1e-7):
        return [Failure(pick(f"{what}: the image shows the transposed weights, shape {data.shape}; rows must be "
                             f"queries and columns keys, shape {expected.shape}",
                             f"{what}：图像显示的是转置后的权重，形状为 {data.shape}；行应为 query、列应为 key，"
                             f"形状为 {expected.shape}"), mistake="transposed_data")]
    if data.shape != expected.shape:
        return [pick(f"{what}: the image has shape {data.shape}, expected the weights' {expected.shape}",
                     f"{what}：图像的形状为 {data.shape}，应与权重的形状 {expected.shape} 一致")]
    err = float(np.abs(data - expected).max())
    return [pick(f"{what}: the image data differ from the weights by up to {err:.3g}; plot the values "
                 f"themselves (no normalisation or rounding)",
                 f"{what}：图像数据与权重最多相差 {err:.3g}；应直接绘制权重本身的值（不要归一化或取整）")]


def _check_labels(ax: dict, what: str) -> list:
    x, y = ax["xlabel"].lower(), ax["ylabel"].lower()
    if "query" in x and "key" in y:
        return [Failure(pick(f"{what}: the x axis is labelled '{ax['xlabel']}' and the y axis "
                             f"'{ax['ylabel']}'; keys run along x (columns) and queries along y (rows)",
                             f"{what}：x 轴的标签是 '{ax['xlabel']}'，y 轴的标签是 '{ax['ylabel']}'；"
                             f"key 应沿 x 轴（列），query 应沿 y 轴（行）"),
                        mistake="axis_labels_swapped")]
    out = []
    if "key" not in x:
        out.append(pick(f"{what}: the x-axis label '{ax['xlabel']}' should name the keys (e.g. 'Key position')",
                        f"{what}：x 轴标签 '{ax['xlabel']}' 应表明是 key（例如 'Key position'）"))
    if "query" not in y:
        out.append(pick(f"{what}: the y-axis label '{ax['ylabel']}' should name the queries (e.g. 'Query position')",
                        f"{what}：y 轴标签 '{ax['ylabel']}' 应表明是 query（例如 'Query position'）"))
    return out


def _check_ticks(ax: dict, tokens, Lq: int, Lk: int, what: str) -> list:
    got_x, got_y = ax["xticks"], ax["yticks"]
    want_x, want_y = list(tokens[:Lk]), list(tokens[Lk - Lq:Lk])
    if got_x == want_x and got_y == want_y:
        return []
    msg = pick(f"{what}: with tokens={want_x}, the tick labels are x={got_x[:14]}, y={got_y[:14]}; expected "
               f"x={want_x[:14]}, y={want_y[:14]}",
               f"{what}：tokens={want_x} 时，刻度标签为 x={got_x[:14]}，y={got_y[:14]}；期望 "
               f"x={want_x[:14]}，y={want_y[:14]}")
    if not set(got_x + got_y) & set(tokens):           # no token anywhere: the ticks were never labelled
        return [Failure(msg + pick("; put one tick per position (set_xticks(range(Lk))) labelled with the tokens",
                                   "；每个位置放一个刻度（set_xticks(range(Lk))），并用 token 作为刻度标签"),
                        mistake="no_tick_labels")]
    if got_x == want_x and Lq < Lk and got_y == list(tokens[:Lq]):
        return [msg + pick("; the queries are the LAST Lq tokens (tokens[Lk - Lq:]), as in decoding",
                           "；query 是最后 Lq 个 token（tokens[Lk - Lq:]），与解码时一样")]
    return [msg]


def _figure(obs) -> dict | None:
    return obs if isinstance(obs, dict) and obs.get("type") == "Figure" else None


def _single(sub, ref, case) -> list:
    """A check of plot_attention_weights (probe `single`)."""
    w = case.inputs["attn_weights"].to(case.dtype)
    layer, head = case.kwargs["layer_idx"], case.kwargs["head_idx"]
    tokens = case.kwargs.get("tokens")
    fig = _figure(sub)
    if fig is None:
        got = sub.get('type') if isinstance(sub, dict) else '?'
        return [pick(f"plot_attention_weights returned {got}; return the matplotlib Figure",
                     f"plot_attention_weights 返回了 {got}；应返回 matplotlib Figure")]
    axes = _image_axes(fig)
    if len(axes) != 1:
        return [pick(f"the figure has {len(axes)} axes with an image; expected exactly one heatmap",
                     f"图中有 {len(axes)} 个带图像的坐标轴；应恰好有一张热力图")]
    ax = axes[0]
    sample = w[0] if w.dim() == 3 else w
    failures = _check_heatmap(ax, sample.detach().double().numpy(), pick("heatmap", "热力图"))
    title = ax["title"] + " " + fig["suptitle"]
    if not _has(title, "layer", layer):
        failures.append(pick(f"the title '{title.strip()}' should name the layer, e.g. 'Layer {layer}'",
                             f"标题 '{title.strip()}' 应写明是哪一层，例如 'Layer {layer}'"))
    if not _has(title, "head", head):
        failures.append(Failure(pick(f"the title '{title.strip()}' should name the head, e.g. 'Head {head}'",
                                     f"标题 '{title.strip()}' 应写明是哪个头，例如 'Head {head}'"),
                                mistake="title_missing_head"))
    failures += _check_labels(ax, pick("heatmap", "热力图"))
    if case.probe_args.get("colorbar") and len(fig["axes"]) < 2:
        failures.append(pick("add a colorbar (fig.colorbar(image, ax=ax)) so the colours can be read",
                             "请加上颜色条（fig.colorbar(image, ax=ax)），这样才能读出颜色对应的数值"))
    if tokens is not None:
        failures += _check_ticks(ax, tokens, *sample.shape, pick("heatmap", "热力图"))
    if case.probe_args.get("save"):
        if not sub.get("saved"):
            failures.append(Failure(pick("save_path was given but no file was written there",
                                         "传入了 save_path，但没有在该路径写入文件"), mistake="not_saving"))
        elif sub.get("saved_head") != PNG_SIGNATURE:
            failures.append(pick(f"the file written to save_path is not a PNG (starts with {sub.get('saved_head')!r})",
                                 f"写入 save_path 的文件不是 PNG（开头为 {sub.get('saved_head')!r}）"))
    return failures


def _grid(sub, ref, case) -> list:
    """A check of plot_attention_heads (probe `grid`): one heatmap per head, in reading order, titled
    with its head; the unused cells of the grid turned off."""
    w = case.inputs["attn_weights"].to(case.dtype)
    layer = case.kwargs["layer_idx"]
    tokens = case.kwargs.get("tokens")
    H = w.shape[0]
    fig = _figure(sub)
    if fig is None:
        got = sub.get('type') if isinstance(sub, dict) else '?'
        return [pick(f"plot_attention_heads returned {got}; return the matplotlib Figure",
                     f"plot_attention_heads 返回了 {got}；应返回 matplotlib Figure")]
    axes = _image_axes(fig)
    if len(axes) != H:
        return [pick(f"the grid has {len(axes)} axes with an image for {H} heads; draw one heatmap per head "
                     f"(and turn the unused cells off)",
                     f"共有 {H} 个头，但网格中有 {len(axes)} 个带图像的坐标轴；每个头画一张热力图"
                     f"（并关掉未使用的格子）")]
    failures = []
    heads = [w[h].double().numpy() for h in range(H)]
    shown = [next((h for h, e in enumerate(heads) if _data(ax).shape == e.shape and
                   np.allclose(_data(ax), e, rtol=1e-6, atol=1e-7)), None) for ax in axes]
    if None not in shown and shown != list(range(H)):
        failures.append(pick(f"the subplots show the heads in the order {shown}; head h goes in cell h in "
                             f"reading order (row by row: axes = fig.subplots(nrows, ncols).flatten(); axes[h])",
                             f"各子图中头的顺序是 {shown}；按阅读顺序，头 h 应放在第 h 个格子"
                             f"（逐行排列：axes = fig.subplots(nrows, ncols).flatten(); axes[h]）"))
    for k, ax in enumerate(axes):
        h = shown[k] if shown[k] is not None else k
        if shown[k] is None:
            failures += _check_heatmap(ax, heads[k], pick(f"subplot {k}", f"子图 {k}"))
        title = ax["title"]
        if not re.search(r"\bhead\b", title, flags=re.IGNORECASE):
            failures.append(Failure(pick(f"subplot {k} is titled '{title}'; name its head, 'Head {h}'",
                                         f"子图 {k} 的标题是 '{title}'；应写明它是哪个头：'Head {h}'"),
                                    mistake="title_missing_head"))
        elif not _has(title, "head", h):
            failures.append(pick(f"subplot {k} shows head {h} but is titled '{title}'",
                                 f"子图 {k} 显示的是头 {h}，但标题是 '{title}'"))
        failures += _check_labels(ax, pick(f"subplot {k}", f"子图 {k}"))
        if tokens is not None:
            failures += _check_ticks(ax, tokens, *heads[h].shape, pick(f"subplot {k}", f"子图 {k}"))
    spare = [a for a in fig["axes"] if not a["images"] and a.get("label") != "<colorbar>"]
    left_on = [a for a in spare if a["visible"] and a["axison"]]
    if left_on:
        failures.append(pick(f"{len(left_on)} unused cell(s) of the grid are still drawn (empty axes with ticks and "
                             f"frame); turn them off with ax.axis('off')",
                             f"网格中有 {len(left_on)} 个未使用的格子仍被画了出来（带刻度和边框的空坐标轴）；"
                             f"用 ax.axis('off') 关掉它们"))
    titles = " ".join([fig["suptitle"]] + [a["title"] for a in fig["axes"]])
    if not _has(titles, "layer", layer):
        failures.append(pick(f"the figure should name the layer, e.g. fig.suptitle('Layer {layer}')",
                             f"图中应写明是哪一层，例如 fig.suptitle('Layer {layer}')"))
    return failures[:4]


def _case(name, w, layer, head=None, tokens=None, features=(), dtype=torch.float32, note=""):
    kwargs = {"layer_idx": layer}
    if head is not None:
        kwargs["head_idx"] = head
    if tokens is not None:
        kwargs["tokens"] = tokens
    grid = head is None
    return Case(name=name, target="plot_attention_heads" if grid else "plot_attention_weights",
                inputs={"attn_weights": w}, kwargs=kwargs, dtype=dtype, grad=False,
                probe="grid" if grid else "single", probe_args={f: True for f in features},
                check=_grid if grid else _single, note=note)


def cases(ctx: Ctx) -> list[Case]:
    out = [
        _case("square_fp32", _weights(ctx, 7, 7), 3, 5, features=("colorbar",), note="title, labels, data"),
        _case("rect_decode", _weights(ctx, 3, 9), 11, 2, note="Lq 3 < Lk 9"),
        _case("tokens", _weights(ctx, 8, 8), 0, 7, tokens=WORDS[:8], note="token tick labels"),
        _case("rect_tokens", _weights(ctx, 2, 6), 4, 1, tokens=WORDS[:6], note="tokens, Lq 2 < Lk 6"),
        _case("save_png", _weights(ctx, 5, 5), 2, 3, features=("save",), note="writes a PNG"),
        _case("batched_bf16_grad", _weights(ctx, 2, 6, 6), 1, 0, features=("grad",), dtype=torch.bfloat16,
              note="(B, L, L) bf16 with grad: sample 0"),
        _case("len1", _weights(ctx, 1, 1), 0, 0, note="a single token"),
        _case("grid_4_heads", _weights(ctx, 4, 5, 5), 2, note="4 heads, 2x2 grid"),
        _case("grid_5_heads_tokens", _weights(ctx, 5, 4, 4), 7, tokens=WORDS[:4], note="5 heads, one cell unused"),
        _case("grid_1_head", _weights(ctx, 1, 3, 4), 0, note="one head"),
        _case("long_l64", _weights(ctx, ctx.int(64, 70), ctx.int(70, 80)), ctx.int(0, 30), ctx.int(0, 30),
              note="a long sequence, sizes from the seed"),
    ]
    if ctx.full:
        for i in range(4):
            Lq = ctx.int(1, 12)
            Lk = Lq if ctx.int(0, 1) else ctx.int(Lq, 13)
            toks = WORDS[:Lk] if ctx.int(0, 1) else None
            out.append(_case(f"random{i}", _weights(ctx, Lq, Lk), ctx.int(0, 23), ctx.int(0, 31), tokens=toks,
                             features=("save",) if ctx.int(0, 1) else ()))
    return out
