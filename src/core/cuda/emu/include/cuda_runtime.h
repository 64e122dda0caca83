/* cuda_runtime.h — the emulator's runtime API (cuda_runtime_api.h); see there */
#include "cuda_runtime_api.h"
