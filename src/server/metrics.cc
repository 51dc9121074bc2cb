#include "server/metrics.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

namespace tessera::server {
namespace {

// A label value as the text format wants it: backslash, double quote and newline escaped.
std::string Escape(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

// Numbers as Prometheus parses them (Go's ParseFloat): plain decimal or exponent notation.
std::string Num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

void Header(std::string& out, const char* name, const char* type, const char* help) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

}  // namespace

void ServerMetrics::Histogram::Add(double seconds) {
  size_t i = 0;
  while (i < kBuckets.size() && seconds > kBuckets[i]) ++i;
  if (i < kBuckets.size()) ++counts[i];
  ++count;
  sum += seconds;
}

std::string ServerMetrics::ModelLabel(const std::string& model) const {
  return std::find(models_.begin(), models_.end(), model) != models_.end() ? model : "";
}

void ServerMetrics::Observe(const std::string& route, int status, const std::string& key,
                            const AccessRecord& record, double total_ms) {
  std::lock_guard lock(mu_);
  const std::string model = ModelLabel(record.model);
  ++requests_[{route, status, key}];
  latency_[route].Add(total_ms / 1000.0);
  if (model.empty()) return;
  if (record.scheduler.known) scheduler_[model] = record.scheduler;
  prompt_tokens_[model] += static_cast<uint64_t>(std::max<int64_t>(0, record.prompt_tokens));
  completion_tokens_[model] +=
      static_cast<uint64_t>(std::max<int64_t>(0, record.completion_tokens));
  if (record.completion_tokens > 0 && record.ttft_ms > 0) {
    ttft_[model].Add(record.ttft_ms / 1000.0);
    if (record.completion_tokens > 1 && total_ms > record.ttft_ms) {
      per_token_[model].Add((total_ms - record.ttft_ms) / 1000.0 /
                            static_cast<double>(record.completion_tokens - 1));
    }
  }
}

std::string ServerMetrics::Render(const MetricsGauges& g) const {
  std::string out;
  auto histograms = [&](const char* name, const char* label,
                        const std::map<std::string, Histogram>& by) {
    for (const auto& [key, h] : by) {
      const std::string l = std::string(label) + "=\"" + Escape(key) + "\"";
      uint64_t cumulative = 0;
      for (size_t i = 0; i < kBuckets.size(); ++i) {
        cumulative += h.counts[i];
        out += std::string(name) + "_bucket{" + l + ",le=\"" + Num(kBuckets[i]) + "\"} " +
               std::to_string(cumulative) + "\n";
      }
      out += std::string(name) + "_bucket{" + l + ",le=\"+Inf\"} " + std::to_string(h.count) + "\n";
      out += std::string(name) + "_sum{" + l + "} " + Num(h.sum) + "\n";
      out += std::string(name) + "_count{" + l + "} " + std::to_string(h.count) + "\n";
    }
  };
  std::lock_guard lock(mu_);
  Header(out, "tessera_http_requests_total", "counter",
         "HTTP requests answered, by route, status and API key name (none: no key).");
  for (const auto& [labels, n] : requests_) {
    const auto& [route, status, key] = labels;
    out += "tessera_http_requests_total{route=\"" + Escape(route) + "\",status=\"" +
           std::to_string(status) + "\"" + (key.empty() ? "" : ",key=\"" + Escape(key) + "\"") +
           "} " + std::to_string(n) + "\n";
  }
  Header(out, "tessera_request_duration_seconds", "histogram",
         "Time from a request's arrival to the end of its answer, by route.");
  histograms("tessera_request_duration_seconds", "route", latency_);
  Header(out, "tessera_time_to_first_token_seconds", "histogram",
         "Time from arrival to the first generated token, by model.");
  histograms("tessera_time_to_first_token_seconds", "model", ttft_);
  Header(out, "tessera_time_per_output_token_seconds", "histogram",
         "Mean time per generated token after the first, one sample per request, by model.");
  histograms("tessera_time_per_output_token_seconds", "model", per_token_);
  Header(out, "tessera_prompt_tokens_total", "counter", "Prompt tokens of answered requests.");
  for (const auto& [model, n] : prompt_tokens_) {
    out +=
        "tessera_prompt_tokens_total{model=\"" + Escape(model) + "\"} " + std::to_string(n) + "\n";
  }
  Header(out, "tessera_completion_tokens_total", "counter", "Generated tokens, by model.");
  for (const auto& [model, n] : completion_tokens_) {
    out += "tessera_completion_tokens_total{model=\"" + Escape(model) + "\"} " + std::to_string(n) +
           "\n";
  }
  Header(out, "tessera_requests_active", "gauge", "Requests running in the worker's slots.");
  out += "tessera_requests_active " + std::to_string(g.active) + "\n";
  Header(out, "tessera_queue_depth", "gauge", "Requests waiting in the admission queue.");
  out += "tessera_queue_depth " + std::to_string(g.queued) + "\n";
  Header(out, "tessera_worker_restarts_total", "counter",
         "Times the inference worker was restarted.");
  out += "tessera_worker_restarts_total " + std::to_string(g.worker_restarts) + "\n";
  Header(out, "tessera_worker_ready", "gauge", "1 while the worker is warmed and serving.");
  out += std::string("tessera_worker_ready ") + (g.worker_ready ? "1" : "0") + "\n";
  Header(out, "tessera_model_info", "gauge",
         "A served model, where its layers run, and the NPU device its NPU layers use.");
  for (const auto& model : models_) {
    auto it = g.placements.find(model);
    out += "tessera_model_info{model=\"" + Escape(model) + "\",placement=\"" +
           Escape(it == g.placements.end() ? "" : it->second) + "\",npu_device=\"" +
           Escape(g.npu_device) + "\"} 1\n";
  }
  // The scheduler's figures come with each finished generation job: they are the model's
  // state when its last job ended (a model that has run none has no sample).
  auto scheduler = [&](const char* name, const char* type, const char* help, auto field) {
    Header(out, name, type, help);
    for (const auto& [model, s] : scheduler_) {
      out += std::string(name) + "{model=\"" + Escape(model) + "\"} " + std::to_string(field(s)) +
             "\n";
    }
  };
  using Sched = AccessRecord::Scheduler;
  scheduler("tessera_slots", "gauge", "Sequence slots of the model's scheduler.",
            [](const Sched& s) { return s.slots; });
  scheduler("tessera_slots_in_use", "gauge",
            "Slots running a sequence when the model's last job ended.",
            [](const Sched& s) { return s.slots_in_use; });
  scheduler("tessera_sequences_waiting", "gauge",
            "Sequences waiting for a slot when the model's last job ended.",
            [](const Sched& s) { return s.sequences_waiting; });
  scheduler("tessera_kv_blocks", "gauge", "KV cache blocks of the model's pool.",
            [](const Sched& s) { return s.kv_blocks; });
  scheduler("tessera_kv_blocks_free", "gauge",
            "KV blocks available (free, or cached and evictable) when the model's last job ended.",
            [](const Sched& s) { return s.kv_blocks_free; });
  scheduler("tessera_kv_blocks_cached", "gauge",
            "KV blocks holding a reusable prefix when the model's last job ended.",
            [](const Sched& s) { return s.kv_blocks_cached; });
  Header(out, "tessera_process_resident_memory_bytes", "gauge",
         "Resident memory of the HTTP process and of the inference worker, by process.");
  out += "tessera_process_resident_memory_bytes{process=\"http\"} " +
         std::to_string(g.resident_bytes) + "\n";
  out += "tessera_process_resident_memory_bytes{process=\"worker\"} " +
         std::to_string(g.worker_resident_bytes) + "\n";
  return out;
}

int64_t ProcessResidentBytes(int pid) {
  std::ifstream statm(pid > 0 ? "/proc/" + std::to_string(pid) + "/statm" : "/proc/self/statm");
  int64_t pages = 0, resident = 0;
  if (!(statm >> pages >> resident)) return 0;
  return resident * static_cast<int64_t>(::sysconf(_SC_PAGESIZE));
}

}  // namespace tessera::server
