/*
 * prof — where the time of a forward pass and a decode round goes, for
 * `quorum bench --roofline`: the matmuls by shape (with their activation
 * quantizing and the threads' idle time inside their jobs), attention,
 * the row-parallel steps, the forward pass as a whole, and sampling.
 * Off unless enabled; then each call site costs one clock read or two.
 * Counts are per process and meant for one caller thread at a time (a
 * benchmark's).
 *
 * Callers: kern.c (matmuls), infer/fwd.c (attention, the pass), sc/
 * (sampling), tpool.c (busy time), tools/cmd_bench.c (the report).
 */
#ifndef QUORUM_PROF_H
#define QUORUM_PROF_H

#include <stdint.h>

enum prof_phase {
	PROF_FWD,       /* fwd_batch as a whole */
	PROF_MATMUL,    /* matmul jobs (also by shape below) */
	PROF_ACT,       /* quantizing the matmuls' activation rows */
	PROF_ATTENTION, /* the attention jobs */
	PROF_SAMPLING,  /* drawing the tokens of a round */
	PROF_MM_IDLE,   /* thread time idle inside matmul jobs */
	PROF_ATT_IDLE,  /* thread time idle inside attention jobs */
	PROF_ROWS,      /* the row-parallel steps (norms, rotary, KV
			 * stores, residuals, the MLP's activation) */
	PROF_ROWS_IDLE, /* thread time idle inside them */
	PROF_PHASES
};

#define PROF_SHAPES 24
#define PROF_LABEL_MAX 24

typedef struct prof_shape {
	char label[PROF_LABEL_MAX]; /* "attn qkv", "ffn down", "output" */
	int K, N;                   /* N: all the job's matrices */
	uint32_t wtype;             /* the first matrix's */
	uint64_t calls, rows;       /* rows: the M of every call, summed */
	int64_t ns;                 /* the job's wall time (no quantizing) */
	double macs, bytes;         /* multiply-adds; weight bytes read */
} prof_shape;

typedef struct prof_report {
	int64_t ns[PROF_PHASES];
	int n_shapes;
	prof_shape shape[PROF_SHAPES];
} prof_report;

/* Nonzero while counting (read without a lock: set by the one caller
 * thread between the calls it times). */
extern int prof_active;

enum { PROF_OFF, PROF_ALL, PROF_DECODE };
/* Counts everything (PROF_ALL), only decode rounds (PROF_DECODE: between
 * prof_decode(1) and prof_decode(0)), or nothing; resets every count. */
void prof_enable(int mode);
/* A decode round's work begins (1) or ends (0): sc/batch.c. */
void prof_decode(int in);
int64_t prof_now(void); /* ns, monotonic */

/* ns more of phase (while enabled). */
void prof_add(int phase, int64_t ns);
/* The label of the matmul jobs that follow (fwd.c's names; NULL: none). */
void prof_label(const char *label);
/* One matmul job of M rows: its shape, wall time, weight bytes. */
void prof_matmul(int K, int N, uint32_t wtype, int M, int64_t ns,
		 double bytes);

/* The counts so far. */
void prof_get(prof_report *out);

#endif
