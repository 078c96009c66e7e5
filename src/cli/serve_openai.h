// The OpenAI-compatible API of `cujax serve` (docs/serving.md): the requests of
// POST /v1/completions and /v1/chat/completions checked and turned into byte prompts and
// sampling options, the chat template, the replies and stream chunks, and OpenAI's error object.
// The HTTP handlers that run them on the engine are in serve_http.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cujax/core/json.h"

namespace cujax::cli::openai {

// An error reply: {"error": {"message", "type", "param", "code"}} with the HTTP status.
struct ApiError {
  ApiError() = default;
  ApiError(int status_, std::string message_, std::string param_ = "", std::string code_ = "")
      : status(status_),
        message(std::move(message_)),
        param(std::move(param_)),
        code(std::move(code_)) {}
  int status = 400;
  std::string message;
  std::string param;  // the request field at fault; "" is null
  std::string code;   // "" is null
  std::string type = "invalid_request_error";
};
std::string error_body(const ApiError& e);

// ChatML with the roles' names, for the byte-level models cujax trains: each message is
// "<|im_start|>ROLE\nCONTENT<|im_end|>\n", then "<|im_start|>assistant\n" opens the reply,
// which ends at kChatEnd (an implicit stop sequence of every chat request).
inline constexpr std::string_view kChatEnd = "<|im_end|>";

struct Limits {
  std::string model_id;  // what "model" must name
  int64_t max_seq = 0;   // prompt + generated tokens
  int64_t vocab_size = 0;
  int64_t max_prompts = 1;  // choices in one request
};

// One request, checked: a prompt per choice and the sampling options they share.
struct Completion {
  bool chat = false;
  std::vector<std::vector<int32_t>> prompts;  // tokens (bytes), one choice each
  int64_t max_tokens = 16;
  double temperature = 1.0;
  int64_t top_k = 0;
  double top_p = 1.0;
  int64_t seed = 0;
  std::vector<std::string> stop;  // byte strings; chat adds kChatEnd
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool echo = false;           // completions: the prompt before the text
};

// Parses the body of /v1/completions (chat false) or /v1/chat/completions; throws ApiError.
// An absent seed is drawn at random, as OpenAI samples without one.
Completion parse_completion(std::string_view body, bool chat, const Limits& limits);

// The chat template above applied to a "messages" array; throws ApiError.
std::string chat_prompt(const json::Value& messages);

// Bytes as JSON-safe text: each maximal ill-formed UTF-8 subsequence becomes one U+FFFD, as
// Python's bytes.decode(errors="replace") and browsers do.
std::string to_text(std::string_view bytes);
bool valid_utf8(std::string_view s);

// The text of one choice as its tokens arrive. A stop sequence ends it (the text stops before
// it), and text is handed out only once it can no longer change: never a partial UTF-8
// character or a partial stop sequence, so the streamed pieces add up to the whole reply.
class TextStream {
 public:
  explicit TextStream(std::vector<std::string> stop) : stop_(std::move(stop)) {}
  // Appends a token's byte; false once a stop sequence is complete.
  bool push(int32_t token);
  bool stopped() const { return end_ != std::string::npos; }
  // The text ready since the last take; `final`: all that is left.
  std::string take(bool final);

 private:
  std::vector<std::string> stop_;
  std::string bytes_;
  size_t sent_ = 0;
  size_t end_ = std::string::npos;  // where a stop sequence begins
};

// The object types and id prefix of a reply: "text_completion" / "cmpl-", or
// "chat.completion" ("chat.completion.chunk" when streamed) / "chatcmpl-".
struct Reply {
  bool chat = false;
  std::string id;  // e.g. "cmpl-" + 24 hex digits
  int64_t created = 0;
  std::string model;
  Reply(bool chat, std::string model);

  struct Choice {
    std::string text;
    std::string finish_reason;  // "stop" or "length"
  };
  // The whole reply of a non-streamed request.
  std::string full(const std::vector<Choice>& choices, int64_t prompt_tokens,
                   int64_t completion_tokens) const;
  // One stream chunk of choice `index`: text (chat: a content delta; `first` adds the
  // assistant role) and the finish reason, "" while it goes on.
  std::string chunk(int64_t index, const std::string& text, const std::string& finish_reason,
                    bool first) const;
  // The last chunk when stream_options.include_usage: no choices, the usage.
  std::string usage_chunk(int64_t prompt_tokens, int64_t completion_tokens) const;
};

// GET /v1/models.
std::string models_list(const Limits& limits, int64_t created);

}  // namespace cujax::cli::openai
