// The endpoint table (server/endpoints.h): an endpoint added as one row plus its handler
// (toy_endpoint.cc), with no other change to the server, is routed, authenticated, counted in
// /metrics under its own label and refused for a model of the wrong kind; the built-in rows
// keep their methods, access and labels.
#include <gtest/gtest.h>

#include <mutex>
#include <nlohmann/json.hpp>

#include "server/api_service.h"
#include "toy_endpoint.h"

namespace tessera::server {
namespace {

// Captures the one answer of a request (the service answers whole responses here).
class CapturingExchange final : public HttpExchange {
 public:
  const std::string& request_id() const override { return id_; }
  void Respond(HttpResponse response) override {
    std::lock_guard lock(mu_);
    response_ = std::move(response);
  }
  void BeginStream(int, std::vector<HttpHeader>, const std::string&) override {}
  bool StreamWrite(std::string) override { return false; }
  void EndStream() override {}
  bool client_gone() const override { return false; }
  void Note(const std::function<void(AccessRecord&)>& edit) override { edit(record_); }

  HttpResponse response() const {
    std::lock_guard lock(mu_);
    return response_;
  }
  const AccessRecord& record() const { return record_; }

 private:
  std::string id_ = "req-1";
  mutable std::mutex mu_;
  HttpResponse response_;
  AccessRecord record_;
};

class EndpointTable : public ::testing::Test {
 protected:
  EndpointTable() {
    options_.models = {{"chat", "/nonexistent/chat", ModelKind::kChat},
                       {"emb", "/nonexistent/emb", ModelKind::kEmbed}};
    options_.api_key = "secret";
    options_.extra_endpoints = {test::ToyEndpoint()};
    service_ = std::make_unique<ApiService>(options_);
  }

  static HttpRequest Head(std::string method, std::string path, bool with_key) {
    HttpRequest r;
    r.method = std::move(method);
    r.path = path;
    r.target = std::move(path);
    r.remote_addr = "127.0.0.1";
    if (with_key) r.headers.push_back({"Authorization", "Bearer secret"});
    return r;
  }

  std::optional<HttpResponse> Screen(HttpRequest head) { return service_->Screen(head); }

  // Screens, handles and completes one request as the front end would; the answer.
  HttpResponse Call(std::string method, std::string path, std::string body) {
    HttpRequest head = Head(std::move(method), std::move(path), true);
    if (auto refused = service_->Screen(head)) return *refused;
    HttpRequest request = head;
    request.body = std::move(body);
    request.has_body = !request.body.empty();
    auto exchange = std::make_shared<CapturingExchange>();
    service_->Handle(request, exchange);
    const HttpResponse r = exchange->response();
    service_->Completed(head, exchange->request_id(), r.status, exchange->record(), 1.0);
    return r;
  }

  ServeOptions options_;
  std::unique_ptr<ApiService> service_;
};

TEST_F(EndpointTable, AToyEndpointIsRoutedAuthenticatedCountedAndKindChecked) {
  // Authenticated like every API row: no key, no answer.
  auto refused = Screen(Head("POST", "/v1/toy", false));
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 401);
  // Its method only.
  auto wrong_method = Screen(Head("GET", "/v1/toy", true));
  ASSERT_TRUE(wrong_method);
  EXPECT_EQ(wrong_method->status, 405);
  // Routed to its handler, on a model of its kind (named, or the first one served).
  for (const std::string body : {R"({"model": "emb", "text": "hi"})", R"({"text": "hi"})"}) {
    HttpResponse ok = Call("POST", "/v1/toy", body);
    ASSERT_EQ(ok.status, 200) << ok.body;
    auto json = nlohmann::json::parse(ok.body);
    EXPECT_EQ(json["id"], "toy-req-1");
    EXPECT_EQ(json["model"], "emb");
    EXPECT_EQ(json["echo"], "hi");
  }
  // Refused for a model of another kind, and for one not served.
  HttpResponse wrong_kind = Call("POST", "/v1/toy", R"({"model": "chat"})");
  EXPECT_EQ(wrong_kind.status, 400) << wrong_kind.body;
  EXPECT_NE(wrong_kind.body.find("'chat' is a chat model; this endpoint needs an embed model"),
            std::string::npos)
      << wrong_kind.body;
  EXPECT_EQ(Call("POST", "/v1/toy", R"({"model": "nope"})").status, 404);
  // Counted under its own label.
  HttpResponse metrics = Call("GET", "/metrics", "");
  ASSERT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find(
                "tessera_http_requests_total{route=\"/v1/toy\",status=\"200\",key=\"default\"} 2"),
            std::string::npos)
      << metrics.body;
  EXPECT_NE(metrics.body.find(
                "tessera_http_requests_total{route=\"/v1/toy\",status=\"400\",key=\"default\"} 1"),
            std::string::npos);
  EXPECT_NE(metrics.body.find(
                "tessera_http_requests_total{route=\"/v1/toy\",status=\"404\",key=\"default\"} 1"),
            std::string::npos);
}

