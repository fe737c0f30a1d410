/* roots — prefix roots and the prefix cache: where a prompt is
 * prefilled, LRU eviction, cross-host copies (sched_int.h).
 *
 * Prefix reuse (issue 16). Every cached root's prompt is in s->index
 * (pfx: chained hashes of its full blocks, verified against the tokens).
 * A prompt that is not cached whole starts from the root sharing its
 * longest block-aligned prefix: its holder forks that root's first k
 * tokens and prefills only the rest (Prefill.base_root_id), and the new
 * root's blocks join the cache. Roots forked from one another share
 * blocks in the holder's pool, so the accounting counts distinct block
 * ids: evicting a root frees only the blocks no other root holds, and
 * roots go least recently used first, never one in use (a root is in use
 * while a request or a prefill forked from it holds a reference) — a
 * prefix shared by recent roots outlives its older leaves.
 *
 * Placement of a prefill with a cached prefix (the documented rule): the
 * prefix's holder, unless it is overloaded — its load (samples decoding
 * + 8 per outstanding prefill/export/import) exceeds the least loaded
 * usable worker's by more than ROOTS_BLOCK_WORTH per full block the
 * prefix saves — or cannot make room; then a fresh prefill on the least
 * loaded worker. Only ready roots are bases; a prompt whose longest
 * shared prefix is still being prefilled — at least 4 blocks and half its
 * tokens, as few-shot examples are — waits for it (queued) instead of
 * prefilling it again; a shorter one (a system prompt) does not wait.
 *
 * Cross-host copies (replica): a host label without the root gets it
 * once, into one of its workers' pools, in chunks (quorum.proto
 * ExportRoot): the holder sends as many whole blocks as fit one message
 * (wire_root_chunk_bytes), we forward them to the importer, which builds
 * a partial root on top of the previous chunk's (or of a delta's base, a
 * root on that host sharing the prompt's first blocks); only then is the
 * next chunk asked for — one in flight per copy, so no queue grows and
 * heartbeats pass between chunks. The partial roots are Released as the
 * next one replaces them; the last chunk brings the logits and makes the
 * copy usable. The importer's pool is charged the whole copy from the
 * first chunk on. A chunk is checked before it is forwarded (where it
 * starts and ends, its logits, whole rows): a bad one fails the copy,
 * and whatever ends a copy half way — a bad chunk, an error, the holder
 * or the importer lost, the root dropped — releases what it built.
 *
 * Privacy: with CURVE on and prefix_cache.share_across_clients false, a
 * request reuses (whole or in part) only roots its own client key
 * created, so neither its reply's reuse counts nor its latency tell it
 * what another client asked. A request with Ask.prefix_cache false
 * neither reuses nor leaves a root for others. */
#include "sched_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer/kv.h"
#include "sc/pfx.h"
#include "text/prompt.h"
#include "qerr.h"
#include "sc/vote.h"

/* Load units one saved block of prefill is worth (placement rule). */
#define ROOTS_BLOCK_WORTH 2
/* A prompt waits for a root still being prefilled that shares at least
 * this many blocks and most of its tokens (module comment). */
#define ROOTS_WAIT_BLOCKS 4

static void rep_unbase(sched *s, replica *rp, int drop);

static void entry_free(sched *s, entry *e)
{
	if (e->indexed)
		pfx_remove(s->index, e, e->tokens, e->n_tokens);
	for (int i = 0; i < e->n_reps; i++) {
		rep_unbase(s, &e->reps[i], 0);
		free(e->reps[i].blocks);
	}
	free(e->reps);
	free(e->tokens);
	free(e->blocks);
	free(e->logits);
	free(e);
}

/* e no longer needs its base (ready, dead or dropped): the ref goes. */
static void entry_unbase(sched *s, entry *e)
{
	entry *b = e->base;

	if (b) {
		e->base = NULL;
		roots_unref(s, b);
	}
}

/* A replica no longer needs the root its delta starts from. drop 0: only
 * the ref count (the caller walks the entry list). */
static void rep_unbase(sched *s, replica *rp, int drop)
{
	entry *b = rp->base;

	if (!b)
		return;
	rp->base = NULL;
	if (drop)
		roots_unref(s, b);
	else
		b->refs--;
}

/* A transfer under way: its importer releases the partial root it
 * holds (the first rp->at tokens), if any. */
static void rep_drop_part(sched *s, replica *rp)
{
	if (!rp->has_part)
		return;
	rp->has_part = 0;
	sched_send_release(s, rp->worker, rp->part_root);
}

/* Removes replica i of e. */
static void rep_remove(sched *s, entry *e, int i, int drop)
{
	replica gone = e->reps[i];

	e->reps[i] = e->reps[--e->n_reps];
	e->rep_gen++;
	free(gone.blocks);
	rep_unbase(s, &gone, drop); /* last: e may go with it */
}

/* Unlinks e, releasing its roots on the workers that still hold them. */
static void entry_drop(sched *s, entry *e)
{
	entry **pp = &s->entries;

	while (*pp && *pp != e)
		pp = &(*pp)->next;
	if (*pp)
		*pp = e->next;
	if (e->state == E_READY)
		sched_send_release(s, e->worker, e->root_id);
	for (int i = 0; i < e->n_reps; i++)
		if (e->reps[i].state == R_READY)
			sched_send_release(s, e->reps[i].worker, e->reps[i].root_id);
		else /* a transfer under way: its chunk in flight, if any, is
		      * Released when it arrives (no entry) */
			rep_drop_part(s, &e->reps[i]);
	entry_unbase(s, e);
	entry_free(s, e);
}

