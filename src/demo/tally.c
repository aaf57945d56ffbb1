/*
 * gpufeed train's tally: the loss and accuracy summed over an epoch's
 * steps, from the single-process loops (loops.c) and the data-parallel
 * step (parallel.c), below both. The command's thread.
 */
#include "cli.h"
#include "train.h"

void train_tally_add(tally *a, float loss, int correct, int n)
{
    if (n <= 0)
        return;
    a->loss_sum += (double)loss * n;
    a->correct += (uint64_t)(correct > 0 ? correct : 0);
    a->n += (uint64_t)n;
}

/* CUDA: makes the last step's figures current (waits for the stream). */
int train_tally_sync(trainer *t, gfm_model *m, tally *a)
{
    float loss = 0;
    int correct = 0;
    if (!t->cuda)
        return CLI_OK;
    if (gfm_sync(m, &loss, &correct) < 0) {
        cli_error(CMD, "model: the queued steps failed");
        return CLI_FAIL;
    }
    train_tally_add(a, loss, correct, a->pending_n);
    a->pending_n = 0;
    return CLI_OK;
}
