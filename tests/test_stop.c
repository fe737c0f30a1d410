/* stop: the early-stopping rules on constructed answer sequences (a table
 * of named cases), exact's guarantee checked exhaustively on small N, the
 * Beta posterior against exact fractions, parsing; the wave sizes (a table,
 * and exhaustively: no smaller wave could decide). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qerr.h"
#include "sc/stop.h"
#include "sc/vote.h"

/* Answers are one character each; '.' = no answer. */
struct scase {
	const char *name;
	const char *rule;
	const char *answers; /* all n of them, in index order */
	int k;               /* expected stop prefix */
	int fired;           /* stopped before n */
};

static const struct scase scases[] = {
	/* none */
	{"none_unanimous", "none", "AAAAAAAA", 8, 0},
	{"none_all_missing", "none", "....", 4, 0},
	/* exact: a >= r and a beats the runner-up + r (ties by first index) */
	{"exact_unanimous_even", "exact", "AAAAAAAA", 4, 1},
	{"exact_unanimous_odd", "exact", "AAAAAAA", 4, 1},
	{"exact_n1", "exact", "A", 1, 0},
	{"exact_split_then_lead", "exact", "ABAAAAAA", 5, 1},
	/* A B B: B leads 2-1 with first index 1, r = 1 at k = 3 of 4: A could
	 * reach 2 and wins the tie by first index 0 -> not yet */
	{"exact_tie_by_first_index", "exact", "ABBB", 4, 0},
	/* A B A: a = 2, b = 1, r = 1: B could tie at 2 but A came first */
	{"exact_tie_favours_leader", "exact", "ABAC", 3, 1},
	/* A A of 4: two unseen B's would tie, and lose on first index */
	{"exact_half_unanimous", "exact", "AABB", 2, 1},
	{"exact_late_swing", "exact", "AAABBBBB", 8, 0},
	{"exact_all_missing", "exact", "......", 6, 0},
	{"exact_missing_then_lead", "exact", "...AAA", 5, 1},
	{"exact_missing_lead_short", "exact", ".AAAAA", 4, 1},
	/* beta:0.95: unanimity needs 4 (1 - 2^-5 = 0.96875; 3 gives 0.9375) */
	{"beta_unanimous", "beta", "AAAAAAAAAAAA", 4, 1},
	{"beta_custom_threshold", "beta:0.99", "AAAAAAAAAAAA", 6, 1},
	{"beta_one_dissent", "beta", "ABAAAAAAAAAA", 7, 1},
	{"beta_tie_never", "beta", "ABABABAB", 8, 0},
	{"beta_late_swing", "beta", "AAABBBBBBBBB", 12, 0},
	{"beta_all_missing", "beta", "........", 8, 0},
	{"beta_missing_ignored", "beta", ".A.A.A.A....", 8, 1},
	/* window */
	{"window_unanimous", "window", "AAAAAAAA", 4, 1},
	{"window_2", "window:2", "ABCC", 4, 0},
	{"window_2_early", "window:2", "ABBC", 3, 1},
	{"window_broken_by_missing", "window:3", "AA.AAA..", 6, 1},
	{"window_all_missing", "window:1", "....", 4, 0},
	{"window_1_first", "window:1", ".ABC", 2, 1},
	/* window stops on the last w; the vote still counts the prefix */
	{"window_late_swing", "window:3", "ABABBB", 6, 0},
};

static int run_case(const char *rule, const char *ans, int *fired,
		    stop_state *out)
{
	stop_rule r;
	stop_state s;
	int n = (int)strlen(ans), rc = 0, k;

	assert_int_equal(stop_parse(rule, &r), QERR_OK);
	assert_int_equal(stop_init(&s, &r, n), QERR_OK);
	for (int i = 0; i < n && rc == 0; i++) {
		char a[2] = {ans[i] == '.' ? 0 : ans[i], 0};

		rc = stop_push(&s, a);
		assert_true(rc >= 0);
	}
	assert_int_equal(rc, 1);
	*fired = s.fired;
	k = s.k;
	if (out)
		*out = s;
	else
		stop_fini(&s);
	return k;
}

