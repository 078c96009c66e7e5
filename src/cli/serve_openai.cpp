// The OpenAI-compatible API of `cujax serve`: requests, replies, the chat template.
#include "cli/serve_openai.h"

#include <algorithm>
#include <ctime>
#include <limits>
#include <random>

namespace cujax::cli::openai {

namespace {

using Kind = json::Value::Kind;

ApiError bad(const std::string& param, const std::string& message) {
  return ApiError{400, "'" + param + "' " + message, param};
}

// Fields that change nothing here unless they hold something other than their neutral value.
bool neutral(const json::Value& x, std::initializer_list<json::Value> values) {
  if (x.is_null()) return true;
  for (const json::Value& v : values) {
    if (v.kind() == Kind::Int && x.is_number() && x.as_double() == static_cast<double>(v.as_int()))
      return true;
    if (v.kind() == Kind::Bool && x.kind() == Kind::Bool && x.as_bool() == v.as_bool()) return true;
    if (v.kind() == Kind::String && x.is_string() && x.as_string() == v.as_string()) return true;
    if (v.kind() == Kind::Array && x.is_array() && x.as_array().empty()) return true;
    if (v.kind() == Kind::Object && x.is_object() && x.as_object().empty()) return true;
  }
  return false;
}

int64_t integer(const json::Value& x, const std::string& name, int64_t lo, int64_t hi) {
  if (x.kind() != Kind::Int) throw bad(name, "must be an integer");
  const int64_t v = x.as_int();
  if (v < lo || v > hi)
    throw bad(name, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                        std::to_string(v));
  return v;
}

std::mt19937_64& rng() {
  thread_local std::mt19937_64 g{std::random_device{}()};
  return g;
}

std::vector<int32_t> text_tokens(const std::string& text, const std::string& param,
                                 const Limits& limits) {
  if (text.empty()) throw bad(param, "must not be empty");
  if (!valid_utf8(text)) throw bad(param, "is not valid UTF-8");
  std::vector<int32_t> tokens;
  for (unsigned char c : text) {
    // The byte tokenizer: bytes 0..255, which a model with a smaller vocabulary cannot take.
    if (c >= limits.vocab_size)
      throw bad(param, "holds the byte " + std::to_string(c) + ", outside the model's " +
                           std::to_string(limits.vocab_size) + "-token vocabulary");
    tokens.push_back(c);
  }
  return tokens;
}

std::vector<int32_t> token_array(const json::Value::Array& a, const Limits& limits) {
  if (a.empty()) throw bad("prompt", "must not hold an empty token array");
  std::vector<int32_t> tokens;
  for (const json::Value& t : a)
    tokens.push_back(static_cast<int32_t>(integer(t, "prompt", 0, limits.vocab_size - 1)));
  return tokens;
}

// "prompt": a string, a list of strings, a token array, or a list of token arrays.
std::vector<std::vector<int32_t>> prompts_of(const json::Value& p, const Limits& limits) {
  if (p.is_string()) return {text_tokens(p.as_string(), "prompt", limits)};
  if (!p.is_array() || p.as_array().empty())
    throw bad("prompt", "must be a string, a list of strings, a token array or a list of them");
  const json::Value::Array& a = p.as_array();
  if (a[0].kind() == Kind::Int) return {token_array(a, limits)};
  std::vector<std::vector<int32_t>> out;
  for (const json::Value& x : a) {
    if (x.is_string() && a[0].is_string())
      out.push_back(text_tokens(x.as_string(), "prompt", limits));
    else if (x.is_array() && a[0].is_array())
      out.push_back(token_array(x.as_array(), limits));
    else
      throw bad("prompt", "mixes strings, integers and arrays");
  }
  return out;
}

std::vector<std::string> stop_of(const json::Value& s) {
  if (s.is_null()) return {};
  std::vector<std::string> out;
  if (s.is_string()) {
    out.push_back(s.as_string());
  } else if (s.is_array()) {
    for (const json::Value& x : s.as_array()) {
      if (!x.is_string()) throw bad("stop", "must be a string or a list of strings");
      out.push_back(x.as_string());
    }
  } else {
    throw bad("stop", "must be a string or a list of strings");
  }
  if (out.size() > 16) throw bad("stop", "has more than 16 sequences");
  for (const std::string& x : out)
    if (x.empty()) throw bad("stop", "must not hold an empty string");
  return out;
}

std::string content_of(const json::Value& c, size_t i) {
  const std::string param = "messages[" + std::to_string(i) + "].content";
  if (c.is_string()) return c.as_string();
  if (!c.is_array()) throw bad(param, "must be a string or a list of text parts");
  std::string text;
  for (const json::Value& part : c.as_array()) {
    const json::Value* type = part.is_object() ? part.get("type") : nullptr;
    const json::Value* t = part.is_object() ? part.get("text") : nullptr;
    if (!type || !type->is_string() || type->as_string() != "text" || !t || !t->is_string())
      throw bad(param, "parts must be {\"type\": \"text\", \"text\": ...}: this model reads text");
    text += t->as_string();
  }
  return text;
}

}  // namespace

std::string error_body(const ApiError& e) {
  json::Value err = json::Value::object();
  err.set("message", e.message);
  err.set("type", e.type);
  err.set("param", e.param.empty() ? json::Value() : json::Value(e.param));
  err.set("code", e.code.empty() ? json::Value() : json::Value(e.code));
  json::Value out = json::Value::object();
  out.set("error", std::move(err));
  return json::dump(out);
}

std::string chat_prompt(const json::Value& messages) {
  if (!messages.is_array() || messages.as_array().empty())
    throw bad("messages", "must be a non-empty list of {\"role\", \"content\"} objects");
  std::string prompt;
  const json::Value::Array& list = messages.as_array();
  for (size_t i = 0; i < list.size(); ++i) {
    const json::Value& m = list[i];
    const std::string at = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) throw bad(at, "must be an object");
    std::string role, content;
    bool have_content = false;
    for (const auto& [key, x] : m.as_object()) {
      if (key == "role") {
        if (!x.is_string()) throw bad(at + ".role", "must be a string");
        role = x.as_string();
      } else if (key == "content") {
        content = content_of(x, i);
        have_content = true;
      } else if (key == "name") {
        if (!x.is_string()) throw bad(at + ".name", "must be a string");
      } else {
        throw bad(at + "." + key, "is not supported (this server has no tools)");
      }
    }
    if (role == "developer") role = "system";  // OpenAI's newer name for it
    if (role != "system" && role != "user" && role != "assistant")
      throw bad(
          at + ".role",
          "must be \"system\", \"developer\", \"user\" or \"assistant\", got \"" + role + "\"");
    if (!have_content) throw bad(at + ".content", "is required");
    prompt += "<|im_start|>" + role + "\n" + content + std::string(kChatEnd) + "\n";
  }
  return prompt + "<|im_start|>assistant\n";
}

