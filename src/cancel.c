// SPDX-License-Identifier: MIT
#include "cancel.h"

_Thread_local const atomic_bool *cancel_flag;