static void evict(sched *s)
{
	int cap = s->c->prefix_cache.entries;

	for (;;) {
		entry *old = NULL;
		int n = 0;

		for (entry *e = s->entries; e; e = e->next) {
			if (e->state != E_READY)
				continue;
			n++;
			if (!e->refs && (!old || e->last_used < old->last_used))
				old = e;
		}
		if (n <= cap || !old)
			return;
		entry_drop(s, old);
	}
}

void roots_unref(sched *s, entry *e)
{
	if (--e->refs > 0)
		return;
	e->last_used = sched_now(s);
	/* a prefill still running is dropped: its PrefixReady will find no
	 * entry and be Released */
	if (e->state != E_READY || s->c->prefix_cache.entries == 0 ||
	    e->private_)
		entry_drop(s, e);
	else
		evict(s);
}

entry *roots_by_id(const sched *s, uint64_t id)
{
	for (entry *e = s->entries; e; e = e->next)
		if (e->id == id)
			return e;
	return NULL;
}

/* The distinct blocks cached roots and replicas hold, per worker: an
 * open-addressing set of (worker, block) with whether a holder is in use,
 * filled in one pass (linear in the blocks held; a sort was the
 * scheduler's hottest spot with many hosts' replicas). */
typedef struct {
	uint64_t *t;  /* 0 empty, else ((worker << 24 | block) + 1) << 1 | busy */
	size_t mask;
	uint64_t *used, *idle;
} block_set;

static void block_add(block_set *bs, int w, uint32_t b, int busy)
{
	uint64_t id = (((uint64_t)w << 24) | (b & KV_BLOCK_MASK)) + 1;
	size_t h = (size_t)((id * 0x9e3779b97f4a7c15ull) >> 20) & bs->mask;

	for (;; h = (h + 1) & bs->mask) {
		if (!bs->t[h]) {
			bs->t[h] = id << 1 | (busy != 0);
			bs->used[w]++;
			bs->idle[w] += !busy;
			return;
		}
		if (bs->t[h] >> 1 == id) {
			if (busy && !(bs->t[h] & 1)) {
				bs->t[h] |= 1; /* no longer evictable */
				bs->idle[w]--;
			}
			return;
		}
	}
}

/* A worker index of the table, or -1. */
static int wslot(const sched *s, int wi)
{
	return wi >= 0 && wi < s->n_workers ? wi : -1;
}

/* The blocks of every pool (only wi's when wi >= 0) that roots hold or
 * will take: used[w], and idle[w], those only unused ready roots hold
 * (evicting them all frees them). Roots forked from one another share
 * block ids in their holder's pool, so ready roots and replicas count
 * their distinct ids; a prefill under way counts the blocks it adds to
 * its base's, an import its whole root; decode jobs their worst-case
 * tails. One pass over roots (into a block_set), one over jobs. Without
 * memory for the set: per-root sums (used over-counted). */
static void account(const sched *s, int only, uint64_t *used,
		    uint64_t *idle)
{
	size_t cap = 0;
	block_set bs = {NULL, 0, used, idle}, *v = &bs;

	for (const entry *e = s->entries; e; e = e->next) {
		if (e->state == E_READY && (only < 0 || e->worker == only))
			cap += e->n_blocks;
		for (int i = 0; i < e->n_reps; i++)
			if (e->reps[i].state == R_READY &&
			    (only < 0 || e->reps[i].worker == only))
				cap += e->reps[i].n_blocks;
	}
	for (bs.mask = 15; bs.mask + 1 < 2 * cap; bs.mask = bs.mask << 1 | 1)
		;
	if (!cap || !(bs.t = calloc(bs.mask + 1, sizeof(*bs.t))))
		v = NULL;
	for (const entry *e = s->entries; e; e = e->next) {
		uint64_t nb = sched_blocks_for(s, e->n_tokens);
		int h = wslot(s, e->worker), busy = e->refs > 0;

		if (h >= 0 && (only < 0 || h == only)) {
			if (e->state == E_PREFILL)
				used[h] += nb - sched_blocks_for(
					s, e->base ? e->base_tokens : 0);
			else if (e->state == E_READY && !v) {
				used[h] += e->n_blocks;
				idle[h] += busy ? 0 : e->n_blocks;
			}
			for (uint32_t b = 0; v && e->state == E_READY &&
					     b < e->n_blocks; b++)
				block_add(v, h, e->blocks[b], busy);
		}
		for (int i = 0; i < e->n_reps; i++) {
			const replica *rp = &e->reps[i];
			int wi = wslot(s, rp->worker);

			if (wi < 0 || (only >= 0 && wi != only))
				continue;
			/* a transfer under way (wi: its importer) takes the
			 * whole copy from its first chunk on — the partial
			 * roots it builds share their blocks — and a delta
			 * adds its rest to its base's */
			if (rp->state == R_IMPORT || rp->state == R_EXPORT)
				used[wi] += nb - sched_blocks_for(s, rp->from);
			else if (rp->state == R_READY && !v) {
				used[wi] += rp->n_blocks;
				idle[wi] += busy ? 0 : rp->n_blocks;
			}
			for (uint32_t b = 0; v && rp->state == R_READY &&
					     b < rp->n_blocks; b++)
				block_add(v, wi, rp->blocks[b], busy);
		}
	}
	free(bs.t);
	for (const req *r = s->reqs; r; r = r->next) {
		uint64_t tail = sched_tail_blocks(s, r);

		for (const job *j = r->jobs; j; j = j->next)
			if (wslot(s, j->worker) >= 0 &&
			    (only < 0 || j->worker == only))
				used[j->worker] +=
					(uint64_t)(j->n - j->n_done) * tail;
	}
}

