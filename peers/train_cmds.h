/* rumor-train's subcommands on a checkpoint: sample, eval and export. */
#ifndef RUMOR_TRAIN_CMDS_H
#define RUMOR_TRAIN_CMDS_H

/* Runs `rumor-train sample|eval|export ...` when argv[1] names one of them;
 * returns -1 when it does not (then the caller trains), else the exit
 * status. */
int rumor_train_subcommand(int argc, char **argv);

#endif