static void test_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(scases) / sizeof(scases[0]); i++) {
		const struct scase *c = &scases[i];
		int fired, k = run_case(c->rule, c->answers, &fired, NULL);

		if (k != c->k || fired != c->fired)
			fail_msg("%s: stopped at %d (fired %d), expected %d "
				 "(%d)", c->name, k, fired, c->k, c->fired);
	}
}

/* vote_tally's winner of answers ('.' none) as a character, 0 for none. */
static char winner(const char *ans, int n)
{
	const char *a[16];
	char one[16][2];
	vote_result vr;
	char w;

	for (int i = 0; i < n; i++) {
		one[i][0] = ans[i] == '.' ? 0 : ans[i];
		one[i][1] = 0;
		a[i] = one[i];
	}
	assert_int_equal(vote_tally(a, (size_t)n, &vr), QERR_OK);
	w = vr.winner == VOTE_NONE ? 0 : vr.entries[0].answer[0];
	vote_result_fini(&vr);
	return w;
}

/*
 * Every sequence over {A, B, C, none} for n = 1..7: when exact stops at k,
 * every completion of the prefix has the prefix's winner (checked by
 * enumerating completions over {A, B, C, D, none}, D unseen); and when it
 * does not stop at k, some completion changes the winner (it stops as
 * early as it may).
 */
static void test_exact_exhaustive(void **state)
{
	static const char alpha[] = "ABC.", more[] = "ABCD.";

	(void)state;
	for (int n = 1; n <= 7; n++) {
		long total = 1;

		for (int i = 0; i < n; i++)
			total *= 4;
		for (long code = 0; code < total; code++) {
			char ans[8] = {0};
			stop_rule r = {STOP_EXACT, 0.95, 4};
			stop_state s;
			long c = code;

			for (int i = 0; i < n; i++, c /= 4)
				ans[i] = alpha[c % 4];
			assert_int_equal(stop_init(&s, &r, n), 0);
			for (int k = 1; k <= n; k++) {
				char a[2] = {ans[k - 1] == '.' ? 0 : ans[k - 1], 0};
				int d = stop_push(&s, a), rest = n - k, same = 1;
				char w = winner(ans, k);
				long m = 1;

				for (int i = 0; i < rest; i++)
					m *= 5;
				for (long cc = 0; cc < m && same; cc++) {
					char full[8];
					long x = cc;

					memcpy(full, ans, (size_t)k);
					for (int i = k; i < n; i++, x /= 5)
						full[i] = more[x % 5];
					same = winner(full, n) == w;
				}
				if (d != same)
					fail_msg("n %d, %.*s: exact says %d, "
						 "completions say %d", n, k,
						 ans, d, same);
				if (d)
					break;
			}
			stop_fini(&s);
		}
	}
}

/* The weighted winner of answers ans[0..n) ('A'..'D', '.' none) with
 * weights w: largest mass, ties to the lowest first index (0: none). */
static char wwinner(const char *ans, const uint64_t *w, int n)
{
	uint64_t mass[4] = {0};
	int first[4] = {-1, -1, -1, -1}, best = -1;

	for (int i = 0; i < n; i++) {
		int a = ans[i] - 'A';

		if (ans[i] == '.')
			continue;
		mass[a] += w[i];
		if (first[a] < 0)
			first[a] = i;
	}
	for (int a = 0; a < 4; a++)
		if (first[a] >= 0 &&
		    (best < 0 || mass[a] > mass[best] ||
		     (mass[a] == mass[best] && first[a] < first[best])))
			best = a;
	return best < 0 ? 0 : (char)('A' + best);
}

/* Weighted exact: every sequence over {A, B, none} x weights {0, 1/2, 1}
 * for n = 1..4 — it stops exactly when no completion (answers A..D or
 * none, any of those weights) changes the weighted winner; the local
 * winner agrees with vote_tally_weighted. */