uint64_t roots_committed(const sched *s, int wi)
{
	uint64_t used[MAX_WORKERS], idle[MAX_WORKERS];

	if (wslot(s, wi) < 0)
		return 0;
	used[wi] = idle[wi] = 0;
	account(s, wi, used, idle);
	return used[wi];
}

static uint64_t free_of(const sched *s, int wi)
{
	uint64_t c = roots_committed(s, wi);

	return c < s->w[wi].pool_blocks ? s->w[wi].pool_blocks - c : 0;
}

/* 1 when e has a copy on wi (its root or a replica). */
static int has_copy(const entry *e, int wi)
{
	if (e->worker == wi && e->state == E_READY)
		return 1;
	for (int i = 0; i < e->n_reps; i++)
		if (e->reps[i].worker == wi && e->reps[i].state == R_READY)
			return 1;
	return 0;
}

void roots_room_all(const sched *s, uint64_t *free_blocks, uint64_t *room)
{
	uint64_t used[MAX_WORKERS] = {0}, idle[MAX_WORKERS] = {0};

	account(s, -1, used, idle);
	for (int i = 0; i < s->n_workers; i++) {
		uint64_t f = used[i] < s->w[i].pool_blocks
				     ? s->w[i].pool_blocks - used[i] : 0;

		if (free_blocks)
			free_blocks[i] = f;
		room[i] = f + idle[i];
	}
}

int roots_make_room(sched *s, int wi, uint64_t need)
{
	while (free_of(s, wi) < need) {
		entry *old = NULL;

		for (entry *e = s->entries; e; e = e->next)
			if (!e->refs && e->state == E_READY &&
			    has_copy(e, wi) &&
			    (!old || e->last_used < old->last_used))
				old = e;
		if (!old)
			return 0;
		entry_drop(s, old);
	}
	return 1;
}

uint32_t roots_largest_pool(const sched *s)
{
	uint32_t m = 0;

	for (int i = 0; i < s->n_workers; i++)
		if (members_usable(s, i) && s->w[i].pool_blocks > m)
			m = s->w[i].pool_blocks;
	return m;
}

/* The worker to prefill a root of need blocks on: the least loaded one
 * with that many free blocks, else the least loaded one where evicting
 * unused cached roots makes room (they are evicted); -1 when none can
 * now. */
static int place(sched *s, uint64_t need)
{
	int best = -1, fit = 0;
	uint64_t bl = 0, avail[MAX_WORKERS], room[MAX_WORKERS];

	roots_room_all(s, avail, room);
	for (int i = 0; i < s->n_workers; i++) {
		const worker *w = &s->w[i];
		uint64_t load;
		int f;

		if (!members_usable(s, i))
			continue;
		f = avail[i] >= need;
		if (!f && room[i] < need)
			continue;
		load = (uint64_t)w->busy + 8ull * w->ops;
		if (best < 0 || f > fit || (f == fit && load < bl)) {
			best = i;
			bl = load;
			fit = f;
		}
	}
	if (best >= 0 && !fit && !roots_make_room(s, best, need))
		return -1;
	return best;
}

static void send_prefill(sched *s, entry *e)
{
	Quorum__CoordMsg m = QUORUM__COORD_MSG__INIT;
	Quorum__Prefill p = QUORUM__PREFILL__INIT;

	p.request_id = e->id;
	p.attempt = e->op;
	p.n_tokens = e->n_tokens;
	p.tokens = (uint32_t *)e->tokens;
	if (e->base) {
		p.has_base_root_id = p.has_base_tokens = 1;
		p.base_root_id = e->base->root_id;
		p.base_tokens = e->base_tokens;
	}
	m.body_case = QUORUM__COORD_MSG__BODY_PREFILL;
	m.prefill = &p;
	s->w[e->worker].ops++;
	sched_send_worker(s, e->worker, &m);
}

/* r may use e's KV: the cache is on for both, and their clients may share
 * (module comment: privacy). */
static int may_share(const sched *s, const entry *e, const req *r)
{
	if (r->no_cache || e->private_ || e->state == E_DEAD)
		return 0;
	return !s->zap || s->c->prefix_cache.share_across_clients ||
	       !strcmp(e->key, r->key);
}

static uint64_t load_of(const sched *s, int wi)
{
	return (uint64_t)s->w[wi].busy + 8ull * s->w[wi].ops;
}

/* pfx_longest's visitor: the longest prefix among ready roots on usable
 * workers (ties: the least loaded holder), and among roots still being
 * prefilled. */
typedef struct {
	const sched *s;
	const req *r;
	entry *ready;
	size_t ready_len, pending_len;
} best_prefix;

