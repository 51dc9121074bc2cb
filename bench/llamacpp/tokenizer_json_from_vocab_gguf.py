"""A Hugging Face tokenizer.json (+ tokenizer_config.json) rebuilt from one of llama.cpp's
byte-level BPE vocabulary files (models/ggml-vocab-NAME.gguf: tokens, token types, merges and
special ids, written by convert_hf_to_gguf.py from the real tokenizer), for checkpoints whose
own tokenizer is not reachable offline. Checked, not trusted: the ids of every text in the
vocabulary's ggml-vocab-NAME.gguf.inp must equal Hugging Face's in its .out (run with --check).

  python3 tokenizer_json_from_vocab_gguf.py LLAMA_SRC starcoder OUT_DIR [--check TESSERA_BIN]

Only pre-tokenizers whose Hugging Face form is known here are accepted: "starcoder" (and the
identical "smollm" and "refact": digits split one by one, then GPT-2's byte-level split).
"""
import json
import subprocess
import sys
from pathlib import Path

llama_src, name, out_dir = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
tessera = sys.argv[5] if len(sys.argv) > 5 and sys.argv[4] == "--check" else None
sys.path.insert(0, str(llama_src / "gguf-py"))
import gguf  # noqa: E402

PRE_TOKENIZERS = {
    name_: {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]}
    for name_ in ("starcoder", "smollm", "refact")
}

vocab_file = llama_src / "models" / f"ggml-vocab-{name}.gguf"
reader = gguf.GGUFReader(vocab_file)


def field(key):
    f = reader.fields.get(key)
    if f is None:
        return None
    return f.contents()


if field("tokenizer.ggml.model") != "gpt2":
    sys.exit(f"{vocab_file}: not a byte-level BPE vocabulary")
pre = field("tokenizer.ggml.pre")
if pre not in PRE_TOKENIZERS:
    sys.exit(f"{vocab_file}: pre-tokenizer {pre!r} has no known Hugging Face form here")
tokens = field("tokenizer.ggml.tokens")
types = field("tokenizer.ggml.token_type")
merges = field("tokenizer.ggml.merges")
CONTROL, USER_DEFINED = int(gguf.TokenType.CONTROL), int(gguf.TokenType.USER_DEFINED)

vocab = {}
added = []
for i, (text, kind) in enumerate(zip(tokens, types)):
    vocab[text] = i
    if kind in (CONTROL, USER_DEFINED):
        added.append({"id": i, "content": text, "single_word": False, "lstrip": False,
                      "rstrip": False, "normalized": kind != CONTROL, "special": kind == CONTROL})

tokenizer = {
    "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
    "normalizer": None, "pre_tokenizer": PRE_TOKENIZERS[pre],
    "post_processor": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                       "use_regex": False},
    "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                "use_regex": True},
    "model": {"type": "BPE", "dropout": None, "unk_token": None,
              "continuing_subword_prefix": None, "end_of_word_suffix": None,
              "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
              "vocab": vocab, "merges": [m.split(" ", 1) for m in merges]},
}
config = {"add_prefix_space": False, "model_max_length": 8192,
          "tokenizer_class": "GPT2Tokenizer", "clean_up_tokenization_spaces": False}
for role in ("bos", "eos", "unknown", "padding"):
    token_id = field(f"tokenizer.ggml.{role}_token_id")
    if token_id is not None:
        key = {"unknown": "unk_token", "padding": "pad_token"}.get(role, f"{role}_token")
        config[key] = tokens[int(token_id)]
out_dir.mkdir(parents=True, exist_ok=True)
(out_dir / "tokenizer.json").write_text(json.dumps(tokenizer, ensure_ascii=False), "utf-8")
(out_dir / "tokenizer_config.json").write_text(json.dumps(config, indent=1), "utf-8")
print(f"{out_dir}/tokenizer.json: {len(tokens)} tokens ({len(added)} added), {len(merges)} merges,"
      f" pre-tokenizer {pre}")

if tessera:
    texts = (vocab_file.parent / (vocab_file.name + ".inp")).read_text("utf-8").split(
        "\n__ggml_vocab_test__\n")
    want = (vocab_file.parent / (vocab_file.name + ".out")).read_text("utf-8").split("\n")
    lines = "".join(json.dumps(t) + "\n" for t in texts)
    out = subprocess.run([tessera, "tokenize", "--model", str(out_dir)], input=lines,
                         capture_output=True, text=True, check=True).stdout.split("\n")
    got = [json.loads(line) for line in out if line]
    total = len(texts)
    same = sum(g == [int(x) for x in w.split()] for g, w in zip(got, want))
    print(f"Hugging Face's ids for {vocab_file.name}.inp: {same}/{total} texts equal")
    sys.exit(0 if same == total else 1)
