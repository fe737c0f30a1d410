/*
 * sc_int — the self-consistency engine's shared state and the calls
 * between its parts. INTERNAL to common/sc/: nothing outside sc/ includes
 * it; the public API is in the parts' headers: engine.h, fork.h,
 * batch.h, run.h.
 *
 * The parts, one file each, lowest first (each calls only those above):
 *   engine.c  struct sc_engine: the pool and its accounting
 *   cache.c   sc_run's prefix cache (sc_cache_*)
 *   root.c    the roots a worker keeps, linked pools (sc_root_*)
 *   fork.c    one sample being decoded: its draw, text, stop strings,
 *             confidence, the online filter, and sc_run's early stopping
 *             (sc_stopper)
 *   batch.c   the merged decode loop (sc_batch_*), sc_batch_decode_job
 *             (a job alone in a batch of its own)
 *   run.c     sc_run (reset, paged, batched) and sc_run_many
 *
 * Single-threaded like the loop: the engine and its batches are driven
 * from one thread.
 */
#ifndef QUORUM_SC_INT_H
#define QUORUM_SC_INT_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "infer/fwd.h"
#include "infer/kv.h"
#include "infer/samp.h"
#include "kernels/tpool.h"
#include "sc/batch.h"
#include "sc/engine.h"
#include "sc/params.h"
#include "text/gbnf.h"
#include "sc/pfx.h"
#include "sc/reasoning.h"
#include "sc/fork.h"
#include "sc/stop.h"

/* A root kept across calls (sc_root_*). */
typedef struct {
	uint32_t id;
	kv_seq seq;
	float *logits;       /* (vocab) */
	int32_t *tokens;     /* (seq.n_tokens) its prompt; NULL: imported */
} sc_root;

/* The engine (engine.c owns it; fork.c reads the sampler and masks,
 * batch.c and run.c the pool and the prefix cache). */
struct sc_engine {
	const model *m;
	const tok *t;
	sc_engine_params p;
	tpool *tp;
	fwd *f;
	samp *sampler;
	kv_pool *pool;       /* grown on demand */
	float *masked;       /* (vocab) logits with end-of-generation masked */
	/* a decode round's draws over the pool's threads (sc_fork_draw):
	 * scratch per task, n_threads of each */
	samp **task_samp;
	float **task_masked;
	gbnf_vocab *gv;      /* the vocabulary's trie, made for the first
			      * grammar (NULL until then) */
	/* with gv (sc_grammar_vocab): the token that opens the model's
	 * reasoning (<think>, harmony's <|channel|>; -1: its family does
	 * not reason), and the tokens that are only whitespace, as bits */
	int32_t rmark;
	uint64_t *ws_toks;
	/* ... and the tokens whose pieces hold a reasoning marker
	 * (reasoning_has_marker): never in a waiting grammar's content */
	int32_t *mark_toks;
	int n_mark_toks;
	int32_t *eog;        /* (n_eog) end-of-generation token ids */
	int n_eog;
	uint32_t peak_in_use;/* blocks, this run */
	uint64_t peak_bytes; /* KV payload bytes held, this run */
	int fixed_pool;      /* pool created once (named or sized) */
	sc_root *roots;      /* (n_roots) kept prefills */
	int n_roots, cap_roots;
	uint32_t next_root;
	struct {
		char *name;
		kv_pool *pool;  /* mapped read-only, linked at slot i + 1 */
	} linked[KV_MAX_SLOTS - 1];
	int n_linked;
	/* sc_run's prefix cache (sc_engine_params.prefix_cache > 0): the
	 * roots of recent prompts, kept between runs */
	pfx *cache_ix;
	struct sc_cached {
		kv_seq seq;
		int32_t *tokens;
		size_t n;
		uint64_t used;   /* e->tick when last used */
	} *cached;
	int n_cached;
	uint64_t tick;
};

/* One sample being decoded. */
typedef struct {
	int index;
	kv_seq seq;
	samp_rng rng;
	const float *logits; /* row to sample next */
	float *lg_own;       /* the same row when it is this fork's own (a
			      * round's; NULL: the job's shared root logits):
			      * its end tokens are masked in place */
	int32_t next;        /* token to feed */
	int done;
	sc_sample *out;
	size_t text_cap;
	/* confidence: log-probabilities in units of 2^-32 nats */
	int64_t lp_sum;      /* all drawn tokens */
	int64_t *ring;       /* (conf window) the last ones */
	int64_t win_sum;     /* sum of the ring */
	int64_t win_min;     /* least full-window sum so far */
	int n_drawn;
	struct sc_job *job;  /* the job it belongs to */
	int gstate;          /* its grammar state (the job's matcher) */
	int gwait;           /* GW_*: whether the grammar waits for the
			      * reasoning to end (fork.c) */
	int gmarks;          /* it waited: no marker in its content */
	reasoning_split grs; /* ... the reasoning's books while it does */
	int appended;        /* has been forwarded (holds a private tail) */
	/* the token drawn ahead by sc_fork_draw (drawn: set until
	 * sc_fork_step takes it; drawn_rc its error) */
	int drawn, drawn_rc, drawn_tok;
	double drawn_lp;
	/* with top_logprobs: the alternatives of the last draw, ahead or
	 * not ((p->top_logprobs) entries; NULL: not asked) */
	samp_alt *alt;
	int n_alt;
	/* with a presence or frequency penalty: the tokens drawn so far
	 * (end token excluded), kept sorted so each one's count is a run */
	int32_t *seen;
	int n_seen;
	size_t cap_seen;
	/* where each drawn token's piece starts in the text (n_tokens of
	 * them): its reasoning tokens are counted from these at its end */
	uint32_t *starts;
	size_t cap_starts;
} fork_state;