Completion parse_completion(std::string_view body, bool chat, const Limits& limits) {
  json::Value v;
  try {
    v = json::parse(body, "request body");
  } catch (const std::exception& e) {
    throw ApiError{400, std::string("malformed JSON: ") + e.what()};
  }
  if (!v.is_object()) throw ApiError{400, "the body must be a JSON object"};
  Completion c;
  c.chat = chat;
  const json::Value *model = nullptr, *prompt = nullptr, *max_tokens = nullptr,
                    *stream_options = nullptr, *seed = nullptr;
  std::string max_tokens_name;
  for (const auto& [key, x] : v.as_object()) {
    const auto unsupported =
        [&, &key = key](const std::string& why) {  // clang < 16: no binding captures
          return bad(key, "is not supported by cujax serve" + why);
        };
    if (key == "model") {
      model = &x;
    } else if (key == (chat ? "messages" : "prompt")) {
      prompt = &x;
    } else if (key == "max_tokens" || (chat && key == "max_completion_tokens")) {
      if (max_tokens && !max_tokens->is_null() && !x.is_null())
        throw bad(key, "and 'max_tokens' are the same limit: give one of them");
      if (!x.is_null()) {
        max_tokens = &x;
        max_tokens_name = key;
      }
    } else if (key == "temperature") {
      if (x.is_null()) continue;
      if (!x.is_number()) throw bad(key, "must be a number");
      c.temperature = x.as_double();
      if (!(c.temperature >= 0 && c.temperature <= 2)) throw bad(key, "must be in [0, 2]");
    } else if (key == "top_p") {
      if (x.is_null()) continue;
      if (!x.is_number() || !(x.as_double() > 0 && x.as_double() <= 1))
        throw bad(key, "must be a number in (0, 1]");
      c.top_p = x.as_double();
    } else if (key == "top_k") {  // an extension, as vLLM's: -1 or 0 keep every token
      if (!x.is_null()) c.top_k = std::max<int64_t>(0, integer(x, key, -1, limits.vocab_size));
    } else if (key == "n" || (!chat && key == "best_of")) {
      if (!neutral(x, {1}))
        throw unsupported(": each request gives one choice per prompt, so n = 1");
    } else if (key == "stop") {
      c.stop = stop_of(x);
    } else if (key == "seed") {
      seed = &x;
    } else if (key == "stream") {
      if (x.is_null()) continue;
      if (x.kind() != Kind::Bool) throw bad(key, "must be a boolean");
      c.stream = x.as_bool();
    } else if (key == "stream_options") {
      if (!x.is_null()) stream_options = &x;
    } else if (!chat && key == "echo") {
      if (!x.is_null() && x.kind() != Kind::Bool) throw bad(key, "must be a boolean");
      c.echo = !x.is_null() && x.as_bool();
    } else if (key == "presence_penalty" || key == "frequency_penalty") {
      if (!x.is_null() && !x.is_number()) throw bad(key, "must be a number");
      if (!neutral(x, {0})) throw unsupported(" other than 0");
    } else if (key == "logit_bias") {
      if (!neutral(x, {json::Value::object()})) throw unsupported(" other than {}");
    } else if (key == "logprobs") {
      if (!neutral(x, {false})) throw unsupported(": log-probabilities are not returned");
    } else if (chat && key == "top_logprobs") {
      if (!neutral(x, {0})) throw unsupported(": log-probabilities are not returned");
    } else if (!chat && key == "suffix") {
      if (!neutral(x, {""})) throw unsupported(": there is no insertion mode");
    } else if (chat && (key == "tools" || key == "functions")) {
      if (!neutral(x, {json::Value::Array{}})) throw unsupported(": this server has no tools");
    } else if (chat && (key == "tool_choice" || key == "function_call")) {
      if (!neutral(x, {"none", "auto"})) throw unsupported(": this server has no tools");
    } else if (chat && key == "response_format") {
      const json::Value* type = x.is_object() ? x.get("type") : nullptr;
      if (!x.is_null() && !(type && type->is_string() && type->as_string() == "text"))
        throw unsupported(" other than {\"type\": \"text\"}");
    } else if (key == "user" || key == "metadata" || key == "store" || key == "service_tier" ||
               (chat && key == "parallel_tool_calls")) {
      // Bookkeeping for OpenAI's platform; the output is the same without it.
    } else {
      throw ApiError{400, "unrecognized request argument '" + key + "'", key};
    }
  }

  if (!model) throw bad("model", "is required (GET /v1/models lists it)");
  if (!model->is_string()) throw bad("model", "must be a string");
  if (model->as_string() != limits.model_id)
    throw ApiError{404,
                   "the model '" + model->as_string() + "' does not exist; this server serves '" +
                       limits.model_id + "'",
                   "model", "model_not_found"};
  if (!prompt) throw bad(chat ? "messages" : "prompt", "is required");
  if (chat) {
    c.prompts = {text_tokens(chat_prompt(*prompt), "messages", limits)};
    c.stop.emplace_back(kChatEnd);
  } else {
    c.prompts = prompts_of(*prompt, limits);
  }
  if (static_cast<int64_t>(c.prompts.size()) > limits.max_prompts)
    throw bad("prompt", "holds " + std::to_string(c.prompts.size()) +
                            " prompts; this server takes at most " +
                            std::to_string(limits.max_prompts) +
                            " in one request (--max-batch plus --max-queue)");
  int64_t longest = 0;
  for (const auto& p : c.prompts) longest = std::max<int64_t>(longest, p.size());
  const std::string param = chat ? "messages" : "prompt";
  if (longest >= limits.max_seq)
    throw ApiError{400,
                   "this model's context is " + std::to_string(limits.max_seq) +
                       " tokens, and the prompt has " + std::to_string(longest) +
                       " (a byte each; the prompt needs at least one token of room)",
                   param, "context_length_exceeded"};
  const int64_t room = limits.max_seq - longest;
  if (max_tokens) {
    const std::string& name = max_tokens_name;
    c.max_tokens = integer(*max_tokens, name, 1, std::numeric_limits<int32_t>::max());
    if (c.max_tokens > room)
      throw ApiError{400,
                     "this model's context is " + std::to_string(limits.max_seq) +
                         " tokens; the prompt has " + std::to_string(longest) + " and '" + name +
                         "' asks for " + std::to_string(c.max_tokens) + " more",
                     name, "context_length_exceeded"};
  } else {
    // OpenAI's defaults: 16 for completions, the rest of the context for chat.
    c.max_tokens = chat ? room : std::min<int64_t>(16, room);
  }
  if (seed && !seed->is_null())
    c.seed = integer(*seed, "seed", 0, std::numeric_limits<int32_t>::max());
  else
    c.seed = static_cast<int64_t>(rng()() % (uint64_t{1} << 31));
  if (stream_options) {
    if (!c.stream) throw bad("stream_options", "is only allowed when 'stream' is true");
    if (!stream_options->is_object()) throw bad("stream_options", "must be an object");
    for (const auto& [key, x] : stream_options->as_object()) {
      if (key != "include_usage" || (!x.is_null() && x.kind() != Kind::Bool))
        throw bad("stream_options", "takes only \"include_usage\": a boolean");
      c.include_usage = !x.is_null() && x.as_bool();
    }
  }
  return c;
}

