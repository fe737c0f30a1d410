/*
 * stop — when self-consistency may stop sampling: early-stopping rules
 * decided over the samples' answers in sample-INDEX order.
 *
 * implements: stop_rule parsing/printing, the incremental decision
 * (stop_state: push the answer of sample k once samples 0..k-1 are pushed)
 * and stop_min_prefix (the earliest prefix a rule can fire at, which the
 * engine uses as the number of samples it keeps in flight).
 *
 * DETERMINISM. A rule sees only the answers of a PREFIX of the samples in
 * index order: the decision for prefix k is taken once samples 0..k-1 have
 * all finished, whatever order they finished in, and a stopped request
 * reports exactly samples 0..k-1 and votes over them. A sample's bytes
 * depend only on (model, prompt, params, seed, index), so the stop prefix,
 * the reported samples and the answer are the same bytes whatever the
 * timing, batch, N-split, worker count or host. Samples past the prefix
 * that finished or ran meanwhile are cancelled work: counted as generated
 * tokens, never reported.
 *
 * RULES (n = the budget N; a = the leader's count, b = the runner-up's,
 * both among the first k answers; the leader is vote.h's winner: highest
 * count, ties to the lowest first index; r = n - k outstanding):
 *   none         never stops before n.
 *   exact        stops when no assignment of the r outstanding samples can
 *                change vote_tally's winner over all n: a >= 1, a >= r (an
 *                answer not seen yet would come after the leader's first
 *                index, so it loses a tie), and for the strongest other
 *                answer (count b, first index fb): a > b + r, or a == b + r
 *                and the leader's first index < fb. The answer is then
 *                provably the one running all n would give.
 *   beta[:t]     Adaptive-Consistency (Aggarwal et al. 2023): stops when
 *                P(p_leader > p_runner-up | a, b) >= t under a uniform Beta
 *                prior, i.e. P(Binomial(a + b + 1, 1/2) <= a) >= t. t in
 *                (0.5, 1), default 0.95. Needs a > b (P = 1/2 on a tie).
 *                Computed with IEEE double +, *, / only (no libm), in a
 *                fixed order: the same bits on every ISA.
 *   window[:w]   Early-Stopping Self-Consistency (Li et al. 2024): stops
 *                when the last w samples of the prefix (indices k-w..k-1)
 *                all have the same answer. w in 1..65536, default 4.
 * Samples without an answer count for nobody (and break a window). Every
 * rule stops at k == n. The answer of a stopped request is the vote over
 * samples 0..k-1 (for window the window's answer is that vote's leader
 * except in contrived cases such as A B A C C with w = 2: the vote wins).
 */
#ifndef QUORUM_STOP_H
#define QUORUM_STOP_H

#include <stddef.h>
#include <stdint.h>

enum stop_kind { STOP_NONE = 0, STOP_EXACT = 1, STOP_BETA = 2,
		 STOP_WINDOW = 3 };

typedef struct stop_rule {
	int kind;         /* enum stop_kind */
	double threshold; /* beta */
	int window;       /* window */
} stop_rule;

#define STOP_BETA_DEFAULT 0.95
#define STOP_WINDOW_DEFAULT 4
/* The default rule: exact (never changes an answer). */
#define STOP_RULE_DEFAULT ((stop_rule){STOP_EXACT, STOP_BETA_DEFAULT, \
				       STOP_WINDOW_DEFAULT})
#define STOP_RULE_LIST "none, exact, beta[:T], window[:W]"
#define STOP_NAME_MAX 32

/* Parses "none", "exact", "beta", "beta:0.9", "window", "window:4".
 * QERR_OK, or QERR_RANGE with a detail naming what is wrong. */
int stop_parse(const char *s, stop_rule *out);
/* QERR_OK or QERR_RANGE (threshold, window, kind out of range). */
int stop_rule_check(const stop_rule *r);
/* The canonical name ("beta:0.95", "window:4", "exact") into buf. */
const char *stop_name(const stop_rule *r, char *buf, size_t cap);

/* P(Binomial(a + b + 1, 1/2) <= a): the Beta posterior that the answer
 * seen a times is more likely than the one seen b times. */
double stop_beta_posterior(uint32_t a, uint32_t b);

/* The smallest prefix at which r can stop a request of n samples (all
 * answers equal); n for none. */
int stop_min_prefix(const stop_rule *r, int n);

