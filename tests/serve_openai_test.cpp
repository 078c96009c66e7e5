// The OpenAI layer of `cujax serve` without a server: request checks and defaults, the chat
// template, UTF-8 replacement as Python's bytes.decode(errors="replace") does it, and streamed
// text that stops at stop sequences and adds up to the whole reply.
#include <gtest/gtest.h>

#include "cli/serve_openai.h"

using namespace cujax;
using namespace cujax::cli::openai;

namespace {

const Limits kLimits{"tiny", 32, 256, 4};
const Limits kChatLimits{"tiny", 128, 256, 4};  // room for the chat template

Completion parse(const std::string& body, bool chat = false) {
  return parse_completion(body, chat, chat ? kChatLimits : kLimits);
}

// The ApiError a body gets.
ApiError error_of(const std::string& body, bool chat = false) {
  try {
    parse(body, chat);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "accepted: " << body;
  return {};
}

std::string joined(TextStream& s, const std::vector<int32_t>& tokens, bool& stopped) {
  std::string out;
  stopped = false;
  for (int32_t t : tokens) {
    stopped = !s.push(t);
    out += s.take(false);
    if (stopped) break;
  }
  return out + s.take(true);
}

std::vector<int32_t> bytes(std::string_view s) {
  return std::vector<int32_t>(s.begin(), s.end());
}

}  // namespace

TEST(ServeOpenAI, ParsesPromptsAndAppliesOpenAIDefaults) {
  Completion c = parse(R"({"model": "tiny", "prompt": "Hi"})");
  EXPECT_EQ(c.prompts, (std::vector<std::vector<int32_t>>{{'H', 'i'}}));
  EXPECT_EQ(c.max_tokens, 16);  // OpenAI's default for completions
  EXPECT_EQ(c.temperature, 1.0);
  EXPECT_FALSE(c.stream);
  c = parse(R"({"model": "tiny", "prompt": ["ab", "c"], "max_tokens": 3, "temperature": 0,
               "top_k": 5, "seed": 9, "stop": "x", "stream": true,
               "stream_options": {"include_usage": true}, "n": 1, "user": "u",
               "presence_penalty": 0, "frequency_penalty": 0.0, "logit_bias": {}, "logprobs": null,
               "echo": true, "best_of": 1, "suffix": null, "top_p": 1})");
  EXPECT_EQ(c.prompts.size(), 2u);
  EXPECT_EQ(c.max_tokens, 3);
  EXPECT_EQ(c.temperature, 0.0);
  EXPECT_EQ(c.top_k, 5);
  EXPECT_EQ(c.top_p, 1.0);
  EXPECT_EQ(parse(R"({"model": "tiny", "prompt": "a", "top_p": 0.25})").top_p, 0.25);
  EXPECT_EQ(c.seed, 9);
  EXPECT_EQ(c.stop, std::vector<std::string>{"x"});
  EXPECT_TRUE(c.stream && c.include_usage && c.echo);
  EXPECT_EQ(parse(R"({"model": "tiny", "prompt": [1, 2, 255]})").prompts,
            (std::vector<std::vector<int32_t>>{{1, 2, 255}}));
  EXPECT_EQ(parse(R"({"model": "tiny", "prompt": [[1], [2, 3]]})").prompts.size(), 2u);
  // max_tokens defaults to what is left of the context when that is under 16.
  EXPECT_EQ(parse(R"({"model": "tiny", "prompt": "0123456789012345678901234"})").max_tokens, 7);
  // A seed is drawn when none is given: two requests rarely share one.
  EXPECT_NE(parse(R"({"model": "tiny", "prompt": "a"})").seed,
            parse(R"({"model": "tiny", "prompt": "a"})").seed);
}

