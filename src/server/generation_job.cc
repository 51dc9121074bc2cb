#include "server/generation_job.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include "chat/tool_calls.h"
#include "runtime/text_stream.h"

namespace tessera::server {
namespace {

using ojson = nlohmann::ordered_json;

bool AnyStrict(const ojson& tools) {
  return std::any_of(tools.begin(), tools.end(), IsStrictTool);
}

// The shape the front end validated (an array of {"function": {"name": <string>, ...}}),
// checked again where the worker reads a job's tools: the schema builders below index them
// unchecked, and a frame does not carry the front end's guarantees by itself.
bool ToolsWellFormed(const ojson& tools) {
  return tools.is_array() && std::all_of(tools.begin(), tools.end(), [](const ojson& t) {
           if (!t.is_object()) return false;
           const auto fn = t.find("function");
           if (fn == t.end() || !fn->is_object()) return false;
           const auto name = fn->find("name");
           return name != fn->end() && name->is_string();
         });
}

bool IsJsonSyntax(ToolCallSyntax s) {
  return s == ToolCallSyntax::kHermes || s == ToolCallSyntax::kLlama3Json ||
         s == ToolCallSyntax::kGemmaJson;
}

// The object a call writes, {"name": <one of the functions>, "arguments": <its parameters>}
// ("parameters" for the Llama 3 form), as one JSON schema: the grammar then constrains both
// the name and the arguments.
const char* ArgumentsKey(ToolCallSyntax syntax) {
  return syntax == ToolCallSyntax::kLlama3Json ? "parameters" : "arguments";
}

// A function's parameter schema. None, or an empty schema: no parameters at all (a call's
// arguments are an object; the reply parser reads nothing else as a call).
ojson ParametersOf(const ojson& fn) {
  if (!fn.contains("parameters") || fn["parameters"].is_null() ||
      (fn["parameters"].is_object() && fn["parameters"].empty())) {
    return {{"type", "object"}, {"properties", ojson::object()}, {"additionalProperties", false}};
  }
  return fn["parameters"];
}

// Whether a parameter schema says its top is an object (a type or properties).
bool DeclaresObject(const ojson& params) {
  if (!params.is_object()) return false;
  if (params.contains("properties")) return true;
  const auto t = params.find("type");
  return t != params.end() && *t == "object";
}

// `schema` moved to `at` (a JSON pointer) of a larger document: its local references
// ("#/$defs/x", "#") point into it there. Values (enum, const, default, examples) are data.
ojson Rebased(const ojson& schema, const std::string& at) {
  if (schema.is_array()) {
    ojson out = ojson::array();
    for (const ojson& v : schema) out.push_back(Rebased(v, at));
    return out;
  }
  if (!schema.is_object()) return schema;
  ojson out = ojson::object();
  for (auto it = schema.begin(); it != schema.end(); ++it) {
    const std::string& k = it.key();
    if (k == "$ref" && it->is_string() && it->get<std::string>().starts_with("#")) {
      out[k] = "#" + at + it->get<std::string>().substr(1);
    } else if (k == "enum" || k == "const" || k == "default" || k == "examples") {
      out[k] = *it;
    } else {
      out[k] = Rebased(*it, at);
    }
  }
  return out;
}

// One call alternative: {"name": <a const, or an enum of several>, key: <arguments>}.
struct CallAlternative {
  ojson name;
  ojson arguments;
};

// The alternatives as one schema, each one's arguments rebased to where they land.
ojson CallSchema(const std::vector<CallAlternative>& alternatives, const char* key) {
  ojson out = ojson::array();
  for (size_t i = 0; i < alternatives.size(); ++i) {
    const std::string at =
        (alternatives.size() == 1 ? "" : "/anyOf/" + std::to_string(i)) + "/properties/" + key;
    ojson props = ojson::object();
    props["name"] = alternatives[i].name;
    props[key] = Rebased(alternatives[i].arguments, at);
    out.push_back({{"type", "object"},
                   {"properties", std::move(props)},
                   {"required", {"name", key}},
                   {"additionalProperties", false}});
  }
  if (out.size() == 1) return out[0];
  return {{"anyOf", std::move(out)}};
}

ojson ForcedCallSchema(const ojson& tools, const std::string& only, ToolCallSyntax syntax) {
  std::vector<CallAlternative> alternatives;
  for (const ojson& t : tools) {
    const ojson& fn = t["function"];
    const std::string name = fn["name"].get<std::string>();
    if (!only.empty() && name != only) continue;
    alternatives.push_back({{{"const", name}}, ParametersOf(fn)});
  }
  return CallSchema(alternatives, ArgumentsKey(syntax));
}

// The call a model opens under tool_choice auto with strict functions (JSON forms). A strict
// function's arguments follow its schema. Nothing promised a non-strict function's arguments
// a schema, so its schema guides them where it compiles and declares an object; where it does
// not (an unsupported keyword), or where the functions are more than one grammar follows at
// once, the non-strict functions share one alternative whose arguments are any JSON object.
// More strict functions than that limit, counting the shared alternative, are a 400.
Expected<ojson> AutoCallSchema(const ojson& tools, ToolCallSyntax syntax) {
  std::vector<CallAlternative> strict, guided;
  ojson free_names = ojson::array();
  for (const ojson& t : tools) {
    const ojson& fn = t["function"];
    const std::string name = fn["name"].get<std::string>();
    ojson params = ParametersOf(fn);
    if (IsStrictTool(t)) {
      strict.push_back({{{"const", name}}, std::move(params)});
    } else if (DeclaresObject(params) && CompileJsonSchema(params)) {
      guided.push_back({{{"const", name}}, std::move(params)});
    } else {
      free_names.push_back(name);
    }
  }
  const bool loose = !guided.empty() || !free_names.empty();
  if (strict.size() + (loose ? 1 : 0) > kMaxGrammarAlternatives) {
    return InvalidArgument("too many strict functions");
  }
  if (strict.size() + guided.size() + (free_names.empty() ? 0 : 1) > kMaxGrammarAlternatives) {
    for (const CallAlternative& g : guided) free_names.push_back(g.name["const"]);
    guided.clear();
  }
  std::vector<CallAlternative> alternatives = std::move(strict);
  for (CallAlternative& g : guided) alternatives.push_back(std::move(g));
  if (!free_names.empty()) {
    ojson name = free_names.size() == 1 ? ojson{{"const", free_names[0]}}
                                        : ojson{{"enum", std::move(free_names)}};
    alternatives.push_back({std::move(name), {{"type", "object"}}});
  }
  return CallSchema(alternatives, ArgumentsKey(syntax));
}

}  // namespace

// OpenAI-shaped messages for the template (chat/chat_template.h turns them into what
// templates expect).
Expected<ojson> TemplateMessages(const std::vector<ChatMessage>& messages) {
  ojson out = ojson::array();
  for (const ChatMessage& msg : messages) {
    ojson m = {{"role", msg.role}, {"content", msg.content}};
    if (!msg.tool_calls.empty()) {
      ojson calls = ojson::parse(msg.tool_calls, nullptr, false);
      if (calls.is_discarded()) return InvalidArgument("messages: tool_calls is not JSON");
      m["tool_calls"] = std::move(calls);
    }
    if (!msg.tool_call_id.empty()) m["tool_call_id"] = msg.tool_call_id;
    if (!msg.name.empty()) m["name"] = msg.name;
    out.push_back(std::move(m));
  }
  return out;
}

void FillSchedulerState(const Scheduler& sched, DoneMessage* done) {
  done->slots = sched.slots();
  done->slots_in_use = sched.running();
  done->sequences_waiting = sched.waiting();
  done->kv_blocks = sched.kv_pool().blocks();
  done->kv_blocks_free = sched.kv_pool().available();
  done->kv_blocks_cached = sched.kv_pool().cached();
}

struct GenerationJob::Choice {
  int index = 0;
  uint64_t sequence = 0;
  std::unique_ptr<TextStream> stream;
  std::optional<ToolCallParser> parser;
  std::optional<GrammarMatcher> matcher;
  std::vector<uint64_t> mask;
  std::vector<float> step_logits;  // the current step's raw row, for logprobs
  bool logprobs = false;
  int64_t generated = 0;
  bool stopped_by_string = false;
  bool grammar_done = false;  // the document is complete and nothing may follow
  // Strict tools under tool_choice auto: the grammar waits for the model to open a call
  // (lazy_trigger, the one token of "<tool_call>"), then constrains that call's object; the
  // reply ends with the call, closed by forced_closing_.
  int32_t lazy_trigger = -1;
  // Strict tools under tool_choice auto, for a call written as a bare JSON object at the start
  // of the reply (Llama 3, Gemma): the first token decides. It may open the call (the
  // grammar's first mask) or begin text (MarkTextOpeners); a call is then constrained to the
  // end, and text is text to the end, parsed for no call (none would follow the schemas).
  bool bare_call_opening = false;
  bool grammar_active = true;
  bool close_call = false;  // feed forced_closing_ to the parser at the end
  bool grammar_failed = false;
  bool tool_calls = false;
  bool finished = false;
  FinishReason finish_reason = FinishReason::kStop;
  SequenceResult result;
};

GenerationJob::~GenerationJob() = default;

std::variant<std::unique_ptr<GenerationJob>, JobFailure> GenerationJob::Start(
    const JobRequest& job, LoadedModel& model,
    const std::function<Expected<std::shared_ptr<const TokenVocabulary>>()>& vocabulary,
    double load_ms, SendFn send, EndFn on_end) {
  auto invalid = [](std::string field, std::string message) {
    return InvalidRequest(std::move(field), std::move(message));
  };
  // A call that may be any of more functions than a grammar follows at once (JSON forms; the
  // XML grammar refuses them itself).
  auto too_many = [](const char* advice) {
    return "tools: at most " + std::to_string(kMaxGrammarAlternatives) +
           " functions can be constrained at once; " + advice;
  };
  std::vector<int32_t> prompt_ids;
  int64_t shared_beginning = 0;  // SequenceRequest::keep_state_at
  std::shared_ptr<const Grammar> grammar;
  int32_t lazy_trigger = -1;
  bool bare_call_opening = false;
  ToolCallSyntax syntax = ToolCallSyntax::kNone;
  std::string forced_opening, forced_closing;
  if (job.kind == JobKind::kChat) {
    if (!model.has_chat_template()) {
      return invalid("", "the model '" + job.model +
                             "' has no chat template; use /v1/completions with a prompt");
    }
    auto messages = TemplateMessages(job.messages);
    if (!messages) return Refusal("messages", messages.status().message());
    ojson kwargs = ojson::object();
    ojson tools;
    if (!job.tools.empty() && job.tool_choice != "none") {
      tools = ojson::parse(job.tools, nullptr, false);
      if (tools.is_discarded()) return invalid("tools", "not JSON");
      if (!ToolsWellFormed(tools)) {
        return invalid("tools", "expected an array of {\"function\": {\"name\": <string>}}");
      }
      auto usable = model.ToolCallSyntaxForTools(job.model);
      if (!usable) return invalid("tools", usable.status().message());
      syntax = *usable;
      kwargs["tools"] = tools;
    }
    auto prompt = model.RenderChat(*messages, kwargs);
    if (!prompt) return invalid("messages", prompt.status().message());
    prompt_ids = std::move(prompt->ids);
    shared_beginning = model.SharedChatBeginning(*messages, kwargs, prompt_ids);
    if (syntax == ToolCallSyntax::kQwen3Xml && job.tool_choice != "auto") {
      // "required" or a named function, as Qwen3.5 writes calls: the reply starts as a call
      // (its name constrained to the functions' unless named) and its parameters are
      // constrained to their schemas.
      const bool named = job.tool_choice != "required";
      auto compiled =
          CompileXmlToolCalls(tools, named ? job.tool_choice : "",
                              named ? std::nullopt : std::optional<std::string_view>(""));
      if (!compiled) return Refusal("tools", compiled.status().message());
      grammar = *compiled;
      forced_opening = "<tool_call>\n<function=" + (named ? job.tool_choice + ">\n" : "");
      forced_closing = "\n</tool_call>";
      auto opening = model.EncodeText(forced_opening, /*add_special=*/false);
      if (!opening) return invalid("tools", opening.status().message());
      prompt_ids.insert(prompt_ids.end(), opening->begin(), opening->end());
    } else if (syntax != ToolCallSyntax::kNone && job.tool_choice != "auto") {
      // "required" or a named function: the reply starts as a call and its object is
      // constrained to the functions' schemas.
      if (!IsJsonSyntax(syntax)) {
        return invalid("tool_choice", "forced calls are not supported for the " +
                                          std::string(ToolCallSyntaxName(syntax)) +
                                          " tool-call format of '" + job.model + "'; use auto");
      }
      const std::string only = job.tool_choice == "required" ? "" : job.tool_choice;
      if (only.empty() && tools.size() > kMaxGrammarAlternatives) {
        return Refusal("tools", too_many("name one with tool_choice"));
      }
      auto compiled = CompileJsonSchema(ForcedCallSchema(tools, only, syntax));
      if (!compiled) return invalid("tools", compiled.status().message());
      grammar = *compiled;
      if (syntax == ToolCallSyntax::kHermes) {
        forced_opening = "<tool_call>\n";
        forced_closing = "\n</tool_call>";
      }
      auto opening = model.EncodeText(forced_opening, /*add_special=*/false);
      if (!opening) return invalid("tools", opening.status().message());
      prompt_ids.insert(prompt_ids.end(), opening->begin(), opening->end());
    } else if (syntax != ToolCallSyntax::kNone && AnyStrict(tools)) {
      // auto with strict functions: a call the model opens is constrained to the schemas.
      std::optional<int32_t> trigger = model.tokenizer().TokenToId("<tool_call>");
      const bool bare =
          syntax == ToolCallSyntax::kLlama3Json || syntax == ToolCallSyntax::kGemmaJson;
      const bool tagged = syntax == ToolCallSyntax::kHermes || syntax == ToolCallSyntax::kQwen3Xml;
      if (!bare && (!tagged || !trigger)) {
        return invalid("tools",
                       "strict functions with tool_choice auto are constrained only where a call "
                       "opens with the one token <tool_call> or is a bare JSON object; '" +
                           job.model + "' uses " + std::string(ToolCallSyntaxName(syntax)) +
                           " without that token: use strict false");
      }
      if (syntax == ToolCallSyntax::kQwen3Xml) {
        // After the <tool_call> token: "\n<function=NAME>\n" and the parameters.
        auto compiled =
            CompileXmlToolCalls(tools, "", std::optional<std::string_view>("\n<function="),
                                /*relax_non_strict=*/true);
        if (!compiled) return Refusal("tools", compiled.status().message());
        grammar = *compiled;
      } else {
        auto schema = AutoCallSchema(tools, syntax);
        if (!schema) return Refusal("tools", too_many("drop strict from some"));
        auto compiled = CompileJsonSchema(*schema);
        if (!compiled) return invalid("tools", compiled.status().message());
        grammar = *compiled;
      }
      if (bare) {
        bare_call_opening = true;
      } else {
        lazy_trigger = *trigger;
        forced_closing = "\n</tool_call>";
      }
    }
  } else {
    auto ids = model.EncodeText(job.prompt, /*add_special=*/true);
    if (!ids) return invalid("prompt", ids.status().message());
    prompt_ids = std::move(*ids);
  }
  if (!job.response_format.empty()) {
    const ojson format = ojson::parse(job.response_format, nullptr, false);
    if (format.is_discarded()) return invalid("response_format", "not JSON");
    auto compiled = CompileResponseFormat(format);
    if (!compiled) return invalid("response_format", compiled.status().message());
    grammar = *compiled;
  }
  if (prompt_ids.empty()) return invalid("prompt", "the prompt is empty");
  const int64_t context = model.context();
  const int64_t prompt_len = static_cast<int64_t>(prompt_ids.size());
  if (prompt_len >= context) {
    return JobFailure{JobErrorKind::kContextLength,
                      "the prompt is " + std::to_string(prompt_len) + " tokens but the model '" +
                          job.model + "' has a context of " + std::to_string(context) +
                          " tokens, which must also hold the reply; shorten the prompt",
                      prompt_len};
  }
  // logit_bias, checked against this model's vocabulary.
  std::vector<std::pair<int32_t, float>> bias;
  for (const auto& [id, b] : job.logit_bias) {
    if (id >= model.checkpoint().config.vocab_size) {
      return invalid("logit_bias", "token id " + std::to_string(id) +
                                       " is outside the vocabulary of '" + job.model + "' (0.." +
                                       std::to_string(model.checkpoint().config.vocab_size - 1) +
                                       ")");
    }
    bias.emplace_back(id, static_cast<float>(b));
  }
  std::shared_ptr<const TokenVocabulary> vocab;
  if (grammar) {
    auto v = vocabulary();
    if (!v) return JobFailure{JobErrorKind::kInternal, "structured output is unavailable"};
    vocab = *v;
  }

  // The first step of a reply that may open a bare JSON call also allows the tokens that
  // begin text: found once per job (a pass over the vocabulary), shared by its choices.
  std::shared_ptr<const std::vector<uint64_t>> text_openers;
  if (bare_call_opening && grammar) {
    auto words = std::make_shared<std::vector<uint64_t>>(vocab->mask_words(), 0);
    vocab->MarkTextOpeners('{', *words);
    text_openers = std::move(words);
  }

  std::unique_ptr<GenerationJob> self(new GenerationJob());
  GenerationJob* g = self.get();
  g->job_id_ = job.job_id;
  g->model_ = &model;
  g->prompt_tokens_ = prompt_len;
  g->load_ms_ = load_ms;
  g->forced_closing_ = forced_closing;
  g->send_ = std::move(send);
  g->on_end_ = std::move(on_end);
  // Qwen3.5's XML calls write parameters as text: their declared types decide how it reads.
  ToolParameterTypes xml_types;
  if (syntax == ToolCallSyntax::kQwen3Xml) xml_types = ParameterTypesOfTools(job.tools);
  std::optional<ResolvedSamplingParams> first_sampling;
  for (int i = 0; i < job.n; ++i) {
    // Choices differ by seed: a given seed s makes choice i use s + i.
    SamplingParams params = job.sampling;
    if (params.seed && i > 0) {
      params.seed = *params.seed + i <= kMaxSamplingSeed ? *params.seed + i : i;
    }
    auto sampling = ResolveSamplingParams(params, model.sampling_defaults());
    if (!sampling) return Refusal("", sampling.status().message());
    // A drawn seed is reported so the user can replay it; keep it below 2^53 so that every
    // JSON client (JavaScript numbers are doubles) can send it back exactly.
    if (sampling->seed_was_generated) sampling->seed &= (uint64_t{1} << 53) - 1;
    if (!first_sampling) first_sampling = *sampling;

    auto c = std::make_unique<Choice>();
    Choice* cp = c.get();
    c->index = i;
    c->logprobs = job.logprobs;
    TextStreamOptions stream_options;
    stream_options.stop = job.stop;
    stream_options.logprobs = job.logprobs;
    stream_options.top_logprobs = job.top_logprobs;
    c->stream = std::make_unique<TextStream>(model.tokenizer(), prompt_ids, stream_options,
                                             model.stop_ids());
    if (syntax != ToolCallSyntax::kNone) {
      ToolCallParserOptions parser_options;
      parser_options.seed = sampling->seed * 31 + static_cast<uint64_t>(i);
      if (syntax == ToolCallSyntax::kQwen3Xml) parser_options.xml_parameter_types = xml_types;
      c->parser.emplace(syntax, parser_options);
      if (!forced_opening.empty()) (void)c->parser->Feed(forced_opening);
    }
    if (grammar) {
      c->matcher.emplace(grammar, vocab);
      c->mask.assign(vocab->mask_words(), 0);
      c->lazy_trigger = lazy_trigger;
      c->bare_call_opening = bare_call_opening;
      c->grammar_active = lazy_trigger < 0;
      c->close_call = !forced_opening.empty();
    }
    SequenceRequest req;
    req.prompt_ids = prompt_ids;
    req.keep_state_at = shared_beginning;
    const int64_t room = context - prompt_len;
    req.max_new_tokens = job.max_tokens < 0 ? room : std::min(job.max_tokens, room);
    req.stop_ids = model.stop_ids();
    req.sampling = *sampling;
    if (job.logprobs) {
      req.on_logits = [cp](std::span<const float> logits) {
        cp->step_logits.assign(logits.begin(), logits.end());
      };
    }
    if (grammar || !bias.empty()) {
      req.constrain = [cp, bias, text_openers,
                       size = vocab ? vocab->size() : 0](std::span<float> logits) {
        for (const auto& [id, b] : bias) logits[static_cast<size_t>(id)] += b;
        if (!cp->matcher || !cp->grammar_active) return;
        cp->matcher->FillMask(cp->mask);
        if (cp->bare_call_opening) {
          for (size_t w = 0; w < cp->mask.size(); ++w) cp->mask[w] |= (*text_openers)[w];
        }
        const float off = -std::numeric_limits<float>::infinity();
        for (size_t id = 0; id < logits.size(); ++id) {
          const bool allowed =
              static_cast<int64_t>(id) < size && ((cp->mask[id / 64] >> (id % 64)) & 1) != 0;
          if (!allowed) logits[id] = off;
        }
      };
    }
    // The other choices share choice 0's prompt: it runs once (Scheduler's share_prompt_with).
    if (i > 0) req.share_prompt_with = g->choices_.front()->sequence;
    req.on_token = [g, cp](int32_t id) { return g->OnToken(*cp, id); };
    req.on_finish = [g, cp](const SequenceResult& r) { g->OnFinish(*cp, r); };
    g->choices_.push_back(std::move(c));
    auto id = model.scheduler().Submit(std::move(req));
    if (!id) {
      g->choices_.pop_back();
      if (i == 0) return Refusal("", id.status().message());
      // Later choices are validated like the first, so this does not happen; if it did, the
      // job fails and lives until the choices already running have ended.
      g->failed_ = true;
      g->send_(
          Encode(JobErrorMessage{job.job_id, JobErrorKind::kInternal, id.status().message(), 0}));
      g->Cancel();
      return self;
    }
    cp->sequence = *id;
  }
  g->send_(Encode(StartedMessage{job.job_id, prompt_len, *first_sampling}));
  return self;
}

void GenerationJob::Cancel() {
  for (const auto& c : choices_) {
    if (!c->finished) model_->scheduler().Cancel(c->sequence);
  }
}

// Text (and tool calls, through the parser) of one choice as Delta frames; `at_end` flushes
// what the parser held back.
void GenerationJob::SendEvents(Choice& c, std::string text, std::vector<TokenLogprobEntry> logprobs,
                               bool at_end) {
  DeltaMessage delta;
  delta.job_id = job_id_;
  delta.choice = c.index;
  delta.logprobs = std::move(logprobs);
  int64_t total = 0;
  for (const auto& other : choices_) total += other->generated;
  delta.completion_tokens = total;
  if (!c.parser) {
    delta.text = std::move(text);
  } else {
    ToolCallEvents events = c.parser->Feed(text);
    if (at_end) {
      ToolCallEvents tail = c.parser->Feed(c.close_call ? forced_closing_ : std::string());
      events.insert(events.end(), tail.begin(), tail.end());
      tail = c.parser->Finish();
      events.insert(events.end(), tail.begin(), tail.end());
    }
    for (ToolCallEvent& e : events) {
      if (e.kind == ToolCallEvent::Kind::kContent) {
        delta.text += e.content;
      } else {
        c.tool_calls = true;
        delta.tool_calls.push_back({static_cast<int32_t>(e.call.index), std::move(e.call.id),
                                    std::move(e.call.name), std::move(e.call.arguments)});
      }
    }
  }
  send_(Encode(delta));
}

bool GenerationJob::OnToken(Choice& c, int32_t id) {
  ++c.generated;
  if (c.matcher && c.bare_call_opening) {
    // The first token of a reply that may be a bare JSON call: one the grammar takes opens the
    // call; any other begins text, in which no call is parsed.
    c.bare_call_opening = false;
    if (c.matcher->Accept(id).ok()) {
      c.grammar_done = c.matcher->IsComplete() && !c.matcher->CanContinue();
    } else {
      c.grammar_active = false;
      c.matcher.reset();
      c.parser.emplace(ToolCallSyntax::kNone, ToolCallParserOptions{});
    }
  } else if (c.matcher && !c.grammar_active) {
    // A lazy grammar starts after the token that opens a call.
    c.grammar_active = id == c.lazy_trigger;
  } else if (c.matcher) {
    if (!c.matcher->Accept(id).ok()) c.grammar_failed = true;  // cannot happen under the mask
    c.grammar_done = c.matcher->IsComplete() && !c.matcher->CanContinue();
    if (c.grammar_done && c.lazy_trigger >= 0) c.close_call = true;
  }
  TokenDelta d = c.stream->Push(id, c.step_logits);
  std::vector<TokenLogprobEntry> logprobs;
  if (d.logprob) {
    TokenLogprobEntry entry;
    entry.token = std::move(d.logprob->token);
    entry.logprob = d.logprob->logprob;
    for (auto& [text, lp] : d.logprob->top) entry.top.push_back({std::move(text), lp});
    logprobs.push_back(std::move(entry));
  }
  // Sent for every token, also one whose text is held back (a possible stop string): the
  // count lets an error after it still report the usage so far.
  SendEvents(c, std::move(d.text), std::move(logprobs), false);
  c.stopped_by_string = d.stopped;
  return !d.stopped && !c.grammar_done && !c.grammar_failed;
}

void GenerationJob::OnFinish(Choice& c, const SequenceResult& r) {
  c.result = r;
  c.finished = true;
  ++finished_;
  if (!r.status.ok() && !failed_) {
    failed_ = true;
    std::fprintf(stderr, "tessera worker: generation failed: %s\n", r.status.message().c_str());
    send_(Encode(JobErrorMessage{job_id_, EngineFailureKind(r.status.code()),
                                 r.status.code() == ErrorCode::kResourceExhausted
                                     ? EngineFailureMessage(r.status.message(), r.status.code())
                                     : "generation failed inside the engine",
                                 0}));
    Cancel();
  }
  const bool ended_by_us = c.stopped_by_string || c.grammar_done;
  const bool cancelled = r.stop_reason == StopReason::kCancelled && !ended_by_us;
  if (!failed_ && !c.stopped_by_string && !cancelled) SendEvents(c, c.stream->Finish(), {}, true);
  if (cancelled) {
    c.finish_reason = FinishReason::kCancelled;
  } else if (c.tool_calls) {
    c.finish_reason = FinishReason::kToolCalls;
  } else if (ended_by_us || r.stop_reason == StopReason::kStopToken) {
    c.finish_reason = FinishReason::kStop;
  } else {
    c.finish_reason = FinishReason::kLength;
  }
  if (finished_ < static_cast<int>(choices_.size())) return;
  if (!failed_) {
    const Choice& first = *choices_.front();
    DoneMessage done;
    done.job_id = job_id_;
    done.finish_reason = first.finish_reason;
    done.prompt_tokens = prompt_tokens_;
    for (const auto& ch : choices_) {
      done.completion_tokens += static_cast<int64_t>(ch->result.generated_ids.size());
      if (choices_.size() > 1) done.choice_finish_reasons.push_back(ch->finish_reason);
    }
    done.cached_tokens = first.result.cached_tokens;
    done.queue_ms = first.result.queue_ms;
    done.load_ms = load_ms_;
    const GenerateTimings& t = first.result.timings;
    done.prefill_ms = t.prefill_ms;
    done.ttft_ms = t.ttft_ms;
    done.decode_ms = t.decode_ms;
    done.prefill_tok_s = t.prefill_tok_s;
    done.decode_tok_s = t.decode_tok_s;
    FillSchedulerState(model_->scheduler(), &done);
    send_(Encode(done));
  }
  on_end_(job_id_);  // the worker deletes this job: nothing may touch it after
}

}  // namespace tessera::server