TEST_F(EndpointTable, BuiltInRowsKeepTheirMethodsAccessAndLabels) {
  EXPECT_FALSE(Screen(Head("GET", "/health", false)));  // open
  EXPECT_FALSE(Screen(Head("GET", "/", false)));        // the web page is open
  EXPECT_EQ(Screen(Head("GET", "/metrics", false))->status, 401);
  EXPECT_EQ(Screen(Head("GET", "/v1/models/org/name", false))->status, 401);
  EXPECT_FALSE(Screen(Head("GET", "/v1/models/org/name", true)));
  EXPECT_EQ(Screen(Head("GET", "/v1/completions", true))->status, 405);
  EXPECT_EQ(Screen(Head("POST", "/v1/nothing", true))->status, 404);
  std::string label;
  for (const auto& [path, want] :
       std::vector<std::pair<std::string, std::string>>{{"/rerank", "/rerank"},
                                                        {"/v1/rerank", "/v1/rerank"},
                                                        {"/v1/models/qwen", "/v1/models/{id}"},
                                                        {"/", "ui"},
                                                        {"/v1/toy", "/v1/toy"}}) {
    const Endpoint* found = nullptr;
    for (const Endpoint& e : service_->endpoints()) {
      if (EndpointMatches(e, path, &label)) {
        found = &e;
        break;
      }
    }
    ASSERT_NE(found, nullptr) << path;
    EXPECT_EQ(label, want) << path;
  }
  // Each path and method is answered by one row.
  for (const Endpoint& a : service_->endpoints()) {
    for (const Endpoint& b : service_->endpoints()) {
      if (&a != &b && !a.path.empty() && a.method == b.method) {
        EXPECT_FALSE(EndpointMatches(b, a.path)) << a.path;
      }
    }
  }
}

TEST_F(EndpointTable, RowsOfOnePathDifferInMethod) {
  // GET and DELETE /v1/responses/{id} are two rows; other methods are told both.
  for (const char* method : {"GET", "HEAD", "DELETE"}) {
    EXPECT_FALSE(Screen(Head(method, "/v1/responses/resp_1", true))) << method;
  }
  for (const char* method : {"POST", "PUT"}) {
    auto refused = Screen(Head(method, "/v1/responses/resp_1", true));
    ASSERT_TRUE(refused) << method;
    EXPECT_EQ(refused->status, 405);
    bool allow = false;
    for (const HttpHeader& h : refused->headers)
      allow |= h.name == "Allow" && h.value == "GET, HEAD, DELETE";
    EXPECT_TRUE(allow) << refused->body;
    EXPECT_NE(refused->body.find("use GET, HEAD, DELETE"), std::string::npos) << refused->body;
  }
  EXPECT_EQ(Screen(Head("DELETE", "/v1/responses", true))->status, 405);
  EXPECT_EQ(Screen(Head("DELETE", "/v1/responses/resp_1", false))->status, 401);
  // Each reaches its own handler: GET and DELETE of an id never kept are 404s naming it.
  for (const char* method : {"GET", "DELETE"}) {
    HttpResponse r = Call(method, "/v1/responses/resp_unknown", "");
    EXPECT_EQ(r.status, 404) << method;
    EXPECT_NE(r.body.find("'resp_unknown' names no stored response"), std::string::npos) << r.body;
  }
  EXPECT_EQ(Call("GET", "/v1/responses/resp_1/input_items", "").status, 404);
}

// Ollama's rows (ollama_api.h): their errors in Ollama's shape from screening on, DELETE for
// /api/delete, and the listings answered even when a checkpoint folder cannot be read.
TEST_F(EndpointTable, OllamaRowsAnswerInOllamasShape) {
  auto unauthorized = Screen(Head("GET", "/api/tags", false));
  ASSERT_TRUE(unauthorized);
  EXPECT_EQ(unauthorized->status, 401);
  EXPECT_TRUE(nlohmann::json::parse(unauthorized->body)["error"].is_string()) << unauthorized->body;
  auto wrong_method = Screen(Head("POST", "/api/delete", true));
  ASSERT_TRUE(wrong_method);
  EXPECT_EQ(wrong_method->status, 405);
  EXPECT_TRUE(nlohmann::json::parse(wrong_method->body)["error"].is_string());
  HttpResponse del = Call("DELETE", "/api/delete", R"({"model": "chat"})");
  EXPECT_EQ(del.status, 501);
  EXPECT_NE(nlohmann::json::parse(del.body)["error"].get<std::string>().find("tessera rm"),
            std::string::npos);
  HttpResponse tags = Call("GET", "/api/tags", "");
  ASSERT_EQ(tags.status, 200) << tags.body;
  const auto models = nlohmann::json::parse(tags.body)["models"];
  ASSERT_EQ(models.size(), 2u);
  EXPECT_EQ(models[0]["name"], "chat");
  EXPECT_EQ(models[1]["details"]["parameter_size"], "");  // unknown: the folder is missing
  HttpResponse show = Call("POST", "/api/show", R"({"model": "nope"})");
  EXPECT_EQ(show.status, 404);
  EXPECT_TRUE(nlohmann::json::parse(show.body)["error"].is_string()) << show.body;
  EXPECT_EQ(Call("POST", "/api/show", R"({"name": "emb:latest"})").status, 200);
}

}  // namespace
}  // namespace tessera::server