TEST(ServeOpenAI, ChatUsesTheTemplateAndStopsAtItsEndMarker) {
  const Completion c = parse(R"({"model": "tiny", "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": [{"type": "text", "text": "Hi"}], "name": "ann"}],
      "max_completion_tokens": 2})",
                             true);
  const std::string expected =
      "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
      "<|im_start|>assistant\n";
  ASSERT_EQ(c.prompts.size(), 1u);
  EXPECT_EQ(std::string(c.prompts[0].begin(), c.prompts[0].end()), expected);
  EXPECT_EQ(c.stop, std::vector<std::string>{"<|im_end|>"});
  EXPECT_EQ(c.max_tokens, 2);
  // Without a limit, chat may fill the context, as OpenAI's chat does.
  EXPECT_EQ(parse(R"({"model": "tiny", "messages": [{"role": "user", "content": "a"}]})", true)
                .max_tokens,
            128 - static_cast<int64_t>(std::string("<|im_start|>user\na<|im_end|>\n"
                                                   "<|im_start|>assistant\n")
                                           .size()));
}

TEST(ServeOpenAI, EveryBadRequestGetsItsStatusAndParam) {
  struct Case {
    std::string body;
    bool chat;
    int status;
    std::string param;
  };
  const std::vector<Case> cases = {
      {R"({"model": "tiny", "prompt": "Hi")", false, 400, ""},
      {R"([1])", false, 400, ""},
      {R"({"prompt": "Hi"})", false, 400, "model"},
      {R"({"model": "other", "prompt": "Hi"})", false, 404, "model"},
      {R"({"model": "tiny"})", false, 400, "prompt"},
      {R"({"model": "tiny", "prompt": ""})", false, 400, "prompt"},
      {R"({"model": "tiny", "prompt": []})", false, 400, "prompt"},
      {R"({"model": "tiny", "prompt": [256]})", false, 400, "prompt"},
      {R"({"model": "tiny", "prompt": ["a", [1]]})", false, 400, "prompt"},
      {R"({"model": "tiny", "prompt": ["a", "b", "c", "d", "e"]})", false, 400, "prompt"},
      {R"({"model": "tiny", "prompt": "0123456789012345678901234567890123"})", false, 400,
       "prompt"},
      {R"({"model": "tiny", "prompt": "Hi", "max_tokens": 31})", false, 400, "max_tokens"},
      {R"({"model": "tiny", "prompt": "Hi", "max_tokens": 0})", false, 400, "max_tokens"},
      {R"({"model": "tiny", "prompt": "Hi", "max_tokens": "3"})", false, 400, "max_tokens"},
      {R"({"model": "tiny", "prompt": "Hi", "temperature": 2.5})", false, 400, "temperature"},
      {R"({"model": "tiny", "prompt": "Hi", "top_p": 0})", false, 400, "top_p"},
      {R"({"model": "tiny", "prompt": "Hi", "top_p": 1.5})", false, 400, "top_p"},
      {R"({"model": "tiny", "prompt": "Hi", "top_k": -2})", false, 400, "top_k"},
      {R"({"model": "tiny", "prompt": "Hi", "n": 2})", false, 400, "n"},
      {R"({"model": "tiny", "prompt": "Hi", "seed": -1})", false, 400, "seed"},
      {R"({"model": "tiny", "prompt": "Hi", "stop": [""]})", false, 400, "stop"},
      {R"({"model": "tiny", "prompt": "Hi", "stop": 3})", false, 400, "stop"},
      {R"({"model": "tiny", "prompt": "Hi", "stream": "yes"})", false, 400, "stream"},
      {R"({"model": "tiny", "prompt": "Hi", "stream_options": {"include_usage": true}})", false,
       400, "stream_options"},
      {R"({"model": "tiny", "prompt": "Hi", "presence_penalty": 0.5})", false, 400,
       "presence_penalty"},
      {R"({"model": "tiny", "prompt": "Hi", "logit_bias": {"1": 5}})", false, 400, "logit_bias"},
      {R"({"model": "tiny", "prompt": "Hi", "logprobs": 2})", false, 400, "logprobs"},
      {R"({"model": "tiny", "prompt": "Hi", "suffix": "x"})", false, 400, "suffix"},
      {R"({"model": "tiny", "prompt": "Hi", "whatever": 1})", false, 400, "whatever"},
      {R"({"model": "tiny", "prompt": "Hi"})", true, 400, "prompt"},
      {R"({"model": "tiny", "max_tokens": 3})", true, 400, "messages"},
      {R"({"model": "tiny", "messages": []})", true, 400, "messages"},
      {R"({"model": "tiny", "messages": [{"role": "tool", "content": "x"}]})", true, 400,
       "messages[0].role"},
      {R"({"model": "tiny", "messages": [{"role": "user"}]})", true, 400, "messages[0].content"},
      {R"({"model": "tiny", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
       true, 400, "messages[0].content"},
      {R"({"model": "tiny", "messages": [{"role": "user", "content": "a"}], "tools": [{}]})", true,
       400, "tools"},
      {R"({"model": "tiny", "messages": [{"role": "user", "content": "a"}], "logprobs": true})",
       true, 400, "logprobs"},
      {R"({"model": "tiny", "messages": [{"role": "user", "content": "a"}], "max_tokens": 2,
           "max_completion_tokens": 2})",
       true, 400, "max_completion_tokens"},
  };
  for (const Case& c : cases) {
    const ApiError e = error_of(c.body, c.chat);
    EXPECT_EQ(e.status, c.status) << c.body << ": " << e.message;
    EXPECT_EQ(e.param, c.param) << c.body << ": " << e.message;
    EXPECT_FALSE(e.message.empty());
  }
  const ApiError e = error_of(R"({"model": "tiny", "prompt": "Hi", "max_tokens": 31})");
  EXPECT_EQ(e.code, "context_length_exceeded");
  const json::Value body = json::parse(error_body(e));
  ASSERT_EQ(body.as_object().size(), 1u);
  const json::Value& err = body.at("error");
  ASSERT_EQ(err.as_object().size(), 4u);
  EXPECT_EQ(err.at("message").as_string(), e.message);
  EXPECT_EQ(err.at("type").as_string(), "invalid_request_error");
  EXPECT_EQ(err.at("param").as_string(), "max_tokens");
  EXPECT_EQ(err.at("code").as_string(), "context_length_exceeded");
  EXPECT_TRUE(json::parse(error_body(ApiError(400, "x"))).at("error").at("param").is_null());
}

