/* rumor: decentralized data-parallel training. One include for everything. */
#ifndef RUMOR_H
#define RUMOR_H
#include "err.h"
#include "log.h"
#include "ops.h"
#include "data.h"
#include "checkpoint.h"
#endif
