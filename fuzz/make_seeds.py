#!/usr/bin/env python3
"""Writes the text seeds of the fuzz corpus (binary ones: make_seeds.cc).

  python3 fuzz/make_seeds.py fuzz/corpus [SHARED_DIR]

Tokenizers are the real tokenizer.json files of ../shared/tokenizers cut down to a few hundred
vocabulary entries (structure kept: normalizer, pre-tokenizer, decoder, post-processor, merges
among the kept tokens); chat templates are the real ones from tokenizer_config.json; the rest
is written here from the formats' documentation and the project's own examples.
"""
import hashlib
import json
import os
import sys

SEP = "\n\0\n"  # fuzz_util.h kPartSeparator


def write(root, target, name, text):
    d = os.path.join(root, target)
    os.makedirs(d, exist_ok=True)
    data = text.encode() if isinstance(text, str) else text
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def trim_tokenizer(path, keep=320, added=4):
    t = json.load(open(path))
    model = t["model"]
    vocab = {k: v for k, v in model["vocab"].items() if v < keep}
    model["vocab"] = vocab
    merges = []
    for m in model.get("merges", []):
        a, b = m.split(" ", 1) if isinstance(m, str) else m
        if a in vocab and b in vocab and a + b in vocab:
            merges.append(m)
    model["merges"] = merges[:200]
    out_added = []
    for i, tok in enumerate(t.get("added_tokens", [])[:added]):
        tok = dict(tok)
        tok["id"] = keep + i
        out_added.append(tok)
    t["added_tokens"] = out_added
    # Post-processors name special tokens by id: point them at the kept ones.
    pp = t.get("post_processor")
    if isinstance(pp, dict):
        def fix(node):
            if isinstance(node, dict):
                if "ids" in node and isinstance(node["ids"], list):
                    node["ids"] = [keep for _ in node["ids"]]
                for v in node.values():
                    fix(v)
            elif isinstance(node, list):
                for v in node:
                    fix(v)
        fix(pp)
    return json.dumps(t, ensure_ascii=False, separators=(",", ":"))


