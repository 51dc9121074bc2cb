"""The part of Hugging Face `transformers` that llama.cpp's convert_hf_to_gguf.py calls for the
model families tessera runs, for machines without transformers (here: no PyPI).

Only what the converter touches is here, and none of it decides what the file holds:
- AutoConfig.from_pretrained raises, so the converter takes its own fallback and reads
  config.json itself (convert_hf_to_gguf.py, ModelBase.load_hparams).
- AutoTokenizer.from_pretrained gives the vocabulary and added tokens exactly as tokenizer.json
  lists them, and encode/decode run `tessera tokenize`/`detokenize` (exact to Hugging Face's
  tokenizers on the shared reference vectors). The converter hashes encode()'s ids of its own
  check text to name the pre-tokenizer; a tokenization that differed from Hugging Face's would
  give an unknown hash and the converter would refuse the model, so the stand-in cannot pass
  silently.
Merges, special ids and the chat template are read by gguf-py's SpecialVocab from the files.

TESSERA_BIN names the tessera binary (the wrapper script sets it).
"""
import json
import os
import subprocess
from pathlib import Path


class AutoConfig:
    @staticmethod
    def from_pretrained(path, **kwargs):
        raise NotImplementedError("transformers stand-in: the converter reads config.json itself")


class AddedToken:
    def __init__(self, entry):
        self.content = entry["content"]
        self.special = bool(entry.get("special", False))
        self.normalized = bool(entry.get("normalized", not self.special))
        self.lstrip = bool(entry.get("lstrip", False))
        self.rstrip = bool(entry.get("rstrip", False))
        self.single_word = bool(entry.get("single_word", False))

    def __str__(self):
        return self.content


def _run_tessera(command, model_dir, flags, value):
    binary = os.environ.get("TESSERA_BIN")
    if not binary:
        raise RuntimeError("transformers stand-in: set TESSERA_BIN to the tessera binary")
    result = subprocess.run([binary, command, "--model", str(model_dir), *flags],
                            input=json.dumps(value) + "\n", capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"tessera {command} failed: {result.stderr.strip()}")
    return json.loads(result.stdout)


class _Tokenizer:
    def __init__(self, model_dir):
        self.model_dir = Path(model_dir)
        with open(self.model_dir / "tokenizer.json", encoding="utf-8") as f:
            spec = json.load(f)
        model = spec["model"]
        if model.get("type") != "BPE":
            raise NotImplementedError(
                f"transformers stand-in: only BPE tokenizers, this one is {model.get('type')}")
        self._base = dict(model["vocab"])
        self.added_tokens_decoder = {e["id"]: AddedToken(e) for e in spec.get("added_tokens", [])}
        self._added = {t.content: i for i, t in self.added_tokens_decoder.items()}
        self.vocab = dict(self._base)
        self.vocab.update(self._added)
        self.is_fast = True  # what tokenizer.json describes is what a fast tokenizer loads
        self.vocab_size = len(self._base)  # Hugging Face's: the base vocabulary, no added tokens
        # Hugging Face's special-tokens map: the named roles and additional_special_tokens of
        # tokenizer_config.json (strings, or AddedToken dicts with "content").
        config_path = self.model_dir / "tokenizer_config.json"
        config = json.loads(config_path.read_text(encoding="utf-8")) if config_path.exists() else {}
        specials = []
        for role in ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token",
                     "mask_token"):
            specials.append(config.get(role))
        specials.extend(config.get("additional_special_tokens") or [])
        self.all_special_tokens = []
        for token in specials:
            content = token.get("content") if isinstance(token, dict) else token
            if content and content not in self.all_special_tokens:
                self.all_special_tokens.append(content)
        self.all_special_ids = [self.vocab[t] for t in self.all_special_tokens if t in self.vocab]

    def get_vocab(self):
        return dict(self.vocab)

    def get_added_vocab(self):
        return dict(self._added)

    def encode(self, text, add_special_tokens=True):
        flags = ["--add-special"] if add_special_tokens else []
        return _run_tessera("tokenize", self.model_dir, flags, text)

    def decode(self, ids, skip_special_tokens=False):
        flags = ["--skip-special"] if skip_special_tokens else []
        return _run_tessera("detokenize", self.model_dir, flags, list(ids))

    def __len__(self):
        return len(self.vocab)


class AutoTokenizer:
    @staticmethod
    def from_pretrained(path, **kwargs):
        return _Tokenizer(path)
