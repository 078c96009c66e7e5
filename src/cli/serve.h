#pragma once

#include <string>
#include <vector>

namespace cujax::cli {

// cujax serve --model DIR [--host H] [--port P] [--max-batch B] [--max-queue Q] [--max-seq T]
//             [--auth-token-file F]: the HTTP JSON API of docs/serving.md.
int serve_command(const std::vector<std::string>& argv);

}  // namespace cujax::cli
