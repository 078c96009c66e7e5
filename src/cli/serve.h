#pragma once

#include <string>
#include <vector>

namespace cujax::cli {

// cujax serve --model DIR [--host H] [--port P] [--max-batch B] [--max-queue Q] [--max-seq T]
//             [--auth-token-file F] [--max-connections N] [--max-connections-per-client N]:
//             the HTTP API of docs/serving.md (OpenAI's completions and chat, cujax's own).
int serve_command(const std::vector<std::string>& argv);

}  // namespace cujax::cli