namespace {

// The well-formed UTF-8 sequence at s[i]: its length (1..4), or -k when only its first k bytes
// could begin one (the maximal ill-formed subpart); `truncated` when s ended inside it.
int sequence_at(std::string_view s, size_t i, bool& truncated) {
  truncated = false;
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return 1;
  int n;
  unsigned char lo = 0x80, hi = 0xbf;  // the second byte's range (Unicode's table 3-7)
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0) lo = 0xa0;
    if (c == 0xed) hi = 0x9f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0) lo = 0x90;
    if (c == 0xf4) hi = 0x8f;
  } else {
    return -1;
  }
  for (int k = 1; k < n; ++k) {
    if (i + k >= s.size()) {
      truncated = true;
      return -k;
    }
    const auto x = static_cast<unsigned char>(s[i + k]);
    if (x < lo || x > hi) return -k;
    lo = 0x80;
    hi = 0xbf;
  }
  return n;
}

// Decodes bytes with U+FFFD for ill-formed subparts; unless `final`, stops before a character
// that the next bytes may still complete. `used`: the bytes decoded.
std::string decode(std::string_view s, bool final, size_t& used) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    bool truncated;
    const int n = sequence_at(s, i, truncated);
    if (n > 0) {
      out.append(s.substr(i, static_cast<size_t>(n)));
      i += static_cast<size_t>(n);
    } else if (truncated && !final) {
      break;
    } else {
      out += "\xef\xbf\xbd";
      i += static_cast<size_t>(-n);
    }
  }
  used = i;
  return out;
}

}  // namespace