static int visit_prefix(void *arg, void *owner, size_t shared)
{
	best_prefix *b = arg;
	entry *e = owner;

	if (!may_share(b->s, e, b->r) || e->no_base ||
	    !members_usable(b->s, e->worker))
		return 0;
	if (e->state == E_PREFILL) {
		b->pending_len = shared;
		return 1;
	}
	if (e->state != E_READY)
		return 0;
	if (!b->ready || shared > b->ready_len ||
	    load_of(b->s, e->worker) < load_of(b->s, b->ready->worker)) {
		b->ready = e;
		b->ready_len = shared;
	}
	return 1;
}

/* The prefix of r to start from: a ready root sharing its longest
 * block-aligned prefix (*shared tokens, at most n - 1 so one is left to
 * prefill), NULL when none. *wait: a root being prefilled shares a longer
 * prefix that is most of the prompt and at least ROOTS_WAIT_BLOCKS
 * blocks: r waits for it rather than prefilling it again. */
static entry *find_base(sched *s, const req *r, uint32_t *shared, int *wait)
{
	uint64_t B = (uint64_t)s->c->kv.block_tokens;
	size_t cap = (r->n_tokens - 1) / B * B;
	best_prefix b = {s, r, NULL, 0, 0};

	*shared = 0;
	pfx_longest(s->index, r->tokens, r->n_tokens, visit_prefix, &b, NULL);
	if (b.ready_len > cap)
		b.ready_len = cap;
	if (b.pending_len > cap)
		b.pending_len = cap;
	*wait = b.pending_len > b.ready_len &&
		b.pending_len >= ROOTS_WAIT_BLOCKS * B &&
		2 * b.pending_len >= r->n_tokens;
	if (*wait || !b.ready || !b.ready_len)
		return NULL;
	*shared = (uint32_t)b.ready_len;
	return b.ready;
}

/* The holder of base prefills r unless overloaded (module comment), with
 * room for the blocks it adds (evicting unused roots); 1 when it does. */
static int base_fits(sched *s, const entry *base, uint32_t shared,
		     uint64_t need)
{
	uint64_t least = UINT64_MAX, saved = sched_blocks_for(s, shared);
	int h = base->worker;

	for (int i = 0; i < s->n_workers; i++)
		if (members_usable(s, i) && load_of(s, i) < least)
			least = load_of(s, i);
	if (least != UINT64_MAX &&
	    load_of(s, h) > least + ROOTS_BLOCK_WORTH * saved)
		return 0;
	{
		uint64_t avail[MAX_WORKERS], room[MAX_WORKERS];

		roots_room_all(s, avail, room);
		return avail[h] >= need ||
		       (room[h] >= need && roots_make_room(s, h, need));
	}
}

/* Finds or starts the root of r; r moves to Q_ROOT or Q_DECODE. */
void roots_start(sched *s, req *r)
{
	entry *e = NULL, *base = NULL;
	uint32_t shared = 0;
	int wi = -1, cache = s->c->prefix_cache.entries > 0 && !r->no_cache;

	if (r->t_start == 0)
		r->t_start = sched_now(s);
	if (cache)
		for (e = s->entries; e; e = e->next)
			if (e->state != E_DEAD && e->hash == r->hash &&
			    e->n_tokens == r->n_tokens && may_share(s, e, r) &&
			    !memcmp(e->tokens, r->tokens,
				    r->n_tokens * sizeof(*r->tokens)))
				break;
	if (e) {
		s->hits++;
		r->cache_hit = 1;
		r->reused = (uint32_t)r->n_tokens;
		e->refs++;
		r->root = e;
		r->state = e->state == E_READY ? Q_DECODE : Q_ROOT;
		if (e->state == E_READY)
			snprintf(r->prefill_worker, sizeof(r->prefill_worker),
				 "%s", s->w[e->worker].id);
		return;
	}
	{
		/* the root plus one sample's tail: decoding may go elsewhere,
		 * but a cluster of one must fit both */
		uint64_t need = (uint64_t)sched_blocks_for(s, r->n_tokens) +
				sched_tail_blocks(s, r);
		uint32_t largest = roots_largest_pool(s);
		int wait = 0;

		if (largest && need > largest) {
			char why[160];

			snprintf(why, sizeof(why), "the prompt and one sample "
				 "need %llu KV blocks; the largest pool has %u",
				 (unsigned long long)need, largest);
			dispatch_req_fail(s, r,
					  QUORUM__STATUS__STATUS_NO_CAPACITY,
					  why);
			return;
		}
		if (cache && !(base = find_base(s, r, &shared, &wait)) &&
		    wait)
			return; /* stays queued: its prefix is on its way */
		if (base) {
			/* held while we may evict for room: never evicted */
			base->refs++;
			if (base_fits(s, base, shared,
				      need - sched_blocks_for(s, shared))) {
				wi = base->worker;
			} else {
				roots_unref(s, base);
				base = NULL;
				shared = 0;
			}
		}
		if (wi < 0 && (wi = place(s, need)) < 0)
			return; /* stays queued: no worker, or no room now */
	}
	if (!(e = calloc(1, sizeof(*e))) ||
	    !(e->tokens = malloc(r->n_tokens * sizeof(*e->tokens)))) {
		free(e);
		if (base)
			roots_unref(s, base);
		dispatch_req_fail(s, r, QUORUM__STATUS__STATUS_INTERNAL, "out of memory");
		return;
	}
	memcpy(e->tokens, r->tokens, r->n_tokens * sizeof(*e->tokens));
	e->n_tokens = r->n_tokens;
	e->hash = r->hash;
	e->id = ++s->next_id;
	e->op = (uint32_t)++s->next_id;
	e->state = E_PREFILL;
	e->worker = wi;
	e->refs = 1;
	e->base = base; /* its ref taken above */
	e->base_tokens = shared;
	e->private_ = !cache;
	snprintf(e->key, sizeof(e->key), "%s", r->key);
	e->next = s->entries;
	s->entries = e;
	/* indexed now, a base once ready (no memory: just not indexed) */
	if (cache && !pfx_add(s->index, e, e->tokens, e->n_tokens))
		e->indexed = 1;
	/* a miss of the cache (prefilled, partly from a base): once a
	 * request, and only for one that asked the cache (a bypassing one
	 * never could hit it; a prefill again after its worker was lost is
	 * the same miss) */
	if (cache && !r->prefills) {
		s->misses++;
		if (base)
			s->partial_hits++;
	}
	r->cache_hit = 0;
	r->reused = shared;
	r->prefilled += r->n_tokens - shared;
	r->root = e;
	r->state = Q_ROOT;
	r->prefills++;
	r->messages++;
	send_prefill(s, e);
}

