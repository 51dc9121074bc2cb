// Teacher-forced logits from llama.cpp for a GGUF file: feeds the given token ids in one
// sequence and writes every position's logits (float32, [n_tokens, n_vocab], row-major) to
// OUT, for comparing tessera's GGUF loading against llama.cpp's own reading of the same file.
//   cc -O2 llama_logits.c -I$LLAMA/include -I$LLAMA/ggml/include -L$LLAMA/build/bin \
//      -lllama -lggml -lggml-base -o llama_logits
//   LD_LIBRARY_PATH=$LLAMA/build/bin ./llama_logits FILE.gguf OUT.f32 ID ID ID ...
#include <stdio.h>
#include <stdlib.h>

#include "llama.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: llama_logits FILE.gguf OUT.f32 ID...\n");
    return 2;
  }
  const int n = argc - 3;
  llama_backend_init();
  struct llama_model_params mp = llama_model_default_params();
  struct llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (model == NULL) {
    fprintf(stderr, "llama_logits: cannot load %s\n", argv[1]);
    return 1;
  }
  struct llama_context_params cp = llama_context_default_params();
  cp.n_ctx = (uint32_t)(n + 16);
  cp.n_batch = (uint32_t)n;
  cp.n_ubatch = (uint32_t)n;
  cp.n_threads = 2;
  cp.n_threads_batch = 2;
  struct llama_context* ctx = llama_init_from_model(model, cp);
  if (ctx == NULL) {
    fprintf(stderr, "llama_logits: cannot create a context\n");
    return 1;
  }
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  struct llama_batch batch = llama_batch_init(n, 0, 1);
  for (int i = 0; i < n; ++i) {
    batch.token[i] = atoi(argv[3 + i]);
    batch.pos[i] = i;
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = 0;
    batch.logits[i] = 1;
  }
  batch.n_tokens = n;
  if (llama_decode(ctx, batch) != 0) {
    fprintf(stderr, "llama_logits: llama_decode failed\n");
    return 1;
  }
  FILE* out = fopen(argv[2], "wb");
  if (out == NULL) {
    fprintf(stderr, "llama_logits: cannot write %s\n", argv[2]);
    return 1;
  }
  for (int i = 0; i < n; ++i) {
    const float* row = llama_get_logits_ith(ctx, i);
    if (fwrite(row, sizeof(float), (size_t)n_vocab, out) != (size_t)n_vocab) return 1;
  }
  fclose(out);
  fprintf(stderr, "llama_logits: %d positions x %d logits\n", n, n_vocab);
  llama_batch_free(batch);
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
