// The `cujax` command.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/bench.h"
#include "cli/checkpoint.h"
#include "cli/compile.h"
#include "cli/conformance.h"
#include "cli/doctor.h"
#include "cli/export_model.h"
#include "cli/generate.h"
#include "cli/run.h"
#include "cli/stablehlo_translate.h"
#ifdef CUJAX_HAVE_HTTPLIB
#include "cli/serve.h"
#endif
#include "cli/train.h"
#include "cujax/core/error.h"
#include "cujax/devices.h"
#include "cujax/runtime/backend.h"

namespace {

constexpr const char* kUsage = R"(usage: cujax <command> [options]

Every command that computes runs on the default backend (cuda when this build has CUDA and a
GPU can be used, else cpu; CUJAX_PLATFORMS overrides it) or on --platform cpu|cuda.
train, generate, serve and bench take --profile DIR: a trace of the run, written under
DIR/plugins/profile/ for ui.perfetto.dev (docs/profiling.md).
`cujax <command> --help` lists a command's options with their defaults.

commands:
  devices                      list the devices of every available platform and the default
  doctor                       explain why a GPU is or is not used, and what to do
      --trace DIR              instead: the performance report of a --profile trace, per
                               step, its top ops and its pitfalls (exit 1 when it finds any)
  compile FILE.mlir            compile without running (no GPU needed): steps, peak buffer
                               size and every op that would run on the host
      --platform cuda|cpu      (default: cuda)   --arch sm_80|sm_90
      --no-host-fallback       exit 1 when an op would run on the host
  stablehlo-test FILE|DIR...   run StableHLO test programs and their check.* calls
      --platform NAME          backend to run on (default: the default backend)
      -j N                     files run at once (default: 1)
      --timeout SECONDS        limit per file (default: 60)
      --min-pass-rate R        exit 0 when at least this fraction passes (default: 1)
      -v                       also list the files that pass
      --process-per-file       a fresh process per file (default: one worker per job)
  train [options]              train a transformer language model (docs/training.md)
      --config tiny|small|gpt2 --data FILE|DIR --steps N --batch B --seq T --lr LR
      --seed S --log-every N --eval-every N --checkpoint-every N --out DIR --platform P
      --dump-batches FILE      the run's training batches as .npy int32 (steps, 2, B, T)
      --mesh data=N[,model=M]  data (and tensor) parallel over N*M virtual cpu devices,
                               split over the processes under mpirun, or given
      --coordinator HOST:PORT --num-processes N --process-id I   (TCP, docs/sharding.md)
  generate --model DIR         sample text from a trained model, with the KV cache
      --prompt TEXT --max-tokens N --temperature T --top-k K --seed S --platform P
  export --model DIR --out FILE [--platform P]
      --fn forward|generate_step --batch B --seq T
                               a trained model as a portable artifact, weights included
      --fn serve --max-batch B --max-seq T
                               the serving bundle `cujax serve --model FILE` runs
  checkpoint show PATH [--values]
                               every leaf of a checkpoint (Orbax, Flax msgpack, t5x, safetensors)
  run FILE --input X.npy... --output OUT.npy... [--print] [--platform P]
                               run an exported artifact on .npy inputs (docs/export.md):
                               a cujax artifact, a StableHLO portable artifact (.mlirbc)
                               or StableHLO text, told apart by their bytes
  stablehlo-translate FILE [--deserialize] [--print-stablehlo-version]
      [--serialize [--target V] [-o OUT]]
                               a portable artifact as StableHLO text, or its version;
                               StableHLO text (or an artifact) as a portable artifact
  serve --model DIR|FILE       HTTP JSON API with continuous batching (docs/serving.md);
                               FILE: a serving bundle, which fixes max-batch and max-seq
      --host H --port P --max-batch B --max-queue Q --max-seq T --auth-token-file F
      --max-connections N --max-connections-per-client N --platform P
  bench dispatch [--platform P]
                               time of a jitted call: first (trace + compile) and steady state
  bench train [--platform P]   ms/step and tokens/s of the tiny config against PyTorch CPU
  bench attention [--seq 1024,4096 --heads N --implementation xla|cudnn --platform P]
                               causal bf16 dot_product_attention, head dim 128, in TFLOP/s
  bench decode [--config small --batch 1,8 --step model|serve --max-seq T --platform P]
                               the KV-cache decode step, ms per step at each batch size
  bench scaling [--batch B --steps N --platform P]
                               the tiny training step data-parallel on 1, 2, 4, 8 cpu devices;
                               on cuda also the step on cuda:0 and NCCL over every GPU
  bench serve                  req/s, tok/s and latency of the HTTP server, batched and not
      --clients C --seconds S --max-tokens N --max-batch B --model DIR --platform P
      --endpoint completions|generate
  version                      print the version
)";

constexpr const char* kBenchUsage = R"(usage: cujax bench <benchmark> [options]