/* The root a worker on host decodes from: the holder's (same host label)
 * or a ready replica; NULL when a transfer is needed or under way. */
int roots_ref_for(const sched *s, const entry *e, const worker *w,
		    Quorum__RootRef *ref)
{
	const worker *h = &s->w[e->worker];

	if (!strcmp(h->host, w->host)) {
		ref->worker_id = (char *)h->id;
		ref->host = (char *)h->host;
		ref->pool_name = (char *)h->pool;
		ref->root_id = e->root_id;
		ref->n_tokens = (uint32_t)e->n_tokens;
		ref->n_blocks = e->n_blocks;
		ref->blocks = e->blocks;
		return e->worker;
	}
	for (int i = 0; i < e->n_reps; i++) {
		const replica *rp = &e->reps[i];

		if (strcmp(rp->host, w->host) || rp->state != R_READY)
			continue;
		ref->worker_id = (char *)s->w[rp->worker].id;
		ref->host = (char *)rp->host;
		ref->pool_name = (char *)s->w[rp->worker].pool;
		ref->root_id = rp->root_id;
		ref->n_tokens = (uint32_t)e->n_tokens;
		ref->n_blocks = rp->n_blocks;
		ref->blocks = rp->blocks;
		return rp->worker;
	}
	return -1;
}

/* pfx_longest's visitor for a delta copy: the longest prefix of e held
 * by a ready root or replica on the replica's host (another entry). */
typedef struct {
	const sched *s;
	const req *r;
	const entry *e;
	const char *host;
	entry *best;
	int worker;
	uint32_t root;
	size_t len;
} delta_find;

static int visit_delta(void *arg, void *owner, size_t shared)
{
	delta_find *d = arg;
	entry *x = owner;
	int ok = 0;

	if (x == d->e || x->state != E_READY || !may_share(d->s, x, d->r))
		return 0;
	if (members_usable(d->s, x->worker) &&
	    !strcmp(d->s->w[x->worker].host, d->host)) {
		d->best = x;
		d->worker = x->worker;
		d->root = x->root_id;
		d->len = shared;
		ok = 1;
	}
	for (int i = 0; !ok && i < x->n_reps; i++) {
		const replica *rp = &x->reps[i];

		if (rp->state == R_READY && members_usable(d->s, rp->worker) &&
		    !strcmp(rp->host, d->host)) {
			d->best = x;
			d->worker = rp->worker;
			d->root = rp->root_id;
			d->len = shared;
			ok = 1;
		}
	}
	return ok;
}

/* A root on rp's host sharing e's longest block-aligned prefix (less
 * than all of it): rp becomes a delta copy from it (a ref held). */
static void delta_base(sched *s, const req *r, entry *e, replica *rp)
{
	uint64_t B = (uint64_t)s->c->kv.block_tokens;
	size_t cap = (e->n_tokens - 1) / B * B;
	delta_find d = {s, r, e, rp->host, NULL, -1, 0, 0};

	if (s->c->prefix_cache.entries == 0 || r->no_cache)
		return;
	pfx_longest(s->index, e->tokens, e->n_tokens, visit_delta, &d, NULL);
	if (d.len > cap)
		d.len = cap;
	if (!d.best || !d.len)
		return;
	rp->base = d.best;
	d.best->refs++;
	rp->base_worker = d.worker;
	rp->base_root = d.root;
	rp->from = (uint32_t)d.len;
}

/* Asks e's holder for the next chunk of rp's transfer: the rows from
 * rp->at, as many whole blocks as fit one message (wire.h). */
static void send_export(sched *s, entry *e, replica *rp)
{
	Quorum__CoordMsg m = QUORUM__COORD_MSG__INIT;
	Quorum__ExportRoot x = QUORUM__EXPORT_ROOT__INIT;

	x.request_id = e->id;
	x.attempt = rp->op;
	x.root_id = e->root_id;
	if (rp->at) {
		x.has_from_tokens = 1;
		x.from_tokens = rp->at;
	}
	x.has_chunk_bytes = 1;
	x.chunk_bytes = (uint64_t)wire_root_chunk_bytes(
		s->c->limits.max_message_bytes, s->vocab);
	m.body_case = QUORUM__COORD_MSG__BODY_EXPORT_ROOT;
	m.export_root = &x;
	rp->state = R_EXPORT;
	rp->step_at = sched_now(s);
	s->w[e->worker].ops++;
	sched_send_worker(s, e->worker, &m);
}

