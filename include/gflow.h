/* gflow.h — every public header of include/gflow/ in one include. Dimension letters: see
 * gflow/tensor.h. */
#ifndef GFLOW_H
#define GFLOW_H
#include "gflow/error.h"
#include "gflow/version.h"
#include "gflow/rng.h"
#include "gflow/tensor.h"
#include "gflow/arena.h"
#include "gflow/params.h"
#include "gflow/threads.h"
#include "gflow/fs.h"
#include "gflow/dist.h"
#include "gflow/tape.h"
#include "gflow/ops.h"
#include "gflow/model.h"
#include "gflow/nli.h"
#include "gflow/optim.h"
#include "gflow/data.h"
#include "gflow/tokenizer.h"
#include "gflow/ini.h"
#include "gflow/recipe.h"
#include "gflow/checkpoint.h"
#include "gflow/safetensors.h"
#include "gflow/train.h"
#include "gflow/rundir.h"
#include "gflow/ablate.h"
#include "gflow/probe.h"
#endif
