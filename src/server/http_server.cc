#include "server/http_server.h"

#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "server/api_service.h"
#include "server/http_front_end.h"
#include "server/saved_api_key.h"

namespace tessera::server {
namespace {

// Each connection is a descriptor: let the process use as many as it is allowed.
void RaiseDescriptorLimit() {
  struct rlimit lim;
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
}

}  // namespace

int RunServer(const ServeOptions& options) {
  if (options.models.empty()) {
    std::fprintf(stderr, "tessera serve: no model given; pass --model DIR\n");
    return 2;
  }
  // Signals are taken by one thread with sigwait; every other thread (and, until it resets
  // its mask, the worker child) has them blocked.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);   // reloads the --api-keys file (on the signal thread)
  sigaddset(&signals, SIGUSR1);  // internal: wakes the signal thread when the server stops
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  RaiseDescriptorLimit();

  ApiService service(options);
  HttpFrontEndOptions fo;
  fo.host = options.host;
  fo.port = options.port;
  fo.require_loopback = options.require_loopback;
  fo.tls_cert = options.tls_cert;
  fo.tls_key = options.tls_key;
  fo.threads = std::max(1, options.http_threads);
  fo.header_timeout_s = std::min(options.header_timeout_s, options.socket_timeout_s);
  fo.socket_timeout_s = options.socket_timeout_s;
  fo.stall_timeout_s = options.stall_timeout_s;
  fo.keep_alive_timeout_s = options.keep_alive_timeout_s;
  fo.max_body_bytes = options.max_body_bytes;
  fo.max_connections = options.max_connections;
  fo.max_connections_per_client = options.max_connections_per_client;
  auto created = HttpFrontEnd::Create(fo, &service);
  if (!created) {
    if (created.status().code() == ErrorCode::kPermissionDenied) {
      std::fprintf(stderr,
                   "tessera serve: --no-auth is allowed only when every address of --host is "
                   "loopback: %s\n",
                   created.status().message().c_str());
      return 2;
    }
    std::fprintf(stderr, "tessera serve: %s\n", created.status().message().c_str());
    return 1;
  }
  HttpFrontEnd& front_end = **created;
  // Only now that the port is ours: a server that cannot listen creates no key and shows none.
  if (!options.saved_api_key_file.empty()) {
    auto saved = LoadOrCreateSavedApiKey(options.saved_api_key_file);
    if (!saved) {
      std::fprintf(stderr, "tessera serve: %s\n", saved.status().message().c_str());
      return 2;
    }
    service.UseSavedApiKey(saved->key);
    // The key is shown once, when it is made; later starts name the file only, so that a
    // long-lived key does not land in every log the server's output is kept in.
    if (saved->created) {
      std::printf("tessera serve: API key (new, saved in %s and used again at every start): %s\n",
                  options.saved_api_key_file.c_str(), saved->key.c_str());
    } else {
      std::printf("tessera serve: API key from %s (cat it to see it; delete it for a new one)\n",
                  options.saved_api_key_file.c_str());
    }
  }
  if (options.rate_limit_per_minute == kRateLimitAuto) {
    // One user's machine: a limit per client would only break their scripts and agents.
    service.SetRateLimit(front_end.loopback_only() ? 0 : kDefaultRateLimitPerMinute);
  }
  if (service.rate_limit() > 0) {
    std::fprintf(stderr,
                 "tessera serve: at most %d requests per minute per client (--rate-limit)\n",
                 service.rate_limit());
  } else {
    std::fprintf(stderr, "tessera serve: no per-client rate limit (%s; --rate-limit N sets one)\n",
                 options.rate_limit_per_minute == 0 ? "--rate-limit 0"
                                                    : "listening on loopback addresses only");
  }
  service.supervisor().Start();
  std::printf("tessera serve: listening on %s://%s:%d (",
              options.tls_cert.empty() ? "http" : "https", options.host.c_str(), front_end.port());
  const std::vector<std::string> addresses = front_end.addresses();
  for (size_t i = 0; i < addresses.size(); ++i)
    std::printf("%s%s", i ? ", " : "addresses: ", addresses[i].c_str());
  std::printf("; models: ");
  for (size_t i = 0; i < options.models.size(); ++i)
    std::printf("%s%s", i ? ", " : "", options.models[i].name.c_str());
  std::printf(")\n");
  std::fflush(stdout);

  std::atomic<bool> forced{false};
  std::thread drainer;
  // The next signal other than SIGHUP; each SIGHUP meanwhile reloads the API keys here, on this
  // ordinary thread (no work is done in a signal handler).
  auto next_stop_signal = [&] {
    while (true) {
      int sig = 0;
      if (sigwait(&signals, &sig) != 0) continue;
      if (sig != SIGHUP) return sig;
      std::string message;
      const bool reloaded = service.ReloadApiKeys(&message).ok();
      std::fprintf(stderr, "tessera serve: SIGHUP: %s%s\n",
                   reloaded ? "" : "refused: ", message.c_str());
    }
  };
  std::thread signal_thread([&] {
    int sig = next_stop_signal();
    if (sig == SIGUSR1) return;
    std::fprintf(stderr,
                 "tessera serve: %s received; finishing in-flight requests (send it again "
                 "to stop at once)\n",
                 sig == SIGTERM ? "SIGTERM" : "SIGINT");
    service.StartDraining();
    drainer = std::thread([&] {
      service.admission().WaitIdle(Clock::now() + std::chrono::seconds(options.request_timeout_s));
      // The last answers may still be on their way out: let them be written, then stop.
      front_end.Shutdown(std::chrono::seconds(10));
    });
    sig = next_stop_signal();
    if (sig == SIGUSR1) return;
    forced = true;
    std::fprintf(stderr, "tessera serve: %s received again; stopping now\n",
                 sig == SIGTERM ? "SIGTERM" : "SIGINT");
    // The worker dies, so every waiting job ends at once; then the front end stops. If
    // anything still holds on, the process ends anyway.
    std::thread([] {
      std::this_thread::sleep_for(std::chrono::seconds(3));
      std::fprintf(stderr, "tessera serve: stopped (forced)\n");
      std::fflush(stderr);
      _exit(1);
    }).detach();
    service.supervisor().Stop();
    front_end.Stop();
  });
  front_end.Run();
  pthread_kill(signal_thread.native_handle(), SIGUSR1);
  signal_thread.join();
  if (drainer.joinable()) drainer.join();
  service.supervisor().Stop();
  service.Stop();  // every job has ended (the worker is gone); the exchanges are released
  created->reset();
  std::fprintf(stderr, "tessera serve: stopped\n");
  return forced ? 1 : 0;
}

}  // namespace tessera::server
