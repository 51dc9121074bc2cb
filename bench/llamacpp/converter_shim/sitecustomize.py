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

    # torch 1.13 has no CPU exp for float16 (the converter takes -exp(A_log) of a Qwen3.5 F16
    # checkpoint). torch 2's CPU kernel computes a half's exp in float32 and rounds the result
    # to half; this does the same.
    _exp = torch.exp

    def _exp_half_in_float(input, *args, **kwargs):
        if (isinstance(input, torch.Tensor) and input.dtype == torch.float16 and
                input.device.type == "cpu" and not args and not kwargs):
            return _exp(input.float()).half()
        return _exp(input, *args, **kwargs)

    torch.exp = _exp_half_in_float