static void test_exact_weighted_exhaustive(void **state)
{
	static const char alpha[] = "AB.", more[] = "ABCD.";
	static const uint64_t wv[3] = {0, STOP_WEIGHT_ONE / 2,
				       STOP_WEIGHT_ONE};

	(void)state;
	for (int n = 1; n <= 4; n++) {
		long total = 1;

		for (int i = 0; i < n; i++)
			total *= 9;
		for (long code = 0; code < total; code++) {
			char ans[5] = {0};
			uint64_t w[5] = {0};
			stop_rule r = {STOP_EXACT, 0.95, 4};
			stop_state s;
			long c = code;

			for (int i = 0; i < n; i++, c /= 9) {
				ans[i] = alpha[c % 3];
				w[i] = wv[(c / 3) % 3];
			}
			{
				const char *a[4];
				char one[4][2];
				vote_result vr;

				for (int i = 0; i < n; i++) {
					one[i][0] = ans[i] == '.' ? 0 : ans[i];
					one[i][1] = 0;
					a[i] = one[i];
				}
				assert_int_equal(vote_tally_weighted(
					a, w, (size_t)n, &vr), 0);
				assert_int_equal(vr.winner == VOTE_NONE
						 ? 0 : vr.entries[0].answer[0],
						 wwinner(ans, w, n));
				vote_result_fini(&vr);
			}
			assert_int_equal(stop_init_weighted(&s, &r, n), 0);
			for (int k = 1; k <= n; k++) {
				char a[2] = {ans[k - 1] == '.' ? 0 : ans[k - 1], 0};
				int d = stop_push_w(&s, a, w[k - 1]), same = 1;
				char win = wwinner(ans, w, k);
				long m = 1;

				for (int i = k; i < n; i++)
					m *= 15;
				for (long cc = 0; cc < m && same; cc++) {
					char full[5];
					uint64_t fw[5];
					long x = cc;

					memcpy(full, ans, (size_t)k);
					memcpy(fw, w, sizeof(fw));
					for (int i = k; i < n; i++, x /= 15) {
						full[i] = more[x % 5];
						fw[i] = wv[(x / 5) % 3];
					}
					same = wwinner(full, fw, n) == win;
				}
				if (d != same)
					fail_msg("n %d, %.*s: weighted exact says "
						 "%d, completions say %d", n, k,
						 ans, d, same);
				if (d)
					break;
			}
			stop_fini(&s);
		}
	}
}

