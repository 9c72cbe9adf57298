"""Attention-weight heatmaps with matplotlib (reference solution for `attention_heatmap`)."""
import math

import torch
from matplotlib.figure import Figure


def _to_numpy(weights: torch.Tensor):
    """Any dtype or device, with or without grad -> a float32 numpy array."""
    return weights.detach().to(device="cpu", dtype=torch.float32).numpy()


def _label_axes(ax, n_queries: int, n_keys: int, tokens=None) -> None:
    ax.set_xlabel("Key position")
    ax.set_ylabel("Query position")
    if tokens is not None:
        tokens = [str(t) for t in tokens]
        ax.set_xticks(range(n_keys))
        ax.set_xticklabels(tokens[:n_keys], rotation=90)
        ax.set_yticks(range(n_queries))
        ax.set_yticklabels(tokens[n_keys - n_queries:n_keys])  # the queries are the last n_queries tokens


def plot_attention_weights(attn_weights, layer_idx, head_idx, tokens=None, save_path=None):
    """Heatmap of one head's attention weights; returns the matplotlib Figure (never shows it).

    attn_weights: (Lq, Lk), or (B, Lq, Lk) from which sample 0 is drawn; row i = query i,
                  column j = key j (image row i is query i, as printed)
    layer_idx, head_idx: ints, both named in the title, e.g. "Layer 3, Head 5"
    tokens:       optional list of Lk labels for the keys (x axis); the queries (y axis) are the
                  last Lq of them, so with Lq == Lk both axes carry all the tokens
    save_path:    optional path; the figure is also written there as a PNG
    """
    if attn_weights.dim() == 3:
        attn_weights = attn_weights[0]                      # (Lq, Lk): the first sample
    data = _to_numpy(attn_weights)                          # (Lq, Lk)
    Lq, Lk = data.shape
    fig = Figure(figsize=(1.0 + 0.4 * Lk, 0.8 + 0.4 * Lq))
    ax = fig.add_subplot()
    image = ax.imshow(data, cmap="viridis", aspect="auto")
    fig.colorbar(image, ax=ax)
    ax.set_title(f"Attention weights - Layer {layer_idx}, Head {head_idx}")
    _label_axes(ax, Lq, Lk, tokens)
    if save_path is not None:
        fig.savefig(save_path, format="png", dpi=100, bbox_inches="tight")
    return fig


def plot_attention_heads(attn_weights, layer_idx, tokens=None, save_path=None):
    """A grid with one heatmap per head of one layer; returns the matplotlib Figure.

    attn_weights: (H, Lq, Lk); subplot h (in reading order) shows head h, titled "Head h"
    layer_idx:    int, named in the figure's title, e.g. "Layer 3"
    tokens, save_path: as in plot_attention_weights
    """
    data = _to_numpy(attn_weights)                          # (H, Lq, Lk)
    H, Lq, Lk = data.shape
    ncols = math.ceil(math.sqrt(H))
    nrows = math.ceil(H / ncols)
    fig = Figure(figsize=(3.0 * ncols, 3.0 * nrows))
    axes = fig.subplots(nrows, ncols, squeeze=False).flatten()
    for h in range(H):
        ax = axes[h]
        ax.imshow(data[h], cmap="viridis", aspect="auto", vmin=0.0, vmax=1.0)
        ax.set_title(f"Head {h}")
        _label_axes(ax, Lq, Lk, tokens)
    for ax in axes[H:]:
        ax.axis("off")                                      # unused cells of the grid
    fig.suptitle(f"Attention weights - Layer {layer_idx}")
    if save_path is not None:
        fig.savefig(save_path, format="png", dpi=100, bbox_inches="tight")
    return fig
