/*
 * prof — the counts of prof.h, in one static table.
 */
#include "kernels/prof.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

int prof_active;
static int mode;
static prof_report rep;
static char cur_label[PROF_LABEL_MAX];

void prof_enable(int m)
{
	memset(&rep, 0, sizeof(rep));
	cur_label[0] = '\0';
	mode = m;
	prof_active = m == PROF_ALL;
}

void prof_decode(int in)
{
	if (mode == PROF_DECODE)
		prof_active = in;
}

int64_t prof_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void prof_add(int phase, int64_t ns)
{
	if (prof_active && phase >= 0 && phase < PROF_PHASES)
		rep.ns[phase] += ns;
}

void prof_label(const char *label)
{
	snprintf(cur_label, sizeof(cur_label), "%s", label ? label : "");
}

static prof_shape *shape_of(prof_report *r, const char *label, int K, int N,
			    uint32_t wtype)
{
	for (int i = 0; i < r->n_shapes; i++)
		if (r->shape[i].K == K && r->shape[i].N == N &&
		    !strcmp(r->shape[i].label, label))
			return &r->shape[i];
	if (r->n_shapes == PROF_SHAPES)
		return NULL;
	prof_shape *s = &r->shape[r->n_shapes++];
	memset(s, 0, sizeof(*s));
	snprintf(s->label, sizeof(s->label), "%s", label);
	s->K = K;
	s->N = N;
	s->wtype = wtype;
	return s;
}

void prof_matmul(int K, int N, uint32_t wtype, int M, int64_t ns,
		 double bytes)
{
	prof_shape *s;

	if (!prof_active)
		return;
	rep.ns[PROF_MATMUL] += ns;
	if (!(s = shape_of(&rep, cur_label, K, N, wtype)))
		return;
	s->calls++;
	s->rows += (uint64_t)M;
	s->ns += ns;
	s->macs += (double)K * N * M;
	s->bytes += bytes;
}

void prof_get(prof_report *out)
{
	*out = rep;
}