/* Starts a transfer of e to host unless one is under way. */
void roots_want_replica(sched *s, req *r, entry *e, const char *host)
{
	replica *nr, *rp;

	for (int i = 0; i < e->n_reps; i++)
		if (!strcmp(e->reps[i].host, host))
			return;
	if (!(nr = realloc(e->reps, (size_t)(e->n_reps + 1) * sizeof(*nr))))
		return;
	e->reps = nr;
	e->rep_gen++;
	rp = &e->reps[e->n_reps++];
	memset(rp, 0, sizeof(*rp));
	snprintf(rp->host, sizeof(rp->host), "%s", host);
	rp->state = R_EXPORT;
	rp->worker = -1;
	rp->base_worker = -1;
	rp->op = (uint32_t)++s->next_id;
	rp->for_rid = r->rid;
	delta_base(s, r, e, rp);
	rp->at = rp->from;
	r->messages++;
	send_export(s, e, rp);
}

/* A copy of e cannot reach host (too large, import failed): that host's
 * workers do not decode from e. */
int roots_transfer_failed(const entry *e, const char *host)
{
	for (int i = 0; i < e->n_reps; i++)
		if (e->reps[i].state == R_FAILED && !strcmp(e->reps[i].host, host))
			return 1;
	return 0;
}

/* 1 when every block id is one of wi's own pool (no other pool's slot,
 * below its registered size): a worker's root lives in its own pool. */
static int own_blocks(const sched *s, int wi, const uint32_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (b[i] >= s->w[wi].pool_blocks || b[i] > KV_BLOCK_MASK)
			return 0;
	return 1;
}

void roots_on_prefix_ready(sched *s, int wi, const Quorum__PrefixReady *p)
{
	entry *e = roots_by_id(s, p->request_id);
	worker *w = &s->w[wi];

	if (w->ops)
		w->ops--;
	if (!e || e->state != E_PREFILL || e->op != p->attempt ||
	    e->worker != wi) {
		sched_stray(s, wi, "PrefixReady", p->request_id, p->attempt,
			    s->next_id);
		sched_send_release(s, wi, p->root_id); /* nobody wants it now */
		return;
	}
	if (p->n_tokens != e->n_tokens ||
	    p->n_blocks != sched_blocks_for(s, e->n_tokens) ||
	    !own_blocks(s, wi, p->blocks, p->n_blocks) ||
	    (e->base && (!p->has_reused_tokens ||
			 p->reused_tokens != e->base_tokens)) ||
	    p->logits.len != (size_t)s->vocab * sizeof(float) ||
	    !p->pool_name || strcmp(p->pool_name, w->pool) ||
	    !(e->blocks = malloc(p->n_blocks * sizeof(*e->blocks) + 1)) ||
	    !(e->logits = malloc(p->logits.len))) {
		fprintf(stderr, "coordinator: worker %s: bad PrefixReady\n",
			w->id);
		sched_send_release(s, wi, p->root_id);
		e->state = E_DEAD;
		if (e->base)
			e->base->no_base = 1;
		entry_unbase(s, e);
		return;
	}
	memcpy(e->blocks, p->blocks, p->n_blocks * sizeof(*e->blocks));
	memcpy(e->logits, p->logits.data, p->logits.len);
	e->logits_len = p->logits.len;
	e->n_blocks = (uint32_t)p->n_blocks;
	e->root_id = p->root_id;
	e->prefill_ms = p->has_prefill_ms ? p->prefill_ms : 0;
	e->state = E_READY;
	/* its blocks are its own references now: the base may go */
	entry_unbase(s, e);
	for (req *r = s->reqs; r; r = r->next)
		if (r->root == e) {
			r->messages++;
			if (r->state == Q_ROOT) {
				r->state = Q_DECODE;
				if (!r->cache_hit)
					r->prefill_ms = e->prefill_ms;
				snprintf(r->prefill_worker,
					 sizeof(r->prefill_worker), "%s", w->id);
			}
		}
}

static replica *replica_by_op(entry *e, uint32_t op)
{
	for (int i = 0; e && i < e->n_reps; i++)
		if (e->reps[i].op == op)
			return &e->reps[i];
	return NULL;
}

/* A copy of e cannot reach rp's host (an export or import failed, a bad
 * chunk): kept as R_FAILED, so that host's jobs go elsewhere; what the
 * transfer built is released. */
static void rep_fail(sched *s, entry *e, replica *rp)
{
	rep_drop_part(s, rp);
	rp->state = R_FAILED;
	rp->worker = -1;
	e->rep_gen++;
	for (req *r = s->reqs; r; r = r->next) {
		if (r->root != e)
			continue;
		for (job *j = r->jobs, *nx; j; j = nx) {
			nx = j->next;
			if (j->state == J_WAIT_ROOT &&
			    !strcmp(s->w[j->worker].host, rp->host))
				dispatch_job_drop(s, r, j);
		}
	}
	rep_unbase(s, rp, 1); /* last: e may go with it */
}

