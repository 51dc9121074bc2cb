// Writes the binary seeds of the fuzz corpus with the project's own writers, so they are real:
// worker frames (Encode), safetensors files (WriteSafetensors), GGUF files (tests' GgufWriter),
// xclbin (BuildXclbin) and txn
// (BuildTxn). Text seeds come from fuzz/make_seeds.py.
//
//   ninja -C build fuzz_make_seeds && build/fuzz/fuzz_make_seeds fuzz/corpus
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "backend/xdna/txn.h"
#include "backend/xdna/xclbin.h"
#include "format/safetensors.h"
#include "model/synthetic_checkpoint.h"
#include "support/gguf_writer.h"
#include "support/hf_to_gguf.h"
#include "worker/protocol.h"

namespace tw = tessera::worker;

namespace {

void Write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string Framed(const std::vector<std::string>& payloads) {
  std::string out;
  for (const std::string& p : payloads) {
    const uint32_t n = static_cast<uint32_t>(p.size());
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
    out += p;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  if (argc != 2) {
    fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  const std::string root = argv[1];
  // Worker frames.
  const std::string w = root + "/worker_protocol";
  fs::create_directories(w);
  tw::ChatPayload chat;
  chat.messages = {{"system", "be brief", "", "", ""},
                   {"assistant", "", R"([{"id":"c1","type":"function"}])", "", ""},
                   {"tool", "4", "", "c1", "add"}};
  chat.tools = {{"add", true, R"({"type":"function","function":{"name":"add","strict":true}})"}};
  chat.tool_choice = {tw::ToolChoiceMode::kAuto, ""};
  chat.options.max_tokens = 16;
  chat.options.stop = {"\n\n"};
  chat.options.logprobs = true;
  chat.options.top_logprobs = 2;
  chat.options.n = 2;
  chat.options.logit_bias = {{5, -100.0}, {9, 2.5}};
  tw::ChatPayload decision;
  decision.messages = {{"user", "ok?", "", "", ""}};
  decision.options.response_format = {tw::ResponseFormatKind::kDecision,
                                      "",
                                      {{"true", "true", "yes"}, {"\"no\"", "no", ""}},
                                      "answer",
                                      "Is it?"};
  tw::CompletionPayload completion{"Once", {}};
  completion.options.response_format = {
      tw::ResponseFormatKind::kJsonSchema, R"({"type":"object"})", {}, "", ""};
  tw::EmbedPayload embed{{{"a", "bb"}, {{1, 2, 3}}, 4096}, "query", 4};
  tw::SystemOnePayload systemone{
      "state", {{tw::QuestionType::kChoice, "Which?", {"a", "b"}, {"first", ""}}}};
  const tw::JobRequest chat_job{7, "qwen", chat};
  const tw::JobRequest decision_job{9, "qwen", decision};
  const tw::JobRequest completion_job{10, "qwen", completion};
  const tw::JobRequest embed_job{8, "embed", embed};
  const tw::JobRequest detok_job{11, "qwen", tw::DetokenizePayload{{1, 2, 300}}};
  const tw::JobRequest systemone_job{12, "qwen", systemone};
  tw::DeltaMessage delta;
  delta.job_id = 7;
  delta.text = "Hi";
  delta.logprobs = {{"Hi", -0.5f, {{"Hi", -0.5f}, {"Hello", -1.0f}}}};
  delta.completion_tokens = 1;
  delta.tool_calls = {{0, "c1", "add", "{\"a\":"}};
  tw::DoneMessage done;
  done.job_id = 7;
  done.finish_reason = tw::FinishReason::kLength;
  done.choice_finish_reasons = {tw::FinishReason::kLength, tw::FinishReason::kStop};
  done.slots = 4;
  tw::JobErrorMessage error;
  error.job_id = 7;
  error.kind = tw::JobErrorKind::kContextLength;
  error.message = "too long";
  tw::TaskResultMessage task;
  task.job_id = 8;
  task.items = {{0, {0.5f, -1.0f}, "", 3, {}}, {1, {0.25f}, "safe", 2, {"S1"}}};
  task.labels = {"safe", "unsafe"};
  tw::StartedMessage started;
  started.job_id = 7;
  started.prompt_tokens = 12;
  const std::vector<std::pair<std::string, std::string>> payloads = {
      {"job_chat", tw::Encode(chat_job)},
      {"job_decision", tw::Encode(decision_job)},
      {"job_completion", tw::Encode(completion_job)},
      {"job_embed", tw::Encode(embed_job)},
      {"job_detokenize", tw::Encode(detok_job)},
      {"job_systemone", tw::Encode(systemone_job)},
      {"cancel", tw::Encode(tw::CancelRequest{7})},
      {"add_model",
       tw::Encode(tw::AddModelMessage{"org/m", "/models/m", tessera::ModelKind::kChat})},
      {"ready", tw::Encode(tw::ReadyMessage{"qwen"})},
      {"started", tw::Encode(started)},
      {"delta", tw::Encode(delta)},
      {"done", tw::Encode(done)},
      {"job_error", tw::Encode(error)},
      {"tokens", tw::Encode(tw::TokensMessage{3, {1, 2, 3}})},
      {"text", tw::Encode(tw::TextMessage{3, "héllo"})},
      {"task_result", tw::Encode(task)},
  };
  std::vector<std::string> all;
  for (const auto& [name, p] : payloads) {
    Write(w + "/" + name, p);
    all.push_back(p);
  }
  Write(w + "/stream_of_frames", Framed(all));

  // Safetensors (the index.json variant is written by make_seeds.py).
  const std::string s = root + "/safetensors";
  fs::create_directories(s);
  const std::vector<float> v = {1.0f, -2.0f, 0.5f, 3.25f, 0.0f, -0.0f};
  std::vector<tessera::TensorToWrite> tensors = {
      tessera::MakeTensor("model.norm.weight", tessera::DType::kF32, {6}, v),
      tessera::MakeTensor("model.embed_tokens.weight", tessera::DType::kBF16, {2, 3}, v),
      tessera::MakeTensor("lm_head.weight", tessera::DType::kF16, {3, 2}, v)};
  if (!tessera::WriteSafetensors(s + "/three_dtypes.safetensors", tensors, {{"format", "pt"}})
           .ok() ||
      !tessera::WriteSafetensors(
           s + "/scalar.safetensors",
           {tessera::MakeTensor("scale", tessera::DType::kF32, {}, {v.data(), 1})})
           .ok()) {
    fprintf(stderr, "WriteSafetensors failed\n");
    return 1;
  }

  // GGUF: every metadata value type, and a tensor of every type the reader knows the
  // geometry of that tessera converts (plus one it refuses), with patterned bytes.
  const std::string g = root + "/gguf";
  fs::create_directories(g);
  {
    namespace tt = tessera::test;
    using tessera::GgmlType;
    tt::GgufWriter meta;
    meta.AddString("general.architecture", "qwen3");
    meta.AddU32("general.alignment", 32);
    meta.AddU8("a.u8", 1);
    meta.AddI8("a.i8", -1);
    meta.AddU16("a.u16", 2);
    meta.AddI16("a.i16", -2);
    meta.AddI32("a.i32", -3);
    meta.AddF32("a.f32", 0.5f);
    meta.AddBool("a.bool", true);
    meta.AddU64("a.u64", 4);
    meta.AddI64("a.i64", -4);
    meta.AddF64("a.f64", 0.25);
    meta.AddStringArray("tokenizer.ggml.tokens", {"<s>", "a", "b"});
    meta.AddF32Array("tokenizer.ggml.scores", {0.0f, -1.0f, -2.0f});
    meta.AddI32Array("tokenizer.ggml.token_type", {3, 1, 1});
    Write(g + "/metadata_only", meta.Build());
    tt::GgufWriter tensors(2);
    tensors.AddString("general.architecture", "llama");
    for (GgmlType type : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0,
                          GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ4_K, GgmlType::kQ5_K,
                          GgmlType::kQ6_K, GgmlType::kIQ4_NL, GgmlType::kQ2_K}) {
      const tessera::GgmlTypeTraits& traits = tessera::GgmlTraits(type);
      std::string bytes(2 * traits.block_bytes, '\0');
      for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>((i * 37 + 11) & 0x3b);
      tensors.AddTensor(std::string("t.") + traits.name, type, {traits.block_elements, 2}, bytes);
    }
    Write(g + "/every_type", tensors.Build());
    // A whole (tiny) llama that OpenCheckpoint accepts: 1 layer, hidden 32, 2 heads of 16,
    // 1 kv head, ffn 32, vocab 8; F32 except one Q8_0 matrix.
    tt::GgufWriter llama;
    llama.AddString("general.architecture", "llama");
    for (const auto& [key, v] :
         std::vector<std::pair<std::string, uint32_t>>{{"block_count", 1},
                                                       {"context_length", 64},
                                                       {"embedding_length", 32},
                                                       {"feed_forward_length", 32},
                                                       {"attention.head_count", 2},
                                                       {"attention.head_count_kv", 1}}) {
      llama.AddU32("llama." + key, v);
    }
    llama.AddF32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
    llama.AddF32("llama.rope.freq_base", 10000.0f);
    auto f32 = [](size_t n) {
      std::vector<float> v(n);
      for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>((i * 7) % 13) / 13.0f - 0.5f;
      return tt::F32Bytes(v);
    };
    llama.AddTensor("token_embd.weight", GgmlType::kF32, {32, 8}, f32(256));
    llama.AddTensor("output_norm.weight", GgmlType::kF32, {32}, f32(32));
    llama.AddTensor("blk.0.attn_norm.weight", GgmlType::kF32, {32}, f32(32));
    llama.AddTensor("blk.0.ffn_norm.weight", GgmlType::kF32, {32}, f32(32));
    llama.AddTensor("blk.0.attn_q.weight", GgmlType::kF32, {32, 32}, f32(1024));
    llama.AddTensor("blk.0.attn_k.weight", GgmlType::kF32, {32, 16}, f32(512));
    llama.AddTensor("blk.0.attn_v.weight", GgmlType::kF32, {32, 16}, f32(512));
    llama.AddTensor("blk.0.attn_output.weight", GgmlType::kF32, {32, 32}, f32(1024));
    llama.AddTensor("blk.0.ffn_gate.weight", GgmlType::kF32, {32, 32}, f32(1024));
    llama.AddTensor("blk.0.ffn_up.weight", GgmlType::kF32, {32, 32}, f32(1024));
    llama.AddTensor("blk.0.ffn_down.weight", GgmlType::kQ8_0, {32, 32}, std::string(32 * 34, 1));
    Write(g + "/tiny_llama", llama.Build());
    // Tiny gemma3 (sliding window, shifted norms) and minicpm (muP scales, LongRoPE factor
    // tensors) files as llama.cpp's converter writes them (tests/support/hf_to_gguf.h).
    for (tessera::ModelFamily family :
         {tessera::ModelFamily::kGemma3, tessera::ModelFamily::kMiniCpm}) {
      tessera::SyntheticModelSpec spec;
      spec.family = family;
      spec.nested_config = false;
      spec.hidden = 32;
      spec.intermediate = 32;
      spec.heads = 2;
      spec.kv_heads = 1;
      spec.head_dim = 16;
      spec.vocab = 8;
      spec.max_position = 64;
      spec.sliding_window = 4;
      spec.query_pre_attn_scalar = 16;
      spec.bos_token_id = 0;
      spec.eos_token_id = 1;
      if (family == tessera::ModelFamily::kMiniCpm) {
        spec.scale_emb = 12.0;
        spec.scale_depth = 1.4;
        spec.dim_model_base = 8.0;
        spec.rope_longrope = tessera::LongRopeScaling{
            {1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5}, {2, 3, 4, 5, 6, 7, 8, 9}, 64};
      }
      const std::string name(tessera::ModelFamilyName(family));
      const std::string dir = root + "/.tiny_" + name;
      tt::GgufWriter w;
      if (!tessera::WriteSyntheticCheckpoint(dir, spec).ok() ||
          !tt::BuildGgufOfCheckpoint(dir, "", true, &w).ok()) {
        fprintf(stderr, "cannot write the tiny %s seed\n", name.c_str());
        return 1;
      }
      fs::remove_all(dir);
      Write(g + "/tiny_" + name, w.Build());
    }
    // A whole (tiny) qwen35: one Gated DeltaNet layer (hidden 32, 1 key head of 8, 2 value
    // heads of 32: regrouped rows and Q8_0 ssm_out columns move at open) and an MTP block.
    tt::GgufWriter qwen35;
    qwen35.AddString("general.architecture", "qwen35");
    for (const auto& [key, v] :
         std::vector<std::pair<std::string, uint32_t>>{{"block_count", 2},
                                                       {"context_length", 64},
                                                       {"embedding_length", 32},
                                                       {"feed_forward_length", 32},
                                                       {"attention.head_count", 2},
                                                       {"attention.head_count_kv", 1},
                                                       {"attention.key_length", 16},
                                                       {"rope.dimension_count", 4},
                                                       {"ssm.conv_kernel", 4},
                                                       {"ssm.state_size", 8},
                                                       {"ssm.group_count", 1},
                                                       {"ssm.time_step_rank", 2},
                                                       {"ssm.inner_size", 64},
                                                       {"nextn_predict_layers", 1}}) {
      qwen35.AddU32("qwen35." + key, v);
    }
    qwen35.AddF32("qwen35.attention.layer_norm_rms_epsilon", 1e-6f);
    const float a_values[2] = {-0.5f, -2.0f};
    qwen35.AddTensor("token_embd.weight", GgmlType::kF32, {32, 8}, f32(256));
    qwen35.AddTensor("output_norm.weight", GgmlType::kF32, {32}, f32(32));
    qwen35.AddTensor("blk.0.attn_norm.weight", GgmlType::kF32, {32}, f32(32));
    qwen35.AddTensor("blk.0.post_attention_norm.weight", GgmlType::kF32, {32}, f32(32));
    qwen35.AddTensor("blk.0.attn_qkv.weight", GgmlType::kF32, {32, 80}, f32(2560));
    qwen35.AddTensor("blk.0.attn_gate.weight", GgmlType::kF32, {32, 64}, f32(2048));
    qwen35.AddTensor("blk.0.ssm_beta.weight", GgmlType::kF32, {32, 2}, f32(64));
    qwen35.AddTensor("blk.0.ssm_alpha.weight", GgmlType::kF32, {32, 2}, f32(64));
    qwen35.AddTensor("blk.0.ssm_conv1d.weight", GgmlType::kF32, {4, 80}, f32(320));
    qwen35.AddTensor("blk.0.ssm_dt.bias", GgmlType::kF32, {2}, f32(2));
    qwen35.AddTensor("blk.0.ssm_a", GgmlType::kF32, {2}, tt::F32Bytes(a_values));
    qwen35.AddTensor("blk.0.ssm_norm.weight", GgmlType::kF32, {32}, f32(32));
    qwen35.AddTensor("blk.0.ssm_out.weight", GgmlType::kQ8_0, {64, 32}, std::string(64 * 34, 1));
    qwen35.AddTensor("blk.0.ffn_gate.weight", GgmlType::kF32, {32, 32}, f32(1024));
    qwen35.AddTensor("blk.0.ffn_up.weight", GgmlType::kF32, {32, 32}, f32(1024));
    qwen35.AddTensor("blk.0.ffn_down.weight", GgmlType::kF32, {32, 32}, f32(1024));
    qwen35.AddTensor("blk.1.nextn.eh_proj.weight", GgmlType::kF32, {64, 32}, f32(2048));
    Write(g + "/tiny_qwen35", qwen35.Build());
  }

  // NPU artifacts.
  const std::string x = root + "/xclbin";
  fs::create_directories(x);
  const std::vector<uint8_t> xclbin = tessera::BuildXclbin(tessera::XclbinSpec{});
  Write(x + "/mlir_aie", std::string(xclbin.begin(), xclbin.end()));
  tessera::XclbinSpec plain;
  plain.with_metadata = false;
  plain.with_aie_partition = false;
  plain.ip_type = tessera::kIpTypeKernel;
  const std::vector<uint8_t> xclbin2 = tessera::BuildXclbin(plain);
  Write(x + "/kernel_no_metadata", std::string(xclbin2.begin(), xclbin2.end()));
  const std::string t = root + "/txn";
  fs::create_directories(t);
  const std::vector<uint8_t> txn = tessera::BuildTxn(
      {}, {tessera::TxnWrite(0x1000, 1), tessera::TxnMaskWrite(0x2000, 3, 0xff),
           tessera::TxnMaskPoll(0x3000, 1, 1), tessera::TxnBlockWrite(0x4000, {1, 2, 3}),
           tessera::TxnSync(0, 0, 1, 0), tessera::TxnAddressPatch(0x5000, 1, 0)});
  Write(t + "/all_ops_npu1", std::string(txn.begin(), txn.end()));
  tessera::TxnHeaderSpec npu2;
  npu2.device_generation = 4;
  npu2.columns = 8;
  const std::vector<uint8_t> txn2 = tessera::BuildTxn(npu2, {tessera::TxnWrite(0x1000, 1)});
  Write(t + "/npu2_one_write", std::string(txn2.begin(), txn2.end()));
  printf("seeds written under %s\n", root.c_str());
  return 0;
}
