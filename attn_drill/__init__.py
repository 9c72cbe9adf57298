"""attn-drill: practise hand-writing attention for LLM coding interviews."""
__version__ = "0.1.0"