TEST(ServeOpenAI, ReplacesIllFormedUtf8AsPythonDoes) {
  // Expected: bytes.decode("utf-8", errors="replace") in Python 3.
  const std::string r = "\xef\xbf\xbd";
  EXPECT_EQ(to_text("abc"), "abc");
  EXPECT_EQ(to_text("\xc3\xa9"), "\xc3\xa9");
  EXPECT_EQ(to_text("\xff"), r);
  EXPECT_EQ(to_text("\xe2\x82"
                    "A"),
            r + "A");                             // one U+FFFD for a truncated sequence
  EXPECT_EQ(to_text("\xe0\x80"), r + r);          // E0 80: 80 cannot follow E0
  EXPECT_EQ(to_text("\xed\xa0\x80"), r + r + r);  // a surrogate
  EXPECT_EQ(to_text("\xf0\x9f\x98"), r);
  EXPECT_EQ(to_text("\xf0\x9f\x98\x80"), "\xf0\x9f\x98\x80");
  EXPECT_EQ(to_text("\xc0\xaf"), r + r);
  EXPECT_TRUE(valid_utf8("h\xc3\xa9"));
  EXPECT_FALSE(valid_utf8("\xc3"));
}

TEST(ServeOpenAI, StreamedTextStopsAtStopSequencesAndAddsUpToTheWhole) {
  bool stopped;
  {
    TextStream s({"END", "xy"});
    EXPECT_EQ(joined(s, bytes("abcENxEND tail"), stopped), "abcENx");
    EXPECT_TRUE(stopped);
  }
  {
    // Nothing of a stop sequence's beginning goes out until it is known not to be one.
    TextStream s({"END"});
    s.push('a');
    s.push('E');
    EXPECT_EQ(s.take(false), "a");
    s.push('N');
    EXPECT_EQ(s.take(false), "");
    s.push('d');
    EXPECT_EQ(s.take(false), "ENd");
  }
  {
    // A character split over tokens goes out whole; a broken one as U+FFFD at the end.
    TextStream s({});
    s.push(0xc3);
    EXPECT_EQ(s.take(false), "");
    s.push(0xa9);
    EXPECT_EQ(s.take(false), "\xc3\xa9");
    s.push(0xe2);
    EXPECT_EQ(s.take(false), "");
    EXPECT_EQ(s.take(true), "\xef\xbf\xbd");
  }
  {
    TextStream s({"lo w"});
    EXPECT_EQ(joined(s, bytes("hello world"), stopped), "hel");
    EXPECT_TRUE(stopped);
  }
  {
    TextStream s({"zz"});
    EXPECT_EQ(joined(s, bytes("no stop here z"), stopped), "no stop here z");
    EXPECT_FALSE(stopped);
  }
}

