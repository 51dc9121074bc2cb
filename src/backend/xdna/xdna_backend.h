// The xdna backend: decoder layers planned once at load into runs of tessera's decoder program
// on an XDNA device (device.h), submitted in chunks of layers so that no command chain comes
// near the driver's timeout. Weights live in device buffers as bf16, the KV cache in device
// buffers in the engine's block-pool layout; the hidden state crosses to and from the device
// once per chunk of layers. The LM head always runs on the CPU: a placement with xdna layers
// ends with a cpu stage (`--npu-layers N`).
//
// On the fake device (--npu-device fake:xdna1|fake:xdna2) every run is a CPU reference kernel, and
// name() says so: "xdna-fake-xdna1". Faults are handled here: a chain that times out, aborts,
// or completes without its fence being written is run again from the chunk's input (KV writes
// are idempotent: the same rows at the same positions); after kMaxChainAttempts the pass fails
// with the device's words. A lost device fails every later pass.
//
//   TS_ASSIGN_OR_RETURN(std::unique_ptr<Backend> b, MakeXdnaBackend(options));
//   TS_RETURN_IF_ERROR(b->LoadLayers(*ckpt, {0, 12}, kv));   // layers 0-11 on the NPU
#pragma once

#include <cstdint>
#include <memory>

#include "backend/backend.h"
#include "backend/xdna/device.h"

namespace tessera {

inline constexpr int kMaxChainAttempts = 3;

Expected<std::unique_ptr<Backend>> MakeXdnaBackend(const BackendOptions& options);

// The device every xdna backend of this process shares (one NPU, many models), made on first
// use by options.make_device (unset: MakeXdnaDevice, device.h, the XRT device); a later caller
// naming another options.device is refused.
Expected<std::shared_ptr<XdnaDevice>> ProcessXdnaDevice(const NpuOptions& options);

// Figures of every xdna backend in this process (for /stats and the tests).
struct XdnaCounters {
  int64_t passes = 0;          // ForwardLayers calls that reached the device
  int64_t chains = 0;          // command chains submitted
  int64_t chain_retries = 0;   // chains run again after a fault
  int64_t faults = 0;          // timeouts, aborts, missing fences
  int64_t queue_refusals = 0;  // passes refused by the NPU queue (full or timed out)
  int64_t evictions = 0;       // idle models closed to make room for another
  bool device_lost = false;    // the device reported itself lost; nothing will run on it again
};
XdnaCounters ReadXdnaCounters();

}  // namespace tessera
