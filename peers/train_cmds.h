/* rumor-train's subcommands: sample, eval and export on a checkpoint;
 * schedule (train_schedule.c) on a pipeline schedule; tokenize
 * (train_tokenize.c) on text files. */
#ifndef RUMOR_TRAIN_CMDS_H
#define RUMOR_TRAIN_CMDS_H

/* Runs `rumor-train sample|eval|export ...` when argv[1] names one of them;
 * returns -1 when it does not (then the caller trains), else the exit
 * status. */
int rumor_train_subcommand(int argc, char **argv);

/* rumor-train schedule [--schedule S] [--stages P] [--microbatches M]
 * [--svg FILE] [--json]; returns the exit status. */
int rumor_train_schedule_cmd(int argc, char **argv);

/* rumor-train tokenize FILE... --tokenizer gpt2:DIR --out DIR [...]
 * (train_tokenize.c); returns the exit status. */
int rumor_train_tokenize_cmd(int argc, char **argv);

#endif
