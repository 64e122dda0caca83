/* gflow.h — everything public. Dimension letters: see gflow/tensor.h. */
#ifndef GFLOW_H
#define GFLOW_H
#include "gflow/error.h"
#include "gflow/rng.h"
#include "gflow/tensor.h"
#include "gflow/arena.h"
#include "gflow/params.h"
#include "gflow/threads.h"
#include "gflow/tape.h"
#include "gflow/ops.h"
#endif
