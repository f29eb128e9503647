/* rumor: decentralized data-parallel training. One include for everything:
 * #include <rumor/rumor.h> (pkg-config --cflags rumor adds the include
 * directory above rumor/, so rumor's headers never shadow a program's own
 * err.h or log.h). */
#ifndef RUMOR_H
#define RUMOR_H
#include "err.h"
#include "log.h"
#include "rng.h"
#include "ops.h"
#include "batch.h"
#include "data.h"
#include "text.h"
#include "source.h"
#include "block.h"
#include "model.h"
#include "optim.h"
#include "arena.h"
#include "stage.h"
#include "step.h"
#include "checkpoint.h"
#include "export.h"
#include "trainer.h"
#endif
