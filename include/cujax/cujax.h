// <cujax/cujax.h>: the whole public API in one include, as <torch/torch.h> or <mlx/mlx.h>.
// Every header under include/cujax is reachable from here (tests/umbrella_test.cpp checks it);
// include a single header instead to compile less.
//
// The namespaces are named after the modules they mirror, so a JAX program's imports become:
//
//   namespace jnp = cujax::numpy;          // import jax.numpy as jnp
//   namespace lax = cujax::lax;            // from jax import lax
//   namespace jr = cujax::random;          // jax.random ("random" alone clashes with POSIX
//                                          //  ::random() from <stdlib.h> at global scope)
//   namespace nn = cujax::nn;              // jax.nn (and jax.nn.initializers)
//   namespace nnx = cujax::nnx;            // from flax import nnx
//   namespace optax = cujax::optax;        // import optax
//   namespace ocp = cujax::checkpoint;     // import orbax.checkpoint as ocp
//   namespace jax = cujax;                 // jax.jit, jax.grad, jax.vmap, jax.devices, ...
//
// jax.export is cujax::export_ (export is a C++ keyword) with cujax::Exported; jax.sharding is
// cujax::Mesh, PartitionSpec (P) and NamedSharding; jax.tree is cujax::tree_map & co.
// Beyond JAX's names: cujax::data (input pipelines), cujax::metrics_log (CSV and SVG logs),
// cujax::models (a GPT-2 style language model), cujax::serve (the engine of `cujax serve`),
// cujax::ir (StableHLO modules: parse, print, verify) and cujax::runtime (backends, buffers).
#pragma once

// Arrays, dtypes, shapes, host tensors, .npy files.
#include "cujax/array.h"
#include "cujax/core/dtype.h"
#include "cujax/core/dynamic_shape.h"
#include "cujax/core/error.h"
#include "cujax/core/half.h"
#include "cujax/core/host_tensor.h"
#include "cujax/core/json.h"
#include "cujax/core/narrow_types.h"
#include "cujax/core/npy.h"
#include "cujax/core/sha256.h"
#include "cujax/core/shape.h"

// jax.numpy, jax.lax (with control flow), jax.nn, jax.random.
#include "cujax/control_flow.h"
#include "cujax/lax.h"
#include "cujax/linalg.h"
#include "cujax/linalg_platform.h"
#include "cujax/nn.h"
#include "cujax/nn/initializers.h"
#include "cujax/numpy.h"
#include "cujax/random.h"
#include "cujax/special.h"

// Transformations and trees: jit, grad, vmap, jax.tree.
#include "cujax/grad.h"
#include "cujax/jacobian.h"
#include "cujax/jit.h"
#include "cujax/linearize.h"
#include "cujax/remat.h"
#include "cujax/tree.h"
#include "cujax/vmap.h"

// Devices, transfers, sharding, several processes.
#include "cujax/devices.h"
#include "cujax/distributed.h"
#include "cujax/sharding.h"
#include "cujax/transfer_guard.h"

// Flax NNX, Optax, Orbax, jax.export.
#include "cujax/checkpoint.h"
#include "cujax/export.h"
#include "cujax/nnx.h"
#include "cujax/optax.h"

// Training programs: input pipeline, metrics logs, a language model, serving.
#include "cujax/data.h"
#include "cujax/metrics_log.h"
#include "cujax/models/lm.h"
#include "cujax/models/transformer.h"
#include "cujax/profiler.h"
#include "cujax/profiler_doctor.h"
#include "cujax/serve/engine.h"
#include "cujax/serve/steps.h"

// The layers below: StableHLO modules, backends and tracing.
#include "cujax/ir/bytecode.h"
#include "cujax/ir/ir.h"
#include "cujax/ir/parser.h"
#include "cujax/ir/printer.h"
#include "cujax/ir/verifier.h"
#include "cujax/runtime/backend.h"
#include "cujax/runtime/buffer.h"
#include "cujax/runtime/checks.h"
#include "cujax/runtime/compile_report.h"
#include "cujax/runtime/spmd.h"
#include "cujax/trace/trace.h"
