/*
 * params — the checks and names of sc_params (see params.h).
 */
#include "sc/params.h"

#include <string.h>

#include "qerr.h"

const char *sc_mode_name(int mode)
{
	switch (mode) {
	case SC_RESET: return "reset";
	case SC_PAGED: return "paged";
	case SC_BATCHED: return "batched";
	default: return "unknown";
	}
}

int sc_mode_parse(const char *s)
{
	for (int m = SC_RESET; m <= SC_BATCHED; m++)
		if (!strcmp(s, sc_mode_name(m)))
			return m;
	return -1;
}

int sc_vote_parse(const char *s)
{
	if (!strcmp(s, "majority"))
		return SC_VOTE_MAJORITY;
	if (!strcmp(s, "confidence"))
		return SC_VOTE_CONFIDENCE;
	return -1;
}

const char *sc_vote_name(int vote)
{
	return vote == SC_VOTE_CONFIDENCE ? "confidence" : "majority";
}

int sc_stop_strs_add(sc_stop_strs *q, const char *s, size_t len)
{
	if (q->n < 0 || q->n >= SC_STOP_STR_MAX)
		return qerr_fail(QERR_RANGE, "at most %d stop strings",
				 SC_STOP_STR_MAX);
	if (len < 1 || len > SC_STOP_STR_LEN || memchr(s, 0, len))
		return qerr_fail(QERR_RANGE, "a stop string must be 1..%d "
				 "bytes without NUL", SC_STOP_STR_LEN);
	memcpy(q->s[q->n], s, len);
	q->len[q->n++] = (uint8_t)len;
	return 0;
}

int sc_params_check(const sc_params *p)
{
	int rc = samp_params_check(&p->sp);

	if (rc)
		return rc;
	if (p->stop_strs.n < 0 || p->stop_strs.n > SC_STOP_STR_MAX)
		return qerr_fail(QERR_RANGE, "%d stop strings (at most %d)",
				 p->stop_strs.n, SC_STOP_STR_MAX);
	for (int i = 0; i < p->stop_strs.n; i++)
		if (p->stop_strs.len[i] < 1 ||
		    p->stop_strs.len[i] > SC_STOP_STR_LEN ||
		    memchr(p->stop_strs.s[i], 0, p->stop_strs.len[i]))
			return qerr_fail(QERR_RANGE, "stop string %d: 1..%d "
					 "bytes without NUL", i,
					 SC_STOP_STR_LEN);
	if (p->n < 1 || p->n > 65536)
		return qerr_fail(QERR_RANGE, "n = %d must be in 1..65536", p->n);
	if (p->max_new < 1 || p->max_new > 1 << 20)
		return qerr_fail(QERR_RANGE, "max_new_tokens = %d must be in "
				 "1..1048576", p->max_new);
	if (p->mode < SC_RESET || p->mode > SC_BATCHED)
		return qerr_fail(QERR_RANGE, "unknown mode %d", p->mode);
	if (p->vote != SC_VOTE_MAJORITY && p->vote != SC_VOTE_CONFIDENCE)
		return qerr_fail(QERR_RANGE, "unknown vote %d", p->vote);
	if (p->filter_warmup < 0 || p->filter_warmup > 65536 ||
	    !(p->filter_pct >= 0 && p->filter_pct <= 100))
		return qerr_fail(QERR_RANGE, "confidence filter: warm-up %d "
				 "must be in 0..65536, percentile %g in "
				 "0..100", p->filter_warmup, p->filter_pct);
	if (p->conf_window < 0 || p->conf_window > SC_CONF_WINDOW_MAX)
		return qerr_fail(QERR_RANGE, "confidence window %d must be in "
				 "1..%d", p->conf_window, SC_CONF_WINDOW_MAX);
	return stop_rule_check(&p->stop);
}
