"""Lets llama.cpp's converter import under Debian 12's torch 1.13, which has no unsigned dtypes
beyond uint8 and no float8 (torch 2.1 added float8, 2.3 uint16/32/64). The converter only names
them in its dtype tables;
here they are distinct placeholders that are not torch dtypes, so a checkpoint that really held
such a tensor would fail in torch with a type error rather than convert wrongly."""
try:
    import torch
except ImportError:  # llamacpp_convert.sh names the missing package
    torch = None

if torch is not None:
    for _name in ("uint16", "uint32", "uint64", "float8_e4m3fn", "float8_e5m2"):
        if not hasattr(torch, _name):
            setattr(torch, _name, type(f"missing_torch_{_name}", (), {})())
