// Writes a GGUF file (llama.cpp's format) from a single-file `tessera synth` checkpoint (BF16)
// of a qwen3 / qwen2 / llama / qwen3_5 model, for timing llama.cpp on the same shapes: BF16,
// Q8_0 or Q4_0 matrices (every matrix, the embedding too), F32 vectors, and a placeholder
// vocabulary of the model's size (benchmarks feed token ids, never text). For speed only: the
// values are not converted the way llama.cpp's converter would (e.g. (1 + w) norms, A_log),
// so the outputs are not comparable, the work is.
//   node gguf_from_hf.mjs HF_DIR OUT.gguf bf16|q8_0|q4_0
import fs from "node:fs";

const [dir, out, fmt] = process.argv.slice(2);
const outer = JSON.parse(fs.readFileSync(`${dir}/config.json`, "utf8"));
const cfg = outer.text_config ?? outer;
const st = fs.readFileSync(`${dir}/model.safetensors`);
const hlen = Number(st.readBigUInt64LE(0));
const header = JSON.parse(st.subarray(8, 8 + hlen).toString("utf8"));
const base = 8 + hlen;
const arch = { qwen3_5_text: "qwen35" }[cfg.model_type] ?? cfg.model_type;  // qwen3, qwen2, llama, qwen35
const headDim = cfg.head_dim ?? cfg.hidden_size / cfg.num_attention_heads;

function bf16ToF32(buf) {
  const out = new Float32Array(buf.length / 2);
  const u32 = new Uint32Array(out.buffer);
  for (let i = 0; i < out.length; i++) u32[i] = buf.readUInt16LE(2 * i) << 16;
  return out;
}
function f32ToF16(x) {  // round to nearest
  const f = new Float32Array([x]), u = new Uint32Array(f.buffer)[0];
  const sign = (u >>> 16) & 0x8000;
  let exp = ((u >>> 23) & 0xff) - 127 + 15, mant = u & 0x7fffff;
  if (exp <= 0) return sign;
  if (exp >= 31) return sign | 0x7c00;
  let h = sign | (exp << 10) | (mant >>> 13);
  if (mant & 0x1000) h++;
  return h;
}
function quantize(values, kind) {  // rows of length multiple of 32
  const blocks = values.length / 32;
  if (kind === "q8_0") {
    const b = Buffer.alloc(blocks * 34);
    for (let k = 0; k < blocks; k++) {
      let amax = 0;
      for (let i = 0; i < 32; i++) amax = Math.max(amax, Math.abs(values[32 * k + i]));
      const d = amax / 127, id = d ? 1 / d : 0;
      b.writeUInt16LE(f32ToF16(d), 34 * k);
      for (let i = 0; i < 32; i++) b.writeInt8(Math.round(values[32 * k + i] * id), 34 * k + 2 + i);
    }
    return b;
  }
  const b = Buffer.alloc(blocks * 18);  // q4_0
  for (let k = 0; k < blocks; k++) {
    let amax = 0, max = 0;
    for (let i = 0; i < 32; i++) {
      const v = values[32 * k + i];
      if (Math.abs(v) > amax) { amax = Math.abs(v); max = v; }
    }
    const d = max / -8, id = d ? 1 / d : 0;
    b.writeUInt16LE(f32ToF16(d), 18 * k);
    for (let i = 0; i < 16; i++) {
      const q0 = Math.min(15, Math.trunc(values[32 * k + i] * id + 8.5));
      const q1 = Math.min(15, Math.trunc(values[32 * k + 16 + i] * id + 8.5));
      b.writeUInt8(q0 | (q1 << 4), 18 * k + 2 + i);
    }
  }
  return b;
}

const names = {
  "model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
  "lm_head.weight": "output.weight",
};
const layerNames = {
  "input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
  "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
  "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
  "self_attn.q_proj.bias": "attn_q.bias", "self_attn.k_proj.bias": "attn_k.bias",
  "self_attn.v_proj.bias": "attn_v.bias", "self_attn.q_norm.weight": "attn_q_norm.weight",
  "self_attn.k_norm.weight": "attn_k_norm.weight", "mlp.gate_proj.weight": "ffn_gate.weight",
  "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight",
  "linear_attn.in_proj_qkv.weight": "attn_qkv.weight", "linear_attn.in_proj_z.weight": "attn_gate.weight",
  "linear_attn.in_proj_b.weight": "ssm_beta.weight", "linear_attn.in_proj_a.weight": "ssm_alpha.weight",
  "linear_attn.conv1d.weight": "ssm_conv1d.weight", "linear_attn.dt_bias": "ssm_dt.bias",
  "linear_attn.A_log": "ssm_a", "linear_attn.norm.weight": "ssm_norm.weight",
  "linear_attn.out_proj.weight": "ssm_out.weight",
};
if (arch === "qwen35") layerNames["post_attention_layernorm.weight"] = "post_attention_norm.weight";
names["model.language_model.embed_tokens.weight"] = "token_embd.weight";
names["model.language_model.norm.weight"] = "output_norm.weight";
const tensors = [];
for (const [name, t] of Object.entries(header)) {
  if (name === "__metadata__") continue;
  let gname = names[name];
  if (name.startsWith("model.visual.") || name.startsWith("mtp.")) continue;
  const m = name.match(/^model\.(?:language_model\.)?layers\.(\d+)\.(.*)$/);
  if (m) gname = `blk.${m[1]}.${layerNames[m[2]]}`;
  if (!gname || gname.includes("undefined")) throw new Error(`unmapped ${name}`);
  const raw = st.subarray(base + t.data_offsets[0], base + t.data_offsets[1]);
  const values = bf16ToF32(raw);
  let type, data;
  let shape = t.shape;
  if (gname.endsWith("ssm_conv1d.weight")) shape = [shape[0], shape[2]];  // [channels, kernel]
  if (shape.length === 1 || gname.endsWith("ssm_conv1d.weight") || gname.includes("ssm_alpha") ||
      gname.includes("ssm_beta")) {
    type = 0;
    data = Buffer.from(values.buffer);
  } else {
    type = fmt === "q8_0" ? 8 : fmt === "q4_0" ? 2 : 30;
    data = type === 30 ? Buffer.from(raw) : quantize(values, fmt);
  }
  tensors.push({ gname, dims: [...shape].reverse(), type, data });
}

