/* members — worker membership: registration, heartbeats both ways,
 * expiry and removal (sched_int.h). */
#include "sched_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qerr.h"
#include "net/poolname.h"

int members_find(const sched *s, const wire_msg *m)
{
	for (int i = 0; i < s->n_workers; i++)
		if (s->w[i].used && s->w[i].ident_len == m->id_len &&
		    !memcmp(s->w[i].ident, m->id, m->id_len))
			return i;
	return -1;
}

int members_alive(const sched *s)
{
	int n = 0;

	for (int i = 0; i < s->n_workers; i++)
		n += s->w[i].used && !s->w[i].dead;
	return n;
}

static int fenced(const sched *s, int wi)
{
	for (const zombie *z = s->zombies; z; z = z->next)
		if (!strcmp(z->pool, s->w[wi].pool))
			return 1;
	return 0;
}

int members_usable(const sched *s, int wi)
{
	return s->w[wi].used && !s->w[wi].dead && !fenced(s, wi);
}

int members_zombie_done(sched *s, int wi, uint64_t rid, uint32_t attempt)
{
	for (zombie **pp = &s->zombies; *pp; pp = &(*pp)->next) {
		zombie *z = *pp;

		if (z->worker == wi && z->rid == rid && z->attempt == attempt) {
			*pp = z->next;
			free(z);
			return 1;
		}
	}
	return 0;
}

/* The decoder wi is gone: it reads nothing any more. */
static void zombies_of_gone(sched *s, int wi)
{
	for (zombie **pp = &s->zombies; *pp;) {
		zombie *z = *pp;

		if (z->worker == wi) {
			*pp = z->next;
			free(z);
		} else {
			pp = &z->next;
		}
	}
}

/* No worker alive, and none can be expected soon: the grace (one
 * heartbeat expiry plus the first reconnect backoff, the time a worker
 * needs to re-register after a coordinator restart) has passed since
 * the start or since the last worker went. */
int members_none_expected(const sched *s)
{
	int64_t grace = (int64_t)s->c->heartbeat.interval_ms *
				s->c->heartbeat.liveness +
			s->c->heartbeat.reconnect_min_ms;
	int64_t since = s->no_worker_since > s->t_started ? s->no_worker_since
							  : s->t_started;

	return sched_now(s) - since > grace;
}

void members_reject(sched *s, const wire_msg *m, int status, const char *why)
{
	Quorum__CoordMsg c = QUORUM__COORD_MSG__INIT;
	Quorum__WorkerError e = QUORUM__WORKER_ERROR__INIT;

	e.status = status;
	e.error = (char *)why;
	c.version = WIRE_VERSION;
	c.body_case = QUORUM__COORD_MSG__BODY_REJECT;
	c.reject = &e;
	sched_send_raw(s, 1, m->id, m->id_len, &c.base);
}

/* Forgets worker wi: its jobs' indices go back to pending, its roots and
 * replicas are gone. */
void members_remove(sched *s, int wi, const char *why)
{
	worker *w = &s->w[wi];

	fprintf(stderr, "coordinator: worker %s (host %s) removed: %s\n",
		w->id, w->host, why);
	zombies_of_gone(s, wi);
	dispatch_forget_worker(s, wi);
	/* same-host peers may map its pool: they drop the mapping */
	for (int i = 0; w->pool[0] && i < s->n_workers; i++)
		if (i != wi && s->w[i].used && !s->w[i].dead &&
		    !strcmp(s->w[i].host, w->host)) {
			Quorum__CoordMsg m = QUORUM__COORD_MSG__INIT;
			Quorum__ForgetPool f = QUORUM__FORGET_POOL__INIT;

			f.pool_name = w->pool;
			m.body_case = QUORUM__COORD_MSG__BODY_FORGET_POOL;
			m.forget_pool = &f;
			sched_send_worker(s, i, &m);
		}
	roots_forget_worker(s, wi);
	memset(w, 0, sizeof(*w));
	while (s->n_workers && !s->w[s->n_workers - 1].used)
		s->n_workers--;
	/* requests whose root died are queued again by pump() */
}

/* Whether id is a registered worker's now. */
static int id_live(const sched *s, const char *id)
{
	for (int i = 0; i < s->n_workers; i++)
		if (s->w[i].used && !strcmp(s->w[i].id, id))
			return 1;
	return 0;
}

/* Binds id to CURVE key (an id belongs to the key it first registered
 * with). Without CURVE every key is "" and nothing is bound. At
 * BINDINGS_MAX the oldest binding of an id not registered now goes
 * first: ids that come and go (a pod's name each restart) cannot grow
 * the list without bound. 0, or -1 out of memory. */