/* The largest stop-waves multiplier (sc_params.stop_waves). */
#define STOP_WAVES_MAX 64

/* A weighted vote's unit: a sample's weight is in [0, STOP_WEIGHT_ONE]
 * (fixed point, 2^-32), so sums are exact integers. */
#define STOP_WEIGHT_ONE (1ull << 32)

/* One request's decision state. */
typedef struct stop_entry {
	char *answer;        /* owned */
	uint64_t mass;       /* count, or the sum of weights */
	uint32_t count;
	uint32_t first;      /* lowest sample index with it */
	uint32_t next;       /* hash chain, UINT32_MAX ends */
} stop_entry;

typedef struct stop_state {
	stop_rule rule;
	int n;               /* budget */
	int k;               /* samples pushed (the prefix) */
	int fired;           /* the rule stopped the request at prefix k < n */
	stop_entry *e;       /* (n_e) distinct answers, in first-seen order */
	uint32_t n_e, cap_e;
	uint32_t *head;      /* (n_head) hash buckets */
	uint32_t n_head;
	int32_t leader, second; /* entries; -1 none */
	int32_t last;        /* entry of sample k-1; -1 no answer */
	int run;             /* samples ending at k-1 with entry `last` */
	double posterior;    /* beta: at the last push (0 until a leader) */
	uint64_t unit;       /* the most one sample can add to a mass */
} stop_state;

/* QERR_OK, QERR_RANGE (bad rule, n < 1), QERR_NOMEM. */
int stop_init(stop_state *s, const stop_rule *r, int n);
/*
 * As stop_init for a WEIGHTED vote (vote_tally_weighted: masses are sums
 * of weights in [0, STOP_WEIGHT_ONE], the leader the largest mass, ties to
 * the lowest first index): exact then stops when no assignment of the r
 * outstanding samples, each adding at most STOP_WEIGHT_ONE, can change the
 * weighted winner; beta and window look at the counts of the two leading
 * entries / at agreement as before.
 */
int stop_init_weighted(stop_state *s, const stop_rule *r, int n);
/* stop_push with the sample's weight (weighted states; 1 otherwise). */
int stop_push_w(stop_state *s, const char *answer, uint64_t weight);
void stop_fini(stop_state *s);
/*
 * Pushes the answer of sample s->k (NULL or "" = no answer). Returns 1 if
 * the request is decided at the new prefix (s->k samples: the rule fired,
 * s->fired set, or k == n), 0 to go on, or a
 * negative -QERR_NOMEM. Pushing after it fired (or past n) is QERR_ARG,
 * returned negated.
 */
int stop_push(stop_state *s, const char *answer);
/* Leader / runner-up counts among the pushed answers (0 when none). */
uint32_t stop_leader_count(const stop_state *s);
uint32_t stop_second_count(const stop_state *s);
/* The leader's answer ("" when none): vote_tally's winner over the
 * pushed answers. */
const char *stop_leader(const stop_state *s);

/*
 * WAVES. stop_wave: the fewest further samples (indices k..k+m-1) after
 * which the rule could decide: the least m in 1..n-k such that some
 * answers of those m samples make the rule fire at prefix k + m (k + m
 * == n always decides); 0 once decided (fired, or k == n). Pure: reads s.
 *   exact   all m to the leader (a new answer when none): the leader's
 *           mass grows by m units, the outstanding shrink by m — the
 *           fastest way to a safe lead, so m is exact (weighted too).
 *   beta    all m agreeing (with the leader, the runner-up or any other
 *           answer, new ones included): the fewest after which the
 *           leader's count beats the runner-up's and the posterior
 *           reaches the threshold. Exact for a majority vote (adding to
 *           the leader dominates); weighted: the fewest over agreeing
 *           completions.
 *   window  W - the current run of the last answer (W after a sample
 *           without one).
 *   none    n - k.
 * Since no completion shorter than the wave can decide, every sample of
 * a wave is reported: starting only samples below the horizon wastes no
 * token, and the horizon never moves back as the prefix grows.
 *
 * stop_horizon: the samples 0..h-1 a request may have started under
 * waves of mult (1..STOP_WAVES_MAX) times the fewest: k + mult * wave,
 * at most n; n for mult 0 (no waves: the caller's width alone) and k
 * once decided.
 */
int stop_wave(const stop_state *s);
int stop_horizon(const stop_state *s, int mult);

#endif
