#include "server/web_ui.h"

#include <cstdint>
#include <cstdio>
#include <string>

namespace tessera::server {
namespace {

struct Page {
  std::string_view path;
  std::string_view file;
  std::string_view content_type;
};

constexpr Page kPages[] = {
    {"/", "index.html", "text/html; charset=utf-8"},
    {"/ui/app.js", "app.js", "text/javascript; charset=utf-8"},
    {"/ui/app.css", "app.css", "text/css; charset=utf-8"},
};

const EmbeddedFile* FindFile(std::string_view name) {
  for (size_t i = 0; i < kWebUiFilesCount; ++i) {
    if (name == kWebUiFiles[i].name) return &kWebUiFiles[i];
  }
  return nullptr;
}

// A strong validator: FNV-1a 64 of the bytes (they change only with the binary).
std::string ETagOf(const EmbeddedFile& f) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < f.size; ++i) {
    h ^= f.data[i];
    h *= 1099511628211ull;
  }
  char buf[24];
  std::snprintf(buf, sizeof buf, "\"%016llx\"", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace

std::string_view WebUiContentSecurityPolicy() {
  // Only the page's own script, style and API calls; nothing inline, no frames, no forms.
  return "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
         "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";
}

bool IsWebUiPath(std::string_view path) {
  for (const Page& p : kPages) {
    if (p.path == path) return true;
  }
  return false;
}

HttpResponse WebUiResponse(const HttpRequest& request) {
  HttpResponse r;
  const Page* page = nullptr;
  for (const Page& p : kPages) {
    if (p.path == request.path) page = &p;
  }
  const EmbeddedFile* file = page ? FindFile(page->file) : nullptr;
  if (file == nullptr) {
    // Only reachable if the build embedded a different file list than kPages names.
    r.status = 500;
    r.content_type = "text/plain; charset=utf-8";
    r.body = "web page file missing from this build\n";
    return r;
  }
  const std::string etag = ETagOf(*file);
  r.SetHeader("Content-Security-Policy", std::string(WebUiContentSecurityPolicy()));
  r.SetHeader("X-Content-Type-Options", "nosniff");
  r.SetHeader("Referrer-Policy", "no-referrer");
  r.SetHeader("X-Frame-Options", "DENY");
  // Revalidated on every load (the ETag makes that a 304), so a new binary's page is used at
  // once and never mixed with an old cached script.
  r.SetHeader("Cache-Control", "no-cache");
  r.SetHeader("ETag", etag);
  if (request.Header("If-None-Match") == etag) {
    r.status = 304;
    r.content_type.clear();
    return r;
  }
  r.content_type = std::string(page->content_type);
  r.body.assign(reinterpret_cast<const char*>(file->data), file->size);
  return r;
}

}  // namespace tessera::server