/* What is wrong with chunk d of rp's transfer of e (NULL: nothing): it
 * starts where the importer's partial root ends, ends inside the root —
 * on a block boundary unless it is the last — carries the logits only
 * when it is the last, and whole rows (the importer checks their size
 * exactly). */
static const char *chunk_check(const sched *s, const entry *e,
			       const replica *rp, const Quorum__RootData *d)
{
	uint32_t end = d->n_tokens;
	int partial = d->has_partial && d->partial;

	if ((d->has_from_tokens ? d->from_tokens : 0) != rp->at)
		return "chunk does not start where the last one ended";
	if (end <= rp->at || end > e->n_tokens)
		return "chunk ends outside the root";
	if (partial != (end < e->n_tokens))
		return "partial flag disagrees with the chunk's end";
	if (partial && (end % (uint32_t)s->c->kv.block_tokens ||
			d->logits.len))
		return "partial chunk off a block boundary or with logits";
	if (!partial && d->logits.len != (size_t)s->vocab * sizeof(float))
		return "bad logits";
	if (!d->kv.len || d->kv.len % (end - rp->at))
		return "kv is not whole rows";
	return NULL;
}

/* A chunk of a transfer from e's holder: forwarded to the importer (one
 * on rp's host, chosen with the first chunk). */
void roots_on_root_data(sched *s, int wi, Quorum__RootData *d)
{
	Quorum__CoordMsg m = QUORUM__COORD_MSG__INIT;
	entry *e = roots_by_id(s, d->request_id);
	replica *rp = replica_by_op(e, d->attempt);
	const char *bad;
	req *r;
	int imp = rp ? rp->worker : -1;

	if (s->w[wi].ops)
		s->w[wi].ops--;
	if (!rp || rp->state != R_EXPORT || e->worker != wi) {
		/* stale, or not this worker's to send */
		sched_stray(s, wi, "RootData", d->request_id, d->attempt,
			    s->next_id);
		return;
	}
	if ((bad = chunk_check(s, e, rp, d))) {
		fprintf(stderr, "coordinator: worker %s: bad RootData: %s\n",
			s->w[wi].id, bad);
		rep_fail(s, e, rp);
		return;
	}
	/* a delta: the worker holding its base imports it, if still there */
	if (imp < 0 && rp->from && members_usable(s, rp->base_worker))
		imp = rp->base_worker;
	/* the importer: a worker on that host with a job waiting, else any */
	for (req *q = s->reqs; !rp->from && q && imp < 0; q = q->next)
		for (job *j = q->jobs; q->root == e && j; j = j->next)
			if (j->state == J_WAIT_ROOT &&
			    !strcmp(s->w[j->worker].host, rp->host)) {
				imp = j->worker;
				break;
			}
	for (int i = 0; !rp->from && imp < 0 && i < s->n_workers; i++)
		if (s->w[i].used && !s->w[i].dead &&
		    !strcmp(s->w[i].host, rp->host))
			imp = i;
	if (imp < 0) {
		rep_remove(s, e, (int)(rp - e->reps), 1);
		return;
	}
	rp->worker = imp;
	rp->state = R_IMPORT;
	rp->step_at = sched_now(s);
	rp->chunk_end = d->n_tokens;
	/* on top of the partial root of the chunks so far, or of the
	 * delta's base */
	if (rp->at) {
		d->has_base_root_id = 1;
		d->base_root_id = rp->has_part ? rp->part_root : rp->base_root;
	}
	if ((r = dispatch_req_by_rid(s, rp->for_rid))) {
		r->blocks_transferred += sched_blocks_for(s, d->n_tokens) -
					 rp->at / s->c->kv.block_tokens;
		r->bytes_transferred += d->kv.len;
		r->messages += 2;
	}
	m.body_case = QUORUM__COORD_MSG__BODY_IMPORT_ROOT;
	m.import_root = d;
	s->w[imp].ops++;
	sched_send_worker(s, imp, &m);
}

/* The importer made a root of the chunk: a partial one is the base of
 * the next chunk (the one before it is released); the last makes the
 * copy usable. */
void roots_on_imported(sched *s, int wi, const Quorum__ImportedRoot *x)
{
	entry *e = roots_by_id(s, x->request_id);
	replica *rp = replica_by_op(e, x->attempt);
	req *r;

	if (s->w[wi].ops)
		s->w[wi].ops--;
	if (!rp || rp->state != R_IMPORT || rp->worker != wi) {
		sched_send_release(s, wi, x->root_id);
		return;
	}
	if (x->n_tokens != rp->chunk_end ||
	    x->n_blocks != sched_blocks_for(s, rp->chunk_end) ||
	    !own_blocks(s, wi, x->blocks, x->n_blocks) ||
	    !x->pool_name || strcmp(x->pool_name, s->w[wi].pool) ||
	    (rp->chunk_end == e->n_tokens &&
	     !(rp->blocks = malloc(x->n_blocks * sizeof(*rp->blocks) + 1)))) {
		fprintf(stderr, "coordinator: worker %s: bad ImportedRoot\n",
			s->w[wi].id);
		sched_send_release(s, wi, x->root_id);
		rep_drop_part(s, rp);
		rep_remove(s, e, (int)(rp - e->reps), 1);
		return;
	}
	r = dispatch_req_by_rid(s, rp->for_rid);
	if (r)
		r->messages += 1 + rp->has_part;
	/* the new root holds the blocks of the one before it */
	rep_drop_part(s, rp);
	if (rp->chunk_end < e->n_tokens) {
		rp->part_root = x->root_id;
		rp->has_part = 1;
		rp->at = rp->chunk_end;
		if (r)
			r->messages++;
		send_export(s, e, rp);
		return;
	}
	memcpy(rp->blocks, x->blocks, x->n_blocks * sizeof(*rp->blocks));
	rp->n_blocks = (uint32_t)x->n_blocks;
	rp->root_id = x->root_id;
	rp->state = R_READY;
	e->rep_gen++;
	/* its blocks are its own references now (last: e may go with it) */
	rep_unbase(s, rp, 1);
}

