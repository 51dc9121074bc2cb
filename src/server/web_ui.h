// The built-in web page of `tessera serve` (src/server/ui: index.html, app.js, app.css),
// embedded in the binary at build time by cmake/embed_files.cmake. It is public (the page asks
// for the API key and sends it with every API call it makes) and served with a strict
// Content-Security-Policy; `--no-ui` turns it off.
//
//   if (IsWebUiPath(request.path)) exchange->Respond(WebUiResponse(request));
#pragma once

#include <cstddef>
#include <string_view>

#include "base/embedded_file.h"
#include "server/http_exchange.h"

namespace tessera::server {

// The page's files, relative to src/server/ui (the generated web_ui_files.cc defines them).
extern const EmbeddedFile kWebUiFiles[];
extern const size_t kWebUiFilesCount;

// "/", "/ui/app.js" and "/ui/app.css".
bool IsWebUiPath(std::string_view path);

// The answer to a GET or HEAD of a web-page path: the file with its Content-Type, the
// security headers (CSP, nosniff, no referrer, no framing), `Cache-Control: no-cache` and an
// ETag; 304 when If-None-Match names the current ETag.
HttpResponse WebUiResponse(const HttpRequest& request);

// The Content-Security-Policy the page is served with.
std::string_view WebUiContentSecurityPolicy();

}  // namespace tessera::server