benchmarks (cujax bench <benchmark> --help for the options of each):
  dispatch    time of a jitted call: first (trace + compile) and steady state
  train       ms/step and tokens/s of the tiny config against PyTorch CPU
  attention   causal bf16 dot_product_attention, head dim 128, in TFLOP/s
  decode      the KV-cache decode step, ms per step at each batch size
  scaling     the tiny training step data-parallel on 1, 2, 4, 8 devices
  serve       req/s, tok/s and latency of the HTTP server, batched and not
)";

std::string human_bytes(int64_t b) {
  if (b <= 0) return "unknown";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(b) / (1024.0 * 1024 * 1024));
  return buf;
}

int devices_command() {
  std::printf("%-8s %-3s %-24s %-12s %s\n", "platform", "id", "kind", "memory", "detail");
  for (const auto& platform : cujax::runtime::available_platforms()) {
    for (const auto& d : cujax::runtime::get_backend(platform).devices())
      std::printf("%-8s %-3d %-24s %-12s %s\n", d.platform.c_str(), d.id, d.kind.c_str(),
                  human_bytes(d.memory_bytes).c_str(), d.detail.c_str());
  }
  bool ok = false;
  std::printf("%s\n", cujax::cli::default_backend_line(ok).c_str());
  return ok ? 0 : 1;
}

int stablehlo_test_command(const std::vector<std::string>& argv) {
  using cujax::cli::Args;
  const Args args(
      {"stablehlo-test",
       "run StableHLO test programs and their check.* calls",
       {{"j", "N", "files run at once (default: 1)"},
        {"timeout", "SECONDS", "limit per file (default: 60)"},
        {"min-pass-rate", "R", "exit 0 when at least this fraction passes (default: 1)"},
        {"v", "", "also list the files that pass"},
        {"process-per-file", "", "a fresh process per file (default: one worker per job)"},
        cujax::cli::platform_option()},
       "FILE|DIR",
       "programs, or folders of *.mlir files"},
      argv);
  if (args.positional().empty())
    throw cujax::cli::UsageError("stablehlo-test needs at least one FILE or DIR");
  cujax::cli::ConformanceOptions options;
  options.jobs = static_cast<int>(args.integer("j", 1, 1));
  options.timeout_seconds = static_cast<int>(args.integer("timeout", 60, 1));
  options.min_pass_rate = args.number("min-pass-rate", 1, 0);
  options.verbose = args.flag("v");
  options.process_per_file = args.flag("process-per-file");
  options.platform = cujax::cli::use_platform(args);
  return cujax::cli::run_conformance(args.positional(), options);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") ||
      !std::strcmp(argv[1], "help")) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string command = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  try {
    if (command == "devices") return devices_command();
    if (command == "doctor") return cujax::cli::doctor_command(args);
    if (command == "stablehlo-test") return stablehlo_test_command(args);
    if (command == "compile") return cujax::cli::compile_command(args);
    if (command == "train") return cujax::cli::train_command(args);
    if (command == "generate") return cujax::cli::generate_command(args);
    if (command == "run") return cujax::cli::run_artifact(args);
    if (command == "stablehlo-translate") return cujax::cli::stablehlo_translate_command(args);
    if (command == "export") return cujax::cli::export_command(args);
    if (command == "checkpoint") return cujax::cli::checkpoint_command(args);
#ifdef CUJAX_HAVE_HTTPLIB
    if (command == "serve") return cujax::cli::serve_command(args);
#endif
    if (command == "bench") {
      if (args.empty() || args[0] == "--help" || args[0] == "-h") {
        std::fputs(kBenchUsage, args.empty() ? stderr : stdout);
        return args.empty() ? 2 : 0;
      }
      if (!args.empty() && args[0] == "dispatch")
        return cujax::cli::bench_dispatch({args.begin() + 1, args.end()});
      if (!args.empty() && args[0] == "train")
        return cujax::cli::bench_train({args.begin() + 1, args.end()});
      if (!args.empty() && args[0] == "attention")
        return cujax::cli::bench_attention({args.begin() + 1, args.end()});
      if (!args.empty() && args[0] == "decode")
        return cujax::cli::bench_decode({args.begin() + 1, args.end()});
      if (!args.empty() && args[0] == "scaling")
        return cujax::cli::bench_scaling({args.begin() + 1, args.end()});
#ifdef CUJAX_HAVE_HTTPLIB
      if (!args.empty() && args[0] == "serve")
        return cujax::cli::bench_serve({args.begin() + 1, args.end()});
#endif
      throw cujax::cli::UsageError("unknown benchmark '" + args[0] +
                                   "': dispatch, train, attention, decode, scaling or serve");
    }
    if (command == "version" || command == "--version") {
      std::printf("cujax %s\n", CUJAX_VERSION);
      return 0;
    }
    std::fprintf(stderr, "cujax: unknown command '%s'\n\n%s", command.c_str(), kUsage);
    return 2;
  } catch (const cujax::cli::HelpRequested& help) {
    std::fputs(help.what(), stdout);
    return 0;
  } catch (const cujax::cli::UsageError& e) {
    std::fprintf(stderr, "cujax %s: error: %s\n", command.c_str(), e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cujax %s: %s\n", command.c_str(), e.what());
    return 1;
  }
}