def main():
    root = sys.argv[1]
    shared = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared")
    toks = os.path.join(shared, "tokenizers")
    models = ["Qwen3-4B", "Meta-Llama-3-8B", "gemma-3-1b-it", "MiniCPM-V-4_5",
              "Qwen2.5-1.5B-Instruct"]

    # tokenizer: trimmed real files, plus a WordLevel-free minimal BPE.
    for m in models:
        p = os.path.join(toks, m, "tokenizer.json")
        if os.path.exists(p):
            write(root, "tokenizer", m, trim_tokenizer(p))
    write(root, "tokenizer", "minimal_bpe", json.dumps({
        "version": "1.0", "added_tokens": [{"id": 5, "content": "<eos>", "special": True,
                                            "single_word": False, "lstrip": False,
                                            "rstrip": False, "normalized": False}],
        "normalizer": None, "pre_tokenizer": {"type": "Whitespace"}, "post_processor": None,
        "decoder": None,
        "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "c": 3, "abc": 4},
                  "merges": ["a b", "ab c"], "unk_token": None}}))

    # chat_template: the real templates, alone and with a messages list.
    for m in models + ["Qwen3.5-4B"]:
        cfg = os.path.join(toks, m, "tokenizer_config.json")
        jinja = os.path.join(toks, m, "chat_template.jinja")
        tmpl = None
        if os.path.exists(jinja):
            tmpl = open(jinja).read()
        elif os.path.exists(cfg):
            ct = json.load(open(cfg)).get("chat_template")
            if isinstance(ct, list):
                ct = next((x["template"] for x in ct if x.get("name") == "default"), None)
            tmpl = ct
        if tmpl:
            write(root, "chat_template", m, tmpl)
    write(root, "chat_template", "loops_and_filters",
          "{%- set ns = namespace(n=0) -%}{% for m in messages if m.role != 'system' %}"
          "{% set ns.n = ns.n + 1 %}{{ loop.index }}:{{ m.role | upper }}={{ m.content | tojson }}"
          "{% if not loop.last %}|{% endif %}{% else %}none{% endfor %}"
          "{{ ns.n }}{{ bos_token ~ eos_token }}{{ 'x' * 3 }}{{ [1,2,3] | join(',') }}"
          "{{ {'a': 1}.items() | list }}{{ 'a,b'.split(',') }}{{ range(3) | sum }}"
          "{% macro f(x, y=2) %}{{ x + y }}{% endmacro %}{{ f(1) }}"
          "{% if add_generation_prompt %}<|assistant|>{% endif %}")
    write(root, "chat_template", "with_messages",
          "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}" + SEP +
          json.dumps([{"role": "user", "content": "hi"},
                      {"role": "assistant", "content": "<tool_call>\n{\"name\": \"f\", "
                       "\"arguments\": {}}\n</tool_call>"}]))
    gemma = os.path.join(root, "chat_template", "gemma-3-1b-it")
    if os.path.exists(gemma):
        write(root, "chat_template", "gemma-3-1b-it_alternating", open(gemma).read() + SEP +
              json.dumps([{"role": "system", "content": "s"}, {"role": "user", "content": "a"},
                          {"role": "assistant", "content": "b"},
                          {"role": "user", "content": [{"type": "text", "text": "c"}]}]))
    write(root, "chat_template", "raise",
          "{% if messages[0].role != 'user' %}{{ raise_exception('first must be user') }}"
          "{% endif %}{{ strftime_now('%Y') | length }}")

    # model_config: the real tiny model, and the shapes of the supported families.
    cfg = os.path.join(shared, "models", "stories260k", "config.json")
    if os.path.exists(cfg):
        write(root, "model_config", "stories260k", open(cfg).read())
    base = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
            "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
            "vocab_size": 300, "max_position_embeddings": 256, "rms_norm_eps": 1e-6,
            "rope_theta": 1000000.0, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
            "eos_token_id": [1, 2], "bos_token_id": 0, "hidden_act": "silu"}
    variants = {
        "qwen3": {"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"]},
        "qwen2": {"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"],
                  "use_sliding_window": False, "sliding_window": 128},
        "llama3_rope": {"model_type": "llama", "architectures": ["LlamaForCausalLM"],
                        "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
                                         "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                         "original_max_position_embeddings": 128}},
        "gemma3": {"model_type": "gemma3_text", "architectures": ["Gemma3ForCausalLM"],
                   "hidden_activation": "gelu_pytorch_tanh", "query_pre_attn_scalar": 16,
                   "sliding_window": 64, "rope_local_base_freq": 10000.0,
                   "sliding_window_pattern": 2, "final_logit_softcapping": None,
                   "attn_logit_softcapping": None},
        "minicpm": {"model_type": "minicpm", "architectures": ["MiniCPMForCausalLM"],
                    "scale_emb": 12, "scale_depth": 1.4, "dim_model_base": 32,
                    "rope_scaling": {"rope_type": "longrope", "long_factor": [1.0] * 8,
                                     "short_factor": [1.0] * 8,
                                     "original_max_position_embeddings": 128}},
        "qwen3_5": {"model_type": "qwen3_5", "architectures": ["Qwen3_5ForConditionalGeneration"],
                    "text_config": dict(base, model_type="qwen3_5_text",
                                        layer_types=["linear_attention", "full_attention"],
                                        full_attention_interval=2, linear_conv_kernel_dim=4,
                                        linear_key_head_dim=16, linear_num_key_heads=2,
                                        linear_num_value_heads=4, linear_value_head_dim=16,
                                        partial_rotary_factor=0.25, attn_output_gate=True)},
        "classifier": {"model_type": "qwen3", "architectures": ["Qwen3ForSequenceClassification"],
                       "num_labels": 2},
    }
    for name, extra in variants.items():
        c = dict(base)
        c.update(extra)
        write(root, "model_config", name, json.dumps(c, indent=1))
    write(root, "model_config", "generation_config", json.dumps(
        {"do_sample": True, "temperature": 0.6, "top_p": 0.95, "top_k": 20, "min_p": 0,
         "repetition_penalty": 1.05, "max_new_tokens": 64, "eos_token_id": [1, 2]}))
    write(root, "model_config", "tokenizer_config", json.dumps(
        {"add_bos_token": True, "bos_token": {"content": "<s>"}, "eos_token": "</s>",
         "model_max_length": 4096, "clean_up_tokenization_spaces": False,
         "additional_special_tokens": ["<|im_start|>"], "chat_template": "{{ x }}"}))

    # safetensors with a shard index (the shard itself is written by make_seeds.cc).
    st = os.path.join(root, "safetensors", "three_dtypes.safetensors")
    if os.path.exists(st):
        shard = open(st, "rb").read()
        index = json.dumps({"metadata": {"total_size": 60}, "weight_map": {
            "model.norm.weight": "model.safetensors", "lm_head.weight": "model.safetensors"}})
        write(root, "safetensors", "with_index", shard + SEP.encode() + index.encode())

    # http_request: first byte = read size (0: 16 KiB).
    reqs = {
        "get_models": b"\x00GET /v1/models HTTP/1.1\r\nHost: localhost\r\n\r\n",
        "post_json": b"\x00POST /v1/chat/completions HTTP/1.1\r\nHost: a\r\n"
                     b"Content-Type: application/json\r\nContent-Length: 13\r\n\r\n{\"model\":\"x\"}",
        "chunked_split": b"\x05POST /v1/completions HTTP/1.1\r\nHost: a\r\n"
                         b"Transfer-Encoding: chunked\r\n\r\n4;ext=1\r\nabcd\r\n3\r\nefg\r\n0\r\n"
                         b"Trailer: x\r\n\r\n",
        "pipelined_keepalive": b"\x00\r\nGET /health HTTP/1.1\r\nHost: a\r\n\r\n"
                               b"HEAD /v1/models HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
        "http10": b"\x00GET /stream HTTP/1.0\r\n\r\n",
        "stream_chunked": b"\x00POST /stream/x?y=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nhi",
        "expect_continue": b"\x03PUT http://h:1/v1/x HTTP/1.1\r\nHost: h\r\n"
                           b"Expect: 100-continue\r\nContent-Length: 3\r\n\r\nabc",
        "screened_body": b"\x00POST /screen HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\nabcd",
        "options_star": b"\x00OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n",
        "bad_te": b"\x00POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n"
                  b"Content-Length: 1\r\n\r\nx",
        "cut_short": b"\x01POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc",
    }
    for name, data in reqs.items():
        write(root, "http_request", name, data)

    # api_request: the endpoint on the first line, then the body.
    bodies = {
        "chat": {"model": "m", "messages": [
            {"role": "system", "content": "s"}, {"role": "user", "content": [
                {"type": "text", "text": "hi"}]},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c", "content": "1"}],
            "temperature": 0.7, "top_p": 0.9, "max_tokens": 20, "stop": ["\n"], "n": 2,
            "seed": 3, "logprobs": True, "top_logprobs": 2, "stream": True,
            "stream_options": {"include_usage": True}, "logit_bias": {"5": -100},
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {
                "type": "object", "properties": {"a": {"type": "integer"}}}}}],
            "tool_choice": "auto", "presence_penalty": 0.1, "frequency_penalty": 0.1},
        "completions": {"prompt": "Once", "max_tokens": 5, "echo": False, "temperature": 0,
                        "response_format": {"type": "json_schema", "json_schema": {
                            "name": "x", "schema": {"type": "object", "properties": {
                                "n": {"type": "number"}, "s": {"type": "string",
                                                               "pattern": "^a+$"}},
                                "required": ["n"]}}}},
        "tokenize": {"prompt": "hello", "add_special_tokens": False},
        "detokenize": {"tokens": [1, 2, 3]},
        "embeddings": {"input": ["a", "b"], "encoding_format": "base64", "dimensions": 8},
        "rerank": {"query": "q", "documents": ["a", "b"], "top_n": 1, "return_documents": True},
        "moderations": {"input": "text"},
        "classify": {"input": [[1, 2, 3]], "truncate_prompt_tokens": 2},
        "systemone": {"messages": [{"role": "user", "content": "x"}], "questions": [
            {"type": "choice", "instructions": "pick", "options": ["a", "b"]}]},
    }
    bodies["responses"] = {
        "model": "m", "instructions": "i", "previous_response_id": "resp_1",
        "input": [{"type": "function_call_output", "call_id": "call_1", "output": "1"},
                  {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
                  {"type": "function_call", "call_id": "call_2", "name": "f", "arguments": "{}"},
                  {"type": "function_call_output", "call_id": "call_2", "output": "2"}],
        "max_output_tokens": 9, "temperature": 0.5, "top_p": 0.9, "stream": True,
        "store": False, "metadata": {"k": "v"}, "user": "u",
        "tools": [{"type": "function", "name": "f", "parameters": {
            "type": "object", "properties": {"a": {"type": "integer"}}}, "strict": True}],
        "tool_choice": {"type": "function", "name": "f"}, "parallel_tool_calls": True}
    anthropic = {
        "model": "m", "system": [{"type": "text", "text": "s", "cache_control": {
            "type": "ephemeral"}}],
        "messages": [{"role": "user", "content": "q"},
                     {"role": "assistant", "content": [
                         {"type": "text", "text": "t"},
                         {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": 1}}]},
                     {"role": "user", "content": [
                         {"type": "tool_result", "tool_use_id": "toolu_1", "content": "1"},
                         {"type": "text", "text": "more"}]}],
        "tools": [{"name": "f", "description": "d", "input_schema": {
            "type": "object", "properties": {"a": {"type": "integer"}}}}],
        "tool_choice": {"type": "tool", "name": "f"}, "thinking": {"type": "disabled"}}
    bodies["messages"] = dict(anthropic, max_tokens=9, stop_sequences=["\n"], temperature=0.5,
                              top_p=0.9, top_k=4, metadata={"user_id": "u"}, stream=True)
    bodies["count_tokens"] = anthropic
    bodies.update({
        "ollama-chat": {"model": "default-model", "stream": False, "format": "json",
                        "messages": [
                            {"role": "user", "content": "hi"},
                            {"role": "assistant", "content": "", "tool_calls": [
                                {"function": {"name": "f", "arguments": {"a": 1}}}]},
                            {"role": "tool", "content": "2", "tool_name": "f"}],
                        "options": {"temperature": 0.5, "num_predict": -2, "stop": ["x"],
                                    "repeat_penalty": 1.1, "seed": 4},
                        "keep_alive": "5m", "logprobs": True, "top_logprobs": 1},
        "ollama-generate": {"model": "story", "prompt": "Once", "raw": True, "context": [],
                            "format": {"type": "object", "properties": {
                                "a": {"type": "integer"}}},
                            "options": {"top_k": 3, "num_ctx": 8}},
        "ollama-embed": {"model": "emb", "input": ["a", "b"], "dimensions": 32,
                         "truncate": False},
        "ollama-embeddings": {"model": "emb:latest", "prompt": "a"},
    })
    for name, body in bodies.items():
        write(root, "api_request", name, name + "\n" + json.dumps(body))
    write(root, "api_request", "responses_text_format", "responses\n" + json.dumps(
        {"input": "x", "text": {"format": {"type": "json_schema", "name": "n", "schema": {
            "type": "object", "properties": {"a": {"type": "string"}}}}}}))
    write(root, "api_request", "chat_json_object", "chat\n" + json.dumps(
        {"messages": [{"role": "user", "content": "x"}],
         "response_format": {"type": "json_object"}, "tool_choice": "none"}))

    # package: a manifest whose one file (config.json, "{}\n") is present and right.
    body = b"{}\n"
    rec = {"path": "config.json", "size": len(body), "sha256": hashlib.sha256(body).hexdigest()}
    manifest = {"format_version": 3, "architecture": "LlamaForCausalLM", "dtype": "bf16",
                "source": {"dir": "/models/src", "repo": "org/m", "commit": "abc",
                           "files": [dict(rec, mtime_ns=1)]},
                "files": [rec]}
    write(root, "package", "valid", json.dumps(manifest, indent=1))
    cache = {"config.json": {"size": 3, "mtime_ns": 0, "inode": 1, "sha256": rec["sha256"],
                             "verified_at_ns": 9}}
    write(root, "package", "with_cache", json.dumps(manifest) + SEP + json.dumps(cache))
    write(root, "package", "old_format", json.dumps({"format_version": 2, "files": []}))

    # catalog and hub revision.
    cat = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "catalog", "models.json")
    write(root, "catalog", "models.json", open(cat).read())
    write(root, "hub_revision", "listing", json.dumps({
        "id": "org/model", "sha": "0123456789abcdef0123456789abcdef01234567", "siblings": [
            {"rfilename": "config.json", "size": 600},
            {"rfilename": "model.safetensors", "size": 1000, "lfs": {
                "sha256": "a" * 64, "size": 1000}},
            {"rfilename": "tokenizer.json"}, {"rfilename": "README.md"}]}))

    # Ollama's store: a manifest as Ollama writes it, naming blobs the harness holds (a GGUF
    # header and a template, fixed in ollama_manifest_fuzz.cc) and the config and params parts.
    def layer(media, data):
        return {"mediaType": media, "digest": "sha256:" + hashlib.sha256(data).hexdigest(),
                "size": len(data)}
    gguf = b"GGUF\x03" + b"\0" * 19
    template = b"{{ .Prompt }}"
    config = json.dumps({"model_format": "gguf", "model_family": "qwen2", "model_type": "494.03M",
                         "file_type": "Q4_K_M", "architecture": "amd64", "os": "linux"}).encode()
    params = json.dumps({"num_ctx": 4096, "stop": ["<|im_end|>"], "temperature": 0.7,
                         "mirostat": 2}).encode()
    ollama = "application/vnd.ollama.image."
    def manifest(layers):
        return json.dumps({"schemaVersion": 2,
                           "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
                           "config": layer("application/vnd.docker.container.image.v1+json",
                                           config),
                           "layers": layers})
    full = [layer(ollama + "model", gguf), layer(ollama + "template", template),
            layer(ollama + "params", params)]
    write(root, "ollama_manifest", "pulled",
          manifest(full) + SEP + config.decode() + SEP + params.decode())
    write(root, "ollama_manifest", "adapter",
          manifest(full + [layer(ollama + "adapter", params)]) + SEP + config.decode() + SEP +
          params.decode())
    write(root, "ollama_manifest", "no_model",
          manifest(full[1:]) + SEP + config.decode() + SEP + params.decode())
    write(root, "ollama_manifest", "name", "hf.co/user/repo:Q4_K_M\n{}")


if __name__ == "__main__":
    main()
