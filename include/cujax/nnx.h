// cujax::nnx: modules in Flax NNX's style (see docs/nnx.md).
#pragma once

#include "cujax/nnx/attention.h"
#include "cujax/nnx/conv.h"
#include "cujax/nnx/dropout.h"
#include "cujax/nnx/embed.h"
#include "cujax/nnx/jit.h"
#include "cujax/nnx/linear.h"
#include "cujax/nnx/metrics.h"
#include "cujax/nnx/module.h"
#include "cujax/nnx/normalization.h"
#include "cujax/nnx/pooling.h"
#include "cujax/nnx/remat.h"
#include "cujax/nnx/rngs.h"
#include "cujax/nnx/sequential.h"
#include "cujax/nnx/training.h"
