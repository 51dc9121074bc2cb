// ServerMetrics: what `GET /metrics` serves, in the Prometheus text exposition format (0.0.4).
// Counters and histograms are fed once per finished request from its access record (the same
// numbers as the access log); gauges are read when scraped.
//
//   ServerMetrics m({"tiny"});
//   m.Observe("/v1/completions", 200, "alice", record, total_ms);  // ApiService::Completed
//   std::string text = m.Render(gauges);                   // the /metrics body
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "server/http_exchange.h"

namespace tessera::server {

// What the server knows at scrape time.
struct MetricsGauges {
  int64_t active = 0;  // requests holding a slot
  int64_t queued = 0;  // requests waiting in the admission queue
  int64_t worker_restarts = 0;
  bool worker_ready = false;
  std::map<std::string, std::string> placements;  // model -> where its layers run
  std::string npu_device;                         // empty: none
  int64_t resident_bytes = 0;                     // this (HTTP) process's RSS
  int64_t worker_resident_bytes = 0;              // the worker's RSS; 0 while it is down
};

class ServerMetrics {
 public:
  // Upper bounds (seconds) of the latency histograms' buckets; +Inf is implied.
  static constexpr std::array<double, 12> kBuckets = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                      0.5,   1,    2.5,   5,    10,  30};

  // `route` is the endpoint table's label for the request (endpoints.h; "other" for a path no
  // endpoint answers, so clients cannot grow the label set); `key` the name of the API key it
  // authenticated with (empty: none), which only the operator's key files name; `model` labels
  // are kept only for served models.
  explicit ServerMetrics(std::vector<std::string> models) : models_(std::move(models)) {}
  // A model served from now on (pulled while the server runs: /api/pull).
  void AddModel(const std::string& model) {
    std::lock_guard lock(mu_);
    models_.push_back(model);
  }
  void Observe(const std::string& route, int status, const std::string& key,
               const AccessRecord& record, double total_ms);
  std::string Render(const MetricsGauges& gauges) const;

 private:
  struct Histogram {
    std::array<uint64_t, kBuckets.size()> counts{};  // per bucket, not cumulative
    uint64_t count = 0;
    double sum = 0;
    void Add(double seconds);
  };
  std::string ModelLabel(const std::string& model) const;  // under mu_

  mutable std::mutex mu_;
  std::vector<std::string> models_;  // the served models (AddModel may add one)
  std::map<std::tuple<std::string, int, std::string>, uint64_t> requests_;  // (route, status, key)
  std::map<std::string, uint64_t> prompt_tokens_, completion_tokens_;       // by model
  std::map<std::string, Histogram> latency_;                                // by route
  std::map<std::string, Histogram> ttft_, per_token_;                       // by model
  std::map<std::string, AccessRecord::Scheduler> scheduler_;                // by model, last job's
};

// The resident set size in bytes of this process (pid 0) or of process `pid` (0 when /proc
// cannot tell, e.g. the process is gone).
int64_t ProcessResidentBytes(int pid = 0);

}  // namespace tessera::server
