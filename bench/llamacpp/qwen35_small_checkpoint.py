# A small Qwen3.5 text checkpoint (qwen3_5_text, F32 safetensors, random weights) of a shape
# llama.cpp's qwen35 loader accepts (linear key head size == value head size), to check the GGUF
# layout tessera writes and reads against llama.cpp's own reader and graph:
#   python3 qwen35_small_checkpoint.py OUT KEY_HEADS VALUE_HEADS [mtp] TOKENIZER_DIR
#   make_gguf_model OUT OUT.gguf qwen35 && gguf_accuracy.sh LLAMA_SRC BUILD --formats f32 OUT.gguf
# VALUE_HEADS > KEY_HEADS: value heads regrouped by the converter; "mtp": an MTP layer too
# (mtp_num_hidden_layers 1). TOKENIZER_DIR: tokenizer.json, tokenizer_config.json and
# generation_config.json to copy (e.g. a `tessera synth` folder; ids below 1024).
import json, struct, random, sys, shutil, array, math
out = sys.argv[1]; kh, vh = int(sys.argv[2]), int(sys.argv[3])
mtp = sys.argv[4] == "mtp" if len(sys.argv) > 5 else False
tok_dir = sys.argv[-1]
H, I, L, NH, KV, HD, V = 128, 256, 8, 4, 2, 32, 1024
KD = VD = 32; KC = 4; interval = 4
rng = random.Random(7)
tensors = {}
def add(name, shape, scale, offset=0.0):
    n = 1
    for d in shape: n *= d
    tensors[name] = (shape, array.array('f', (offset + scale * (2 * rng.random() - 1) for _ in range(n))))
inv = lambda n: 1 / math.sqrt(n)
add("model.embed_tokens.weight", [V, H], 1.0)
def add_layer(p, linear):  # a decoder layer: Gated DeltaNet or gated attention, then the MLP
    add(p + "input_layernorm.weight", [H], 0.1)
    if linear:
        a = p + "linear_attn."; qk = kh * KD; vw = vh * VD
        add(a + "in_proj_qkv.weight", [2 * qk + vw, H], inv(H))
        add(a + "in_proj_z.weight", [vw, H], inv(H))
        add(a + "in_proj_b.weight", [vh, H], inv(H))
        add(a + "in_proj_a.weight", [vh, H], inv(H))
        add(a + "conv1d.weight", [2 * qk + vw, 1, KC], 0.5)
        add(a + "dt_bias", [vh], 0.5, 0.5)
        add(a + "A_log", [vh], 1.0, 0.5)
        add(a + "norm.weight", [VD], 0.1, 1.0)
        add(a + "out_proj.weight", [H, vw], inv(vw))
    else:
        add(p + "self_attn.q_proj.weight", [2 * NH * HD, H], inv(H))
        add(p + "self_attn.k_proj.weight", [KV * HD, H], inv(H))
        add(p + "self_attn.v_proj.weight", [KV * HD, H], inv(H))
        add(p + "self_attn.o_proj.weight", [H, NH * HD], inv(NH * HD))
        add(p + "self_attn.q_norm.weight", [HD], 0.1)
        add(p + "self_attn.k_norm.weight", [HD], 0.1)
    add(p + "post_attention_layernorm.weight", [H], 0.1)
    add(p + "mlp.gate_proj.weight", [I, H], inv(H))
    add(p + "mlp.up_proj.weight", [I, H], inv(H))
    add(p + "mlp.down_proj.weight", [H, I], inv(I))
for i in range(L):
    add_layer(f"model.layers.{i}.", (i + 1) % interval != 0)
if mtp:  # an MTP layer, as Qwen3.5 publishes it
    add_layer("mtp.layers.0.", False)
    add("mtp.fc.weight", [H, 2 * H], inv(2 * H))
    add("mtp.pre_fc_norm_embedding.weight", [H], 0.1)
    add("mtp.pre_fc_norm_hidden.weight", [H], 0.1)
    add("mtp.norm.weight", [H], 0.1)
add("model.norm.weight", [H], 0.1)
add("lm_head.weight", [V, H], inv(H))
header, offset, blobs = {}, 0, []
for name, (shape, data) in tensors.items():
    b = data.tobytes(); header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + len(b)]}
    offset += len(b); blobs.append(b)
h = json.dumps(header).encode(); h += b" " * ((8 - len(h) % 8) % 8)
import os; os.makedirs(out, exist_ok=True)
with open(out + "/model.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(h))); f.write(h); [f.write(b) for b in blobs]
cfg = {"architectures": ["Qwen3_5ForCausalLM"], "model_type": "qwen3_5_text", "hidden_size": H,
       "intermediate_size": I, "num_hidden_layers": L, "num_attention_heads": NH,
       "num_key_value_heads": KV, "head_dim": HD, "vocab_size": V, "max_position_embeddings": 4096,
       "rms_norm_eps": 1e-6, "rope_theta": 1e7, "partial_rotary_factor": 0.25, "hidden_act": "silu",
       "tie_word_embeddings": False, "attention_bias": False,
       "layer_types": ["linear_attention" if (i + 1) % interval else "full_attention" for i in range(L)],
       "full_attention_interval": interval, "linear_num_key_heads": kh, "linear_num_value_heads": vh,
       "linear_key_head_dim": KD, "linear_value_head_dim": VD, "linear_conv_kernel_dim": KC,
       "attn_output_gate": True, **({"mtp_num_hidden_layers": 1} if mtp else {}), "bos_token_id": 470, "eos_token_id": 472}
json.dump(cfg, open(out + "/config.json", "w"), indent=2)
for f in ["tokenizer.json", "tokenizer_config.json", "generation_config.json"]:
    shutil.copy(tok_dir + "/" + f, out + "/" + f)