/* The online confidence filter (sc_params.filter_*). */
typedef struct {
	int warm;            /* samples in the warm-up; 0: off */
	double pct;
	int armed;           /* thr is known */
	double thr;
} sc_filter;

/* sc_run's early stopping: the decision over out[0..prefix) in index
 * order, and how many forks may be in flight. */
typedef struct {
	sc_filter flt;
	stop_state ss;
	int width;           /* forks in flight at most */
	int waves;           /* sc_params.stop_waves */
	int horizon;         /* samples 0..horizon-1 may start (stop.h) */
	int prefix;          /* samples pushed */
	int decided;         /* the request is decided at prefix */
	int started, finished;
} sc_stopper;

typedef struct sc_job sc_job;

/* What a job of the merged decode loop does (the internal form of
 * sc_batch_decode/_prefill; sc_run's jobs). */
typedef struct {
	const sc_params *p;       /* NULL: a prefill job */
	const kv_seq *root;       /* decode from (borrowed), or NULL */
	kv_seq *view;             /* ... or this view, moved into the job */
	const float *root_logits; /* borrowed; NULL: copy_logits or prompt */
	const float *copy_logits; /* copied into the job */
	const int32_t *prompt;    /* prefill this first (copied) */
	size_t n_prompt;
	int publish;              /* keep the prefilled root (sc_root) */
	const int *idx;           /* NULL: 0..n-1 */
	int n;
	sc_sample *out;           /* (n) the caller's; NULL: the job's own */
	sc_stopper *st;           /* sc_run's early stopping, or NULL */
	sc_filter *flt;
	int width;                /* forks in flight at most (0: n) */
	sc_job_cbs cb;
} job_init;

/* A job of the merged decode loop (batch.c): samples from one root, a
 * prefill, or both (sc_run_many's questions). */
struct sc_job {
	sc_job *next;
	uint32_t id;
	sc_params p;            /* p.grammar is not kept: gg, gm are */
	gbnf *gg;               /* the compiled grammar, or NULL */
	gbnf_matcher *gm;       /* ... its states, shared by the forks */
	int g0;                 /* ... the state before any text */
	int g_wait;             /* ... its forks wait for the reasoning
				 * (sc_grammar_waits) */
	int w;                  /* confidence window */
	const kv_seq *root;     /* forks fork from it: &own, &view, borrowed */
	kv_seq own, view;
	const float *root_logits;
	float *logits_buf;      /* (vocab) owned */
	int32_t *prompt;        /* prefill: prompt[filled..n_prompt) to go */
	size_t n_prompt, filled;
	int prefilling;         /* the root is not complete */
	int pf_started;         /* its blocks are reserved */
	int publish;
	uint32_t need_root;     /* blocks the prompt takes */
	int n;                  /* samples (0: a prefill job) */
	fork_state *fs;         /* (n) */
	sc_sample *out;         /* (n) */
	int own_out;
	int *done;              /* (n) */
	int n_started, n_act, width;
	uint32_t need;          /* worst-case private blocks of one fork */
	uint32_t need_win;      /* worst-case private window slots of one
				 * fork (sc_engine_win_slots) */
	sc_stopper *st;
	sc_filter *flt;
	sc_job_cbs cb;
	sc_job_stats stats;
	double t0;
	int rc;
	int starved;            /* could not start for lack of blocks */
	int active;             /* took part in this round */
};

static inline double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* ---- engine.c, cache.c, root.c --------------------------------------- */

/* Blocks for n tokens. */
uint32_t sc_engine_blocks_for(const sc_engine *e, uint64_t n);
/* A pool of at least need blocks and, for a pool split by windows,
 * win_need window slots (0: one per block; cached prompts give way
 * first). A fixed pool has a slot per block. */
