/* A lying peer for the test suite (tests/attack.c). */
#ifndef RUMOR_TESTS_ATTACK_H
#define RUMOR_TESTS_ATTACK_H

#include "mixer.h"

/* Sets mc's tamper hook from RUMOR_ATTACK; -1 (said) when unset or bad. */
int attack_setup(rumor_mixer_config_t *mc);

#endif
