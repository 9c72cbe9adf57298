"""attn-drill: practise hand-writing attention for LLM coding interviews."""
__version__ = "0.1.0"


def load_ipython_extension(ipython):
    """`%load_ext attn_drill` in IPython or Jupyter: the %%check and %attn_drill magics (attn_drill.notebook)."""
    from .notebook import load_ipython_extension as load
    load(ipython)


def unload_ipython_extension(ipython):
    from .notebook import unload_ipython_extension as unload
    unload(ipython)