int sc_engine_ensure_blocks(sc_engine *e, uint64_t need, uint64_t win_need);
/* The window slots a fork whose private blocks are at most need holds at
 * any time: with windows released (free_windows, a sliding-window model),
 * min(need, ceil(window / B) + 1) (the blocks from its window's first row
 * to the row it writes); else need. */
uint32_t sc_engine_win_slots(const sc_engine *e, uint32_t need);
/* Whether pool p has need blocks and win_need window slots. */
int sc_engine_pool_fits(const kv_pool *p, uint64_t need, uint64_t win_need);
/* Notes the pool's blocks in use in e->peak_in_use. */
void sc_engine_track_peak(sc_engine *e);
/* A sample's sequence s releases the windowed layers' rows no later row
 * reads (engine free_windows on, a sliding-window model). */
void sc_engine_drop_windows(sc_engine *e, kv_seq *s);
/* The prefix cache: a root prefilled from the cached prompt sharing its
 * longest block-aligned prefix (*reused: the tokens forked); keeping a
 * prompt's complete root; a batched job j starting from a cached prompt
 * (returns the tokens forked, 0: none). */
int sc_cache_prefill(sc_engine *e, const int32_t *prompt, size_t n,
		      kv_seq *root, float *logits, int *reused);
void sc_cache_keep(sc_engine *e, const int32_t *prompt, size_t n,
		   const kv_seq *root);
int sc_cache_start(sc_engine *e, sc_job *j);
/* Cached prompts give way until need blocks (win_need window slots)
 * could be free. */
void sc_cache_room(sc_engine *e, uint64_t need, uint64_t win_need);
/* QERR_ARG unless the engine has a fixed pool. */
int sc_engine_need_fixed(const sc_engine *e);
/* Roots: the one with id (NULL: none); a new slot (sc_root_end commits
 * or drops it; it may move the others). */
sc_root *sc_root_find(const sc_engine *e, uint32_t id);
int sc_root_new(sc_engine *e, sc_root **out);
void sc_root_end(sc_engine *e, sc_root *r, int keep);
/* Checks a prefill of prompt from root base's first n_base tokens. */
int sc_root_base_check(const sc_engine *e, const sc_root *base, uint32_t base_id,
		  uint32_t n_base, const int32_t *prompt, size_t n);
/* Checks a root reference and builds the view forks fork from (linking
 * another worker's pool when it names one). */
int sc_root_view(sc_engine *e, const sc_root_ref *root, kv_seq *view);

/* ---- fork.c ------------------------------------------------------- */

/* Tokens per confidence window. */
int sc_fork_conf_window(const sc_params *p);
/* The engine's grammar books, made for its first grammar: the
 * vocabulary's trie, the token that opens the model's reasoning, the
 * whitespace tokens. 0, or QERR_NOMEM. */
int sc_grammar_vocab(sc_engine *e);
/* Whether job j's forks wait for the reasoning (see fork.c): into
 * j->g_wait; 0, or QERR_NOMEM. */
int sc_grammar_waits(const sc_engine *e, sc_job *j);
/* A fork's grammar at its start (its job's g_wait). */
void sc_fork_grammar_init(fork_state *f);
/* Draws the next token of f and records it; marks f done on a stop. */
int sc_fork_step(sc_engine *e, const sc_params *p, fork_state *f);
/* The next tokens of the n forks of a decode round drawn ahead, over the
 * engine's threads (each fork's draw depends only on its logits, its
 * params and its RNG: the same token on any thread); sc_fork_step then
 * takes them. Forks with a grammar, of a failed job or done draw in
 * sc_fork_step. */
void sc_fork_draw(sc_engine *e, fork_state **act, int n);
/* Marks a finished sample (answer extracted) and reports it to cb. */
int sc_fork_finish(fork_state *f, int w, sc_sample_cb cb, void *ctx);
/* The online filter: its verdict on f after a drawn token; arming it
 * once the warm-up's samples are in. */
void sc_fork_filter_check(const sc_filter *flt, fork_state *f, int w);
int sc_fork_filter_arm(sc_filter *flt, const sc_sample *out, int prefix);
/* The stopper: pushes one finished sample; pushes those extending the
 * prefix (done[i]: out[i] finished). 0 or an error. */
int sc_fork_stopper_push(sc_stopper *st, const sc_sample *x);
int sc_fork_stopper_advance(sc_stopper *st, const sc_sample *out, int n,
		       const int *done);

/* ---- batch.c -------------------------------------------------------- */

/* A batch over e's pool, fixed or not. */
int sc_batch_create(sc_engine *e, const sc_batch_params *p, sc_batch **out);
/* Adds the job ji describes (*out: it, may be NULL). */
int sc_batch_add(sc_batch *b, const job_init *ji, sc_job **out);
/* Runs the job ji describes alone in a batch of its own, to its end. */
int sc_batch_solo(sc_engine *e, job_init *ji, sc_job_stats *st);

#endif