std::string to_text(std::string_view bytes) {
  size_t used;
  return decode(bytes, true, used);
}

bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    bool truncated;
    const int n = sequence_at(s, i, truncated);
    if (n < 0) return false;
    i += static_cast<size_t>(n);
  }
  return true;
}

bool TextStream::push(int32_t token) {
  if (stopped()) return false;
  bytes_.push_back(static_cast<char>(token));
  // A stop sequence completes with the byte just added, so only matches ending here are new.
  for (const std::string& s : stop_)
    if (bytes_.size() >= s.size() && bytes_.compare(bytes_.size() - s.size(), s.size(), s) == 0)
      end_ = std::min(end_, bytes_.size() - s.size());
  return !stopped();
}

std::string TextStream::take(bool final) {
  size_t limit = stopped() ? end_ : bytes_.size();
  final = final || stopped();
  if (!final) {
    // Hold back the longest tail that may be the start of a stop sequence.
    size_t hold = 0;
    for (const std::string& s : stop_)
      for (size_t k = std::min(s.size() - 1, limit - sent_); k > hold; --k)
        if (bytes_.compare(limit - k, k, s, 0, k) == 0) {
          hold = k;
          break;
        }
    limit -= hold;
  }
  size_t used;
  std::string text = decode(std::string_view(bytes_).substr(sent_, limit - sent_), final, used);
  sent_ += used;
  return text;
}