static void test_beta_posterior(void **state)
{
	static const struct {
		uint32_t a, b;
		double p; /* exact: sum of C(m, j<=a) / 2^m, m = a+b+1 */
	} t[] = {
		{0, 0, 0.5},
		{1, 0, 0.75},
		{3, 0, 0.9375},
		{4, 0, 0.96875},
		{2, 1, 11.0 / 16},
		{5, 2, 219.0 / 256},
		{3, 3, 0.5},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		assert_true(stop_beta_posterior(t[i].a, t[i].b) == t[i].p);
	/* symmetry and large counts (scaled terms): P(a,b) + P(b,a) = 1 */
	assert_true(stop_beta_posterior(3000, 2900) > 0.9);
	assert_true(stop_beta_posterior(3000, 2900) < 1.0);
	{
		double s = stop_beta_posterior(3000, 2900) +
			   stop_beta_posterior(2900, 3000);

		assert_true(s > 1 - 1e-12 && s < 1 + 1e-12);
	}
	assert_true(stop_beta_posterior(40000, 0) == 1.0);
}

static void test_min_prefix_and_names(void **state)
{
	static const struct {
		const char *in, *name;
		int n, minp;
	} t[] = {
		{"none", "none", 16, 16},
		{"exact", "exact", 16, 8},
		{"exact", "exact", 17, 9},
		{"beta", "beta:0.95", 16, 4},
		{"beta:0.95", "beta:0.95", 3, 3},
		{"beta:0.99", "beta:0.99", 32, 6},
		{"window", "window:4", 16, 4},
		{"window:8", "window:8", 5, 5},
	};
	static const char *bad[] = {"", "nonе", "exact:1", "beta:0.5",
				    "beta:1", "beta:x", "beta:", "window:0",
				    "window:-3", "window:4x", "majority"};
	char buf[STOP_NAME_MAX];
	stop_rule r;

	(void)state;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		assert_int_equal(stop_parse(t[i].in, &r), QERR_OK);
		assert_string_equal(stop_name(&r, buf, sizeof(buf)), t[i].name);
		assert_int_equal(stop_min_prefix(&r, t[i].n), t[i].minp);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (stop_parse(bad[i], &r) != QERR_RANGE)
			fail_msg("'%s' parsed", bad[i]);
	/* pushing past the decision is refused */
	{
		stop_state s;

		assert_int_equal(stop_parse("window:1", &r), 0);
		assert_int_equal(stop_init(&s, &r, 4), 0);
		assert_int_equal(stop_push(&s, "7"), 1);
		assert_int_equal(stop_push(&s, "7"), -QERR_ARG);
		assert_string_equal(stop_leader(&s), "7");
		stop_fini(&s);
	}
}

/* Many distinct answers (the hash chains) keep the leader right. */
static void test_many_answers(void **state)
{
	stop_rule r = {STOP_NONE, 0.95, 4};
	stop_state s;
	char a[16];
	int n = 5000;

	(void)state;
	assert_int_equal(stop_init(&s, &r, n), 0);
	for (int i = 0; i < n; i++) {
		/* answer i % 1000, except that "42" comes every 7th time */
		snprintf(a, sizeof(a), "%d", i % 7 ? i % 1000 : 42);
		assert_true(stop_push(&s, a) >= 0);
	}
	assert_string_equal(stop_leader(&s), "42");
	assert_int_equal(stop_leader_count(&s), 715 + 4);
	assert_int_equal(s.n_e, 1000);
	stop_fini(&s);
}

/* ---- waves --------------------------------------------------------------- */

struct wcase {
	const char *rule;
	int n;
	const char *seen; /* the answers pushed so far */
	int wave;         /* stop_wave after them */
};

static const struct wcase wcases[] = {
	/* exact: the leader (or a new answer) takes every next sample */
	{"exact", 16, "", 8},
	{"exact", 15, "", 8},
	{"exact", 4, "..", 1},     /* ..A of 4: an unseen answer ties, loses */
	{"exact", 16, "AAAAAB", 3}, /* 8 vs 1 + 7: a tie A wins by index */
	{"exact", 8, "AB", 3},
	{"exact", 8, "BAA", 3},    /* BAAAA ties 4 vs 1 + 3 and B came first */
	{"exact", 6, "ABC", 2},    /* ABCAA: a = 3, r = 1, 3 > 1 + 1 */
	/* beta:0.95: P(4, 0) = 31/32 is the first over 0.95 */
	{"beta:0.95", 16, "", 4},
	{"beta:0.95", 16, "AAA", 1},
	{"beta:0.95", 16, "AB", 5}, /* P(6, 1) = 1 - 9/256 */
	{"beta:0.95", 16, "BAB", 4}, /* B: 6 vs 1 */
	{"beta:0.95", 4, "AB", 2},  /* never fires: the budget decides */
	{"beta:0.95", 16, "...", 4},
	/* window:4: continue the last answer's run */
	{"window:4", 16, "", 4},
	{"window:4", 16, "AA", 2},
	{"window:4", 16, "AAB", 3},
	{"window:4", 16, "AA.", 4},
	{"window:4", 5, "AB", 3},
	{"window:1", 16, ".", 1},
	/* none: the rest */
	{"none", 16, "AAA", 13},
};

/* s after pushing seen; 1 if it decided. */
static int push_all(stop_state *s, const char *rule, int n, int weighted,
		    const char *seen)
{
	stop_rule r;
	int d = 0;

	assert_int_equal(stop_parse(rule, &r), QERR_OK);
	assert_int_equal(weighted ? stop_init_weighted(s, &r, n)
				  : stop_init(s, &r, n), QERR_OK);
	for (const char *c = seen; *c; c++) {
		char a[2] = {*c == '.' ? 0 : *c, 0};
		/* weighted: C weighs a half, the others a full unit */
		uint64_t w = *c == 'C' ? STOP_WEIGHT_ONE / 2 : STOP_WEIGHT_ONE;

		if (!d)
			d = weighted ? stop_push_w(s, a, w) : stop_push(s, a);
		assert_true(d >= 0);
	}
	return d;
}

static void test_wave_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(wcases) / sizeof(wcases[0]); i++) {
		const struct wcase *c = &wcases[i];
		stop_state s;
		int w;

		assert_int_equal(push_all(&s, c->rule, c->n, 0, c->seen), 0);
		w = stop_wave(&s);
		if (w != c->wave)
			fail_msg("%s n %d after '%s': wave %d, expected %d",
				 c->rule, c->n, c->seen, w, c->wave);
		/* the horizon: k + mult x wave, at most n; n without waves */
		assert_int_equal(stop_horizon(&s, 0), c->n);
		assert_int_equal(stop_horizon(&s, 1), s.k + w);
		assert_int_equal(stop_horizon(&s, 64), c->n);
		stop_fini(&s);
	}
	{
		stop_state s;

		assert_int_equal(push_all(&s, "exact", 4, 0, "AA"), 1);
		assert_int_equal(s.fired, 1);
		assert_int_equal(stop_wave(&s), 0);
		assert_int_equal(stop_horizon(&s, 1), 2);
		stop_fini(&s);
	}
}