TEST(ServeOpenAI, RepliesHaveOpenAIsShapes) {
  const Reply r(false, "tiny");
  EXPECT_EQ(r.id.rfind("cmpl-", 0), 0u);
  EXPECT_EQ(r.id.size(), 5u + 24u);
  const std::string full = r.full({{"hi", "length"}}, 3, 2);
  const json::Value v = json::parse(full);
  EXPECT_EQ(v.at("object").as_string(), "text_completion");
  EXPECT_EQ(v.at("model").as_string(), "tiny");
  EXPECT_EQ(v.at("choices").as_array()[0].at("text").as_string(), "hi");
  EXPECT_EQ(v.at("choices").as_array()[0].at("finish_reason").as_string(), "length");
  EXPECT_TRUE(v.at("choices").as_array()[0].at("logprobs").is_null());
  EXPECT_EQ(v.at("usage").at("total_tokens").as_int(), 5);

  const Reply chat(true, "tiny");
  EXPECT_EQ(chat.id.rfind("chatcmpl-", 0), 0u);
  const json::Value m = json::parse(chat.full({{"yo", "stop"}}, 1, 1));
  EXPECT_EQ(m.at("object").as_string(), "chat.completion");
  EXPECT_EQ(m.at("choices").as_array()[0].at("message").at("role").as_string(), "assistant");
  EXPECT_EQ(m.at("choices").as_array()[0].at("message").at("content").as_string(), "yo");
  const json::Value first = json::parse(chat.chunk(0, "", "", true));
  EXPECT_EQ(first.at("object").as_string(), "chat.completion.chunk");
  EXPECT_EQ(first.at("choices").as_array()[0].at("delta").at("role").as_string(), "assistant");
  EXPECT_TRUE(first.at("choices").as_array()[0].at("finish_reason").is_null());
  const json::Value last = json::parse(chat.chunk(0, "", "stop", false));
  EXPECT_TRUE(last.at("choices").as_array()[0].at("delta").as_object().empty());
  EXPECT_EQ(last.at("choices").as_array()[0].at("finish_reason").as_string(), "stop");
  const json::Value usage = json::parse(chat.usage_chunk(4, 6));
  EXPECT_TRUE(usage.at("choices").as_array().empty());
  EXPECT_EQ(usage.at("usage").at("total_tokens").as_int(), 10);

  const json::Value models = json::parse(models_list(kLimits, 7));
  EXPECT_EQ(models.at("object").as_string(), "list");
  EXPECT_EQ(models.at("data").as_array()[0].at("id").as_string(), "tiny");
  EXPECT_EQ(models.at("data").as_array()[0].at("max_model_len").as_int(), 32);
}