void roots_on_error(sched *s, int wi, const Quorum__WorkerError *x)
{
	entry *e = x->has_request_id ? roots_by_id(s, x->request_id) : NULL;
	replica *rp;

	fprintf(stderr, "coordinator: worker %s: %s: %s\n", s->w[wi].id,
		wire_status_name(x->status), x->error ? x->error : "");
	if (!e || !x->has_attempt)
		return;
	if (e->state == E_PREFILL && e->op == x->attempt && e->worker == wi) {
		int fatal = x->status == QUORUM__STATUS__STATUS_TOO_LONG ||
			    x->status == QUORUM__STATUS__STATUS_BAD_REQUEST;

		if (s->w[wi].ops)
			s->w[wi].ops--;
		e->state = E_DEAD; /* pump() queues its requests again */
		/* a prefill from a base that failed: the next try prefills
		 * from scratch (the worker and we disagree about that root) */
		if (e->base)
			e->base->no_base = 1;
		entry_unbase(s, e);
		/* a full pool (our accounting and the worker's differ) or a
		 * cancel is no fault of the request: not charged; room is
		 * made on that worker for the next try */
		e->no_room = x->status == QUORUM__STATUS__STATUS_NO_CAPACITY ||
			     x->status == QUORUM__STATUS__STATUS_CANCELLED;
		if (x->status == QUORUM__STATUS__STATUS_NO_CAPACITY)
			roots_make_room(s, wi, s->w[wi].pool_blocks);
		for (req *r = s->reqs, *nx; fatal && r; r = nx) {
			nx = r->next;
			if (r->root == e)
				dispatch_req_fail(s, r, x->status, x->error ? x->error
							: "prefill failed");
		}
		return;
	}
	/* an export (by the holder) or an import (by the importer) of this
	 * worker's own; errors about anything else are not its to report */
	if ((rp = replica_by_op(e, x->attempt)) &&
	    ((rp->state == R_EXPORT && e->worker == wi) ||
	     (rp->state == R_IMPORT && rp->worker == wi))) {
		if (s->w[wi].ops)
			s->w[wi].ops--;
		rep_fail(s, e, rp);
	}
}

void roots_tick(sched *s)
{
	int64_t now = sched_now(s), lim = s->c->limits.copy_step_timeout_ms;

again:
	for (entry *e = s->entries; e; e = e->next)
		for (int i = 0; i < e->n_reps; i++) {
			replica *rp = &e->reps[i];
			int wi = rp->state == R_EXPORT ? e->worker : rp->worker;

			if ((rp->state != R_EXPORT && rp->state != R_IMPORT) ||
			    now - rp->step_at <= lim)
				continue;
			fprintf(stderr, "coordinator: worker %s did not %s a "
				"chunk of a prompt's KV for host %s within "
				"%lld ms (limits.copy_step_timeout_ms): the "
				"copy failed, that host's samples go "
				"elsewhere\n", wi >= 0 ? s->w[wi].id : "?",
				rp->state == R_EXPORT ? "send" : "import",
				rp->host, (long long)lim);
			rep_fail(s, e, rp); /* e may be gone */
			goto again;
		}
}

/* Worker wi is gone: its roots die (their requests are queued again by
 * the pump), its replicas and the transfers it was a party to go (an
 * importer still there releases the partial root it built; a chunk in
 * flight is Released when it arrives). */
void roots_forget_worker(sched *s, int wi)
{
	/* prefills there from a base there: the base's ref goes (it dies
	 * below, with the worker) without dropping anything mid-walk */
	for (entry *e = s->entries; e; e = e->next)
		if (e->worker == wi && e->base) {
			e->base->refs--;
			e->base = NULL;
		}
	for (entry *e = s->entries, *nx; e; e = nx) {
		nx = e->next;
		for (int i = 0; i < e->n_reps; i++) {
			replica *rp = &e->reps[i];

			if (rp->worker != wi &&
			    !(e->worker == wi && (rp->state == R_EXPORT ||
						  rp->state == R_IMPORT)))
				continue;
			if (rp->worker != wi)
				rep_drop_part(s, rp);
			rep_remove(s, e, i--, 0);
		}
		if (e->worker == wi) {
			e->state = E_DEAD;
			e->worker = -1;
			if (!e->refs)
				entry_drop(s, e);
		}
	}
}

void roots_free_all(sched *s)
{
	while (s->entries) {
		entry *e = s->entries;

		s->entries = e->next;
		entry_free(s, e);
	}
}