const kv = [];
const s = (k, v) => kv.push([k, 8, v]);
const u32 = (k, v) => kv.push([k, 4, v]);
const f32 = (k, v) => kv.push([k, 6, v]);
s("general.architecture", arch);
s("general.name", "synthetic");
u32(`${arch}.block_count`, cfg.num_hidden_layers);
u32(`${arch}.context_length`, cfg.max_position_embeddings);
u32(`${arch}.embedding_length`, cfg.hidden_size);
u32(`${arch}.feed_forward_length`, cfg.intermediate_size);
u32(`${arch}.attention.head_count`, cfg.num_attention_heads);
u32(`${arch}.attention.head_count_kv`, cfg.num_key_value_heads);
u32(`${arch}.attention.key_length`, headDim);
u32(`${arch}.attention.value_length`, headDim);
// Qwen3.5 keeps its RoPE fields in rope_parameters (transformers 5), the others at the top.
const rope = cfg.rope_parameters ?? {};
f32(`${arch}.rope.freq_base`, cfg.rope_theta ?? rope.rope_theta);
f32(`${arch}.attention.layer_norm_rms_epsilon`, cfg.rms_norm_eps);
if (arch === "qwen35") {
  const la = cfg;
  u32(`${arch}.full_attention_interval`, cfg.full_attention_interval ?? 4);
  u32(`${arch}.ssm.conv_kernel`, la.linear_conv_kernel_dim);
  u32(`${arch}.ssm.state_size`, la.linear_key_head_dim);
  u32(`${arch}.ssm.group_count`, la.linear_num_key_heads);
  u32(`${arch}.ssm.time_step_rank`, la.linear_num_value_heads);
  u32(`${arch}.ssm.inner_size`, la.linear_value_head_dim * la.linear_num_value_heads);
  u32(`${arch}.rope.dimension_count`, Math.round(headDim * (cfg.partial_rotary_factor ?? rope.partial_rotary_factor ?? 0.25)));
  kv.push([`${arch}.rope.dimension_sections`, 9, { type: 5, items: [...(rope.mrope_section ?? [11, 11, 10]), 0] }]);
}
s("tokenizer.ggml.model", "gpt2");
s("tokenizer.ggml.pre", "qwen2");
const vocab = cfg.vocab_size;
kv.push(["tokenizer.ggml.tokens", 9, { type: 8, items: Array.from({ length: vocab }, (_, i) => `<t${i}>`) }]);
kv.push(["tokenizer.ggml.token_type", 9, { type: 5, items: Array.from({ length: vocab }, () => 1) }]);
kv.push(["tokenizer.ggml.merges", 9, { type: 8, items: [] }]);
u32("tokenizer.ggml.bos_token_id", 1);
u32("tokenizer.ggml.eos_token_id", 2);

const parts = [];
const w64 = (v) => { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(v)); parts.push(b); };
const w32 = (v) => { const b = Buffer.alloc(4); b.writeUInt32LE(v); parts.push(b); };
const wstr = (str) => { const b = Buffer.from(str, "utf8"); w64(b.length); parts.push(b); };
const wval = (type, v) => {
  if (type === 8) wstr(v);
  else if (type === 4) w32(v);
  else if (type === 5) { const b = Buffer.alloc(4); b.writeInt32LE(v); parts.push(b); }
  else if (type === 6) { const b = Buffer.alloc(4); b.writeFloatLE(v); parts.push(b); }
  else if (type === 9) { w32(v.type); w64(v.items.length); for (const it of v.items) wval(v.type, it); }
};
parts.push(Buffer.from("GGUF"));
w32(3);
w64(tensors.length);
w64(kv.length);
for (const [k, type, v] of kv) { wstr(k); w32(type); wval(type, v); }
const ALIGN = 32;
let offset = 0;
for (const t of tensors) {
  wstr(t.gname);
  w32(t.dims.length);
  for (const d of t.dims) w64(d);
  w32(t.type);
  w64(offset);
  t.offset = offset;
  offset += Math.ceil(t.data.length / ALIGN) * ALIGN;
}
let headerBytes = Buffer.concat(parts);
const pad = (ALIGN - (headerBytes.length % ALIGN)) % ALIGN;
const fd = fs.openSync(out, "w");
fs.writeSync(fd, headerBytes);
fs.writeSync(fd, Buffer.alloc(pad));
for (const t of tensors) {
  fs.writeSync(fd, t.data);
  const p = (ALIGN - (t.data.length % ALIGN)) % ALIGN;
  if (p) fs.writeSync(fd, Buffer.alloc(p));
}
fs.closeSync(fd);
console.log(`wrote ${out}: ${tensors.length} tensors, ${fmt}`);