Reply::Reply(bool chat_, std::string model_) : chat(chat_), model(std::move(model_)) {
  static constexpr char kHex[] = "0123456789abcdef";
  id = chat ? "chatcmpl-" : "cmpl-";
  for (int i = 0; i < 24; ++i) id += kHex[rng()() % 16];
  created = static_cast<int64_t>(std::time(nullptr));
}

namespace {

json::Value usage(int64_t prompt_tokens, int64_t completion_tokens) {
  json::Value u = json::Value::object();
  u.set("prompt_tokens", prompt_tokens);
  u.set("completion_tokens", completion_tokens);
  u.set("total_tokens", prompt_tokens + completion_tokens);
  return u;
}

json::Value head(const Reply& r, const std::string& object) {
  json::Value out = json::Value::object();
  out.set("id", r.id);
  out.set("object", object);
  out.set("created", r.created);
  out.set("model", r.model);
  return out;
}

}  // namespace

std::string Reply::full(const std::vector<Choice>& choices, int64_t prompt_tokens,
                        int64_t completion_tokens) const {
  json::Value out = head(*this, chat ? "chat.completion" : "text_completion");
  json::Value list = json::Value::Array{};
  for (size_t i = 0; i < choices.size(); ++i) {
    json::Value c = json::Value::object();
    c.set("index", static_cast<int64_t>(i));
    if (chat) {
      json::Value m = json::Value::object();
      m.set("role", "assistant");
      m.set("content", choices[i].text);
      c.set("message", std::move(m));
    } else {
      c.set("text", choices[i].text);
    }
    c.set("logprobs", json::Value());
    c.set("finish_reason", choices[i].finish_reason);
    list.push_back(std::move(c));
  }
  out.set("choices", std::move(list));
  out.set("usage", usage(prompt_tokens, completion_tokens));
  return json::dump(out);
}

std::string Reply::chunk(int64_t index, const std::string& text, const std::string& finish_reason,
                         bool first) const {
  json::Value out = head(*this, chat ? "chat.completion.chunk" : "text_completion");
  json::Value c = json::Value::object();
  c.set("index", index);
  if (chat) {
    json::Value delta = json::Value::object();
    if (first) delta.set("role", "assistant");
    if (first || !text.empty()) delta.set("content", text);
    c.set("delta", std::move(delta));
  } else {
    c.set("text", text);
  }
  c.set("logprobs", json::Value());
  c.set("finish_reason", finish_reason.empty() ? json::Value() : json::Value(finish_reason));
  out.set("choices", json::Value::Array{std::move(c)});
  return json::dump(out);
}

std::string Reply::usage_chunk(int64_t prompt_tokens, int64_t completion_tokens) const {
  json::Value out = head(*this, chat ? "chat.completion.chunk" : "text_completion");
  out.set("choices", json::Value::Array{});
  out.set("usage", usage(prompt_tokens, completion_tokens));
  return json::dump(out);
}

std::string models_list(const Limits& limits, int64_t created) {
  json::Value m = json::Value::object();
  m.set("id", limits.model_id);
  m.set("object", "model");
  m.set("created", created);
  m.set("owned_by", "cujax");
  m.set("max_model_len", limits.max_seq);
  json::Value out = json::Value::object();
  out.set("object", "list");
  out.set("data", json::Value::Array{std::move(m)});
  return json::dump(out);
}

}  // namespace cujax::cli::openai
