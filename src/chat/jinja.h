// A Jinja2 interpreter for Hugging Face chat templates, configured the way transformers
// configures Jinja2: sandboxed, trim_blocks and lstrip_blocks on, loop controls (break,
// continue), `tojson` without HTML escaping, `raise_exception(msg)` and `strftime_now(fmt)`.
//
//   auto tmpl = tessera::jinja::Template::Parse(
//       "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}");
//   if (!tmpl) return tmpl.status();
//   nlohmann::ordered_json ctx = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}};
//   auto text = tmpl->Render(ctx);   // "<|user|>hi"
//
// Every failure is a Status with a one-line message; template errors name the template line
// and column. When the template calls raise_exception(msg) the Status message is exactly msg
// (code kInvalidArgument) and RenderError::raised_by_template is set. Rendering is bounded by
// Limits, so hostile templates end in an error instead of hanging or exhausting memory.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "base/status.h"

namespace tessera::jinja {

struct Limits {
  size_t max_steps = 10'000'000;        // evaluated expressions and statements
  size_t max_depth = 256;               // nesting of expressions, statements and macro calls
  size_t max_output_bytes = 16u << 20;  // rendered text, and any single string value
  size_t max_items = 1u << 20;          // elements of any single list or dict
};

struct Program;

class Template {
 public:
  static Expected<Template> Parse(std::string_view source, const Limits& limits = {});

  // `context` must be a JSON object; its keys become template variables. ordered_json keeps the
  // key order of the caller's input, which `tojson` and `items` reproduce.
  Expected<std::string> Render(const nlohmann::ordered_json& context,
                               const Limits& limits = {}) const;
  // The same, and tells whether a failure came from the template's raise_exception().
  Expected<std::string> Render(const nlohmann::ordered_json& context, const Limits& limits,
                               bool* raised_by_template) const;

 private:
  std::shared_ptr<const Program> program_;
};

}  // namespace tessera::jinja