/* The first push (1-based) of tail after seen that decides; 0: none. */
static int decides_at(const char *rule, int n, int weighted, const char *seen,
		      const char *tail)
{
	stop_state s;
	int at = 0;

	assert_int_equal(push_all(&s, rule, n, weighted, seen), 0);
	for (int i = 0; tail[i] && !at; i++) {
		char a[2] = {tail[i] == '.' ? 0 : tail[i], 0};
		int d = weighted ? stop_push_w(&s, a, STOP_WEIGHT_ONE)
				 : stop_push(&s, a);

		assert_true(d >= 0);
		if (d)
			at = i + 1;
	}
	stop_fini(&s);
	return at;
}

/*
 * Every undecided prefix over {A, B, C, none} for n = 1..6, every rule:
 * no completion over {A, B, C, D, none} (D unseen; full weights) decides
 * before the wave is complete — so no smaller wave could have fired —
 * and for a majority vote some completion decides exactly at it.
 */
static void test_wave_exhaustive(void **state)
{
	static const char *const rules[] = {"none", "exact", "beta:0.95",
					    "beta:0.7", "window:2",
					    "window:3"};
	static const char alpha[] = "ABC.", more[] = "ABCD.";

	(void)state;
	for (int weighted = 0; weighted < 2; weighted++)
	for (size_t ri = 0; ri < sizeof(rules) / sizeof(rules[0]); ri++)
	for (int n = 1; n <= 6; n++)
	for (int k = 0; k < n; k++) {
		long total = 1;

		for (int i = 0; i < k; i++)
			total *= 4;
		for (long code = 0; code < total; code++) {
			char seen[8] = {0}, tail[8] = {0};
			stop_state s;
			long c = code, m = 1;
			int w, exact_hit = 0;

			for (int i = 0; i < k; i++, c /= 4)
				seen[i] = alpha[c % 4];
			if (push_all(&s, rules[ri], n, weighted, seen)) {
				stop_fini(&s);
				continue; /* decided at k or before */
			}
			w = stop_wave(&s);
			stop_fini(&s);
			assert_true(w >= 1 && w <= n - k);
			for (int i = 0; i < w; i++)
				m *= 5;
			for (long cc = 0; cc < m; cc++) {
				long x = cc;
				int at;

				for (int i = 0; i < w; i++, x /= 5)
					tail[i] = more[x % 5];
				at = decides_at(rules[ri], n, weighted, seen, tail);
				if (at && at < w)
					fail_msg("%s n %d weighted %d after '%s': "
						 "'%s' decides at %d < wave %d",
						 rules[ri], n, weighted, seen,
						 tail, at, w);
				exact_hit |= at == w;
			}
			if (!weighted && !exact_hit)
				fail_msg("%s n %d after '%s': no completion "
					 "decides at the wave %d", rules[ri], n,
					 seen, w);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_exact_exhaustive),
		cmocka_unit_test(test_exact_weighted_exhaustive),
		cmocka_unit_test(test_beta_posterior),
		cmocka_unit_test(test_min_prefix_and_names),
		cmocka_unit_test(test_many_answers),
		cmocka_unit_test(test_wave_table),
		cmocka_unit_test(test_wave_exhaustive),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