static int bind_id(sched *s, const char *id, const char *key)
{
	binding *b;

	if (s->n_bindings >= BINDINGS_MAX) {
		/* the links in order, then the oldest first */
		binding **at[BINDINGS_MAX + 1]; /* 32 KiB */
		int n = 0;

		for (binding **pp = &s->bindings; *pp && n <= BINDINGS_MAX;
		     pp = &(*pp)->next)
			at[n++] = pp;
		while (n-- > 0)
			if (!id_live(s, (*at[n])->id)) {
				b = *at[n];
				*at[n] = b->next;
				free(b);
				s->n_bindings--;
				break;
			}
	}
	if (!(b = calloc(1, sizeof(*b))))
		return -1;
	snprintf(b->id, sizeof(b->id), "%s", id);
	snprintf(b->key, sizeof(b->key), "%s", key);
	b->next = s->bindings;
	s->bindings = b;
	s->n_bindings++;
	return 0;
}

void members_on_register(sched *s, const wire_msg *m, const Quorum__WorkerMsg *wm)
{
	const Quorum__Register *g = wm->register_;
	const binding *bound = NULL;
	int wi, prev;
	worker *w;

	if (!wire_name_ok(wm->worker_id, ID_MAX) ||
	    !wire_name_ok(g->host, HOST_MAX)) {
		members_reject(s, m, QUORUM__STATUS__STATUS_BAD_REQUEST,
		       "bad worker id or host label");
		return;
	}
	/* an id belongs to the key it first registered with */
	for (const binding *b = s->bindings; b; b = b->next)
		if (!strcmp(b->id, wm->worker_id))
			bound = b;
	if (bound && strcmp(bound->key, m->user)) {
		members_reject(s, m, QUORUM__STATUS__STATUS_BAD_REQUEST,
		       "worker id is bound to another CURVE key");
		return;
	}
	/* ... and, where security.worker_keys lists ids for a key, only
	 * those ids to it */
	if (s->zap && !curve_zap_id_allowed(s->zap, m->user, wm->worker_id)) {
		members_reject(s, m, QUORUM__STATUS__STATUS_BAD_REQUEST,
		       "worker id is not among the ids security.worker_keys "
		       "allows this CURVE key");
		return;
	}
	/* the pool is named after the id (poolname_ok) and unique */
	if (!g->pool_name || strlen(g->pool_name) >= POOL_MAX ||
	    !poolname_ok(g->pool_name, s->c->cluster.name,
			     wm->worker_id)) {
		members_reject(s, m, QUORUM__STATUS__STATUS_BAD_REQUEST,
		       "pool name is not /quorum-<cluster>@<id>@<12 hex>");
		return;
	}
	for (int i = 0; i < s->n_workers; i++)
		if (s->w[i].used && !strcmp(s->w[i].pool, g->pool_name) &&
		    strcmp(s->w[i].id, wm->worker_id)) {
			members_reject(s, m, QUORUM__STATUS__STATUS_BAD_REQUEST,
			       "pool name in use by another worker");
			return;
		}
	if (!g->has_pool_blocks || g->pool_blocks < 1) {
		members_reject(s, m, QUORUM__STATUS__STATUS_BAD_REQUEST,
		       "pool size missing");
		return;
	}
	if (s->have_fingerprint && g->model_fingerprint != s->fingerprint) {
		members_reject(s, m, QUORUM__STATUS__STATUS_BAD_REQUEST,
		       "model fingerprint differs from the cluster's model");
		return;
	}
	if (!g->has_vocab || g->vocab != s->vocab) {
		members_reject(s, m, QUORUM__STATUS__STATUS_BAD_REQUEST,
		       "vocabulary differs from the coordinator's tokenizer");
		return;
	}
	if (!g->has_block_tokens || !g->has_kv_dtype) {
		members_reject(s, m, QUORUM__STATUS__STATUS_BAD_REQUEST,
		       "KV block size or dtype missing");
		return;
	}
	if (g->block_tokens != (uint32_t)s->c->kv.block_tokens) {
		char why[128];

		snprintf(why, sizeof(why), "KV block size %u of the worker "
			 "differs from the config's kv.block_tokens %d",
			 g->block_tokens, s->c->kv.block_tokens);
		members_reject(s, m, QUORUM__STATUS__STATUS_BAD_REQUEST, why);
		return;
	}
	/* wire values are cfg_dtype's (= the pool's enum kv_dtype) */
	if (g->kv_dtype != (uint32_t)s->c->kv.dtype) {
		char why[128];

		snprintf(why, sizeof(why), "KV dtype %s of the worker differs "
			 "from the config's kv.dtype %s",
			 g->kv_dtype <= CFG_DTYPE_Q8_0
				 ? cfg_dtype_name((cfg_dtype)g->kv_dtype) : "?",
			 cfg_dtype_name(s->c->kv.dtype));
		members_reject(s, m, QUORUM__STATUS__STATUS_BAD_REQUEST, why);
		return;
	}
	/* the beats' pace both ends keep (absent: an older worker) */
	if ((g->has_heartbeat_interval_ms &&
	     g->heartbeat_interval_ms != (uint32_t)s->c->heartbeat.interval_ms) ||
	    (g->has_heartbeat_liveness &&
	     g->heartbeat_liveness != (uint32_t)s->c->heartbeat.liveness)) {
		int iv = g->has_heartbeat_interval_ms &&
			 g->heartbeat_interval_ms !=
				 (uint32_t)s->c->heartbeat.interval_ms;
		char why[192];

		snprintf(why, sizeof(why), "heartbeat.%s %u of the worker "
			 "differs from the config's %d",
			 iv ? "interval_ms" : "liveness",
			 iv ? g->heartbeat_interval_ms : g->heartbeat_liveness,
			 iv ? s->c->heartbeat.interval_ms
			    : s->c->heartbeat.liveness);
		members_reject(s, m, QUORUM__STATUS__STATUS_BAD_REQUEST, why);
		return;
	}
	if (g->slots < 1 || g->slots > 65536) {
		members_reject(s, m, QUORUM__STATUS__STATUS_BAD_REQUEST,
		       "slots out of range");
		return;
	}
	/* a re-registration (same connection or same id) replaces the old */
	if ((prev = members_find(s, m)) >= 0)
		members_remove(s, prev, "registered again");
	for (int i = 0; i < s->n_workers; i++)
		if (s->w[i].used && !strcmp(s->w[i].id, wm->worker_id)) {
			/* a restarted worker's new connection, or a second
			 * process with the id: the one replaced is told why
			 * (a live one stops, where it had registered again
			 * and displaced the other in turn, without end) */
			wire_msg old = {0};
			char why[256];

			memcpy(old.id, s->w[i].ident, s->w[i].ident_len);
			old.id_len = s->w[i].ident_len;
			snprintf(why, sizeof(why), "worker id %s registered "
				 "again from another connection (host %s, pid "
				 "%u): this one is replaced (worker ids must "
				 "be unique)", wm->worker_id, g->host, g->pid);
			members_reject(s, &old, QUORUM__STATUS__STATUS_BAD_REQUEST,
				       why);
			members_remove(s, i, "replaced by a new registration");
			break;
		}
	for (wi = 0; wi < MAX_WORKERS && s->w[wi].used; wi++)
		;
	if (wi == MAX_WORKERS) {
		members_reject(s, m, QUORUM__STATUS__STATUS_NO_CAPACITY,
		       "too many workers");
		return;
	}
	if (!s->have_fingerprint) {
		/* (no model file of our own to hash: the first one sets it) */
		s->fingerprint = g->model_fingerprint;
		s->have_fingerprint = 1;
	}
	if (!bound && m->user[0] && bind_id(s, wm->worker_id, m->user)) {
		members_reject(s, m, QUORUM__STATUS__STATUS_INTERNAL,
			       "out of memory");
		return;
	}
	w = &s->w[wi];
	memset(w, 0, sizeof(*w));
	w->used = 1;
	memcpy(w->ident, m->id, m->id_len);
	w->ident_len = m->id_len;
	snprintf(w->id, sizeof(w->id), "%s", wm->worker_id);
	snprintf(w->host, sizeof(w->host), "%s", g->host);
	snprintf(w->pool, sizeof(w->pool), "%s", g->pool_name);
	w->pid = g->pid;
	w->slots = g->slots;
	w->threads = g->has_threads ? g->threads : 0;
	w->blocks_free = g->pool_blocks;
	w->pool_blocks = g->pool_blocks;
	w->last_seen = sched_now(s);
	if (wi >= s->n_workers)
		s->n_workers = wi + 1;
	fprintf(stderr, "coordinator: worker %s registered (host %s, pid %u, "
		"%u slots, pool %s)\n", w->id, w->host, w->pid, w->slots,
		w->pool);
	{
		/* greet at once so the worker's liveness starts now */
		Quorum__CoordMsg c = QUORUM__COORD_MSG__INIT;
		Quorum__Heartbeat hb = QUORUM__HEARTBEAT__INIT;

		c.body_case = QUORUM__COORD_MSG__BODY_HEARTBEAT;
		c.heartbeat = &hb;
		sched_send_worker(s, wi, &c);
	}
	dispatch_pump(s);
}

/* Heartbeats that fall due; workers silent past liveness x interval (or
 * found unreachable) are removed. */
void members_tick(sched *s)
{
	int64_t now = sched_now(s);
	int64_t ttl = (int64_t)s->c->heartbeat.interval_ms *
		      s->c->heartbeat.liveness;

	if (now >= s->hb_at) {
		Quorum__CoordMsg m = QUORUM__COORD_MSG__INIT;
		Quorum__Heartbeat hb = QUORUM__HEARTBEAT__INIT;

		m.body_case = QUORUM__COORD_MSG__BODY_HEARTBEAT;
		m.heartbeat = &hb;
		for (int i = 0; i < s->n_workers; i++)
			if (s->w[i].used)
				sched_send_worker(s, i, &m);
		s->hb_at = now + s->c->heartbeat.interval_ms;
	}
	for (int i = 0; i < s->n_workers; i++)
		if (s->w[i].used && (s->w[i].dead || now - s->w[i].last_seen > ttl))
			members_remove(s, i, s->w[i].dead ? "unreachable"
							  : "heartbeat expired");
}
